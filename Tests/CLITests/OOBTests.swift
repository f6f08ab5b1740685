import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 27: OOB pairing from the command line. The peripheral writes its OOB data
    /// (`--oob-out`), the central reads it (`--oob-in`): the pairing uses the OOB method, which is
    /// authenticated (MITM-protected: Core v5.4 Vol 3 Part H 2.3.5.6.4 for Secure Connections,
    /// 2.3.5.4 for legacy), so the secure profile's ff02 (authenticated link required) reads.
    @Suite(.serialized) struct OOB {
        @Test(arguments: [false, true])
        func oobDataFromThePeripheralAuthenticatesThePairing(legacy: Bool) async throws {
            let dir = try TempDir()
            let file = dir.path("peripheral-oob.json")
            let mode = legacy ? ["--legacy"] : []
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--no-bond", "--oob-out", file] + mode) { rig in
                // The file: 16-octet confirm and random (SC, 2.3.5.6.4) and TK (legacy, 2.3.5.4).
                let written = try #require(ChildProcess.json(try String(contentsOfFile: file, encoding: .utf8)))
                for key in ["confirm", "random", "tk"] { #expect((written[key] as? String)?.count == 32, "\(key): \(written)") }
                let r = try await rig.central(["central", "name:secure", "--pair", "--oob-in", file, "--no-bond", "--read", "ff02", "--json"] + mode)
                expectStatus(r, 0, "central --pair --oob-in --read ff02")
                let paired = try #require(r.events("paired").first, "\(r.stdout)")
                #expect(paired["method"] as? String == "oob")
                #expect(paired["mitm"] as? Bool == true)
                #expect(paired["secureConnections"] as? Bool == !legacy)
                #expect(r.events("read").first?["value"] as? String == Array("authenticated".utf8).hex)
            }
        }

        /// Without the peer's data there is no OOB: Just Works, unauthenticated, and ff02 is
        /// refused with Insufficient Authentication (0x05, Core v5.4 Vol 3 Part F 3.4.1.1).
        @Test func withoutThePeersDataItIsJustWorks() async throws {
            let dir = try TempDir()
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--no-bond", "--oob-out", dir.path("unused.json")]) { rig in
                let r = try await rig.central(["central", "name:secure", "--pair", "--no-bond", "--read", "ff02", "--json"])
                expectStatus(r, 1, "ff02 after Just Works")
                #expect(r.events("paired").first?["method"] as? String == "justWorks")
                #expect(r.events("error").first?["att"] as? String == "0x05")
            }
        }

        @Test(arguments: [
            (#"{"confirm":"00"}"#, "16 octets"),
            (#"{"confirm":"000102030405060708090a0b0c0d0e0f"}"#, "go together"),
            (#"{}"#, "neither"),
            ("not json", "not a JSON object"),
        ])
        func badFilesAreUsageErrors(_ content: String, _ message: String) async throws {
            let dir = try TempDir()
            let file = dir.path("bad.json")
            try content.write(toFile: file, atomically: true, encoding: .utf8)
            let r = try await BleHCI.run(["-t", "tcp:127.0.0.1:1", "central", "name:x", "--oob-in", file])
            expectStatus(r, 2, "--oob-in \(content)")
            #expect(r.stderr.contains(message), "stderr: \(r.stderr)")
        }
    }
}
