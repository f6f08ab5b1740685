import HCI

/// A signaling command code (Core Vol 3 Part A 4, Table 4.2): LE-U's and ACL-U's, plus unknowns.
/// The codes, names, which are requests and which link carries each come from
/// Tools/pdl/signaling.pdl (Generated/SignalingCommands.swift).
public struct SignalingCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public var description: String { "\(name ?? "Unknown signaling command") (\(hexCode(rawValue)))" }
}

// CreditBasedConnectionResult: Tools/pdl/l2cap-codes.pdl (Generated/Codes.swift).

/// Command Reject reason with its reason data (Core Vol 3 Part A 4.1).
public enum CommandRejectReason: Sendable, Hashable {
    /// 0x0000 Command not understood (no data).
    case commandNotUnderstood
    /// 0x0001 Signaling MTU exceeded; data: the actual signaling MTU.
    case signalingMTUExceeded(actualMTU: UInt16)
    /// 0x0002 Invalid CID in request; data: the local and remote endpoint CIDs of the request.
    case invalidCID(localCID: UInt16, remoteCID: UInt16)
    /// A reserved reason code, with its data as received.
    case other(reason: UInt16, data: [UInt8])

    public var code: UInt16 {
        switch self {
        case .commandNotUnderstood: return 0x0000
        case .signalingMTUExceeded: return 0x0001
        case .invalidCID: return 0x0002
        case .other(let r, _): return r
        }
    }

    public var name: String {
        switch code {
        case 0x0000: return "Command not understood"
        case 0x0001: return "Signaling MTU exceeded"
        case 0x0002: return "Invalid CID in request"
        default: return "Reserved"
        }
    }
}

/// One command on the LE signaling channel (CID 0x0005): Code(1), Identifier(1), Length(2), Data.
/// On LE-U a C-frame carries exactly one command.
public struct SignalingCommand: Sendable, Hashable {
    public var identifier: UInt8
    public var body: Body

    public init(identifier: UInt8, _ body: Body) {
        self.identifier = identifier
        self.body = body
    }

    public static let headerLength = 4
    /// The minimum (and default) signaling MTU on LE-U.
    public static let minimumMTU = 23

    // MARK: Decoding

    /// Decodes one C-frame payload. An unknown code decodes to `.unknown`; a Length field that
    /// disagrees with the octets present, or a known command with the wrong data length, throws.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> SignalingCommand {
        var r = ByteReader(bytes)
        let code = SignalingCode(try r.u8("code"))
        let identifier = try r.u8("identifier")
        let length = Int(try r.u16("length"))
        guard r.remaining >= length else { throw .truncated(field: "data", needed: length, available: r.remaining) }
        try r.expectEndAfter(length, "signaling command")
        let body = try decodeBody(code, &r)
        try r.expectEnd(code.name ?? "signaling command")
        return SignalingCommand(identifier: identifier, body)
    }

    /// At most 5 CIDs (Core Vol 3 Part A 4.25).
    static func readCIDs(_ r: inout ByteReader, min: Int, _ field: StaticString) throws(DecodeError) -> [UInt16] {
        guard r.remaining % 2 == 0 else { throw .invalid("odd length of \(field) list") }
        let n = r.remaining / 2
        guard n >= min else { throw .truncated(field: "\(field)", needed: 2, available: r.remaining) }
        guard n <= 5 else { throw .invalid("\(n) CIDs in one command (at most 5)") }
        var cids: [UInt16] = []
        cids.reserveCapacity(n)
        for _ in 0..<n { cids.append(try r.u16(field)) }
        return cids
    }

    /// What to send back for a received C-frame payload that is not a valid command:
    /// Command Reject "Command not understood" with the request's identifier, for an unknown
    /// code or a malformed command. Nil for a valid known command, for a malformed Command
    /// Reject (never reject a reject), or when not even the identifier is present.
    public static func rejection(for bytes: [UInt8]) -> SignalingCommand? {
        guard bytes.count >= 2, bytes[0] != SignalingCode.commandReject.rawValue else { return nil }
        let identifier = bytes[1]
        do {
            let command = try decode(bytes)
            if case .unknown = command.body { return SignalingCommand(identifier: identifier, .commandReject(.commandNotUnderstood)) }
            return nil
        } catch {
            return SignalingCommand(identifier: identifier, .commandReject(.commandNotUnderstood))
        }
    }

    // MARK: Encoding

    /// Code, identifier, length and data: the C-frame payload.
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 24)
        w.u8(code.rawValue)
        w.u8(identifier)
        w.u16(0) // length, patched below
        encodeBody(into: &w)
        var out = w.bytes
        let length = out.count - SignalingCommand.headerLength
        out[2] = UInt8(truncatingIfNeeded: length)
        out[3] = UInt8(truncatingIfNeeded: length >> 8)
        return out
    }
}

fileprivate extension ByteReader {
    /// Throws `trailingBytes` when more than `length` octets remain (LE C-frames carry one command).
    func expectEndAfter(_ length: Int, _ pdu: String) throws(DecodeError) {
        if remaining > length { throw DecodeError.trailingBytes(pdu: pdu, count: remaining - length) }
    }
}

// MARK: - Command Reject (irregular: its data depends on the reason, Core Vol 3 Part A 4.1)

extension SignalingCommand {
    static func decodeCommandReject(_ r: inout ByteReader) throws(DecodeError) -> CommandRejectReason {
        let reason = try r.u16("reason")
        switch reason {
        case 0x0000: return .commandNotUnderstood
        case 0x0001: return .signalingMTUExceeded(actualMTU: try r.u16("actualMtu"))
        case 0x0002: return .invalidCID(localCID: try r.u16("localCid"), remoteCID: try r.u16("remoteCid"))
        default: return .other(reason: reason, data: r.rest())
        }
    }

    func encodeCommandReject(_ reason: CommandRejectReason, into w: inout ByteWriter) {
        w.u16(reason.code)
        switch reason {
        case .commandNotUnderstood: break
        case .signalingMTUExceeded(let mtu): w.u16(mtu)
        case let .invalidCID(local, remote): w.u16(local); w.u16(remote)
        case .other(_, let data): w.append(data)
        }
    }

    func commandRejectFields(_ reason: CommandRejectReason) -> [Field] {
        var params: [Field] = [.code("reason", reason.code, note: reason.name)]
        switch reason {
        case .commandNotUnderstood: break
        case .signalingMTUExceeded(let mtu): params.append(.int("actualMtu", mtu))
        case let .invalidCID(local, remote): params.append(.int("localCid", local)); params.append(.int("remoteCid", remote))
        case .other(_, let data): params.append(.bytes("data", data))
        }
        return params
    }
}

// MARK: - Fields

extension SignalingCommand: FieldDescribable {
    public var fields: [Field] {
        var f: [Field] = [.code("code", code.rawValue), .text("name", code.name ?? "Unknown"),
                          .int("identifier", identifier)]
        f.append(.int("length", bytes.count - SignalingCommand.headerLength))
        return f + bodyFields
    }
}

func reconfigureResultName(_ r: UInt16) -> String {
    switch r {
    case 0x0000: return "Reconfiguration successful"
    case 0x0001: return "Reconfiguration failed - reduction in size of MTU not allowed"
    case 0x0002: return "Reconfiguration failed - reduction in size of MPS not allowed for more than one channel at a time"
    case 0x0003: return "Reconfiguration failed - one or more Destination CIDs invalid"
    case 0x0004: return "Reconfiguration failed - other unacceptable parameters"
    default: return "Reserved"
    }
}
