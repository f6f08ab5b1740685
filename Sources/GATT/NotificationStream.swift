import Dispatch
import Synchronization
import Transport

/// The values one subscription receives (Handle Value Notifications and Indications), in
/// arrival order, for the application to iterate.
///
/// Nothing is lost without a word: at most `bufferLimit` values wait for the application;
/// beyond that the oldest waiting notification is dropped and counted in `droppedCount`.
/// An indication is handed over, not just queued: `Continuation.deliverIndication` returns
/// once the application's `next()` has returned it, and the ATT bearer sends the Handle
/// Value Confirmation only then (Core Vol 3 Part F 3.4.7.2: the confirmation acknowledges
/// that the client received the value). The server sends no further indication before the
/// confirmation, so a waiting indication is always the newest value and never dropped.
///
/// Delivery is batched: the iterator takes every value waiting at once (one lock, one resume
/// of the application's task per batch, not per value) and returns them one by one, in order.
/// A burst of notifications therefore costs the application one wake.
public struct GATTNotificationStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    public typealias Failure = any Error

    /// Values waiting for the application before the oldest is dropped.
    public static let defaultBufferLimit = 1024

    struct Item: Sendable {
        let sequence: UInt64
        let value: [UInt8]
        /// An indication: its deliverer waits until `next()` has returned it.
        let indication: Bool
    }
    let storage: Storage
    /// Ends the stream as cancelled when the application lets go of it and its iterators.
    let owner: Owner

    /// Values dropped because the application had `bufferLimit` values still to take.
    public var droppedCount: Int { storage.state.withLock { $0.dropped } }

    public struct Iterator: AsyncIteratorProtocol {
        let storage: Storage
        let owner: Owner
        /// The batch being handed out, and the next index in it.
        var batch: [Item] = []
        var index = 0

        public mutating func next() async throws -> [UInt8]? { try await next(isolation: nil) }

        /// `next()` on the caller's executor (`for try await` passes its isolation): a value
        /// already in the batch is returned without switching executors, and so is a batch.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws -> [UInt8]? {
            if index == batch.count {
                // The spent batch goes back to be filled again: no buffer allocated per batch.
                var spent: [Item] = []
                swap(&spent, &batch)
                spent.removeAll(keepingCapacity: true)
                batch = try await storage.nextBatch(recycling: spent)
                index = 0
                if batch.isEmpty { return nil }
            }
            let i = index
            index += 1
            if batch[i].indication { storage.taken(batch[i].sequence) }
            return batch[i].value
        }
    }

    /// The subscription ends when the iterator is let go (the `for try await` loop is left,
    /// by `break`, `return` or a throw), whatever holds the stream itself: in top-level code a
    /// stream can live as long as the program. A stream let go before anything iterated it
    /// ends it too. One loop per stream: a second iterator sees the end.
    public func makeAsyncIterator() -> Iterator {
        storage.state.withLock { $0.iterated = true }
        return Iterator(storage: storage, owner: Owner(storage, iterator: true))
    }

    /// The producer's side.
    public struct Continuation: Sendable {
        let storage: Storage

        /// Queues a notification's value; counts it in `droppedCount` of the stream when the
        /// queue is full (the oldest waiting value makes room).
        public func yield(_ value: [UInt8]) {
            _ = storage.push(value, indication: false)
        }

        /// Queues an indication's value and returns once the application has taken it (true),
        /// or when the stream ended, the value was dropped, or `timeout` passed first (false).
        /// The timeout bounds the wait by the ATT transaction timeout: past it the server has
        /// given up anyway.
        @discardableResult
        public func deliverIndication(_ value: [UInt8], timeout: Duration = .seconds(30)) async -> Bool {
            guard let sequence = storage.push(value, indication: true) else { return false }
            return await storage.wait(for: sequence, timeout: timeout)
        }

        /// Ends the stream (with `error`, thrown to the application after the values queued).
        public func finish(throwing error: (any Error)? = nil) {
            storage.finish(error, cancelled: false)
        }

        /// Called once when the stream ends: with true when the application cancelled or
        /// dropped it, false when it was finished.
        public func onTermination(_ handler: @escaping @Sendable (_ cancelled: Bool) -> Void) {
            storage.state.withLock { $0.onTermination = handler }
        }
    }

    public static func makeStream(bufferLimit: Int = defaultBufferLimit) -> (stream: GATTNotificationStream, continuation: Continuation) {
        let storage = Storage(limit: Swift.max(1, bufferLimit))
        return (GATTNotificationStream(storage: storage, owner: Owner(storage, iterator: false)), Continuation(storage: storage))
    }

    /// Held by the stream and by each iterator: an iterator's going cancels the stream; the
    /// stream's going does only while no iterator was made (the iterator of a `for try await`
    /// over a temporary stream outlives the stream).
    final class Owner: Sendable {
        let storage: Storage
        let iterator: Bool
        init(_ storage: Storage, iterator: Bool) { self.storage = storage; self.iterator = iterator }
        deinit {
            if iterator || !storage.state.withLock({ $0.iterated }) { storage.finish(nil, cancelled: true) }
        }
    }

    /// The queue, the application's parked task, and the indications waiting to be taken.
    final class Storage: Sendable {
        struct State {
            var limit: Int
            var items: [Item] = []
            var head = 0
            var consumer: CheckedContinuation<[Item], any Error>?
            /// The consumer is parked in `consumer` with nothing queued. Asked first, so that a
            /// value queued while nobody waits leaves the continuation alone (an optional
            /// `CheckedContinuation` is copied and destroyed through its value witnesses).
            var parked = false
            var issued: UInt64 = 0
            /// Every indication up to this sequence number has been returned by `next()`.
            var taken: UInt64 = 0
            var dropped = 0
            /// `makeAsyncIterator` was called: the iterator's end is the subscription's.
            var iterated = false
            /// Set by `finish`: no more values; the end (nil, or the error) follows the queue.
            var finished = false
            var error: (any Error)?
            var onTermination: (@Sendable (Bool) -> Void)?
            var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
            /// Waits whose timeout fired before they were parked.
            var expired: Set<UInt64> = []
            /// Indications dropped (queue full) before their deliverer began to wait.
            var droppedIndications: Set<UInt64> = []
            /// `whenParked` callbacks (tests): run once the consumer or an indication's
            /// deliverer is parked.
            var parkWatchers: [@Sendable () -> Void] = []
            var waiting: Int { items.count - head }
            /// An empty buffer the iterator gave back (`nextBatch(recycling:)`): `takeAll`
            /// leaves it in `items`' place, so the next values fill it without allocating.
            var spare: [Item] = []

            /// Hands the park watchers to a thread of their own (the caller holds the lock).
            mutating func parkedNow() {
                guard !parkWatchers.isEmpty else { return }
                let watchers = parkWatchers
                parkWatchers = []
                DispatchQueue.global().async { for w in watchers { w() } }
            }

            /// Every value waiting, in order; the queue is left empty (the spare buffer).
            mutating func takeAll() -> [Item] {
                guard head == 0 else {
                    defer { items.removeAll(keepingCapacity: true); head = 0 }
                    return Array(items[head...])
                }
                var taken = spare
                spare = []
                swap(&taken, &items)
                return taken
            }
        }
        let state: Mutex<State>

        init(limit: Int) { state = Mutex(State(limit: limit)) }

        /// Queues a value; nil once finished. Returns its sequence number.
        func push(_ value: [UInt8], indication: Bool) -> UInt64? {
            // What else to do, outside the lock (kept trivial: no continuation in it).
            enum Then { case none, wake, droppedIndication(UInt64) }
            var sequence: UInt64?
            let then: Then = state.withLock { s in
                guard !s.finished else { return .none }
                s.issued += 1
                sequence = s.issued
                var then = Then.none
                if s.waiting >= s.limit {
                    // Full (so no consumer is parked): the oldest waiting value makes room.
                    if s.items[s.head].indication {
                        // Its deliverer gets false: now if it waits already, else when it does.
                        s.droppedIndications.insert(s.items[s.head].sequence)
                        then = .droppedIndication(s.items[s.head].sequence)
                    }
                    s.head += 1
                    s.dropped += 1
                }
                if s.head > 0, s.head * 2 >= s.items.count { s.items.removeFirst(s.head); s.head = 0 }
                s.items.append(Item(sequence: s.issued, value: value, indication: indication))
                if s.parked { s.parked = false; then = .wake }
                return then
            }
            switch then {
            case .none: break
            case .wake: handOff()
            case .droppedIndication(let dropped):
                let waiter: CheckedContinuation<Bool, Never>? = state.withLock { s in
                    guard let w = s.waiters.removeValue(forKey: dropped) else { return nil }
                    s.droppedIndications.remove(dropped)
                    return w
                }
                waiter?.resume(returning: false)
            }
            return sequence
        }

        /// Resumes the consumer that was parked with what is queued by now (this value and any
        /// queued since, in order). A `finish` in between leaves the consumer to this (the
        /// queued values come before the end); a cancellation takes it (they are dropped).
        private func handOff() {
            let handOff: (CheckedContinuation<[Item], any Error>, [Item])? = state.withLock { s in
                guard let c = s.consumer else { return nil }
                s.consumer = nil
                return (c, s.takeAll())
            }
            if let (consumer, batch) = handOff { consumer.resume(returning: batch) }
        }

        /// Every value waiting, in order; waits when there is none. Empty at the end; throws the
        /// `finish` error after the values queued before it. `spent` is the caller's last batch,
        /// emptied: kept as the spare buffer when it is bigger than the one kept.
        nonisolated(nonsending) func nextBatch(recycling spent: consuming [Item] = []) async throws -> [Item] {
            var spent = spent
            return try await state.takeBatch(ended: [], take: { s in
                // (Moved, not copied: a second reference would make the next append copy it.)
                if spent.capacity > s.spare.capacity { swap(&spent, &s.spare) }
                if s.waiting > 0 { return .batch(s.takeAll()) }
                if s.finished {
                    defer { s.error = nil }
                    return .end(s.error)
                }
                return .wait
            }, park: { s, c in
                s.consumer = c
                s.parked = true
                s.parkedNow()
            }, onCancel: {
                finish(nil, cancelled: true)
            })
        }

        /// Ends the stream: the parked consumer gets the end, indications waiting get false,
        /// `onTermination` runs once. Values already queued are still handed out on a normal
        /// finish; a cancellation drops them.
        func finish(_ error: (any Error)?, cancelled: Bool) {
            let (consumer, waiters, termination): (CheckedContinuation<[Item], any Error>?, [CheckedContinuation<Bool, Never>], (@Sendable (Bool) -> Void)?) = state.withLock { s in
                if cancelled { s.items.removeAll(); s.head = 0 }
                guard !s.finished else {
                    // Finished already: a cancellation still wakes a parked consumer.
                    defer { if cancelled { s.consumer = nil; s.parked = false } }
                    return (cancelled ? s.consumer : nil, [], nil)
                }
                s.finished = true
                // (A consumer with values waiting is being handed them: `handOff` resumes it, and
                // the end follows them.)
                let consumer = s.waiting == 0 ? s.consumer : nil
                if consumer != nil { s.consumer = nil; s.parked = false } else if !cancelled { s.error = error }
                let w = Array(s.waiters.values)
                s.waiters.removeAll()
                let t = s.onTermination
                s.onTermination = nil
                return (consumer, w, t)
            }
            if let consumer {
                if !cancelled, let error { consumer.resume(throwing: error) } else { consumer.resume(returning: []) }
            }
            for w in waiters { w.resume(returning: false) }
            termination?(cancelled)
        }

        /// `next()` returned the indication `sequence`: its deliverer may confirm it.
        func taken(_ sequence: UInt64) {
            let ready: [CheckedContinuation<Bool, Never>] = state.withLock { s in
                s.taken = Swift.max(s.taken, sequence)
                let due = s.waiters.keys.filter { $0 <= sequence }
                return due.compactMap { s.waiters.removeValue(forKey: $0) }
            }
            for c in ready { c.resume(returning: true) }
        }

        func wait(for sequence: UInt64, timeout: Duration) async -> Bool {
            // Strong: the timer is cancelled as soon as this wait returns (so it holds the
            // storage no longer than the wait does), and a weak reference would give the
            // storage a side table, the slow path for every later retain and release of it.
            let timer = Task {
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                self.expire(sequence)
            }
            defer { timer.cancel() }
            return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let now: Bool? = state.withLock { s in
                    if s.taken >= sequence { return true }
                    if s.finished { return false }
                    if s.expired.remove(sequence) != nil { return false }
                    if s.droppedIndications.remove(sequence) != nil { return false }
                    s.waiters[sequence] = c
                    s.parkedNow()
                    return nil
                }
                if let now { c.resume(returning: now) }
            }
        }

        /// Runs `body` once the application's consumer is parked waiting for a value, or a
        /// deliverer waits for its indication to be taken (at once if either is): for tests,
        /// which then look at what did not happen meanwhile instead of sleeping.
        func whenParked(_ body: @escaping @Sendable () -> Void) {
            let now = state.withLock { s -> Bool in
                if s.parked || !s.waiters.isEmpty { return true }
                s.parkWatchers.append(body)
                return false
            }
            if now { body() }
        }

        private func expire(_ sequence: UInt64) {
            let waiter: CheckedContinuation<Bool, Never>? = state.withLock { s in
                if let w = s.waiters.removeValue(forKey: sequence) { return w }
                if s.taken < sequence, !s.finished { s.expired.insert(sequence) }
                return nil
            }
            waiter?.resume(returning: false)
        }
    }
}
