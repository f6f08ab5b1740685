import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 29 (CLI.md "--json": `connection` in every event of both roles): every JSON event
    /// of a link carries that link's `connection`, and none is printed before the link's
    /// `connected` (nor after its `disconnected`). Central and peripheral as separate processes
    /// over `ble-hci controllers`, pairing, re-encrypting from the bond, a failed pairing and a
    /// bond the peripheral lost.
    @Suite(.serialized) struct LinkEvents {
        /// The events of `lines` that break the rule, described; `unlinked` are the event kinds
        /// that concern no link (a peripheral's `advertising`).
        static func violations(_ lines: [String], unlinked: Set<String> = []) -> [String] {
            var open: Set<Int> = []
            var problems: [String] = []
            for line in lines {
                guard let e = ChildProcess.json(line), let kind = e["event"] as? String, !unlinked.contains(kind) else { continue }
                guard let connection = e["connection"] as? Int else {
                    problems.append("no connection: \(line)")
                    continue
                }
                if kind == "connected" {
                    open.insert(connection)
                } else if !open.contains(connection) {
                    problems.append("not between its link's connected and disconnected: \(line)")
                }
                if kind == "disconnected" { open.remove(connection) }
            }
            return problems
        }

        static func kinds(_ lines: [String]) -> Set<String> {
            Set(lines.compactMap(ChildProcess.json).compactMap { $0["event"] as? String })
        }

        @Test func everyLinkEventCarriesItsConnectionAfterConnected() async throws {
            let dir = try TempDir()
            let centralBonds = dir.path("c")
            // Passkey Entry (the peripheral displays, the central types: Core v5.4 Vol 3 Part H
            // 2.3.5.1, Table 2.8), so the peripheral prints `pairing`, and MITM, so ff02 reads.
            let security = ["--io", "display", "--mitm", "--passkey", "123456"]
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--bonds", dir.path("p")] + security) { rig in
                var central: [String] = []
                // Pairs, then read, write, notification and an ATT error (ff02 is read and
                // notify only: Write Not Permitted).
                let first = try await rig.central(["central", "name:secure", "--pair", "--io", "keyboard", "--mitm", "--passkey", "123456",
                                                   "--read", "ff01", "--write", "ff01=" + hexOf("new"), "--read", "ff02",
                                                   "--subscribe", "ff02", "--count", "1", "--write", "ff02=00",
                                                   "--bonds", centralBonds, "--json"], timeout: 40)
                expectStatus(first, 1, "central --pair ... --write ff02 (refused)")
                central += first.stdout
                // Encrypts from the bond.
                let second = try await rig.central(["central", "name:secure", "--read", "ff01", "--bonds", centralBonds, "--json"])
                expectStatus(second, 0, "central --read ff01 from the bond")
                central += second.stdout
                // A central that can only do Just Works against a peripheral that requires MITM:
                // the peripheral refuses the pairing (Vol 3 Part H 2.3.5.1, 3.5.5).
                let refused = try await rig.central(["central", "name:secure", "--pair", "--bonds", dir.path("c-none"), "--json"])
                central += refused.stdout
                let peripheral = try #require(rig.peripheral)
                _ = try await peripheral.nextEvent("pairingFailed", timeout: 10)
                _ = try await peripheral.nextEvent("disconnected", timeout: 10)  // the refused central's
                let peripheralLines = peripheral.output

                // The peripheral lost the bond: the central's encryption fails (PIN or Key Missing).
                await peripheral.stopAsync(grace: 1)
                let forgetful = try BleHCI.start(["-t", rig.peripheralSpec, "peripheral", "--profile", "secure", "--name", "secure",
                                                  "--bonds", dir.path("p-lost"), "--json"], lifetime: 60)
                defer { forgetful.stop(grace: 0.5) }
                _ = try await forgetful.nextEvent("advertising", timeout: 10)
                let lost = try await rig.central(["central", "name:secure", "--read", "ff01", "--bonds", centralBonds, "--json"])
                central += lost.stdout

                let centralKinds = Self.kinds(central)
                for kind in ["connected", "read", "write", "notification", "error", "paired", "pairingFailed", "encrypted",
                             "encryptionFailed", "disconnected"] {
                    #expect(centralKinds.contains(kind), "central printed no \(kind): \(central)")
                }
                let peripheralKinds = Self.kinds(peripheralLines)
                for kind in ["connected", "pairing", "paired", "encrypted", "pairingFailed", "write", "read", "subscribed", "error",
                             "disconnected"] {
                    #expect(peripheralKinds.contains(kind), "peripheral printed no \(kind): \(peripheralLines)")
                }
                for run in [first.stdout, second.stdout, refused.stdout, lost.stdout] {
                    #expect(Self.violations(run).isEmpty, "central: \(Self.violations(run))")
                }
                #expect(Self.violations(peripheralLines, unlinked: ["advertising"]).isEmpty,
                        "peripheral: \(Self.violations(peripheralLines, unlinked: ["advertising"]))")
            }
        }
    }
}
