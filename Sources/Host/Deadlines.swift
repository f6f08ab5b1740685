// The one timeout mechanism of a host and the layers that run on its executor (NimBLE's
// ble_gattc_proc list swept by one timer): HCI commands, procedure waiters (connect, PHY
// update...), ATT transactions and L2CAP signaling requests each register a deadline in the
// host's table; one sweep task sleeps until the earliest and fires what has expired, on the
// host's executor.
import Synchronization

/// Time as the host's deadline table sees it. `SystemDeadlineClock` in use; tests inject a
/// `ManualDeadlineClock` and move it.
public protocol DeadlineClock: Sendable {
    var now: ContinuousClock.Instant { get }
    /// Returns at `deadline`; throws `CancellationError` when the task is cancelled first.
    func sleep(until deadline: ContinuousClock.Instant) async throws
}

/// The continuous clock.
public struct SystemDeadlineClock: DeadlineClock {
    public init() {}
    public var now: ContinuousClock.Instant { .now }
    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        try await Task.sleep(until: deadline, clock: .continuous)
    }
}

/// A clock that moves only when told (`advance(by:)`), for tests of timeouts.
public final class ManualDeadlineClock: DeadlineClock {
    private struct Sleeper { let id: UInt64; let deadline: ContinuousClock.Instant; let continuation: CheckedContinuation<Void, any Error> }
    private struct State { var now: ContinuousClock.Instant; var sleepers: [Sleeper] = []; var nextID: UInt64 = 0 }
    private let state: Mutex<State>

    public init(start: ContinuousClock.Instant = .now) { state = Mutex(State(now: start)) }

    public var now: ContinuousClock.Instant { state.withLock { $0.now } }

    public func sleep(until deadline: ContinuousClock.Instant) async throws {
        let id: UInt64 = state.withLock { s in s.nextID &+= 1; return s.nextID }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let resumeNow: Bool = state.withLock { s in
                    if deadline <= s.now || Task.isCancelled { return true }
                    s.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: c))
                    return false
                }
                if resumeNow { c.resume() }
            }
        } onCancel: {
            let c = state.withLock { s -> CheckedContinuation<Void, any Error>? in
                guard let i = s.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.sleepers.remove(at: i).continuation
            }
            c?.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }

    /// Moves time forward and wakes the sleepers whose deadline has come.
    public func advance(by d: Duration) {
        let due: [CheckedContinuation<Void, any Error>] = state.withLock { s in
            s.now = s.now.advanced(by: d)
            let now = s.now
            let due = s.sleepers.filter { $0.deadline <= now }.map(\.continuation)
            s.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for c in due { c.resume() }
    }
}

/// A deadline registered with `Host.arm`; `Host.disarm` it when the procedure ends first.
public struct DeadlineID: Hashable, Sendable {
    let raw: UInt64
}

/// The host's table of deadlines and its one sweep task (state of the `Host` actor).
struct DeadlineTable {
    struct Entry { let deadline: ContinuousClock.Instant; let fire: () -> Void }
    var entries: [UInt64: Entry] = [:]
    var nextID: UInt64 = 0
    var sweeper: Task<Void, Never>?
    var sweeperWakesAt: ContinuousClock.Instant?
    /// Which sweep is the current one: a replaced sweep that had already woken (its cancel came
    /// too late) finds another number and leaves the table and the current sweep alone.
    var sweepGeneration: UInt64 = 0
    /// `untilArmed` waiters: resumed once `entries.count` reaches their count.
    var armedWaiters: [(id: UInt64, count: Int, continuation: CheckedContinuation<Void, any Error>)] = []
}

extension Host {
    /// Registers `fire`, called once inside the host's isolation `after` from now unless the
    /// deadline is disarmed first. Every timeout of the stack goes through here. The table is
    /// the host's state, emptied when a deadline fires or is disarmed and at `close`, so `fire`
    /// may hold the host and its layer strongly: a layer disarms its deadlines when it closes.
    /// (Not `[weak self]`: a weak reference gives the object a side table, and from then on every
    /// retain and release of it takes the runtime's slow path, about 8 per GATT exchange.)
    public func arm(after: Duration, _ fire: @escaping () -> Void) -> DeadlineID {
        deadlines.nextID &+= 1
        let id = deadlines.nextID
        let deadline = configuration.clock.now.advanced(by: after)
        deadlines.entries[id] = DeadlineTable.Entry(deadline: deadline, fire: fire)
        if !deadlines.armedWaiters.isEmpty { resumeArmedWaiters() }
        // The sweep already wakes in time (the usual case: procedures of the same kind are
        // armed in deadline order): nothing to do.
        if let w = deadlines.sweeperWakesAt, w <= deadline { return DeadlineID(raw: id) }
        startSweep(until: deadline)
        return DeadlineID(raw: id)
    }

