import Testing
import HCI
import Host
@testable import BLE

@Suite struct AdvertisementTrackerTests {
    let address = DeviceAddress(BDAddress([0xF0, 1, 2, 3, 4, 5]), type: .public)

    func report(_ data: AdvertisingData, scanResponse: Bool = false, rssi: Int8 = -50) -> AdvertisingReportValue {
        AdvertisingReportValue(address: address, kind: scanResponse ? [.scanResponse] : [.connectable, .scannable],
                               rssi: rssi, txPower: nil, data: data.bytes)
    }

    @Test func reportsFirstSightingAndChangesOnly() {
        var ad = AdvertisingData()
        ad.addFlags(0x06)
        ad.addLocalName("one")
        var tracker = AdvertisementTracker()
        #expect(tracker.update(with: report(ad), everyReport: false)?.name == "one")
        #expect(tracker.update(with: report(ad, rssi: -70), everyReport: false) == nil)  // RSSI only
        #expect(tracker.update(with: report(ad, scanResponse: true), everyReport: false) == nil)  // echoed as scan response
        var renamed = AdvertisingData()
        renamed.addFlags(0x06)
        renamed.addLocalName("two")
        let changed = tracker.update(with: report(renamed), everyReport: false)
        #expect(changed?.name == "two")
        #expect(changed?.rssi == -50)
        #expect(tracker.update(with: report(renamed), everyReport: true) != nil)
    }
}
