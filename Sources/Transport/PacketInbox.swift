import HCI
import Dispatch
import Synchronization

/// Packets from the controller, handed to one reader in batches: the reader is resumed once per
/// batch (everything that arrived while it was busy), not once per packet, and the queue is not
/// generic (an `AsyncThrowingStream<HCIPacket>` looks up its generic metadata on every yield
/// and `next()`, a measurable share of the time per PDU on the in-process link).
///
/// One reader, chosen once: the `Host` has the batches handed to it as jobs on its executor
/// (`deliver(on:to:)`: no task waits, no continuation is resumed); a reader that is not on an
/// executor takes them with `next()`, or reads `stream`, a view fed from the inbox by a relay
/// task started on first use. Use one of them, never two.
/// Unbounded, as the transports' streams were: the reader is the host, which handles each
/// packet at once.
public final class PacketInbox: Sendable {
    /// Where `deliver(on:to:)` hands batches. (A struct: a closure returned out of the lock
    /// inside a tuple is re-wrapped, an allocation per batch.)
    private struct Target {
        let executor: SerialThreadExecutor
        let receive: @Sendable (Delivery) -> Void
    }
    /// The `next()` reader's parked continuation and the `stream` view. In a box of their own:
    /// their types are the Concurrency library's, whose layout is known only at run time, and
    /// kept in `State` they made every access to it (one per packet delivered) go through
    /// value witnesses.
    private final class Waiting {
        var waiter: CheckedContinuation<[HCIPacket]?, any Error>?
        var stream: AsyncThrowingStream<HCIPacket, any Error>?
    }
    private struct State {
        var packets: [HCIPacket] = []
        /// Set once by `finish`: nil error for a normal end.
        var ended: TransportError?? = nil
        /// Whether a `next()` reader is parked (its continuation is in `waiting`): a packet then
        /// goes to it (`deliverSlowly`).
        var readerParked = false
        let waiting = Waiting()
        /// `deliver(on:to:)`: where batches go, and whether a drain job is queued there.
        var target: Target?
        var drainQueued = false
        var endDelivered = false
        /// `tap(_:)`: sees every packet as it is delivered.
        var tap: (@Sendable (HCIPacket) -> Void)?
        /// The emptied array of the last batch `drain` handed over: it and `packets` swap, so
        /// a batch allocates nothing.
        var spare: [HCIPacket] = []
        /// `whenReaderWaits` callbacks, run when a `next()` reader parks.
        var readerWaitWatchers: [@Sendable () -> Void] = []
    }

    /// What `deliver(on:to:)` hands over: packets in arrival order, then the end once.
    public enum Delivery: Sendable {
        case packets([HCIPacket])
        /// No more packets: nil for a normal end (close), else the transport's loss.
        case ended(TransportError?)
    }
    private let state = Mutex(State())

    public init() {}

    /// Producer: queues `packet` for the reader (ignored once finished).
    public func deliver(_ packet: HCIPacket) {
        // What to do after the lock, in locals the closure sets (no enum or tuple carrying a
        // closure out of `withLock`: this runs for every packet).
        var drainOn: SerialThreadExecutor?
        var tap: (@Sendable (HCIPacket) -> Void)?
        let queued = state.withLock { s -> Bool in
            guard !s.readerParked, s.ended == nil else { return false }
            tap = s.tap
            s.packets.append(packet)
            if !s.drainQueued, let executor = s.target?.executor {
                s.drainQueued = true
                drainOn = executor
            }
            return true
        }
        guard queued else { deliverSlowly(packet); return }
        tap?(packet)
        if let drainOn { drainOn.submit { self.drain() } }
    }

    /// `deliver` when a `next()` reader is parked, or after the end (the lock taken again:
    /// the state may have changed in between, it is looked at afresh).
    private func deliverSlowly(_ packet: HCIPacket) {
        var waiter: CheckedContinuation<[HCIPacket]?, any Error>?
        var drainOn: SerialThreadExecutor?
        var tap: (@Sendable (HCIPacket) -> Void)?
        state.withLock { s in
            guard s.ended == nil else { return }
            tap = s.tap
            // A waiting reader has taken everything before it parked.
            if s.readerParked {
                s.readerParked = false
                waiter = s.waiting.waiter
                s.waiting.waiter = nil
                return
            }
            s.packets.append(packet)
            drainOn = drainExecutor(&s)
        }
        tap?(packet)
        if let waiter { waiter.resume(returning: [packet]) }
        if let drainOn { drainOn.submit { self.drain() } }
    }

    /// Shows every packet delivered from now on to `observe`, on the producer's thread, in
    /// arrival order, whichever reader then takes it (a capture of what was received, taken
    /// where the packet arrives, without a relay in front of the reader). One tap.
    public func tap(_ observe: @escaping @Sendable (HCIPacket) -> Void) {
        state.withLock { s in
            precondition(s.tap == nil, "PacketInbox.tap: one tap only")
            s.tap = observe
        }
    }

