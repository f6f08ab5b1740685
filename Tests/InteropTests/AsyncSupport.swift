import Foundation
import Testing
import TestSupport

/// Async waits for the interop tests: they wait on the child's output and exit (its
/// `progress`), never block the cooperative pool (which has only two threads here), and every
/// one has a timeout.
struct InteropTimeout: Error, CustomStringConvertible {
    let description: String
}

extension ChildProcess {
    /// Waits (asynchronously) for the `index`-th JSON line (0-based, counting only lines whose
    /// "event" is `event` and that satisfy `matching`); throws with the child's output on timeout
    /// or when the child has closed its stdout without printing it.
    func event(_ event: String, index: Int = 0, timeout: Duration = .seconds(15),
               matching: ([String: Any]) -> Bool = { _ in true }) async throws -> [String: Any] {
        let start = ContinuousClock.now
        while true {
            let seen = progress.value  // (before the lines: one that comes meanwhile is not missed)
            let found = events.filter { $0["event"] as? String == event && matching($0) }
            if found.count > index { return found[index] }
            let left = timeout - (ContinuousClock.now - start)
            if seen.stdoutClosed || left <= .zero { break }
            // The next line, or the end of stdout.
            guard (try? await progress.until("a line", timeout: left, { $0.lines > seen.lines || $0.stdoutClosed })) != nil else {
                let found = events.filter { $0["event"] as? String == event && matching($0) }
                if found.count > index { return found[index] }
                break
            }
        }
        throw InteropTimeout(description: """
            no \(event) event #\(index + 1) from \(command.dropFirst().first ?? command[0]) within \(timeout) \
            (running: \(isRunning))
            --- stdout:
            \(output.suffix(40).joined(separator: "\n"))
            --- stderr:
            \(stderr.suffix(3000))
            """)
    }

    /// Every JSON event named `event` so far.
    func all(_ event: String) -> [[String: Any]] { events.filter { $0["event"] as? String == event } }

    /// Waits asynchronously for the child to exit by itself; kills it and throws after `timeout`.
    func exited(within timeout: Duration = .seconds(15)) async throws -> Int32 {
        do { try await progress.until("exit", timeout: timeout) { $0.exited } } catch {
            stop()
            throw InteropTimeout(description: "\(command.joined(separator: " ")) did not exit within \(timeout)\n\(output.suffix(30).joined(separator: "\n"))\n\(stderr.suffix(3000))")
        }
        // Terminated: this returns at once (it only drains the pipes, bounded by 2 s).
        return try waitForExit(timeout: 1)
    }
}


/// The hex string of bytes.
func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

/// Bytes of a hex string.
func bytes(_ hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = hex.startIndex
    while i < hex.endIndex, let j = hex.index(i, offsetBy: 2, limitedBy: hex.endIndex) {
        out.append(UInt8(hex[i..<j], radix: 16) ?? 0)
        i = j
    }
    return out
}

/// The 600-byte value Tools/bumble/peripheral.py serves on ...def1.
let bumbleLongValue: [UInt8] = (0..<600).map { UInt8($0 % 256) }

/// The built `ble-hci` binary (see TestSupport).
func bleHCIBinary() throws -> URL { try bleHCIExecutable() }

/// Everything one interop test started: a fresh controllers process (Bumble's, or Rootcanal),
/// the peer scripts and our stacks. `interop(on:controllers:_:)` tears all of it down however
/// the test ends.
final class Scope: @unchecked Sendable {
    let controllers: any TestControllers
    private let lock = NSLock()
    private var children: [ChildProcess] = []
    private var closers: [@Sendable () async -> Void] = []

    init(controllers: any TestControllers) { self.controllers = controllers }

    /// Which controllers this test runs on.
    var kind: ControllerKind { controllers.kind }

    /// Starts Tools/bumble/<script> (killed at the end of the test).
    func script(_ name: String, _ arguments: [String]) throws -> ChildProcess {
        let child = try PythonScript.start(name, arguments, lifetime: 120)
        lock.withLock { children.append(child) }
        return child
    }

    /// Starts the built `ble-hci` binary with `arguments` (killed at the end of the test).
    func bleHCI(_ arguments: [String]) throws -> ChildProcess {
        let child = try ChildProcess(executable: try bleHCIBinary(), arguments: arguments, lifetime: 120)
        lock.withLock { children.append(child) }
        return child
    }

