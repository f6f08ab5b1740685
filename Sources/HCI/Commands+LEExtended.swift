// LE extended advertising, extended scanning and extended connection commands.
// Core Vol 4 Part E 7.8.52-7.8.66.

// AdvertisingEventProperties and LEFeatures: Tools/pdl/hci-codes.pdl (Generated/Codes.swift).

/// LE Set Extended Advertising Parameters [v1] (0x2036).
public struct LESetExtendedAdvertisingParameters: HCICommand, Equatable {
    public var advertisingHandle: UInt8
    public var advertisingEventProperties: AdvertisingEventProperties
    /// 24-bit, units of 0.625 ms.
    public var primaryAdvertisingIntervalMin: UInt32
    public var primaryAdvertisingIntervalMax: UInt32
    public var primaryAdvertisingChannelMap: UInt8
    public var ownAddressType: AddressType
    public var peerAddressType: AddressType
    public var peerAddress: BDAddress
    public var advertisingFilterPolicy: UInt8
    /// 127 = host has no preference.
    public var advertisingTxPower: Int8
    public var primaryAdvertisingPHY: UInt8
    public var secondaryAdvertisingMaxSkip: UInt8
    public var secondaryAdvertisingPHY: UInt8
    public var advertisingSID: UInt8
    public var scanRequestNotificationEnable: UInt8

    public init(advertisingHandle: UInt8 = 0, advertisingEventProperties: AdvertisingEventProperties = [.connectable, .scannable, .legacy],
                primaryAdvertisingIntervalMin: UInt32 = 0x0800, primaryAdvertisingIntervalMax: UInt32 = 0x0800,
                primaryAdvertisingChannelMap: UInt8 = 0x07, ownAddressType: AddressType = .public,
                peerAddressType: AddressType = .public, peerAddress: BDAddress = .zero, advertisingFilterPolicy: UInt8 = 0,
                advertisingTxPower: Int8 = 127, primaryAdvertisingPHY: UInt8 = 1, secondaryAdvertisingMaxSkip: UInt8 = 0,
                secondaryAdvertisingPHY: UInt8 = 1, advertisingSID: UInt8 = 0, scanRequestNotificationEnable: UInt8 = 0) {
        self.advertisingHandle = advertisingHandle; self.advertisingEventProperties = advertisingEventProperties
        self.primaryAdvertisingIntervalMin = primaryAdvertisingIntervalMin & 0xFFFFFF
        self.primaryAdvertisingIntervalMax = primaryAdvertisingIntervalMax & 0xFFFFFF
        self.primaryAdvertisingChannelMap = primaryAdvertisingChannelMap; self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType; self.peerAddress = peerAddress
        self.advertisingFilterPolicy = advertisingFilterPolicy; self.advertisingTxPower = advertisingTxPower
        self.primaryAdvertisingPHY = primaryAdvertisingPHY; self.secondaryAdvertisingMaxSkip = secondaryAdvertisingMaxSkip
        self.secondaryAdvertisingPHY = secondaryAdvertisingPHY; self.advertisingSID = advertisingSID
        self.scanRequestNotificationEnable = scanRequestNotificationEnable
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        advertisingHandle = try r.u8("advertisingHandle")
        advertisingEventProperties = AdvertisingEventProperties(rawValue: try r.u16("advertisingEventProperties"))
        primaryAdvertisingIntervalMin = try r.u24("primaryAdvertisingIntervalMin")
        primaryAdvertisingIntervalMax = try r.u24("primaryAdvertisingIntervalMax")
        primaryAdvertisingChannelMap = try r.u8("primaryAdvertisingChannelMap")
        ownAddressType = try r.addressType("ownAddressType")
        peerAddressType = try r.addressType("peerAddressType")
        peerAddress = try r.address("peerAddress")
        advertisingFilterPolicy = try r.u8("advertisingFilterPolicy")
        advertisingTxPower = try r.i8("advertisingTxPower")
        primaryAdvertisingPHY = try r.u8("primaryAdvertisingPHY")
        secondaryAdvertisingMaxSkip = try r.u8("secondaryAdvertisingMaxSkip")
        secondaryAdvertisingPHY = try r.u8("secondaryAdvertisingPHY")
        advertisingSID = try r.u8("advertisingSID")
        scanRequestNotificationEnable = try r.u8("scanRequestNotificationEnable")
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(advertisingHandle); w.u16(advertisingEventProperties.rawValue)
        w.u24(primaryAdvertisingIntervalMin); w.u24(primaryAdvertisingIntervalMax)
        w.u8(primaryAdvertisingChannelMap); w.u8(ownAddressType.rawValue); w.u8(peerAddressType.rawValue)
        w.address(peerAddress); w.u8(advertisingFilterPolicy); w.i8(advertisingTxPower)
        w.u8(primaryAdvertisingPHY); w.u8(secondaryAdvertisingMaxSkip); w.u8(secondaryAdvertisingPHY)
        w.u8(advertisingSID); w.u8(scanRequestNotificationEnable)
    }

