/// HCI error codes (Core Vol 1 Part F, "Controller Error Codes"), used as Status and Reason.
public struct HCIStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(_ rawValue: UInt8) { self.rawValue = rawValue }

    public static let success = HCIStatus(0x00)
    public static let unknownCommand = HCIStatus(0x01)
    public static let unknownConnectionIdentifier = HCIStatus(0x02)
    public static let hardwareFailure = HCIStatus(0x03)
    public static let authenticationFailure = HCIStatus(0x05)
    public static let pinOrKeyMissing = HCIStatus(0x06)
    public static let memoryCapacityExceeded = HCIStatus(0x07)
    public static let connectionTimeout = HCIStatus(0x08)
    public static let connectionAlreadyExists = HCIStatus(0x0B)
    public static let commandDisallowed = HCIStatus(0x0C)
    public static let invalidParameters = HCIStatus(0x12)
    public static let remoteUserTerminated = HCIStatus(0x13)
    public static let remoteLowResources = HCIStatus(0x14)
    public static let remotePowerOff = HCIStatus(0x15)
    public static let localHostTerminated = HCIStatus(0x16)
    public static let unsupportedRemoteFeature = HCIStatus(0x1A)
    public static let unspecifiedError = HCIStatus(0x1F)
    public static let unsupportedParameterValue = HCIStatus(0x11)
    public static let instantPassed = HCIStatus(0x28)
    public static let insufficientSecurity = HCIStatus(0x2F)
    public static let connectionTerminatedMICFailure = HCIStatus(0x3D)
    public static let connectionFailedToBeEstablished = HCIStatus(0x3E)
    public static let unknownAdvertisingIdentifier = HCIStatus(0x42)
    public static let advertisingTimeout = HCIStatus(0x3C)
    public static let operationCancelledByHost = HCIStatus(0x44)

    public var isSuccess: Bool { rawValue == 0 }

    /// The specification's name for the code.
    public var name: String { hciStatusNames[Int(rawValue)] ?? "Unknown Error Code" }

    public var description: String { "\(name) (\(hexCode(rawValue)))" }
}

private let hciStatusNames: [Int: String] = [
    0x00: "Success",
    0x01: "Unknown HCI Command",
    0x02: "Unknown Connection Identifier",
    0x03: "Hardware Failure",
    0x04: "Page Timeout",
    0x05: "Authentication Failure",
    0x06: "PIN or Key Missing",
    0x07: "Memory Capacity Exceeded",
    0x08: "Connection Timeout",
    0x09: "Connection Limit Exceeded",
    0x0A: "Synchronous Connection Limit To A Device Exceeded",
    0x0B: "Connection Already Exists",
    0x0C: "Command Disallowed",
    0x0D: "Connection Rejected due to Limited Resources",
    0x0E: "Connection Rejected Due To Security Reasons",
    0x0F: "Connection Rejected due to Unacceptable BD_ADDR",
    0x10: "Connection Accept Timeout Exceeded",
    0x11: "Unsupported Feature or Parameter Value",
    0x12: "Invalid HCI Command Parameters",
    0x13: "Remote User Terminated Connection",
    0x14: "Remote Device Terminated Connection due to Low Resources",
    0x15: "Remote Device Terminated Connection due to Power Off",
    0x16: "Connection Terminated By Local Host",
    0x17: "Repeated Attempts",
    0x18: "Pairing Not Allowed",
    0x19: "Unknown LMP PDU",
    0x1A: "Unsupported Remote Feature",
    0x1B: "SCO Offset Rejected",
    0x1C: "SCO Interval Rejected",
    0x1D: "SCO Air Mode Rejected",
    0x1E: "Invalid LMP Parameters / Invalid LL Parameters",
    0x1F: "Unspecified Error",
    0x20: "Unsupported LMP Parameter Value / Unsupported LL Parameter Value",
    0x21: "Role Change Not Allowed",
    0x22: "LMP Response Timeout / LL Response Timeout",
    0x23: "LMP Error Transaction Collision / LL Procedure Collision",
    0x24: "LMP PDU Not Allowed",
    0x25: "Encryption Mode Not Acceptable",
    0x26: "Link Key cannot be Changed",
    0x27: "Requested QoS Not Supported",
    0x28: "Instant Passed",
    0x29: "Pairing With Unit Key Not Supported",
    0x2A: "Different Transaction Collision",
    0x2C: "QoS Unacceptable Parameter",
    0x2D: "QoS Rejected",
    0x2E: "Channel Classification Not Supported",
    0x2F: "Insufficient Security",
    0x30: "Parameter Out Of Mandatory Range",
    0x32: "Role Switch Pending",
    0x34: "Reserved Slot Violation",
    0x35: "Role Switch Failed",
    0x36: "Extended Inquiry Response Too Large",
    0x37: "Secure Simple Pairing Not Supported By Host",
    0x38: "Host Busy - Pairing",
    0x39: "Connection Rejected due to No Suitable Channel Found",
    0x3A: "Controller Busy",
    0x3B: "Unacceptable Connection Parameters",
    0x3C: "Advertising Timeout",
    0x3D: "Connection Terminated due to MIC Failure",
    0x3E: "Connection Failed to be Established / Synchronization Timeout",
    0x40: "Coarse Clock Adjustment Rejected but Will Try to Adjust Using Clock Dragging",
    0x41: "Type0 Submap Not Defined",
    0x42: "Unknown Advertising Identifier",
    0x43: "Limit Reached",
    0x44: "Operation Cancelled by Host",
    0x45: "Packet Too Long",
    0x46: "Too Late",
    0x47: "Too Early",
    0x48: "Insufficient Channels",
]

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
