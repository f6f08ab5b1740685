import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 26: `dump --stats` from the command line, its options and its JSON object. The
    /// numbers themselves are checked against tshark in DecoderTests' StatisticsTests; here
    /// tshark counts the frames the CLI's object reports.
    @Suite(.serialized) struct DumpStats {
        static func fixture(_ name: String) -> String { Repo.fixture(name).path }

        /// tshark's count of frames matching `filter` in `path`.
        static func tsharkCount(_ path: String, _ filter: String? = nil) async throws -> Int {
            let t = try await runTool(tshark, ["-n", "-r", path] + (filter.map { ["-Y", $0] } ?? []) + ["-T", "fields", "-e", "frame.number"])
            #expect(t.status == 0)
            return t.stdout.filter { !$0.isEmpty }.count
        }

        @Test(arguments: ["bumble-central.btsnoop", "ble-hci-demo-25-75.pcapng", "bumble-central-notes.pklg"])
        func jsonIsOneObjectWithTsharksCounts(_ name: String) async throws {
            let path = Self.fixture(name)
            let r = try await BleHCI.run(["dump", path, "--stats", "--json"])
            expectStatus(r, 0, "dump --stats --json")
            #expect(r.stdout.count == 1, "one JSON object, got \(r.stdout.count) lines")
            let o = try #require(r.json.first ?? nil)
            #expect(o["packets"] as? Int == (try await Self.tsharkCount(path)))
            #expect(o["acl"] as? Int == (try await Self.tsharkCount(path, "bthci_acl")))
            let connections = try #require(o["connections"] as? [[String: Any]])
            let sent = connections.compactMap { ($0["sent"] as? [String: Any])?["packets"] as? Int }.reduce(0, +)
            let received = connections.compactMap { ($0["received"] as? [String: Any])?["packets"] as? Int }.reduce(0, +)
            let directionFilter = name.hasSuffix(".pklg") ? "packetlogger.type == 0x02" : "bthci_acl && hci_h4.direction == 0"
            #expect(sent == (try await Self.tsharkCount(path, directionFilter)), "ACL packets sent")
            #expect(sent + received == o["acl"] as? Int)
            for key in ["commandFailures", "start", "end", "durationUs", "commands", "events", "notes", "malformed"] {
                #expect(o[key] != nil, "\(key) is missing")
            }
        }

        @Test func textNamesConnectionsChannelsAndFailures() async throws {
            let r = try await BleHCI.run(["dump", Self.fixture("bumble-channels.btsnoop"), "--stats"])
            expectStatus(r, 0, "dump --stats")
            let text = r.stdout.joined(separator: "\n")
            #expect(text.contains("Connection 1: handle 0x0001, BR/EDR"))
            #expect(text.contains("Connection 2: handle 0x0001, LE, peer C1:22:33:44:55:66 (random)"))
            #expect(text.contains("PSM 0x0027, enhanced credit based mode"))
            #expect(text.contains("Error Responses: "))
            #expect(text.contains("HCI command failures:"))
            #expect(text.contains("Command Complete status 0x01 Unknown HCI Command"))
        }

        @Test func optionsThatDoNotApplyAreUsageErrors() async throws {
            for extra in [["--flow"], ["--svg", "/tmp/x.svg"], ["--layers", "att"], ["--hex"]] {
                let r = try await BleHCI.run(["dump", Self.fixture("bumble-central.btsnoop"), "--stats"] + extra)
                expectStatus(r, 2, "dump --stats \(extra.joined(separator: " "))")
                #expect(r.stderr.contains("--stats"))
            }
        }

        @Test func damagedCaptureGetsTheStatisticsOfWhatCameBeforeThenExitsOne() async throws {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.fixture("bumble-central.btsnoop"))))
            let offsets = DumpInput.btsnoopRecordOffsets(bytes)
            let dir = try TempDir()
            let path = dir.path("cut.btsnoop")
            try Data(bytes[..<(offsets[50] + 24 + 1)]).write(to: URL(fileURLWithPath: path))
            let r = try await BleHCI.run(["dump", path, "--stats", "--json"])
            expectStatus(r, 1, "dump --stats on a cut capture")
            let o = try #require(r.json.first ?? nil)
            #expect(o["packets"] as? Int == 50)
            #expect(r.stderr.contains("record 51"), "names the damaged record: \(r.stderr)")
        }

        @Test func helpShowsTheNewOptions() async throws {
            let r = try await BleHCI.run(["dump", "--help"])
            expectStatus(r, 0, "dump --help")
            let text = r.stdout.joined(separator: "\n")
            #expect(text.contains("ble-hci dump btsnoop_hci.log --stats"))
            #expect(text.contains("--stats --json"))
            #expect(text.contains("--hex"))
        }
    }
}

extension CLITests {
    /// Issue 26: `dump --hex` from the command line; the octets themselves are checked against
    /// tshark layer by layer in DecoderTests' HexTests.
    @Suite(.serialized) struct DumpHex {
        static let fixture = Repo.fixture("bumble-central.btsnoop").path

        @Test func jsonHexOfEveryPacketsHCILayerIsTsharksFrameAfterTheH4Indicator() async throws {
            let r = try await BleHCI.run(["dump", Self.fixture, "--hex", "--json"])
            expectStatus(r, 0, "dump --hex --json")
            // tshark -T json -x: each frame's octets as "frame_raw" (H4 indicator first).
            let t = try await runTool(tshark, ["-n", "-r", Self.fixture, "-T", "json", "-x"])
            #expect(t.status == 0)
            let all = try #require(try JSONSerialization.jsonObject(with: Data(t.stdout.joined(separator: "\n").utf8)) as? [[String: Any]])
            let frames: [String] = all.compactMap {
                (($0["_source"] as? [String: Any])?["layers"] as? [String: Any])?["frame_raw"].flatMap { ($0 as? [Any])?.first as? String }
            }
            let objects = r.json.compactMap { $0 }
            #expect(objects.count == frames.count && objects.count == 171)
            for (o, f) in zip(objects, frames) {
                let hex = try #require(o["hex"] as? [String: String], "no hex in \(o)")
                #expect(hex["hci"] == String(f.dropFirst(2)), "#\(o["index"] ?? "?")")
            }
            let tree = try await BleHCI.run(["dump", Self.fixture, "--hex", "--layers", "att"])
            expectStatus(tree, 0, "dump --hex --layers att")
            #expect(tree.stdout.filter { $0.hasPrefix("    octets (") }.count == tree.stdout.filter { $0.hasPrefix("#") }.count,
                    "one octets block per ATT packet")
            let bad = try await BleHCI.run(["dump", Self.fixture, "--hex", "--flow"])
            expectStatus(bad, 2, "dump --hex --flow")
        }
    }
}
