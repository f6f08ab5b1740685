import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The `ble-hci` executable built next to this test bundle, run as separate processes.
enum BleHCI {
    static func executable() throws -> URL { try bleHCIExecutable() }

    /// The English the tests expect, whatever the locale of whoever runs them (POSIX: an empty
    /// LC_ALL or LC_MESSAGES counts as unset, so LANG decides).
    static let english = ["LC_ALL": "", "LC_MESSAGES": "", "LANG": "C.UTF-8"]

    /// Starts `ble-hci arguments...` (killed after `lifetime` seconds at the latest), with
    /// `environment` over the English default.
    static func start(_ arguments: [String], lifetime: TimeInterval = 60, environment: [String: String] = [:]) throws -> ChildProcess {
        try ChildProcess(executable: try executable(), arguments: arguments,
                         environment: english.merging(["NO_COLOR": "1"]) { $1 }.merging(environment) { $1 }, lifetime: lifetime)
    }

    struct Result {
        var status: Int32
        var stdout: [String]
        var stderr: String
        /// Every stdout line parsed as a JSON object (nil entries for lines that are not).
        var json: [[String: Any]?] { stdout.map(ChildProcess.json) }
        func events(_ name: String) -> [[String: Any]] {
            stdout.compactMap(ChildProcess.json).filter { $0["event"] as? String == name }
        }
    }

    /// Runs `ble-hci arguments...` to completion (killed and failed after `timeout`).
    static func run(_ arguments: [String], timeout: TimeInterval = 20, environment: [String: String] = [:]) async throws -> Result {
        let child = try start(arguments, lifetime: timeout + 5, environment: environment)
        defer { child.stop(grace: 0.5) }
        let status = try await child.exitStatus(timeout: timeout)
        return Result(status: status, stdout: child.output, stderr: child.stderr)
    }
}

/// Runs another program (tshark) to completion.
func runTool(_ path: String, _ arguments: [String], timeout: TimeInterval = 30) async throws -> BleHCI.Result {
    guard FileManager.default.isExecutableFile(atPath: path) else {
        throw HarnessError("\(path) is missing: run `make deps` (apt-get install tshark)")
    }
    let child = try ChildProcess(executable: URL(fileURLWithPath: path), arguments: arguments, lifetime: timeout + 5)
    defer { child.stop(grace: 0.5) }
    let status = try await child.exitStatus(timeout: timeout)
    return BleHCI.Result(status: status, stdout: child.output, stderr: child.stderr)
}

let tshark = "/usr/bin/tshark"

/// `ble-hci controllers` with two listeners on kernel-picked ports (or Rootcanal, whose one port
/// gives each connection a controller of its own), plus optionally a `ble-hci peripheral` on the
/// first one. Everything is killed by `stop()`.
final class Rig: @unchecked Sendable {
    let controllers: ChildProcess
    let specs: [String]
    /// Rootcanal, when the rig runs on it (kept alive as long as the rig).
    private var rootcanal: RootcanalControllers?
    var peripheral: ChildProcess?
    /// The peripheral's `advertising` event.
    var advertising: [String: Any] = [:]

    var peripheralSpec: String { specs[0] }
    var centralSpec: String { specs[1] }

    private init(controllers: ChildProcess, specs: [String]) {
        self.controllers = controllers
        self.specs = specs
    }

    /// Starts the controllers and, when `profile` is given, a peripheral serving it
    /// (`extraPeripheralArgs` go before the command, e.g. `-w FILE`).
    static func start(profile: String? = "demo", peripheralGlobalArgs: [String] = [], peripheralArgs: [String] = [],
                      onRootcanal: Bool = false, airtime: [String] = ["--airtime", "off"]) async throws -> Rig {
        if onRootcanal {
            let rootcanal = try await RootcanalControllers.start(lifetime: 120)
            let rig = Rig(controllers: rootcanal.process, specs: [rootcanal.transport(0), rootcanal.transport(1)])
            rig.rootcanal = rootcanal
            return try await rig.startPeripheral(profile: profile, peripheralGlobalArgs: peripheralGlobalArgs, peripheralArgs: peripheralArgs)
        }
        // Instant mode (no airtime, issue 29): the CLI tests need no radio timing, and stay fast.
        let (controllers, specs) = try await startControllers(2, airtime: airtime)
        return try await Rig(controllers: controllers, specs: specs)
            .startPeripheral(profile: profile, peripheralGlobalArgs: peripheralGlobalArgs, peripheralArgs: peripheralArgs)
    }

