import Foundation
import Synchronization
import Testing
import TestSupport
import BLE
import GATT
import ATT
import HCI
import SMP

/// Issue 12 with Bumble as the independent peer, over Bumble's controllers: Bumble's central
/// pairs with our `secure` profile peripheral; our central (`ble-hci central --pair`) pairs with
/// Bumble's peripheral (Tools/bumble/peripheral.py, whose ...def4 needs encryption).
@Suite(.serialized, .timeLimit(.minutes(3))) struct SMPInteropTests {
    final class Events: PairingDelegate, Sendable {
        private let log = Mutex<[SecurityEvent]>([])
        var all: [SecurityEvent] { log.withLock { $0 } }
        var paired: [PairingSummary] { all.compactMap { if case .paired(let p) = $0 { p } else { nil } } }
        func enterPasskey(peer: DeviceAddress) async -> UInt32? { nil }
        func confirmNumber(_ number: UInt32, peer: DeviceAddress) async -> Bool { true }
        func securityEvent(_ event: SecurityEvent, peer: DeviceAddress) { log.withLock { $0.append(event) } }
    }

    static func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("smp-oob-\(name)-\(UUID().uuidString).json").path
    }

    func securePeripheral(_ scope: Scope, name: String, _ configure: (inout SecurityConfiguration) -> Void) async throws -> Events {
        var options = Scope.stackOptions
        options.security.bondDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("smp-interop-\(UUID().uuidString)").path
        configure(&options.security)
        let events = Events()
        options.pairingDelegate = events
        let (peripheral, _) = try await scope.peripheral(on: 0, services: SecureProfile.services, name: name, options: options)
        try await peripheral.startAdvertising(AdvertisingOptions(name: name, serviceUUIDs: SecureProfile.advertisedServices))
        return events
    }

    /// Bumble's central (NoInputNoOutput) pairs: Just Works (Core Vol 3 Part H 2.3.5.1), then
    /// ff01 reads "secret" (CLI.md) and ff02 still answers Insufficient Authentication (0x05).
    func bumbleCentralJustWorks(legacy: Bool, on kind: ControllerKind = .bumble) async throws {
        try await interop(on: kind) { scope in
            let name = legacy ? "smp-legacy" : "smp-sc"
            let ours = try await securePeripheral(scope, name: name) { _ in }
            let bumble = try scope.script("central.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", name, "--pair",
                "--read", "ff01", "--read", "ff02", "--timeout", "40"] + (legacy ? ["--legacy"] : []))
            let paired = try await bumble.event("paired", timeout: .seconds(30))
            // (Bumble's connection reports neither key size nor MITM reliably: ff02 below tells MITM.)
            #expect(paired["encrypted"] as? Bool == true)
            #expect(paired["secureConnections"] as? Bool == !legacy)
            let read = try await bumble.event("read", timeout: .seconds(10))
            #expect(read["uuid"] as? String == "ff01")
            #expect(read["value"] as? String == hex(Array("secret".utf8)))
            let error = try await bumble.event("error", timeout: .seconds(10))
            #expect(error["uuid"] as? String == "ff02")
            #expect(error["att"] as? String == "0x05")
            #expect(try await bumble.exited() == 1, "the ff02 refusal counts as a failure: \(bumble.output.suffix(5))")
            #expect(ours.paired.first?.method == .justWorks)
            #expect(ours.paired.first?.secureConnections == !legacy)
            if let seconds = paired["seconds"] as? Double { print("SMP interop: Bumble central pairing with ours (\(legacy ? "legacy" : "SC") Just Works): \(seconds) s") }
        }
    }

    @Test func bumbleCentralJustWorksSecureConnections() async throws { try await bumbleCentralJustWorks(legacy: false) }
    @Test func bumbleCentralJustWorksLegacy() async throws { try await bumbleCentralJustWorks(legacy: true) }

    /// Bonds reused: Bumble pairs, disconnects, reconnects and encrypts with the stored key;
    /// our peripheral answers the LTK request from its bond store and ff01 reads again.
    @Test func bumbleCentralReencryptsFromTheBond() async throws { try await bumbleCentralReencryptsFromTheBond(on: .bumble) }
    /// Issue 29: Bumble distributes a public identity address (Identity Address Information,
    /// Core v5.4 Vol 3 Part H 3.6.5) while it connects from its random static one, and reconnects
    /// from that one: our peripheral finds the bond under the address it paired from and answers
    /// the LE Long Term Key Request with the bond's key, with no new pairing. (Over Rootcanal,
    /// whose controller has a public BD_ADDR, Bumble does this by itself.)
    @Test func bumbleCentralWithAnotherIdentityReencryptsFromTheBond() async throws {
        try await bumbleCentralReencryptsFromTheBond(on: .bumble, publicIdentity: "00:1B:DC:07:32:AA")
    }
    func bumbleCentralReencryptsFromTheBond(on kind: ControllerKind, publicIdentity: String? = nil) async throws {
        try await interop(on: kind) { scope in
            let ours = try await securePeripheral(scope, name: "smp-bond") { _ in }
            let bumble = try scope.script("central.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "smp-bond", "--pair", "--read", "ff01",
                "--reconnect", "--encrypt", "--read", "ff01", "--timeout", "40"] + (publicIdentity.map { ["--public-identity", $0] } ?? []))
            _ = try await bumble.event("paired", timeout: .seconds(30))
            #expect(try await bumble.event("read", timeout: .seconds(10))["value"] as? String == hex(Array("secret".utf8)))
            _ = try await bumble.event("encrypted", timeout: .seconds(30))
            #expect(try await bumble.exited() == 0, "\(bumble.output.suffix(8))")
            #expect(bumble.all("read").compactMap { $0["value"] as? String } == [hex(Array("secret".utf8)), hex(Array("secret".utf8))])
            #expect(ours.all.contains(.encrypted(keySize: 16, bonded: true, authenticated: false)))
            #expect(ours.paired.count == 1)
        }
    }

    /// Passkey Entry: our peripheral displays 123456 (--io display --passkey), Bumble types it
    /// (KeyboardOnly, MITM): authenticated, so ff02 reads "authenticated".
    @Test(arguments: [false, true]) func bumbleCentralPasskey(legacy: Bool) async throws {
        try await interop { scope in
            let name = legacy ? "smp-pk-legacy" : "smp-pk-sc"
            let ours = try await securePeripheral(scope, name: name) {
                $0.smp.ioCapability = .displayOnly
                $0.smp.fixedPasskey = 123456
                $0.smp.mitm = true
            }
            let bumble = try scope.script("central.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", name, "--pair", "--io", "keyboard", "--mitm",
                "--passkey", "123456", "--read", "ff02", "--timeout", "40"] + (legacy ? ["--legacy"] : []))
            let paired = try await bumble.event("paired", timeout: .seconds(30))
            #expect(paired["secureConnections"] as? Bool == !legacy)
            let read = try await bumble.event("read", timeout: .seconds(10))
            #expect(read["value"] as? String == hex(Array("authenticated".utf8)))
            #expect(try await bumble.exited() == 0, "\(bumble.output.suffix(5))")
            #expect(ours.paired.first?.method == .passkeyEntry)
            #expect(ours.all.contains(.pairing(method: .passkeyEntry, passkey: 123456, number: nil)))
        }
    }

    /// Numeric Comparison (both DisplayYesNo, MITM, SC; Core Vol 3 Part H 2.3.5.1 Table 2.8):
    /// Bumble and our peripheral show the same 6-digit number (g2, computed independently).
    @Test func bumbleCentralNumericComparison() async throws {
        try await interop { scope in
            let ours = try await securePeripheral(scope, name: "smp-nc") {
                $0.smp.ioCapability = .displayYesNo
                $0.smp.mitm = true
            }
            let bumble = try scope.script("central.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "smp-nc", "--pair", "--io", "yesno", "--mitm",
                "--read", "ff02", "--timeout", "40"])
            let shown = try await bumble.event("pairing", timeout: .seconds(30))
            #expect(shown["method"] as? String == "numericComparison")
            let number = try #require(shown["number"] as? String)
            _ = try await bumble.event("paired", timeout: .seconds(30))
            let read = try await bumble.event("read", timeout: .seconds(10))
            #expect(read["value"] as? String == hex(Array("authenticated".utf8)))
            #expect(try await bumble.exited() == 0, "\(bumble.output.suffix(5))")
            let oursShown = ours.all.compactMap { if case .pairing(.numericComparison, _, let n?) = $0 { n } else { nil } }
            #expect(oursShown.map { String(format: "%06d", $0) } == [number])
            #expect(ours.paired.first?.method == .numericComparison)
            #expect(ours.paired.first?.authenticated == true)
        }
    }

    /// Issue 27, OOB pairing with an independent peer. Our `peripheral --oob-out FILE` writes its
    /// OOB data; Bumble's central (Tools/bumble/central.py `--oob-in FILE`, Bumble's own
    /// OobSharedData / OobLegacyContext) pairs with it. Secure Connections: Bumble alone received
    /// data, which is enough (Core v5.4 Vol 3 Part H 2.3.5.1: OOB when either side has the
    /// peer's data; 2.3.5.6.4: C = f4(PKx, PKx, r, 0) checked by Bumble). Legacy: both hold the TK
    /// (2.3.5.1: OOB when both flags are set; 2.3.5.4). OOB is MITM-protected either way, so
    /// ff02 (authenticated link required) reads "authenticated" (CLI.md secure profile).
    @Test(arguments: [false, true]) func bumbleCentralPairsWithOurOOBData(legacy: Bool) async throws {
        try await interop { scope in
            let file = Self.temporaryPath("ours"), name = legacy ? "smp-oob-legacy" : "smp-oob-sc"
            let ours = try scope.bleHCI(["-t", scope.controllers.transport(0), "peripheral", "--profile", "secure", "--name", name,
                                         "--no-bond", "--oob-out", file, "--json"])
            _ = try await ours.event("advertising", timeout: .seconds(15))
            let bumble = try scope.script("central.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", name, "--pair", "--oob-in", file,
                "--read", "ff02", "--timeout", "40"] + (legacy ? ["--legacy"] : []))
            let paired = try await bumble.event("paired", timeout: .seconds(30))
            #expect(paired["secureConnections"] as? Bool == !legacy)
            #expect(try await bumble.event("read", timeout: .seconds(10))["value"] as? String == hex(Array("authenticated".utf8)))
            #expect(try await bumble.exited() == 0, "\(bumble.output.suffix(5))")
            let oursPaired = try await ours.event("paired", timeout: .seconds(10))
            #expect(oursPaired["method"] as? String == "oob")
            #expect(oursPaired["mitm"] as? Bool == true)
        }
    }

    /// The other way: Bumble's peripheral writes its OOB data (`--oob-out`, from Bumble's own
    /// OobContext.share()), our `central --oob-in` pairs with it (SC, our side alone received
    /// data) and reads ...def6, which Bumble serves only on an authenticated link
    /// (READ_REQUIRES_AUTHENTICATION): Bumble itself judges the pairing MITM-protected.
    @Test func ourCentralPairsWithBumblesOOBData() async throws {
        try await interop { scope in
            let file = Self.temporaryPath("bumble")
            let peer = try scope.script("peripheral.py", ["--transport", scope.controllers.bumbleTransport(1), "--name", "bumble-oob",
                                                          "--oob-out", file, "--timeout", "60"])
            _ = try await peer.event("ready")
            let ours = try scope.bleHCI(["-t", scope.controllers.transport(0), "central", "name:bumble-oob", "--pair", "--oob-in", file,
                                         "--no-bond", "--read", "12345678-1234-5678-1234-56789abcdef6", "--json"])
            let paired = try await ours.event("paired", timeout: .seconds(30))
            #expect(paired["method"] as? String == "oob")
            #expect(paired["secureConnections"] as? Bool == true)
            #expect(try await ours.event("read", timeout: .seconds(10))["value"] as? String == hex(Array("private".utf8)))
            #expect(try await ours.exited() == 0, "\(ours.output.suffix(5))")
        }
    }

    /// `ble-hci central --pair` against Bumble's peripheral, then reading its
    /// encryption-required ...def4 (Bumble's value "secret"); the bond is stored.
    @Test func ourCentralPairsWithBumblePeripheral() async throws { try await ourCentralPairsWithBumblePeripheral(on: .bumble) }
    /// Issue 29, our central: the Bumble peripheral advertises from its random static address and
    /// distributes a public identity while pairing; the next `central` run finds the bond for the
    /// address it advertises from and encrypts with it; a third, given the distributed identity
    /// with its type (`ADDRESS/public`, as `bonds` prints it), finds the peer by scanning.
    @Test func ourCentralPairsWithBumblePeripheralOfAnotherIdentity() async throws {
        try await ourCentralPairsWithBumblePeripheral(on: .bumble, publicIdentity: "00:1B:DC:07:32:BB")
    }
    func ourCentralPairsWithBumblePeripheral(on kind: ControllerKind, publicIdentity: String? = nil) async throws {
        try await interop(on: kind) { scope in
            let bonds = FileManager.default.temporaryDirectory.appendingPathComponent("smp-interop-\(UUID().uuidString)").path
            let peer = try scope.script("peripheral.py", ["--transport", scope.controllers.bumbleTransport(1), "--name", "bumble-enc",
                                                          "--timeout", "60"] + (publicIdentity.map { ["--public-identity", $0] } ?? []))
            let ready = try await peer.event("ready")
            let ours = try scope.bleHCI(["-t", scope.controllers.transport(0), "central", "name:bumble-enc", "--pair",
                                         "--read", "12345678-1234-5678-1234-56789abcdef4", "--bonds", bonds, "--json"])
            let paired = try await ours.event("paired", timeout: .seconds(30))
            #expect(paired["method"] as? String == "justWorks")
            #expect(paired["secureConnections"] as? Bool == true, "Bumble's PairingConfig defaults to sc=True")
            #expect(paired["keySize"] as? Int == 16)
            let read = try await ours.event("read", timeout: .seconds(10))
            #expect(read["value"] as? String == hex(Array("secret".utf8)))
            #expect(try await ours.exited() == 0, "\(ours.output.suffix(5))")
            #expect(paired["bonded"] as? Bool == true)

            // Again: encrypted from the bond (Bumble finds its key for our EDIV/Rand), no pairing.
            let again = try scope.bleHCI(["-t", scope.controllers.transport(0), "central", "name:bumble-enc",
                                          "--read", "12345678-1234-5678-1234-56789abcdef4", "--bonds", bonds, "--json"])
            let encrypted = try await again.event("encrypted", timeout: .seconds(30))
            #expect(encrypted["bonded"] as? Bool == true)
            #expect(try await again.event("read", timeout: .seconds(10))["value"] as? String == hex(Array("secret".utf8)))
            #expect(try await again.exited() == 0, "\(again.output.suffix(5))")
            #expect(again.all("paired").isEmpty)

            guard let publicIdentity else { return }
            // Filed under the address it paired from, with the identity it distributed beside it.
            let listed = try scope.bleHCI(["bonds", "--bonds", bonds, "--json"])
            let bond = try await listed.event("bond", timeout: .seconds(10))
            #expect(bond["address"] as? String == ready["address"] as? String && bond["addressType"] as? String == "random")
            #expect(bond["identityAddress"] as? String == publicIdentity && bond["identityAddressType"] as? String == "public")
            #expect(try await listed.exited() == 0)
            let byIdentity = try scope.bleHCI(["-t", scope.controllers.transport(0), "central", publicIdentity + "/public",
                                               "--read", "12345678-1234-5678-1234-56789abcdef4", "--bonds", bonds, "--json"])
            let connected = try await byIdentity.event("connected", timeout: .seconds(30))
            #expect(connected["addressType"] as? String == "random", "reached at the address it advertises from")
            #expect(try await byIdentity.event("encrypted", timeout: .seconds(30))["bonded"] as? Bool == true)
            #expect(try await byIdentity.exited() == 0, "\(byIdentity.output.suffix(5))")
            #expect(byIdentity.all("paired").isEmpty)
        }
    }
}

extension SMPInteropTests {
    /// Over Rootcanal (`make rootcanal-test`): pairing through its link-layer encryption, both
    /// roles, LE Secure Connections and legacy; reconnections from the bond, where Bumble (on
    /// Rootcanal's public BD_ADDR) distributes an identity other than the address it pairs from.
    @Suite(.rootcanal) struct OverRootcanal {
        @Test func bumbleCentralJustWorksSecureConnections() async throws {
            try await SMPInteropTests().bumbleCentralJustWorks(legacy: false, on: .rootcanal)
        }
        @Test func bumbleCentralJustWorksLegacy() async throws {
            try await SMPInteropTests().bumbleCentralJustWorks(legacy: true, on: .rootcanal)
        }
        @Test func bumbleCentralReencryptsFromTheBond() async throws {
            try await SMPInteropTests().bumbleCentralReencryptsFromTheBond(on: .rootcanal)
        }
        @Test func ourCentralPairsWithBumblePeripheral() async throws {
            try await SMPInteropTests().ourCentralPairsWithBumblePeripheral(on: .rootcanal)
        }
    }
}
