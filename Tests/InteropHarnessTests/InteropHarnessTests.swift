import Foundation
import Testing
import TestSupport

/// Checks the interop harness itself against Bumble: its controllers answer raw H4, and its
/// peer scripts find, connect to and talk GATT to each other. No Swift stack involved.
@Suite(.serialized) struct InteropHarnessTests {
    @Test func freePortIsBindable() async throws {
        let port = try freePort()
        #expect(port >= 1024)
    }

    @Test func repoRootHoldsThePackage() {
        #expect(FileManager.default.fileExists(atPath: Repo.root.appendingPathComponent("Package.swift").path))
    }

    @Test func bumbleControllerAnswersH4Reset() async throws {
        let controllers = try await BumbleControllers.start()
        defer { controllers.stop() }
        #expect(controllers.ports.count == 2)
        #expect(controllers.port1 != controllers.port2)
        let connection = try RawTCPConnection(port: controllers.port1)
        defer { connection.close() }
        try connection.send([0x01, 0x03, 0x0c, 0x00])  // H4 command: HCI_Reset
        // H4 event: Command Complete, 1 command allowed, opcode 0x0c03, status success.
        #expect(try connection.receive(exactly: 7) == [0x04, 0x0e, 0x04, 0x01, 0x03, 0x0c, 0x00])
        // A second controller answers too, independently.
        let second = try RawTCPConnection(port: controllers.port2)
        defer { second.close() }
        try second.send([0x01, 0x09, 0x10, 0x00])  // Read BD_ADDR
        let reply = try second.receive(exactly: 13)
        #expect(Array(reply[0..<7]) == [0x04, 0x0e, 0x0a, 0x01, 0x09, 0x10, 0x00])
    }

    @Test func controllersProcessIsKilledOnStop() async throws {
        let controllers = try await BumbleControllers.start()
        let pid = controllers.process.pid
        controllers.stop()
        #expect(!controllers.process.isRunning)
        #expect(kill(pid, 0) != 0)  // gone (reaped by Foundation's Process)
    }

    @Test func bumbleCentralReadsBumblePeripheral() async throws {
        let controllers = try await BumbleControllers.start()
        defer { controllers.stop() }
        let peripheral = try PythonScript.start("peripheral.py", [
            "--transport", controllers.bumbleTransport(0), "--name", "harness-peer",
            "--address", "C1:22:33:44:55:66", "--notify-count", "2", "--exit-after", "1",
            "--timeout", "40",
        ])
        defer { peripheral.stop() }
        let ready = try await peripheral.nextEvent("ready", timeout: 15)
        #expect(ready["address"] as? String == "C1:22:33:44:55:66")

        let long = "12345678-1234-5678-1234-56789abcdef1"
        let central = try PythonScript.start("central.py", [
            "--transport", controllers.bumbleTransport(1), "--name", "harness-peer", "--mtu", "100",
            "--read", long, "--write", "12345678-1234-5678-1234-56789abcdef2=00",
            "--subscribe", "2a37", "--count", "2", "--timeout", "40",
        ])
        defer { central.stop() }
        let ad = try await central.nextEvent("advertisement", timeout: 15)
        #expect(ad["name"] as? String == "harness-peer")
        #expect(ad["services"] as? [String] == ["180d", "180f", "12345678-1234-5678-1234-56789abcdef0"])
        #expect(ad["manufacturerData"] as? [String: String] == ["ffff": "01020304"])
        #expect(ad["serviceData"] as? [String: String] == ["180f": "64"])
        #expect(ad["txPower"] as? Int == 4)

        let connected = try await central.nextEvent("connected", timeout: 15)
        #expect(connected["address"] as? String == "C1:22:33:44:55:66")
        #expect(connected["mtu"] as? Int == 100)
        let gatt = try await central.nextEvent("gatt", timeout: 15)
        let services = (gatt["services"] as? [[String: Any]] ?? []).compactMap { $0["uuid"] as? String }
        #expect(services.contains("180d") && services.contains("180f")
                && services.contains("12345678-1234-5678-1234-56789abcdef0"))

