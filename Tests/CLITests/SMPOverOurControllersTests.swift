import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 12's interop over our own controllers (`ble-hci controllers`), both directions, with
    /// Bumble's host as the independent peer (the same exchanges run over Bumble's controllers in
    /// InteropTests.SMPInteropTests).
    @Suite(.serialized) struct SMPOverOurControllers {
        /// Bumble's central (NoInputNoOutput) pairs with `peripheral --profile secure`: Just Works
        /// (Core Vol 3 Part H 2.3.5.1, Table 2.8), then ff01 reads "secret" (CLI.md profile secure).
        @Test func bumbleCentralPairsWithOurSecurePeripheral() async throws {
            let dir = try TempDir()
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--bonds", dir.path("p")]) { rig in
                let port = rig.centralSpec.dropFirst("tcp:".count)
                let bumble = try PythonScript.start("central.py", ["--transport", "tcp-client:\(port)", "--name", "secure", "--pair",
                                                                   "--read", "ff01", "--timeout", "40"], lifetime: 60)
                defer { bumble.stop(grace: 1) }
                let paired = try await bumble.nextEvent("paired", timeout: 30)
                #expect(paired["encrypted"] as? Bool == true)
                #expect(paired["secureConnections"] as? Bool == true, "both offer SC: \(paired)")
                let read = try await bumble.nextEvent("read", timeout: 10)
                #expect(read["uuid"] as? String == "ff01")
                #expect(read["value"] as? String == hexOf("secret"))
            }
        }

        /// `central --pair` against Bumble's peripheral (Tools/bumble/peripheral.py, whose ...def4
        /// needs encryption and holds "secret") on our controllers.
        @Test func ourCentralPairsWithBumblePeripheral() async throws {
            let dir = try TempDir()
            try await withRig(profile: nil) { rig in
                let port = rig.peripheralSpec.dropFirst("tcp:".count)
                let peer = try PythonScript.start("peripheral.py", ["--transport", "tcp-client:\(port)", "--name", "bumble-enc",
                                                                    "--timeout", "60"], lifetime: 90)
                defer { peer.stop(grace: 1) }
                _ = try await peer.nextEvent("ready", timeout: 30)
                let ours = try await rig.central(["central", "name:bumble-enc", "--pair", "--read", "12345678-1234-5678-1234-56789abcdef4",
                                                  "--bonds", dir.path("c"), "--json"], timeout: 40)
                expectStatus(ours, 0, "central --pair against Bumble's peripheral")
                let paired = try #require(ours.events("paired").first)
                #expect(paired["method"] as? String == "justWorks")
                #expect(paired["secureConnections"] as? Bool == true, "Bumble's PairingConfig defaults to sc=True")
                #expect(ours.events("read").first?["value"] as? String == hexOf("secret"))
            }
        }
    }
}
