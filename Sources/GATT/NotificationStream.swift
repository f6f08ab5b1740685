import Synchronization

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
public struct GATTNotificationStream: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    public typealias Failure = any Error

    /// Values waiting for the application before the oldest is dropped.
    public static let defaultBufferLimit = 1024

    struct Item: Sendable { let sequence: UInt64; let value: [UInt8] }
    let base: AsyncThrowingStream<Item, any Error>
    let tracker: Tracker

    /// Values dropped because the application had `bufferLimit` values still to take.
    public var droppedCount: Int { tracker.state.withLock { $0.dropped } }

    public struct Iterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<Item, any Error>.Iterator
        let tracker: Tracker

        public mutating func next() async throws -> [UInt8]? {
            do {
                guard let item = try await base.next() else { tracker.finish(); return nil }
                tracker.taken(item.sequence)
                return item.value
            } catch {
                tracker.finish()
                throw error
            }
        }
    }

    public func makeAsyncIterator() -> Iterator { Iterator(base: base.makeAsyncIterator(), tracker: tracker) }

    /// The producer's side.
    public struct Continuation: Sendable {
        let base: AsyncThrowingStream<Item, any Error>.Continuation
        let tracker: Tracker

        /// Queues a notification's value; counts it in `droppedCount` of the stream when the
        /// queue is full (the oldest waiting value makes room).
        public func yield(_ value: [UInt8]) {
            if case .dropped = base.yield(Item(sequence: tracker.nextSequence(), value: value)) {
                tracker.state.withLock { $0.dropped += 1 }
            }
        }

        /// Queues an indication's value and returns once the application has taken it (true),
        /// or when the stream ended or `timeout` passed first (false). The timeout bounds the
        /// wait by the ATT transaction timeout: past it the server has given up anyway.
        @discardableResult
        public func deliverIndication(_ value: [UInt8], timeout: Duration = .seconds(30)) async -> Bool {
            let sequence = tracker.nextSequence()
            switch base.yield(Item(sequence: sequence, value: value)) {
            case .terminated: return false
            case .dropped: tracker.state.withLock { $0.dropped += 1 }
            default: break
            }
            return await tracker.wait(for: sequence, timeout: timeout)
        }

        /// Ends the stream (with `error`, thrown to the application after the values queued).
        public func finish(throwing error: (any Error)? = nil) {
            base.finish(throwing: error)
        }

        /// Called once when the stream ends: with true when the application cancelled or
        /// dropped it, false when it was finished.
        public func onTermination(_ handler: @escaping @Sendable (_ cancelled: Bool) -> Void) {
            let tracker = self.tracker
            base.onTermination = { termination in
                tracker.finish()
                if case .cancelled = termination { handler(true) } else { handler(false) }
            }
        }
    }

    public static func makeStream(bufferLimit: Int = defaultBufferLimit) -> (stream: GATTNotificationStream, continuation: Continuation) {
        let (base, continuation) = AsyncThrowingStream.makeStream(of: Item.self, bufferingPolicy: .bufferingNewest(Swift.max(1, bufferLimit)))
        let tracker = Tracker()
        continuation.onTermination = { _ in tracker.finish() }
        return (GATTNotificationStream(base: base, tracker: tracker), Continuation(base: continuation, tracker: tracker))
    }

    /// Which values the application has taken, and the indications waiting for that.
    final class Tracker: Sendable {
        struct State {
            var issued: UInt64 = 0
            /// Every value up to this sequence number has been taken (or dropped).
            var taken: UInt64 = 0
            var dropped = 0
            var finished = false
            var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
            /// Waits whose timeout fired before they were parked.
            var expired: Set<UInt64> = []
        }
        let state = Mutex(State())

        func nextSequence() -> UInt64 { state.withLock { $0.issued += 1; return $0.issued } }

        func taken(_ sequence: UInt64) {
            let ready: [CheckedContinuation<Bool, Never>] = state.withLock { s in
                s.taken = Swift.max(s.taken, sequence)
                let due = s.waiters.keys.filter { $0 <= sequence }
                return due.compactMap { s.waiters.removeValue(forKey: $0) }
            }
            for c in ready { c.resume(returning: true) }
        }

        func finish() {
            let waiting: [CheckedContinuation<Bool, Never>] = state.withLock { s in
                s.finished = true
                defer { s.waiters.removeAll() }
                return Array(s.waiters.values)
            }
            for c in waiting { c.resume(returning: false) }
        }

        func wait(for sequence: UInt64, timeout: Duration) async -> Bool {
            let timer = Task { [weak self] in
                guard (try? await Task.sleep(for: timeout)) != nil else { return }
                self?.expire(sequence)
            }
            defer { timer.cancel() }
            return await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
                let now: Bool? = state.withLock { s in
                    if s.taken >= sequence { return true }
                    if s.finished { return false }
                    if s.expired.remove(sequence) != nil { return false }
                    s.waiters[sequence] = c
                    return nil
                }
                if let now { c.resume(returning: now) }
            }
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
