import HCI
import OpenSSLCrypto

/// The Database Hash (Core Vol 3 Part G 7.3): AES-CMAC with a zero key over, in handle order,
/// handle ‖ type ‖ value of every Primary Service, Secondary Service, Include, Characteristic and
/// Characteristic Extended Properties attribute, and handle ‖ type of every Characteristic User
/// Description, Client/Server Characteristic Configuration, Presentation Format and Aggregate
/// Format descriptor (handles and 16-bit types little-endian).
public enum GATTDatabaseHash {
    /// The octets the CMAC runs over.
    public static func message(_ attributes: [(handle: UInt16, type: BluetoothUUID, value: [UInt8])]) -> [UInt8] {
        var w = ByteWriter(capacity: 256)
        for a in attributes {
            guard let t = a.type.uuid16 else { continue }
            switch t {
            case 0x2800, 0x2801, 0x2802, 0x2803, 0x2900:
                w.u16(a.handle); w.u16(t); w.append(a.value)
            case 0x2901, 0x2902, 0x2903, 0x2904, 0x2905:
                w.u16(a.handle); w.u16(t)
            default:
                continue
            }
        }
        return w.bytes
    }

    /// The hash as the Database Hash characteristic carries it: the CMAC output (most
    /// significant octet first) reversed to little-endian, as Zephyr sends it and PTS expects.
    public static func compute(_ attributes: [(handle: UInt16, type: BluetoothUUID, value: [UInt8])]) -> [UInt8] {
        Array(AES128.cmac(key: [UInt8](repeating: 0, count: 16), message: message(attributes)).reversed())
    }
}
