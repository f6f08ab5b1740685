import Foundation
import Testing
import TestSupport

/// Issue 7, the Bumble part: a Bumble central reads our demo peripheral's tree (`ble-hci
/// peripheral --profile demo`), and `ble-hci central` reads a Bumble peripheral's tree.
@Suite(.serialized, .timeLimit(.minutes(2))) struct ProductInteropTests {
    @Test func bumbleCentralReadsOurDemoPeripheral() async throws { try await bumbleCentralReadsOurDemoPeripheral(on: .bumble) }
    func bumbleCentralReadsOurDemoPeripheral(on kind: ControllerKind) async throws {
        try await interop(on: kind) { scope in
            let ours = try scope.bleHCI(["-t", scope.controllers.transport(0), "peripheral", "--profile", "demo", "--json"])
            _ = try await ours.event("advertising", timeout: .seconds(15))
            let bumble = try scope.script("central.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "ble-hci", "--mtu", "247",
                "--read-all", "--write", "ffe1=00", "--timeout", "40"])
            let tree = JSONTree(try await bumble.event("gatt", timeout: .seconds(20)))
            #expect(tree.serviceUUIDs == ["1800", "1801", "fff0", "ffe0"])
            #expect(tree.characteristic("2a00")?["value"] as? String == hex(Array("ble-hci".utf8)))
            #expect(tree.characteristics(of: "fff0").compactMap { $0["uuid"] as? String } == ["fff1", "fff2"])
            let fff1 = try #require(tree.characteristic("fff1"))
            #expect(fff1["properties"] as? [String] == ["notify"])
            #expect(fff1["value"] == nil)
            let fff2 = try #require(tree.characteristic("fff2"))
            #expect(fff2["properties"] as? [String] == ["read", "write"])
            #expect(fff2["value"] as? String == hex(Array("ble-hci".utf8)))
            let descriptors = fff2["descriptors"] as? [[String: Any]] ?? []
            #expect(descriptors.compactMap { $0["uuid"] as? String } == ["2901"])
            #expect(descriptors.first?["value"] as? String == hex(Array("name".utf8)))
            let ffe1 = try #require(tree.characteristic("ffe1"))
            #expect(ffe1["properties"] as? [String] == ["read"])
            #expect(ffe1["value"] as? String == hex(Array("read only".utf8)))
            let refused = try await bumble.event("error")
            #expect(refused["uuid"] as? String == "ffe1" && refused["att"] as? String == "0x03", "\(refused)")
            _ = try await bumble.event("disconnected")
            #expect(try await bumble.exited() == 1)  // the refused write
            // Our peripheral printed the connection and the disconnection.
            _ = try await ours.event("connected")
            _ = try await ours.event("disconnected")
        }
    }

    @Test func ourCentralReadsBumblePeripheralTree() async throws {
        try await interop { scope in
            let peer = try scope.script("peripheral.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "interop-tree", "--timeout", "60"])
            let ready = try await peer.event("ready")
            let central = try scope.bleHCI(["-t", scope.controllers.transport(0), "central", "name:interop-tree", "--json"])
            let status = try await central.exited(within: .seconds(40))
            for line in central.output where !line.isEmpty {
                #expect(ChildProcess.json(line) != nil, "not a JSON line: \(line)")
            }
            let connected = try await central.event("connected", timeout: .seconds(1))
            #expect(connected["address"] as? String == ready["address"] as? String)
            let tree = JSONTree(try await central.event("gatt", timeout: .seconds(1)))
            let custom = "12345678-1234-5678-1234-56789abcdef0"
            #expect(tree.serviceUUIDs == ["1800", "1801", "180d", "180f", custom])
            #expect(tree.characteristics(of: "180d").compactMap { $0["uuid"] as? String } == ["2a37", "2a38"])
            #expect(tree.characteristic("2a37")?["properties"] as? [String] == ["notify"])
            #expect(tree.characteristic("2a38")?["value"] as? String == "01")
            #expect(tree.characteristic("2a19")?["value"] as? String == "64")
            #expect(tree.characteristic("2a00")?["value"] as? String == hex(Array("interop-tree".utf8)))
            #expect(tree.characteristic("12345678-1234-5678-1234-56789abcdef1")?["value"] as? String == hex(bumbleLongValue))
            #expect(tree.characteristic("12345678-1234-5678-1234-56789abcdef2")?["value"] as? String == hex(Array("read only".utf8)))
            // Needs encryption: Bumble answers 0x05/0x0F, the central pairs (Just Works) and retries
            // the read once, as CoreBluetooth does (CLI.md); the value is peripheral.py's.
            #expect(tree.characteristic("12345678-1234-5678-1234-56789abcdef4")?["value"] as? String == hex(Array("secret".utf8)))
            // The handles are Bumble's.
            let database = ready["database"] as? [[String: Any]] ?? []
            #expect(tree.services.compactMap { $0["start"] as? Int } == database.compactMap { $0["start"] as? Int })
            #expect(tree.services.compactMap { $0["end"] as? Int } == database.compactMap { $0["end"] as? Int })
            let cccd = (tree.characteristic("2a37")?["descriptors"] as? [[String: Any]] ?? []).first
            #expect(cccd?["uuid"] as? String == "2902")
            _ = try await central.event("disconnected", timeout: .seconds(1))
            _ = try await peer.event("disconnected")
            #expect(status == 0 || status == 1, "ble-hci central exit \(status): \(central.stderr)")
        }
    }
}

extension ProductInteropTests {
    /// Over Rootcanal (`make rootcanal-test`): `ble-hci peripheral --profile demo` read by Bumble.
    @Suite(.rootcanal) struct OverRootcanal {
        @Test func bumbleCentralReadsOurDemoPeripheral() async throws {
            try await ProductInteropTests().bumbleCentralReadsOurDemoPeripheral(on: .rootcanal)
        }
    }
}
