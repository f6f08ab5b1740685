/// A Bluetooth UUID: 16-bit, 32-bit or 128-bit (Core Vol 3 Part B 2.5.1). Stored in its
/// shortest form; comparisons go through the 128-bit form so 0x180D equals its 128-bit alias.
public struct BluetoothUUID: Hashable, Sendable, CustomStringConvertible, Comparable {
    /// Big-endian (display order) octets: 2, 4 or 16 of them.
    public let bytes: [UInt8]

    public init(_ uuid16: UInt16) { bytes = [UInt8(uuid16 >> 8), UInt8(uuid16 & 0xff)] }
    public init(uuid32: UInt32) { bytes = (0..<4).reversed().map { UInt8((uuid32 >> (8 * UInt32($0))) & 0xff) } }

    /// From 2, 4 or 16 big-endian octets; a 128-bit UUID in the Base UUID range is shortened.
    public init?(bigEndian b: [UInt8]) {
        switch b.count {
        case 2, 4: bytes = b
        case 16:
            if Array(b[4...]) == BluetoothUUID.baseSuffix {
                bytes = b[0] == 0 && b[1] == 0 ? [b[2], b[3]] : Array(b[0..<4])
            } else {
                bytes = b
            }
        default: return nil
        }
    }

    /// From the little-endian octets ATT and AD structures carry.
    public init?(littleEndian b: [UInt8]) { self.init(bigEndian: b.reversed()) }

    /// Parses "180d", "0000180d", "12345678-1234-5678-1234-56789abcdef0" (case-insensitive, "0x" allowed).
    public init?(string: String) {
        var s = string.lowercased()
        if s.hasPrefix("0x") { s.removeFirst(2) }
        let hexOnly = String(s.filter { $0 != "-" })
        guard [4, 8, 32].contains(hexOnly.count), let b = [UInt8](hex: hexOnly) else { return nil }
        if hexOnly.count == 32 && s.count == 36 {
            // Dashes must sit at 8-4-4-4-12.
            let dashes = s.enumerated().filter { $0.element == "-" }.map(\.offset)
            guard dashes == [8, 13, 18, 23] else { return nil }
        } else if s.contains("-") {
            return nil
        }
        self.init(bigEndian: b)
    }

    public var is16Bit: Bool { bytes.count == 2 }
    public var uuid16: UInt16? { is16Bit ? UInt16(bytes[0]) << 8 | UInt16(bytes[1]) : nil }

    /// The full 128-bit form, big-endian.
    public var uuid128: [UInt8] {
        switch bytes.count {
        case 2: return [0, 0] + bytes + BluetoothUUID.baseSuffix
        case 4: return bytes + BluetoothUUID.baseSuffix
        default: return bytes
        }
    }

    /// Little-endian octets in the stored width (2, 4 or 16), as ATT carries them.
    public var littleEndian: [UInt8] { bytes.reversed() }
    /// Little-endian, widened to 128 bits where 32-bit UUIDs aren't allowed (ATT).
    public var littleEndianFor16Or128: [UInt8] { bytes.count == 4 ? uuid128.reversed() : bytes.reversed() }

    /// CLI.md's form: lowercase, 4 or 8 hex digits, or dashed 128-bit.
    /// Written digit by digit into one buffer: `dump` formats one for every attribute it names.
    public var description: String {
        guard bytes.count == 16 else { return bytes.hex }
        return String(unsafeUninitializedCapacity: 36) { out in
            var i = 0
            for (k, b) in bytes.enumerated() {
                if k == 4 || k == 6 || k == 8 || k == 10 { out[i] = UInt8(ascii: "-"); i += 1 }
                out[i] = lowercaseHexDigit(b >> 4)
                out[i + 1] = lowercaseHexDigit(b & 0x0f)
                i += 2
            }
            return i
        }
    }

    public static func == (a: BluetoothUUID, b: BluetoothUUID) -> Bool {
        // Same width: the octets decide (no 128-bit copies, this is on every attribute lookup).
        // Across widths only a 32-bit 0000xxxx can alias a 16-bit UUID (the initialisers store
        // 128-bit UUIDs in the Base UUID range shortened), so the 128-bit forms decide.
        a.bytes.count == b.bytes.count ? a.bytes == b.bytes : a.uuid128 == b.uuid128
    }
    public func hash(into h: inout Hasher) { h.combine(uuid128) }
    public static func < (a: BluetoothUUID, b: BluetoothUUID) -> Bool { a.uuid128.lexicographicallyPrecedes(b.uuid128) }

    /// 0000xxxx-0000-1000-8000-00805F9B34FB without its first four octets.
    static let baseSuffix: [UInt8] = [0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB]
}

extension BluetoothUUID: ExpressibleByIntegerLiteral {
    public init(integerLiteral v: UInt16) { self.init(v) }
}
