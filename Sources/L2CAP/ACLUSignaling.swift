import HCI

// The BR/EDR signaling channel (ACL-U, CID 0x0001, Core v5.4 Vol 3 Part A 4): a C-frame carries
// one command or more, each Code(1) Identifier(1) Length(2) Data. The commands LE-U shares are
// decoded by `SignalingCommand`'s body codec, the ACL-U-only ones by `SignalingCommand.ACLUBody`
// (both generated from Tools/pdl/signaling.pdl). Written by hand here: the list of commands in
// one C-frame, and the three commands whose data are laid out by what they carry (the
// configuration options' type-length-value list, the Information Response's InfoType).
// The stack does not speak BR/EDR: `dump` and `--trace` use this.

/// One command of an ACL-U C-frame.
public struct ACLUSignalingCommand: Sendable, Hashable, FieldDescribable {
    public enum Body: Sendable, Hashable {
        /// A command LE-U carries too (or an LE-U-only one, which ACL-U does not carry: see `code.isACLU`).
        case shared(SignalingCommand.Body)
        /// A command only ACL-U carries.
        case aclu(SignalingCommand.ACLUBody)
    }

    public var identifier: UInt8
    public var body: Body
    /// The command's Length field (its data octets).
    public var length: Int

    public init(identifier: UInt8, _ body: Body, length: Int) {
        self.identifier = identifier
        self.body = body
        self.length = length
    }

    public var code: SignalingCode {
        switch body {
        case .shared(let b): return SignalingCommand(identifier: identifier, b).code
        case .aclu(let b): return b.code
        }
    }

    /// Every command of a C-frame payload, in order. Decoding stops at the first command whose
    /// Length runs past the frame or whose data do not decode; `error` says why (the commands
    /// before it are kept). At most 65535 / 4 commands (a frame's length bounds them).
    public static func decodeAll(_ bytes: [UInt8]) -> (commands: [ACLUSignalingCommand], error: DecodeError?) {
        var r = ByteReader(bytes)
        var out: [ACLUSignalingCommand] = []
        do {
            while !r.isAtEnd {
                out.append(try decodeOne(&r))
            }
        } catch {
            return (out, error)
        }
        return (out, nil)
    }

    /// One command at the reader's position; the reader moves past it.
    static func decodeOne(_ r: inout ByteReader) throws(DecodeError) -> ACLUSignalingCommand {
        let code = SignalingCode(try r.u8("code"))
        let identifier = try r.u8("identifier")
        let length = Int(try r.u16("length"))
        var data = try r.window(length, "data")
        let body: Body
        if let b = try SignalingCommand.decodeACLUBody(code, &data) {
            body = .aclu(b)
        } else {
            body = .shared(try SignalingCommand.decodeBody(code, &data))
        }
        try data.expectEnd(code.name ?? "signaling command")
        return ACLUSignalingCommand(identifier: identifier, body, length: length)
    }

    /// Code, identifier, length and data (one command of a C-frame).
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 16)
        w.u8(code.rawValue)
        w.u8(identifier)
        w.u16(0)
        switch body {
        case .shared(let b): SignalingCommand(identifier: identifier, b).encodeBody(into: &w)
        case .aclu(let b): b.encode(into: &w)
        }
        let n = w.bytes.count - SignalingCommand.headerLength
        w.bytes[2] = UInt8(truncatingIfNeeded: n)
        w.bytes[3] = UInt8(truncatingIfNeeded: n >> 8)
        return w.bytes
    }

    public var fields: [Field] {
        let c = code
        var f: [Field] = [.code("code", c.rawValue, note: c.isACLU ? nil : c.name.map { _ in "not carried on ACL-U (Core v5.4 Vol 3 Part A Table 4.2)" }),
                          .text("name", c.name ?? "Unknown"), .int("identifier", identifier), .int("length", length)]
        switch body {
        case .shared(let b): f += SignalingCommand(identifier: identifier, b).bodyFields
        case .aclu(let b): f += b.fields
        }
        return f
    }
}

// MARK: - Configuration (Core v5.4 Vol 3 Part A 4.4, 4.5, 5)

/// One configuration option: Type(1, bit 7 the hint bit), Length(1), Option data.
public struct ConfigurationOption: Sendable, Hashable, FieldDescribable {
    /// The type octet as sent (hint bit included).
    public var typeOctet: UInt8
    public var data: [UInt8]

    public init(typeOctet: UInt8, data: [UInt8]) {
        self.typeOctet = typeOctet
        self.data = data
    }

