// Controller & Baseband (OGF 0x03), Informational (OGF 0x04) and Link Control (OGF 0x01)
// commands a BLE host uses. Core Vol 4 Part E 7.1, 7.3, 7.4.

/// Bluetooth Core version names used for HCI/LMP/LL version numbers (Assigned Numbers 2.1).
public func coreVersionName(_ v: UInt8) -> String {
    let names = ["1.0b", "1.1", "1.2", "2.0+EDR", "2.1+EDR", "3.0+HS", "4.0", "4.1", "4.2", "5.0", "5.1", "5.2", "5.3", "5.4", "6.0", "6.1"]
    return Int(v) < names.count ? "Bluetooth \(names[Int(v)])" : "Bluetooth (\(v))"
}

extension SetEventMask {
    /// The bits: Tools/pdl/hci-codes.pdl (Generated/Codes.swift).
    public typealias Mask = EventMask
    public init(_ mask: Mask) { self.init(eventMask: mask.rawValue) }
}

extension EventMask {
    /// What an LE-only host enables.
    public static let leHost: EventMask = [.disconnectionComplete, .encryptionChange, .hardwareError,
                                           .dataBufferOverflow, .encryptionKeyRefreshComplete, .leMeta]
}

/// Read Local Supported Commands (0x1002).
public struct ReadLocalSupportedCommands: HCIParameterlessCommand, Equatable {
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        /// 64 octets; bit (octet, bit) set when the command is supported (Core Vol 4 Part E 6.27).
        public var supportedCommands: [UInt8]
        public init(supportedCommands: [UInt8]) {
            self.supportedCommands = Array(supportedCommands.prefix(64)) + Array(repeating: 0, count: Swift.max(0, 64 - supportedCommands.count))
        }
        /// A bitmask claiming every command in `opcodes`.
        public init(supporting opcodes: [HCIOpcode]) {
            var bits = [UInt8](repeating: 0, count: 64)
            for op in opcodes {
                if let p = ReadLocalSupportedCommands.bitPosition(op) { bits[p.octet] |= 1 << p.bit }
            }
            self.init(supportedCommands: bits)
        }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { supportedCommands = try r.bytes(64, "supportedCommands") }
        public func encode(into w: inout ByteWriter) { w.append(supportedCommands) }

        /// True when the bitmask claims `opcode`. Read Local Supported Commands itself is
        /// mandatory and has no bit; an opcode missing from the table answers false.
        public func supports(_ opcode: HCIOpcode) -> Bool {
            if opcode == ReadLocalSupportedCommands.opcode { return true }
            guard let p = ReadLocalSupportedCommands.bitPosition(opcode), p.octet < supportedCommands.count else { return false }
            return supportedCommands[p.octet] & (1 << p.bit) != 0
        }

        public var fields: [Field] { [.bytes("supportedCommands", supportedCommands)] }
    }

    /// Octet and bit of `opcode` in the Supported_Commands bitmask (Core Vol 4 Part E 6.27),
    /// for the commands this stack uses.
    public static func bitPosition(_ opcode: HCIOpcode) -> (octet: Int, bit: Int)? {
        supportedCommandBits[opcode.rawValue]
    }
}

extension ReadLocalSupportedFeatures.ReturnParameters {
    /// Octet 4 bit 6: "LE Supported (Controller)" (Core Vol 2 Part C 3.3).
    public var leSupportedController: Bool { lmpFeatures & (1 << 38) != 0 }
    /// Octet 4 bit 5: "BR/EDR Not Supported".
    public var brEDRNotSupported: Bool { lmpFeatures & (1 << 37) != 0 }
}

extension ReadLocalName.ReturnParameters {
    /// The name up to its first zero octet (Core Vol 4 Part E 7.3.12: null-terminated unless 248 octets long).
    public var name: String { String(decoding: localName.prefix { $0 != 0 }, as: UTF8.self) }
    public init(name: String) { self.init(localName: Array(Array(name.utf8).prefix(248))) }
}
