/// A typed HCI event's parameters. As with commands, one type encodes (virtual controller),
/// decodes (host, `dump`) and describes itself.
public protocol HCIEventParameters: HCIParameters {
    static var eventCode: UInt8 { get }
}

extension HCIEventParameters {
    public var packet: HCIEventPacket {
        var w = ByteWriter()
        encodeParameters(into: &w)
        return HCIEventPacket(code: Self.eventCode, parameters: w.bytes)
    }
    public var name: String { Self.name }
}

/// A subevent of the LE Meta event (0x3E); its parameters are those after Subevent_Code.
public protocol LEMetaEventParameters: HCIParameters {
    static var subeventCode: UInt8 { get }
}

extension LEMetaEventParameters {
    public var packet: HCIEventPacket { LEMetaEvent(self).packet }
    public var name: String { Self.name }
}

/// Event code 0x3E: carries one LE subevent.
public struct LEMetaEvent: HCIEventParameters {
    public var subevent: any LEMetaEventParameters

    public init(_ subevent: any LEMetaEventParameters) { self.subevent = subevent }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        let code = try r.u8("subeventCode")
        if let t = HCIEvents.leSubeventType(code) {
            subevent = try t.init(parameters: &r)
            try r.expectEnd(t.name)
        } else {
            subevent = UnknownLESubevent(code: code, parameters: r.rest())
        }
    }

    /// The Subevent_Code on the wire: an unknown subevent keeps the code it arrived with.
    public var subeventCode: UInt8 {
        (subevent as? UnknownLESubevent)?.code ?? type(of: subevent).subeventCode
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(subeventCode)
        subevent.encodeParameters(into: &w)
    }

    public var fields: [Field] {
        if let unknown = subevent as? UnknownLESubevent, let e = HCICatalog.leSubevent(unknown.code) {
            let d = CatalogLayout.decode(e.parameters, unknown.parameters)
            return [.code("subeventCode", subeventCode, note: e.name)] + d.fields
        }
        return [.code("subeventCode", subeventCode, note: type(of: subevent).name)] + subevent.fields
    }
}

/// An event or LE subevent the stack has no type for: its code and parameters kept raw, so it
/// never fails the stream and encodes back to the octets it came as. One codec for both.
public protocol UnknownCodeParameters: HCIParameters {
    /// The code it arrived with (the type's own static code is the placeholder 0xFF).
    var code: UInt8 { get }
    var parameters: [UInt8] { get }
    init(code: UInt8, parameters: [UInt8])
}

extension UnknownCodeParameters {
    public init(parameters r: inout ByteReader) throws(DecodeError) { self.init(code: 0xFF, parameters: r.rest()) }
    public func encodeParameters(into w: inout ByteWriter) { w.append(parameters) }
    public var fields: [Field] { [.bytes("parameters", parameters)] }
}

public struct UnknownLESubevent: LEMetaEventParameters, UnknownCodeParameters {
    public static let subeventCode: UInt8 = 0xFF
    public static let name = "Unknown LE Subevent"
    public var code: UInt8
    public var parameters: [UInt8]
    public init(code: UInt8, parameters: [UInt8]) { self.code = code; self.parameters = parameters }
}

/// An event the stack has no type for: kept raw, never fails the stream.
public struct UnknownEvent: HCIEventParameters, UnknownCodeParameters {
    public static let eventCode: UInt8 = 0xFF
    public static let name = "Unknown Event"
    public var code: UInt8
    public var parameters: [UInt8]
    public init(code: UInt8, parameters: [UInt8]) { self.code = code; self.parameters = parameters }
    /// The packet with the code it arrived with (`HCIEventParameters.packet` would use 0xFF).
    public var packet: HCIEventPacket { HCIEventPacket(code: code, parameters: parameters) }

    /// The catalog's decoding of the parameters when it has the code, else the octets.
    public var fields: [Field] {
        HCIEvents.catalogFields(code: code, parameters: parameters)?.fields ?? [.bytes("parameters", parameters)]
    }
}

public enum HCIEvents {
    /// Decodes an event packet into its typed parameters; unknown codes give `UnknownEvent`
    /// (and unknown LE subevents `UnknownLESubevent`). Malformed parameters throw.
    public static func decode(_ packet: HCIEventPacket) throws(DecodeError) -> any HCIEventParameters {
        guard let t = byCode[packet.code] else {
            return UnknownEvent(code: packet.code, parameters: packet.parameters)
        }
        var r = ByteReader(packet.parameters)
        let e = try t.init(parameters: &r)
        // LE Meta checks its own subevent's length; other events must be exact.
        try r.expectEnd(t.name)
        return e
    }

    /// The specification's event name (the stack's own events, then the catalog's); "Vendor
    /// Event" for 0xFF (Vol 4 Part E 5.4.4), else "Unknown Event (0x..)".
    public static func name(code: UInt8) -> String {
        if let t = byCode[code] { return t.name }
        if let e = HCICatalog.event(code) { return e.name }
        return code == vendorEventCode ? "Vendor Event" : "Unknown Event (\(hexCode(code)))"
    }

    /// The LE Meta subevent's name (the stack's own subevents, then the catalog's), else
    /// "Unknown LE Subevent (0x..)".
    public static func leSubeventName(code: UInt8) -> String {
        if let t = bySubevent[code] { return t.name }
        if let e = HCICatalog.leSubevent(code) { return e.name }
        return "Unknown LE Subevent (\(hexCode(code)))"
    }

    /// Whether the stack or the catalog knows event `code`.
    public static func isKnown(code: UInt8) -> Bool { byCode[code] != nil || HCICatalog.event(code) != nil }

