import Foundation

/// Bumble's virtual LE controllers on one shared link, each served as H4 over TCP on
/// 127.0.0.1 (Tools/bumble/controllers.py, around `bumble.controller.Controller` and
/// `bumble.link.LocalLink`, as `python -m bumble.apps.controllers` but with the ports picked
/// by the kernel, so no port races, and any number of controllers).
///
/// Start a fresh one per test: a controller's state does not fully reset between host
/// connections. The process is killed by `stop()` and in deinit.
///
///     let controllers = try BumbleControllers()
///     defer { controllers.stop() }
///     // our host on "tcp:127.0.0.1:\(controllers.port1)", a Bumble peer on port2:
///     let peer = try PythonScript.start("peripheral.py",
///         ["--transport", controllers.bumbleTransport(1), "--name", "peer"])
public final class BumbleControllers: @unchecked Sendable {
    public let process: ChildProcess
    /// One port per controller, in order.
    public let ports: [UInt16]
    public var port1: UInt16 { ports[0] }
    public var port2: UInt16 { ports[1] }

    /// Starts `count` controllers and waits (at most `timeout` seconds) until all accept.
    public init(count: Int = 2, timeout: TimeInterval = 30, lifetime: TimeInterval = 600) throws {
        process = try PythonScript.start("controllers.py",
                                         ["--count", String(count), "--timeout", String(lifetime)],
                                         lifetime: lifetime + 5)
        let ready: [String: Any]
        do {
            ready = try process.waitForEvent("ready", timeout: timeout)
        } catch {
            process.stop()
            throw error
        }
        ports = (ready["ports"] as? [Int] ?? []).map { UInt16($0) }
        guard ports.count == count else {
            process.stop()
            throw HarnessError("controllers.py reported ports \(ports), expected \(count)")
        }
    }

    /// `ble-hci` transport spec of controller `index` (0-based): `tcp:127.0.0.1:PORT`.
    public func transport(_ index: Int) -> String { "tcp:127.0.0.1:\(ports[index])" }
    /// Bumble transport spec of controller `index` (0-based): `tcp-client:127.0.0.1:PORT`.
    public func bumbleTransport(_ index: Int) -> String { "tcp-client:127.0.0.1:\(ports[index])" }

    public func stop() { process.stop() }
    deinit { process.stop(grace: 0.5) }
}
