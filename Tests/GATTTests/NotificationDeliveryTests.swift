import Synchronization
import Testing
import HCI
import ATT
import TestSupport
@testable import GATT

/// Returns once `stream`'s consumer is parked waiting for a value, or a deliverer waits for its
/// indication to be taken (the stream's own hook: no sleep).
func parked(_ stream: GATTNotificationStream) async throws {
    let done = Watched(false)
    stream.storage.whenParked { done.withLock { $0 = true } }
    try await done.until("the stream's consumer or an indication's deliverer waiting") { $0 }
}

/// No notification is lost without a word, and an indication is confirmed only once the
/// application has it (issue 13, defect 10).
@MainActor @Suite(.timeLimit(.minutes(1))) struct NotificationDeliveryTests {
    /// Regression: values beyond the 1024 waiting were dropped silently. The oldest are still
    /// dropped (the newest matter most), and counted.
    @Test func valuesBeyondTheBufferAreCounted() async throws {
        let (stream, continuation) = GATTNotificationStream.makeStream()
        for i in 0..<1030 { continuation.yield([UInt8(i & 0xFF), UInt8(i >> 8)]) }
        #expect(stream.droppedCount == 6)
        continuation.finish()
        var taken: [[UInt8]] = []
        for try await v in stream { taken.append(v) }
        #expect(taken.count == 1024)
        #expect(taken.first == [6, 0])     // values 0...5 were dropped
        #expect(taken.last == [0x05, 0x04]) // 1029
    }

    /// Regression: the Handle Value Confirmation went out when the value was queued for the
    /// application, before it had it. Core Vol 3 Part F 3.4.7.2/3.4.7.3: the confirmation
    /// acknowledges the indication's receipt, so it follows the application taking the value.
    @Test func indicationIsConfirmedOnlyOnceTheApplicationHasIt() async throws {
        let server = GATTServer(services: demoServices())
        let (client, link) = await Loopback.connect(server)
        let c = try #require(findChar(try await client.discoverDatabase(), 0xFFE3)).characteristic
        let values = try await client.subscribe(c, indications: true)
        let indicated = Task { await server.indicate(characteristic: 0xFFE3, value: [4, 2]) }
        try await parked(values)  // the indication is in the stream, its deliverer waiting
        #expect(link.confirmations == 0, "confirmed before the application took the value")
        var it = values.makeAsyncIterator()
        #expect(try await it.next() == [4, 2])
        #expect(await indicated.value == [link.peer])
        #expect(link.confirmations == 1)
    }

    /// An indication nobody takes is confirmed when the stream ends (the application is gone)
    /// or after the timeout, never held forever.
    @Test func indicationWaitEndsWithTheStreamOrTheTimeout() async throws {
        let (stream, continuation) = GATTNotificationStream.makeStream()
        let clock = ContinuousClock()
        let start = clock.now
        #expect(await continuation.deliverIndication([1], timeout: .milliseconds(200)) == false)
        #expect(clock.now - start >= .milliseconds(200))
        let waiting = Task { await continuation.deliverIndication([2], timeout: .seconds(30)) }
        try await parked(stream)  // the deliverer waits
        continuation.finish()
        #expect(await waiting.value == false)
        _ = stream
    }

    /// Values are handed to the application in batches (one wake per batch): the order is the
    /// arrival order across batches, and a value queued while a batch is being taken waits for
    /// the next one.
    @Test func batchedDeliveryKeepsArrivalOrder() async throws {
        let (stream, continuation) = GATTNotificationStream.makeStream()
        for i in 0..<100 { continuation.yield([UInt8(i)]) }
        var it = stream.makeAsyncIterator()
        var taken: [UInt8] = []
        for _ in 0..<50 { taken += try #require(try await it.next()) }
        for i in 100..<200 { continuation.yield([UInt8(i)]) }
        continuation.finish()
        while let v = try await it.next() { taken += v }
        #expect(taken == (0..<200).map { UInt8($0) })
        #expect(stream.droppedCount == 0)
    }

    /// An application that lets go of the stream (or whose task is cancelled) ends it as
    /// cancelled, so the subscription is removed; a finished stream reports false.
    @Test func droppingOrCancellingTheStreamEndsItAsCancelled() async throws {
        let ended = Mutex<[Bool]>([])
        do {
            let (stream, continuation) = GATTNotificationStream.makeStream()
            continuation.onTermination { cancelled in ended.withLock { $0.append(cancelled) } }
            continuation.yield([1])
            _ = stream
        }
        #expect(ended.withLock { $0 } == [true])
        let (stream, continuation) = GATTNotificationStream.makeStream()
        continuation.onTermination { cancelled in ended.withLock { $0.append(cancelled) } }
        let reader = Task { () -> Int in
            var n = 0
            do { for try await _ in stream { n += 1 } } catch {}
            return n
        }
        try await parked(stream)  // the reader waits
        reader.cancel()
        #expect(await reader.value == 0)
        #expect(ended.withLock { $0 } == [true, true])
        let (other, c2) = GATTNotificationStream.makeStream()
        c2.onTermination { cancelled in ended.withLock { $0.append(cancelled) } }
        c2.finish()
        _ = other
        #expect(ended.withLock { $0 } == [true, true, false])
    }
}
