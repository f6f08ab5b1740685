import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 16 item 9: the peripheral shows every request with its answer, and both roles
    /// call the connection handle `connection` (plus `handle` in `connected`, per CLI.md).
    @Suite(.serialized) struct PeripheralLog {
        @Test func refusalsAndDescriptorReadsAreShownWithTheirAnswers() async throws {
            try await withRig { rig in
                let peripheral = try #require(rig.peripheral)
                // The tree gives the 2901 descriptor's handle to read by handle.
                let tree = try await rig.central(["central", "name:ble-hci", "--discover", "--json"])
                expectStatus(tree, 0, "central --discover")
                let gatt = try #require(tree.events("gatt").first)
                let fff2 = ((gatt["services"] as? [[String: Any]]) ?? []).flatMap { ($0["characteristics"] as? [[String: Any]]) ?? [] }
                    .first { $0["uuid"] as? String == "fff2" }
                let user = try #require(((fff2?["descriptors"] as? [[String: Any]]) ?? []).first { $0["uuid"] as? String == "2901" })
                let userHandle = try #require(user["handle"] as? Int)

                for args in [["--read", String(format: "0x%04x", userHandle)], ["--read", "fff1"], ["--write", "ffe1=00"]] {
                    let r = try await rig.central(["central", "name:ble-hci", "--json"] + args)
                    let central = r.events("connected").first
                    #expect(central?["connection"] as? Int == central?["handle"] as? Int, "central connected event: \(String(describing: central))")
                    #expect(r.events("disconnected").allSatisfy { $0["connection"] as? Int == central?["connection"] as? Int })
                }
                // Wait for the peripheral to log the third connection's end.
                for _ in 0..<4 { _ = try await peripheral.nextEvent("disconnected", timeout: 10) }
                let events = peripheral.events
                // CLI.md's demo profile: 2901 of fff2 reads "name"; fff1 is Read Not Permitted (0x02),
                // ffe1 Write Not Permitted (0x03) (Core v5.4 Vol 3 Part F 3.4.1.1 Table 3.4).
                let descriptorRead = events.first { $0["event"] as? String == "read" && $0["uuid"] as? String == "2901" }
                #expect(descriptorRead?["value"] as? String == hexOf("name") && descriptorRead?["handle"] as? Int == userHandle,
                        "no descriptor read with its value: \(peripheral.output)")
                let errors = events.filter { $0["event"] as? String == "error" }
                #expect(errors.contains { $0["op"] as? String == "read" && $0["uuid"] as? String == "fff1" && $0["att"] as? String == "0x02"
                                          && $0["message"] as? String == "Read Not Permitted" }, "errors: \(errors)")
                #expect(errors.contains { $0["op"] as? String == "write" && $0["uuid"] as? String == "ffe1" && $0["att"] as? String == "0x03"
                                          && $0["message"] as? String == "Write Not Permitted" }, "errors: \(errors)")
                #expect(events.contains { $0["event"] as? String == "request" && $0["op"] as? String == "Read By Group Type Request" },
                        "discovery requests are not shown")
                // One name for the connection handle: every event about a connection carries `connection`.
                let connected = events.filter { $0["event"] as? String == "connected" }
                #expect(connected.count == 4 && connected.allSatisfy { $0["connection"] as? Int == $0["handle"] as? Int })
                for e in events where !["advertising"].contains(e["event"] as? String ?? "") {
                    #expect(e["connection"] is Int, "event without connection: \(e)")
                }
                expectPureJSON(lines: peripheral.output, "peripheral --json")
            }
        }
    }
}
