import HCI
import ATT
import GATT

/// The `demo` profile of CLI.md: the peripheral of the tutorial.
///
/// | service | characteristic | properties | behaviour |
/// |---|---|---|---|
/// | fff0 | fff1 | notify | while subscribed, once a second: the current second as 2 ASCII digits; read → Read Not Permitted |
/// | fff0 | fff2 | read, write | starts as "ble-hci"; a write replaces it; User Description "name" |
/// | ffe0 | ffe1 | read | "read only"; write → Write Not Permitted |
public enum DemoProfile {
    public static let service: BluetoothUUID = 0xFFF0
    public static let ticker: BluetoothUUID = 0xFFF1
    public static let name: BluetoothUUID = 0xFFF2
    public static let readOnlyService: BluetoothUUID = 0xFFE0
    public static let readOnly: BluetoothUUID = 0xFFE1

    /// 16-bit services to advertise.
    public static let advertisedServices: [BluetoothUUID] = [service, readOnlyService]

    public static var services: [GATTService] {
        [
            GATTService(uuid: service, characteristics: [
                GATTCharacteristic(uuid: ticker, properties: [.notify]),
                GATTCharacteristic(uuid: name, properties: [.read, .write], value: Array("ble-hci".utf8),
                                   descriptors: [.userDescription("name")]),
            ]),
            GATTService(uuid: readOnlyService, characteristics: [
                GATTCharacteristic(uuid: readOnly, properties: [.read], value: Array("read only".utf8)),
            ]),
        ]
    }

    /// The value fff1 notifies: the current second of the minute as two ASCII digits.
    public static func tick(second: Int) -> [UInt8] {
        let s = ((second % 60) + 60) % 60
        return Array((s < 10 ? "0\(s)" : "\(s)").utf8)
    }
}

/// The `band` profile (docs/band.md): commands written to fee1, responses notified on fee2 in
/// chunks of at most 20 octets.
public enum BandProfile {
    public static let service: BluetoothUUID = 0xFEE0
    public static let command: BluetoothUUID = 0xFEE1
    public static let response: BluetoothUUID = 0xFEE2
    public static let advertisedServices: [BluetoothUUID] = [service]

    /// `respond` is called with each command frame's writer and the frame; the peripheral
    /// notifies the response's chunks to that peer.
    public static func services(respond: @escaping @Sendable (ATTPeer, [UInt8]) -> Void) -> [GATTService] {
        [
            GATTService(uuid: service, characteristics: [
                GATTCharacteristic(uuid: command, properties: [.write, .writeWithoutResponse], read: nil,
                                   write: { context, value in respond(context.peer, value) },
                                   descriptors: [.userDescription("command")]),
                GATTCharacteristic(uuid: response, properties: [.notify], descriptors: [.userDescription("response")]),
            ]),
        ]
    }

    /// The notifications that answer one written command (a refusal frame if it doesn't decode).
    public static func responseChunks(to written: [UInt8]) -> [[UInt8]] {
        let response: BandProtocol.Frame
        do {
            response = BandProtocol.respond(to: try BandProtocol.Frame.decode(written))
        } catch {
            response = BandProtocol.Frame(command: BandProtocol.Command.error.rawValue, payload: [written.count > 1 ? written[1] : 0, 0x01])
        }
        return response.chunks
    }
}
