// The Capture layer.
