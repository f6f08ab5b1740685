import HCI
import Testing
import StackTestSupport
import TestSupport
import Transport
@testable import Host

/// Issue 13 defects 8 and 9 at the ACL layer: the per-link queue of answers (`enqueueL2CAP`)
/// is bounded, and frames waiting for ACL buffers the controller never frees fail after
/// `HostConfiguration.aclCreditTimeout` with a named error instead of waiting for ever.
@Suite(.timeLimit(.minutes(1))) struct SendBoundsTests {
    func makeHost(_ configuration: HostConfiguration = .init()) async throws -> (Host, FakeTransport) {
        // One ACL buffer, never freed (no Number Of Completed Packets is injected).
        let t = FakeTransport.controller(aclLength: 27, aclCount: 1)
        let host = Host(transport: t, configuration: configuration)
        _ = try await host.start()
        t.inject(le: connectionComplete(0x40))
        #expect(await host.connections.count == 1)  // (runs after the event's handling)
        return (host, t)
    }

    /// Before the fix every frame was queued: 200 accepted, none refused.
    @Test func answersQueuedWithoutWaiterAreBounded() async throws {
        let (host, t) = try await makeHost()
        var accepted = 0
        var refusal: HostError?
        for _ in 0..<200 {
            do {
                try await host.enqueueL2CAP(l2capFrame(10), on: 0x40)
                accepted += 1
            } catch let e as HostError {
                refusal = e
                break
            }
        }
        // One frame takes the only buffer at once; 64 (the default maxEnqueuedFramesPerLink) wait.
        #expect(accepted == 1 + 64)
        #expect(await host.queuedFrameCount(0x40) == 64)
        guard case .busy? = refusal else { Issue.record("expected HostError.busy, got \(String(describing: refusal))"); return }
        #expect(await host.canEnqueueL2CAP(on: 0x40) == false)
        // Buffers come back: the queue drains and answers are accepted again.
        t.complete(0x40, 1)
        #expect(await host.canEnqueueL2CAP(on: 0x40))  // (runs after the completion's handling)
        try await host.enqueueL2CAP(l2capFrame(10), on: 0x40)
        await host.close()
    }

    /// SMP/signaling PDUs (`EnqueuedFrameKind.control`) have their own bound: a link whose 64
    /// answer slots are full still queues them. Before the fix they shared the 64 slots and the
    /// 65th frame, whatever its protocol, was refused, so an ATT flood starved pairing. SMP has
    /// one PDU outstanding per exchange (Core v5.4 Vol 3 Part H 3.3), so its bound is small.
    @Test func controlFramesDoNotShareTheAnswersBound() async throws {
        let (host, t) = try await makeHost()
        try await host.enqueueL2CAP(l2capFrame(10), on: 0x40)  // takes the only buffer
        for _ in 0..<64 { try await host.enqueueL2CAP(l2capFrame(10), on: 0x40) }
        #expect(await host.canEnqueueL2CAP(on: 0x40) == false)
        await #expect(throws: HostError.self) { try await host.enqueueL2CAP(l2capFrame(10), on: 0x40) }
        for _ in 0..<HostConfiguration().maxEnqueuedControlFramesPerLink {
            try await host.enqueueL2CAP(l2capFrame(10), on: 0x40, kind: .control)
        }
        #expect(await host.queuedFrameCount(0x40) == 64 + 16)
        // Still bounded: a peer cannot grow the queue with control PDUs either.
        await #expect(throws: HostError.self) { try await host.enqueueL2CAP(l2capFrame(10), on: 0x40, kind: .control) }
        // In order: every queued frame goes out as buffers come back, then each kind has room again.
        for n in 1...80 {
            t.complete(0x40, 1)
            try await t.untilSent(acl: n + 1)
            #expect(t.sentACL.count == n + 1)
        }
        #expect(await host.canEnqueueL2CAP(on: 0x40))
        try await host.enqueueL2CAP(l2capFrame(10), on: 0x40, kind: .control)
        await host.close()
    }

    /// Before the fix the second send waited for ever (the test failed at its 10 s limit).
    @Test func framesWaitingForBuffersFailAfterTheCreditTimeout() async throws {
        var configuration = HostConfiguration()
        configuration.aclCreditTimeout = .milliseconds(300)
        let (host, t) = try await makeHost(configuration)
        try await host.sendL2CAP(l2capFrame(10), on: 0x40)  // takes the only buffer, never freed
        try await host.enqueueL2CAP(l2capFrame(10), on: 0x40)
        let waiting = Pending { try await host.sendL2CAP(l2capFrame(10), on: 0x40) }
        let result = try await waiting.result(within: .seconds(10), "sendL2CAP waiting for ACL buffers")
        guard case .failure(let error) = result, case .procedureTimeout(let what)? = error as? HostError else {
            Issue.record("expected HostError.procedureTimeout, got \(result)")
            return
        }
        #expect(what.contains("ACL buffers"))
        // Nothing is left queued: neither the awaited frame nor the enqueued answer.
        #expect(await host.queuedFrameCount(0x40) == 0)
        #expect(t.sentACL.count == 1)
        await host.close()
    }

    /// The ACL credit watchdog is a deadline in the host's one table (issue 14): on an injected
    /// clock nothing fails while it stands still; moved past `aclCreditTimeout` (30 s by
    /// default) with no buffer back, the waiting frame fails.
    @Test func creditWatchdogFiresThroughTheDeadlineTable() async throws {
        let clock = ManualDeadlineClock()
        var configuration = HostConfiguration()
        configuration.clock = clock
        let (host, _) = try await makeHost(configuration)
        try await host.sendL2CAP(l2capFrame(10), on: 0x40)  // takes the only buffer, never freed
        #expect(await host.armedDeadlineCount == 0)
        let waiting = Pending { try await host.sendL2CAP(l2capFrame(10), on: 0x40) }
        try await host.armed(1)  // the watchdog
        await advance(clock, by: .milliseconds(29_999), firing: host)
        #expect(await host.queuedFrameCount(0x40) == 1)
        #expect(!waiting.isDone)
        await advance(clock, by: .milliseconds(1), firing: host)
        let result = try await waiting.result(within: .seconds(10), "sendL2CAP after the clock passed the credit timeout")
        guard case .failure(let error) = result, case .procedureTimeout(let what)? = error as? HostError else {
            Issue.record("expected HostError.procedureTimeout, got \(result)")
            return
        }
        #expect(what.contains("ACL buffers"))
        #expect(await host.armedDeadlineCount == 0)
        await host.close()
    }

    /// Buffers that keep coming back, however slowly, are progress: nothing fails. On the
    /// manual clock: a buffer back every 20 s, for 100 s, against the 30 s timeout.
    @Test func slowButSteadyCreditsDoNotTimeOut() async throws {
        let clock = ManualDeadlineClock()
        var configuration = HostConfiguration()
        configuration.clock = clock
        let (host, t) = try await makeHost(configuration)
        #expect(configuration.aclCreditTimeout == .seconds(30))
        let sends = Pending {
            for _ in 0..<6 { try await host.sendL2CAP(l2capFrame(10), on: 0x40) }
        }
        for n in 1...5 {
            try await t.untilSent(acl: n)
            try await host.until("send \(n + 1) waiting for a buffer") { $0.queuedFrameCount(0x40) == 1 }
            await advance(clock, by: .seconds(20), firing: host)
            #expect(!sends.isDone, "a send ended while its frame waited (\(n) buffer(s) back)")
            t.complete(0x40, 1)
        }
        if case .failure(let e) = try await sends.result(within: .seconds(10), "the sends") { Issue.record("a send failed: \(e)") }
        #expect(t.sentACL.count == 6)
        await host.close()
    }
}
