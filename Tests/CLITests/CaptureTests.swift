import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

extension CLITests {
    /// Capture files the CLI writes (issue 2): `demo -w`, and files left by a SIGKILLed process.
    @Suite(.serialized) struct Captures {
        /// tshark's frame count and the `ble-hci dump --json` line count of `path`.
        static func frameCounts(_ path: String) async throws -> (tshark: Int, dump: Int, dumpLines: [String]) {
            let t = try await runTool(tshark, ["-n", "-r", path, "-T", "fields", "-e", "frame.number"])
            #expect(t.status == 0, "tshark -r \(path): exit \(t.status)\n\(t.stderr)")
            let d = try await BleHCI.run(["dump", path, "--json"], timeout: 30)
            expectStatus(d, 0, "ble-hci dump \(path) --json")
            let frames = t.stdout.filter { !$0.isEmpty }
            #expect(frames == frames.indices.map { String($0 + 1) }, "tshark frame numbers are not 1...n")
            return (frames.count, d.stdout.count, d.stdout)
        }

        @Test(arguments: ["demo.pcap", "demo.btsnoop", "demo.pcapng"])
        func demoCaptureIsReadByTsharkAndDump(_ name: String) async throws {
            let dir = try TempDir()
            let path = dir.path(name)
            let start = Date()
            let r = try await BleHCI.run(["demo", "-w", path], timeout: 15)
            expectStatus(r, 0, "ble-hci demo -w \(name)")
            #expect(Date().timeIntervalSince(start) < 15)
            #expect(FileManager.default.fileExists(atPath: path))

            let magic = try #require(FileHandle(forReadingAtPath: path)?.readData(ofLength: 8))
            if name.hasSuffix(".pcapng") {
                // A Section Header Block (type 0x0a0d0d0a), little-endian byte-order magic 0x1a2b3c4d.
                #expect(Array(magic.prefix(4)) == [0x0a, 0x0d, 0x0d, 0x0a], "not a pcapng file: \(Array(magic).hex)")
            } else if name.hasSuffix(".pcap") {
                #expect(Array(magic.prefix(4)) == [0xd4, 0xc3, 0xb2, 0xa1] || Array(magic.prefix(4)) == [0xa1, 0xb2, 0xc3, 0xd4],
                        "not a pcap file: \(Array(magic).hex)")
            } else {
                #expect(Array(magic) == Array("btsnoop\0".utf8), "not a btsnoop file: \(Array(magic).hex)")
            }

            let att = try await runTool(tshark, ["-n", "-r", path, "-Y", "btatt", "-T", "fields", "-e", "btatt.opcode"])
            #expect(att.status == 0, "tshark: \(att.stderr)")
            let opcodes = Set(att.stdout.flatMap { $0.split(separator: ",").map { $0.lowercased() } })
            for (code, what) in [("0x0a", "Read Request"), ("0x12", "Write Request"), ("0x1b", "Handle Value Notification"),
                                 ("0x01", "Error Response"), ("0x02", "Exchange MTU Request"), ("0x10", "Read By Group Type Request")] {
                #expect(opcodes.contains(code), "tshark finds no \(what) (\(code)) in \(name); opcodes: \(opcodes.sorted())")
            }
            // The refused write and read are there as Error Responses with their codes.
            let errors = try await runTool(tshark, ["-n", "-r", path, "-Y", "btatt.opcode == 0x01", "-T", "fields", "-e", "btatt.error_code"])
            let codes = Set(errors.stdout.map { $0.lowercased() })
            #expect(codes.contains("0x03") && codes.contains("0x02"), "error codes: \(codes.sorted())")

            let counts = try await Self.frameCounts(path)
            #expect(counts.tshark > 20)
            #expect(counts.dump == counts.tshark, "dump printed \(counts.dump) lines, tshark read \(counts.tshark) frames")
            expectIndexedJSON(counts.dumpLines, name)
        }

        /// A process killed with SIGKILL in the middle of a run leaves a file that tshark and
        /// `ble-hci dump` read to its last record.
        @Test(arguments: ["central.pcap", "central.btsnoop", "central.pcapng", "peripheral.pcap", "peripheral.btsnoop", "peripheral.pcapng"])
        func sigkillLeavesAReadableCapture(_ name: String) async throws {
            let dir = try TempDir()
            let path = dir.path(name)
            let killPeripheral = name.hasPrefix("peripheral")
            try await withRig(peripheralGlobalArgs: killPeripheral ? ["-w", path] : []) { rig in
                let central = try BleHCI.start((killPeripheral ? [] : ["-w", path])
                                               + ["-t", rig.centralSpec, "central", "name:ble-hci", "--subscribe", "fff1", "--duration", "30", "--json"],
                                               lifetime: 40)
                defer { central.stop(grace: 0.5) }
                // Let some traffic flow: connection, discovery, two notifications.
                for _ in 0..<2 { _ = try await central.nextEvent("notification", timeout: 15) }
                let victim = killPeripheral ? try #require(rig.peripheral) : central
                #expect(kill(victim.pid, SIGKILL) == 0)
                let status = try await victim.exitStatus(timeout: 5)
                #expect(status == SIGKILL, "exit status \(status), want the SIGKILL signal")
                await central.stopAsync(grace: 0.5)
            }
            let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            #expect(size > 100, "capture has \(size) octets")
            let counts = try await Self.frameCounts(path)
            #expect(counts.tshark >= 10, "tshark read only \(counts.tshark) frames")
            #expect(counts.dump == counts.tshark, "dump printed \(counts.dump) lines, tshark read \(counts.tshark) frames")
            expectIndexedJSON(counts.dumpLines, name)
            // The notifications before the kill are in the file.
            let att = try await runTool(tshark, ["-n", "-r", path, "-Y", "btatt.opcode == 0x1b", "-T", "fields", "-e", "frame.number"])
            #expect(att.stdout.filter { !$0.isEmpty }.count >= 2, "fewer than 2 notifications in \(name)")
        }
    }
}

/// `dump --json` lines: JSON objects with consecutive indexes, directions and types.
func expectIndexedJSON(_ lines: [String], _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let objects = lines.compactMap(ChildProcess.json)
    #expect(objects.count == lines.count, "\(what): dump printed non-JSON lines", sourceLocation: sourceLocation)
    guard let firstIndex = objects.first?["index"] as? Int else {
        Issue.record("\(what): dump's first line has no index", sourceLocation: sourceLocation)
        return
    }
    #expect(objects.compactMap { $0["index"] as? Int } == Array(firstIndex..<firstIndex + objects.count),
            "\(what): dump indexes are not consecutive", sourceLocation: sourceLocation)
    #expect(objects.allSatisfy { ["sent", "received"].contains($0["direction"] as? String ?? "") },
            "\(what): a line without direction sent/received", sourceLocation: sourceLocation)
    #expect(objects.contains { $0["type"] as? String == "command" } && objects.contains { $0["type"] as? String == "event" }
            && objects.contains { $0["type"] as? String == "acl" }, "\(what): commands, events and ACL expected",
            sourceLocation: sourceLocation)
}
