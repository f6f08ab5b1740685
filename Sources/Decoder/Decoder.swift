// The Decoder layer.
