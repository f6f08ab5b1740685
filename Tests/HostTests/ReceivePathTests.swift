import Synchronization
import Testing
import StackTestSupport
import TestSupport
import HCI
@testable import Host

/// What a link layer saw, in order, and whether a frame ever reached it while it was still
/// handling the previous one.
final class SinkRecord: Sendable {
    struct State: Sendable {
        var frames: [[UInt8]] = []
        var events: [HostLinkEvent] = []
        var inside = false
        var overlapped = false
        var closed = 0
    }
    let state = Watched(State())
}

/// A link layer that records what its host hands it.
final class RecordingLayer: HostLinkLayer {
    let record: SinkRecord
    init(_ record: SinkRecord) { self.record = record }

    func received(_ frame: [UInt8], host: isolated Host) {
        record.state.withLock { s in
            if s.inside { s.overlapped = true }
            s.inside = true
        }
        // Work between entering and leaving: a frame handed over meanwhile would be recorded.
        var sum = 0
        for b in frame { sum &+= Int(b) }
        record.state.withLock { s in s.frames.append(frame); s.inside = false; _ = sum }
    }

    func linkEvent(_ event: HostLinkEvent, host: isolated Host) {
        record.state.withLock { s in
            s.events.append(event)
            if case .disconnected = event { s.closed += 1 }
        }
    }
}

/// Attaches a recording layer to `link` the way the stack attaches its layers: in the host's
/// isolation. False when the link already has its consumer.
@discardableResult
func attachRecordingLayer(_ link: LEConnection, _ record: SinkRecord, host: Host) async -> Bool {
    await host.run { host in host.attach(RecordingLayer(record), to: link) }
}

/// The one receive path (issue 14): frames reach the link's consumer synchronously on the
/// host's executor, in arrival order, including frames that arrived before the consumer
/// installed itself and frames that arrive while earlier ones are being handled.
extension ACLFlowTests {
    @Test func framesKeepArrivalOrderBeforeDuringAndAfterTheConsumerStarts() async throws {
        let (host, t) = try await makeHost(handles: [0x40])
        let link = try #require(await host.connection(0x40))
        // 60 frames of 30 to 89 payload octets: each is fragmented in 27-octet ACL packets.
        let frames = (0..<60).map { l2capFrame(30 + $0, seed: UInt8($0)) }
        func inject(_ f: [UInt8]) {
            var start = 0
            while start < f.count {
                let end = Swift.min(f.count, start + 27)
                t.inject(.acl(HCIACLPacket(handle: 0x40, boundary: start == 0 ? .first : .continuing, data: Array(f[start..<end]))))
                start = end
            }
        }
        for f in frames[..<20] { inject(f) }
        let record = SinkRecord()
        // Frames 20..<40 arrive while the sink is being installed (held frames handed over).
        let concurrent = Task { for f in frames[20..<40] { inject(f) } }
        #expect(await attachRecordingLayer(link, record, host: host))
        await concurrent.value
        for f in frames[40...] { inject(f) }
        try await record.state.until("all frames handled") { $0.frames.count == frames.count }
        let seen = record.state.withLock { $0 }
        #expect(seen.frames == frames)
        #expect(!seen.overlapped)
        // The stream is not a second route: the consumer is the layer.
        var it = link.frames.makeAsyncIterator()
        #expect(await it.next() == nil)
        t.inject(DisconnectionComplete(connectionHandle: 0x40, reason: .remoteUserTerminated))
        try await host.settled()  // the disconnection handled
        #expect(record.state.value.closed == 1)
        await host.close()
    }

    @Test func framesHeldForALateConsumerKeepTheirOrderAndEnd() async throws {
        let (host, t) = try await makeHost(handles: [0x40])
        let link = try #require(await host.connection(0x40))
        let frames = (0..<5).map { l2capFrame(10, seed: UInt8($0)) }
        for f in frames { t.inject(.acl(HCIACLPacket(handle: 0x40, boundary: .first, data: f))) }
        t.inject(DisconnectionComplete(connectionHandle: 0x40, reason: .remoteUserTerminated))
        #expect(await host.connection(0x40) == nil)  // (runs after the disconnection's handling)
        // Consumer attached after the disconnection: every frame, then the end.
        var got: [[UInt8]] = []
        for await f in link.frames { got.append(f) }
        #expect(got == frames)
        await host.close()
    }
}

/// HCI commands time out through the host's one deadline table (issue 14): on an injected
/// clock, nothing fires while it stands still, and the command fails once it passes the
/// command's timeout.
@Suite struct DeadlineTableTests {
    @Test func unansweredCommandTimesOutWhenTheClockPassesItsDeadline() async throws {
        let base = FakeTransport.controller()
        // The scripted controller, except that Read RSSI is never answered.
        let t = FakeTransport { c in c.opcode == ReadRSSI.opcode ? [] : base.responder!(c) }
        let clock = ManualDeadlineClock()
        var config = HostConfiguration()
        config.clock = clock
        let host = Host(transport: t, configuration: config)
        _ = try await host.start()
        #expect(await host.armedDeadlineCount == 0)
        let pending = Task { try await host.execute(ReadRSSI(connectionHandle: 0x0040), timeout: .seconds(5)) }
        try await host.armed(1)
        await advance(clock, by: .milliseconds(4_999), firing: host)
        #expect(await host.armedDeadlineCount == 1)
        await advance(clock, by: .milliseconds(1), firing: host)
        await #expect(throws: HostError.commandTimeout(ReadRSSI.opcode.name)) { try await pending.value }
        #expect(await host.armedDeadlineCount == 0)
        await host.close()
    }
}

