// The L2CAP layer.
