import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Waits until the child's stderr contains `text` (progress lines go there).
func waitForStderr(_ child: ChildProcess, _ text: String, timeout: TimeInterval = 10) async throws {
    let start = Date()
    while true {
        let seen = child.progress.value  // (before the text: output that comes meanwhile wakes the wait)
        if child.stderr.contains(text) { return }
        let left = timeout - Date().timeIntervalSince(start)
        // More stderr, or the child's end.
        guard !seen.exited, left > 0, (try? await child.progress.until("stderr", timeout: .seconds(left), {
            $0.stderrOctets > seen.stderrOctets || $0.exited
        })) != nil else {
            if child.stderr.contains(text) { return }
            throw HarnessError("no '\(text)' on stderr within \(timeout) s; stderr:\n\(child.stderr)\nstdout:\n\(child.output.joined(separator: "\n"))")
        }
    }
}

/// tshark reads `path` to its end without complaint; returns the HCI command opcodes it decoded.
func tsharkReadsWhole(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) async throws -> Set<String> {
    let t = try await runTool(tshark, ["-n", "-r", path, "-T", "fields", "-e", "bthci_cmd.opcode"])
    #expect(t.status == 0, "tshark -r \(path): exit \(t.status)\n\(t.stderr)", sourceLocation: sourceLocation)
    #expect(!t.stderr.contains("cut short") && !t.stderr.contains("appears to be damaged"), "tshark: \(t.stderr)", sourceLocation: sourceLocation)
    let d = try await BleHCI.run(["dump", path, "--json"], timeout: 30)
    expectStatus(d, 0, "ble-hci dump \(path)", sourceLocation: sourceLocation)
    #expect(d.stdout.count == t.stdout.count, "dump printed \(d.stdout.count) packets, tshark read \(t.stdout.count)", sourceLocation: sourceLocation)
    return Set(t.stdout.filter { !$0.isEmpty }.map { $0.lowercased() })
}

extension CLITests {
    /// Issue 16 item 1: SIGINT and SIGTERM end every phase of `central` at once, with the
    /// capture complete, and the exit status a shell gives a signal's end (128 + signal:
    /// 130 for SIGINT, 143 for SIGTERM). A subscription with no --count/--duration runs until
    /// Ctrl-C, so there the signal is the requested end: exit 0.
    @Suite(.serialized) struct Signals {
        static let signals: [Int32] = [SIGINT, SIGTERM]

        static func signalName(_ s: Int32) -> String { s == SIGINT ? "SIGINT" : "SIGTERM" }

        @Test(arguments: signals)
        func signalWhileScanningForTheTarget(_ sig: Int32) async throws {
            let dir = try TempDir()
            let path = dir.path("scanning.btsnoop")
            try await withRig(profile: nil) { rig in
                let central = try BleHCI.start(["-t", rig.centralSpec, "-w", path, "central", "name:nobody-here", "--timeout", "30", "--json"], lifetime: 40)
                defer { central.stop(grace: 0.5) }
                // Printed once LE Set Scan Enable has completed: the controller scans.
                try await waitForStderr(central, "Scanning for")
                let sent = Date()
                #expect(kill(central.pid, sig) == 0)
                let status = try await central.exitStatus(timeout: 5)
                #expect(status == 128 + sig, "exit \(status) after \(Self.signalName(sig)), want \(128 + sig)\n\(central.stderr)")
                #expect(Date().timeIntervalSince(sent) < 3, "took \(Date().timeIntervalSince(sent)) s to stop")
                #expect(central.stderr.contains("interrupted by \(Self.signalName(sig))"), "stderr: \(central.stderr)")
                expectPureJSON(lines: central.output, "central --json")
            }
            // LE Set Scan Enable (Core v5.4 Vol 4 Part E 7.8.11: OGF 0x08, OCF 0x000C) or its extended form (0x2042).
            let opcodes = try await tsharkReadsWhole(path)
            #expect(opcodes.contains("0x200c") || opcodes.contains("0x2042"), "no scan enable in the capture: \(opcodes.sorted())")
        }

