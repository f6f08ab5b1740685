// Controller & Baseband (OGF 0x03), Informational (OGF 0x04) and Link Control (OGF 0x01)
// commands a BLE host uses. Core Vol 4 Part E 7.1, 7.3, 7.4.

/// Reset (0x0C03).
public struct Reset: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerAndBaseband, ocf: 0x0003)
    public static let name = "Reset"
    public init() {}
}

/// Set Event Mask (0x0C01).
public struct SetEventMask: HCICommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerAndBaseband, ocf: 0x0001)
    public static let name = "Set Event Mask"
    public var eventMask: UInt64
    public init(eventMask: UInt64) { self.eventMask = eventMask }
    public init(parameters r: inout ByteReader) throws(DecodeError) { eventMask = try r.u64("eventMask") }
    public func encodeParameters(into w: inout ByteWriter) { w.u64(eventMask) }
    public var fields: [Field] { [.code("eventMask", eventMask)] }
}

/// Read Local Version Information (0x1001).
public struct ReadLocalVersionInformation: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0001)
    public static let name = "Read Local Version Information"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var hciVersion: UInt8
        public var hciSubversion: UInt16
        public var lmpVersion: UInt8
        public var companyIdentifier: UInt16
        public var lmpSubversion: UInt16

        public init(hciVersion: UInt8, hciSubversion: UInt16, lmpVersion: UInt8, companyIdentifier: UInt16, lmpSubversion: UInt16) {
            self.hciVersion = hciVersion
            self.hciSubversion = hciSubversion
            self.lmpVersion = lmpVersion
            self.companyIdentifier = companyIdentifier
            self.lmpSubversion = lmpSubversion
        }

        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            hciVersion = try r.u8("hciVersion")
            hciSubversion = try r.u16("hciSubversion")
            lmpVersion = try r.u8("lmpVersion")
            companyIdentifier = try r.u16("companyIdentifier")
            lmpSubversion = try r.u16("lmpSubversion")
        }

        public func encode(into w: inout ByteWriter) {
            w.u8(hciVersion); w.u16(hciSubversion); w.u8(lmpVersion); w.u16(companyIdentifier); w.u16(lmpSubversion)
        }

        public var fields: [Field] {
            [.code("hciVersion", hciVersion, note: coreVersionName(hciVersion)),
             .code("hciSubversion", hciSubversion),
             .code("lmpVersion", lmpVersion, note: coreVersionName(lmpVersion)),
             .code("companyIdentifier", companyIdentifier),
             .code("lmpSubversion", lmpSubversion)]
        }
    }
}

/// Read BD_ADDR (0x1009).
public struct ReadBDADDR: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0009)
    public static let name = "Read BD_ADDR"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var address: BDAddress
        public init(address: BDAddress) { self.address = address }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { address = try r.address("bdAddr") }
        public func encode(into w: inout ByteWriter) { w.address(address) }
        public var fields: [Field] { [.address("bdAddr", address)] }
    }
}

/// Disconnect (0x0406): answered by Command Status, then Disconnection Complete.
public struct Disconnect: HCICommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.linkControl, ocf: 0x0006)
    public static let name = "Disconnect"
    public static var completesWithStatus: Bool { true }
    public var connectionHandle: UInt16
    public var reason: HCIStatus

    public init(connectionHandle: UInt16, reason: HCIStatus = .remoteUserTerminated) {
        self.connectionHandle = connectionHandle
        self.reason = reason
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.u16("connectionHandle")
        reason = HCIStatus(try r.u8("reason"))
    }

    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle); w.u8(reason.rawValue) }

    public var fields: [Field] {
        [.int("connectionHandle", connectionHandle), .code("reason", reason.rawValue, note: reason.name)]
    }
}

/// Bluetooth Core version names used for HCI/LMP/LL version numbers (Assigned Numbers 2.1).
public func coreVersionName(_ v: UInt8) -> String {
    let names = ["1.0b", "1.1", "1.2", "2.0+EDR", "2.1+EDR", "3.0+HS", "4.0", "4.1", "4.2", "5.0", "5.1", "5.2", "5.3", "5.4", "6.0", "6.1"]
    return Int(v) < names.count ? "Bluetooth \(names[Int(v)])" : "Bluetooth (\(v))"
}
