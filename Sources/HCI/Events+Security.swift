// Encryption and controller-health events. Core Vol 4 Part E 7.7.8 (v1 and v2), 7.7.16, 7.7.26, 7.7.39.

/// Encryption Change [v1] (0x08).
public struct EncryptionChange: HCIEventParameters, Equatable {
    public static let eventCode: UInt8 = 0x08
    public static let name = "Encryption Change"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    /// 0x00 off, 0x01 on (AES-CCM for LE).
    public var encryptionEnabled: UInt8
    public init(status: HCIStatus = .success, connectionHandle: UInt16, encryptionEnabled: UInt8) {
        self.status = status; self.connectionHandle = connectionHandle; self.encryptionEnabled = encryptionEnabled
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status")); connectionHandle = try r.handle(); encryptionEnabled = try r.u8("encryptionEnabled")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(status.rawValue); w.u16(connectionHandle); w.u8(encryptionEnabled) }
    public var fields: [Field] {
        [.status(status), .handle(connectionHandle), .code("encryptionEnabled", encryptionEnabled, note: encryptionEnabled == 0 ? "off" : "on")]
    }
}

/// Encryption Change [v2] (0x59): adds the key size.
public struct EncryptionChangeV2: HCIEventParameters, Equatable {
    public static let eventCode: UInt8 = 0x59
    public static let name = "Encryption Change [v2]"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    public var encryptionEnabled: UInt8
    public var encryptionKeySize: UInt8
    public init(status: HCIStatus = .success, connectionHandle: UInt16, encryptionEnabled: UInt8, encryptionKeySize: UInt8) {
        self.status = status; self.connectionHandle = connectionHandle
        self.encryptionEnabled = encryptionEnabled; self.encryptionKeySize = encryptionKeySize
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status")); connectionHandle = try r.handle()
        encryptionEnabled = try r.u8("encryptionEnabled"); encryptionKeySize = try r.u8("encryptionKeySize")
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(status.rawValue); w.u16(connectionHandle); w.u8(encryptionEnabled); w.u8(encryptionKeySize)
    }
    public var fields: [Field] {
        [.status(status), .handle(connectionHandle),
         .code("encryptionEnabled", encryptionEnabled, note: encryptionEnabled == 0 ? "off" : "on"),
         .int("encryptionKeySize", encryptionKeySize)]
    }
}

/// Encryption Key Refresh Complete (0x30).
public struct EncryptionKeyRefreshComplete: HCIEventParameters, Equatable {
    public static let eventCode: UInt8 = 0x30
    public static let name = "Encryption Key Refresh Complete"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    public init(status: HCIStatus = .success, connectionHandle: UInt16) { self.status = status; self.connectionHandle = connectionHandle }
    public init(parameters r: inout ByteReader) throws(DecodeError) { status = HCIStatus(try r.u8("status")); connectionHandle = try r.handle() }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(status.rawValue); w.u16(connectionHandle) }
    public var fields: [Field] { [.status(status), .handle(connectionHandle)] }
}

/// Hardware Error (0x10).
public struct HardwareError: HCIEventParameters, Equatable {
    public static let eventCode: UInt8 = 0x10
    public static let name = "Hardware Error"
    public var hardwareCode: UInt8
    public init(hardwareCode: UInt8) { self.hardwareCode = hardwareCode }
    public init(parameters r: inout ByteReader) throws(DecodeError) { hardwareCode = try r.u8("hardwareCode") }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(hardwareCode) }
    public var fields: [Field] { [.code("hardwareCode", hardwareCode)] }
}

/// Data Buffer Overflow (0x1A).
public struct DataBufferOverflow: HCIEventParameters, Equatable {
    public static let eventCode: UInt8 = 0x1A
    public static let name = "Data Buffer Overflow"
    /// 0x00 synchronous, 0x01 ACL.
    public var linkType: UInt8
    public init(linkType: UInt8 = 1) { self.linkType = linkType }
    public init(parameters r: inout ByteReader) throws(DecodeError) { linkType = try r.u8("linkType") }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(linkType) }
    public var fields: [Field] { [.code("linkType", linkType, note: linkType == 1 ? "ACL" : linkType == 0 ? "synchronous" : "reserved")] }
}
