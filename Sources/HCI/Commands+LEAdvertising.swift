// Legacy LE advertising and scanning commands. Core Vol 4 Part E 7.8.5-7.8.11.

/// Advertising_Type of LE Set Advertising Parameters.
public func legacyAdvertisingTypeName(_ v: UInt8) -> String {
    switch v {
    case 0x00: "ADV_IND"
    case 0x01: "ADV_DIRECT_IND (high duty cycle)"
    case 0x02: "ADV_SCAN_IND"
    case 0x03: "ADV_NONCONN_IND"
    case 0x04: "ADV_DIRECT_IND (low duty cycle)"
    default: "reserved"
    }
}

/// LE Set Advertising Parameters (0x2006).
public struct LESetAdvertisingParameters: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0006)
    public static let name = "LE Set Advertising Parameters"
    public var advertisingIntervalMin: UInt16
    public var advertisingIntervalMax: UInt16
    public var advertisingType: UInt8
    public var ownAddressType: AddressType
    public var peerAddressType: AddressType
    public var peerAddress: BDAddress
    public var advertisingChannelMap: UInt8
    public var advertisingFilterPolicy: UInt8

    public init(advertisingIntervalMin: UInt16 = 0x0800, advertisingIntervalMax: UInt16 = 0x0800, advertisingType: UInt8 = 0,
                ownAddressType: AddressType = .public, peerAddressType: AddressType = .public, peerAddress: BDAddress = .zero,
                advertisingChannelMap: UInt8 = 0x07, advertisingFilterPolicy: UInt8 = 0) {
        self.advertisingIntervalMin = advertisingIntervalMin; self.advertisingIntervalMax = advertisingIntervalMax
        self.advertisingType = advertisingType; self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType; self.peerAddress = peerAddress
        self.advertisingChannelMap = advertisingChannelMap; self.advertisingFilterPolicy = advertisingFilterPolicy
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        advertisingIntervalMin = try r.u16("advertisingIntervalMin")
        advertisingIntervalMax = try r.u16("advertisingIntervalMax")
        advertisingType = try r.u8("advertisingType")
        ownAddressType = try r.addressType("ownAddressType")
        peerAddressType = try r.addressType("peerAddressType")
        peerAddress = try r.address("peerAddress")
        advertisingChannelMap = try r.u8("advertisingChannelMap")
        advertisingFilterPolicy = try r.u8("advertisingFilterPolicy")
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u16(advertisingIntervalMin); w.u16(advertisingIntervalMax); w.u8(advertisingType)
        w.u8(ownAddressType.rawValue); w.u8(peerAddressType.rawValue); w.address(peerAddress)
        w.u8(advertisingChannelMap); w.u8(advertisingFilterPolicy)
    }

    public var fields: [Field] {
        [.interval("advertisingIntervalMin", advertisingIntervalMin, unitMicroseconds: 625),
         .interval("advertisingIntervalMax", advertisingIntervalMax, unitMicroseconds: 625),
         .code("advertisingType", advertisingType, note: legacyAdvertisingTypeName(advertisingType)),
         .addressType("ownAddressType", ownAddressType),
         .addressType("peerAddressType", peerAddressType),
         .address("peerAddress", peerAddress, type: peerAddressType),
         .code("advertisingChannelMap", advertisingChannelMap),
         .code("advertisingFilterPolicy", advertisingFilterPolicy)]
    }
}

/// LE Read Advertising Physical Channel Tx Power (0x2007).
public struct LEReadAdvertisingPhysicalChannelTxPower: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0007)
    public static let name = "LE Read Advertising Physical Channel Tx Power"
    public init() {}
    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var txPowerLevel: Int8
        public init(txPowerLevel: Int8) { self.txPowerLevel = txPowerLevel }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { txPowerLevel = try r.i8("txPowerLevel") }
        public func encode(into w: inout ByteWriter) { w.i8(txPowerLevel) }
        public var fields: [Field] { [.dBm("txPowerLevel", txPowerLevel)] }
    }
}

/// Legacy advertising or scan response data: a length octet and always 31 data octets.
func decodeLegacyData(_ r: inout ByteReader, _ what: String) throws(DecodeError) -> [UInt8] {
    let n = Int(try r.u8("dataLength"))
    let all = try r.bytes(31, "data")
    guard n <= 31 else { throw .invalid("\(what) length \(n) exceeds 31") }
    return Array(all.prefix(n))
}

