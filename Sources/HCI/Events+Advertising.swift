// LE advertising report subevents. Core Vol 4 Part E 7.7.65.2, 7.7.65.13. LE Advertising
// Report itself is described in Tools/pdl/hci.pdl; the extended one (its direct address shown
// only for directed reports) is written here. Each report's parameters are consecutive on the
// wire (Core 5.x layout).

extension LEAdvertisingReport.Report {
    public var isConnectable: Bool { eventType == 0x00 || eventType == 0x01 }
    public var isScanResponse: Bool { eventType == 0x04 }
}

/// Event_Type bits of an LE Extended Advertising Report.
public struct ExtendedAdvertisingEventType: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public var isConnectable: Bool { rawValue & 0x01 != 0 }
    public var isScannable: Bool { rawValue & 0x02 != 0 }
    public var isDirected: Bool { rawValue & 0x04 != 0 }
    public var isScanResponse: Bool { rawValue & 0x08 != 0 }
    public var isLegacy: Bool { rawValue & 0x10 != 0 }
    /// 0 complete, 1 incomplete (more to come), 2 incomplete (truncated).
    public var dataStatus: UInt8 { UInt8((rawValue >> 5) & 0x03) }

    public static let advInd = ExtendedAdvertisingEventType(rawValue: 0x13)
    public static let advDirectInd = ExtendedAdvertisingEventType(rawValue: 0x15)
    public static let advScanInd = ExtendedAdvertisingEventType(rawValue: 0x12)
    public static let advNonconnInd = ExtendedAdvertisingEventType(rawValue: 0x10)
    public static let scanRspToAdvInd = ExtendedAdvertisingEventType(rawValue: 0x1B)
    public static let scanRspToAdvScanInd = ExtendedAdvertisingEventType(rawValue: 0x1A)

    /// The legacy PDU name for legacy reports, else the set bits.
    public var description: String {
        if isLegacy {
            switch rawValue & 0x1F {
            case 0x13: return "ADV_IND"
            case 0x15: return "ADV_DIRECT_IND"
            case 0x12: return "ADV_SCAN_IND"
            case 0x10: return "ADV_NONCONN_IND"
            case 0x1B: return "SCAN_RSP to ADV_IND"
            case 0x1A: return "SCAN_RSP to ADV_SCAN_IND"
            default: return "legacy (invalid combination)"
            }
        }
        var parts: [String] = []
        if isConnectable { parts.append("connectable") }
        if isScannable { parts.append("scannable") }
        if isDirected { parts.append("directed") }
        if isScanResponse { parts.append("scan response") }
        if parts.isEmpty { parts.append("non-connectable non-scannable") }
        switch dataStatus {
        case 0: parts.append("complete")
        case 1: parts.append("incomplete, more to come")
        case 2: parts.append("incomplete, truncated")
        default: parts.append("reserved data status")
        }
        return parts.joined(separator: ", ")
    }
}

/// Address type in extended reports: 0x00-0x03 as AddressType, 0xFF anonymous.
func extendedAddressTypeNote(_ v: UInt8) -> String {
    if v == 0xFF { return "anonymous" }
    return AddressType(rawValue: v)?.description ?? "reserved"
}

/// LE Extended Advertising Report (subevent 0x0D).
public struct LEExtendedAdvertisingReport: LEMetaEventParameters, Equatable {

    public struct Report: Sendable, Equatable {
        public var eventType: ExtendedAdvertisingEventType
        /// 0x00-0x03 (see `AddressType`), 0xFF anonymous.
        public var addressType: UInt8
        public var address: BDAddress
        public var primaryPHY: UInt8
        /// 0 = no packets on the secondary channel.
        public var secondaryPHY: UInt8
        /// 0xFF = no ADI field.
        public var advertisingSID: UInt8
        public var txPower: Int8
        public var rssi: Int8
        /// Units of 1.25 ms; 0 = no periodic advertising.
        public var periodicAdvertisingInterval: UInt16
        public var directAddressType: UInt8
        public var directAddress: BDAddress
        public var data: [UInt8]

