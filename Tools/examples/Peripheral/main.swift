// A peripheral in a few lines, the CoreBluetooth way: add a service, advertise, answer reads
// and writes (and refuse some), notify subscribers. Run it on one controller and talk to it
// with `ble-hci central` (or the central example) on another:
//
//     ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 &
//     swift run example-peripheral tcp:127.0.0.1:9001 &
//     ble-hci -t tcp:127.0.0.1:9002 central name:example --subscribe abc1 --count 3
import BLE

let spec = CommandLine.arguments.dropFirst().first ?? "hci0"

// peripheralManager.add(service): a counter to notify, a note to read and write, a secret.
let services = [
    GATTService(uuid: 0xABC0, characteristics: [
        GATTCharacteristic(uuid: 0xABC1, properties: [.read, .notify], value: [0]),
        GATTCharacteristic(uuid: 0xABC2, properties: [.read, .write], value: Array("hello".utf8),
                           descriptors: [.userDescription("note")]),
        // didReceiveRead: answered by the application, refusing with an ATT error.
        GATTCharacteristic(uuid: 0xABC3, properties: [.read], read: { _ in throw ATTError.rejecting(.insufficientAuthorization) }),
    ]),
]
let peripheral = try await Peripheral.open(try TransportSpec(parsing: spec).open(), services: services, name: "example")

// startAdvertising([CBAdvertisementDataLocalNameKey: "example", ServiceUUIDs: [abc0]])
try await peripheral.startAdvertising(AdvertisingOptions(name: "example", serviceUUIDs: [0xABC0]))
print("advertising as \"example\" on \(spec)")

// updateValue(_:for:onSubscribedCentrals:) once a second for whoever subscribed.
let counter = Task {
    var n: UInt8 = 0
    while !Task.isCancelled {
        n &+= 1
        _ = try? await peripheral.notify([n], for: 0xABC1)  // one octet fits every link
        try? await Task.sleep(for: .seconds(1))
    }
}

// The delegate callbacks, as one event stream.
for await event in peripheral.events {
    print(event)
}
counter.cancel()
