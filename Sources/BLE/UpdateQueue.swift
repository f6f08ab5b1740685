import Synchronization
import Transport

/// Back-pressure without waiting, as CoreBluetooth has it (`updateValue(_:for:onSubscribedCentrals:)`
/// returning false, then `peripheralManagerIsReady(toUpdateSubscribers:)`): the application
/// offers values from any thread without entering the host; one drain task on the host's
/// executor sends them in order, each as soon as the link takes it (ACL flow control), every
/// value waiting in one entry into the host, so a value costs the offering thread one lock, not
/// a thread switch. At most `limit` values wait (counting those being sent); an offer beyond
/// that is refused, and `ready` is called once the queue has drained to half, so the
/// application refills in bursts.
final class UpdateQueue<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        var head = 0
        var draining = false
        /// An offer was refused since the last `ready`.
        var refused = false
        var closed = false
        var count: Int { items.count - head }
    }
    let limit: Int
    private let state = Mutex(State())
    private let executor: SerialThreadExecutor
    /// Sends the items waiting, in order (all of them: one call per drain step).
    private let send: @Sendable ([Item]) async -> Void
    private let ready: @Sendable () -> Void

    init(limit: Int, executor: SerialThreadExecutor, send: @escaping @Sendable ([Item]) async -> Void,
         ready: @escaping @Sendable () -> Void) {
        self.limit = limit
        self.executor = executor
        self.send = send
        self.ready = ready
    }

    /// Queues `item`; false (nothing queued) when `limit` items already wait or the queue is closed.
    func offer(_ item: Item) -> Bool {
        let startDrain: Bool? = state.withLock { s in
            guard !s.closed, s.count < limit else {
                s.refused = true
                return nil
            }
            s.items.append(item)
            defer { s.draining = true }
            return !s.draining
        }
        guard let startDrain else { return false }
        if startDrain {
            Task(executorPreference: executor.taskExecutor) { await self.drain() }
        }
        return true
    }

    /// Whether an offer would be accepted now.
    var hasRoom: Bool { state.withLock { !$0.closed && $0.count < limit } }

    /// Refuses every later offer and drops what waits (the stack is closing).
    func close() {
        state.withLock { s in
            s.closed = true
            s.items.removeAll()
            s.head = 0
        }
    }

    /// Sends the waiting items in order until none is left: each step takes every item
    /// waiting and hands them to `send` together (one entry into the host for the lot). The
    /// items being sent stay counted until they are out.
    private func drain() async {
        while let batch = state.withLock({ s -> [Item]? in
            guard s.head < s.items.count else {
                s.draining = false
                return nil
            }
            return Array(s.items[s.head...])
        }) {
            await send(batch)
            let wake = state.withLock { s -> Bool in
                guard s.head < s.items.count else { return false }  // closed meanwhile
                s.head += batch.count
                if s.head == s.items.count {
                    s.items.removeAll(keepingCapacity: true)
                    s.head = 0
                } else if s.head >= 64, s.head * 2 >= s.items.count {
                    s.items.removeFirst(s.head)
                    s.head = 0
                }
                guard s.refused, s.count <= limit / 2 else { return false }
                s.refused = false
                return true
            }
            if wake { ready() }
        }
    }
}

/// A callback set after the fact (by whoever reports it), called from any thread.
final class LateCallback: Sendable {
    private let body = Mutex<(@Sendable () -> Void)?>(nil)
    func set(_ body: @escaping @Sendable () -> Void) { self.body.withLock { $0 = body } }
    func callAsFunction() { body.withLock { $0 }?() }
}
