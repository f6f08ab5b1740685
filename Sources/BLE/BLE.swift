// The BLE layer.
