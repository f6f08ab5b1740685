import HCI
import Host

/// One advertiser as a scan sees it: its latest advertising data merged with its latest scan
/// response (CoreBluetooth's `advertisementData` + `RSSI`).
public struct Advertisement: Sendable, Equatable {
    public var address: DeviceAddress
    public var rssi: Int8?
    public var connectable: Bool
    /// Advertising data of the last advertising PDU.
    public var advertisingData: AdvertisingData
    /// Data of the last scan response, if one was received (active scans only).
    public var scanResponse: AdvertisingData?
    /// The identity address of the bonded peer at `address` when that is not it: the bond's IRK
    /// resolves `address` (a resolvable private address, Core Vol 6 Part B 1.3.2.2), or the peer
    /// distributed this identity while pairing from `address` (`SMPBond.distributedIdentity`);
    /// nil otherwise.
    public var identity: DeviceAddress?
    /// The PHYs of the last advertising report (not scan response): Primary_PHY (0x01 LE 1M,
    /// 0x03 LE Coded) and Secondary_PHY (0x00 none, as for legacy PDUs; 0x01 LE 1M, 0x02 LE 2M,
    /// 0x03 LE Coded), Core v5.4 Vol 4 Part E 7.7.65.13. Legacy reports: LE 1M, none.
    public var primaryPHY: UInt8 = 0x01
    public var secondaryPHY: UInt8 = 0x00
    /// Extended advertising only (7.7.65.13): the set's Advertising SID (0xFF: none, as for
    /// legacy PDUs) and its periodic advertising interval in 1.25 ms units (0: no periodic
    /// train), what a periodic sync needs (`Central.syncPeriodicAdvertising`).
    public var sid: UInt8 = 0xFF
    public var periodicInterval: UInt16 = 0
    /// Whether the report that produced this value was a scan response (with `everyReport`,
    /// one value per report: a scanner timing advertising events counts the others).
    public var fromScanResponse = false

    /// The PHY that carried the advertising data: the secondary PHY when there is one
    /// (extended advertising: AUX PDUs carry the data), else the primary.
    public var dataPHY: ScanFilter.PHY? { ScanFilter.PHY(rawValue: secondaryPHY != 0 ? secondaryPHY : primaryPHY) }

    public init(address: DeviceAddress, rssi: Int8?, connectable: Bool, advertisingData: AdvertisingData, scanResponse: AdvertisingData? = nil) {
        self.address = address
        self.rssi = rssi
        self.connectable = connectable
        self.advertisingData = advertisingData
        self.scanResponse = scanResponse
    }

    /// Advertising data and scan response together.
    public var data: AdvertisingData { scanResponse.map { advertisingData.merged(with: $0) } ?? advertisingData }

    public var name: String? { data.name }
    public var services: [BluetoothUUID] { data.services }
    public var manufacturerData: [UInt16: [UInt8]] { data.manufacturerData }
    public var serviceData: [BluetoothUUID: [UInt8]] { data.serviceData }
    public var txPower: Int8? { data.txPower }
    public var flags: UInt8? { data.flags }
    public var appearance: UInt16? { data.appearance }

    /// Everything but RSSI, for change detection.
    var meaning: [Field] { jsonFields.filter { $0.name != "rssi" } }

    /// CLI.md's `scan` JSON line (keys whose value is unknown are left out).
    public var jsonFields: [Field] {
        var f: [Field] = [
            .text("event", "advertisement"),
            .text("address", address.address.description),
            .text("addressType", address.type.simple),
        ]
        if let identity {
            f.append(.text("identityAddress", identity.address.description))
            f.append(.text("identityAddressType", identity.type.simple))
        }
        if let rssi { f.append(.int("rssi", rssi)) }
        f.append(.bool("connectable", connectable))
        if let name { f.append(.text("name", name)) }
        let services = self.services
        if !services.isEmpty { f.append(Field("services", .list(services.map { .text($0.description) }))) }
        let mfg = manufacturerData
        if !mfg.isEmpty {
            f.append(Field("manufacturerData", .object(mfg.keys.sorted().map { .bytes(hexDigits4($0), mfg[$0] ?? []) })))
        }
        let sd = serviceData
        if !sd.isEmpty {
            f.append(Field("serviceData", .object(sd.keys.sorted().map { .bytes($0.description, sd[$0] ?? []) })))
        }
        if let txPower { f.append(.int("txPower", txPower)) }
        if let flags { f.append(.int("flags", flags)) }
        if let appearance { f.append(.int("appearance", appearance)) }
        return f
    }
}

func hexDigits4(_ v: UInt16) -> String { String(hexCode(v).dropFirst(2)) }

/// Which advertisers a scan reports. Empty filters match everything; filters of different
/// kinds must all match, the values of one kind (several services) any.
public struct ScanFilter: Sendable {
    /// Any of these services listed (advertising data or scan response).
    public var services: [BluetoothUUID]
    /// Name contains this text, ignoring case.
    public var nameContains: String?
    public var address: BDAddress?
    /// Reports measured at least this strong (dBm); a report without an RSSI (127, "not
    /// available", Core v5.4 Vol 4 Part E 7.7.65.2) does not match.
    public var minimumRSSI: Int8?
    /// The PHY that carried the advertising data (`Advertisement.dataPHY`).
    public var phy: PHY?
    /// Manufacturer Specific Data (AD type 0xFF) from any of these company identifiers.
    public var manufacturers: [UInt16]
    /// Service Data (AD types 0x16, 0x20, 0x21) for any of these UUIDs.
    public var serviceData: [BluetoothUUID]