        let read = try await central.nextEvent("read", timeout: 15)
        let expected = (0..<600).map { String(format: "%02x", $0 % 256) }.joined()
        #expect(read["value"] as? String == expected)
        let refused = try await central.nextEvent("error", timeout: 15)
        #expect(refused["op"] as? String == "write")
        #expect(refused["att"] as? String == "0x03")
        #expect(try await central.nextEvent("notification", timeout: 15)["value"] as? String == "003c")
        #expect(try await central.nextEvent("notification", timeout: 15)["value"] as? String == "003d")
        _ = try await central.nextEvent("disconnected", timeout: 15)
        #expect(try await central.exitStatus(timeout: 10) == 1)  // 1: the refused write is a failed operation

        _ = try await peripheral.nextEvent("connected", timeout: 5)
        #expect(try await peripheral.nextEvent("subscribed", timeout: 5)["uuid"] as? String == "2a37")
        _ = try await peripheral.nextEvent("disconnected", timeout: 10)
        #expect(try await peripheral.exitStatus(timeout: 10) == 0)
    }
}

/// The Rootcanal harness (TestSupport's `RootcanalControllers`, Tools/rootcanal/serve.py): it
/// starts, every connection is a controller of its own, and it is gone after `stop()`.
@Suite(.serialized, .rootcanal)
struct RootcanalHarnessTests {
    @Test func everyConnectionIsAControllerOfItsOwn() async throws {
        let rootcanal = try await RootcanalControllers.start()
        defer { rootcanal.stop() }
        #expect(rootcanal.version == "1.10.0")  // the pin of Tools/requirements.txt
        let a = try RawTCPConnection(port: rootcanal.hciPort)
        defer { a.close() }
        let b = try RawTCPConnection(port: rootcanal.hciPort)
        defer { b.close() }
        for c in [a, b] {
            try c.send([0x01, 0x03, 0x0c, 0x00])  // H4 command: HCI_Reset (Core v5.4 Vol 4 Part E 7.3.2)
            // Command Complete (7.7.14): Num_HCI_Command_Packets 1, opcode 0x0c03, Status success.
            #expect(try c.receive(exactly: 7) == [0x04, 0x0e, 0x04, 0x01, 0x03, 0x0c, 0x00])
        }
        // Read BD_ADDR (7.4.6): Status + BD_ADDR; each controller has a public address of its own.
        var addresses: [[UInt8]] = []
        for c in [a, b] {
            try c.send([0x01, 0x09, 0x10, 0x00])
            let reply = try c.receive(exactly: 13)
            #expect(Array(reply[0..<7]) == [0x04, 0x0e, 0x0a, 0x01, 0x09, 0x10, 0x00])
            addresses.append(Array(reply[7...]))
        }
        #expect(addresses[0] != addresses[1])
        #expect(!addresses.contains([0, 0, 0, 0, 0, 0]))
    }

    @Test func stopEndsRootcanalAndItsBinary() async throws {
        let rootcanal = try await RootcanalControllers.start()
        let pid = rootcanal.process.pid, binary = rootcanal.binaryPID
        #expect(binary > 0 && kill(binary, 0) == 0)
        await rootcanal.process.stopAsync(grace: 2)
        #expect(!rootcanal.process.isRunning)
        #expect(kill(pid, 0) != 0)
        // The wrapper stops the binary before it exits (and PR_SET_PDEATHSIG kills it if the
        // wrapper dies first); the binary's parent reaps it, so it is gone, not a zombie.
        try await eventually("rootcanal binary \(binary) gone", timeout: .seconds(5)) { kill(binary, 0) != 0 }
    }
}

extension InteropHarnessTests {
    /// With an interpreter that lacks the package, `RootcanalControllers` fails at once and says
    /// what to do (no Rootcanal needed: this runs in every `swift test`).
    @Test func rootcanalReportsWhyItCannotStart() async throws {
        let python = URL(fileURLWithPath: "/usr/bin/python3")
        try #require(FileManager.default.isExecutableFile(atPath: python.path), "Debian's python3 (Tools/setup.sh makes the venv from it)")
        let started = ContinuousClock.now
        do {
            _ = try await offPool { try RootcanalControllers(timeout: 10, python: python) }
            Issue.record("Rootcanal started under \(python.path), which has no rootcanal package")
        } catch let error as HarnessError {
            #expect(error.description.contains("make deps"), "\(error)")
            #expect(error.description.contains("rootcanal is not installed"), "\(error)")
        }
        #expect(ContinuousClock.now - started < .seconds(5))
    }
}
