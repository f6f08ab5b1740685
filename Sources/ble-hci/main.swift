print("ble-hci")
