import Foundation
import Testing
import TestSupport

extension CLITests {
    /// `peripheral --profile secure` and `central` with the security options, as separate
    /// processes over `ble-hci controllers`; bonds in scratch directories.
    @Suite(.serialized) struct Security {
        /// CLI.md profile `secure`: ff01 holds "secret" behind encryption. The central pairs on
        /// the 0x05 answer, retries and reads it; the second run encrypts from the bond; ff02
        /// still answers Insufficient Authentication (0x05) after Just Works.
        func pairsBondsAndReencrypts(legacy: Bool, onRootcanal: Bool = false) async throws {
            let dir = try TempDir()
            let peripheralBonds = dir.path("peripheral"), centralBonds = dir.path("central")
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--bonds", peripheralBonds],
                              onRootcanal: onRootcanal) { rig in
                let mode = legacy ? ["--legacy"] : []
                let first = try await rig.central(["central", "name:secure", "--read", "ff01", "--bonds", centralBonds, "--json"] + mode)
                expectStatus(first, 0, "central --read ff01")
                expectPureJSON(first, "central --json")
                let names = first.stdout.compactMap(ChildProcess.json).compactMap { $0["event"] as? String }
                #expect(names == ["connected", "paired", "read", "disconnected"], "\(first.stdout)")
                let paired = try #require(first.events("paired").first)
                #expect(paired["method"] as? String == "justWorks")
                #expect(paired["secureConnections"] as? Bool == !legacy)
                #expect(paired["mitm"] as? Bool == false)
                #expect(paired["bonded"] as? Bool == true)
                #expect(paired["keySize"] as? Int == 16)
                #expect(first.events("read").first?["value"] as? String == hexOf("secret"))

                let second = try await rig.central(["central", "name:secure", "--read", "ff01", "--read", "ff02",
                                                    "--bonds", centralBonds, "--json"])
                expectStatus(second, 1, "central --read ff01 --read ff02 (ff02 needs MITM)")
                #expect(second.events("paired").isEmpty, "re-encrypted from the bond: \(second.stdout)")
                // The link's events follow its `connected` (CLI.md: a script keys on it first),
                // even though encryption from the bond may start before the MTU exchange ends.
                let secondNames = second.stdout.compactMap(ChildProcess.json).compactMap { $0["event"] as? String }
                #expect(secondNames.first == "connected", "\(second.stdout)")
                let encrypted = try #require(second.events("encrypted").first)
                #expect(encrypted["bonded"] as? Bool == true)
                #expect(encrypted["keySize"] as? Int == 16)
                #expect(second.events("read").first?["value"] as? String == hexOf("secret"))
                #expect(second.stdout.joined().contains("0x05") || second.stderr.contains("0x05"), "\(second.stdout) \(second.stderr)")

                // The central's bond names the peripheral's identity address.
                let list = try await BleHCI.run(["bonds", "--bonds", centralBonds, "--json"])
                expectStatus(list, 0, "bonds list")
                let bonds = list.events("bond")
                #expect(bonds.count == 1)
                #expect(bonds.first?["address"] as? String == rig.advertising["address"] as? String)
                #expect(bonds.first?["secureConnections"] as? Bool == !legacy)
                #expect(bonds.first?["keySize"] as? Int == 16)
            }
        }

        @Test func legacyJustWorks() async throws { try await pairsBondsAndReencrypts(legacy: true) }
        @Test func secureConnectionsJustWorks() async throws { try await pairsBondsAndReencrypts(legacy: false) }

