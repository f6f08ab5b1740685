import Foundation

/// Rootcanal, Android's virtual Bluetooth controller (PyPI `rootcanal`, pinned 1.10.0 in
/// Tools/requirements.txt: later wheels need a newer glibc than Debian 12's), as a second
/// independent controller next to Bumble's. Started by Tools/rootcanal/serve.py, which runs the
/// binary the package ships on TCP ports picked free on 127.0.0.1, waits until it listens and
/// prints `{"event":"ready","hci_port":P,...}`.
///
/// Every TCP connection to `hciPort` is a new controller (LE and BR/EDR, H4 framing) on one
/// shared virtual radio, with a public address of its own (DA:4C:10:DE:17:00, :01, ... in the
/// order of connection); it is removed when its connection closes. So, unlike
/// `BumbleControllers`, there is no fixed number of controllers: `transport(_:)` is the same for
/// every index, and each host that opens it gets its own controller.
///
/// `hciPort` is a relay of serve.py bound on 127.0.0.1 (a port the kernel picks), which copies
/// the octets unchanged and acknowledges at once: Rootcanal writes an H4 packet in two writes
/// without TCP_NODELAY, so without it each event would wait ~40 ms for a delayed ACK. Rootcanal
/// 1.10.0 has no option for the address it binds: its own ports listen on 0.0.0.0; the tests
/// only ever connect to 127.0.0.1.
///
///     let rootcanal = try RootcanalControllers()
///     defer { rootcanal.stop() }
///     let a = try RawTCPConnection(port: rootcanal.hciPort)   // controller 1
///     let b = try RawTCPConnection(port: rootcanal.hciPort)   // controller 2, same radio
///
/// Tests that need it run in `make rootcanal-test` (Tools/rootcanal/run-tests.sh), which sets
/// BLE_HCI_ROOTCANAL=1; elsewhere they are disabled with `disabledReason` (see `selected`).
public final class RootcanalControllers: TestControllers, @unchecked Sendable {
    public let process: ChildProcess
    /// The HCI port: each connection is a new controller.
    public let hciPort: UInt16
    /// The version of the `rootcanal` package that runs.
    public let version: String
    /// The process id of the `rootcanal` binary (a child of `process`, killed with it).
    public let binaryPID: Int32
    public var kind: ControllerKind { .rootcanal }

    /// Starts Rootcanal and waits (at most `timeout` seconds) until it listens. Throws a
    /// `HarnessError` saying why when it cannot start (package missing: run `make deps`; the
    /// binary does not run here, with its output; no ports). `python`: the interpreter to run
    /// the wrapper with (default the project venv's).
    public init(timeout: TimeInterval = 20, lifetime: TimeInterval = 600, python: URL? = nil) throws {
        let interpreter = try python ?? Repo.requireVenvPython()
        let script = Repo.root.appendingPathComponent("Tools/rootcanal/serve.py")
        process = try ChildProcess(executable: interpreter,
                                   arguments: [script.path, "--timeout", String(lifetime), "--start-timeout", String(timeout)],
                                   lifetime: lifetime + 5)
        let ready: [String: Any]
        do {
            let line = try process.waitForLine(timeout: timeout + 5) { line in
                guard let event = ChildProcess.json(line)?["event"] as? String else { return false }
                return event == "ready" || event == "error"
            }
            ready = ChildProcess.json(line) ?? [:]
        } catch {
            process.stop()
            throw HarnessError("Rootcanal did not start: \(error)")
        }
        if ready["event"] as? String == "error" {
            process.stop()
            throw HarnessError("Rootcanal cannot start: \(ready["message"] as? String ?? "no reason given")")
        }
        guard let port = ready["hci_port"] as? Int, let p = UInt16(exactly: port) else {
            process.stop()
            throw HarnessError("Tools/rootcanal/serve.py reported no HCI port: \(ready)")
        }
        hciPort = p
        version = ready["version"] as? String ?? "?"
        binaryPID = Int32(ready["pid"] as? Int ?? 0)
    }

    /// Starts Rootcanal from an async test without holding a thread of the cooperative pool.
    public static func start(timeout: TimeInterval = 20, lifetime: TimeInterval = 600) async throws -> RootcanalControllers {
        try await offPool { try RootcanalControllers(timeout: timeout, lifetime: lifetime) }
    }

    /// `ble-hci` transport spec of a new controller: `tcp:127.0.0.1:PORT` (any index).
    public func transport(_ index: Int = 0) -> String { "tcp:127.0.0.1:\(hciPort)" }
    /// Bumble transport spec of a new controller: `tcp-client:127.0.0.1:PORT` (any index).
    public func bumbleTransport(_ index: Int = 0) -> String { "tcp-client:127.0.0.1:\(hciPort)" }

    public func stop() { process.stop() }
    deinit { process.stop(grace: 0.5) }

    /// True in `make rootcanal-test` (BLE_HCI_ROOTCANAL=1): the tests that need Rootcanal are
    /// enabled only then, so the plain `swift test` of `make swift-test` does not run them twice
    /// and a machine without Rootcanal reports the suite skipped (`make test`'s last line), not a
    /// heap of failures; Tools/rootcanal/run-tests.sh fails when one of them skips itself.
    public static var selected: Bool { ProcessInfo.processInfo.environment["BLE_HCI_ROOTCANAL"] == "1" }
    /// Why a Rootcanal test is disabled outside `make rootcanal-test`.
    public static let disabledReason: String = "over Rootcanal: run by `make rootcanal-test` (BLE_HCI_ROOTCANAL=1)"
}

/// Which virtual controllers an interop test runs on.
public enum ControllerKind: String, Sendable, CaseIterable, CustomStringConvertible {
    /// Bumble's controllers (Tools/bumble/controllers.py), a fixed number on one link.
    case bumble
    /// Rootcanal: a new controller per connection, on one radio.
    case rootcanal
    public var description: String { rawValue }
}

/// A process serving virtual controllers as H4 over TCP on 127.0.0.1.
public protocol TestControllers: AnyObject, Sendable {
    var kind: ControllerKind { get }
    var process: ChildProcess { get }
    /// `ble-hci` transport spec of controller `index` (0-based).
    func transport(_ index: Int) -> String
    /// Bumble transport spec of controller `index` (0-based).
    func bumbleTransport(_ index: Int) -> String
    func stop()
}

extension BumbleControllers: TestControllers {
    public var kind: ControllerKind { .bumble }
}

/// Starts a fresh process of `kind` with at least `count` controllers (Rootcanal: any number),
/// off the cooperative pool.
public func startTestControllers(_ kind: ControllerKind, count: Int = 2,
                                 lifetime: TimeInterval = 180) async throws -> any TestControllers {
    switch kind {
    case .bumble: try await offPool { try BumbleControllers(count: count, timeout: 30, lifetime: lifetime) }
    case .rootcanal: try await offPool { try RootcanalControllers(timeout: 20, lifetime: lifetime) }
    }
}