        @Test(arguments: signals)
        func signalWhileConnecting(_ sig: Int32) async throws {
            let dir = try TempDir()
            let path = dir.path("connecting.pcap")
            try await withRig(profile: nil) { rig in
                let central = try BleHCI.start(["-t", rig.centralSpec, "-w", path, "--trace=hci", "central", "F0:00:00:00:00:01/public", "--timeout", "30"], lifetime: 40)
                defer { central.stop(grace: 0.5) }
                // The controller has taken the LE (Extended) Create Connection: its Command
                // Status, as the live trace prints it (Core v5.4 Vol 4 Part E 7.8.12, 7.8.66).
                try await central.until("the Command Status of LE Create Connection on the trace") {
                    central.output.contains { $0.contains("Command Status (LE ") && $0.hasSuffix("Create Connection)") }
                }
                let sent = Date()
                #expect(kill(central.pid, sig) == 0)
                let status = try await central.exitStatus(timeout: 5)
                #expect(status == 128 + sig, "exit \(status) after \(Self.signalName(sig)), want \(128 + sig)\n\(central.stderr)")
                #expect(Date().timeIntervalSince(sent) < 3, "took \(Date().timeIntervalSince(sent)) s to stop")
                #expect(central.stderr.contains("interrupted by \(Self.signalName(sig))"), "stderr: \(central.stderr)")
            }
            // LE Create Connection (Core v5.4 Vol 4 Part E 7.8.12, opcode 0x200D) or LE Extended Create Connection (7.8.66, 0x2043).
            let opcodes = try await tsharkReadsWhole(path)
            #expect(opcodes.contains("0x200d") || opcodes.contains("0x2043"), "no create connection in the capture: \(opcodes.sorted())")
        }

        @Test(arguments: signals)
        func signalWhileConnectedDisconnectsAndExits(_ sig: Int32) async throws {
            let dir = try TempDir()
            let path = dir.path("connected.btsnoop")
            try await withRig { rig in
                let central = try BleHCI.start(["-t", rig.centralSpec, "-w", path, "central", "name:ble-hci", "--subscribe", "fff1", "--count", "100", "--json"], lifetime: 40)
                defer { central.stop(grace: 0.5) }
                _ = try await central.nextEvent("notification", timeout: 15)
                #expect(kill(central.pid, sig) == 0)
                let status = try await central.exitStatus(timeout: 8)
                #expect(status == 128 + sig, "exit \(status) after \(Self.signalName(sig)), want \(128 + sig)\n\(central.stderr)")
                // Disconnected by this host: Connection Terminated By Local Host (Core v5.4 Vol 1 Part F 2.22, 0x16).
                let disconnected = central.events.filter { $0["event"] as? String == "disconnected" }
                #expect(disconnected.first?["reason"] as? String == "0x16", "events: \(central.output)")
                expectPureJSON(lines: central.output, "central --json")
            }
            // HCI Disconnect (Core v5.4 Vol 4 Part E 7.1.6, opcode 0x0406) was sent and recorded.
            let opcodes = try await tsharkReadsWhole(path)
            #expect(opcodes.contains("0x0406"), "no Disconnect command in the capture: \(opcodes.sorted())")
        }

        /// scan and peripheral: without --duration a signal is their requested end (exit 0);
        /// with --duration it cuts them short (128 + signal).
        @Test(arguments: [["scan"], ["scan", "--duration", "30"], ["peripheral"], ["peripheral", "--duration", "30"]])
        func signalEndsScanAndPeripheral(_ args: [String]) async throws {
            try await withRig(profile: nil) { rig in
                let child = try BleHCI.start(["-t", args[0] == "scan" ? rig.centralSpec : rig.peripheralSpec] + args + ["--json"], lifetime: 40)
                defer { child.stop(grace: 0.5) }
                if args[0] == "scan" { try await waitForStderr(child, "Scanning (active)") } else { _ = try await child.nextEvent("advertising", timeout: 10) }
                #expect(kill(child.pid, SIGINT) == 0)
                let status = try await child.exitStatus(timeout: 5)
                #expect(status == (args.count > 1 ? 130 : 0), "\(args): exit \(status)\n\(child.stderr)")
            }
        }