        /// `peripheral --privacy`: it advertises from a resolvable private address (random, two
        /// most significant bits 0b01, Core Vol 6 Part B 1.3.2.2), distributes its IRK and identity
        /// address when bonding; afterwards `scan` names that identity and `central IDENTITY`
        /// finds the peripheral behind its RPA and encrypts from the bond.
        @Test func privacyPeripheralFoundByIdentity() async throws {
            let dir = try TempDir()
            let centralBonds = dir.path("c")
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--privacy", "--bonds", dir.path("p")]) { rig in
                let rpa = try #require(rig.advertising["address"] as? String)
                #expect(rig.advertising["addressType"] as? String == "random")
                let top = try #require(UInt8(rpa.prefix(2), radix: 16))
                #expect(top & 0xC0 == 0x40, "\(rpa) is not a resolvable private address")

                let first = try await rig.central(["central", "name:secure", "--pair", "--read", "ff01", "--bonds", centralBonds, "--json"])
                expectStatus(first, 0, "central --pair (privacy peripheral)")
                let list = try await BleHCI.run(["bonds", "--bonds", centralBonds, "--json"])
                let identity = try #require(list.events("bond").first?["address"] as? String)
                #expect(identity != rpa, "the bond is filed under the identity address, not the RPA")
                #expect(list.events("bond").first?["irk"] as? Bool == true)

                let scan = try await rig.central(["scan", "--duration", "2", "--bonds", centralBonds, "--json"])
                expectStatus(scan, 0, "scan --bonds")
                let seen = scan.events("advertisement").first { $0["name"] as? String == "secure" }
                #expect(seen?["identityAddress"] as? String == identity, "\(scan.stdout)")

                let capture = dir.path("second.btsnoop")
                let second = try await rig.central(["-w", capture, "central", identity, "--read", "ff01", "--bonds", centralBonds, "--json"])
                expectStatus(second, 0, "central IDENTITY")
                #expect(second.events("paired").isEmpty, "\(second.stdout)")
                #expect(second.events("encrypted").first?["bonded"] as? Bool == true)
                #expect(second.events("read").first?["value"] as? String == hexOf("secret"))
                // Issue 30: the bond's IRK went into the controller's resolving list, in Device
                // Privacy Mode, and address resolution was turned on (Core v5.4 Vol 4 Part E
                // 7.8.38, 7.8.77, 7.8.44), as tshark reads the capture.
                let opcodes = try Tshark.fields(capture, ["bthci_cmd.opcode"]).compactMap(\.first)
                for opcode in ["0x2029", "0x202a", "0x2027", "0x204e", "0x202d"] {
                    #expect(opcodes.contains(opcode), "\(opcode) in the capture")
                }
                #expect(!second.stderr.contains("resolving list not used"), "\(second.stderr)")
            }
        }

        /// Issue 31 item 3: a damaged bond file is named by both roles, as a `bondStoreError`
        /// event and a warning on stderr that say what to do (docs/cli.md "Bonds"), and the
        /// pairing that could not be stored says `"bonded": false`.
        @Test func damagedBondFilesAreReportedByBothRoles() async throws {
            let dir = try TempDir()
            let peripheralBonds = dir.path("p"), centralBonds = dir.path("c")
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--bonds", peripheralBonds]) { rig in
                // The peripheral's file (named after its identity address, AA-BB-CC-DD-EE-FF-TYPE.json)
                // holds `{}`: read at its first link.
                let address = try #require(rig.advertising["address"] as? String)
                let type = try #require(rig.advertising["addressType"] as? String)
                try FileManager.default.createDirectory(atPath: peripheralBonds, withIntermediateDirectories: true)
                let peripheralFile = peripheralBonds + "/" + address.replacingOccurrences(of: ":", with: "-") + "-" + type + ".json"
                try Data("{}".utf8).write(to: URL(fileURLWithPath: peripheralFile))

                let first = try await rig.central(["central", "name:secure", "--pair", "--bonds", centralBonds, "--json"])
                expectStatus(first, 0, "central --pair")
                #expect(first.events("paired").first?["bonded"] as? Bool == true)
                #expect(first.events("bondStoreError").isEmpty, "\(first.stdout)")
                let peripheral = try #require(rig.peripheral)
                let paired = try await peripheral.nextEvent("paired", timeout: 5)
                #expect(paired["bonded"] as? Bool == false)
                let problems = peripheral.events.filter { $0["event"] as? String == "bondStoreError" }
                #expect(problems.count == 1, "\(peripheral.output)")
                #expect(problems.first?["file"] as? String == peripheralFile)
                let message = try #require(problems.first?["message"] as? String)
                #expect(message.contains(peripheralFile) && message.contains("remove or repair") && message.contains("bonds clear"), "\(message)")
                #expect(peripheral.stderr.contains("ble-hci: warning: bond file \(peripheralFile) is corrupt"), "\(peripheral.stderr)")

                // The central's own file, cut short: the next run names it and pairs without bonding.
                let files = try FileManager.default.contentsOfDirectory(atPath: centralBonds).filter { $0.hasSuffix(".json") }
                try #require(files.count == 1, "\(files)")
                let centralFile = centralBonds + "/" + files[0]
                let whole = try Data(contentsOf: URL(fileURLWithPath: centralFile))
                try whole.prefix(whole.count / 2).write(to: URL(fileURLWithPath: centralFile))
                let second = try await rig.central(["central", "name:secure", "--read", "ff01", "--bonds", centralBonds, "--json"])
                expectStatus(second, 0, "central --read ff01 with a damaged bond file")
                expectPureJSON(second, "central --json")
                #expect(second.events("paired").first?["bonded"] as? Bool == false, "\(second.stdout)")
                let centralProblems = second.events("bondStoreError")
                #expect(centralProblems.count == 1, "\(second.stdout)")
                #expect(centralProblems.first?["file"] as? String == centralFile)
                #expect((centralProblems.first?["message"] as? String)?.contains("remove or repair \(centralFile)") == true)
                #expect(second.stderr.contains("ble-hci: warning: bond file \(centralFile) is corrupt"), "\(second.stderr)")
            }
        }

        /// Issue 31 item 6b: the peripheral lost its bond (started again with empty bonds), so
        /// encrypting from the central's bond fails with PIN or Key Missing, 0x06 (Core v5.4
        /// Vol 6 Part B 5.1.3.1: the peripheral's host has no LTK; Vol 4 Part E 7.7.8: the
        /// Encryption Change status). The central says so on stderr with how to pair again, and
        /// does not pair again by itself; `--pair-again` pairs afresh and the new bond is used next time.
        @Test func centralSaysThePeripheralLostTheBondAndPairsAgainWhenAsked() async throws {
            let dir = try TempDir()
            let centralBonds = dir.path("c")
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--bonds", dir.path("p")]) { rig in
                let first = try await rig.central(["central", "name:secure", "--pair", "--bonds", centralBonds, "--json"])
                expectStatus(first, 0, "central --pair")
                #expect(first.events("paired").first?["bonded"] as? Bool == true)
                await rig.peripheral?.stopAsync(grace: 1)
                let forgetful = try BleHCI.start(["-t", rig.peripheralSpec, "peripheral", "--profile", "secure", "--name", "secure",
                                                  "--bonds", dir.path("p-lost"), "--json"], lifetime: 60)
                defer { forgetful.stop(grace: 0.5) }
                let advertising = try await forgetful.nextEvent("advertising", timeout: 10)
                let address = try #require(advertising["address"] as? String)

                let lost = try await rig.central(["central", "name:secure", "--read", "ff01", "--bonds", centralBonds, "--json"])
                expectStatus(lost, 1, "central --read ff01 with a bond the peripheral lost")
                #expect(lost.events("encryptionFailed").first?["status"] as? String == "0x06", "\(lost.stdout)")
                #expect(lost.events("paired").isEmpty, "paired again unasked: \(lost.stdout)")
                #expect(lost.stderr.contains("\(address)/public has lost its bond with us"), "\(lost.stderr)")
                #expect(lost.stderr.contains("ble-hci central \(address) --pair-again --bonds \(centralBonds)"), "\(lost.stderr)")
                #expect(lost.stderr.contains("ble-hci bonds remove \(address) --bonds \(centralBonds)"), "\(lost.stderr)")

                let again = try await rig.central(["central", "name:secure", "--pair-again", "--read", "ff01", "--bonds", centralBonds, "--json"])
                expectStatus(again, 0, "central --pair-again --read ff01")
                #expect(again.events("paired").first?["bonded"] as? Bool == true, "\(again.stdout)")
                #expect(again.events("read").first?["value"] as? String == hexOf("secret"))
                #expect(!again.stderr.contains("has lost its bond with us"), "\(again.stderr)")

                let next = try await rig.central(["central", "name:secure", "--read", "ff01", "--bonds", centralBonds, "--json"])
                expectStatus(next, 0, "central --read ff01 with the new bond")
                #expect(next.events("encrypted").first?["bonded"] as? Bool == true, "\(next.stdout)")
                #expect(next.events("paired").isEmpty && next.events("encryptionFailed").isEmpty, "\(next.stdout)")
            }
        }

        /// Passkey Entry from the options on both sides: the peripheral displays 123456
        /// (`--io display --passkey`), the central types it (`--io keyboard --passkey`); with MITM
        /// the pairing is authenticated, so ff02 reads "authenticated" (CLI.md profile `secure`).
        @Test func passkeyFromOptions() async throws {
            let dir = try TempDir()
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--io", "display", "--mitm",
                                                                  "--passkey", "123456", "--bonds", dir.path("p")]) { rig in
                let r = try await rig.central(["central", "name:secure", "--pair", "--io", "keyboard", "--mitm", "--passkey", "123456",
                                               "--read", "ff02", "--bonds", dir.path("c"), "--json"])
                expectStatus(r, 0, "central --pair --io keyboard --passkey")
                let paired = try #require(r.events("paired").first)
                #expect(paired["method"] as? String == "passkeyEntry")
                #expect(paired["mitm"] as? Bool == true)
                #expect(r.events("read").first?["value"] as? String == hexOf("authenticated"))
                let shown = try await #require(rig.peripheral).nextEvent("pairing", timeout: 5)
                #expect(shown["passkey"] as? String == "123456")
                #expect(shown["method"] as? String == "passkeyEntry")
            }
        }

        /// `peripheral --security-request`: the central pairs with no request of its own.
        @Test func securityRequest() async throws {
            let dir = try TempDir()
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--security-request", "--bonds", dir.path("p")]) { rig in
                // Discovery first: the Security Request (sent at connection) arrives meanwhile, and the
                // central lets the pairing finish before it disconnects.
                let r = try await rig.central(["central", "name:secure", "--discover", "--read", "2a00", "--bonds", dir.path("c"), "--json"])
                #expect(r.events("paired").first?["method"] as? String == "justWorks", "\(r.stdout)")
                expectStatus(r, 0, "central --read 2a00 against --security-request")
                let peripheralPaired = try await #require(rig.peripheral).nextEvent("paired", timeout: 5)
                #expect(peripheralPaired["method"] as? String == "justWorks")
            }
        }

        /// `peripheral --privacy --directed bonded`: ADV_DIRECT_IND to the last bonded central (Core
        /// v5.4 Vol 4 Part E 7.8.5, Advertising_Type 0x04), which finds it by the peripheral's
        /// identity address and reads ff01 encrypted from the bond; a bad TARGET is a usage error.
        @Test func directedAdvertisingToTheBondedCentral() async throws {
            let dir = try TempDir()
            let bad = try await BleHCI.run(["-t", "tcp:127.0.0.1:1", "peripheral", "--directed", "name:x"])
            expectStatus(bad, 2, "--directed name:x")
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--privacy", "--bonds", dir.path("p")]) { rig in
                let r = try await rig.central(["central", "name:secure", "--pair", "--privacy", "--bonds", dir.path("c"), "--json"])
                expectStatus(r, 0, "central --pair --privacy")
            }
            let centralIdentity = try #require(try await BleHCI.run(["bonds", "--bonds", dir.path("p"), "--json"]).events("bond").first?["address"] as? String)
            let peripheralIdentity = try #require(try await BleHCI.run(["bonds", "--bonds", dir.path("c"), "--json"]).events("bond").first?["address"] as? String)
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--privacy", "--bonds", dir.path("p"), "--directed", "bonded"]) { rig in
                let directed = try await #require(rig.peripheral).nextEvent("directedAdvertising", timeout: 5)
                #expect(directed["target"] as? String == centralIdentity)
                let r = try await rig.central(["central", peripheralIdentity, "--read", "ff01", "--privacy", "--bonds", dir.path("c"), "--json"])
                expectStatus(r, 0, "central IDENTITY --read ff01 against --directed bonded")
                #expect(r.events("read").first?["value"] as? String == hexOf("secret"), "\(r.stdout)")
            }
        }

        /// Numeric comparison with no terminal on the central and no --yes: refused
        /// (CLI.md), so pairing fails with Numeric Comparison Failed (0x0C, Core Vol 3 Part H 3.5.5).
        @Test func numericComparisonRefusedWithoutTerminal() async throws {
            let dir = try TempDir()
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--io", "yesno", "--mitm", "--yes",
                                                                  "--bonds", dir.path("p")]) { rig in
                let r = try await rig.central(["central", "name:secure", "--pair", "--io", "yesno", "--mitm",
                                               "--bonds", dir.path("c"), "--json"])
                expectStatus(r, 1, "central --pair --io yesno without --yes")
                let failed = try #require(r.events("pairingFailed").first, "\(r.stdout) \(r.stderr)")
                #expect(failed["reason"] as? String == "0x0c")
                #expect(r.events("pairing").first?["method"] as? String == "numericComparison")
            }
        }
    }

    @Suite struct Bonds {
        @Test func listRemoveClear() async throws {
            let dir = try TempDir()
            let empty = try await BleHCI.run(["bonds", "--bonds", dir.path("none"), "--json"])
            expectStatus(empty, 0, "bonds list (no directory)")
            #expect(empty.stdout.isEmpty)
            let usage = try await BleHCI.run(["bonds", "--bonds", dir.path("none"), "frobnicate"])
            expectStatus(usage, 2, "bonds frobnicate")
            let missing = try await BleHCI.run(["bonds", "--bonds", dir.path("none"), "remove", "F0:F1:F2:F3:F4:F5"])
            expectStatus(missing, 1, "bonds remove (no such bond)")
            let badAddress = try await BleHCI.run(["bonds", "--bonds", dir.path("none"), "remove", "nope"])
            expectStatus(badAddress, 2, "bonds remove nope")
        }

        /// Bonds made by a real pairing, then removed one by one and cleared.
        @Test func removeAndClearAfterPairing() async throws {
            let dir = try TempDir()
            let centralBonds = dir.path("c")
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--bonds", dir.path("p")]) { rig in
                let r = try await rig.central(["central", "name:secure", "--pair", "--legacy", "--bonds", centralBonds, "--json"])
                expectStatus(r, 0, "central --pair")
            }
            let address = try #require(try await BleHCI.run(["bonds", "--bonds", centralBonds, "--json"]).events("bond").first?["address"] as? String)
            let removed = try await BleHCI.run(["bonds", "--bonds", centralBonds, "remove", address, "--json"])
            expectStatus(removed, 0, "bonds remove")
            #expect(try await BleHCI.run(["bonds", "--bonds", centralBonds, "--json"]).events("bond").isEmpty)
            let cleared = try await BleHCI.run(["bonds", "--bonds", centralBonds, "clear"])
            expectStatus(cleared, 0, "bonds clear")
        }
    }
}

extension CLITests.Security {
    /// Ours <-> ours over Rootcanal (`make rootcanal-test`): `peripheral --profile secure` and
    /// `central` on two controllers of its radio pair (LE Secure Connections and legacy Just
    /// Works), bond, and re-encrypt from the bond through Rootcanal's link-layer encryption.
    @Suite(.serialized, .rootcanal) struct OverRootcanal {
        @Test func legacyJustWorks() async throws {
            try await CLITests.Security().pairsBondsAndReencrypts(legacy: true, onRootcanal: true)
        }
        @Test func secureConnectionsJustWorks() async throws {
            try await CLITests.Security().pairsBondsAndReencrypts(legacy: false, onRootcanal: true)
        }
    }
}
