/// A 16-bit HCI command opcode: OGF (6 bits) and OCF (10 bits).
public struct HCIOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(ogf: UInt8, ocf: UInt16) { rawValue = UInt16(ogf) << 10 | (ocf & 0x03ff) }

    public var ogf: UInt8 { UInt8(rawValue >> 10) }
    public var ocf: UInt16 { rawValue & 0x03ff }

    /// The specification's command name (the stack's own commands, then the catalog of every
    /// other command, Tools/pdl/hci-catalog.pdl); "Vendor Command 0x…" for a vendor command no
    /// public specification names, else "Unknown" with OGF/OCF.
    public var name: String {
        if let t = HCICommands.type(for: self) { return t.name }
        if let e = HCICatalog.command(self) { return e.name }
        if ogf == Self.vendor { return vendorName }
        return "Unknown Command (OGF \(hexCode(ogf)), OCF \(hexCode(ocf, digits: 4)))"
    }

    public var description: String { "\(name) (\(hexCode(rawValue)))" }

    public static let linkControl: UInt8 = 0x01
    public static let controllerAndBaseband: UInt8 = 0x03
    public static let informational: UInt8 = 0x04
    public static let statusParameters: UInt8 = 0x05
    public static let le: UInt8 = 0x08
    public static let vendor: UInt8 = 0x3f
}

/// The parameters of one kind of HCI packet (a command, an event, an LE Meta subevent): one
/// type decodes, encodes and describes them, under the specification's name.
public protocol HCIParameters: Sendable, FieldDescribable {
    /// The specification's name ("LE Set Advertising Parameters", "Disconnection Complete").
    static var name: String { get }
    init(parameters: inout ByteReader) throws(DecodeError)
    func encodeParameters(into w: inout ByteWriter)
}

/// A typed HCI command. The same type encodes (host), decodes (virtual controller, `dump`)
/// and describes itself (`--trace`).
public protocol HCICommand: HCIParameters {
    /// Return parameters of Command Complete after the Status octet.
    associatedtype ReturnParameters: HCIReturnParameters = NoReturnParameters
    static var opcode: HCIOpcode { get }
    /// True when the controller answers with Command Status and the result comes later in
    /// another event (LE Create Connection, Disconnect, ...), false for Command Complete.
    static var completesWithStatus: Bool { get }
}

extension HCICommand {
    public static var completesWithStatus: Bool { false }

    public var packet: HCICommandPacket {
        var w = ByteWriter()
        encodeParameters(into: &w)
        return HCICommandPacket(opcode: Self.opcode, parameters: w.bytes)
    }

    /// Decodes a command's parameters, rejecting trailing bytes.
    public static func decode(_ parameters: [UInt8]) throws(DecodeError) -> Self {
        var r = ByteReader(parameters)
        let c = try Self(parameters: &r)
        try r.expectEnd(name)
        return c
    }
}

/// Return parameters of a command's Command Complete, after Status.
public protocol HCIReturnParameters: Sendable, FieldDescribable {
    init(returnParameters: inout ByteReader) throws(DecodeError)
    func encode(into w: inout ByteWriter)
}

/// For commands whose Command Complete carries only Status.
public struct NoReturnParameters: HCIReturnParameters, Equatable {
    public init() {}
    public init(returnParameters: inout ByteReader) throws(DecodeError) {}
    public func encode(into w: inout ByteWriter) {}
    public var fields: [Field] { [] }
}

/// Commands without parameters share this shape.
public protocol HCIParameterlessCommand: HCICommand {
    init()
}

extension HCIParameterlessCommand {
    public init(parameters: inout ByteReader) throws(DecodeError) { self.init() }
    public func encodeParameters(into w: inout ByteWriter) {}
    public var fields: [Field] { [] }
}

/// The registry of typed commands, by opcode: used by `dump`, `--trace` and the virtual
/// controller to turn a raw command packet back into a typed value.
public enum HCICommands {
    public static func type(for opcode: HCIOpcode) -> (any HCICommand.Type)? { byOpcode[opcode.rawValue] }

    /// Decodes a command packet into its typed value (nil for an opcode the stack doesn't know).
    public static func decode(_ packet: HCICommandPacket) throws(DecodeError) -> (any HCICommand)? {
        guard let t = type(for: packet.opcode) else { return nil }
        return try t.decode(packet.parameters)
    }

    /// Decodes the return parameters (after Status) of `opcode`'s Command Complete.
    public static func decodeReturn(opcode: HCIOpcode, _ bytes: [UInt8]) throws(DecodeError) -> (any HCIReturnParameters)? {
        try decodeReturn(opcode: opcode, from: ByteReader(bytes))
    }

    /// The same, read from `reader` in place (Command Complete reads them after its Status).
    public static func decodeReturn(opcode: HCIOpcode, from reader: ByteReader) throws(DecodeError) -> (any HCIReturnParameters)? {
        guard let t = type(for: opcode) else { return nil }
        return try t.decodeReturnParameters(reader)
    }

    private static let byOpcode: [UInt16: any HCICommand.Type] = {
        var d: [UInt16: any HCICommand.Type] = [:]
        for t in allCommandTypes { d[t.opcode.rawValue] = t }
        return d
    }()
}

extension HCICommand {
    static func decodeReturnParameters(_ reader: ByteReader) throws(DecodeError) -> any HCIReturnParameters {
        var r = reader
        return try ReturnParameters(returnParameters: &r)
    }
}

extension HCICommand {
    /// The type of `ReturnParameters` (NoReturnParameters when Command Complete carries only Status).
    public static var returnParametersType: any HCIReturnParameters.Type { ReturnParameters.self }
}
