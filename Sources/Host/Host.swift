// The Host layer.