    public var fields: [Field] {
        [.int("advertisingHandle", advertisingHandle),
         .code("advertisingEventProperties", advertisingEventProperties.rawValue, note: advertisingEventProperties.description),
         .interval("primaryAdvertisingIntervalMin", primaryAdvertisingIntervalMin, unitMicroseconds: 625),
         .interval("primaryAdvertisingIntervalMax", primaryAdvertisingIntervalMax, unitMicroseconds: 625),
         .code("primaryAdvertisingChannelMap", primaryAdvertisingChannelMap),
         .addressType("ownAddressType", ownAddressType),
         .addressType("peerAddressType", peerAddressType),
         .address("peerAddress", peerAddress, type: peerAddressType),
         .code("advertisingFilterPolicy", advertisingFilterPolicy),
         .dBm("advertisingTxPower", advertisingTxPower),
         .phy("primaryAdvertisingPHY", primaryAdvertisingPHY),
         .int("secondaryAdvertisingMaxSkip", secondaryAdvertisingMaxSkip),
         .phy("secondaryAdvertisingPHY", secondaryAdvertisingPHY),
         .int("advertisingSID", advertisingSID),
         .code("scanRequestNotificationEnable", scanRequestNotificationEnable)]
    }

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var selectedTxPower: Int8
        public init(selectedTxPower: Int8) { self.selectedTxPower = selectedTxPower }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { selectedTxPower = try r.i8("selectedTxPower") }
        public func encode(into w: inout ByteWriter) { w.i8(selectedTxPower) }
        public var fields: [Field] { [.dBm("selectedTxPower", selectedTxPower)] }
    }
}

/// Shared shape of LE Set Extended Advertising Data and LE Set Extended Scan Response Data.
public struct ExtendedDataParameters: Sendable, Equatable {
    public var advertisingHandle: UInt8
    public var operation: UInt8
    public var fragmentPreference: UInt8
    public var data: [UInt8]

    init(advertisingHandle: UInt8, operation: UInt8, fragmentPreference: UInt8, data: [UInt8]) {
        self.advertisingHandle = advertisingHandle; self.operation = operation
        self.fragmentPreference = fragmentPreference; self.data = Array(data.prefix(251))
    }
    init(_ r: inout ByteReader) throws(DecodeError) {
        advertisingHandle = try r.u8("advertisingHandle")
        operation = try r.u8("operation")
        fragmentPreference = try r.u8("fragmentPreference")
        let n = Int(try r.u8("dataLength"))
        guard n <= 251 else { throw .invalid("extended advertising data fragment of \(n) octets exceeds 251") }
        data = try r.bytes(n, "data")
    }
    func encode(into w: inout ByteWriter) {
        w.u8(advertisingHandle); w.u8(operation); w.u8(fragmentPreference); w.lengthPrefixed(data)
    }
    func fields(_ dataName: String) -> [Field] {
        [.int("advertisingHandle", advertisingHandle),
         .code("operation", operation, note: extendedDataOperationName(operation)),
         .code("fragmentPreference", fragmentPreference),
         .int(dataName + "Length", data.count), .bytes(dataName, data)]
    }
}