    public var type: ConfigurationOptionType { ConfigurationOptionType(typeOctet & 0x7F) }
    /// Bit 7: the option may be skipped by a recipient that does not understand it.
    public var isHint: Bool { typeOctet & 0x80 != 0 }

    /// The Retransmission and Flow Control option's Mode (5.4); nil for another option or
    /// one too short.
    public var mode: ChannelMode? {
        type == .retransmissionAndFlowControl && data.count >= 1 ? ChannelMode(data[0]) : nil
    }

    static func decodeList(_ r: inout ByteReader) throws(DecodeError) -> [ConfigurationOption] {
        var out: [ConfigurationOption] = []
        while !r.isAtEnd {
            let t = try r.u8("optionType")
            let n = Int(try r.u8("optionLength"))
            out.append(ConfigurationOption(typeOctet: t, data: try r.bytes(n, "optionData")))
        }
        return out
    }

    func encode(into w: inout ByteWriter) {
        w.u8(typeOctet)
        w.u8(UInt8(truncatingIfNeeded: data.count))
        w.append(Array(data.prefix(255)))
    }

    /// The option's parameters when its length is the one 5.1-5.7 give, else its octets.
    public var fields: [Field] {
        var f: [Field] = [.code("type", typeOctet & 0x7F, note: type.name), .int("length", data.count)]
        if isHint { f.append(.bool("hint", true)) }
        var r = ByteReader(data)
        func u8() -> UInt8 { (try? r.u8()) ?? 0 }
        func u16() -> UInt16 { (try? r.u16()) ?? 0 }
        func u32() -> UInt32 { (try? r.u32()) ?? 0 }
        switch (type, data.count) {
        case (.mtu, 2): f.append(.int("mtu", u16()))
        case (.flushTimeout, 2):
            let t = u16()
            f.append(.int("flushTimeout", t, note: t == 0xFFFF ? "infinite" : t == 0x0001 ? "no retransmissions" : "\(t) ms"))
        case (.qualityOfService, 22):
            f += [.code("flags", u8()), .code("serviceType", u8()), .int("tokenRate", u32()), .int("tokenBucketSize", u32()),
                  .int("peakBandwidth", u32()), .int("latency", u32()), .int("delayVariation", u32())]
        case (.retransmissionAndFlowControl, 9):
            let mode = ChannelMode(u8())
            f += [.code("mode", mode.rawValue, note: mode.name), .int("txWindowSize", u8()), .int("maxTransmit", u8()),
                  .int("retransmissionTimeout", u16()), .int("monitorTimeout", u16()), .int("mps", u16())]
        case (.frameCheckSequence, 1):
            let t = u8()
            f.append(.code("fcsType", t, note: t == 0 ? "No FCS" : t == 1 ? "16-bit FCS" : "Reserved"))
        case (.extendedFlowSpecification, 16):
            f += [.int("identifier", u8()), .code("serviceType", u8()), .int("maximumSduSize", u16()),
                  .int("sduInterArrivalTime", u32()), .int("accessLatency", u32()), .int("flushTimeout", u32())]
        case (.extendedWindowSize, 2): f.append(.int("maxWindowSize", u16()))
        default: f.append(.bytes("data", data))
        }
        return f
    }
}

private func optionsField(_ options: [ConfigurationOption]) -> Field {
    Field("options", .list(options.map { .object($0.fields) }))
}

/// Configuration Request (4.4): Destination CID(2), Flags(2, bit 0 Continuation), options.
public struct ConfigurationRequest: Sendable, Hashable {
    public var destinationCID: UInt16
    public var flags: UInt16
    public var options: [ConfigurationOption]

    public init(destinationCID: UInt16, flags: UInt16, options: [ConfigurationOption]) {
        self.destinationCID = destinationCID
        self.flags = flags
        self.options = options
    }

    static func decode(_ r: inout ByteReader) throws(DecodeError) -> ConfigurationRequest {
        let dcid = try r.u16("destinationCid")
        let flags = try r.u16("flags")
        return ConfigurationRequest(destinationCID: dcid, flags: flags, options: try ConfigurationOption.decodeList(&r))
    }

    func encode(into w: inout ByteWriter) {
        w.u16(destinationCID)
        w.u16(flags)
        for o in options { o.encode(into: &w) }
    }

    var fields: [Field] {
        [.int("destinationCid", destinationCID), .code("flags", flags, note: flags & 1 != 0 ? "continuation" : nil),
         optionsField(options)]
    }
}

