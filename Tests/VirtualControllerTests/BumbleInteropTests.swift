import Foundation
import Testing
import HCI
import TestSupport
import VirtualController

/// Issue 3's proof: Bumble's host (not ours) on our controllers, served over H4/TCP as
/// `ble-hci controllers` does. A Bumble peripheral advertises on controller A; a Bumble
/// central scans, connects and discovers GATT on controller B; both see the disconnect.
@Suite(.serialized) struct BumbleInteropTests {
    func run(legacy: Bool) async throws {
        let link = VirtualLink(mode: .live)
        let server = try H4Server(link: link, listen: ["tcp:127.0.0.1:0", "tcp:127.0.0.1:0"])
        server.start()
        defer { server.stop() }
        let a = "tcp-client:127.0.0.1:\(server.listeners[0].port!)"
        let b = "tcp-client:127.0.0.1:\(server.listeners[1].port!)"
        let peripheral = try PythonScript.start("peripheral.py", ["--transport", a, "--name", "vc-peer"] + (legacy ? ["--legacy"] : []))
        defer { peripheral.stop() }
        let ready = try await peripheral.nextEvent("ready", timeout: 20)
        let central = try PythonScript.start("central.py", ["--transport", b, "--name", "vc-peer", "--timeout", "30"])
        defer { central.stop() }
        let connected = try await central.nextEvent("connected", timeout: 20)
        #expect(connected["address"] as? String == ready["address"] as? String)
        let gatt = try await central.nextEvent("gatt", timeout: 20)
        let services = (gatt["services"] as? [[String: Any]] ?? []).compactMap { $0["uuid"] as? String }
        #expect(services.contains("180d"))
        #expect(services.contains("180f"))
        #expect(services.contains("12345678-1234-5678-1234-56789abcdef0"))
        let centralGone = try await central.nextEvent("disconnected", timeout: 10)
        #expect(centralGone["reason"] as? String == "0x16")
        let peripheralGone = try await peripheral.nextEvent("disconnected", timeout: 10)
        #expect(peripheralGone["reason"] as? String == "0x13")
        #expect(try await central.exitStatus(timeout: 10) == 0)
    }

    @Test func bumbleHostsOverOurControllersExtendedAdvertising() async throws { try await run(legacy: false) }
    @Test func bumbleHostsOverOurControllersLegacyAdvertising() async throws { try await run(legacy: true) }
}
