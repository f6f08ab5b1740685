// A central in a few lines, the CoreBluetooth way: scan, connect, discover, read, write,
// subscribe, disconnect. Run it against `ble-hci controllers` + `ble-hci peripheral`:
//
//     ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 &
//     ble-hci -t tcp:127.0.0.1:9001 peripheral &
//     swift run example-central tcp:127.0.0.1:9002
import BLE

let spec = CommandLine.arguments.dropFirst().first ?? "hci0"
let central = try await Central.open(try TransportSpec(parsing: spec).open())

// scanForPeripherals(withServices: [fff0])
let adv = try await central.find(ScanFilter(services: [0xFFF0]), timeout: .seconds(10))
print("found \(adv.name ?? "?") at \(adv.address), RSSI \(adv.rssi ?? 0) dBm")

// connect(peripheral), then discoverServices / discoverCharacteristics
let peripheral = try await central.connect(to: adv.address)
print("ATT MTU \(try await peripheral.exchangeMTU())")
let service = try await peripheral.discoverServices(0xFFF0)[0]
let characteristics = try await peripheral.discoverCharacteristics(of: service)
let name = characteristics.first { $0.uuid == 0xFFF2 }!
let ticker = characteristics.first { $0.uuid == 0xFFF1 }!

// readValue(for:) and writeValue(_:for:type:)
print("fff2 = \(String(decoding: try await peripheral.read(name), as: UTF8.self))")
try await peripheral.write(Array("written by the example".utf8), to: name, type: .withResponse)
print("fff2 = \(String(decoding: try await peripheral.read(name), as: UTF8.self))")

// setNotifyValue(true, for:) → didUpdateValueFor, three times
var count = 0
for try await value in try await peripheral.notifications(for: ticker) {
    print("notification: \(String(decoding: value, as: UTF8.self))")
    count += 1
    if count == 3 { break }  // leaving the loop unsubscribes
}

// cancelPeripheralConnection(peripheral)
let reason = try await peripheral.disconnect()
print("disconnected: \(reason)")
await central.close()
