import HCI
import StackTestSupport
import Testing
import Transport

/// The batched hand-off from a transport to its host (`PacketInbox`): arrival order kept
/// across batches, the end after the packets queued before it, one wake per batch.
@Suite(.timeLimit(.minutes(1))) struct PacketInboxTests {
    func event(_ n: UInt8) -> HCIPacket { .event(HCIEventPacket(code: 0x3E, parameters: [n])) }
    func number(_ p: HCIPacket) -> UInt8? { if case .event(let e) = p { return e.parameters.first } else { return nil } }

    /// Packets queued while the reader is busy come as one batch, in arrival order; the error
    /// that ends the transport comes after them, once.
    @Test func batchesKeepArrivalOrderAndTheEndFollowsThem() async throws {
        let inbox = PacketInbox()
        for n in 0..<5 { inbox.deliver(event(UInt8(n))) }
        inbox.finish(throwing: TransportError(.lost, "gone"))
        inbox.deliver(event(9))  // after the end: ignored
        let batch = try #require(try await inbox.next())
        #expect(batch.compactMap(number) == [0, 1, 2, 3, 4])
        await #expect(throws: TransportError(.lost, "gone")) { _ = try await inbox.next() }
    }

    /// A reader waiting is resumed by the next packet; many producers' packets all arrive, each
    /// producer's in its order.
    @Test func waitingReaderGetsEveryPacketInOrder() async throws {
        let inbox = PacketInbox()
        let reader = Task { () -> [UInt8] in
            var got: [UInt8] = []
            while got.count < 200, let batch = try await inbox.next() { got += batch.compactMap(number) }
            return got
        }
        try await inbox.readerWaiting()  // the reader is parked
        #expect(inbox.hasWaitingReader)
        for n in 0..<200 { inbox.deliver(event(UInt8(n))) }
        #expect(try await reader.value == (0..<200).map { UInt8($0) })
        inbox.finish()
        #expect(try await inbox.next() == nil)
    }

    /// Cancelling the reading task ends its wait (nil), as `AsyncStream`'s `next()` does.
    @Test func cancellationEndsTheWait() async throws {
        let inbox = PacketInbox()
        let reader = Task { try await inbox.next() }
        try await inbox.readerWaiting()
        reader.cancel()
        #expect(try await reader.value == nil)
    }

    /// `stream` (for readers other than the host) sees the same packets and the same end.
    @Test func streamViewRelaysPacketsAndTheEnd() async throws {
        let inbox = PacketInbox()
        for n in 0..<3 { inbox.deliver(event(UInt8(n))) }
        inbox.finish()
        var got: [UInt8] = []
        for try await p in inbox.stream { got += number(p).map { [$0] } ?? [] }
        #expect(got == [0, 1, 2])
    }
}
