import Testing
import HCI
import Host
@testable import BLE

/// Issue 27: the scan filters of `ScanFilter` on advertisements built from reports whose
/// fields are set as the Core specification defines them.
@Suite struct ScanFilterMatchTests {
    let address = DeviceAddress(BDAddress([0xF0, 1, 2, 3, 4, 5]), type: .public)

    /// Flags, Manufacturer Specific Data of company 0x004C (AD type 0xFF: the company identifier
    /// first, little-endian; Core Specification Supplement v11 Part A 1.4) and Service Data for
    /// 0x180F (AD type 0x16: the 16-bit UUID first, little-endian; Part A 1.11), as raw octets.
    let data: [UInt8] = [0x02, 0x01, 0x06, 0x05, 0xFF, 0x4C, 0x00, 0x02, 0x15, 0x04, 0x16, 0x0F, 0x18, 0x64]

    func advertisement(rssi: Int8?, primary: UInt8 = 0x01, secondary: UInt8 = 0x00) -> Advertisement {
        var tracker = AdvertisementTracker()
        let report = AdvertisingReportValue(address: address, kind: [.connectable], rssi: rssi, txPower: nil, data: data,
                                            primaryPHY: primary, secondaryPHY: secondary)
        return tracker.update(with: report, everyReport: true)!
    }

    @Test func manufacturerAndServiceDataMatchWhatTheADStructuresCarry() {
        let a = advertisement(rssi: -50)
        #expect(ScanFilter(manufacturers: [0x004C]).matches(a))
        #expect(ScanFilter(manufacturers: [0x0006, 0x004C]).matches(a))
        #expect(!ScanFilter(manufacturers: [0x4C00]).matches(a))  // byte order: little-endian
        #expect(ScanFilter(serviceData: [BluetoothUUID(string: "180f")!]).matches(a))
        #expect(!ScanFilter(serviceData: [BluetoothUUID(string: "0f18")!]).matches(a))
        #expect(!ScanFilter(manufacturers: [0x004C], serviceData: [BluetoothUUID(string: "180d")!]).matches(a))  // all kinds must match
    }

    /// RSSI -127...+20 dBm, 127 "not available" (Core v5.4 Vol 4 Part E 7.7.65.2): the host
    /// turns 127 into nil, which no minimum matches.
    @Test func minimumRSSIIsInclusiveAndAnUnknownRSSINeverMatches() {
        #expect(ScanFilter(minimumRSSI: -50).matches(advertisement(rssi: -50)))
        #expect(!ScanFilter(minimumRSSI: -49).matches(advertisement(rssi: -50)))
        #expect(!ScanFilter(minimumRSSI: -127).matches(advertisement(rssi: nil)))
    }

    /// The PHY that carried the data: Secondary_PHY when not 0x00, else Primary_PHY (7.7.65.13).
    @Test func phyIsTheOneThatCarriedTheData() {
        let legacy = advertisement(rssi: -50)
        #expect(ScanFilter(phy: .le1M).matches(legacy) && !ScanFilter(phy: .le2M).matches(legacy))
        let twoM = advertisement(rssi: -50, primary: 0x01, secondary: 0x02)
        #expect(ScanFilter(phy: .le2M).matches(twoM) && !ScanFilter(phy: .le1M).matches(twoM))
        let coded = advertisement(rssi: -50, primary: 0x03, secondary: 0x03)
        #expect(ScanFilter(phy: .leCoded).matches(coded) && !ScanFilter(phy: .le1M).matches(coded))
        let codedPrimaryOnly = advertisement(rssi: -50, primary: 0x03, secondary: 0x00)
        #expect(ScanFilter(phy: .leCoded).matches(codedPrimaryOnly))
    }
}
