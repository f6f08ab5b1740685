import HCI

/// A signaling command code (Core Vol 3 Part A 4, Table 4.2), the LE-U subset plus unknowns.
public struct SignalingCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let commandReject = SignalingCode(0x01)
    public static let disconnectionRequest = SignalingCode(0x06)
    public static let disconnectionResponse = SignalingCode(0x07)
    public static let connectionParameterUpdateRequest = SignalingCode(0x12)
    public static let connectionParameterUpdateResponse = SignalingCode(0x13)
    public static let leCreditBasedConnectionRequest = SignalingCode(0x14)
    public static let leCreditBasedConnectionResponse = SignalingCode(0x15)
    public static let flowControlCreditInd = SignalingCode(0x16)
    public static let creditBasedConnectionRequest = SignalingCode(0x17)
    public static let creditBasedConnectionResponse = SignalingCode(0x18)
    public static let creditBasedReconfigureRequest = SignalingCode(0x19)
    public static let creditBasedReconfigureResponse = SignalingCode(0x1A)

    public var name: String? {
        switch rawValue {
        case 0x01: return "Command Reject"
        case 0x06: return "Disconnection Request"
        case 0x07: return "Disconnection Response"
        case 0x12: return "Connection Parameter Update Request"
        case 0x13: return "Connection Parameter Update Response"
        case 0x14: return "LE Credit Based Connection Request"
        case 0x15: return "LE Credit Based Connection Response"
        case 0x16: return "Flow Control Credit Ind"
        case 0x17: return "Credit Based Connection Request"
        case 0x18: return "Credit Based Connection Response"
        case 0x19: return "Credit Based Reconfigure Request"
        case 0x1A: return "Credit Based Reconfigure Response"
        default: return nil
        }
    }

    /// Requests are answered by a response (or a Command Reject) with the same identifier.
    public var isRequest: Bool { [0x06, 0x12, 0x14, 0x17, 0x19].contains(rawValue) }

    public var description: String { "\(name ?? "Unknown signaling command") (\(hexCode(rawValue)))" }
}

