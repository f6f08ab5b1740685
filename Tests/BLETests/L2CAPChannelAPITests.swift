import Testing
import TestSupport
import HCI
import L2CAP
import VirtualController
@testable import BLE

/// Issue 25: LE credit-based channels through the `BLE` API (CoreBluetooth's
/// `publishL2CAPChannel` / `openL2CAPChannel`), our central against our peripheral on the
/// in-process virtual link (27-octet ACL buffers: every K-frame is fragmented).
@Suite(.timeLimit(.minutes(1))) struct L2CAPChannelAPITests {
    @Test func publishedChannelCarriesSDUsBothWaysWithCredits() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: [], name: "coc")
        // Two credits only: SDUs longer than the MPS (64) take several K-frames each, so the
        // sender waits for the credits the receiver returns (Core v5.4 Vol 3 Part A 10.1).
        let published = try await peripheral.publishL2CAPChannel(mtu: 600, mps: 64, credits: 2)
        // A dynamically assigned SPSM is in 0x0080–0x00FF (Core v5.4 Vol 3 Part A 4.22).
        #expect((0x0080...0x00FF).contains(published.psm))
        try await peripheral.startAdvertising(AdvertisingOptions(name: "coc"))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: "coc"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        let ours = try await remote.openL2CAPChannel(psm: published.psm, mtu: 700, mps: 100, credits: 3)
        var accepted = published.channels.makeAsyncIterator()
        let theirs = try #require(await accepted.next())
        // Each side sees the other's receive parameters (4.22, 4.23).
        #expect(ours.peerMTU == 600 && ours.peerMPS == 64)
        #expect(theirs.peerMTU == 700 && theirs.peerMPS == 100)
        #expect(theirs.remoteCID == ours.localCID && theirs.localCID == ours.remoteCID)
        let sdus = (0..<12).map { i in (0..<(100 + 40 * i)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) } }
        let sending = Task { for s in sdus { try await ours.send(s) } }
        var got: [[UInt8]] = []
        for try await sdu in theirs.sdus {
            got.append(sdu)
            if got.count == sdus.count { break }
        }
        try await sending.value
        #expect(got == sdus)
        // The other way, and an SDU above the peer's MTU is refused before anything is sent.
        try await theirs.send(Array(repeating: 0xA5, count: 700))
        #expect(try await ours.receive() == Array(repeating: 0xA5, count: 700))
        // (A BLEError at the BLE boundary, as every failure of the API: issue 25.)
        await #expect { try await ours.send(Array(repeating: 0, count: 601)) } throws: { error in
            guard case BLEError.invalidArgument(let message) = error else { return false }
            return message.contains("601") && message.contains("MTU 600")
        }
        // Closing ends the peer's SDUs normally (Disconnection Request/Response, 4.6, 4.7).
        try await ours.close()
        #expect(try await theirs.receive() == nil)
        await peripheral.unpublishL2CAPChannel(psm: published.psm)
        #expect(await accepted.next() == nil)
        await central.close()
        await peripheral.close()
    }

    /// A channel whose link goes down throws the link's disconnection, with the reason the
    /// peer gave in its HCI Disconnect (Core v5.4 Vol 4 Part E 7.1.6: the remote controller
    /// reports that reason), on both sides' open channels.
    @Test func aChannelOfALinkThatWentDownThrowsTheDisconnection() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: [], name: "coc")
        let published = try await peripheral.publishL2CAPChannel()
        try await peripheral.startAdvertising(AdvertisingOptions(name: "coc", restartAfterDisconnection: false))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: "coc"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        let ours = try await remote.openL2CAPChannel(psm: published.psm)
        var accepted = published.channels.makeAsyncIterator()
        let theirs = try #require(await accepted.next())
        #expect(ours.connection == remote.connectionHandle)
        _ = try await peripheral.disconnect(connection: theirs.connection, reason: .remoteLowResources)
        #expect(await remote.disconnected() == .remoteLowResources)
        await #expect(throws: BLEError.disconnected(.remoteLowResources)) { _ = try await ours.receive() }
        await #expect(throws: BLEError.disconnected(.remoteLowResources)) { try await ours.send([0x01]) }
        await central.close()
        await peripheral.close()
    }

    /// An SPSM nobody published is refused with the result the spec gives for it: "LE_PSM not
    /// supported" (0x0002, Core v5.4 Vol 3 Part A 4.23, Table 4.17 (result codes)).
    @Test func unpublishedSPSMIsRefused() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: [], name: "coc")
        try await peripheral.startAdvertising(AdvertisingOptions(name: "coc"))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: "coc"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        #expect(CreditBasedConnectionResult.spsmNotSupported.rawValue == 0x0002)
        await #expect(throws: BLEError.refused(L2CAPError.connectionRefused(.spsmNotSupported).description)) {
            _ = try await remote.openL2CAPChannel(psm: 0x0081)
        }
        await central.close()
        await peripheral.close()
    }
}

/// Issue 25: `Peripheral.events` has any number of consumers: a second `for await` loop used
/// to take the events over and leave the first waiting for ever.
@Suite(.timeLimit(.minutes(1))) struct PeripheralEventsConsumerTests {
    @Test func everyConsumerGetsEveryEvent() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: [], name: "two")
        func collect(_ n: Int) -> Task<[PeripheralEvent], Never> {
            var it = peripheral.events.makeAsyncIterator()
            return Task {
                var got: [PeripheralEvent] = []
                while got.count < n, let e = await it.next() { got.append(e) }
                return got
            }
        }
        let first = collect(2), second = collect(2)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "two"))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: "two"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        try await remote.disconnect()
        let a = await first.value, b = await second.value
        #expect(a.count == 2 && a == b)
        guard case .connected? = a.first, case .disconnected? = a.last else { Issue.record("events: \(a)"); return }
        // A consumer made now sees what comes from now on, and the end at close.
        let late = collect(1)
        await central.close()
        await peripheral.close()
        #expect(await late.value.isEmpty)
    }
}
