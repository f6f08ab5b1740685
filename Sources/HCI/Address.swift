/// A 48-bit Bluetooth device address. Stored most significant octet first (as printed);
/// the air and HCI carry it least significant octet first.
public struct BDAddress: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Octets in display order: `bytes[0]` is the most significant ("F0" in F0:F1:...).
    public let bytes: [UInt8]

    public init(_ displayOrder: [UInt8]) {
        precondition(displayOrder.count == 6, "a BD_ADDR has 6 octets")
        bytes = displayOrder
    }

    public init(littleEndian: [UInt8]) {
        precondition(littleEndian.count == 6, "a BD_ADDR has 6 octets")
        bytes = littleEndian.reversed()
    }

    /// Parses "F0:F1:F2:F3:F4:F5" (or with '-' separators).
    public init?(string: String) {
        let parts = string.split(whereSeparator: { $0 == ":" || $0 == "-" })
        guard parts.count == 6 else { return nil }
        var out: [UInt8] = []
        for p in parts {
            guard p.count == 2, let v = UInt8(p, radix: 16) else { return nil }
            out.append(v)
        }
        bytes = out
    }

    public var littleEndian: [UInt8] { bytes.reversed() }
    public static let zero = BDAddress([0, 0, 0, 0, 0, 0])

    public var description: String {
        bytes.map { b in
            let s = String(b, radix: 16, uppercase: true)
            return s.count == 1 ? "0" + s : s
        }.joined(separator: ":")
    }

    public static func < (a: BDAddress, b: BDAddress) -> Bool { a.bytes.lexicographicallyPrecedes(b.bytes) }

    /// A random static address has its two most significant bits set (Core Vol 6 Part B 1.3.2.1).
    public var isRandomStatic: Bool { bytes[0] & 0xC0 == 0xC0 }
    /// A random address whose two most significant bits are 0b01 (Core Vol 6 Part B 1.3.2.2).
    public var isResolvablePrivate: Bool { bytes[0] & 0xC0 == 0x40 }
}

// AddressType (Core Vol 4 Part E 7.8.12) is generated from Tools/pdl/hci-codes.pdl.
extension AddressType {
    /// The type as CLI.md prints it: only "public" or "random".
    public var simple: String { (self == .public || self == .publicIdentity) ? "public" : "random" }
}

/// An address with its type: what identifies a peer.
public struct DeviceAddress: Hashable, Sendable, CustomStringConvertible {
    public var address: BDAddress
    public var type: AddressType

    public init(_ address: BDAddress, type: AddressType) {
        self.address = address
        self.type = type
    }

    public var description: String { "\(address)/\(type.simple)" }
}