        public init(eventType: ExtendedAdvertisingEventType, addressType: UInt8, address: BDAddress, primaryPHY: UInt8 = 1,
                    secondaryPHY: UInt8 = 0, advertisingSID: UInt8 = 0xFF, txPower: Int8 = 127, rssi: Int8,
                    periodicAdvertisingInterval: UInt16 = 0, directAddressType: UInt8 = 0, directAddress: BDAddress = .zero,
                    data: [UInt8]) {
            self.eventType = eventType; self.addressType = addressType; self.address = address
            self.primaryPHY = primaryPHY; self.secondaryPHY = secondaryPHY; self.advertisingSID = advertisingSID
            self.txPower = txPower; self.rssi = rssi; self.periodicAdvertisingInterval = periodicAdvertisingInterval
            self.directAddressType = directAddressType; self.directAddress = directAddress; self.data = Array(data.prefix(255))
        }

        /// The advertiser's address type; nil for an anonymous advertiser.
        public var deviceAddressType: AddressType? { AddressType(rawValue: addressType) }
    }

    public var reports: [Report]
    public init(reports: [Report]) { self.reports = reports }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        reports = try decodeList(&r, count: "numReports", minimumSize: 24, "reports") { r throws(DecodeError) in
            let eventType = ExtendedAdvertisingEventType(rawValue: try r.u16("eventType"))
            let addressType = try r.u8("addressType")
            let address = try r.address("address")
            let primaryPHY = try r.u8("primaryPHY")
            let secondaryPHY = try r.u8("secondaryPHY")
            let sid = try r.u8("advertisingSID")
            let txPower = try r.i8("txPower")
            let rssi = try r.i8("rssi")
            let interval = try r.u16("periodicAdvertisingInterval")
            let directAddressType = try r.u8("directAddressType")
            let directAddress = try r.address("directAddress")
            let data = try r.lengthPrefixed(max: 255, "dataLength", "data")
            return Report(eventType: eventType, addressType: addressType, address: address, primaryPHY: primaryPHY,
                          secondaryPHY: secondaryPHY, advertisingSID: sid, txPower: txPower, rssi: rssi,
                          periodicAdvertisingInterval: interval, directAddressType: directAddressType,
                          directAddress: directAddress, data: data)
        }
    }

    public func encodeParameters(into w: inout ByteWriter) {
        encodeList(reports, into: &w) { rep, w in
            w.u16(rep.eventType.rawValue); w.u8(rep.addressType); w.address(rep.address)
            w.u8(rep.primaryPHY); w.u8(rep.secondaryPHY); w.u8(rep.advertisingSID); w.i8(rep.txPower); w.i8(rep.rssi)
            w.u16(rep.periodicAdvertisingInterval); w.u8(rep.directAddressType); w.address(rep.directAddress)
            w.lengthPrefixed(rep.data)
        }
    }

    public var fields: [Field] {
        [.int("numReports", reports.count),
         Field("reports", .list(reports.map { rep in
             var f: [Field] = [
                .code("eventType", rep.eventType.rawValue, note: rep.eventType.description),
                .code("addressType", rep.addressType, note: extendedAddressTypeNote(rep.addressType)),
                .address("address", rep.address, type: rep.deviceAddressType),
                .phy("primaryPHY", rep.primaryPHY),
                .phy("secondaryPHY", rep.secondaryPHY),
                .int("advertisingSID", rep.advertisingSID, note: rep.advertisingSID == 0xFF ? "no ADI" : nil),
                .dBm("txPower", rep.txPower),
                .dBm("rssi", rep.rssi),
                .interval("periodicAdvertisingInterval", rep.periodicAdvertisingInterval, unitMicroseconds: 1250, whenZero: "no periodic advertising"),
             ]
             if rep.eventType.isDirected {
                 f.append(.code("directAddressType", rep.directAddressType, note: extendedAddressTypeNote(rep.directAddressType)))
                 f.append(.address("directAddress", rep.directAddress))
             }
             f.append(.int("dataLength", rep.data.count))
             f.append(.bytes("data", rep.data))
             return .object(f)
         }))]
    }
}
