import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 16 item 3: `controllers` serves one host per listener and logs hosts on stderr.
    @Suite(.serialized) struct Controllers {
        @Test func secondHostIsRefusedAndTheFirstKeepsWorking() async throws {
            try await withRig { rig in
                let second = try await BleHCI.run(["-t", rig.peripheralSpec, "scan", "--duration", "1"], timeout: 10)
                expectStatus(second, 3, "a second host on the peripheral's listener")
                #expect(second.stderr.contains("one host at a time"), "stderr: \(second.stderr)")
                // The first host (the peripheral) still serves: a central on the other listener reads it.
                let read = try await rig.central(["central", "name:ble-hci", "--read", "fff2", "--json"])
                expectStatus(read, 0, "central after the refused host")
                #expect(read.events("read").first?["value"] as? String == hexOf("ble-hci"))
                // The controllers process logs the central's disconnection when it sees it, after
                // the central exited: each write to its stderr wakes this wait.
                let controllers = rig.controllers, central = rig.centralSpec
                try await controllers.until("the central's disconnection logged") {
                    controllers.stderr.contains("\(central): host disconnected")
                }
                let log = rig.controllers.stderr
                #expect(log.contains("\(rig.peripheralSpec): refused a second host"), "controllers stderr: \(log)")
                #expect(log.contains("\(rig.centralSpec): host connected"), "controllers stderr: \(log)")
                #expect(log.contains("\(rig.centralSpec): host disconnected"), "controllers stderr: \(log)")
                expectPureJSON(lines: rig.controllers.output, "controllers --json")
            }
        }
    }
}
