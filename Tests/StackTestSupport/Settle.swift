// Waiting for the stack in a test without sleeping (docs/testing.md, "Waiting in a test"):
// each helper awaits an event of the stack itself (its executor idle, a deadline armed, a
// predicate on the host's state that holds after the host ran) and is bounded by the one
// `withTimeout` of TestSupport. Time in the stack is the manual clock's: `advance` moves it and
// fires what became due before it returns.
import Host
import TestSupport
import Transport

extension SerialThreadExecutor {
    /// Returns once the executor has nothing to run (at once if it has not): every job queued
    /// before the call has run, and what those jobs queued on it too.
    public func idle(timeout: Duration = .seconds(10)) async throws {
        let done = Watched(false)
        whenIdle { done.withLock { $0 = true } }
        try await done.until("the \(name) executor idle", timeout: timeout) { $0 }
    }

    /// Returns once its thread has exited (at once if none runs).
    public func threadExited(timeout: Duration = .seconds(10)) async throws {
        let done = Watched(false)
        whenThreadExits { done.withLock { $0 = true } }
        try await done.until("the \(name) executor's thread gone", timeout: timeout) { $0 }
    }
}

extension PacketInbox {
    /// Returns once a `next()` reader is parked waiting for a packet.
    public func readerWaiting(timeout: Duration = .seconds(10)) async throws {
        let done = Watched(false)
        whenReaderWaits { done.withLock { $0 = true } }
        try await done.until("a reader waiting on the inbox", timeout: timeout) { $0 }
    }
}

extension Host {
    /// Returns once the host's executor is idle: everything handed to the host before the call
    /// (packets a transport delivered, jobs its tasks queued there) has been handled, with
    /// nothing left in flight on its thread.
    public nonisolated func settled(timeout: Duration = .seconds(10)) async throws {
        try await executor.idle(timeout: timeout)
    }

    /// Returns once `count` deadlines are armed in the host's table (the procedures whose
    /// timeouts the test times are waiting).
    public nonisolated func armed(_ count: Int, timeout: Duration = .seconds(10)) async throws {
        try await withTimeout(timeout, "\(count) deadline(s) armed") { try await self.untilArmed(count) }
    }

    /// Returns once `predicate` holds for the host's state. It is checked now, in the host's
    /// isolation, and again each time the host's executor has run other jobs (a packet, a
    /// task's call) and gone idle: no polling, no sleep.
    public nonisolated func until(_ what: @autoclosure () -> String, timeout: Duration = .seconds(10),
                                  _ predicate: @escaping @Sendable (isolated Host) -> Bool) async throws {
        try await executor.until(what(), timeout: timeout) { self.assumeIsolated { predicate($0) } }
    }
}

extension SerialThreadExecutor {
    /// Returns once `predicate` holds, checked on the executor's thread now and again each time
    /// the executor has run other jobs and gone idle: for state its jobs change (a host's, or
    /// what an API reads from it), with no polling and no sleep.
    public func until(_ what: @autoclosure () -> String, timeout: Duration = .seconds(10),
                      _ predicate: @escaping @Sendable () -> Bool) async throws {
        enum State { case waiting, holds, abandoned }
        let state = Watched(State.waiting)
        @Sendable func check() {
            guard state.value == .waiting else { return }
            guard isCurrent else { submit { check() }; return }
            if predicate() {
                state.withLock { $0 = .holds }
            } else {
                whenIdle(after: completedJobCount) { check() }
            }
        }
        submit { check() }
        do {
            try await state.until(what(), timeout: timeout) { $0 == .holds }
        } catch {
            state.withLock { $0 = .abandoned }
            throw error
        }
    }
}

/// Moves `clock` forward by `d` and has each of `hosts` fire, before this returns, the
/// deadlines that became due: afterwards what was due has fired, and what was not has not.
public func advance(_ clock: ManualDeadlineClock, by d: Duration, firing hosts: Host...) async {
    clock.advance(by: d)
    for host in hosts { await host.fireExpiredDeadlines() }
}