/// LE Set Extended Advertising Data and LE Set Extended Scan Response Data: the same parameters,
/// coded once here; each command names its data.
public protocol ExtendedDataCommand: HCICommand {
    var parameters: ExtendedDataParameters { get }
    init(extendedData: ExtendedDataParameters)
    /// The data's parameter name ("advertisingData", "scanResponseData").
    static var dataName: String { get }
}

extension ExtendedDataCommand {
    public var advertisingHandle: UInt8 { parameters.advertisingHandle }
    public init(parameters r: inout ByteReader) throws(DecodeError) { self.init(extendedData: try ExtendedDataParameters(&r)) }
    public func encodeParameters(into w: inout ByteWriter) { parameters.encode(into: &w) }
    public var fields: [Field] { parameters.fields(Self.dataName) }
}

/// LE Set Extended Advertising Data (0x2037).
public struct LESetExtendedAdvertisingData: ExtendedDataCommand, Equatable {
    public static let dataName = "advertisingData"
    public var parameters: ExtendedDataParameters
    public var advertisingData: [UInt8] { parameters.data }
    public init(extendedData: ExtendedDataParameters) { parameters = extendedData }
    public init(advertisingHandle: UInt8, operation: UInt8 = 0x03, fragmentPreference: UInt8 = 0x01, advertisingData: [UInt8]) {
        parameters = ExtendedDataParameters(advertisingHandle: advertisingHandle, operation: operation,
                                            fragmentPreference: fragmentPreference, data: advertisingData)
    }
}

/// LE Set Extended Scan Response Data (0x2038).
public struct LESetExtendedScanResponseData: ExtendedDataCommand, Equatable {
    public static let dataName = "scanResponseData"
    public var parameters: ExtendedDataParameters
    public var scanResponseData: [UInt8] { parameters.data }
    public init(extendedData: ExtendedDataParameters) { parameters = extendedData }
    public init(advertisingHandle: UInt8, operation: UInt8 = 0x03, fragmentPreference: UInt8 = 0x01, scanResponseData: [UInt8]) {
        parameters = ExtendedDataParameters(advertisingHandle: advertisingHandle, operation: operation,
                                            fragmentPreference: fragmentPreference, data: scanResponseData)
    }
}

/// LE Set Extended Advertising Enable (0x2039). Each set's parameters are consecutive on the wire.
public struct LESetExtendedAdvertisingEnable: HCICommand, Equatable {

    public struct AdvertisingSet: Sendable, Equatable {
        public var advertisingHandle: UInt8
        /// Units of 10 ms; 0 = until disabled.
        public var duration: UInt16
        /// 0 = no maximum.
        public var maxExtendedAdvertisingEvents: UInt8
        public init(advertisingHandle: UInt8, duration: UInt16 = 0, maxExtendedAdvertisingEvents: UInt8 = 0) {
            self.advertisingHandle = advertisingHandle; self.duration = duration
            self.maxExtendedAdvertisingEvents = maxExtendedAdvertisingEvents
        }
    }

    public var enable: Bool
    /// Empty with `enable == false` disables every set.
    public var sets: [AdvertisingSet]
    public init(enable: Bool, sets: [AdvertisingSet]) { self.enable = enable; self.sets = sets }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        enable = try r.u8("enable") != 0
        sets = try decodeList(&r, count: "numSets", minimumSize: 4, "advertisingHandle/duration/maxExtendedAdvertisingEvents") { r throws(DecodeError) in
            AdvertisingSet(advertisingHandle: try r.u8("advertisingHandle"), duration: try r.u16("duration"),
                           maxExtendedAdvertisingEvents: try r.u8("maxExtendedAdvertisingEvents"))
        }
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(enable ? 1 : 0)
        encodeList(sets, into: &w) { s, w in w.u8(s.advertisingHandle); w.u16(s.duration); w.u8(s.maxExtendedAdvertisingEvents) }
    }

    public var fields: [Field] {
        [.code("enable", UInt8(enable ? 1 : 0), note: enable ? "enabled" : "disabled"),
         .int("numSets", sets.count),
         Field("sets", .list(sets.map {
             .object([.int("advertisingHandle", $0.advertisingHandle),
                      .interval("duration", $0.duration, unitMicroseconds: 10_000, whenZero: "no limit"),
                      .int("maxExtendedAdvertisingEvents", $0.maxExtendedAdvertisingEvents)])
         }))]
    }
}

