// The VirtualController layer.
