import HCI
import Synchronization

/// Packets from the controller, handed to one reader in batches: the reader is resumed once per
/// batch (everything that arrived while it was busy), not once per packet, and the queue is not
/// generic (an `AsyncThrowingStream<HCIPacket>` looks up its generic metadata on every yield
/// and `next()`, a measurable share of the time per PDU on the in-process link).
///
/// One reader: the `Host` takes batches with `next()`; anyone else reads `stream`, a view fed
/// from the inbox by a relay task started on first use. Use one or the other, not both.
/// Unbounded, as the transports' streams were: the reader is the host, which handles each
/// packet at once.
public final class PacketInbox: Sendable {
    private struct State {
        var packets: [HCIPacket] = []
        var waiter: CheckedContinuation<[HCIPacket]?, any Error>?
        /// Set once by `finish`: nil error for a normal end.
        var ended: TransportError?? = nil
        var stream: AsyncThrowingStream<HCIPacket, any Error>?
    }
    private let state = Mutex(State())

    public init() {}

    /// Producer: queues `packet` for the reader (ignored once finished).
    public func deliver(_ packet: HCIPacket) {
        let waiter: CheckedContinuation<[HCIPacket]?, any Error>? = state.withLock { s in
            guard s.ended == nil else { return nil }
            // A waiting reader has taken everything before it parked.
            if let w = s.waiter { s.waiter = nil; return w }
            s.packets.append(packet)
            return nil
        }
        waiter?.resume(returning: [packet])
    }

    /// Producer: no more packets; the reader gets those queued, then the end (`error` thrown,
    /// or nil returned). Only the first call counts.
    public func finish(throwing error: TransportError? = nil) {
        let waiter: CheckedContinuation<[HCIPacket]?, any Error>? = state.withLock { s in
            guard s.ended == nil else { return nil }
            s.ended = .some(error)
            defer { s.waiter = nil }
            return s.waiter
        }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    /// Reader: every packet queued since the last call, in arrival order (never empty); waits
    /// when there is none. Nil at the end (or when the reading task is cancelled); throws the
    /// transport's error after the packets queued before it.
    public func next() async throws -> [HCIPacket]? {
        enum Now { case batch([HCIPacket]), end(TransportError?), wait }
        func take(_ s: inout State) -> Now {
            if !s.packets.isEmpty {
                let b = s.packets
                s.packets.removeAll(keepingCapacity: true)
                return .batch(b)
            }
            if let e = s.ended { return .end(e) }
            return .wait
        }
        switch state.withLock({ take(&$0) }) {
        case .batch(let b): return b
        case .end(let e?): throw e
        case .end(nil): return nil
        case .wait: break
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<[HCIPacket]?, any Error>) in
                let now: Now = state.withLock { s in
                    let n = take(&s)
                    if case .wait = n {
                        if Task.isCancelled { return .end(nil) }
                        s.waiter = c
                    }
                    return n
                }
                switch now {
                case .batch(let b): c.resume(returning: b)
                case .end(let e?): c.resume(throwing: e)
                case .end(nil): c.resume(returning: nil)
                case .wait: break
                }
            }
        } onCancel: {
            let w = state.withLock { s -> CheckedContinuation<[HCIPacket]?, any Error>? in
                defer { s.waiter = nil }
                return s.waiter
            }
            w?.resume(returning: nil)
        }
    }

    /// The packets as an `AsyncThrowingStream`, for a reader other than the host (tests,
    /// `CapturingTransport`). The same stream on every call.
    public var stream: AsyncThrowingStream<HCIPacket, any Error> {
        state.withLock { s in
            if let existing = s.stream { return existing }
            let (stream, c) = AsyncThrowingStream<HCIPacket, any Error>.makeStream()
            let relay = Task { [self] in
                do {
                    while let batch = try await next() { for p in batch { c.yield(p) } }
                    c.finish()
                } catch {
                    c.finish(throwing: error)
                }
            }
            c.onTermination = { _ in relay.cancel() }
            s.stream = stream
            return stream
        }
    }
}
