import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A child process with its stdout read line by line and its stderr captured, bounded in time
/// and always killed at the end (`stop()`, deinit, or when `lifetime` has passed).
///
/// The child's stdin is a pipe held open by this object; with `BLE_HCI_EXIT_ON_STDIN_EOF=1`
/// (set for every child) the Bumble scripts exit on their own when it closes, so a test
/// process that crashes does not leave them running.
public final class ChildProcess: @unchecked Sendable {
    public let command: [String]
    private let process = Process()
    private let stdinPipe = Pipe()
    private let condition = NSCondition()
    private var stdoutLines: [String] = []
    private var cursor = 0
    private var stderrData = Data()
    private var stdoutClosed = false
    private var stderrClosed = false
    private var stopped = false
    /// Signalled by the process's termination handler (and again by each wait that saw it).
    private let exitSignal = DispatchSemaphore(value: 0)
    /// What the child did so far, for async waits: each line, the end of stdout and the exit
    /// wake them (no polling).
    public struct Progress: Sendable {
        public var lines = 0
        public var stderrOctets = 0
        public var stdoutClosed = false
        public var exited = false
    }
    public let progress = Watched(Progress())
    /// The child's own `XDG_STATE_HOME`: a `ble-hci` started without `--bonds` keeps its bonds
    /// here, never in the user's ~/.local/state, so no test sees bonds another run left.
    private let stateHome = FileManager.default.temporaryDirectory
        .appendingPathComponent("ble-hci-test-state-\(UUID().uuidString)")
    private let continuation: AsyncStream<String>.Continuation
    /// Every stdout line, in order (one consumer). Ends when the child closes its stdout.
    public let lines: AsyncStream<String>

    /// Starts `executable arguments...`. `lifetime`: the child is killed after this long.
    public init(executable: URL, arguments: [String], environment: [String: String] = [:],
                currentDirectory: URL = Repo.root, lifetime: TimeInterval = 120) throws {
        command = [executable.path] + arguments
        (lines, continuation) = AsyncStream.makeStream(of: String.self)
        process.executableURL = executable
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["PYTHONUNBUFFERED"] = "1"
        env["BLE_HCI_EXIT_ON_STDIN_EOF"] = "1"
        env["XDG_STATE_HOME"] = stateHome.path
        for (k, v) in environment { env[k] = v }
        process.environment = env
        process.currentDirectoryURL = currentDirectory
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = stdinPipe
        process.terminationHandler = { [exitSignal, progress] _ in
            exitSignal.signal()
            progress.withLock { $0.exited = true }
        }
        do { try process.run() } catch {
            throw HarnessError("could not start \(command.joined(separator: " ")): \(error)")
        }
        startReader(out.fileHandleForReading, isStdout: true)
        startReader(err.fileHandleForReading, isStdout: false)
        let pid = process.processIdentifier
        DispatchQueue.global().asyncAfter(deadline: .now() + lifetime) { [weak self] in
            guard let self, !self.isStopped, self.process.processIdentifier == pid else { return }
            self.stop()
        }
    }

    private var isStopped: Bool { condition.withLock { stopped } }

