// The GATT layer.