    private func startPeripheral(profile: String?, peripheralGlobalArgs: [String], peripheralArgs: [String]) async throws -> Rig {
        let rig = self
        if let profile {
            do {
                let p = try BleHCI.start(peripheralGlobalArgs + ["-t", rig.peripheralSpec, "peripheral", "--profile", profile, "--json"] + peripheralArgs,
                                         lifetime: 90)
                rig.peripheral = p
                rig.advertising = try await p.nextEvent("advertising", timeout: 10)
            } catch {
                rig.stop()
                throw error
            }
        }
        return rig
    }

    /// `ble-hci -t <central controller> ARGS...` to completion.
    func central(_ arguments: [String], timeout: TimeInterval = 20) async throws -> BleHCI.Result {
        try await BleHCI.run(["-t", centralSpec] + arguments, timeout: timeout)
    }

    func stop() {
        peripheral?.stop(grace: 1)
        controllers.stop(grace: 1)
    }

    /// `stop()` off the cooperative pool.
    func shutdown() async {
        if let peripheral { await peripheral.stopAsync(grace: 1) }
        await controllers.stopAsync(grace: 1)
    }

    deinit { stop() }
}

/// Runs `body` with a started rig and always shuts it down (processes killed), even on failure.
func withRig<T>(profile: String? = "demo", peripheralGlobalArgs: [String] = [], peripheralArgs: [String] = [],
                onRootcanal: Bool = false, airtime: [String] = ["--airtime", "off"],
                _ body: (Rig) async throws -> T) async throws -> T {
    let rig = try await Rig.start(profile: profile, peripheralGlobalArgs: peripheralGlobalArgs, peripheralArgs: peripheralArgs,
                                  onRootcanal: onRootcanal, airtime: airtime)
    do {
        let result = try await body(rig)
        await rig.shutdown()
        return result
    } catch {
        await rig.shutdown()
        throw error
    }
}

/// Fails the test with the command's output when `result.status != expected`.
func expectStatus(_ result: BleHCI.Result, _ expected: Int32, _ what: String,
                  sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(result.status == expected,
            "\(what): exit \(result.status), want \(expected)\n--- stdout:\n\(result.stdout.joined(separator: "\n"))\n--- stderr:\n\(result.stderr)",
            sourceLocation: sourceLocation)
}

/// Asserts that every stdout line is one JSON object with an "event" key first-class.
func expectPureJSON(_ result: BleHCI.Result, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(!result.stdout.isEmpty, "\(what): no stdout at all", sourceLocation: sourceLocation)
    expectPureJSON(lines: result.stdout, what, sourceLocation: sourceLocation)
}

func expectPureJSON(lines: [String], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
    for line in lines {
        let object = ChildProcess.json(line)
        #expect(object != nil, "\(what): stdout line is not a JSON object: \(line)", sourceLocation: sourceLocation)
        #expect(object?["event"] is String, "\(what): JSON line without a string \"event\": \(line)", sourceLocation: sourceLocation)
    }
}

/// A scratch directory removed at the end of the test.
final class TempDir: @unchecked Sendable {
    let url: URL
    init() throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("ble-hci-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }
    func path(_ name: String) -> String { url.appendingPathComponent(name).path }
    deinit { try? FileManager.default.removeItem(at: url) }
}

extension Array where Element == UInt8 {
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}

func hexOf(_ text: String) -> String { Array(text.utf8).hex }

/// `ble-hci controllers` with `count` listeners on kernel-picked ports (one virtual link).
func startControllers(_ count: Int, airtime: [String] = ["--airtime", "off"]) async throws -> (process: ChildProcess, specs: [String]) {
    let controllers = try BleHCI.start(["controllers", "--json"] + airtime
                                       + Array(repeating: ["--listen", "tcp:127.0.0.1:0"], count: count).flatMap { $0 }, lifetime: 150)
    var specs: [String] = []
    do {
        for _ in 0..<count {
            let e = try await controllers.nextEvent("listening", timeout: 10)
            guard let spec = e["spec"] as? String, spec.hasPrefix("tcp:127.0.0.1:"), !spec.hasSuffix(":0") else {
                throw HarnessError("controllers reported \(e) (want a bound tcp:127.0.0.1:PORT)")
            }
            specs.append(spec)
        }
    } catch {
        controllers.stop(grace: 0.5)
        throw error
    }
    return (controllers, specs)
}
