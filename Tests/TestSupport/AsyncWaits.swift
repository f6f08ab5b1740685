import Foundation
import Synchronization

/// Async forms of `ChildProcess`'s blocking waits, for `async` tests.
///
/// Swift's cooperative thread pool may have as few as 2 threads; a blocking wait on one of them
/// can stall every other test. These helpers run the blocking wait on a dedicated `Thread`
/// and resume the caller when it returns, so the pool stays free. Every wait keeps the
/// blocking API's timeout.
///
///     let child = try ChildProcess(executable: url, arguments: ["peripheral", "--json"])
///     defer { child.stop() }
///     let advertising = try await child.nextEvent("advertising", timeout: 10)
///     let status = try await child.exitStatus(timeout: 10)

/// Runs `body` on a new thread (not the cooperative pool) and returns its result.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

/// Waits until `condition` holds, polling every 2 ms; throws a `HarnessError` naming `what`
/// when it still does not after `timeout` (`what` is evaluated then, so it can show the state
/// that failed). The one polling wait of the test suites, for state that another process
/// changes and that no event announces (a Bumble peer's GATT database, a child's PID gone).
/// State of this process is awaited, not polled: `Watched`, `Pending`, an event stream, or a
/// hook of the stack (docs/testing.md, "Waiting in a test").
public func eventually(_ what: @autoclosure () -> String, timeout: Duration = .seconds(5),
                       _ condition: () async throws -> Bool) async throws {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while !(try await condition()) {
        if clock.now >= deadline { throw HarnessError("\(what()): still not so after \(timeout)") }
        try await Task.sleep(for: .milliseconds(2))
    }
}

/// Runs `body` with a deadline: throws a `HarnessError` naming `what` when it has not finished
/// within `timeout` (the body is cancelled; it must end when cancelled). The one real-time
/// timeout of the test suites: every other wait (`Watched.until`, `Pending.result`, the
/// stack's hooks in StackTestSupport) is bounded through it.
public func withTimeout<T: Sendable>(_ timeout: Duration, _ what: String,
                                     _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    let expired = try await withThrowingTaskGroup(of: T?.self) { group -> T? in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { return nil }
        return first
    }
    guard let value = expired else { throw HarnessError("\(what): not done within \(timeout)") }
    return value
}

/// A value that other tasks and threads change, and that a test awaits a state of, instead of
/// polling it: each change (`withLock`) wakes the waiters whose predicate now holds.
///
///     let log = Watched<[Int]>([])
///     executor.submit { log.withLock { $0.append(1) } }
///     try await log.until("one job ran") { $0.count == 1 }
public final class Watched<Value: Sendable>: Sendable {
    private struct Waiter {
        let id: UInt64
        let predicate: @Sendable (Value) -> Bool
        let continuation: CheckedContinuation<Value, any Error>
    }
    private struct State {
        var value: Value
        var waiters: [Waiter] = []
        var nextID: UInt64 = 0
    }
    private let state: Mutex<State>

    public init(_ value: Value) { state = Mutex(State(value: value)) }

    /// The value now.
    public var value: Value { state.withLock { $0.value } }