/// Result of (LE / enhanced) Credit Based Connection Response (Core Vol 3 Part A 4.23, 4.26).
public struct CreditBasedConnectionResult: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let successful = Self(0x0000)
    public static let spsmNotSupported = Self(0x0002)
    public static let noResourcesAvailable = Self(0x0004)
    public static let insufficientAuthentication = Self(0x0005)
    public static let insufficientAuthorization = Self(0x0006)
    public static let insufficientEncryptionKeySize = Self(0x0007)
    public static let insufficientEncryption = Self(0x0008)
    public static let invalidSourceCID = Self(0x0009)
    public static let sourceCIDAlreadyAllocated = Self(0x000A)
    public static let unacceptableParameters = Self(0x000B)
    public static let invalidParameters = Self(0x000C)

    public var name: String {
        switch rawValue {
        case 0x0000: return "Connection successful"
        case 0x0002: return "Connection refused - SPSM not supported"
        case 0x0004: return "Connection refused - no resources available"
        case 0x0005: return "Connection refused - insufficient authentication"
        case 0x0006: return "Connection refused - insufficient authorization"
        case 0x0007: return "Connection refused - insufficient encryption key size"
        case 0x0008: return "Connection refused - insufficient encryption"
        case 0x0009: return "Connection refused - invalid Source CID"
        case 0x000A: return "Connection refused - Source CID already allocated"
        case 0x000B: return "Connection refused - unacceptable parameters"
        case 0x000C: return "Connection refused - invalid parameters"
        default: return "Reserved"
        }
    }

    public var description: String { "\(name) (\(hexCode(rawValue)))" }
}

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

    public enum Body: Sendable, Hashable {
        case commandReject(CommandRejectReason)
        case disconnectionRequest(destinationCID: UInt16, sourceCID: UInt16)
        case disconnectionResponse(destinationCID: UInt16, sourceCID: UInt16)
        /// Intervals in 1.25 ms units, latency in connection events, timeout in 10 ms units.
        case connectionParameterUpdateRequest(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16)
        /// Result 0x0000 accepted, 0x0001 rejected.
        case connectionParameterUpdateResponse(result: UInt16)
        case leCreditBasedConnectionRequest(spsm: UInt16, sourceCID: UInt16, mtu: UInt16, mps: UInt16, initialCredits: UInt16)
        case leCreditBasedConnectionResponse(destinationCID: UInt16, mtu: UInt16, mps: UInt16, initialCredits: UInt16,
                                             result: CreditBasedConnectionResult)
        case flowControlCreditInd(cid: UInt16, credits: UInt16)
        case creditBasedConnectionRequest(spsm: UInt16, mtu: UInt16, mps: UInt16, initialCredits: UInt16, sourceCIDs: [UInt16])
        case creditBasedConnectionResponse(mtu: UInt16, mps: UInt16, initialCredits: UInt16,
                                           result: CreditBasedConnectionResult, destinationCIDs: [UInt16])
        case creditBasedReconfigureRequest(mtu: UInt16, mps: UInt16, destinationCIDs: [UInt16])
        case creditBasedReconfigureResponse(result: UInt16)
        case unknown(code: SignalingCode, data: [UInt8])
    }

    public static let headerLength = 4
    /// The minimum (and default) signaling MTU on LE-U.
    public static let minimumMTU = 23

    public var code: SignalingCode {
        switch body {
        case .commandReject: return .commandReject
        case .disconnectionRequest: return .disconnectionRequest
        case .disconnectionResponse: return .disconnectionResponse
        case .connectionParameterUpdateRequest: return .connectionParameterUpdateRequest
        case .connectionParameterUpdateResponse: return .connectionParameterUpdateResponse
        case .leCreditBasedConnectionRequest: return .leCreditBasedConnectionRequest
        case .leCreditBasedConnectionResponse: return .leCreditBasedConnectionResponse
        case .flowControlCreditInd: return .flowControlCreditInd
        case .creditBasedConnectionRequest: return .creditBasedConnectionRequest
        case .creditBasedConnectionResponse: return .creditBasedConnectionResponse
        case .creditBasedReconfigureRequest: return .creditBasedReconfigureRequest
        case .creditBasedReconfigureResponse: return .creditBasedReconfigureResponse
        case .unknown(let code, _): return code
        }
    }

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
        let body: Body
        switch code.rawValue {
        case 0x01:
            let reason = try r.u16("reason")
            switch reason {
            case 0x0000: body = .commandReject(.commandNotUnderstood)
            case 0x0001: body = .commandReject(.signalingMTUExceeded(actualMTU: try r.u16("actualMtu")))
            case 0x0002: body = .commandReject(.invalidCID(localCID: try r.u16("localCid"), remoteCID: try r.u16("remoteCid")))
            default: body = .commandReject(.other(reason: reason, data: r.rest()))
            }
        case 0x06:
            body = .disconnectionRequest(destinationCID: try r.u16("destinationCid"), sourceCID: try r.u16("sourceCid"))
        case 0x07:
            body = .disconnectionResponse(destinationCID: try r.u16("destinationCid"), sourceCID: try r.u16("sourceCid"))
        case 0x12:
            body = .connectionParameterUpdateRequest(intervalMin: try r.u16("intervalMin"), intervalMax: try r.u16("intervalMax"),
                                                     latency: try r.u16("latency"), timeout: try r.u16("timeout"))
        case 0x13:
            body = .connectionParameterUpdateResponse(result: try r.u16("result"))
        case 0x14:
            body = .leCreditBasedConnectionRequest(spsm: try r.u16("spsm"), sourceCID: try r.u16("sourceCid"),
                                                   mtu: try r.u16("mtu"), mps: try r.u16("mps"),
                                                   initialCredits: try r.u16("initialCredits"))
        case 0x15:
            body = .leCreditBasedConnectionResponse(destinationCID: try r.u16("destinationCid"), mtu: try r.u16("mtu"),
                                                    mps: try r.u16("mps"), initialCredits: try r.u16("initialCredits"),
                                                    result: CreditBasedConnectionResult(try r.u16("result")))
        case 0x16:
            body = .flowControlCreditInd(cid: try r.u16("cid"), credits: try r.u16("credits"))
        case 0x17:
            let spsm = try r.u16("spsm"), mtu = try r.u16("mtu"), mps = try r.u16("mps"), credits = try r.u16("initialCredits")
            body = .creditBasedConnectionRequest(spsm: spsm, mtu: mtu, mps: mps, initialCredits: credits,
                                                 sourceCIDs: try readCIDs(&r, min: 1, "sourceCid"))
        case 0x18:
            let mtu = try r.u16("mtu"), mps = try r.u16("mps"), credits = try r.u16("initialCredits")
            let result = CreditBasedConnectionResult(try r.u16("result"))
            body = .creditBasedConnectionResponse(mtu: mtu, mps: mps, initialCredits: credits, result: result,
                                                  destinationCIDs: try readCIDs(&r, min: 0, "destinationCid"))
        case 0x19:
            let mtu = try r.u16("mtu"), mps = try r.u16("mps")
            body = .creditBasedReconfigureRequest(mtu: mtu, mps: mps, destinationCIDs: try readCIDs(&r, min: 1, "destinationCid"))
        case 0x1A:
            body = .creditBasedReconfigureResponse(result: try r.u16("result"))
        default:
            body = .unknown(code: code, data: r.rest())
        }
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
        switch body {
        case .commandReject(let reason):
            w.u16(reason.code)
            switch reason {
            case .commandNotUnderstood: break
            case .signalingMTUExceeded(let mtu): w.u16(mtu)
            case let .invalidCID(local, remote): w.u16(local); w.u16(remote)
            case .other(_, let data): w.append(data)
            }
        case let .disconnectionRequest(d, s), let .disconnectionResponse(d, s):
            w.u16(d); w.u16(s)
        case let .connectionParameterUpdateRequest(minI, maxI, latency, timeout):
            w.u16(minI); w.u16(maxI); w.u16(latency); w.u16(timeout)
        case let .connectionParameterUpdateResponse(result), let .creditBasedReconfigureResponse(result):
            w.u16(result)
        case let .leCreditBasedConnectionRequest(spsm, scid, mtu, mps, credits):
            w.u16(spsm); w.u16(scid); w.u16(mtu); w.u16(mps); w.u16(credits)
        case let .leCreditBasedConnectionResponse(dcid, mtu, mps, credits, result):
            w.u16(dcid); w.u16(mtu); w.u16(mps); w.u16(credits); w.u16(result.rawValue)
        case let .flowControlCreditInd(cid, credits):
            w.u16(cid); w.u16(credits)
        case let .creditBasedConnectionRequest(spsm, mtu, mps, credits, cids):
            w.u16(spsm); w.u16(mtu); w.u16(mps); w.u16(credits); for c in cids { w.u16(c) }
        case let .creditBasedConnectionResponse(mtu, mps, credits, result, cids):
            w.u16(mtu); w.u16(mps); w.u16(credits); w.u16(result.rawValue); for c in cids { w.u16(c) }
        case let .creditBasedReconfigureRequest(mtu, mps, cids):
            w.u16(mtu); w.u16(mps); for c in cids { w.u16(c) }
        case .unknown(_, let data):
            w.append(data)
        }
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

