import Synchronization
import Transport

/// `Peripheral.events`: the peripheral's events in order, for one consumer
/// (`for await event in peripheral.events`). When the consumer falls behind (or there is none)
/// the newest `limit` are kept and older ones dropped, as `AsyncStream`'s `.bufferingNewest`
/// did. A concrete type rather than `AsyncStream<PeripheralEvent>`: the server reports two
/// events per read it answers, and `AsyncStream`'s unspecialised generic code (metadata
/// look-ups, a generic deque) was a tenth of the CPU of a read (docs/performance.md, Round 8).
public struct PeripheralEvents: AsyncSequence, Sendable {
    public typealias Element = PeripheralEvent
    public typealias Failure = Never
    let storage: Storage

    public struct Iterator: AsyncIteratorProtocol {
        let storage: Storage
        var batch: [PeripheralEvent] = []
        var index = 0

        /// The next event; nil once the peripheral is closed (after the events before it) or
        /// when the task is cancelled.
        public mutating func next() async -> PeripheralEvent? {
            if index == batch.count {
                batch = (try? await storage.nextBatch()) ?? []
                index = 0
                if batch.isEmpty { return nil }
            }
            index += 1
            return batch[index - 1]
        }
    }

    public func makeAsyncIterator() -> Iterator { Iterator(storage: storage) }

    /// The queue and the consumer's parked task.
    final class Storage: Sendable {
        struct State {
            /// The events waiting, the oldest at `head`: appended up to the limit, then a ring
            /// (a new event takes the place of the oldest, which is dropped in place).
            var items: [PeripheralEvent] = []
            var head = 0
            var consumer: CheckedContinuation<[PeripheralEvent], any Error>?
            /// The consumer is parked in `consumer` with nothing queued. Asked first, so that
            /// an event queued while nobody waits leaves the continuation alone (an optional
            /// `CheckedContinuation` is copied and destroyed through its value witnesses).
            var parked = false
            var finished = false

            /// Every event waiting, oldest first; the queue is left empty.
            mutating func takeAll() -> [PeripheralEvent] {
                defer { items.removeAll(keepingCapacity: true); head = 0 }
                return head == 0 ? items : Array(items[head...] + items[..<head])
            }
        }
        let limit: Int
        let state = Mutex(State())

        init(limit: Int) { self.limit = Swift.max(1, limit) }

        /// Queues `event` (dropping the oldest beyond `limit`) and wakes a parked consumer.
        func yield(_ event: PeripheralEvent) {
            let wake: Bool = state.withLock { s in
                guard !s.finished else { return false }
                if s.items.count < limit {
                    s.items.append(event)
                } else {
                    s.items[s.head] = event
                    s.head = s.head + 1 == limit ? 0 : s.head + 1
                }
                guard s.parked else { return false }
                s.parked = false
                return true
            }
            if wake { handOff() }
        }

        /// Resumes the consumer that was parked with what is queued by now (this event and any
        /// queued since, in order). A `finish` in between leaves the consumer to this (the
        /// queued events come before the end); a cancellation takes it (they are dropped).
        private func handOff() {
            let handOff: (CheckedContinuation<[PeripheralEvent], any Error>, [PeripheralEvent])? = state.withLock { s in
                guard let c = s.consumer else { return nil }
                s.consumer = nil
                return (c, s.takeAll())
            }
            if let (consumer, batch) = handOff { consumer.resume(returning: batch) }
        }

        /// No more events: the consumer gets those queued, then the end.
        func finish() {
            let consumer: CheckedContinuation<[PeripheralEvent], any Error>? = state.withLock { s in
                s.finished = true
                guard s.parked else { return nil }  // none, or being handed events (then the end)
                s.parked = false
                defer { s.consumer = nil }
                return s.consumer
            }
            consumer?.resume(returning: [])
        }

        /// Every event waiting, in order; waits when there is none. Empty at the end or when the
        /// task is cancelled (the queue is then dropped, as a cancelled `AsyncStream` does).
        func nextBatch() async throws -> [PeripheralEvent] {
            try await state.takeBatch(ended: [], take: { s in
                if !s.items.isEmpty { return .batch(s.takeAll()) }
                return s.finished ? .end(nil) : .wait
            }, park: { s, c in
                s.consumer = c
                s.parked = true
            }, onCancel: { [self] in
                let consumer: CheckedContinuation<[PeripheralEvent], any Error>? = state.withLock { s in
                    s.finished = true
                    s.items.removeAll()
                    s.head = 0
                    s.parked = false
                    defer { s.consumer = nil }
                    return s.consumer
                }
                consumer?.resume(returning: [])
            })
        }
    }
}