/// The PHY bits that select per-PHY parameter blocks (bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded).
private func phyBits(_ mask: UInt8) -> [UInt8] { (0..<8).compactMap { mask & (1 << $0) != 0 ? UInt8(1 << $0) : nil } }

/// LE Set Extended Scan Parameters (0x2041): one block of scan parameters per PHY bit set.
public struct LESetExtendedScanParameters: HCICommand, Equatable {

    public struct PHYParameters: Sendable, Equatable {
        public var scanType: UInt8
        public var scanInterval: UInt16
        public var scanWindow: UInt16
        public init(scanType: UInt8 = 1, scanInterval: UInt16 = 0x0010, scanWindow: UInt16 = 0x0010) {
            self.scanType = scanType; self.scanInterval = scanInterval; self.scanWindow = scanWindow
        }
    }

    public var ownAddressType: AddressType
    public var scanningFilterPolicy: UInt8
    /// Bit 0 LE 1M, bit 2 LE Coded; one entry of `phyParameters` per bit set, lowest bit first.
    public var scanningPHYs: UInt8
    public var phyParameters: [PHYParameters]

    public init(ownAddressType: AddressType = .public, scanningFilterPolicy: UInt8 = 0, scanningPHYs: UInt8 = 0x01,
                phyParameters: [PHYParameters] = [PHYParameters()]) {
        self.ownAddressType = ownAddressType; self.scanningFilterPolicy = scanningFilterPolicy
        self.scanningPHYs = scanningPHYs; self.phyParameters = phyParameters
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        ownAddressType = try r.addressType("ownAddressType")
        scanningFilterPolicy = try r.u8("scanningFilterPolicy")
        scanningPHYs = try r.u8("scanningPHYs")
        phyParameters = []
        for _ in phyBits(scanningPHYs) {
            phyParameters.append(PHYParameters(scanType: try r.u8("scanType"), scanInterval: try r.u16("scanInterval"),
                                               scanWindow: try r.u16("scanWindow")))
        }
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(ownAddressType.rawValue); w.u8(scanningFilterPolicy); w.u8(scanningPHYs)
        for p in phyParameters { w.u8(p.scanType); w.u16(p.scanInterval); w.u16(p.scanWindow) }
    }

    public var fields: [Field] {
        let phys = phyBits(scanningPHYs)
        return [.addressType("ownAddressType", ownAddressType),
                .code("scanningFilterPolicy", scanningFilterPolicy),
                .code("scanningPHYs", scanningPHYs, note: phyMaskNote(scanningPHYs)),
                Field("phys", .list(phyParameters.enumerated().map { i, p in
                    .object([.text("phy", i < phys.count ? phyMaskNote(phys[i]) : "?"),
                             .code("scanType", p.scanType, note: p.scanType == 0 ? "passive" : "active"),
                             .interval("scanInterval", p.scanInterval, unitMicroseconds: 625),
                             .interval("scanWindow", p.scanWindow, unitMicroseconds: 625)])
                }))]
    }
}

/// LE Extended Create Connection [v1] (0x2043): one block of parameters per initiating PHY bit set.
public struct LEExtendedCreateConnection: HCICommand, Equatable {

    public struct PHYParameters: Sendable, Equatable {
        public var scanInterval: UInt16
        public var scanWindow: UInt16
        public var connectionIntervalMin: UInt16
        public var connectionIntervalMax: UInt16
        public var maxLatency: UInt16
        public var supervisionTimeout: UInt16
        public var minCELength: UInt16
        public var maxCELength: UInt16
        public init(scanInterval: UInt16 = 0x0060, scanWindow: UInt16 = 0x0060, connectionIntervalMin: UInt16 = 0x0018,
                    connectionIntervalMax: UInt16 = 0x0028, maxLatency: UInt16 = 0, supervisionTimeout: UInt16 = 0x002A,
                    minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
            self.scanInterval = scanInterval; self.scanWindow = scanWindow
            self.connectionIntervalMin = connectionIntervalMin; self.connectionIntervalMax = connectionIntervalMax
            self.maxLatency = maxLatency; self.supervisionTimeout = supervisionTimeout
            self.minCELength = minCELength; self.maxCELength = maxCELength
        }
    }

