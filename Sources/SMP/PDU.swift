import HCI

// Security Manager Protocol PDUs (Core Vol 3 Part H 3.3–3.6), carried on L2CAP CID 0x0006.
// Every PDU, its codes and the one-octet code tables are described in Tools/pdl/smp.pdl and
// generated into Generated/SMP.swift; what stays here is what that format does not describe.
// Multi-octet values (keys, confirm/random values, public key coordinates, DHKey check)
// are kept exactly as they travel in the PDU: least significant octet first.

/// AuthReq (Vol 3 Part H 3.5.1, Figure 3.3): Bonding_Flags (2 bits), MITM, SC, Keypress, CT2.
/// Written by hand: the two-bit Bonding_Flags among single bits is neither a code table nor an
/// OptionSet, and `fields` shows each bit field under its own name.
public struct SMPAuthReq: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(bonding: Bool = false, mitm: Bool = false, secureConnections: Bool = false,
                keypress: Bool = false, ct2: Bool = false) {
        rawValue = (bonding ? 0x01 : 0) | (mitm ? 0x04 : 0) | (secureConnections ? 0x08 : 0)
            | (keypress ? 0x10 : 0) | (ct2 ? 0x20 : 0)
    }

    /// Bonding_Flags: 0b00 No Bonding, 0b01 Bonding, others reserved.
    public var bondingFlags: UInt8 { rawValue & 0x03 }
    public var bonding: Bool { bondingFlags == 0x01 }
    public var mitm: Bool { rawValue & 0x04 != 0 }
    public var secureConnections: Bool { rawValue & 0x08 != 0 }
    public var keypress: Bool { rawValue & 0x10 != 0 }
    public var ct2: Bool { rawValue & 0x20 != 0 }

    public var description: String {
        var parts: [String] = []
        switch bondingFlags {
        case 0: parts.append("No Bonding")
        case 1: parts.append("Bonding")
        default: parts.append("Bonding_Flags reserved (\(bondingFlags))")
        }
        if mitm { parts.append("MITM") }
        if secureConnections { parts.append("SC") }
        if keypress { parts.append("Keypress") }
        if ct2 { parts.append("CT2") }
        if rawValue & 0xC0 != 0 { parts.append("RFU bits \(hexCode(rawValue & 0xC0))") }
        return parts.joined(separator: ", ")
    }

    /// The octet, then each bit field under its name in Figure 3.3 (lowerCamelCase).
    public var fields: [Field] {
        [.code("authReq", rawValue, note: description),
         .int("bondingFlags", bondingFlags, note: bondingFlags == 0 ? "No Bonding" : bondingFlags == 1 ? "Bonding" : "Reserved"),
         .bool("mitm", mitm), .bool("sc", secureConnections), .bool("keypress", keypress), .bool("ct2", ct2)]
    }
}

extension SMPPairingParameters {
    /// Maximum Encryption Key Size is valid from 7 to 16 octets (Vol 3 Part H 3.5.1).
    public var isKeySizeValid: Bool { (7...16).contains(maxEncryptionKeySize) }
}