    /// Forgets a deadline (its procedure ended); nothing if it fired or was disarmed already.
    /// The sweep task is left sleeping: it wakes once, finds nothing due and sleeps until the
    /// next deadline, so a procedure per millisecond does not start and cancel a task each.
    public func disarm(_ id: DeadlineID?) {
        guard let id else { return }
        deadlines.entries[id.raw] = nil
    }

    /// Deadlines registered and not yet fired or disarmed.
    public var armedDeadlineCount: Int { deadlines.entries.count }

    /// Returns once `count` deadlines are armed (at once if they are): for tests, which then
    /// move their manual clock knowing the procedure they time is waiting. Throws
    /// `CancellationError` when the waiting task is cancelled.
    public func untilArmed(_ count: Int) async throws {
        if deadlines.entries.count >= count { return }
        deadlines.nextID &+= 1
        let id = deadlines.nextID
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled { c.resume(throwing: CancellationError()); return }
                // Looked at again: other jobs of the host may have armed some since the check
                // above (an await lets them run).
                if deadlines.entries.count >= count { c.resume(); return }
                deadlines.armedWaiters.append((id, count, c))
            }
        } onCancel: {
            Task { await self.cancelArmedWaiter(id) }
        }
    }

    private func cancelArmedWaiter(_ id: UInt64) {
        guard let i = deadlines.armedWaiters.firstIndex(where: { $0.id == id }) else { return }
        deadlines.armedWaiters.remove(at: i).continuation.resume(throwing: CancellationError())
    }

    private func resumeArmedWaiters() {
        let n = deadlines.entries.count
        var kept: [(id: UInt64, count: Int, continuation: CheckedContinuation<Void, any Error>)] = []
        for w in deadlines.armedWaiters {
            if n >= w.count { w.continuation.resume() } else { kept.append(w) }
        }
        deadlines.armedWaiters = kept
    }

    /// Fires, now, every deadline that the clock has passed (the sweep task would, a moment
    /// later): a test that moves its manual clock calls this to know that what was due has
    /// fired and what was not has not, with no wait.
    public func fireExpiredDeadlines() {
        let now = configuration.clock.now
        let due = deadlines.entries.filter { $0.value.deadline <= now }.sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }
        for (id, _) in due { deadlines.entries[id] = nil }
        for (_, e) in due { e.fire() }
    }

    /// Fires every expired deadline, earliest first, then sleeps until the next.
    func sweepDeadlines(generation: UInt64) {
        guard generation == deadlines.sweepGeneration else { return }
        deadlines.sweeper = nil
        deadlines.sweeperWakesAt = nil
        let now = configuration.clock.now
        let due = deadlines.entries.filter { $0.value.deadline <= now }.sorted { ($0.value.deadline, $0.key) < ($1.value.deadline, $1.key) }
        for (id, _) in due { deadlines.entries[id] = nil }
        for (_, e) in due { e.fire() }
        // (A fired procedure may have armed another, starting a sweep already.)
        guard let earliest = deadlines.entries.values.min(by: { $0.deadline < $1.deadline })?.deadline else { return }
        if let w = deadlines.sweeperWakesAt, w <= earliest { return }
        startSweep(until: earliest)
    }

    /// (Re)starts the one sweep task to wake at `earliest`.
    private func startSweep(until earliest: ContinuousClock.Instant) {
        deadlines.sweeper?.cancel()
        deadlines.sweeperWakesAt = earliest
        deadlines.sweepGeneration &+= 1
        let clock = configuration.clock, generation = deadlines.sweepGeneration
        // On the host's thread: the wake-up enqueues the sweep there directly (no pool thread).
        deadlines.sweeper = Task(executorPreference: executor.taskExecutor) {
            do { try await clock.sleep(until: earliest) } catch { return }
            await self.sweepDeadlines(generation: generation)
        }
    }

    private func stopSweep() {
        deadlines.sweepGeneration &+= 1
        deadlines.sweeper?.cancel()
        deadlines.sweeper = nil
        deadlines.sweeperWakesAt = nil
    }

    func disarmAll() {
        deadlines.entries.removeAll()
        stopSweep()
        let waiters = deadlines.armedWaiters
        deadlines.armedWaiters = []
        for w in waiters { w.continuation.resume(throwing: CancellationError()) }
    }
}
