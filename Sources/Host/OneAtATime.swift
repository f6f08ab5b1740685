// A turn that callers take one at a time inside a host's isolation.

/// One at a time, first come first served, inside the host's isolation that owns it: an ATT
/// bearer's outstanding indication (one at a time, Core v5.4 Vol 3 Part F 3.3.2), the SDU a
/// credit-based channel is sending (a receiver reassembles an SDU from K-frames in order, the
/// first carrying its length, Vol 3 Part A 3.4: another SDU's must not come between). Not
/// Sendable: it lives with the layer that owns it.
public final class OneAtATime {
    public private(set) var isTaken = false
    private var waiters: [CheckedContinuation<Void, any Error>] = []

    public init() {}

    /// Nobody holds the turn or waits for it.
    public var isFree: Bool { !isTaken && waiters.isEmpty }

    /// Returns holding the turn, once the holder before has passed it. Throws what `closed`
    /// returns when the owner is closed: before waiting, and when woken (`fail` woke it, or the
    /// owner closed while it was being passed).
    public nonisolated(nonsending) func take(unlessClosed closed: () -> (any Error)?) async throws {
        if let error = closed() { throw error }
        while isTaken {
            // (Looked at again inside: the holder may have passed it, or the owner closed, since
            // the check; a waiter added after `fail` would never be woken.)
            try await withCheckedThrowingContinuation { c in if isTaken && closed() == nil { waiters.append(c) } else { c.resume() } }
            if let error = closed() { throw error }
        }
        isTaken = true
    }

    /// Gives the turn up and wakes the first waiter.
    public func pass() {
        isTaken = false
        if !waiters.isEmpty { waiters.removeFirst().resume() }
    }

    /// Ends every wait with `error` (the owner closed).
    public func fail(_ error: any Error) {
        let woken = waiters
        waiters.removeAll()
        for w in woken { w.resume(throwing: error) }
    }
}
