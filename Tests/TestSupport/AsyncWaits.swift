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
/// that failed). The one polling wait of the test suites: for state that another thread or
/// process changes (a socket, a child process, an executor's thread).
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
/// within `timeout` (the body is cancelled; it must end when cancelled).
public func withTimeout<T: Sendable>(_ timeout: Duration, _ what: String,
                                     _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: timeout)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw HarnessError("\(what): not done within \(timeout)")
        }
        return value
    }
}

/// The outcome of `task` if it ends within `limit`, else nil. The task is left running: a
/// regression that makes it wait for ever fails the test instead of hanging it (a task group
/// would wait for a child that ignores cancellation).
public func outcome<T: Sendable>(of task: Task<T, any Error>, within limit: Duration) async -> Result<T, any Error>? {
    let box = Mutex<Result<T, any Error>?>(nil)
    Task { let r = await task.result; box.withLock { $0 = r } }
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if let r = box.withLock({ $0 }) { return r }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return nil
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
