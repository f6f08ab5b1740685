import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 16 items 6, 7 and 10: what `dump` shows with --layers, what it does with damaged
    /// captures, and reading a capture from a pipe. tshark is the independent reader.
    @Suite(.serialized) struct DumpInput {
        static let fixture = Repo.fixture("bumble-central.btsnoop").path

        /// Frames tshark reads from `path` (with an optional display filter); its exit status.
        static func tsharkFrames(_ path: String, filter: String? = nil) async throws -> (count: Int, status: Int32) {
            let t = try await runTool(tshark, ["-n", "-r", path] + (filter.map { ["-Y", $0] } ?? []) + ["-T", "fields", "-e", "frame.number"])
            return (t.stdout.filter { !$0.isEmpty }.count, t.status)
        }

        /// Byte offsets of the btsnoop records of `bytes`, walked from the format's own layout
        /// (16-octet file header; 24-octet record header whose second 32-bit big-endian word is
        /// the included length), independently of ble-hci's reader.
        static func btsnoopRecordOffsets(_ bytes: [UInt8]) -> [Int] {
            var offsets: [Int] = []
            var o = 16
            while o + 24 <= bytes.count {
                let included = bytes[o + 4..<o + 8].reduce(0) { $0 << 8 | Int($1) }
                guard o + 24 + included <= bytes.count else { break }
                offsets.append(o)
                o += 24 + included
            }
            return offsets
        }

        @Test func layersSelectWhatIsShownAndTheDefaultShowsEverything() async throws {
            let all = try await BleHCI.run(["dump", Self.fixture, "--json"])
            expectStatus(all, 0, "dump --json")
            let tsharkAll = try await Self.tsharkFrames(Self.fixture)
            #expect(all.stdout.count == tsharkAll.count, "dump printed \(all.stdout.count) packets, tshark read \(tsharkAll.count)")

            let att = try await BleHCI.run(["dump", Self.fixture, "--layers", "att", "--json"])
            expectStatus(att, 0, "dump --layers att --json")
            let tsharkATT = try await Self.tsharkFrames(Self.fixture, filter: "btatt")
            #expect(tsharkATT.count > 0)
            #expect(att.stdout.count == tsharkATT.count, "dump --layers att printed \(att.stdout.count) packets, tshark finds \(tsharkATT.count) ATT frames")
            let objects = att.stdout.compactMap(ChildProcess.json)
            #expect(objects.count == att.stdout.count)
            #expect(objects.allSatisfy { $0["att"] != nil && $0["hci"] == nil }, "a line without att, or with hci: \(att.stdout.prefix(3))")

            let tree = try await BleHCI.run(["dump", Self.fixture, "--layers", "att"])
            expectStatus(tree, 0, "dump --layers att")
            #expect(tree.stdout.filter { $0.hasPrefix("#") }.count == tsharkATT.count, "tree headers vs tshark's ATT frames")
        }

        @Test func captureCutMidRecordPrintsWhatItCanThenExitsOne() async throws {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.fixture)))
            let offsets = Self.btsnoopRecordOffsets(bytes)
            #expect(offsets.count > 10)
            let k = 8  // cut record 8 (1-based) in the middle of its data
            let cut = Array(bytes[..<(offsets[k - 1] + 24 + 1)])
            let dir = try TempDir()
            let path = dir.path("cut.btsnoop")
            try Data(cut).write(to: URL(fileURLWithPath: path))
            let r = try await BleHCI.run(["dump", path, "--json"])
            expectStatus(r, 1, "dump of a capture cut in record \(k)")
            let t = try await Self.tsharkFrames(path)
            #expect(t.status != 0, "tshark accepted the cut file")
            #expect(r.stdout.count == t.count && t.count == k - 1, "dump printed \(r.stdout.count), tshark \(t.count), want \(k - 1)")
            #expect(r.stderr.contains("record \(k)") && r.stderr.contains("offset \(offsets[k - 1])"), "stderr: \(r.stderr)")
        }

        @Test func garbageAfterAValidHeaderExitsOneNamingTheRecord() async throws {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.fixture)))
            let dir = try TempDir()
            let path = dir.path("garbage.btsnoop")
            // An included length of 0xffffffff cannot be a packet.
            try Data(Array(bytes[..<16]) + [UInt8](repeating: 0xff, count: 64)).write(to: URL(fileURLWithPath: path))
            let r = try await BleHCI.run(["dump", path])
            expectStatus(r, 1, "dump of a header followed by garbage")
            #expect(r.stderr.contains("record 1") && r.stderr.contains("offset 16"), "stderr: \(r.stderr)")
            #expect(try await Self.tsharkFrames(path).status != 0, "tshark accepted the garbage")
        }

        // Issue 16 item 7 counts "header only" among the corrupt captures that must exit 1
        // (tshark reads such a file as an empty capture: 0 frames, which we check as the
        // independent reading of the file). Same for the diagram paths: no text, no SVG.
        /// `dump --explain` (issue 28) adds an "explain" object to the packets `dump --json` prints
        /// and changes nothing else; options that print no packet listing refuse it (exit 2, a
        /// usage error as CLI.md's exit codes say).
        @Test func explainOnlyAddsExplanations() async throws {
            let plain = try await BleHCI.run(["dump", Self.fixture, "--json"])
            let explained = try await BleHCI.run(["dump", Self.fixture, "--json", "--explain"])
            expectStatus(explained, 0, "dump --json --explain")
            #expect(explained.stdout.count == plain.stdout.count)
            var withExplain = 0
            for (a, b) in zip(plain.stdout, explained.stdout) {
                let before = try #require(try JSONSerialization.jsonObject(with: Data(a.utf8)) as? NSDictionary)
                let after = try #require(try JSONSerialization.jsonObject(with: Data(b.utf8)) as? [String: Any])
                if after["explain"] != nil { withExplain += 1 }
                #expect(NSDictionary(dictionary: after.filter { $0.key != "explain" }) == before, "\(b)")
            }
            #expect(withExplain > plain.stdout.count / 2)
            let tree = try await BleHCI.run(["dump", Self.fixture, "--explain", "--layers", "hci"])
            #expect(tree.stdout.contains("        LE Set Event Mask (Octet 25 - Bit 0)"))
            let dir = try TempDir()
            for options in [["--flow"], ["--svg", dir.path("x.svg")], ["--stats"], ["--attributes"]] {
                let r = try await BleHCI.run(["dump", Self.fixture, "--explain"] + options)
                expectStatus(r, 2, "dump --explain \(options)")
                #expect(r.stderr.contains("--explain") || r.stderr.contains("explain"), "stderr: \(r.stderr)")
            }
        }

        @Test(arguments: [[String](), ["--json"], ["--flow"], ["--svg"], ["--html"]])
        func headerOnlyFailsAndSaysSo(_ options: [String]) async throws {
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.fixture)))
            let dir = try TempDir()
            let path = dir.path("empty.btsnoop")
            try Data(Array(bytes[..<16])).write(to: URL(fileURLWithPath: path))
            let svg = dir.path("empty.svg")
            let r = try await BleHCI.run(["dump", path] + (options == ["--svg"] || options == ["--html"] ? [options[0], svg] : options))
            let t = try await Self.tsharkFrames(path)
            #expect(t.status == 0 && t.count == 0, "tshark: \(t)")
            expectStatus(r, 1, "dump \(options) of a header-only capture")
            #expect(r.stdout.isEmpty)
            #expect(r.stderr.contains("no packets"), "stderr: \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: svg))
        }

        /// `dump --html`: a page holding every packet tshark reads; of a cut capture, the page of
        /// the records before the cut, and exit 1 naming the record, as plain `dump`.
        @Test func htmlHoldsEveryPacketAndACutCaptureFailsAfterThePage() async throws {
            let dir = try TempDir()
            let page = dir.path("page.html")
            let r = try await BleHCI.run(["dump", Self.fixture, "--html", page])
            expectStatus(r, 0, "dump --html")
            let html = try String(contentsOfFile: page, encoding: .utf8)
            let t = try await Self.tsharkFrames(Self.fixture)
            #expect(html.components(separatedBy: "{\"i\":").count - 1 == t.count, "packets in the page vs tshark's \(t.count) frames")
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: Self.fixture)))
            let offsets = Self.btsnoopRecordOffsets(bytes)
            let cut = dir.path("cut.btsnoop")
            try Data(Array(bytes[..<(offsets[7] + 24 + 1)])).write(to: URL(fileURLWithPath: cut))
            let c = try await BleHCI.run(["dump", cut, "--html", page])
            expectStatus(c, 1, "dump --html of a cut capture")
            #expect(c.stderr.contains("record 8"), "stderr: \(c.stderr)")
            let partial = try String(contentsOfFile: page, encoding: .utf8)
            #expect(partial.components(separatedBy: "{\"i\":").count - 1 == 7)
            let both = try await BleHCI.run(["dump", Self.fixture, "--html", page, "--json"])
            expectStatus(both, 2, "dump --html --json")
        }

        @Test(arguments: ["-", "/dev/stdin"])
        func dumpReadsACaptureFromAPipe(_ name: String) async throws {
            let exe = try BleHCI.executable().path
            let r = try await runTool("/bin/sh", ["-c", "cat '\(Self.fixture)' | '\(exe)' dump \(name) --json"])
            expectStatus(r, 0, "cat capture | ble-hci dump \(name)")
            let t = try await Self.tsharkFrames(Self.fixture)
            #expect(r.stdout.count == t.count, "dump \(name) printed \(r.stdout.count) packets, tshark read \(t.count)")
            expectIndexedJSON(r.stdout, "dump \(name)")
        }
    }
}
