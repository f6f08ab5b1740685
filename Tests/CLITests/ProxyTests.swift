import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// One btsnoop record as the file holds it: the flags word and the H4 packet. Read here, not by
/// our Capture module, so what is compared does not pass through the code under test.
struct SnoopRecord: Equatable, CustomStringConvertible {
    var flags: UInt32
    var packet: [UInt8]
    /// Bit 0 of the flags: 0 host → controller, 1 controller → host (btsnoop, RFC 1761 style,
    /// as bumble/snoop.py writes it).
    var received: Bool { flags & 1 == 1 }
    var description: String { "\(received ? "<" : ">") \(packet.hex)" }

    /// Every record of a btsnoop file (header: "btsnoop\0", version 1, datalink; records:
    /// original length, included length, flags, drops, timestamp, big-endian, then the packet).
    static func read(_ path: String) throws -> (datalink: UInt32, records: [SnoopRecord]) {
        let d = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func u32(_ o: Int) -> UInt32 { d[o..<o + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        guard d.count >= 16, Array(d[0..<8]) == Array("btsnoop".utf8) + [0] else { throw HarnessError("\(path) is not btsnoop") }
        var records: [SnoopRecord] = []
        var o = 16
        while o < d.count {
            guard o + 24 <= d.count else { throw HarnessError("\(path): record header cut at offset \(o)") }
            let included = Int(u32(o + 4))
            guard o + 24 + included <= d.count else { throw HarnessError("\(path): record cut at offset \(o)") }
            records.append(SnoopRecord(flags: u32(o + 8), packet: Array(d[(o + 24)..<(o + 24 + included)])))
            o += 24 + included
        }
        return (u32(12), records)
    }
}

extension CLITests {
    /// Issue 27: `ble-hci proxy` between another host stack and a controller.
    @Suite(.serialized) struct Proxy {
        /// Starts `ble-hci proxy --host tcp:127.0.0.1:0 --controller CONTROLLER EXTRA...` and
        /// returns it with the port it listens on (its `listening` event).
        static func startProxy(controller: String, _ extra: [String] = []) async throws -> (ChildProcess, UInt16) {
            let proxy = try BleHCI.start(["proxy", "--host", "tcp:127.0.0.1:0", "--controller", controller, "--json"] + extra, lifetime: 90)
            do {
                let e = try await proxy.nextEvent("listening", timeout: 10)
                guard let spec = e["spec"] as? String, spec.hasPrefix("tcp:127.0.0.1:"),
                      let port = UInt16(spec.dropFirst("tcp:127.0.0.1:".count)), port != 0 else {
                    throw HarnessError("proxy reported \(e) (want a bound tcp:127.0.0.1:PORT)")
                }
                return (proxy, port)
            } catch {
                proxy.stop(grace: 0.5)
                throw error
            }
        }

        /// The issue's proof: a Bumble host (Tools/bumble/central.py) on one side, Bumble's
        /// controller (Tools/bumble/controllers.py) on the other, a Bumble peripheral on the
        /// second controller. The Bumble host's discovery completes through the proxy, and the
        /// proxy's capture holds what Bumble's own snooper (BUMBLE_SNOOPER, bumble/snoop.py)
        /// wrote on the host's transport, packet for packet: the same octets and flags in the
        /// same order in each direction. (Across directions, a packet in flight each way may
        /// be seen in either order at either end; per direction the order is the stream's.)
        @Test(arguments: [SIGINT, SIGTERM])
        func bumbleHostDiscoversThroughTheProxyAndTheCaptureIsBumblesOwn(_ sig: Int32) async throws {
            let dir = try TempDir()
            let ours = dir.path("proxy.btsnoop"), theirs = dir.path("bumble-host.btsnoop")
            let controllers = try BumbleControllers()
            defer { controllers.stop() }
            let peripheral = try PythonScript.start("peripheral.py", ["--transport", controllers.bumbleTransport(0), "--name", "proxied", "--timeout", "60"])
            defer { peripheral.stop(grace: 0.5) }
            let ready = try await peripheral.nextEvent("ready", timeout: 20)
            let (proxy, port) = try await Self.startProxy(controller: controllers.transport(1), ["-w", ours])
            defer { proxy.stop(grace: 0.5) }

            let central = try PythonScript.start("central.py", ["--transport", "tcp-client:127.0.0.1:\(port)", "--name", "proxied", "--timeout", "30"],
                                                 environment: ["BUMBLE_SNOOPER": "btsnoop:file:\(theirs)"])
            defer { central.stop(grace: 0.5) }
            let status = try await central.exitStatus(timeout: 40)
            #expect(status == 0, "Bumble central through the proxy: exit \(status)\n\(central.output.joined(separator: "\n"))\n\(central.stderr)")
            // Discovery completed: the services the peripheral serves (its `ready` event) are the ones the central found.
            let served = (ready["database"] as? [[String: Any]] ?? []).compactMap { $0["uuid"] as? String }
            let found = (central.events.first { $0["event"] as? String == "gatt" }?["services"] as? [[String: Any]] ?? []).compactMap { $0["uuid"] as? String }
            #expect(!served.isEmpty && found == served, "discovered \(found), the peripheral serves \(served)")

            try await waitForStderr(proxy, "host disconnected")
            #expect(kill(proxy.pid, sig) == 0)
            let proxyStatus = try await proxy.exitStatus(timeout: 5)
            #expect(proxyStatus == 0, "proxy after \(sig == SIGINT ? "SIGINT" : "SIGTERM"): exit \(proxyStatus)\n\(proxy.stderr)")
            expectPureJSON(lines: proxy.output, "proxy --json")

            let mine = try SnoopRecord.read(ours), bumble = try SnoopRecord.read(theirs)
            #expect(mine.datalink == 1002 && bumble.datalink == 1002)
            #expect(mine.records.count > 20, "only \(mine.records.count) records")
            for received in [false, true] {
                let a = mine.records.filter { $0.received == received }, b = bumble.records.filter { $0.received == received }
                #expect(a == b, "\(received ? "controller → host" : "host → controller"): \(a.count) records in the proxy's capture, \(b.count) in Bumble's; first difference: \(zip(a, b).first { $0 != $1 }.map { "\($0) vs \($1)" } ?? "length")")
            }
            // tshark reads it whole (and `dump` agrees on the count).
            _ = try await tsharkReadsWhole(ours)
        }

        /// Hostile input from the host side: bytes that are not H4 end that host's connection
        /// (said on stderr), the proxy goes on, and the next host is served. A second host while
        /// one is attached is refused. Expected answer to HCI_Reset (01 03 0c 00: opcode 0x0C03,
        /// Core v5.4 Vol 4 Part E 7.3.2, no parameters): Command Complete (event 0x0E, 7.7.14) of
        /// 4 octets: Num_HCI_Command_Packets (the controller's choice), the opcode, status 0x00.
        @Test func badBytesEndOneHostAndTheNextIsServed() async throws {
            let (proxy, port) = try await Self.startProxy(controller: "virtual")
            defer { proxy.stop(grace: 0.5) }
            let bad = try RawTCPConnection(port: port)
            try await waitForStderr(proxy, "host connected")
            try bad.send([0x07, 0xff, 0xff, 0xff])  // 0x07 is no H4 packet indicator
            try await waitForStderr(proxy, "not H4")
            bad.close()

            let host = try RawTCPConnection(port: port)
            try await waitForStderr(proxy, "host connected: 127.0.0.1", timeout: 5)
            let refused = try RawTCPConnection(port: port)
            try await waitForStderr(proxy, "refused a second host")
            refused.close()
            try host.send([0x01, 0x03, 0x0c, 0x00])
            let answer = try host.receive(exactly: 7)
            #expect(Array(answer[0..<3]) == [0x04, 0x0e, 0x04] && Array(answer[4..<7]) == [0x03, 0x0c, 0x00], "answer to HCI_Reset: \(answer.hex)")
            host.close()
            #expect(kill(proxy.pid, SIGINT) == 0)
            #expect(try await proxy.exitStatus(timeout: 5) == 0, "stderr: \(proxy.stderr)")
        }

        /// The controller going away ends the proxy with exit 3 (CLI.md: transport lost), saying so.
        @Test func lostControllerExitsThree() async throws {
            let controllers = try BumbleControllers(count: 1)
            let (proxy, _) = try await Self.startProxy(controller: controllers.transport(0))
            defer { proxy.stop(grace: 0.5) }
            controllers.stop()
            let status = try await proxy.exitStatus(timeout: 10)
            #expect(status == 3, "exit \(status) when the controller went away\n\(proxy.stderr)")
            #expect(proxy.stderr.contains("controller"), "stderr: \(proxy.stderr)")
        }

        @Test(arguments: [
            ["proxy", "--controller", "virtual"],
            ["proxy", "--host", "tcp:127.0.0.1:0"],
            ["proxy", "--host", "hci0", "--controller", "virtual"],
            ["proxy", "--host", "tcp:127.0.0.1:0", "--controller", "nonsense"],
            ["-t", "virtual", "proxy", "--host", "tcp:127.0.0.1:0", "--controller", "virtual"],
        ])
        func usageErrors(_ args: [String]) async throws {
            let r = try await BleHCI.run(args)
            expectStatus(r, 2, "ble-hci \(args.joined(separator: " "))")
            #expect(r.stderr.contains("proxy --help"), "stderr: \(r.stderr)")
        }
    }
}
