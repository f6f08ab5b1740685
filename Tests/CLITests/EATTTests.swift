import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 30: `central --eatt 2` against `peripheral --eatt` over our controllers, and the
    /// capture's framing checked against tshark's (tshark 4.0 frames the ECRED signaling and the
    /// K-frames but decodes neither: its own dissection of the octets is the oracle).
    @Suite(.serialized) struct EnhancedATT {
        @Test func centralSpreadsItsReadsOverTwoBearersAndDumpAgreesWithTshark() async throws {
            let dir = try TempDir()
            let path = dir.path("eatt.btsnoop")
            try await withRig(peripheralArgs: ["--eatt"]) { rig in
                let r = try await rig.central(["-w", path, "central", "name:ble-hci", "--eatt", "2",
                                               "--read", "fff2", "--read", "ffe1", "--read", "2a00", "--read", "fff2", "--json"])
                expectStatus(r, 0, "central --eatt 2")
                let eatt = try #require(r.events("eatt").first, "no eatt event")
                // Two bearers; ATT_MTU the smaller of the channels' MTUs (517 both, Part F 3.2.8).
                #expect(eatt["bearers"] as? Int == 2 && eatt["mtu"] as? Int == 517, "\(eatt)")
                let values = r.events("read").compactMap { $0["value"] as? String }
                #expect(values == [hexOf("ble-hci"), hexOf("read only"), hexOf("ble-hci"), hexOf("ble-hci")], "\(r.stdout)")
            }
            let dump = try await BleHCI.run(["dump", path, "--json"], timeout: 30)
            expectStatus(dump, 0, "dump")
            let packets = dump.stdout.compactMap { ChildProcess.json($0) }
            func packet(_ index: Int) -> [String: Any]? { packets.first { $0["index"] as? Int == index } }

            // The signaling commands: code and identifier as tshark reads them; the names of Core
            // v5.4 Vol 3 Part A Table 4.2 (L2CAP_CREDIT_BASED_CONNECTION_REQ 0x17 / RSP 0x18).
            let signaling = try await runTool(tshark, ["-n", "-r", path, "-Y", "btl2cap.cmd_code == 0x17 || btl2cap.cmd_code == 0x18",
                                                       "-T", "fields", "-e", "frame.number", "-e", "btl2cap.cmd_code", "-e", "btl2cap.cmd_ident"])
            let commands = signaling.stdout.filter { !$0.isEmpty }.map { $0.split(separator: "\t").map(String.init) }
            #expect(commands.map { $0[1] } == ["0x17", "0x18"], "\(signaling.stdout)")
            var sourceCIDs: [Int] = []
            for c in commands {
                let s = try #require(packet(Int(c[0])!)?["signaling"] as? [String: Any], "dump has no signaling in #\(c[0])")
                #expect(s["code"] as? String == c[1] && s["identifier"] as? Int == Int(c[2].dropFirst(2), radix: 16))
                #expect(s["name"] as? String == (c[1] == "0x17" ? "Credit Based Connection Request" : "Credit Based Connection Response"))
                if c[1] == "0x17" { sourceCIDs = s["sourceCid"] as? [Int] ?? [] }
            }
            #expect(sourceCIDs.count == 2)

            // Every K-frame on a dynamic CID: dump calls it EATT and reads the SDU tshark shows:
            // the first K-frame of an SDU starts with its 2-octet SDU length (Part A 3.4.3), then
            // the ATT opcode.
            let frames = try await runTool(tshark, ["-n", "-r", path, "-Y", "btl2cap.cid >= 0x0040 && btl2cap.payload",
                                                    "-T", "fields", "-e", "frame.number", "-e", "btl2cap.cid", "-e", "btl2cap.payload"])
            var requestCIDs: Set<Int> = []
            let rows = frames.stdout.filter { !$0.isEmpty }.map { $0.split(separator: "\t").map(String.init) }
            #expect(rows.count >= 8, "\(frames.stdout)")
            for row in rows {
                let index = Int(row[0])!, cid = Int(row[1].dropFirst(2), radix: 16)!
                let octets = stride(from: 0, to: row[2].count - 1, by: 2).map { i -> UInt8 in
                    let s = row[2].index(row[2].startIndex, offsetBy: i)
                    return UInt8(row[2][s..<row[2].index(s, offsetBy: 2)], radix: 16)!
                }
                let p = try #require(packet(index), "dump has no #\(index)")
                let l2cap = p["l2cap"] as? [String: Any] ?? [:]
                #expect(l2cap["cid"] as? Int == cid && l2cap["channel"] as? String == "EATT", "#\(index): \(l2cap)")
                guard let sduLength = l2cap["sduLength"] as? Int, octets.count >= 3 else { continue }
                #expect(sduLength == Int(octets[0]) | Int(octets[1]) << 8, "#\(index)")
                let opcode = (p["att"] as? [String: Any])?["opcode"] as? String
                #expect(opcode == String(format: "0x%02x", octets[2]), "#\(index): dump \(opcode ?? "-"), octets \(row[2])")
                // A request (Read, Read By Type...: even opcodes below 0x1B and 0x20) we sent.
                if p["direction"] as? String == "sent", [0x04, 0x06, 0x08, 0x0A, 0x0C, 0x10, 0x20].contains(Int(octets[2])) {
                    requestCIDs.insert(cid)
                }
            }
            // The requests went over both bearers (to both of the peer's CIDs).
            #expect(requestCIDs.count == 2, "requests only to \(requestCIDs)")
        }
    
        /// `--eatt-mtu 1024`: a Credit Based Reconfigure Request (0x19, Core v5.4 Vol 3 Part A
        /// 4.27: MTU, MPS, then one Destination CID per bearer, ours) and its response (0x1A,
        /// result 0x0000, 4.28), by tshark's command codes and identifiers and the octets after
        /// the signaling header; the ATT_MTU stays 517, the peripheral's MTU (Part G 5.3.1).
        @Test func eattMTUReconfiguresTheBearers() async throws {
            let dir = try TempDir()
            let path = dir.path("eatt-mtu.btsnoop")
            try await withRig(peripheralArgs: ["--eatt"]) { rig in
                let r = try await rig.central(["-w", path, "central", "name:ble-hci", "--eatt", "2", "--eatt-mtu", "1024",
                                               "--read", "fff2", "--json"])
                expectStatus(r, 0, "central --eatt 2 --eatt-mtu 1024")
                let event = try #require(r.events("eattMTU").first, "no eattMTU event: \(r.stdout)")
                #expect(event["mtu"] as? Int == 1024 && event["attMTU"] as? Int == 517, "\(event)")
                #expect(r.events("read").first?["value"] as? String == hexOf("ble-hci"))
            }
            let t = try await runTool(tshark, ["-n", "-r", path, "-Y", "btl2cap.cmd_code == 0x17 || btl2cap.cmd_code == 0x19 || btl2cap.cmd_code == 0x1a",
                                               "-T", "fields", "-e", "btl2cap.cmd_code", "-e", "btl2cap.cmd_ident", "-e", "frame.number"])
            let rows = t.stdout.filter { !$0.isEmpty }.map { $0.split(separator: "\t").map(String.init) }
            #expect(rows.map { $0[0] } == ["0x17", "0x19", "0x1a"], "\(t.stdout)")
            guard rows.count == 3 else { return }
            #expect(rows[1][1] == rows[2][1], "request and response identifiers differ")
            // The frames' octets (tshark -x): H4 type 1, ACL header 4, L2CAP header 4, signaling header 4.
            func octets(_ frame: String) async throws -> [Int] {
                let x = try await runTool(tshark, ["-n", "-r", path, "-Y", "frame.number == \(frame)", "-x"])
                return x.stdout.flatMap { line -> [Int] in
                    let parts = line.split(separator: " ", omittingEmptySubsequences: true)
                    guard parts.count > 1, parts[0].count == 4, Int(parts[0], radix: 16) != nil else { return [] }
                    return parts.dropFirst().prefix(16).prefix { $0.count == 2 }.compactMap { Int($0, radix: 16) }
                }
            }
            let le = { (b: [Int], i: Int) in b[i] | b[i + 1] << 8 }
            let open = try await octets(rows[0][2]), request = try await octets(rows[1][2]), response = try await octets(rows[2][2])
            try #require(open.count >= 21 && request.count >= 21 && response.count >= 15, "\(open) \(request) \(response)")
            #expect(le(request, 13) == 1024 && le(request, 15) == 247)
            // The Destination CIDs of a Reconfigure Request are the sender's own (the Source CIDs
            // of its Connection Request, which start after SPSM, MTU, MPS and credits).
            #expect(stride(from: 17, to: request.count - 1, by: 2).map { le(request, $0) } == stride(from: 21, to: open.count - 1, by: 2).map { le(open, $0) })
            #expect(le(response, 13) == 0x0000)
        }

        /// A peripheral that serves no EATT answers the Credit Based Connection Request with
        /// result 0x0002, SPSM not supported (Core v5.4 Vol 3 Part A 4.26): the central says so
        /// and reads over CID 0x0004.
        @Test func refusedBearersLeaveTheUnenhancedOne() async throws {
            try await withRig { rig in
                let r = try await rig.central(["central", "name:ble-hci", "--eatt", "2", "--read", "fff2", "--json"])
                expectStatus(r, 0, "central --eatt 2 against a peripheral without --eatt")
                let eatt = try #require(r.events("eatt").first, "no eatt event")
                #expect(eatt["bearers"] as? Int == 0)
                #expect((eatt["message"] as? String)?.contains("SPSM not supported") == true, "\(eatt)")
                #expect(r.events("read").first?["value"] as? String == hexOf("ble-hci"))
            }
        }
    }
}