    /// Runs `close` at the end of the test (before the processes are stopped).
    func onClose(_ close: @escaping @Sendable () async -> Void) { lock.withLock { closers.append(close) } }

    func tearDown() async {
        let (closers, children) = lock.withLock { (self.closers, self.children) }
        for close in closers.reversed() {
            _ = try? await withTimeout(.seconds(5), "closing the stack") { await close(); return true }
        }
        // Stopping sends SIGTERM and waits a moment for the child: off the cooperative pool.
        let controllers = self.controllers
        _ = try? await offPool {
            for child in children { child.stop(grace: 1) }
            controllers.process.stop(grace: 1)
        }
    }
}

/// Runs `body` with a fresh controllers process of `kind` (`count` controllers; Rootcanal makes
/// one per connection, any number) and tears everything down afterwards, whether `body` returns
/// or throws.
func interop<T: Sendable>(on kind: ControllerKind = .bumble, controllers count: Int = 2,
                          _ body: (Scope) async throws -> T) async throws -> T {
    let scope = Scope(controllers: try await startTestControllers(kind, count: count))
    do {
        let result = try await body(scope)
        await scope.tearDown()
        return result
    } catch {
        await scope.tearDown()
        throw error
    }
}

/// A list that a background task appends to (events of our `Peripheral`); a test awaits a
/// state of it (`until`), each append waking the wait.
final class Recorder<Element: Sendable>: Sendable {
    private let items = Watched<[Element]>([])
    func append(_ e: Element) { items.withLock { $0.append(e) } }
    var all: [Element] { items.value }
    func until(_ what: String, timeout: Duration = .seconds(10), _ predicate: @escaping @Sendable ([Element]) -> Bool) async throws {
        try await items.until(what, timeout: timeout, predicate)
    }
}

extension Peripheral {
    /// Returns once `predicate` holds for our peripheral (what it reports changes in its host
    /// when the peer's PDUs arrive, so it is checked each time the host's executor has run).
    func until(_ what: String, timeout: Duration = .seconds(15), _ predicate: @escaping @Sendable (Peripheral) -> Bool) async throws {
        try await executor.until(what, timeout: timeout) { predicate(self) }
    }
}

import BLE
import StackTestSupport
import Transport
import GATT
import HCI

extension Scope {
    static var stackOptions: StackOptions {
        var options = StackOptions()
        options.attTimeout = .seconds(10)
        // The suites exchange the MTU themselves where they test it (reads at 23, then 517).
        options.mtuOnConnect = nil
        return options
    }

    /// Our `Central` on controller `index` (closed at the end of the test).
    func central(on index: Int, options: StackOptions = Scope.stackOptions) async throws -> Central {
        let transport = try TransportSpec(parsing: controllers.transport(index)).open()
        let central = try await Central.open(transport, options: options)
        onClose { await central.close() }
        return central
    }

    /// Our `Peripheral` serving `services` on controller `index`, with its events recorded.
    func peripheral(on index: Int, services: [GATTService], name: String,
                    options: StackOptions = Scope.stackOptions) async throws -> (Peripheral, Recorder<PeripheralEvent>) {
        let transport = try TransportSpec(parsing: controllers.transport(index)).open()
        let peripheral = try await Peripheral.open(transport, services: services, name: name, options: options)
        let recorder = Recorder<PeripheralEvent>()
        let pump = Task { for await e in peripheral.events { recorder.append(e) } }
        onClose {
            await peripheral.close()
            pump.cancel()
        }
        return (peripheral, recorder)
    }
}

/// Attributes of a `"gatt"` JSON event (central.py / gatt_client_check.py / `ble-hci central`).
struct JSONTree {
    let services: [[String: Any]]
    init(_ event: [String: Any]) { services = event["services"] as? [[String: Any]] ?? [] }
    var serviceUUIDs: [String] { services.compactMap { $0["uuid"] as? String } }
    func service(_ uuid: String) -> [String: Any]? { services.first { $0["uuid"] as? String == uuid } }
    func characteristics(of service: String) -> [[String: Any]] {
        self.service(service)?["characteristics"] as? [[String: Any]] ?? []
    }
    func characteristic(_ uuid: String) -> [String: Any]? {
        services.flatMap { $0["characteristics"] as? [[String: Any]] ?? [] }.first { $0["uuid"] as? String == uuid }
    }
}