/// Issue 24: a link's HCI events reach its layers by one route, the layer attached to it
/// (`Host.attach`), in the host's isolation and in controller order with its frames: events
/// that came before the layer are handed over first, the disconnection is the last one, and a
/// later link with the same handle is a link of its own.
extension ACLFlowTests {
    @Test func linkEventsReachTheLayerInOrderIncludingThoseBeforeIt() async throws {
        let (host, t) = try await makeHost(handles: [0x40])
        let link = try #require(await host.connection(0x40))
        // Before the layer: an LTK request (Core v5.4 Vol 4 Part E 7.7.65.5), then a frame.
        t.inject(le: LELongTermKeyRequest(connectionHandle: 0x40, randomNumber: 0x1122, encryptedDiversifier: 0x33))
        let frame = l2capFrame(5, seed: 7)
        t.inject(.acl(HCIACLPacket(handle: 0x40, boundary: .first, data: frame)))
        // (Each `await host` below runs after the host's handling of what was injected before.)
        let record = SinkRecord()
        #expect(await attachRecordingLayer(link, record, host: host))
        #expect(await !attachRecordingLayer(link, SinkRecord(), host: host), "a second layer is refused")
        // Encryption Change (7.7.8) after the frame, then the disconnection (7.7.5).
        t.inject(EncryptionChange(status: .success, connectionHandle: 0x40, encryptionEnabled: 1))
        t.inject(DisconnectionComplete(connectionHandle: 0x40, reason: .remoteUserTerminated))
        try await host.settled()  // both events handled
        #expect(record.state.withLock { $0.events } == [.longTermKeyRequest(random: 0x1122, ediv: 0x33),
                                                         .encryptionChanged(enabled: true, status: .success),
                                                         .disconnected(.remoteUserTerminated)])
        #expect(record.state.withLock { $0.frames } == [frame])
        // The handle again: a new link, whose events are not the old layer's.
        t.inject(le: connectionComplete(0x40))
        #expect(await host.connection(0x40) != nil)
        t.inject(EncryptionChange(status: .success, connectionHandle: 0x40, encryptionEnabled: 1))
        let renewed = try #require(await host.connection(0x40))
        let later = SinkRecord()
        #expect(await attachRecordingLayer(renewed, later, host: host))
        try await host.settled()  // what was held for the layer handed over
        #expect(later.state.withLock { $0.events } == [.encryptionChanged(enabled: true, status: .success)])
        #expect(record.state.withLock { $0.events.count } == 3)
        await host.close()
        // The host closing is the link's end too.
        #expect(later.state.withLock { $0.events.last } == .disconnected(.unspecifiedError))
    }

    /// A layer attached after its link went still gets the frames that came before the
    /// disconnection, then the disconnection with its reason.
    @Test func aLayerAttachedAfterTheLinkWentGetsItsFramesThenItsEnd() async throws {
        let (host, t) = try await makeHost(handles: [0x40])
        let link = try #require(await host.connection(0x40))
        let frame = l2capFrame(8, seed: 3)
        t.inject(.acl(HCIACLPacket(handle: 0x40, boundary: .first, data: frame)))
        t.inject(DisconnectionComplete(connectionHandle: 0x40, reason: .remoteUserTerminated))
        #expect(await host.connection(0x40) == nil)  // (runs after the disconnection's handling)
        let record = SinkRecord()
        #expect(await attachRecordingLayer(link, record, host: host))
        #expect(record.state.withLock { $0.frames } == [frame])
        #expect(record.state.withLock { $0.events } == [.disconnected(.remoteUserTerminated)])
        await host.close()
    }
}

/// Issue 24: a layer's task (`Host.spawn`) runs in its host's isolation; a body that is not
/// isolated to that host (it would run elsewhere and touch the layers from there) is refused
/// where it is handed over, not discovered by a race.
@Suite struct SpawnIsolationTests {
    @Test func aBodyIsolatedToTheHostRunsThere() async throws {
        let host = Host(transport: FakeTransport.controller())
        let ran = await host.run { host in
            await host.spawn { host.preconditionIsolated("the spawned body runs in the host's isolation") }.value
            return true
        }
        #expect(ran)
    }

    @Test func aBodyNotIsolatedToTheHostIsRefused() async {
        await #expect(processExitsWith: .failure) {
            let host = Host(transport: FakeTransport.controller())
            await host.spawn { print("a nonisolated body") }.value
        }
    }
}

/// `Host.checkedIsolation`: a job of the host's executor that is not a task (a transport's
/// delivery, a timer) enters the host's isolation with a plain call; anywhere else the runtime's
/// check refuses it (SE-0423: the isolated witness of a `@preconcurrency` conformance checks the
/// executor), as `assumeIsolated` would.
@Suite struct CheckedIsolationTests {
    @Test func aJobOfTheHostsExecutorEntersItsIsolation() async throws {
        let host = Host(transport: FakeTransport.controller())
        let entered = Watched(false)
        host.executor.submit {
            host.checkedIsolation { host in
                host.preconditionIsolated("checkedIsolation's body runs in the host's isolation")
                entered.withLock { $0 = true }
            }
        }
        try await entered.until("the submitted job ran") { $0 }
    }

    @Test func offTheHostsExecutorItIsRefused() async {
        await #expect(processExitsWith: .failure) {
            let host = Host(transport: FakeTransport.controller())
            host.checkedIsolation { _ in print("entered from the pool") }
        }
    }
}

