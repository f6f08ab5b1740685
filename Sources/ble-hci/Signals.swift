import Foundation

/// Why a long-running command stopped.
enum StopReason { case interrupted, durationElapsed }

/// Returns when the user presses Ctrl-C (SIGINT) or the process gets SIGTERM, or after
/// `duration` seconds if given. Cancellable.
func waitForStop(duration: Double?) async -> StopReason {
    let clock = ContinuousClock()
    let deadline = duration.map { clock.now + .milliseconds(Int($0 * 1000)) }
    // Polled: cheap, and cancelling the caller ends it at once.
    while !Task.isCancelled {
        if SignalWatcher.shared.interrupted { return .interrupted }
        if let deadline, clock.now >= deadline { return .durationElapsed }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return .interrupted
}

/// SIGINT/SIGTERM delivered through Dispatch so the async code can stop cleanly (disconnect,
/// flush the capture) instead of dying mid-write. A second signal exits at once.
final class SignalWatcher: @unchecked Sendable {
    static let shared = SignalWatcher()
    private let lock = NSLock()
    private var fired = false
    private var sources: [DispatchSourceSignal] = []

    private init() {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler { [weak self] in self?.fire() }
            s.resume()
            sources.append(s)
        }
    }

    /// Installs the handlers early (before a long bring-up) so Ctrl-C is never lost.
    static func install() { _ = shared }

    private func fire() {
        let again: Bool = lock.withLock {
            defer { fired = true }
            return fired
        }
        if again { exit(130) }
    }

    var interrupted: Bool { lock.withLock { fired } }
}
