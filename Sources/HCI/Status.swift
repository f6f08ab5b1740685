// HCIStatus, its constants and names: Tools/pdl/hci-codes.pdl (Generated/Codes.swift).
extension HCIStatus {
    public var isSuccess: Bool { rawValue == 0 }
}

/// A command or procedure that failed with an HCI status: carries the code and its name.
public struct HCIError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: HCIStatus
    public var opcode: HCIOpcode?

    public init(_ status: HCIStatus, opcode: HCIOpcode? = nil) {
        self.status = status
        self.opcode = opcode
    }

    public var description: String {
        if let opcode { return "\(opcode.name) failed: \(status)" }
        return "\(status)"
    }
}
