import Testing
import HCI
@testable import VirtualController

/// The filter accept list and the three filter policies that use it (Core Vol 6 Part B 4.3;
/// Vol 4 Part E 7.8.14-7.8.17), plus the other commands Linux sends at start-up.
@Suite struct FilterAcceptListTests {
    func add(_ p: Pair, _ h: RecordingHost, _ a: BDAddress, type: UInt8 = 0x00) -> HCIStatus? {
        p.run(h, LEAddDeviceToFilterAcceptList(addressType: type, address: a))?.status
    }

    @Test func listCommandsAnswerPerSpec() {
        let p = Pair()
        #expect(p.run(p.a, LEReadFilterAcceptListSize())?.returnParameters == [0x00, 8])
        for i in 0..<8 { #expect(add(p, p.a, BDAddress([1, 2, 3, 4, 5, UInt8(i)])) == .success) }
        // Already in the list: success, no second entry (7.8.16).
        #expect(add(p, p.a, BDAddress([1, 2, 3, 4, 5, 0])) == .success)
        // Full: Memory Capacity Exceeded (7.8.16, Vol 1 Part F 1.3 code 0x07).
        #expect(add(p, p.a, BDAddress([1, 2, 3, 4, 5, 9])) == .memoryCapacityExceeded)
        // Address_Type 0x02 is reserved for this command: Invalid HCI Command Parameters (0x12).
        #expect(add(p, p.a, BDAddress([1, 2, 3, 4, 5, 9]), type: 0x02) == .invalidParameters)
        #expect(p.run(p.a, LERemoveDeviceFromFilterAcceptList(addressType: 0, address: BDAddress([1, 2, 3, 4, 5, 0])))?.status == .success)
        #expect(add(p, p.a, BDAddress([1, 2, 3, 4, 5, 9])) == .success)
        // While scanning with a policy that uses the list, it can't change: Command Disallowed (7.8.15-7.8.17).
        p.run(p.a, LESetScanParameters(scanningFilterPolicy: 0x01))
        p.run(p.a, LESetScanEnable(leScanEnable: true))
        #expect(p.run(p.a, LEClearFilterAcceptList())?.status == .commandDisallowed)
        #expect(add(p, p.a, BDAddress([9, 9, 9, 9, 9, 9])) == .commandDisallowed)
        p.run(p.a, LESetScanEnable(leScanEnable: false))
        #expect(p.run(p.a, LEClearFilterAcceptList())?.status == .success)
    }

    @Test func scanningFilterPolicyReportsOnlyListedAdvertisers() {
        let p = Pair()
        p.run(p.b, LESetAdvertisingParameters())
        p.run(p.b, LESetAdvertisingEnable(advertisingEnable: true))
        // Policy 0x01: advertising packets from devices not in the list are ignored (Vol 6 Part B 4.3.3).
        p.run(p.a, LESetScanParameters(leScanType: 0, scanningFilterPolicy: 0x01))
        p.run(p.a, LESetScanEnable(leScanEnable: true))
        p.link.advance(by: 0.1)
        #expect(p.a.le(p.a.events(), LEAdvertisingReport.self).isEmpty)
        p.run(p.a, LESetScanEnable(leScanEnable: false))
        #expect(add(p, p.a, p.b.controller.publicAddress) == .success)
        p.run(p.a, LESetScanEnable(leScanEnable: true))
        p.link.advance(by: 0.1)
        let reports = p.a.le(p.a.events(), LEAdvertisingReport.self).flatMap(\.reports)
        #expect(!reports.isEmpty && reports.allSatisfy { $0.address == p.b.controller.publicAddress })
    }

    @Test func advertisingFilterPolicyLimitsScanRequestsAndConnections() {
        let p = Pair()
        // 0x03: scan and connection requests only from devices in the list (Vol 4 Part E 7.8.5, Vol 6 Part B 4.3.2).
        p.run(p.b, LESetAdvertisingParameters(advertisingFilterPolicy: 0x03))
        p.run(p.b, LESetScanResponseData(scanResponseData: [2, 0x0A, 0x00]))
        p.run(p.b, LESetAdvertisingEnable(advertisingEnable: true))
        p.run(p.a, LESetScanParameters(leScanType: 1))
        p.run(p.a, LESetScanEnable(leScanEnable: true))
        p.link.advance(by: 0.1)
        let reports = p.a.le(p.a.events(), LEAdvertisingReport.self).flatMap(\.reports)
        #expect(!reports.isEmpty && !reports.contains { $0.eventType == 0x04 })  // ADV_IND, no SCAN_RSP
        p.run(p.a, LESetScanEnable(leScanEnable: false))
        p.a.send(LECreateConnection(peerAddressType: .public, peerAddress: p.b.controller.publicAddress))
        p.link.advance(by: 0.1)
        #expect(p.a.le(p.a.events(), LEConnectionComplete.self).isEmpty)
        #expect(p.run(p.a, LECreateConnectionCancel())?.status == .success)
        // The list can't change while advertising uses it; with A listed, A may connect.
        #expect(add(p, p.b, p.a.controller.publicAddress) == .commandDisallowed)
        p.run(p.b, LESetAdvertisingEnable(advertisingEnable: false))
        #expect(add(p, p.b, p.a.controller.publicAddress) == .success)
        p.run(p.b, LESetAdvertisingEnable(advertisingEnable: true))
        _ = p.a.take()
        p.a.send(LECreateConnection(peerAddressType: .public, peerAddress: p.b.controller.publicAddress))
        p.link.advance(by: 0.1)
        #expect(p.a.le(p.a.events(), LEConnectionComplete.self).first?.status == .success)
    }

    @Test func initiatorFilterPolicyConnectsToAnyListedAdvertiser() {
        let p = Pair()
        p.run(p.b, LESetAdvertisingParameters())
        p.run(p.b, LESetAdvertisingEnable(advertisingEnable: true))
        // 0x01: the peer address parameters are ignored; any listed advertiser will do (Vol 6 Part B 4.3.4).
        let elsewhere = BDAddress([0x11, 0x22, 0x33, 0x44, 0x55, 0x66])
        p.a.send(LECreateConnection(initiatorFilterPolicy: 0x01, peerAddressType: .public, peerAddress: elsewhere))
        p.link.advance(by: 0.1)
        #expect(p.a.le(p.a.events(), LEConnectionComplete.self).isEmpty)  // empty list: nobody
        #expect(p.run(p.a, LECreateConnectionCancel())?.status == .success)
        #expect(add(p, p.a, p.b.controller.publicAddress) == .success)
        _ = p.a.take()
        p.a.send(LECreateConnection(initiatorFilterPolicy: 0x01, peerAddressType: .public, peerAddress: elsewhere))
        p.link.advance(by: 0.1)
        let c = p.a.le(p.a.events(), LEConnectionComplete.self).first
        #expect(c?.status == .success && c?.peerAddress == p.b.controller.publicAddress)
    }

    @Test func readLocalNameAndEventMaskPage2() throws {
        let p = Pair()
        // Read Local Name returns Status and 248 octets of name, zero-padded (Vol 4 Part E 7.3.12).
        let cc = try #require(p.run(p.a, ReadLocalName()))
        #expect(cc.status == .success && cc.returnParameters.count == 1 + 248)
        let name = try cc.result(ReadLocalName.self)
        #expect(!name.name.isEmpty && name.localName.count == 248)
        // Set Event Mask Page 2 answers Command Complete with Status only (Vol 4 Part E 7.3.69).
        #expect(p.run(p.a, SetEventMaskPage2(eventMaskPage2: 0))?.returnParameters == [0x00])
    }
}
