// The ATT layer.
