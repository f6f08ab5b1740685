import Synchronization
import Transport

/// `Peripheral.events`: the peripheral's events in order (`for await event in peripheral.events`),
/// for any number of consumers: each iterator gets every event from when it was made (the
/// first also gets those that came before any consumer). When a consumer falls behind, the
/// newest `limit` events are kept for it and older ones dropped, as `AsyncStream`'s
/// `.bufferingNewest` does. A concrete type rather than `AsyncStream<PeripheralEvent>`: the
/// server reports two events per read it answers, and `AsyncStream`'s unspecialised generic
/// code (metadata look-ups, a generic deque) was a tenth of the CPU of a read
/// (docs/performance.md, Round 8).
public struct PeripheralEvents: AsyncSequence, Sendable {
    public typealias Element = PeripheralEvent
    public typealias Failure = Never
    typealias Storage = EventQueues<PeripheralEvent>
    let storage: Storage

    public struct Iterator: AsyncIteratorProtocol {
        var consumer: EventQueues<PeripheralEvent>.Reader
        /// The next event; nil once the peripheral is closed (after the events before it) or
        /// when the task is cancelled.
        public mutating func next() async -> PeripheralEvent? { await consumer.next() }
    }

    /// A new consumer: it gets every event from now on (the first one made also those queued
    /// before it).
    public func makeAsyncIterator() -> Iterator { Iterator(consumer: storage.reader()) }
}

/// `Central.events`: the central's connection events in order, for any number of consumers, as
/// `PeripheralEvents` (CoreBluetooth's `centralManager(_:didConnect:)`,
/// `didDisconnectPeripheral`, and the connection events iOS reports).
public struct CentralEvents: AsyncSequence, Sendable {
    public typealias Element = CentralEvent
    public typealias Failure = Never
    let storage: EventQueues<CentralEvent>

    public struct Iterator: AsyncIteratorProtocol {
        var consumer: EventQueues<CentralEvent>.Reader
        /// The next event; nil once the central is closed or when the task is cancelled.
        public mutating func next() async -> CentralEvent? { await consumer.next() }
    }

    public func makeAsyncIterator() -> Iterator { Iterator(consumer: storage.reader()) }
}

/// The queues of an event sequence with any number of consumers: each consumer's events
/// (the newest `limit` kept) and its parked task. Events are handed over in batches: one lock
/// and at most one resume per batch.
final class EventQueues<Event: Sendable>: Sendable {
    /// One iterator's events, taken a batch at a time.
    struct Reader {
        let consumer: Consumer
        var batch: [Event] = []
        var index = 0
        init(_ consumer: Consumer) { self.consumer = consumer }

        mutating func next() async -> Event? {
            if index == batch.count {
                batch = (try? await consumer.nextBatch()) ?? []
                index = 0
                if batch.isEmpty { return nil }
            }
            index += 1
            return batch[index - 1]
        }
    }

    func reader() -> Reader { Reader(Consumer(register(), self)) }

    /// One iterator's place in the queues, given back when the iterator goes.
    final class Consumer: Sendable {
        let id: Int
        let storage: EventQueues
        init(_ id: Int, _ storage: EventQueues) { self.id = id; self.storage = storage }
        deinit { storage.unregister(id) }
        func nextBatch() async throws -> [Event] { try await storage.nextBatch(for: id) }
    }

    /// One consumer's events waiting, the oldest at `head`: appended up to the limit, then a
    /// ring (a new event takes the place of the oldest, which is dropped in place).
    struct Queue {
        var items: [Event] = []
        var head = 0
        var continuation: CheckedContinuation<[Event], any Error>?
        /// Its task is parked in `continuation` with nothing queued.
        var parked = false
        /// It was cancelled: it gets nothing more.
        var ended = false

        mutating func append(_ event: Event, limit: Int) {
            if items.count < limit {
                items.append(event)
            } else {
                items[head] = event
                head = head + 1 == limit ? 0 : head + 1
            }
        }

        /// Every event waiting, oldest first; the queue is left empty.
        mutating func takeAll() -> [Event] {
            defer { items.removeAll(keepingCapacity: true); head = 0 }
            return head == 0 ? items : Array(items[head...] + items[..<head])
        }
    }
    struct State {
        var queues: [Int: Queue] = [:]
        /// Events that came before any consumer, for the first one.
        var early = Queue()
        var consumersSoFar = 0
        var finished = false
    }
    let limit: Int
    let state = Mutex(State())

    init(limit: Int) { self.limit = Swift.max(1, limit) }

    func register() -> Int {
        state.withLock { s in
            let id = s.consumersSoFar
            s.consumersSoFar += 1
            s.queues[id] = id == 0 ? s.early : Queue()
            s.early = Queue()
            return id
        }
    }

    func unregister(_ id: Int) {
        let parked = state.withLock { $0.queues.removeValue(forKey: id)?.continuation }
        parked?.resume(returning: [])
    }

    /// Queues `event` for every consumer (dropping its oldest beyond `limit`) and wakes the
    /// parked ones with what they have queued.
    func yield(_ event: Event) {
        let wake: [(CheckedContinuation<[Event], any Error>, [Event])] = state.withLock { s in
            guard !s.finished else { return [] }
            if s.consumersSoFar == 0 {
                s.early.append(event, limit: limit)
                return []
            }
            var wake: [(CheckedContinuation<[Event], any Error>, [Event])] = []
            for id in s.queues.keys {
                guard !s.queues[id]!.ended else { continue }
                s.queues[id]!.append(event, limit: limit)
                guard s.queues[id]!.parked, let c = s.queues[id]!.continuation else { continue }
                s.queues[id]!.parked = false
                s.queues[id]!.continuation = nil
                wake.append((c, s.queues[id]!.takeAll()))
            }
            return wake
        }
        for (c, batch) in wake { c.resume(returning: batch) }
    }

    /// No more events: each consumer gets those queued, then the end.
    func finish() {
        let parked: [CheckedContinuation<[Event], any Error>] = state.withLock { s in
            s.finished = true
            var parked: [CheckedContinuation<[Event], any Error>] = []
            for id in s.queues.keys where s.queues[id]!.parked {
                if let c = s.queues[id]!.continuation { parked.append(c) }
                s.queues[id]!.parked = false
                s.queues[id]!.continuation = nil
            }
            return parked
        }
        for c in parked { c.resume(returning: []) }
    }

    /// Every event waiting for consumer `id`, in order; waits when there is none. Empty at
    /// the end or when the task is cancelled (its queue is then dropped, as a cancelled
    /// `AsyncStream` does).
    func nextBatch(for id: Int) async throws -> [Event] {
        try await state.takeBatch(ended: [], take: { s in
            guard var q = s.queues[id], !q.ended else { return .end(nil) }
            if !q.items.isEmpty {
                let batch = q.takeAll()
                s.queues[id] = q
                return .batch(batch)
            }
            return s.finished ? .end(nil) : .wait
        }, park: { s, c in
            s.queues[id]?.continuation = c
            s.queues[id]?.parked = true
        }, onCancel: { [self] in
            let parked: CheckedContinuation<[Event], any Error>? = state.withLock { s in
                guard var q = s.queues[id] else { return nil }
                defer { s.queues[id] = q }
                q.ended = true
                q.items.removeAll()
                q.head = 0
                q.parked = false
                defer { q.continuation = nil }
                return q.continuation
            }
            parked?.resume(returning: [])
        })
    }
}
