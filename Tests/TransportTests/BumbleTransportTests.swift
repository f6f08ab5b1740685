import Foundation
import HCI
import Testing
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// A fresh `bumble.apps.controllers` process on two free local ports, killed at the end.
final class BumbleControllers {
    let process = Process()
    let ports: (UInt16, UInt16)

    init() throws {
        let python = "/work/main/.venv/bin/python"
        ports = (try freePort(), try freePort())
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = ["-m", "bumble.apps.controllers",
                             "tcp-server:127.0.0.1:\(ports.0)", "tcp-server:127.0.0.1:\(ports.1)"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        // Wait for LISTEN in /proc/net/tcp rather than probing (a probe would be a host connection).
        let deadline = Date().addingTimeInterval(20)
        while !isListening(ports.0) {
            guard Date() < deadline, process.isRunning else {
                stop()
                throw TestTimeout(what: "bumble controllers to listen on \(ports.0)")
            }
            usleep(50_000)
        }
    }

    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    deinit { stop() }
}

func freePort() throws -> UInt16 { try TestListener().port }

func isListening(_ port: UInt16) -> Bool {
    guard let table = try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8) else { return false }
    let needle = String(format: ":%04X ", port)
    return table.split(separator: "\n").contains { $0.contains(needle) && $0.split(separator: " ")[3] == "0A" }
}

@Suite(.timeLimit(.minutes(1)), .enabled(if: FileManager.default.fileExists(atPath: "/work/main/.venv/bin/python")))
struct BumbleTransportTests {
    func commandComplete(_ p: HCIPacket) throws -> CommandComplete {
        guard case .event(let e) = p else { throw TestTimeout(what: "an event, got \(p)") }
        let decoded = try HCIEvents.decode(e)
        return try #require(decoded as? CommandComplete)
    }

    @Test func resetReadAddressReadVersion() async throws {
        let bumble = try BumbleControllers()
        defer { bumble.stop() }
        let t = try TCPTransport.connect(host: "127.0.0.1", port: bumble.ports.0, timeout: 5)
        defer { t.close() }
        let inbox = Inbox(t.incoming)

        try t.send(.command(Reset().packet))
        let reset = try commandComplete(try await inbox.next(timeout: 10))
        #expect(reset.opcode == Reset.opcode)
        #expect(reset.status == .success)

        try t.send(.command(ReadBDADDR().packet))
        let addr = try commandComplete(try await inbox.next(timeout: 10))
        #expect(addr.opcode == ReadBDADDR.opcode)
        let address = try addr.result(ReadBDADDR.self).address
        #expect(address.description.count == 17)

        try t.send(.command(ReadLocalVersionInformation().packet))
        let version = try commandComplete(try await inbox.next(timeout: 10))
        #expect(version.opcode == ReadLocalVersionInformation.opcode)
        let v = try version.result(ReadLocalVersionInformation.self)
        #expect(v.hciVersion == 9)  // Bumble's controller reports Core 5.0
        #expect(v.lmpVersion == 9)
    }
}
