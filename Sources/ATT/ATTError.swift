import HCI

/// An ATT Error Code (Core Vol 3 Part F 3.4.1.1 Table 3.4; common profile errors from the
/// Core Specification Supplement Part B).
public struct ATTErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    // The codes the specification defines and their names: Generated/ATT.swift (from
    // Tools/pdl/att.pdl).

    /// 0x80–0x9F: defined by a higher layer specification (the application).
    public static func application(_ offset: UInt8) -> ATTErrorCode { ATTErrorCode(0x80 | (offset & 0x1F)) }
    public var isApplicationError: Bool { (0x80...0x9F).contains(rawValue) }

    /// The specification's name ("Write Not Permitted").
    public var name: String {
        if let n = definedName { return n }
        switch rawValue {
        case 0x80...0x9F: return "Application Error"
        case 0xE0...0xFB: return "Reserved for Common Profile and Service Error Codes"
        default: return "Reserved"
        }
    }

    /// "Write Not Permitted (0x03)".
    public var description: String { "\(name) (\(hexCode(rawValue)))" }
}

/// A request that the peer answered with an Error Response (or that we refuse with one).
public struct ATTError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: ATTErrorCode
    /// The opcode of the request in error.
    public var requestOpcode: ATTOpcode
    /// The attribute handle in error (0x0000 when none).
    public var handle: UInt16

    public init(_ code: ATTErrorCode, requestOpcode: ATTOpcode, handle: UInt16 = 0) {
        self.code = code
        self.requestOpcode = requestOpcode
        self.handle = handle
    }

    /// "Write Not Permitted (0x03)".
    public var description: String { code.description }

    /// The Error Response PDU that carries this error.
    public var pdu: ATTPDU { .errorResponse(requestOpcode: requestOpcode, handle: handle, error: code) }
}