    public var initiatorFilterPolicy: UInt8
    public var ownAddressType: AddressType
    public var peerAddressType: AddressType
    public var peerAddress: BDAddress
    /// Bit 0 LE 1M, bit 1 LE 2M, bit 2 LE Coded; one `phyParameters` entry per bit set, lowest first.
    public var initiatingPHYs: UInt8
    public var phyParameters: [PHYParameters]

    public init(initiatorFilterPolicy: UInt8 = 0, ownAddressType: AddressType = .public, peerAddressType: AddressType,
                peerAddress: BDAddress, initiatingPHYs: UInt8 = 0x01, phyParameters: [PHYParameters] = [PHYParameters()]) {
        self.initiatorFilterPolicy = initiatorFilterPolicy; self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType; self.peerAddress = peerAddress
        self.initiatingPHYs = initiatingPHYs; self.phyParameters = phyParameters
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        initiatorFilterPolicy = try r.u8("initiatorFilterPolicy")
        ownAddressType = try r.addressType("ownAddressType")
        peerAddressType = try r.addressType("peerAddressType")
        peerAddress = try r.address("peerAddress")
        initiatingPHYs = try r.u8("initiatingPHYs")
        phyParameters = []
        for _ in phyBits(initiatingPHYs) {
            phyParameters.append(PHYParameters(
                scanInterval: try r.u16("scanInterval"), scanWindow: try r.u16("scanWindow"),
                connectionIntervalMin: try r.u16("connectionIntervalMin"), connectionIntervalMax: try r.u16("connectionIntervalMax"),
                maxLatency: try r.u16("maxLatency"), supervisionTimeout: try r.u16("supervisionTimeout"),
                minCELength: try r.u16("minCELength"), maxCELength: try r.u16("maxCELength")))
        }
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(initiatorFilterPolicy); w.u8(ownAddressType.rawValue); w.u8(peerAddressType.rawValue)
        w.address(peerAddress); w.u8(initiatingPHYs)
        for p in phyParameters {
            w.u16(p.scanInterval); w.u16(p.scanWindow); w.u16(p.connectionIntervalMin); w.u16(p.connectionIntervalMax)
            w.u16(p.maxLatency); w.u16(p.supervisionTimeout); w.u16(p.minCELength); w.u16(p.maxCELength)
        }
    }

    public var fields: [Field] {
        let phys = phyBits(initiatingPHYs)
        return [.code("initiatorFilterPolicy", initiatorFilterPolicy),
                .addressType("ownAddressType", ownAddressType),
                .addressType("peerAddressType", peerAddressType),
                .address("peerAddress", peerAddress, type: peerAddressType),
                .code("initiatingPHYs", initiatingPHYs, note: phyMaskNote(initiatingPHYs)),
                Field("phys", .list(phyParameters.enumerated().map { i, p in
                    .object([.text("phy", i < phys.count ? phyMaskNote(phys[i]) : "?"),
                             .interval("scanInterval", p.scanInterval, unitMicroseconds: 625),
                             .interval("scanWindow", p.scanWindow, unitMicroseconds: 625),
                             .interval("connectionIntervalMin", p.connectionIntervalMin, unitMicroseconds: 1250),
                             .interval("connectionIntervalMax", p.connectionIntervalMax, unitMicroseconds: 1250),
                             .int("maxLatency", p.maxLatency),
                             .interval("supervisionTimeout", p.supervisionTimeout, unitMicroseconds: 10_000),
                             .interval("minCELength", p.minCELength, unitMicroseconds: 625),
                             .interval("maxCELength", p.maxCELength, unitMicroseconds: 625)])
                }))]
    }
}
