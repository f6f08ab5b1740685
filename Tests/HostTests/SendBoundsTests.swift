import HCI
import Testing
import TestSupport
import Transport
@testable import Host

/// Issue 13 defect 8 at the ACL layer: the per-link queue of answers (`enqueueL2CAP`) is bounded.
@Suite(.timeLimit(.minutes(1))) struct SendBoundsTests {
    func makeHost(_ configuration: HostConfiguration = .init()) async throws -> (Host, FakeTransport) {
        // One ACL buffer, never freed (no Number Of Completed Packets is injected).
        let t = FakeTransport.controller(aclLength: 27, aclCount: 1)
        let host = Host(transport: t, configuration: configuration)
        _ = try await host.start()
        t.inject(le: connectionComplete(0x40))
        try await eventually("link up") { await host.connections.count == 1 }
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
        try await eventually("queue drains") { await host.canEnqueueL2CAP(on: 0x40) }
        try await host.enqueueL2CAP(l2capFrame(10), on: 0x40)
        await host.close()
    }
}
