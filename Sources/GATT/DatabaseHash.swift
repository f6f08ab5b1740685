import HCI
import COpenSSL

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
        Array(aesCMAC(key: [UInt8](repeating: 0, count: 16), message: message(attributes)).reversed())
    }

    /// AES-128-CMAC (RFC 4493) through OpenSSL 3's EVP_MAC; output most significant octet first.
    public static func aesCMAC(key: [UInt8], message: [UInt8]) -> [UInt8] {
        precondition(key.count == 16)
        guard let mac = EVP_MAC_fetch(nil, "CMAC", nil) else { fatalError("OpenSSL: CMAC unavailable") }
        defer { EVP_MAC_free(mac) }
        guard let ctx = EVP_MAC_CTX_new(mac) else { fatalError("OpenSSL: EVP_MAC_CTX_new failed") }
        defer { EVP_MAC_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: 16)
        var outLength = 0
        let ok: Bool = "AES-128-CBC".withCString { cipher in
            "cipher".withCString { name in
                var params = [
                    OSSL_PARAM_construct_utf8_string(name, UnsafeMutablePointer(mutating: cipher), 0),
                    OSSL_PARAM_construct_end(),
                ]
                return key.withUnsafeBufferPointer { k in
                    guard EVP_MAC_init(ctx, k.baseAddress, 16, &params) == 1 else { return false }
                    let updated = message.withUnsafeBufferPointer { m in
                        m.isEmpty || EVP_MAC_update(ctx, m.baseAddress, m.count) == 1
                    }
                    guard updated else { return false }
                    return out.withUnsafeMutableBufferPointer { o in
                        EVP_MAC_final(ctx, o.baseAddress, &outLength, 16) == 1
                    }
                }
            }
        }
        precondition(ok && outLength == 16, "OpenSSL AES-CMAC failed")
        return out
    }
}
