// A synchronous way into a host's isolation for code that runs on its executor's thread but
// that the compiler cannot see is isolated.

/// The host's side of `Host.checkedIsolation`: an isolated method that a nonisolated caller
/// reaches through this protocol. The conformance is `@preconcurrency`, so the compiler gives
/// its witness the runtime check of SE-0423 (the executor must be the host's, else the program
/// traps: "Incorrect actor executor assumption"), the same check `assumeIsolated` makes.
public protocol HostIsolationEntry: AnyObject {
    func enterIsolation<R: Sendable>(_ body: (isolated Host) throws -> R) rethrows -> R
}

extension Host: @preconcurrency HostIsolationEntry {
    public func enterIsolation<R: Sendable>(_ body: (isolated Host) throws -> R) rethrows -> R { try body(self) }
}

extension Host {
    /// Runs `body` in the host's isolation, now, from code that is in it without the compiler
    /// knowing (a job of the host's executor, a layer's client side called from the host's own
    /// code); traps where the host's executor is not the current one, as `assumeIsolated` does.
    /// Unlike `assumeIsolated` it allocates nothing: that one passes its closure through
    /// `withoutActuallyEscaping`, which makes the closure escape (one to two objects per call on
    /// Swift 6.3, and it runs per batch of received packets and per request sent).
    public nonisolated func checkedIsolation<R: Sendable>(_ body: (isolated Host) throws -> R) rethrows -> R {
        try (self as any HostIsolationEntry).enterIsolation(body)
    }
}