/// LE Set Advertising Data (0x2008).
public struct LESetAdvertisingData: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0008)
    public static let name = "LE Set Advertising Data"
    /// The significant part (at most 31 octets); the command pads it to 31.
    public var advertisingData: [UInt8]
    public init(advertisingData: [UInt8]) { self.advertisingData = Array(advertisingData.prefix(31)) }
    public init(parameters r: inout ByteReader) throws(DecodeError) { advertisingData = try decodeLegacyData(&r, "advertising data") }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(UInt8(Swift.min(advertisingData.count, 31))); w.padded(advertisingData, to: 31)
    }
    public var fields: [Field] {
        [.int("advertisingDataLength", advertisingData.count), .bytes("advertisingData", advertisingData)]
    }
}

/// LE Set Scan Response Data (0x2009).
public struct LESetScanResponseData: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0009)
    public static let name = "LE Set Scan Response Data"
    public var scanResponseData: [UInt8]
    public init(scanResponseData: [UInt8]) { self.scanResponseData = Array(scanResponseData.prefix(31)) }
    public init(parameters r: inout ByteReader) throws(DecodeError) { scanResponseData = try decodeLegacyData(&r, "scan response data") }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(UInt8(Swift.min(scanResponseData.count, 31))); w.padded(scanResponseData, to: 31)
    }
    public var fields: [Field] {
        [.int("scanResponseDataLength", scanResponseData.count), .bytes("scanResponseData", scanResponseData)]
    }
}

/// LE Set Advertising Enable (0x200A).
public struct LESetAdvertisingEnable: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x000A)
    public static let name = "LE Set Advertising Enable"
    public var advertisingEnable: Bool
    public init(advertisingEnable: Bool) { self.advertisingEnable = advertisingEnable }
    public init(parameters r: inout ByteReader) throws(DecodeError) { advertisingEnable = try r.u8("advertisingEnable") != 0 }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(advertisingEnable ? 1 : 0) }
    public var fields: [Field] { [.code("advertisingEnable", UInt8(advertisingEnable ? 1 : 0), note: advertisingEnable ? "enabled" : "disabled")] }
}

/// LE Set Scan Parameters (0x200B).
public struct LESetScanParameters: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x000B)
    public static let name = "LE Set Scan Parameters"
    /// 0x00 passive, 0x01 active.
    public var leScanType: UInt8
    public var leScanInterval: UInt16
    public var leScanWindow: UInt16
    public var ownAddressType: AddressType
    public var scanningFilterPolicy: UInt8

    public init(leScanType: UInt8 = 1, leScanInterval: UInt16 = 0x0010, leScanWindow: UInt16 = 0x0010,
                ownAddressType: AddressType = .public, scanningFilterPolicy: UInt8 = 0) {
        self.leScanType = leScanType; self.leScanInterval = leScanInterval; self.leScanWindow = leScanWindow
        self.ownAddressType = ownAddressType; self.scanningFilterPolicy = scanningFilterPolicy
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        leScanType = try r.u8("leScanType"); leScanInterval = try r.u16("leScanInterval")
        leScanWindow = try r.u16("leScanWindow"); ownAddressType = try r.addressType("ownAddressType")
        scanningFilterPolicy = try r.u8("scanningFilterPolicy")
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(leScanType); w.u16(leScanInterval); w.u16(leScanWindow); w.u8(ownAddressType.rawValue); w.u8(scanningFilterPolicy)
    }
    public var fields: [Field] {
        [.code("leScanType", leScanType, note: leScanType == 0 ? "passive" : "active"),
         .interval("leScanInterval", leScanInterval, unitMicroseconds: 625),
         .interval("leScanWindow", leScanWindow, unitMicroseconds: 625),
         .addressType("ownAddressType", ownAddressType),
         .code("scanningFilterPolicy", scanningFilterPolicy)]
    }
}

/// LE Set Scan Enable (0x200C).
public struct LESetScanEnable: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x000C)
    public static let name = "LE Set Scan Enable"
    public var leScanEnable: Bool
    public var filterDuplicates: Bool
    public init(leScanEnable: Bool, filterDuplicates: Bool = false) { self.leScanEnable = leScanEnable; self.filterDuplicates = filterDuplicates }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        leScanEnable = try r.u8("leScanEnable") != 0; filterDuplicates = try r.u8("filterDuplicates") != 0
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(leScanEnable ? 1 : 0); w.u8(filterDuplicates ? 1 : 0) }
    public var fields: [Field] {
        [.code("leScanEnable", UInt8(leScanEnable ? 1 : 0), note: leScanEnable ? "enabled" : "disabled"),
         .code("filterDuplicates", UInt8(filterDuplicates ? 1 : 0), note: filterDuplicates ? "enabled" : "disabled")]
    }
}