/// Configuration Response (4.5): Source CID(2), Flags(2), Result(2), options.
public struct ConfigurationResponse: Sendable, Hashable {
    public var sourceCID: UInt16
    public var flags: UInt16
    public var result: ConfigurationResult
    public var options: [ConfigurationOption]

    public init(sourceCID: UInt16, flags: UInt16, result: ConfigurationResult, options: [ConfigurationOption]) {
        self.sourceCID = sourceCID
        self.flags = flags
        self.result = result
        self.options = options
    }

    static func decode(_ r: inout ByteReader) throws(DecodeError) -> ConfigurationResponse {
        let scid = try r.u16("sourceCid")
        let flags = try r.u16("flags")
        let result = ConfigurationResult(try r.u16("result"))
        return ConfigurationResponse(sourceCID: scid, flags: flags, result: result, options: try ConfigurationOption.decodeList(&r))
    }

    func encode(into w: inout ByteWriter) {
        w.u16(sourceCID)
        w.u16(flags)
        w.u16(result.rawValue)
        for o in options { o.encode(into: &w) }
    }

    var fields: [Field] {
        [.int("sourceCid", sourceCID), .code("flags", flags, note: flags & 1 != 0 ? "continuation" : nil),
         .code("result", result.rawValue, note: result.name), optionsField(options)]
    }
}

// MARK: - Information Response (Core v5.4 Vol 3 Part A 4.11)

/// InfoType(2), Result(2), then, on success, the data InfoType names: the connectionless MTU
/// (2 octets), the extended feature mask (4) or the fixed channels supported (8).
public struct InformationResponse: Sendable, Hashable {
    public var infoType: InformationType
    public var result: InformationResult
    public var data: [UInt8]

    public init(infoType: InformationType, result: InformationResult, data: [UInt8]) {
        self.infoType = infoType
        self.result = result
        self.data = data
    }

    static func decode(_ r: inout ByteReader) throws(DecodeError) -> InformationResponse {
        let t = InformationType(try r.u16("infoType"))
        let result = InformationResult(try r.u16("result"))
        return InformationResponse(infoType: t, result: result, data: r.rest())
    }

    func encode(into w: inout ByteWriter) {
        w.u16(infoType.rawValue)
        w.u16(result.rawValue)
        w.append(data)
    }

    /// Extended feature mask bits (Core v5.4 Vol 3 Part A 4.12, Table 4.13).
    static let featureNames: [(bit: Int, name: String)] = [
        (0, "Flow control mode"), (1, "Retransmission mode"), (2, "Bi-directional QoS"),
        (3, "Enhanced Retransmission Mode"), (4, "Streaming Mode"), (5, "FCS Option"),
        (6, "Extended Flow Specification for BR/EDR"), (7, "Fixed Channels"), (8, "Extended Window Size"),
        (9, "Unicast Connectionless Data Reception"), (10, "Enhanced Credit Based Flow Control Mode"),
    ]

    /// Fixed channels bits (4.13, Table 4.14): bit N is CID N.
    static let fixedChannelNames: [(bit: Int, name: String)] = [
        (1, "L2CAP Signaling channel"), (2, "Connectionless reception"), (7, "BR/EDR Security Manager"),
    ]

    var fields: [Field] {
        var f: [Field] = [.code("infoType", infoType.rawValue, note: infoType.name), .code("result", result.rawValue, note: result.name)]
        func bitNames(_ v: UInt64, _ table: [(bit: Int, name: String)]) -> String {
            let names = table.filter { v & (1 << UInt64($0.bit)) != 0 }.map(\.name)
            return names.isEmpty ? "none" : names.joined(separator: ", ")
        }
        var r = ByteReader(data)
        switch (result, infoType, data.count) {
        case (.success, .connectionlessMTU, 2): f.append(.int("connectionlessMtu", (try? r.u16()) ?? 0))
        case (.success, .extendedFeatures, 4):
            let mask = (try? r.u32()) ?? 0
            f.append(.code("extendedFeatureMask", mask, note: bitNames(UInt64(mask), Self.featureNames)))
        case (.success, .fixedChannels, 8):
            let mask = (try? r.u64()) ?? 0
            f.append(.code("fixedChannels", mask, note: bitNames(mask, Self.fixedChannelNames)))
        default:
            if !data.isEmpty { f.append(.bytes("data", data)) }
        }
        return f
    }
}