// MARK: - Fields

extension SignalingCommand: FieldDescribable {
    public var fields: [Field] {
        var f: [Field] = [.code("code", code.rawValue), .text("name", code.name ?? "Unknown"),
                          .int("identifier", identifier)]
        var params: [Field] = []
        switch body {
        case .commandReject(let reason):
            params.append(.code("reason", reason.code, note: reason.name))
            switch reason {
            case .commandNotUnderstood: break
            case .signalingMTUExceeded(let mtu): params.append(.int("actualMtu", mtu))
            case let .invalidCID(local, remote): params.append(.int("localCid", local)); params.append(.int("remoteCid", remote))
            case .other(_, let data): params.append(.bytes("data", data))
            }
        case let .disconnectionRequest(d, s), let .disconnectionResponse(d, s):
            params.append(.int("destinationCid", d)); params.append(.int("sourceCid", s))
        case let .connectionParameterUpdateRequest(minI, maxI, latency, timeout):
            params.append(.interval("intervalMin", minI, unitMicroseconds: 1250))
            params.append(.interval("intervalMax", maxI, unitMicroseconds: 1250))
            params.append(.int("latency", latency))
            params.append(.interval("timeout", timeout, unitMicroseconds: 10_000))
        case let .connectionParameterUpdateResponse(result):
            params.append(.code("result", result, note: result == 0 ? "Connection Parameters accepted"
                                : result == 1 ? "Connection Parameters rejected" : "Reserved"))
        case let .leCreditBasedConnectionRequest(spsm, scid, mtu, mps, credits):
            params.append(.code("spsm", spsm)); params.append(.int("sourceCid", scid))
            params.append(.int("mtu", mtu)); params.append(.int("mps", mps)); params.append(.int("initialCredits", credits))
        case let .leCreditBasedConnectionResponse(dcid, mtu, mps, credits, result):
            params.append(.int("destinationCid", dcid)); params.append(.int("mtu", mtu)); params.append(.int("mps", mps))
            params.append(.int("initialCredits", credits)); params.append(.code("result", result.rawValue, note: result.name))
        case let .flowControlCreditInd(cid, credits):
            params.append(.int("cid", cid)); params.append(.int("credits", credits))
        case let .creditBasedConnectionRequest(spsm, mtu, mps, credits, cids):
            params.append(.code("spsm", spsm)); params.append(.int("mtu", mtu)); params.append(.int("mps", mps))
            params.append(.int("initialCredits", credits))
            params.append(Field("sourceCid", .list(cids.map { .int(Int($0)) })))
        case let .creditBasedConnectionResponse(mtu, mps, credits, result, cids):
            params.append(.int("mtu", mtu)); params.append(.int("mps", mps)); params.append(.int("initialCredits", credits))
            params.append(.code("result", result.rawValue, note: result.name))
            params.append(Field("destinationCid", .list(cids.map { .int(Int($0)) })))
        case let .creditBasedReconfigureRequest(mtu, mps, cids):
            params.append(.int("mtu", mtu)); params.append(.int("mps", mps))
            params.append(Field("destinationCid", .list(cids.map { .int(Int($0)) })))
        case let .creditBasedReconfigureResponse(result):
            params.append(.code("result", result, note: reconfigureResultName(result)))
        case .unknown(_, let data):
            params.append(.bytes("data", data))
        }
        f.append(.int("length", bytes.count - SignalingCommand.headerLength))
        return f + params
    }
}

private func reconfigureResultName(_ r: UInt16) -> String {
    switch r {
    case 0x0000: return "Reconfiguration successful"
    case 0x0001: return "Reconfiguration failed - reduction in size of MTU not allowed"
    case 0x0002: return "Reconfiguration failed - reduction in size of MPS not allowed for more than one channel at a time"
    case 0x0003: return "Reconfiguration failed - one or more Destination CIDs invalid"
    case 0x0004: return "Reconfiguration failed - other unacceptable parameters"
    default: return "Reserved"
    }
}
