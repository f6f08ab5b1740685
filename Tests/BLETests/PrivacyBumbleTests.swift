import Foundation
import Synchronization
import Testing
import StackTestSupport
import TestSupport
import Transport
import VirtualController
import SMP
@testable import BLE

/// Issue 30's proof with an independent host: Bumble's (Tools/bumble/privacy_central.py), over
/// our virtual controllers served on H4/TCP as `ble-hci controllers` does, bonds with our privacy
/// peripheral, which then has its controller make its RPA (Own_Address_Type 0x03 naming the
/// bond's resolving list entry, Core v5.4 Vol 4 Part E 7.8.5, 7.8.53) and rotate it every second
/// (7.8.45). Bumble resolves two different RPAs to our identity with the IRK we distributed
/// (its smp.AddressResolver, ah of Vol 3 Part H 2.2.2), connects to the identity and encrypts
/// from the bond, without pairing again.
@Suite(.serialized, .timeLimit(.minutes(1))) struct PrivacyBumbleTests {
    @Test func bumbleFindsAndReconnectsBehindTheControllersRPAs() async throws {
        let link = VirtualLink(mode: .live)
        let server = try H4Server(link: link, listen: ["tcp:127.0.0.1:0", "tcp:127.0.0.1:0"])
        server.start()
        defer { server.stop() }
        var po = StackOptions()
        po.security = SecurityTests.config()
        po.privacy = PrivacyOptions(rotation: .seconds(1))
        let lines = Mutex<[String]>([])
        po.log = { line in lines.withLock { $0.append(line) } }
        let transport = try TCPTransport.connect(host: "127.0.0.1", port: server.listeners[0].port!, timeout: 5)
        let peripheral = try await Peripheral.open(transport, services: SecureProfile.services, name: "private", options: po)
        defer { Task { await peripheral.close() } }
        try await peripheral.startAdvertising(AdvertisingOptions(name: "private"))
        let central = try PythonScript.start("privacy_central.py", ["--transport", "tcp-client:127.0.0.1:\(server.listeners[1].port!)",
                                                                   "--name", "private", "--timeout", "40"])
        defer { central.stop() }
        _ = try await central.nextEvent("connected", timeout: 20)
        let paired = try await central.nextEvent("paired", timeout: 20)
        let privacy = try #require(peripheral.stack.privacy)
        #expect(paired["identityAddress"] as? String == peripheral.identityAddress.address.description)
        #expect(paired["irk"] as? String == privacy.identity.irk.map { String(format: "%02x", $0) }.joined(), "our IRK, as SMP carries it")
        var rpas: [String] = []
        for _ in 0..<2 {
            let resolved = try await central.nextEvent("resolved", timeout: 20)
            rpas.append(try #require(resolved["address"] as? String))
        }
        #expect(Set(rpas).count == 2, "two RPAs: \(rpas)")
        #expect(privacy.controllerEntry.withLock { $0 } != nil, "the controller makes our RPA")
        _ = try await central.nextEvent("reconnected", timeout: 20)
        let encrypted = try await central.nextEvent("encrypted", timeout: 20)
        #expect(encrypted["encrypted"] as? Bool == true, "\(central.output)")
        #expect(try await central.exitStatus(timeout: 10) == 0)
        #expect(!lines.withLock { $0 }.contains { $0.contains("does not make") || $0.contains("resolving list not used") }, "\(lines.withLock { $0 })")
    }

    /// Directed advertising to the bonded Bumble central (ADV_DIRECT_IND, Vol 4 Part E 7.8.5):
    /// our controller puts Bumble's RPA, made from the IRK Bumble distributed, in TargetA;
    /// Bumble, its resolving list in its controller (address_resolution_offload: its own IRK as
    /// the local one), connects to our identity address and encrypts from the bond. Nothing
    /// else advertises: the first advertising does not restart after the pairing link.
    @Test func bumbleConnectsToOurDirectedAdvertising() async throws {
        let link = VirtualLink(mode: .live)
        let server = try H4Server(link: link, listen: ["tcp:127.0.0.1:0", "tcp:127.0.0.1:0"])
        server.start()
        defer { server.stop() }
        var po = StackOptions()
        po.security = SecurityTests.config()
        po.privacy = PrivacyOptions()
        let transport = try TCPTransport.connect(host: "127.0.0.1", port: server.listeners[0].port!, timeout: 5)
        let peripheral = try await Peripheral.open(transport, services: SecureProfile.services, name: "private", options: po)
        defer { Task { await peripheral.close() } }
        let disconnected = Watched(false)
        let watcher = Task { for await e in peripheral.events { if case .disconnected = e { disconnected.withLock { $0 = true } } } }
        defer { watcher.cancel() }
        try await peripheral.startAdvertising(AdvertisingOptions(name: "private", restartAfterDisconnection: false))
        let central = try PythonScript.start("privacy_central.py", ["--transport", "tcp-client:127.0.0.1:\(server.listeners[1].port!)",
                                                                   "--name", "private", "--addresses", "0", "--offload", "--timeout", "40"])
        defer { central.stop() }
        let paired = try await central.nextEvent("paired", timeout: 20)
        let bumble = try #require(paired["ownAddress"] as? String)
        try await disconnected.until("the pairing link down") { $0 }
        let directory = try #require(po.security.bondDirectory)
        let bond = try #require(try await bondsOnDisk(directory, peripheral.identityAddress).bonds().first)
        #expect(bond.peer.address.description == bumble && bond.peerIRK != nil, "Bumble's identity and IRK: \(bond.peer)")
        try await peripheral.startAdvertising(AdvertisingOptions(name: "private", restartAfterDisconnection: false, directedTo: bond.peer))
        _ = try await central.nextEvent("reconnected", timeout: 20)
        #expect(try await central.nextEvent("encrypted", timeout: 20)["encrypted"] as? Bool == true)
        #expect(try await central.exitStatus(timeout: 10) == 0)
    }
}