    /// A PHY as HCI numbers it in advertising reports (Core v5.4 Vol 4 Part E 7.7.65.13).
    public enum PHY: UInt8, Sendable, CaseIterable {
        case le1M = 0x01, le2M = 0x02, leCoded = 0x03
        /// The CLI's names: 1m, 2m, coded.
        public var name: String {
            switch self {
            case .le1M: "1m"
            case .le2M: "2m"
            case .leCoded: "coded"
            }
        }
    }

    public init(services: [BluetoothUUID] = [], nameContains: String? = nil, address: BDAddress? = nil,
                minimumRSSI: Int8? = nil, phy: PHY? = nil, manufacturers: [UInt16] = [], serviceData: [BluetoothUUID] = []) {
        self.services = services
        self.nameContains = nameContains
        self.address = address
        self.minimumRSSI = minimumRSSI
        self.phy = phy
        self.manufacturers = manufacturers
        self.serviceData = serviceData
    }

    public func matches(_ a: Advertisement) -> Bool {
        // A bonded peer matches by its identity address too, whatever RPA it advertises from.
        if let address, a.address.address != address, a.identity?.address != address { return false }
        // Case-insensitive, as a user typing part of a name expects.
        if let nameContains, !(a.name?.lowercased().contains(nameContains.lowercased()) ?? false) { return false }
        if !services.isEmpty {
            let listed = Set(a.services)
            if !services.contains(where: { listed.contains($0) }) { return false }
        }
        if let minimumRSSI {
            guard let rssi = a.rssi, rssi >= minimumRSSI else { return false }
        }
        if let phy, a.dataPHY != phy { return false }
        if !manufacturers.isEmpty {
            let present = a.manufacturerData
            if !manufacturers.contains(where: { present[$0] != nil }) { return false }
        }
        if !serviceData.isEmpty {
            let present = a.serviceData
            if !serviceData.contains(where: { present[$0] != nil }) { return false }
        }
        return true
    }
}

/// Merges a stream of reports into advertisers and decides what to report: each advertiser
/// when first seen and whenever its data (or connectability) changes, or every report.
struct AdvertisementTracker {
    private struct Entry {
        var advertisement: Advertisement
        /// `advertisement.meaning`, kept so each report costs one comparison, not two renderings.
        var meaning: [Field]
    }
    private var known: [DeviceAddress: Entry] = [:]
    /// Bounds memory on a busy radio: the oldest advertisers are forgotten beyond this.
    private let capacity: Int
    private var order: [DeviceAddress] = []

    init(capacity: Int = 4096) { self.capacity = capacity }

    /// Returns the advertiser to report for this report, or nil when nothing changed.
    mutating func update(with report: AdvertisingReportValue, everyReport: Bool) -> Advertisement? {
        guard var entry = known[report.address] else {
            let data = AdvertisingData(parsing: report.data)
            var adv = Advertisement(address: report.address, rssi: report.rssi, connectable: report.isConnectable,
                                    advertisingData: report.isScanResponse ? AdvertisingData() : data,
                                    scanResponse: report.isScanResponse ? data : nil)
            adv.primaryPHY = report.primaryPHY
            adv.secondaryPHY = report.secondaryPHY
            adv.sid = report.sid
            adv.periodicInterval = report.periodicInterval
            adv.fromScanResponse = report.isScanResponse
            known[report.address] = Entry(advertisement: adv, meaning: adv.meaning)
            order.append(report.address)
            if order.count > capacity { known[order.removeFirst()] = nil }
            return adv
        }
        var adv = entry.advertisement
        adv.rssi = report.rssi ?? adv.rssi
        adv.fromScanResponse = report.isScanResponse
        if !report.isScanResponse {
            adv.primaryPHY = report.primaryPHY
            adv.secondaryPHY = report.secondaryPHY
            adv.sid = report.sid
            adv.periodicInterval = report.periodicInterval
        }
        // The same bytes as last time (the usual case): nothing to parse, nothing changed.
        let unchanged = report.isScanResponse
            ? adv.scanResponse?.bytes == report.data
            : adv.advertisingData.bytes == report.data && adv.connectable == report.isConnectable
        if !unchanged {
            let data = AdvertisingData(parsing: report.data)
            if report.isScanResponse {
                adv.scanResponse = data
            } else {
                adv.advertisingData = data
                adv.connectable = report.isConnectable
            }
        }
        entry.advertisement = adv
        // What the advertiser says, not how: a scan response repeating the advertising data
        // (as some controllers send) or a new RSSI is no change.
        let meaning = unchanged ? entry.meaning : adv.meaning
        let changed = meaning != entry.meaning
        entry.meaning = meaning
        known[report.address] = entry
        return everyReport || changed ? adv : nil
    }
}
