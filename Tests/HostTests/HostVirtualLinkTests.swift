import StackTestSupport
import Testing
import TestSupport
import HCI
@testable import Host
import VirtualController

/// Two of our hosts on the Swift virtual link (8 buffers of 27 octets each): advertising,
/// scanning, connecting both roles, 251-octet frames fragmented both ways under NOCP flow control.
@Suite(.timeLimit(.minutes(1))) struct HostVirtualLinkTests {
    @Test func fragmentedFramesBothWaysNeverOverrunTheController() async throws {
        let (link, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = Host(transport: transports[0])
        let central = Host(transport: transports[1])
        let pInfo = try await peripheral.start()
        let cInfo = try await central.start()
        #expect(pInfo.aclDataLength == 27 && pInfo.aclBufferCount == 8)
        #expect(cInfo.address != pInfo.address)

        var ad = AdvertisingData()
        ad.addFlags(0x06)
        ad.addLocalName("host-test")
        try await peripheral.startAdvertising(AdvertisingParameters(data: ad))
        try await central.startScanning()
        var seen: AdvertisingReportValue? = nil
        for await e in central.events {
            if case .advertisement(let r) = e, AdvertisingData(parsing: r.data).name == "host-test" { seen = r; break }
        }
        let report = try #require(seen)
        #expect(report.address.address == pInfo.address && report.isConnectable)
        try await central.stopScanning()

        let toPeripheral = try await central.connect(to: report.address)
        var accepted: LEConnection? = nil
        for await e in peripheral.events {
            if case .connected(let c) = e { accepted = c; break }
        }
        let fromCentral = try #require(accepted)
        #expect(toPeripheral.role == .central && fromCentral.role == .peripheral)
        #expect(await !peripheral.isAdvertising)

        // 40 frames of 251 octets each way (10 ACL fragments per frame) sent at once.
        let frames = (0..<40).map { i in [251 & 0xFF, 0, 0x40, 0x00] + [UInt8](repeating: UInt8(i), count: 251) }
        async let sentByCentral: Void = {
            for f in frames { try await central.sendL2CAP(f, on: toPeripheral.handle) }
        }()
        async let sentByPeripheral: Void = {
            for f in frames { try await peripheral.sendL2CAP(f, on: fromCentral.handle) }
        }()
        var atPeripheral: [[UInt8]] = []
        var atCentral: [[UInt8]] = []
        for await f in fromCentral.frames { atPeripheral.append(f); if atPeripheral.count == frames.count { break } }
        for await f in toPeripheral.frames { atCentral.append(f); if atCentral.count == frames.count { break } }
        try await sentByCentral
        try await sentByPeripheral
        #expect(atPeripheral == frames)
        #expect(atCentral == frames)
        // The controller complains (Data Buffer Overflow) if a host ever exceeds its 8 buffers.
        #expect(!link.log.contains { $0.contains("Data Buffer Overflow") })
        // Every buffer comes back (the last Number Of Completed Packets may still be on its way).
        try await central.until("every ACL buffer back") { $0.aclStatus.free == 8 }

        let status = try await central.disconnect(handle: toPeripheral.handle)
        #expect(status == .localHostTerminated)
        for await e in peripheral.events {
            if case .disconnected(let h, let reason) = e {
                #expect(h == fromCentral.handle && reason == .remoteUserTerminated)
                break
            }
        }
        await central.close()
        await peripheral.close()
    }

    /// Issue 25: a connect whose task is cancelled ends at once with `CancellationError`, and
    /// the attempt is cancelled in the controller (LE Create Connection Cancel, Core v5.4 Vol 4
    /// Part E 7.8.13): a new LE Create Connection is accepted right after, where one sent while
    /// the controller still initiates is Command Disallowed (7.8.12). Before, the connect ran
    /// on to its own timeout.
    @Test func cancelledConnectEndsAtOnceAndLeavesTheControllerIdle() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = Host(transport: transports[0])
        let central = Host(transport: transports[1])
        _ = try await peripheral.start()
        _ = try await central.start()
        let absent = DeviceAddress(BDAddress([0xC0, 0xDE, 0xAD, 0x00, 0x00, 0x01]), type: .random)
        let attempt = Pending { try await central.connect(to: absent, timeout: .seconds(60)) }
        // The attempt is under way once its wait (a deadline) is armed.
        try await central.armed(1)
        attempt.cancel()
        let result = try await attempt.result(within: .seconds(5), "the cancelled connect")
        guard case .failure(let error) = result else { Issue.record("the cancelled connect did not end: \(String(describing: result))"); return }
        #expect(error is CancellationError, "\(error)")
        // The controller is no longer initiating: a connect to an advertiser goes through.
        try await peripheral.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06], ownAddress: .randomStatic))
        let link = try await central.connect(to: DeviceAddress(await peripheral.staticRandomAddress, type: .random), timeout: .seconds(10))
        #expect(link.role == .central)
        await central.close()
        await peripheral.close()
    }

    /// Issue 25: connects are queued, any number at once (CoreBluetooth's `connect` queues too):
    /// three at once to two advertisers and one absent device each get their own outcome, in
    /// turn, where a second one used to throw `busy` (the controller initiates one at a time,
    /// Core v5.4 Vol 4 Part E 7.8.12). A queued connect cancelled while waiting ends at once
    /// and never reaches the controller.
    @Test func concurrentConnectsAreQueued() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 3)
        let central = Host(transport: transports[0])
        let a = Host(transport: transports[1]), b = Host(transport: transports[2])
        for h in [central, a, b] { _ = try await h.start() }
        for h in [a, b] { try await h.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06], ownAddress: .randomStatic)) }
        let addressA = DeviceAddress(await a.staticRandomAddress, type: .random)
        let addressB = DeviceAddress(await b.staticRandomAddress, type: .random)
        let absent = DeviceAddress(BDAddress([0xC0, 0xDE, 0xAD, 0x00, 0x00, 0x02]), type: .random)
        // The first holds the initiator (the absent one: until cancelled), the others queue.
        let first = Task { try await central.connect(to: absent, timeout: .seconds(60)) }
        try await central.armed(1)
        let toA = Task { try await central.connect(to: addressA) }
        let toB = Task { try await central.connect(to: addressB) }
        let dropped = Pending { try await central.connect(to: addressA) }
        try await central.until("three connects queued") { $0.connectQueue.count == 3 }
        dropped.cancel()
        guard case .failure(let e) = try await dropped.result(within: .seconds(5), "the cancelled queued connect") else { Issue.record("queued connect not ended by its cancellation"); return }
        #expect(e is CancellationError)
        #expect(await central.connectQueue.count == 2)
        first.cancel()
        let linkA = try await toA.value, linkB = try await toB.value
        #expect(linkA.peer.address == addressA.address && linkB.peer.address == addressB.address)
        #expect(linkA.handle != linkB.handle)
        #expect(await central.connections.count == 2)
        #expect(await !central.connectBusy)
        for h in [central, a, b] { await h.close() }
    }
}