        @Test func signalIsTheEndOfAnOpenEndedSubscription() async throws {
            try await withRig { rig in
                let central = try BleHCI.start(["-t", rig.centralSpec, "central", "name:ble-hci", "--subscribe", "fff1", "--json"], lifetime: 40)
                defer { central.stop(grace: 0.5) }
                _ = try await central.nextEvent("notification", timeout: 15)
                #expect(kill(central.pid, SIGTERM) == 0)
                let status = try await central.exitStatus(timeout: 8)
                #expect(status == 0, "exit \(status) after SIGTERM ending an open-ended subscription\n\(central.stderr)")
                #expect(central.events.last?["event"] as? String == "disconnected", "events: \(central.output)")
            }
        }
    }

    /// Issue 16 items 2 and 8: failures say what happened, and only what happened.
    @Suite(.serialized) struct Failures {
        /// The controllers die under a subscribed central: exit 3 with the reason, and no
        /// `disconnected` event (no Disconnection Complete was received).
        @Test func transportLostUnderASubscribedCentralExitsThree() async throws {
            try await withRig { rig in
                let central = try BleHCI.start(["-t", rig.centralSpec, "central", "name:ble-hci", "--subscribe", "fff1", "--json"], lifetime: 40)
                defer { central.stop(grace: 0.5) }
                _ = try await central.nextEvent("notification", timeout: 15)
                #expect(kill(rig.controllers.pid, SIGKILL) == 0)
                let status = try await central.exitStatus(timeout: 8)
                #expect(status == 3, "exit \(status) after losing the controller, want 3\n\(central.stderr)")
                #expect(central.stderr.contains("lost"), "stderr does not say the transport was lost: \(central.stderr)")
                #expect(central.events.allSatisfy { $0["event"] as? String != "disconnected" }, "invented a disconnection: \(central.output)")
                expectPureJSON(lines: central.output, "central --json")
            }
        }

        /// A failed name: search lists the advertisers it saw, with their address types.
        @Test func failedNameSearchListsWhatItSaw() async throws {
            try await withRig { rig in
                let address = try #require(rig.advertising["address"] as? String)
                let r = try await rig.central(["central", "name:nobody-here", "--timeout", "2", "--json"])
                expectStatus(r, 1, "central name:nobody-here")
                #expect(r.stderr.contains("Scanning for"), "no progress on stderr: \(r.stderr)")
                #expect(r.stderr.contains("\(address)/public \"ble-hci\""), "stderr does not list the demo peripheral: \(r.stderr)")
                expectPureJSON(lines: r.stdout, "central --json")
            }
        }

        /// The wrong address type: the connection attempt says which address it tries, and the
        /// failure suggests the other type.
        @Test func wrongAddressTypeSuggestsTheOther() async throws {
            try await withRig { rig in
                let address = try #require(rig.advertising["address"] as? String)
                let r = try await rig.central(["central", "\(address)/random", "--timeout", "2"])
                expectStatus(r, 1, "central \(address)/random")
                #expect(r.stderr.contains("Connecting to \(address)/random"), "stderr: \(r.stderr)")
                #expect(r.stderr.contains("\(address)/public"), "no hint to try /public: \(r.stderr)")
            }
        }

        /// `name:` matches ignoring case.
        @Test func nameMatchIgnoresCase() async throws {
            try await withRig { rig in
                let r = try await rig.central(["central", "name:BLE-HCI", "--read", "fff2", "--json"])
                expectStatus(r, 0, "central name:BLE-HCI")
                #expect(r.events("read").first?["value"] as? String == hexOf("ble-hci"))
            }
        }
    }
}
