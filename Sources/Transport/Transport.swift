// The Transport layer.
