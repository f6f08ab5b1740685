// The names of the bits set in HCI's bit fields, one per bit as btmon prints them: the
// Supported_Commands bitmask, the event masks, the LE and LMP features. `dump --explain` lists them.

/// One bit set in a bit field, under the specification's name of what it stands for.
public struct NamedBit: Sendable, Equatable {
    /// The bit's number counted from bit 0 of octet 0 (octet × 8 + bit in that octet).
    public var bit: Int
    /// The specification's name; "reserved" for a bit it gives no meaning.
    public var name: String

    public init(bit: Int, name: String) {
        self.bit = bit
        self.name = name
    }

    public var octet: Int { bit / 8 }
    public var bitInOctet: Int { bit % 8 }
}

public enum HCIBitFields {
    /// Octet and bit → opcode of every command with a Supported_Commands bit (Core v5.4 Vol 4
    /// Part E 6.27): the stack's own commands (hci.pdl) and the catalog's (hci-catalog.pdl).
    static let commandsByBit: [Int: HCIOpcode] = {
        var out: [Int: HCIOpcode] = [:]
        for (op, p) in supportedCommandBits { out[p.octet * 8 + p.bit] = HCIOpcode(rawValue: op) }
        for (op, p) in HCICatalog.supportedCommandBits { out[p.octet * 8 + p.bit] = HCIOpcode(rawValue: op) }
        return out
    }()

    /// The commands the Supported_Commands bitmask of Read Local Supported Commands (Core v5.4
    /// Vol 4 Part E 7.4.2, table 6.27) claims, in bit order; a set bit no command has is "reserved".
    public static func supportedCommands(_ mask: [UInt8]) -> [NamedBit] {
        setBits(mask).map { n in NamedBit(bit: n, name: commandsByBit[n]?.name ?? "reserved") }
    }

    /// The events Set Event Mask enables (Core v5.4 Vol 4 Part E 7.3.1): bit n is the event
    /// whose code is n + 1 (so in every row of the table, as Bumble's HCI_Set_Event_Mask_Command
    /// also notes).
    public static func eventMask(_ mask: UInt64) -> [NamedBit] {
        setBits(mask).map { n in
            let code = UInt8(n + 1)
            return NamedBit(bit: n, name: HCIEvents.isKnown(code: code) ? HCIEvents.name(code: code) : "reserved")
        }
    }

    /// The events Set Event Mask Page 2 enables (Core v5.4 Vol 4 Part E 7.3.69): bit n is the
    /// event whose code is 0x40 + n.
    public static func eventMaskPage2(_ mask: UInt64) -> [NamedBit] {
        setBits(mask).map { n in
            let code = UInt8(0x40 + n)
            return NamedBit(bit: n, name: HCIEvents.isKnown(code: code) ? HCIEvents.name(code: code) : "reserved")
        }
    }

    /// The LE Meta subevents LE Set Event Mask enables (Core v5.4 Vol 4 Part E 7.8.1): bit n is
    /// the subevent whose code is n + 1.
    public static func leEventMask(_ mask: UInt64) -> [NamedBit] {
        setBits(mask).map { n in
            let code = UInt8(n + 1)
            return NamedBit(bit: n, name: HCIEvents.isKnownLESubevent(code: code) ? HCIEvents.leSubeventName(code: code) : "reserved")
        }
    }

    /// The LE features of a feature set (Core v5.4 Vol 6 Part B 4.6).
    public static func leFeatures(_ mask: UInt64) -> [NamedBit] { named(mask, leFeatureNames) }

    /// The LMP features of page 0 (Core v5.4 Vol 2 Part C 3.3), as Read Local Supported
    /// Features and Read Remote Supported Features Complete carry them.
    public static func lmpFeatures(_ mask: UInt64) -> [NamedBit] { named(mask, lmpFeatureNames) }

    static let leFeatureNames = Dictionary(uniqueKeysWithValues: LEFeatures.bitNames.map { ($0.bit, $0.name) })
    static let lmpFeatureNames = Dictionary(uniqueKeysWithValues: LMPFeatures.bitNames.map { ($0.bit, $0.name) })

    static func named(_ mask: UInt64, _ names: [Int: String]) -> [NamedBit] {
        setBits(mask).map { n in NamedBit(bit: n, name: names[n] ?? "reserved") }
    }

    static func setBits(_ mask: UInt64) -> [Int] {
        (0..<64).filter { mask & (1 << UInt64($0)) != 0 }
    }

    static func setBits(_ octets: [UInt8]) -> [Int] {
        var out: [Int] = []
        for (i, o) in octets.enumerated() where o != 0 {
            for b in 0..<8 where o & (1 << b) != 0 { out.append(i * 8 + b) }
        }
        return out
    }
}