    /// Changes the value (under the lock) and wakes the waiters it satisfies.
    @discardableResult
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        var woken: [(CheckedContinuation<Value, any Error>, Value)] = []
        let r = try state.withLock { s -> R in
            let r = try body(&s.value)
            if !s.waiters.isEmpty {
                let v = s.value
                s.waiters.removeAll { w in
                    guard w.predicate(v) else { return false }
                    woken.append((w.continuation, v))
                    return true
                }
            }
            return r
        }
        for (c, v) in woken { c.resume(returning: v) }
        return r
    }

    /// Returns the value once `predicate` holds for it (at once if it does); throws naming
    /// `what` (evaluated then, with the value it saw) when it does not within `timeout`.
    @discardableResult
    public func until(_ what: @autoclosure () -> String, timeout: Duration = .seconds(10),
                      _ predicate: @escaping @Sendable (Value) -> Bool) async throws -> Value {
        if let v = state.withLock({ predicate($0.value) ? $0.value : nil }) { return v }
        do {
            return try await withTimeout(timeout, "") { try await self.wait(predicate) }
        } catch is HarnessError {
            throw HarnessError("\(what()): still not so after \(timeout) (value: \(value))")
        }
    }

    private func wait(_ predicate: @escaping @Sendable (Value) -> Bool) async throws -> Value {
        let id = state.withLock { s -> UInt64 in s.nextID &+= 1; return s.nextID }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Value, any Error>) in
                let now: Result<Value, any Error>? = state.withLock { s in
                    if predicate(s.value) { return .success(s.value) }
                    if Task.isCancelled { return .failure(CancellationError()) }
                    s.waiters.append(Waiter(id: id, predicate: predicate, continuation: c))
                    return nil
                }
                if let now { c.resume(with: now) }
            }
        } onCancel: {
            let c = state.withLock { s -> CheckedContinuation<Value, any Error>? in
                guard let i = s.waiters.firstIndex(where: { $0.id == id }) else { return nil }
                return s.waiters.remove(at: i).continuation
            }
            c?.resume(throwing: CancellationError())
        }
    }
}

/// An operation started now whose outcome a test looks at later: whether it has ended yet
/// (`isDone`, without waiting), or its result once it ends (`result(within:)`, bounded). The
/// operation runs in its own task, so a regression that makes it wait for ever (or ignore
/// cancellation) fails the test instead of hanging it.
///
///     let send = Pending { try await host.sendL2CAP(frame, on: 0x40) }
///     #expect(!send.isDone)
///     guard case .failure(let e) = try await send.result(within: .seconds(10)) else { ... }
public final class Pending<T: Sendable>: Sendable {
    public let task: Task<T, any Error>
    private let outcome = Watched<Result<T, any Error>?>(nil)

    public init(_ operation: @escaping @Sendable () async throws -> T) {
        let task = Task { try await operation() }
        self.task = task
        let outcome = outcome
        Task { let r = await task.result; outcome.withLock { $0 = r } }
    }

    /// Whether the operation has ended (and its outcome is recorded).
    public var isDone: Bool { outcome.value != nil }

    /// The operation's result once it ends; throws when it has not ended within `limit` (the
    /// task is left running).
    public func result(within limit: Duration = .seconds(10), _ what: @autoclosure () -> String = "the operation") async throws -> Result<T, any Error> {
        let r = try await outcome.until("\(what()) ended", timeout: limit) { $0 != nil }
        return r!
    }

    /// The operation's value, or its error thrown, once it ends within `limit`.
    public func value(within limit: Duration = .seconds(10), _ what: @autoclosure () -> String = "the operation") async throws -> T {
        try await result(within: limit, what()).get()
    }

    /// Cancels the operation.
    public func cancel() { task.cancel() }
}

/// A JSON object carried across threads (JSONSerialization values are immutable here).
private struct JSONBox: @unchecked Sendable { let object: [String: Any] }

extension ChildProcess {
    /// Async `waitForLine`: the next stdout line (after those returned by earlier waits on
    /// this child) that satisfies `predicate`; throws on timeout or when stdout closes first.
    @discardableResult
    public func nextLine(timeout: TimeInterval = 10,
                         matching predicate: @escaping @Sendable (String) -> Bool) async throws -> String {
        try await offPool { try self.waitForLine(timeout: timeout, matching: predicate) }
    }

    /// Async `waitForEvent`: the next JSON line whose `"event"` is `event`, parsed.
    public func nextEvent(_ event: String, timeout: TimeInterval = 10) async throws -> [String: Any] {
        let box = try await offPool { JSONBox(object: try self.waitForEvent(event, timeout: timeout)) }
        return box.object
    }

    /// Async `waitForExit`: the exit status once the child has exited by itself and its
    /// pipes are drained; kills it and throws if it runs longer than `timeout`.
    public func exitStatus(timeout: TimeInterval = 10) async throws -> Int32 {
        try await offPool { try self.waitForExit(timeout: timeout) }
    }

    /// Async `stop`: SIGTERM, then SIGKILL after `grace` seconds.
    public func stopAsync(grace: TimeInterval = 2) async {
        _ = try? await offPool { self.stop(grace: grace) }
    }
}
