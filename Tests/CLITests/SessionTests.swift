import Foundation
import Testing
import TestSupport

/// `ble-hci controllers` with `count` listeners on kernel-picked ports (one virtual link).
func startControllers(_ count: Int) async throws -> (process: ChildProcess, specs: [String]) {
    let controllers = try BleHCI.start(["controllers", "--json", "--airtime", "off"]
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

/// A Bumble peripheral (Tools/bumble/peripheral.py) on one of our controllers, and its `ready`
/// event: its address and the handles of its GATT database as Bumble declared them.
struct BumblePeer {
    let process: ChildProcess
    let name: String
    let address: String
    let handles: [String: Int]

    static func start(on spec: String, name: String, address: String, extra: [String] = []) async throws -> BumblePeer {
        let port = spec.dropFirst("tcp:".count)
        let p = try PythonScript.start("peripheral.py", ["--transport", "tcp-client:\(port)", "--name", name, "--address", address,
                                                         "--timeout", "120"] + extra, lifetime: 150)
        let ready: [String: Any]
        do { ready = try await p.nextEvent("ready", timeout: 30) } catch {
            p.stop(grace: 0.5)
            throw error
        }
        return BumblePeer(process: p, name: name, address: ready["address"] as? String ?? address,
                          handles: ready["handles"] as? [String: Int] ?? [:])
    }
}

/// The JSON session's lines so far, parsed.
private func sessionLines(_ session: ChildProcess) -> [[String: Any]] { session.output.compactMap(ChildProcess.json) }

private func sameID(_ a: Any?, _ b: Any) -> Bool {
    switch (a, b) {
    case let (x as Int, y as Int): x == y
    case let (x as String, y as String): x == y
    default: false
    }
}

/// Waits for the final answer of request `id` ({"id":..,"done":true} or {"id":..,"error":..}).
private func answer(_ session: ChildProcess, _ id: Any, timeout: Duration = .seconds(20)) async throws -> [String: Any] {
    var found: [String: Any]? = nil
    try await eventually("the answer to request \(id); stdout:\n\(session.output.suffix(30).joined(separator: "\n"))\nstderr:\n\(session.stderr.suffix(3000))",
                         timeout: timeout) {
        found = sessionLines(session).first { sameID($0["id"], id) && ($0["done"] != nil || $0["error"] != nil) }
        return found != nil
    }
    return found!
}

/// The events request `id` caused so far.
private func events(_ session: ChildProcess, _ id: Any, _ name: String) -> [[String: Any]] {
    sessionLines(session).filter { sameID($0["id"], id) && $0["event"] as? String == name }
}

extension CLITests {
    /// Issue 27: `ble-hci session --json` and `ble-hci shell`, against Bumble peripherals on
    /// `ble-hci controllers` (values and handles as Bumble declares them in Tools/bumble/peripheral.py).
    @Suite(.serialized) struct Session {
        @Test func jsonSessionWithTwoBumblePeripherals() async throws {
            let (controllers, specs) = try await startControllers(3)
            defer { controllers.stop(grace: 0.5) }
            let a = try await BumblePeer.start(on: specs[0], name: "bumble-a", address: "C0:11:22:33:44:0A",
                                               extra: ["--notify-count", "3", "--notify-interval", "0.2"])
            defer { a.process.stop(grace: 0.5) }
            let b = try await BumblePeer.start(on: specs[1], name: "bumble-b", address: "C0:11:22:33:44:0B")
            defer { b.process.stop(grace: 0.5) }
            let session = try BleHCI.start(["-t", specs[2], "session", "--json"], lifetime: 120)
            defer { session.stop(grace: 0.5) }
            _ = try await session.nextEvent("ready", timeout: 15)

            // Two links, one after the other, each named by the peer's advertised name.
            try session.send(#"{"id":1,"line":"connect name:bumble-a"}"# + "\n")
            #expect(try await answer(session, 1)["done"] as? Bool == true)
            try session.send(#"{"id":"b","command":"connect","args":["name:bumble-b"]}"# + "\n")
            #expect(try await answer(session, "b")["done"] as? Bool == true)
            let connectedA = try #require(events(session, 1, "connected").first)
            let connectedB = try #require(events(session, "b", "connected").first)
            #expect(connectedA["link"] as? String == "bumble-a")
            #expect(connectedA["address"] as? String == a.address)
            #expect(connectedB["link"] as? String == "bumble-b")
            #expect(connectedB["address"] as? String == b.address)

            // Requests at once, on both links: each peer's Device Name (Bumble's GAP service holds
            // the name it was given), its Battery Level (declared 0x64), Body Sensor Location (0x01).
            let batteryHandle = try #require(b.handles["2a19"], "Bumble's handles: \(b.handles)")
            try session.send([
                #"{"id":3,"command":"read","args":["2a00"],"link":"bumble-a"}"#,
                #"{"id":4,"command":"read","args":["2a00"],"link":"bumble-b"}"#,
                #"{"id":5,"line":"read 2a19","link":"bumble-b"}"#,
                #"{"id":6,"line":"read 2a38","link":"bumble-a"}"#,
                #"{"id":7,"line":"links"}"#,
            ].joined(separator: "\n") + "\n")
            for id in 3...7 { #expect(try await answer(session, id)["done"] as? Bool == true, "request \(id)") }
            #expect(events(session, 3, "read").first?["value"] as? String == hexOf("bumble-a"))
            #expect(events(session, 3, "read").first?["link"] as? String == "bumble-a")
            #expect(events(session, 4, "read").first?["value"] as? String == hexOf("bumble-b"))
            let battery = try #require(events(session, 5, "read").first)
            #expect(battery["value"] as? String == "64")
            #expect(battery["handle"] as? Int == batteryHandle)
            #expect(events(session, 6, "read").first?["value"] as? String == "01")
            let links = events(session, 7, "link")
            #expect(Set(links.compactMap { $0["link"] as? String }) == ["bumble-a", "bumble-b"], "\(links)")
            #expect(Set(links.compactMap { $0["address"] as? String }) == [a.address, b.address])

            // A subscription: Bumble's notifications arrive as events of the subscribe request.
            try session.send(#"{"id":8,"line":"subscribe 2a37","link":"bumble-a"}"# + "\n")
            #expect(try await answer(session, 8)["done"] as? Bool == true)
            var sent: [String] = []
            for _ in 0..<3 { sent.append(try await a.process.nextEvent("notified", timeout: 10)["value"] as? String ?? "?") }
            try await eventually("3 notifications of request 8", timeout: .seconds(10)) { events(session, 8, "notification").count >= 3 }
            let notified = events(session, 8, "notification")
            #expect(notified.compactMap { $0["value"] as? String } == sent)
            #expect(notified.allSatisfy { $0["uuid"] as? String == "2a37" && $0["link"] as? String == "bumble-a" })

            // Bad requests: each answered with an error naming the cause; the session goes on.
            try session.send("this is not JSON\n")
            try session.send(#"{"id":9}"# + "\n")
            try session.send(#"{"id":10,"command":"frobnicate"}"# + "\n")
            try session.send(#"{"id":11,"line":"read 0x0fff","link":"bumble-a"}"# + "\n")
            try session.send(#"{"id":12,"line":"read 2a19","link":"nobody"}"# + "\n")
            try session.send(#"{"id":13,"args":"#  + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}\n")
            try session.send(#"{"id":14,"line":""# + String(repeating: "x", count: 70_000) + "\"}\n")
            try session.send(#"{"id":true,"line":"links"}"# + "\n")
            try session.send(#"{"id":15,"line":"read 2a19","link":"bumble-b"}"# + "\n")
            #expect(try await answer(session, 15)["done"] as? Bool == true, "the session still answers after bad requests")
            let anonymous = sessionLines(session).filter { $0["id"] == nil && $0["error"] != nil }.compactMap { $0["error"] as? String }
            #expect(anonymous.contains { $0.hasPrefix("not JSON") }, "\(anonymous)")
            #expect(anonymous.contains { $0.contains("nested") }, "\(anonymous)")
            #expect(anonymous.contains { $0.contains("65536") }, "\(anonymous)")
            #expect(anonymous.contains { $0.contains("\"id\" must be a string or an integer") }, "\(anonymous)")
            #expect((try await answer(session, 9))["error"] as? String == "a request needs \"command\" (with \"args\") or \"line\"")
            let unknown = try await answer(session, 10)
            #expect((unknown["error"] as? String)?.contains("unknown command 'frobnicate'") == true, "\(unknown)")
            #expect(unknown["exit"] as? Int == 2)
            // Bumble answers a read of a handle it does not have with Invalid Handle (0x01,
            // Core v5.4 Vol 3 Part F 3.4.1.1, Table 3.4).
            let invalid = try await answer(session, 11)
            #expect(invalid["exit"] as? Int == 1)
            #expect(events(session, 11, "error").first?["att"] as? String == "0x01", "\(sessionLines(session).filter { sameID($0["id"], 11) })")
            #expect((try await answer(session, 12))["error"] as? String == "no link 'nobody'; up: bumble-a, bumble-b")

            // Every request got exactly one final answer.
            for id: Any in [1, "b", 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15] {
                let finals = sessionLines(session).filter { sameID($0["id"], id) && ($0["done"] != nil || $0["error"] != nil) }
                #expect(finals.count == 1, "request \(id): \(finals)")
            }
            #expect(session.output.allSatisfy { ChildProcess.json($0) != nil }, "stdout holds only JSON objects")

            // quit: answered last, after both links are down (Bumble sees both disconnections).
            try session.send(#"{"id":99,"line":"quit"}"# + "\n")
            #expect(try await session.exitStatus(timeout: 15) == 0)
            #expect(sessionLines(session).last.map { sameID($0["id"], 99) && $0["done"] as? Bool == true } == true)
            _ = try await a.process.nextEvent("disconnected", timeout: 10)
            _ = try await b.process.nextEvent("disconnected", timeout: 10)
        }

        /// The Python example driver (Tools/examples/session.py) against a Bumble peripheral.
        @Test func pythonExampleDriver() async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            let peer = try await BumblePeer.start(on: specs[0], name: "bumble-py", address: "C0:11:22:33:44:0C")
            defer { peer.process.stop(grace: 0.5) }
            let python = try Repo.requireVenvPython()
            let driver = try ChildProcess(executable: python, arguments: [Repo.root.appendingPathComponent("Tools/examples/session.py").path,
                                                                         "--ble-hci", try BleHCI.executable().path, "--transport", specs[1],
                                                                         "name:bumble-py", "2a19"], lifetime: 60)
            defer { driver.stop(grace: 0.5) }
            let status = try await driver.exitStatus(timeout: 40)
            #expect(status == 0, "session.py: \(driver.output.joined(separator: "\n"))\n\(driver.stderr)")
            // It prints what it read: Bumble's declared Battery Level (0x64).
            #expect(driver.output.contains("2a19 = 64"), "\(driver.output)")
        }
    }
}
