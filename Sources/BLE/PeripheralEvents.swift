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
            var items: [PeripheralEvent] = []
            var head = 0
            var consumer: CheckedContinuation<[PeripheralEvent], any Error>?
            var finished = false
        }
        let limit: Int
        let state = Mutex(State())

        init(limit: Int) { self.limit = Swift.max(1, limit) }

        /// Queues `event` (dropping the oldest beyond `limit`), or hands it to the parked consumer.
        func yield(_ event: PeripheralEvent) {
            let consumer: CheckedContinuation<[PeripheralEvent], any Error>? = state.withLock { s in
                guard !s.finished else { return nil }
                if let c = s.consumer { s.consumer = nil; return c }
                if s.items.count - s.head >= limit { s.head += 1 }
                if s.head > 0, s.head * 2 >= s.items.count { s.items.removeFirst(s.head); s.head = 0 }
                s.items.append(event)
                return nil
            }
            consumer?.resume(returning: [event])
        }

        /// No more events: the consumer gets those queued, then the end.
        func finish() {
            let consumer: CheckedContinuation<[PeripheralEvent], any Error>? = state.withLock { s in
                s.finished = true
                defer { s.consumer = nil }
                return s.consumer
            }
            consumer?.resume(returning: [])
        }

        /// Every event waiting, in order; waits when there is none. Empty at the end or when the
        /// task is cancelled (the queue is then dropped, as a cancelled `AsyncStream` does).
        func nextBatch() async throws -> [PeripheralEvent] {
            try await state.takeBatch(ended: [], take: { s in
                if s.head < s.items.count {
                    let b = Array(s.items[s.head...])
                    s.items.removeAll(keepingCapacity: true)
                    s.head = 0
                    return .batch(b)
                }
                return s.finished ? .end(nil) : .wait
            }, park: { s, c in
                s.consumer = c
            }, onCancel: { [self] in
                let consumer: CheckedContinuation<[PeripheralEvent], any Error>? = state.withLock { s in
                    s.finished = true
                    s.items.removeAll()
                    s.head = 0
                    defer { s.consumer = nil }
                    return s.consumer
                }
                consumer?.resume(returning: [])
            })
        }
    }
}
