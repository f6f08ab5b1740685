import Foundation
import Synchronization

/// Why a long-running command stopped.
enum StopReason { case interrupted, durationElapsed }

/// Returns when the user presses Ctrl-C (SIGINT) or the process gets SIGTERM, or after
/// `duration` seconds if given. Cancellable.
func waitForStop(duration: Double?) async -> StopReason {
    let stop = FirstOutcome<StopReason>()
    let signal = Task { if await SignalWatcher.shared.nextSignal() != nil { stop.resolve(.interrupted) } }
    let timer = Task {
        guard let duration else { return }
        if (try? await Task.sleep(for: .milliseconds(Int(duration * 1000)))) != nil { stop.resolve(.durationElapsed) }
    }
    defer { signal.cancel(); timer.cancel() }
    return await withTaskCancellationHandler { await stop.value } onCancel: { stop.resolve(.interrupted) }
}

/// Runs `consume` (reading a stream) until it ends, or until `duration` elapses or a stop signal
/// arrives, which cancel it. Its error, if any; a cancellation is the requested end, not an error.
func consumeUntilStop(duration: Double?, _ consume: sending @escaping () async throws -> Void) async -> (any Error)? {
    let consumer = Task { () -> (any Error)? in
        do {
            try await consume()
            return nil
        } catch {
            return error is CancellationError ? nil : error
        }
    }
    let stopper = Task { _ = await waitForStop(duration: duration); consumer.cancel() }
    let failure = await consumer.value
    stopper.cancel()
    return failure
}

/// Thrown by `interruptible` when SIGINT or SIGTERM arrives before the work ends.
struct Interrupted: Error, CustomStringConvertible {
    var signal: Int32
    /// 128 + the signal number, as shells report a process a signal ended (130, 143).
    var exitCode: Int32 { 128 + signal }
    var description: String { "interrupted by \(signal == SIGTERM ? "SIGTERM" : "SIGINT")" }
}

/// Runs `body` until it returns or a signal arrives, whichever is first. On a signal it throws
/// `Interrupted` at once and cancels `body` (which may still be waiting on the controller: the
/// caller then closes the transport, which ends it). Every phase of a command that does not
/// itself watch for signals (bring-up, scanning for the target, connecting, ATT requests) runs
/// inside one, so Ctrl-C is never ignored.
func interruptible<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) async throws -> T {
    if let s = SignalWatcher.shared.received { throw Interrupted(signal: s) }
    let work = Task { try await body() }
    let outcome = FirstOutcome<Result<T, any Error>>()
    let watcher = Task {
        if let s = await SignalWatcher.shared.nextSignal() { outcome.resolve(.failure(Interrupted(signal: s))) }
    }
    Task { outcome.resolve(await work.result) }
    // The caller's cancellation reaches the body (which then ends with its own error).
    let result = await withTaskCancellationHandler { await outcome.value } onCancel: { work.cancel() }
    watcher.cancel()
    if case .failure(let e) = result, e is Interrupted { work.cancel() }
    return try result.get()
}

/// A value set once by whichever of several tasks gets there first.
final class FirstOutcome<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiter: CheckedContinuation<Value, Never>?
    }
    private let state = Mutex(State())

    func resolve(_ v: Value) {
        let w: CheckedContinuation<Value, Never>? = state.withLock { s in
            guard s.value == nil else { return nil }
            s.value = v
            defer { s.waiter = nil }
            return s.waiter
        }
        w?.resume(returning: v)
    }

    var value: Value {
        get async {
            await withCheckedContinuation { c in
                let ready: Value? = state.withLock { s in
                    if let v = s.value { return v }
                    s.waiter = c
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        }
    }
}

/// SIGINT/SIGTERM delivered through Dispatch so the async code can stop cleanly (disconnect,
/// flush the capture) instead of dying mid-write. A second signal exits at once (every capture
/// record is already whole on disk: the writer writes each record in one call).
final class SignalWatcher: Sendable {
    static let shared = SignalWatcher()
    /// The first signal received (0: none yet).
    private let first = Atomic<Int32>(0)
    /// Tasks waiting in `nextSignal`, by ticket; `fire` sets `first` and takes them under this
    /// lock, so a waiter either sees the signal or is resumed by it.
    private let waiters = Mutex<(next: Int, waiting: [Int: CheckedContinuation<Int32?, Never>])>((0, [:]))
    /// Kept alive for the process's life (a released source stops delivering); Dispatch's
    /// sources are not marked Sendable, so they are held behind the lock they never need.
    private let sources: Mutex<[any DispatchSourceSignal]>

    private init() {
        var made: [any DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            made.append(DispatchSource.makeSignalSource(signal: sig, queue: .global()))
        }
        sources = Mutex(made)
        sources.withLock { sources in
            for (s, sig) in zip(sources, [SIGINT, SIGTERM]) {
                s.setEventHandler { [weak self] in self?.fire(sig) }
                s.resume()
            }
        }
    }

    /// Installs the handlers early (before a long bring-up) so Ctrl-C is never lost.
    static func install() { _ = shared }

    private func fire(_ sig: Int32) {
        let (stored, woken) = waiters.withLock { w in
            let (stored, _) = first.compareExchange(expected: 0, desired: sig, ordering: .acquiringAndReleasing)
            defer { if stored { w.waiting = [:] } }
            return (stored, stored ? Array(w.waiting.values) : [])
        }
        if !stored {
            FileHandle.standardError.write(Data("ble-hci: second signal: exiting now\n".utf8))
            exit(128 + sig)
        }
        for c in woken { c.resume(returning: sig) }
    }

    /// The first signal, once it has come (at once if it already has); nil when the waiting
    /// task is cancelled first.
    func nextSignal() async -> Int32? {
        let ticket = waiters.withLock { w in defer { w.next += 1 }; return w.next }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (c: CheckedContinuation<Int32?, Never>) in
                let now: Int32?? = waiters.withLock { w in
                    let s = first.load(ordering: .acquiring)
                    if s != 0 { return .some(s) }
                    if Task.isCancelled { return .some(nil) }
                    w.waiting[ticket] = c
                    return nil
                }
                if let now { c.resume(returning: now) }
            }
        } onCancel: {
            waiters.withLock { $0.waiting.removeValue(forKey: ticket) }?.resume(returning: nil)
        }
    }

    /// The first signal received, if any.
    var received: Int32? {
        let s = first.load(ordering: .acquiring)
        return s == 0 ? nil : s
    }
    var interrupted: Bool { received != nil }
}

/// Runs `body`, then `close` whatever `body` did (returned, failed, or was interrupted by a
/// signal): the commands that drive a controller leave it as found (scanning and advertising
/// stopped, links disconnected: `Central.close`, `Peripheral.close`) before the transport is
/// closed. `close` is given at most `limit`: a controller that no longer answers does not hold
/// the exit (the transport is closed after it anyway; a second signal exits at once).
func closing<T>(_ close: @escaping @Sendable () async -> Void, within limit: Duration = .seconds(8),
                _ body: () async throws -> T) async throws -> T {
    let result: Result<T, any Error>
    do {
        result = .success(try await body())
    } catch {
        result = .failure(error)
    }
    let done = FirstOutcome<Bool>()
    let closer = Task { await close(); done.resolve(true) }
    let timer = Task { try? await Task.sleep(for: limit); done.resolve(false) }
    if await done.value == false {
        closer.cancel()
        FileHandle.standardError.write(Data("ble-hci: the controller did not finish stopping scans, advertising and links within \(limit); closing the transport anyway\n".utf8))
    }
    timer.cancel()
    return try result.get()
}