    private func startReader(_ handle: FileHandle, isStdout: Bool) {
        let thread = Thread { [self] in
            let fd = handle.fileDescriptor
            var pending = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, 4096) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                if isStdout {
                    pending.append(contentsOf: buffer[0..<n])
                    while let nl = pending.firstIndex(of: 0x0A) {
                        let line = String(decoding: pending[pending.startIndex..<nl], as: UTF8.self)
                        pending.removeSubrange(pending.startIndex...nl)
                        condition.withLock { stdoutLines.append(line); condition.broadcast() }
                        progress.withLock { $0.lines += 1 }
                        continuation.yield(line)
                    }
                } else {
                    condition.withLock { stderrData.append(contentsOf: buffer[0..<n]) }
                    progress.withLock { $0.stderrOctets += n }
                }
            }
            if isStdout {
                if !pending.isEmpty {
                    let line = String(decoding: pending, as: UTF8.self)
                    condition.withLock { stdoutLines.append(line) }
                    progress.withLock { $0.lines += 1 }
                    continuation.yield(line)
                }
                continuation.finish()
            }
            condition.withLock {
                if isStdout { stdoutClosed = true } else { stderrClosed = true }
                condition.broadcast()
            }
            if isStdout { progress.withLock { $0.stdoutClosed = true } }
            try? handle.close()
        }
        thread.start()
    }

    /// The process id of the child.
    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }

    /// Everything the child wrote to stderr so far.
    public var stderr: String { condition.withLock { String(decoding: stderrData, as: UTF8.self) } }
    /// Every stdout line so far.
    public var output: [String] { condition.withLock { stdoutLines } }

    /// Waits (blocking) for the next stdout line, after those already returned by this method,
    /// that satisfies `predicate`; lines that don't are skipped. Throws on timeout or when the
    /// child closes stdout first, with its stderr in the message.
    @discardableResult
    public func waitForLine(timeout: TimeInterval = 10,
                            matching predicate: (String) -> Bool) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            while cursor < stdoutLines.count {
                let line = stdoutLines[cursor]
                cursor += 1
                if predicate(line) { return line }
            }
            if stdoutClosed {
                throw HarnessError("\(name) ended without the expected line\(failureContext())")
            }
            if !condition.wait(until: deadline) {
                throw HarnessError("\(name): no expected line within \(timeout) s\(failureContext())")
            }
        }
    }

    /// Waits for the next JSON line whose `"event"` is `event` (see Tools/bumble/*.py) and
    /// returns it as a dictionary.
    public func waitForEvent(_ event: String, timeout: TimeInterval = 10) throws -> [String: Any] {
        var result: [String: Any] = [:]
        try waitForLine(timeout: timeout) { line in
            guard let object = Self.json(line), object["event"] as? String == event else { return false }
            result = object
            return true
        }
        return result
    }

    /// Every JSON line of stdout so far, parsed.
    public var events: [[String: Any]] { output.compactMap(Self.json) }

    public static func json(_ line: String) -> [String: Any]? {
        guard let data = line.data(using: .utf8),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return object
    }

    /// Waits for the child to exit by itself and returns its exit status; kills it and throws
    /// if it has not exited within `timeout`.
    public func waitForExit(timeout: TimeInterval = 10) throws -> Int32 {
        guard waitForTermination(timeout: timeout) else {
            stop()
            throw HarnessError("\(name) did not exit within \(timeout) s\(condition.withLock { failureContext() })")
        }
        // Let the readers drain the pipes.
        condition.lock()
        while !(stdoutClosed && stderrClosed) {
            if !condition.wait(until: Date().addingTimeInterval(2)) { break }
        }
        condition.unlock()
        return process.terminationStatus
    }

    /// Waits until `condition` (on what the child printed) holds: it is checked again on each
    /// line of stdout, each write to stderr, and the child's exit, never on a timer. Throws naming
    /// `what` when it still does not hold after `timeout`, or once the child is gone without it.
    public func until(_ what: @autoclosure () -> String, timeout: Duration = .seconds(15),
                      _ condition: () -> Bool) async throws {
        let start = ContinuousClock.now
        while true {
            let seen = progress.value  // (before the check: output that comes meanwhile wakes the wait)
            if condition() { return }
            let left = timeout - (ContinuousClock.now - start)
            let gone = seen.exited && seen.stdoutClosed
            if left > .zero, !gone, (try? await progress.until("output", timeout: left, {
                $0.lines != seen.lines || $0.stderrOctets != seen.stderrOctets || $0.exited != seen.exited
                    || $0.stdoutClosed != seen.stdoutClosed
            })) != nil { continue }
            if condition() { return }
            throw HarnessError("\(what()): not so within \(timeout)\(gone ? " (the child is gone)" : "")")
        }
    }

    /// Writes `text` to the child's stdin (a session's requests). Throws once stdin is closed.
    public func send(_ text: String) throws {
        signal(SIGPIPE, SIG_IGN)  // a child that has exited fails the write, not the test process
        try stdinPipe.fileHandleForWriting.write(contentsOf: Data(text.utf8))
    }

    /// Writes `bytes` to the child's stdin, as they are (malformed input for a parser).
    public func send(_ bytes: Data) throws {
        signal(SIGPIPE, SIG_IGN)
        try stdinPipe.fileHandleForWriting.write(contentsOf: bytes)
    }

    /// Closes the child's stdin (its end of input).
    public func closeInput() {
        try? stdinPipe.fileHandleForWriting.close()
    }

    /// Terminates the child (SIGTERM, then SIGKILL after `grace` seconds). Idempotent.
    public func stop(grace: TimeInterval = 2) {
        let first = condition.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        try? stdinPipe.fileHandleForWriting.close()
        guard process.isRunning else { return }
        let pid = process.processIdentifier
        kill(pid, SIGTERM)
        if !waitForTermination(timeout: grace) {
            kill(pid, SIGKILL)
            _ = waitForTermination(timeout: 5)
        }
    }

    /// Waits (blocking) for the termination handler; false after `timeout` seconds.
    private func waitForTermination(timeout: TimeInterval) -> Bool {
        guard exitSignal.wait(timeout: .now() + timeout) == .success else { return false }
        exitSignal.signal()  // for the next wait
        return true
    }

    deinit {
        stop(grace: 0.5)
        try? FileManager.default.removeItem(at: stateHome)
    }

    private var name: String { (command.dropFirst().first.map { URL(fileURLWithPath: $0).lastPathComponent } ?? command[0]) }

    /// The last output of the child, for failure messages (call with the lock held).
    private func failureContext() -> String {
        let err = String(decoding: stderrData.suffix(4000), as: UTF8.self)
        let out = stdoutLines.suffix(20).joined(separator: "\n")
        return "\n--- command: \(command.joined(separator: " "))\n--- stdout (last lines):\n\(out)\n--- stderr:\n\(err)"
    }
}

/// A Bumble peer script: `.venv/bin/python Tools/bumble/SCRIPT args...` as a `ChildProcess`.
public enum PythonScript {
    /// Starts `Tools/bumble/<script>` (e.g. `"peripheral.py"`) with `arguments`.
    /// Throws "run make deps" when the venv is missing.
    public static func start(_ script: String, _ arguments: [String],
                             environment: [String: String] = [:],
                             lifetime: TimeInterval = 120) throws -> ChildProcess {
        let python = try Repo.requireVenvPython()
        let path = Repo.bumbleScript(script)
        guard FileManager.default.fileExists(atPath: path.path) else {
            throw HarnessError("no script \(path.path)")
        }
        return try ChildProcess(executable: python, arguments: [path.path] + arguments,
                                environment: environment, lifetime: lifetime)
    }
}
