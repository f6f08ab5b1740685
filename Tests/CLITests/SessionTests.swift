import Foundation
import Testing
import TestSupport

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


/// tmux on a socket of its own, every call through a python3 that empties the signal mask
/// first: tmux started from the test runner would inherit its blocked signals (SIGCHLD among
/// them) and its server would hang.
struct Tmux {
    let socket = "ble-hci-test-\(UUID().uuidString.prefix(8))"
    /// (tmux is run as python's child, not exec'd in its place: exec'd straight from the test's
    /// Process, the first client returned only when its server ended.)
    static let unblock = "import signal, subprocess, sys; signal.pthread_sigmask(signal.SIG_SETMASK, []); sys.exit(subprocess.run(['tmux'] + sys.argv[1:]).returncode)"

    @discardableResult
    func run(_ arguments: [String]) async throws -> [String] {
        let r = try await runTool("/usr/bin/python3", ["-c", Self.unblock, "-L", socket] + arguments, timeout: 10)
        guard r.status == 0 else { throw HarnessError("tmux \(arguments.joined(separator: " ")): exit \(r.status): \(r.stderr)") }
        return r.stdout
    }

    /// Types `keys` (tmux key names: "Enter", "Tab", "C-c"...; other words literally).
    func send(_ keys: String...) async throws { try await run(["send-keys", "-t", "t"] + keys) }
    /// Types `text` literally.
    func type(_ text: String) async throws { try await run(["send-keys", "-t", "t", "-l", "--", text]) }
    /// The pane's lines, trailing blanks cut.
    func pane() async throws -> [String] {
        try await run(["capture-pane", "-p", "-t", "t", "-S", "-200"]).map { String($0.reversed().drop { $0 == " " }.reversed()) }
    }
    /// Waits until the pane satisfies `condition`.
    func waitFor(_ what: String, timeout: Duration = .seconds(15), _ condition: @escaping ([String]) -> Bool) async throws {
        var last: [String] = []
        try await eventually("\(what); the pane:\n\(last.filter { !$0.isEmpty }.joined(separator: "\n"))", timeout: timeout) {
            last = try await pane()
            return condition(last)
        }
    }
    func kill() async { _ = try? await run(["kill-server"]) }
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
    try await session.until("the answer to request \(id); stdout:\n\(session.output.suffix(30).joined(separator: "\n"))\nstderr:\n\(session.stderr.suffix(3000))",
                            timeout: timeout) {
        found = sessionLines(session).first { line in sameID(line["id"], id) && (line["done"] != nil || line["error"] != nil) }
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
            try await session.until("3 notifications of request 8", timeout: .seconds(10)) { events(session, 8, "notification").count >= 3 }
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
            try session.send(Data([0x7B, 0x22, 0x69, 0x64, 0x22, 0x3A, 0xFF, 0xFE, 0x7D, 0x0A]))  // {"id":<bad UTF-8>}
            try session.send(#"{"id":20,"command":"read","args":[{"uuid":"2a19"}]}"# + "\n")
            try session.send(#"{"id":21,"command":""}"# + "\n")
            try session.send(#"{"id":22,"line":"read 2a19","color":"red"}"# + "\n")
            try session.send(#"{"id":23,"line":"write 2a19=zz","link":"bumble-b"}"# + "\n")
            #expect((try await answer(session, 20))["error"] as? String == "\"args\"[0] must be a string or a number, got an object")
            #expect((try await answer(session, 21))["error"] as? String == "\"command\" is empty")
            #expect((try await answer(session, 22))["error"] as? String == "unknown key \"color\" (a request has id, command, args, link, or id, line, link)")
            #expect((try await answer(session, 23))["exit"] as? Int == 2)

            // Many requests at once (more than the 32 that run together), on both links.
            let many = 100..<140
            try session.send(many.map { #"{"id":\#($0),"line":"read 2a00","link":"\#($0 % 2 == 0 ? "bumble-a" : "bumble-b")"}"# }.joined(separator: "\n") + "\n")
            for id in many {
                #expect(try await answer(session, id, timeout: .seconds(30))["done"] as? Bool == true, "request \(id)")
                #expect(events(session, id, "read").first?["value"] as? String == hexOf(id % 2 == 0 ? "bumble-a" : "bumble-b"), "request \(id)")
            }

            let dir = try TempDir()
            let capture = dir.path("session.pcap")
            try session.send(#"{"id":16,"command":"capture","args":[""# + capture + #""]}"# + "\n")
            #expect(try await answer(session, 16)["done"] as? Bool == true)
            try session.send(#"{"id":15,"line":"read 2a19","link":"bumble-b"}"# + "\n")
            #expect(try await answer(session, 15)["done"] as? Bool == true, "the session still answers after bad requests")
            try session.send(#"{"id":17,"line":"capture off"}"# + "\n")
            #expect(try await answer(session, 17)["done"] as? Bool == true)
            // tshark decodes what `capture` recorded: the Read Response (0x0b, Core v5.4 Vol 3
            // Part F 3.4.4.4) carrying Bumble's Battery Level.
            let rows = try Tshark.fields(capture, ["btatt.opcode", "btatt.value"])
            #expect(rows.contains { $0.first == "0x0b" && $0.dropFirst().first == "64" }, "\(rows)")

            // Pairing: Just Works with Bumble (its PairingConfig defaults: Secure Connections, no
            // MITM, bonding), then its ...def4, which needs encryption, reads "secret".
            try session.send(#"{"id":18,"line":"pair","link":"bumble-b"}"# + "\n")
            #expect(try await answer(session, 18, timeout: .seconds(30))["done"] as? Bool == true)
            let paired = try #require(events(session, 18, "paired").first, "\(sessionLines(session).filter { sameID($0["id"], 18) })")
            #expect(paired["method"] as? String == "justWorks")
            #expect(paired["secureConnections"] as? Bool == true)
            try session.send(#"{"id":19,"line":"read 12345678-1234-5678-1234-56789abcdef4","link":"bumble-b"}"# + "\n")
            #expect(try await answer(session, 19)["done"] as? Bool == true)
            #expect(events(session, 19, "read").first?["value"] as? String == hexOf("secret"))
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
            for id: Any in [1, "b", 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16, 17, 18, 19] {
                let finals = sessionLines(session).filter { sameID($0["id"], id) && ($0["done"] != nil || $0["error"] != nil) }
                #expect(finals.count == 1, "request \(id): \(finals)")
            }
            #expect(session.output.allSatisfy { ChildProcess.json($0) != nil }, "stdout holds only JSON objects")

            // quit: answered last, after both links are down (Bumble sees both disconnections).
            try session.send(#"{"id":99,"line":"quit"}"# + "\n")
            #expect(try await session.exitStatus(timeout: 15) == 0)
            #expect(sessionLines(session).last.map { sameID($0["id"], 99) && $0["done"] as? Bool == true } == true)
            // Each link's disconnection is an event of the request that connected it, before quit's answer.
            #expect(events(session, 1, "disconnected").count == 1 && events(session, "b", "disconnected").count == 1,
                    "\(session.output.suffix(5))")
            _ = try await a.process.nextEvent("disconnected", timeout: 10)
            _ = try await b.process.nextEvent("disconnected", timeout: 10)
        }

        /// The shell as a person uses it, under tmux: completion of commands, addresses and
        /// UUIDs, two links, notifications printed above a half-typed line, Ctrl-C stopping a
        /// command and not the shell, Ctrl-D quitting, the history kept for the next run.
        @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"), "tmux is not installed"))
        func shellUnderTmux() async throws {
            let (controllers, specs) = try await startControllers(3)
            defer { controllers.stop(grace: 0.5) }
            let a = try await BumblePeer.start(on: specs[0], name: "bumble-a", address: "C0:11:22:33:44:0A",
                                               extra: ["--notify-count", "6", "--notify-interval", "0.3"])
            defer { a.process.stop(grace: 0.5) }
            let b = try await BumblePeer.start(on: specs[1], name: "bumble-b", address: "C0:11:22:33:44:0B")
            defer { b.process.stop(grace: 0.5) }
            let state = try TempDir()
            let tmux = Tmux()
            let shell = "XDG_STATE_HOME='\(state.url.path)' NO_COLOR=1 '\(try BleHCI.executable().path)' -t \(specs[2]) shell; echo SHELL-EXIT-$?; sleep 60"
            do {
                try await tmux.run(["new-session", "-d", "-s", "t", "-x", "200", "-y", "60", shell])
                try await tmux.waitFor("the prompt") { $0.contains("ble-hci>") }
                // Tab completes the command; a scan hears both Bumble peers.
                try await tmux.type("sc")
                try await tmux.send("Tab")
                try await tmux.waitFor("scan completed") { $0.contains("ble-hci> scan") }
                // Options complete too.
                try await tmux.type("--dur")
                try await tmux.send("Tab")
                try await tmux.waitFor("--duration completed") { $0.last { !$0.isEmpty } == "ble-hci> scan --duration" }
                try await tmux.type("1.5")
                try await tmux.send("Enter")
                try await tmux.waitFor("both advertisers listed by the scan") { lines in
                    lines.contains { $0.contains(a.address) } && lines.contains { $0.contains(b.address) } && lines.last { !$0.isEmpty } == "ble-hci>"
                }
                try await tmux.type("conn")
                try await tmux.send("Tab")
                try await tmux.waitFor("connect completed") { $0.contains("ble-hci> connect") }
                try await tmux.type("name:bumble-a")
                try await tmux.send("Enter")
                try await tmux.waitFor("the first link") { $0.contains { $0.hasPrefix("Connected to bumble-a") } }
                // Tab offers the addresses seen while scanning.
                try await tmux.type("connect C0:11:22:33:44:0")
                try await tmux.send("Tab", "Tab")
                try await tmux.waitFor("both addresses listed") { lines in
                    lines.contains { $0.contains(a.address) && $0.contains(b.address) }
                }
                try await tmux.type("B")
                try await tmux.send("Tab")
                try await tmux.waitFor("the address completed") { $0.last { !$0.isEmpty } == "ble-hci [bumble-a]> connect \(b.address)" }
                try await tmux.send("Enter")
                try await tmux.waitFor("the second link, named from its advertised name") { $0.contains { $0.hasPrefix("Connected to bumble-b") } }
                // Tab offers the selected link's UUIDs (Bumble's 2a19 Battery Level among them).
                try await tmux.type("read 2a1")
                try await tmux.send("Tab")
                try await tmux.waitFor("2a19 completed") { $0.last { !$0.isEmpty } == "ble-hci [bumble-b]> read 2a19" }
                try await tmux.send("Enter")
                try await tmux.waitFor("Battery Level read (declared 0x64)") { $0.contains { $0.hasPrefix("read 2a19") && $0.hasSuffix("(64)") } }
                // Bytes no key sends (an endless CSI, a stray escape, malformed UTF-8) are dropped.
                try await tmux.run(["send-keys", "-t", "t", "-H", "1b", "5b"] + Array(repeating: "39", count: 40)
                                   + ["7a", "1b", "21", "ff", "fe", "c3", "28", "e2", "82"])
                try await tmux.send("C-u")
                // Editing keys as the terminal sends them (escape sequences for the arrows, Home, Delete).
                try await tmux.type("xlnks")
                try await tmux.send("Left", "Left", "Left")
                try await tmux.type("i")
                try await tmux.send("Home", "DC")
                try await tmux.waitFor("the line edited") { $0.last { !$0.isEmpty } == "ble-hci [bumble-b]> links" }
                try await tmux.type(" extra words")
                try await tmux.send("C-w", "C-w", "BSpace")
                try await tmux.waitFor("words deleted") { $0.last { !$0.isEmpty } == "ble-hci [bumble-b]> links" }
                try await tmux.send("Enter")
                try await tmux.waitFor("two links") { lines in
                    lines.contains { $0.contains("bumble-a") && $0.contains(a.address) } && lines.contains { $0.hasPrefix("* bumble-b") && $0.contains(b.address) }
                }
                // Notifications print above the prompt, which keeps what is being typed.
                try await tmux.type("select bumble-a")
                try await tmux.send("Enter")
                try await tmux.type("subscribe 2a37")
                try await tmux.send("Enter")
                try await tmux.waitFor("subscribed") { $0.contains { $0.hasPrefix("subscribed to 2a37") } }
                try await tmux.type("rea")
                var sent: [String] = []
                for _ in 0..<3 { sent.append(try await a.process.nextEvent("notified", timeout: 10)["value"] as? String ?? "?") }
                try await tmux.waitFor("3 notifications above the half-typed line") { lines in
                    let shown = lines.filter { $0.contains("bumble-a notification 2a37") }
                    return shown.count >= 3 && sent.allSatisfy { v in shown.contains { $0.hasSuffix("= \(v)") } }
                        && lines.last { !$0.isEmpty } == "ble-hci [bumble-a]> rea"
                }
                try await tmux.send("C-u")
                // Ctrl-C stops a running command (a connection to nobody), not the shell.
                try await tmux.type("connect name:nobody --timeout 60")
                try await tmux.send("Enter")
                try await tmux.waitFor("scanning for nobody") { $0.contains { $0.hasPrefix("Scanning for a name containing \"nobody\"") } }
                try await tmux.send("C-c")
                try await tmux.waitFor("the command stopped", timeout: .seconds(5)) { $0.contains("(stopped)") }
                try await tmux.type("links")
                try await tmux.send("Enter")
                try await tmux.waitFor("both links still up after Ctrl-C") { lines in
                    guard let stopped = lines.lastIndex(of: "(stopped)") else { return false }
                    let after = lines[stopped...]
                    return after.contains { $0.contains("bumble-a") && $0.contains(a.address) } && after.contains { $0.contains("bumble-b") && $0.contains(b.address) }
                }
                // Ctrl-D on an empty line ends the shell; the links are disconnected.
                try await tmux.send("C-d")
                try await tmux.waitFor("the shell ended") { $0.contains("SHELL-EXIT-0") }
                _ = try await a.process.nextEvent("disconnected", timeout: 10)
                _ = try await b.process.nextEvent("disconnected", timeout: 10)
                await tmux.kill()

                // The history is there in the next run: Up brings back the last line typed.
                let history = try String(contentsOfFile: state.path("ble-hci/history"), encoding: .utf8)
                #expect(history.contains("connect name:bumble-a\n") && history.hasSuffix("links\n"), "\(history)")
                try await tmux.run(["new-session", "-d", "-s", "t", "-x", "200", "-y", "60", shell])
                try await tmux.waitFor("the prompt again") { $0.contains("ble-hci>") }
                try await tmux.send("Up")
                try await tmux.waitFor("the last line back") { $0.last { !$0.isEmpty } == "ble-hci> links" }
                try await tmux.send("Up")
                try await tmux.waitFor("the line before") { $0.last { !$0.isEmpty }?.hasPrefix("ble-hci> connect name:nobody") == true }
                try await tmux.send("C-u", "C-d")
                try await tmux.waitFor("the second shell ended") { $0.contains("SHELL-EXIT-0") }
            } catch {
                await tmux.kill()
                throw error
            }
            await tmux.kill()
        }

        /// The shell asks a pairing's question at a prompt of its own while `pair` runs: the
        /// peripheral (--io display) shows the passkey 024680, the shell (--io keyboard) asks
        /// for it (Passkey Entry, Core v5.4 Vol 3 Part H 2.3.5.3) and the typed digits pair; the
        /// link is then authenticated, so ff02 reads "authenticated" (CLI.md secure profile).
        @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"), "tmux is not installed"))
        func shellPromptsForThePasskey() async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            let state = try TempDir()
            let peripheral = try BleHCI.start(["-t", specs[0], "peripheral", "--profile", "secure", "--name", "shows", "--io", "display",
                                               "--passkey", "024680", "--bonds", state.path("peripheral"), "--json"], lifetime: 90)
            defer { peripheral.stop(grace: 0.5) }
            _ = try await peripheral.nextEvent("advertising", timeout: 15)
            let tmux = Tmux()
            let shell = "XDG_STATE_HOME='\(state.url.path)' NO_COLOR=1 '\(try BleHCI.executable().path)' -t \(specs[1]) shell --io keyboard --bonds '\(state.path("shell"))'; echo SHELL-EXIT-$?; sleep 60"
            do {
                try await tmux.run(["new-session", "-d", "-s", "t", "-x", "200", "-y", "60", shell])
                try await tmux.waitFor("the prompt") { $0.contains("ble-hci>") }
                try await tmux.type("connect name:shows")
                try await tmux.send("Enter")
                try await tmux.waitFor("the link") { $0.contains { $0.hasPrefix("Connected to shows") } }
                try await tmux.type("pair --mitm")
                try await tmux.send("Enter")
                try await tmux.waitFor("the passkey prompt") { $0.last { !$0.isEmpty }?.hasPrefix("Passkey shown by ") == true }
                try await tmux.type("024680")
                try await tmux.send("Enter")
                try await tmux.waitFor("paired, and the prompt back") { lines in
                    lines.contains { $0.contains("paired") && $0.contains("passkey") } && lines.last { !$0.isEmpty } == "ble-hci [shows]>"
                }
                try await tmux.type("read ff02")
                try await tmux.send("Enter")
                try await tmux.waitFor("ff02 read on the authenticated link") { $0.contains { $0.hasPrefix("read ff02") && $0.contains("authenticated") } }
                // Wide characters take two columns (UAX #11): moved left over two of them, the
                // terminal's cursor is right after the prompt, where the letter typed lands.
                try await tmux.type("中文")
                try await tmux.send("Left", "Left")
                let promptColumns = "ble-hci [shows]> ".count
                try await eventually("the cursor before the wide characters, at column \(promptColumns)", timeout: .seconds(15)) {
                    try await tmux.run(["display", "-p", "-t", "t", "#{cursor_x}"]).first == String(promptColumns)
                }
                try await tmux.type("x")
                try await tmux.waitFor("x typed before the two wide characters") { $0.last { !$0.isEmpty } == "ble-hci [shows]> x中文" }
                try await tmux.send("End", "C-u")
                try await tmux.send("C-d")
                try await tmux.waitFor("the shell ended") { $0.contains("SHELL-EXIT-0") }
            } catch {
                print(try await tmux.pane().joined(separator: "\n"))
                await tmux.kill()
                throw error
            }
            await tmux.kill()
        }

        /// Both roles at once on one controller: the session holds a link to a Bumble
        /// peripheral while it serves the demo profile to a Bumble central (Tools/bumble/central.py).
        @Test func bothRolesAtOnceOnOneController() async throws {
            let (controllers, specs) = try await startControllers(3)
            defer { controllers.stop(grace: 0.5) }
            let a = try await BumblePeer.start(on: specs[0], name: "bumble-a", address: "C0:11:22:33:44:0A")
            defer { a.process.stop(grace: 0.5) }
            let session = try BleHCI.start(["-t", specs[2], "session", "--json"], lifetime: 90)
            defer { session.stop(grace: 0.5) }
            _ = try await session.nextEvent("ready", timeout: 15)
            try session.send(#"{"id":1,"line":"connect name:bumble-a"}"# + "\n")
            #expect(try await answer(session, 1)["done"] as? Bool == true)
            try session.send(#"{"id":2,"line":"serve --profile demo --name session-peer"}"# + "\n")
            #expect(try await answer(session, 2)["done"] as? Bool == true)
            #expect(events(session, 2, "advertising").first?["name"] as? String == "session-peer")

            let written = hexOf("from bumble")
            let port = specs[1].dropFirst("tcp:".count)
            let bumble = try PythonScript.start("central.py", ["--transport", "tcp-client:\(port)", "--name", "session-peer",
                                                               "--read", "fff2", "--write", "fff2=\(written)", "--subscribe", "fff1",
                                                               "--count", "2", "--timeout", "40"], lifetime: 60)
            defer { bumble.stop(grace: 0.5) }
            _ = try await bumble.nextEvent("connected", timeout: 20)
            // While the Bumble central is connected, the session's own link still answers.
            try session.send(#"{"id":3,"line":"read 2a19","link":"bumble-a"}"# + "\n")
            #expect(try await answer(session, 3)["done"] as? Bool == true)
            #expect(events(session, 3, "read").first?["value"] as? String == "64")
            #expect(try await bumble.exitStatus(timeout: 30) == 0, "central.py: \(bumble.output.joined(separator: "\n"))\n\(bumble.stderr)")
            // CLI.md's demo profile: fff2 starts as the UTF-8 text "ble-hci"; fff1 notifies the
            // current second as 2 ASCII digits.
            let reads = bumble.output.compactMap(ChildProcess.json).filter { $0["event"] as? String == "read" }
            #expect(reads.first?["value"] as? String == hexOf("ble-hci"), "\(bumble.output)")
            let ticks = bumble.output.compactMap(ChildProcess.json).filter { $0["event"] as? String == "notification" }
            #expect(ticks.count == 2 && ticks.allSatisfy { t in
                guard let v = t["value"] as? String, v.count == 4, let n = UInt16(v, radix: 16) else { return false }
                return (0x30...0x39).contains(n >> 8) && (0x30...0x39).contains(n & 0xFF)
            }, "\(ticks)")
            try await session.until("the session saw the Bumble central's write and its disconnection") {
                !events(session, 2, "written").isEmpty && !events(session, 2, "centralDisconnected").isEmpty
            }
            #expect(events(session, 2, "written").first?["value"] as? String == written)
            #expect(events(session, 2, "written").first?["uuid"] as? String == "fff2")
            #expect(!events(session, 2, "centralConnected").isEmpty)
            // SIGTERM ends the session as quit does: the link to Bumble is disconnected first.
            kill(session.pid, SIGTERM)
            #expect(try await session.exitStatus(timeout: 15) == 128 + SIGTERM)
            _ = try await a.process.nextEvent("disconnected", timeout: 10)
        }

        /// A session without --passkey or --yes asks: a `pairingQuestion` event, answered by the
        /// `passkey` and `confirm` requests. Bumble's central pairs with the session's secure
        /// profile. Passkey Entry (Core v5.4 Vol 3 Part H 2.3.5.3, Table 2.8: Bumble DisplayOnly,
        /// we KeyboardOnly, so we type what Bumble displays); Numeric Comparison (2.3.5.6.2, both
        /// DisplayYesNo): the number we are asked about is the one Bumble computed (g2) and shows.
        /// Both are MITM-protected, so ff02 (authenticated link required, CLI.md) reads.
        @Test(arguments: ["passkey", "comparison"]) func pairingQuestionsAreAnswered(_ method: String) async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            let io = method == "passkey" ? "keyboard" : "yesno"
            let bonds = try TempDir()
            let session = try BleHCI.start(["-t", specs[1], "session", "--json", "--io", io, "--bonds", bonds.url.path], lifetime: 90)
            defer { session.stop(grace: 0.5) }
            _ = try await session.nextEvent("ready", timeout: 15)
            try session.send(#"{"id":1,"line":"serve --profile secure --name asks"}"# + "\n")
            #expect(try await answer(session, 1)["done"] as? Bool == true)
            let port = specs[0].dropFirst("tcp:".count)
            let bumble = try PythonScript.start("central.py", ["--transport", "tcp-client:\(port)", "--name", "asks", "--pair", "--mitm",
                                                               "--io", method == "passkey" ? "display" : "yesno", "--passkey", "024680",
                                                               "--read", "ff02", "--timeout", "40"], lifetime: 60)
            defer { bumble.stop(grace: 0.5) }
            let shown = try await bumble.nextEvent("pairing", timeout: 20)
            var question: [String: Any] = [:]
            try await session.until("a pairingQuestion") {
                question = events(session, 1, "pairingQuestion").first ?? [:]
                return !question.isEmpty
            }
            if method == "passkey" {
                #expect(question["question"] as? String == "passkey")
                #expect(shown["passkey"] as? String == "024680")
                try session.send(#"{"id":2,"line":"passkey 024680"}"# + "\n")
            } else {
                #expect(question["question"] as? String == "confirm")
                #expect(question["number"] as? String == shown["number"] as? String, "Bumble shows \(shown)")
                try session.send(#"{"id":2,"command":"confirm","args":["yes"]}"# + "\n")
            }
            #expect(try await answer(session, 2)["done"] as? Bool == true)
            #expect(events(session, 2, "answered").first?["accepted"] as? Bool == true)
            #expect(try await bumble.exitStatus(timeout: 30) == 0, "central.py: \(bumble.output.joined(separator: "\n"))\n\(bumble.stderr)")
            let read = bumble.output.compactMap(ChildProcess.json).first { $0["event"] as? String == "read" }
            #expect(read?["value"] as? String == hexOf("authenticated"))
            // Nothing is asked now: an answer is refused with the reason.
            try session.send(#"{"id":3,"line":"confirm no"}"# + "\n")
            #expect((try await answer(session, 3)["error"] as? String)?.contains("no pairing asks") == true)
        }

        /// Service Changed (Core v5.4 Vol 3 Part G 7.1): from the link's first discovery on, the
        /// session subscribes to the peer's Service Changed; Bumble then adds a service at run
        /// time and indicates its range, which the session reports as Bumble gave it, and the new
        /// characteristic is found by the next command, rediscovered, not from a stale table.
        @Test func serviceChangedRefreshesTheLinksTable() async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            let a = try await BumblePeer.start(on: specs[0], name: "bumble-a", address: "C0:11:22:33:44:0A", extra: ["--add-service-after", "0.3"])
            defer { a.process.stop(grace: 0.5) }
            let session = try BleHCI.start(["-t", specs[1], "session", "--json"], lifetime: 90)
            defer { session.stop(grace: 0.5) }
            _ = try await session.nextEvent("ready", timeout: 15)
            try session.send(#"{"id":1,"line":"connect name:bumble-a"}"# + "\n")
            #expect(try await answer(session, 1)["done"] as? Bool == true)
            try session.send(#"{"id":2,"line":"read 2a38"}"# + "\n")
            #expect(try await answer(session, 2)["done"] as? Bool == true)
            #expect(try await a.process.nextEvent("subscribed", timeout: 10)["uuid"] as? String == "2a05")
            let added = try await a.process.nextEvent("serviceAdded", timeout: 10)
            var changed: [String: Any] = [:]
            try await session.until("servicesChanged reported") {
                changed = events(session, 1, "servicesChanged").first ?? [:]
                return !changed.isEmpty
            }
            #expect(changed["start"] as? Int == added["start"] as? Int && changed["end"] as? Int == added["end"] as? Int, "Bumble: \(added)")
            #expect(changed["link"] as? String == "bumble-a")
            try session.send(#"{"id":3,"line":"read 12345678-1234-5678-1234-56789abcdef8"}"# + "\n")
            #expect(try await answer(session, 3)["done"] as? Bool == true)
            let read = try #require(events(session, 3, "read").first)
            #expect(read["value"] as? String == hexOf("added"))
            #expect(read["handle"] as? Int == (added["handles"] as? [String: Int])?["12345678-1234-5678-1234-56789abcdef8"])
        }

        /// The shell with stdin not a terminal reads plain lines (no prompt, no editor) and
        /// prints human lines; end of input quits it.
        @Test func shellReadsPlainLinesWhenStdinIsNotATerminal() async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            let peer = try await BumblePeer.start(on: specs[0], name: "bumble-plain", address: "C0:11:22:33:44:0D")
            defer { peer.process.stop(grace: 0.5) }
            let shell = try BleHCI.start(["-t", specs[1], "shell"], lifetime: 60)
            defer { shell.stop(grace: 0.5) }
            try shell.send("connect name:bumble-plain\nread 2a19\nread 2a00\nfrobnicate\n")
            shell.closeInput()
            #expect(try await shell.exitStatus(timeout: 30) == 0, "\(shell.output)\n\(shell.stderr)")
            #expect(shell.output.first?.hasPrefix("Connected to bumble-plain") == true, "\(shell.output)")
            // Bumble's declared Battery Level 0x64 (the ASCII letter d) and its device name.
            #expect(shell.output.contains("read 2a19 Battery Level = \"d\" (64)"), "\(shell.output)")
            #expect(shell.output.contains("read 2a00 Device Name = \"bumble-plain\" (\(hexOf("bumble-plain")))"), "\(shell.output)")
            #expect(shell.stderr.contains("ble-hci: unknown command 'frobnicate'"), "\(shell.stderr)")
            _ = try await peer.process.nextEvent("disconnected", timeout: 10)
        }

        /// A lost controller ends the session with exit 3 (CLI.md) after a `transportLost` event.
        @Test func aLostControllerEndsTheSessionWithExitThree() async throws {
            let (controllers, specs) = try await startControllers(1)
            defer { controllers.stop(grace: 0.5) }
            let session = try BleHCI.start(["-t", specs[0], "session", "--json"], lifetime: 60)
            defer { session.stop(grace: 0.5) }
            _ = try await session.nextEvent("ready", timeout: 15)
            await controllers.stopAsync(grace: 0.5)
            #expect(try await session.exitStatus(timeout: 15) == 3, "\(session.output)\n\(session.stderr)")
            #expect(sessionLines(session).contains { $0["event"] as? String == "transportLost" }, "\(session.output)")
        }

        /// `serve --gatt FILE`: a Bumble central reads the value the file declares, and its write
        /// reaches the session as a `written` event.
        @Test func serveAGATTFile() async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            let dir = try TempDir()
            let table = dir.path("table.json")
            let declared = hexOf("declared in the file")
            try #"{"services":[{"uuid":"abc0","characteristics":[{"uuid":"abc1","properties":["read","write"],"value":"\#(declared)"}]}]}"#
                .write(toFile: table, atomically: true, encoding: .utf8)
            let session = try BleHCI.start(["-t", specs[0], "session", "--json"], lifetime: 60)
            defer { session.stop(grace: 0.5) }
            _ = try await session.nextEvent("ready", timeout: 15)
            try session.send(#"{"id":1,"command":"serve","args":["--gatt",""# + table + #"","--name","gatt-peer"]}"# + "\n")
            #expect(try await answer(session, 1)["done"] as? Bool == true)
            #expect(events(session, 1, "advertising").first?["profile"] as? String == "gatt")
            let port = specs[1].dropFirst("tcp:".count)
            let written = hexOf("new")
            let bumble = try PythonScript.start("central.py", ["--transport", "tcp-client:\(port)", "--name", "gatt-peer", "--read", "abc1",
                                                               "--write", "abc1=\(written)", "--read", "abc1", "--timeout", "30"], lifetime: 45)
            defer { bumble.stop(grace: 0.5) }
            #expect(try await bumble.exitStatus(timeout: 30) == 0, "central.py: \(bumble.output.joined(separator: "\n"))\n\(bumble.stderr)")
            let reads = bumble.output.compactMap(ChildProcess.json).filter { $0["event"] as? String == "read" }.compactMap { $0["value"] as? String }
            #expect(reads == [declared, written], "\(bumble.output)")
            try await session.until("the session saw the write") { !events(session, 1, "written").isEmpty }
            #expect(events(session, 1, "written").first?["value"] as? String == written)
            try session.send(#"{"id":2,"line":"quit"}"# + "\n")
            #expect(try await session.exitStatus(timeout: 15) == 0)
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
