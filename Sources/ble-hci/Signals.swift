import Foundation

/// Resolves when the user presses Ctrl-C (SIGINT) or the process gets SIGTERM, or after
/// `duration` seconds if given; returns which happened.
enum StopReason { case interrupted, durationElapsed }

func waitForStop(duration: Double?) async -> StopReason {
    await withTaskGroup(of: StopReason?.self) { group in
        group.addTask {
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                SignalWatcher.shared.onSignal { c.resume() }
            }
            return .interrupted
        }
        if let duration {
            group.addTask {
                try? await Task.sleep(for: .milliseconds(Int(duration * 1000)))
                return Task.isCancelled ? nil : .durationElapsed
            }
        }
        let first = await group.next() ?? .interrupted
        group.cancelAll()
        return first ?? .interrupted
    }
}

/// SIGINT/SIGTERM delivered through Dispatch so the async code can stop cleanly (disconnect,
/// flush the capture) instead of dying mid-write.
final class SignalWatcher: @unchecked Sendable {
    static let shared = SignalWatcher()
    private let lock = NSLock()
    private var handlers: [() -> Void] = []
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

    func onSignal(_ h: @escaping () -> Void) {
        let now: Bool = lock.withLock {
            if fired { return true }
            handlers.append(h)
            return false
        }
        if now { h() }
    }

    private func fire() {
        let hs: [() -> Void] = lock.withLock {
            if fired {
                // A second Ctrl-C: the user wants out now.
                exit(130)
            }
            fired = true
            defer { handlers = [] }
            return handlers
        }
        for h in hs { h() }
    }

    var interrupted: Bool { lock.withLock { fired } }
}
