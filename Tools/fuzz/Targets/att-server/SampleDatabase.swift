import HCI
import ATT
import GATT

/// A GATT database with every kind of attribute the server handles: 16- and 128-bit UUIDs,
/// a secondary included service, long and empty values, notify/indicate (CCCDs), protected
/// reads and writes, reliable writes (Extended Properties), a writable User Description and
/// values produced by the application.
func sampleServices() -> [GATTService] {
    let custom = BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!
    let secondary = BluetoothUUID(string: "12345678-1234-5678-1234-56789abcde00")!
    func custom128(_ last: UInt8) -> BluetoothUUID {
        BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef" + String(last, radix: 16))!
    }
    return [
        GATTService(uuid: secondary, primary: false, characteristics: [
            GATTCharacteristic(uuid: 0x2A19, properties: [.read], value: [100]),
        ]),
        GATTService(uuid: 0x180D, includes: [secondary], characteristics: [
            GATTCharacteristic(uuid: 0x2A37, properties: [.notify, .indicate], value: [0x00, 0x3c]),
            GATTCharacteristic(uuid: 0x2A38, properties: [.read], value: [1]),
            GATTCharacteristic(uuid: 0x2A39, properties: [.write], value: [], maximumLength: 1),
        ]),
        GATTService(uuid: custom, characteristics: [
            GATTCharacteristic(uuid: custom128(1), properties: [.read, .write, .extendedProperties],
                               value: (0..<600).map { UInt8($0 & 0xff) },
                               descriptors: [.extendedProperties(reliableWrite: true),
                                             .userDescription("long value", writable: true)]),
            GATTCharacteristic(uuid: custom128(2), properties: [.read, .writeWithoutResponse, .authenticatedSignedWrites], value: []),
            GATTCharacteristic(uuid: custom128(3), properties: [.read, .write],
                               permissions: [.readable, .writable, .readEncryptionRequired, .writeAuthenticationRequired],
                               value: [0x42], minimumKeySize: 16),
            GATTCharacteristic(uuid: custom128(4), properties: [.read, .write],
                               permissions: [.readable, .writable, .readAuthorizationRequired, .writeAuthorizationRequired],
                               value: [0x43]),
            GATTCharacteristic(uuid: custom128(5), properties: [.read, .write], read: { context in
                Array(repeating: UInt8(truncatingIfNeeded: context.offset), count: 300)
            }, write: { _, value in
                if value.first == 0xff { throw ATTError.rejecting(.valueNotAllowed) }
            }),
        ]),
    ]
}