    /// Whether the stack or the catalog knows LE Meta subevent `code`.
    public static func isKnownLESubevent(code: UInt8) -> Bool { bySubevent[code] != nil || HCICatalog.leSubevent(code) != nil }

    /// The event code reserved for vendor-specific events (Core v5.4 Vol 4 Part E 5.4.4).
    public static let vendorEventCode: UInt8 = 0xFF

    /// The parameters of an event the stack has no type for, decoded by the catalog's layout
    /// (nil when the catalog has no entry for the code). For LE Meta, `code` is 0x3E and
    /// `parameters` begin with the subevent code.
    public static func catalogFields(code: UInt8, parameters: [UInt8]) -> CatalogDecoding? {
        if code == 0x3E {
            guard let sub = parameters.first, let e = HCICatalog.leSubevent(sub) else { return nil }
            return CatalogLayout.decode(e.parameters, Array(parameters.dropFirst()))
        }
        guard let e = HCICatalog.event(code) else { return nil }
        return CatalogLayout.decode(e.parameters, parameters)
    }

    public static func leSubeventType(_ code: UInt8) -> (any LEMetaEventParameters.Type)? { bySubevent[code] }

    private static let byCode: [UInt8: any HCIEventParameters.Type] = {
        var d: [UInt8: any HCIEventParameters.Type] = [:]
        for t in allEventTypes { d[t.eventCode] = t }
        return d
    }()

    private static let bySubevent: [UInt8: any LEMetaEventParameters.Type] = {
        var d: [UInt8: any LEMetaEventParameters.Type] = [:]
        for t in allLESubeventTypes { d[t.subeventCode] = t }
        return d
    }()
}

// MARK: - Command flow events (Core Vol 4 Part E 7.7.14, 7.7.15)

/// Command Complete (0x0E): carries Status and the command's return parameters.
public struct CommandComplete: HCIEventParameters, Equatable {
    public var numHCICommandPackets: UInt8
    public var opcode: HCIOpcode
    /// Return parameters including the leading Status (absent for opcode 0x0000).
    public var returnParameters: [UInt8]

    public init(numHCICommandPackets: UInt8 = 1, opcode: HCIOpcode, returnParameters: [UInt8]) {
        self.numHCICommandPackets = numHCICommandPackets
        self.opcode = opcode
        self.returnParameters = returnParameters
    }

    /// A successful completion of `C` with typed return parameters.
    public init<C: HCICommand>(_ command: C.Type, _ ret: C.ReturnParameters, numHCICommandPackets: UInt8 = 1) {
        var w = ByteWriter()
        w.u8(HCIStatus.success.rawValue)
        ret.encode(into: &w)
        self.init(numHCICommandPackets: numHCICommandPackets, opcode: C.opcode, returnParameters: w.bytes)
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        numHCICommandPackets = try r.u8("numHCICommandPackets")
        opcode = HCIOpcode(rawValue: try r.u16("commandOpcode"))
        returnParameters = r.rest()
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(numHCICommandPackets)
        w.u16(opcode.rawValue)
        w.append(returnParameters)
    }

    /// Status (Success when the event carries no return parameters, as for opcode 0x0000).
    public var status: HCIStatus { HCIStatus(returnParameters.first ?? 0) }

    /// The typed return parameters of `C`; throws HCIError on a non-success status.
    public func result<C: HCICommand>(_ command: C.Type) throws -> C.ReturnParameters {
        guard status.isSuccess else { throw HCIError(status, opcode: opcode) }
        var r = ByteReader(Array(returnParameters.dropFirst()))
        return try C.ReturnParameters(returnParameters: &r)
    }

    public var fields: [Field] {
        var f: [Field] = [
            .int("numHCICommandPackets", numHCICommandPackets),
            .code("commandOpcode", opcode.rawValue, note: opcode.name),
        ]
        // Status, then the command's return parameters, read in place (so `dump --html` knows
        // where each sits in the event).
        var r = ByteReader(returnParameters)
        guard let code = try? r.u8("status") else { return f }
        let status = HCIStatus(code)
        f.append(.code("status", status.rawValue, note: status.name))
        let rest = Array(returnParameters.dropFirst())
        if status.isSuccess {
            do {
                if let ret = try HCICommands.decodeReturn(opcode: opcode, from: r) {
                    f += ret.fields
                } else if let e = HCICatalog.command(opcode) {
                    let d = CatalogLayout.decode(e.returnParameters, rest)
                    if let problem = d.problem { f.append(Field("malformed", .text(problem))) }
                    f += d.fields
                } else if !rest.isEmpty {
                    f.append(.bytes("returnParameters", rest))
                }
            } catch {
                f.append(Field("malformed", .text("\(error)")))
                f.append(.bytes("returnParameters", rest))
            }
        } else if !rest.isEmpty {
            f.append(.bytes("returnParameters", rest))
        }
        return f
    }
}

/// Command Status (0x0F): the controller accepted (or refused) a command that completes later.
public struct CommandStatus: HCIEventParameters, Equatable {
    public var status: HCIStatus
    public var numHCICommandPackets: UInt8
    public var opcode: HCIOpcode

    public init(status: HCIStatus, numHCICommandPackets: UInt8 = 1, opcode: HCIOpcode) {
        self.status = status
        self.numHCICommandPackets = numHCICommandPackets
        self.opcode = opcode
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status"))
        numHCICommandPackets = try r.u8("numHCICommandPackets")
        opcode = HCIOpcode(rawValue: try r.u16("commandOpcode"))
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(status.rawValue)
        w.u8(numHCICommandPackets)
        w.u16(opcode.rawValue)
    }

    public var fields: [Field] {
        [.code("status", status.rawValue, note: status.name),
         .int("numHCICommandPackets", numHCICommandPackets),
         .code("commandOpcode", opcode.rawValue, note: opcode.name)]
    }
}
