import Testing
import HCI
import Host

/// Issue 27 (scan --phy): the PHYs of an LE Extended Advertising Report reach the report value
/// as the controller gave them; a legacy report's are LE 1M and none (Core v5.4 Vol 4 Part E
/// 7.7.65.13: Primary_PHY 0x01 LE 1M / 0x03 LE Coded, Secondary_PHY 0x00 no packets on the
/// secondary advertising channel / 0x01 LE 1M / 0x02 LE 2M / 0x03 LE Coded).
@Suite struct AdvertisingPHYTests {
    @Test func extendedReportsCarryTheirPHYsAndLegacyReportsAreLE1M() async throws {
        let t = FakeTransport.controller()
        let host = Host(transport: t)
        _ = try await host.start()
        let addr = BDAddress([0xC3, 1, 2, 3, 4, 5])
        t.inject(le: LEAdvertisingReport(reports: [
            .init(eventType: 0x00, addressType: .random, address: addr, data: [2, 1, 6], rssi: -40)]))
        for (primary, secondary): (UInt8, UInt8) in [(0x03, 0x02), (0x01, 0x03), (0x03, 0x00)] {
            t.inject(le: LEExtendedAdvertisingReport(reports: [
                .init(eventType: ExtendedAdvertisingEventType(rawValue: 0x0001), addressType: 0x01, address: addr,
                      primaryPHY: primary, secondaryPHY: secondary, advertisingSID: 1, txPower: 127, rssi: -60,
                      periodicAdvertisingInterval: 0, directAddressType: 0, directAddress: .zero, data: [2, 1, 6])]))
        }
        var reports: [AdvertisingReportValue] = []
        for await e in host.events {
            if case .advertisement(let r) = e { reports.append(r) }
            if reports.count == 4 { break }
        }
        #expect(reports.map { [$0.primaryPHY, $0.secondaryPHY] } == [[0x01, 0x00], [0x03, 0x02], [0x01, 0x03], [0x03, 0x00]])
        await host.close()
    }
}