    /// Hands every batch to `receive` as one job on `executor`, in order, then `.ended` once:
    /// packets that arrive while a batch waits to run join it (one job, and at most one wake of
    /// the executor's thread, per burst). Packets queued before the call go first. `receive` is
    /// released after `.ended`.
    public func deliver(on executor: SerialThreadExecutor, to receive: @escaping @Sendable (Delivery) -> Void) {
        let queue: SerialThreadExecutor? = state.withLock { s in
            precondition(s.target == nil, "PacketInbox.deliver(on:to:): one reader only")
            s.target = Target(executor: executor, receive: receive)
            guard !s.packets.isEmpty || s.ended != nil else { return nil }
            s.drainQueued = true
            return executor
        }
        queue?.submit { self.drain() }
    }

    /// The executor to queue a drain job on, unless none is set or one is queued already
    /// (caller holds the lock and submits the job after releasing it).
    private func drainExecutor(_ s: inout State) -> SerialThreadExecutor? {
        guard !s.drainQueued, let executor = s.target?.executor else { return nil }
        s.drainQueued = true
        return executor
    }

    /// On the target's executor: hands over what is queued, then the end if it came.
    private func drain() {
        var batch: [HCIPacket] = []
        var receive: (@Sendable (Delivery) -> Void)?
        var endCame = false
        state.withLock { s in
            s.drainQueued = false
            swap(&batch, &s.spare)
            swap(&batch, &s.packets)
            receive = s.target?.receive
            endCame = s.ended != nil && !s.endDelivered
        }
        guard let receive else { return }
        if !batch.isEmpty {
            receive(.packets(batch))
            // The buffer is ours again (the delivery that held it has ended): emptied in place,
            // one packet at a time (`removeAll(keepingCapacity:)` destroys them through the
            // runtime's generic array destroy, which costs more for the usual one to eight).
            while batch.popLast() != nil {}
            state.withLock { s in if s.spare.capacity < batch.capacity { swap(&s.spare, &batch) } }
        }
        if endCame { deliverEnd() }
    }

    /// On the target's executor, after the packets queued before the end: the end, once; the
    /// receiver is not needed any more (nor kept alive).
    private func deliverEnd() {
        var receive: (@Sendable (Delivery) -> Void)?
        var end: TransportError?
        state.withLock { s in
            guard let e = s.ended, !s.endDelivered else { return }
            s.endDelivered = true
            end = e
            receive = s.target?.receive
            s.target = nil
        }
        receive?(.ended(end))
    }

    /// Producer: no more packets; the reader gets those queued, then the end (`error` thrown,
    /// or nil returned). Only the first call counts.
    public func finish(throwing error: TransportError? = nil) {
        var waiter: CheckedContinuation<[HCIPacket]?, any Error>?
        let executor: SerialThreadExecutor? = state.withLock { s in
            guard s.ended == nil else { return nil }
            s.ended = .some(error)
            if s.readerParked {
                s.readerParked = false
                waiter = s.waiting.waiter
                s.waiting.waiter = nil
            }
            return drainExecutor(&s)
        }
        executor?.submit { self.drain() }
        if let error { waiter?.resume(throwing: error) } else { waiter?.resume(returning: nil) }
    }

    /// Reader: every packet queued since the last call, in arrival order (never empty); waits
    /// when there is none. Nil at the end (or when the reading task is cancelled); throws the
    /// transport's error after the packets queued before it.
    public func next() async throws -> [HCIPacket]? {
        try await state.takeBatch(ended: nil, take: { s in
            if !s.packets.isEmpty {
                let b = s.packets
                s.packets.removeAll(keepingCapacity: true)
                return .batch(b)
            }
            if let e = s.ended { return .end(e) }
            return .wait
        }, park: { s, c in
            s.waiting.waiter = c
            s.readerParked = true
            if !s.readerWaitWatchers.isEmpty {
                // Not under the lock, and not before the continuation is parked.
                let watchers = s.readerWaitWatchers
                s.readerWaitWatchers = []
                DispatchQueue.global().async { for w in watchers { w() } }
            }
        }, onCancel: {
            let w = state.withLock { s -> CheckedContinuation<[HCIPacket]?, any Error>? in
                s.readerParked = false
                defer { s.waiting.waiter = nil }
                return s.waiting.waiter
            }
            w?.resume(returning: nil)
        })
    }

    /// Whether a `next()` reader is parked waiting for a packet.
    public var hasWaitingReader: Bool { state.withLock { $0.readerParked } }

    /// Runs `body` once a `next()` reader is parked waiting for a packet (at once when one
    /// is): for tests that hand packets to a waiting reader, instead of sleeping until it waits.
    public func whenReaderWaits(_ body: @escaping @Sendable () -> Void) {
        let now = state.withLock { s -> Bool in
            if s.readerParked { return true }
            s.readerWaitWatchers.append(body)
            return false
        }
        if now { body() }
    }

    /// The packets as an `AsyncThrowingStream`, for a reader other than the host (tests,
    /// tools: `HCITransport.incoming`). The same stream on every call.
    public var stream: AsyncThrowingStream<HCIPacket, any Error> {
        state.withLock { s in
            if let existing = s.waiting.stream { return existing }
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
            s.waiting.stream = stream
            return stream
        }
    }
}
