import HCI

/// An ATT PDU opcode (Core Vol 3 Part F 3.3.1 and 3.4.8): bits 0-5 method, bit 6 command flag,
/// bit 7 authentication signature flag.
public struct ATTOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    // The opcodes themselves, their names, kinds and minimum lengths: Generated/ATT.swift
    // (from Tools/pdl/att.pdl).

    /// Bit 6: a command (no response expected; unknown commands are ignored by a server).
    public var isCommand: Bool { rawValue & 0x40 != 0 }
    /// Bit 7: the PDU ends with a 12-octet authentication signature.
    public var hasSignature: Bool { rawValue & 0x80 != 0 }

    /// A client-to-server request that the server answers with a response or an Error Response.
    public var isRequest: Bool { info?.kind == .request }

    /// A server-to-client response to a request (not Error Response).
    public var isResponse: Bool { info?.kind == .response }

    /// The PDU that answers this one: a request's response, an indication's confirmation.
    public var responseOpcode: ATTOpcode? {
        if isRequest { return ATTOpcode(rawValue + 1) }
        if self == .handleValueIndication { return .handleValueConfirmation }
        return nil
    }

    /// Whether this stack knows (can decode) the opcode.
    public var isKnown: Bool { info != nil }

    /// The specification's name ("Read By Group Type Request"), or nil for an opcode we don't know.
    public var name: String? { info?.name }

    /// "Read Request (0x0a)" / "Unknown ATT opcode (0x7f)".
    public var description: String { "\(name ?? "Unknown ATT opcode") (\(hexCode(rawValue)))" }
}
