import Foundation
import Testing
import TestSupport
import BLE
import GATT
import ATT
import HCI

/// Issue 30: Enhanced ATT bearers (Core v5.4 Vol 3 Part G 5.3.2; enhanced credit-based channels
/// on PSM 0x0027, Part A 4.25) against Bumble's EATT, both ways: our central opens two bearers to
/// Bumble's GATT server (Tools/bumble/peripheral.py --eatt) and its requests arrive on both, by
/// Bumble's own account; Bumble's central (Tools/bumble/eatt_central.py) opens two to our
/// peripheral and reads our database on each.
@Suite(.serialized, .timeLimit(.minutes(2))) struct EATTInteropTests {
    @Test func ourCentralSpreadsRequestsOverBumblesEnhancedBearers() async throws {
        try await interop { scope in
            let peer = try scope.script("peripheral.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "eatt-peer", "--eatt", "--timeout", "80"])
            _ = try await peer.event("ready")
            let central = try await scope.central(on: 0)
            let adv = try await central.find(ScanFilter(nameContains: "eatt-peer"), timeout: .seconds(10))
            let remote = try await central.connect(to: adv.address, timeout: .seconds(10))
            let opened = try await remote.openEnhancedATT(count: 2)
            // Both bearers; ATT_MTU the smaller MTU of ours (517) and Bumble's EATT server's
            // (its LeCreditBasedChannelSpec default, 2048): Part F 3.2.8.
            #expect(opened.bearers == 2 && opened.mtu == 517)
            let tree = try await remote.discoverAll()
            let long = try #require(tree.flatMap(\.characteristics).first {
                $0.characteristic.uuid == BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef1")!
            }?.characteristic)
            // Reads in parallel: each bearer has one request outstanding (Part F 3.3.2), so two
            // at once go out on both. The value is peripheral.py's: 600 octets, octet i = i % 256
            // (a long read: Read Blob over an ATT_MTU of the channels' MTUs, Part F 3.2.8).
            // Bits 1 and 2 of Bumble's Client Supported Features, set as the bearers opened
            // (Part G 7.2), read back from Bumble.
            let clientFeatures = try #require(tree.flatMap(\.characteristics).first { $0.characteristic.uuid == 0x2B29 }?.characteristic)
            #expect(try await remote.read(clientFeatures) == [0x06])
            let expected = (0..<600).map { UInt8($0 % 256) }
            try await withThrowingTaskGroup(of: [UInt8].self) { group in
                for _ in 0..<4 { group.addTask { try await remote.read(long) } }
                for try await value in group { #expect(value == expected) }
            }
            // Read Multiple Variable Length (Part G 4.8.5) on an Enhanced ATT bearer: Bumble's
            // values of 2a38 (01) and the Battery Level 2a19 (64), as peripheral.py serves them.
            let chars = tree.flatMap(\.characteristics).map(\.characteristic)
            let pair = try ([0x2A38, 0x2A19] as [BluetoothUUID]).map { u in try #require(chars.first { $0.uuid == u }, "no \(u)") }
            #expect(try await remote.readValues(of: pair) == [[0x01], [0x64]])
            let requests = try await peer.firstEvents("eattRequest", 8, timeout: .seconds(10))
            #expect(requests.contains { $0["opcode"] as? String == "ATT_Read_Multiple_Variable_Request" }, "\(requests.map { $0["opcode"] ?? "" })")
            let cids = Set(requests.compactMap { $0["cid"] as? Int })
            #expect(cids.count == 2, "Bumble saw requests on bearers \(cids)")
            // Bumble does not take a Credit Based Reconfigure Request (Part A 4.27): it answers
            // Command Reject, "command not understood" (4.1), and the bearers go on as they were.
            do {
                try await remote.reconfigureEnhancedATT(mtu: 600)
                Issue.record("Bumble accepted a Credit Based Reconfigure Request")
            } catch let error as BLEError {
                #expect("\(error)".contains("Command not understood"), "\(error)")
            }
            #expect(try await remote.read(long) == expected)
        }
    }

    /// Indications Bumble sends on an Enhanced ATT bearer are confirmed on that bearer (Part F
    /// 3.4.7.3): Bumble prints "indicated" only once it has the confirmation. Its notifications
    /// come on an Enhanced ATT bearer too: Bumble keeps subscriptions per bearer and our CCCD
    /// write went over one (its "eattRequest" events), so it notifies there, and our client
    /// takes them (notifications may come on any bearer, Part G 4.10).
    @Test func indicationsOverEnhancedBearersAreConfirmed() async throws {
        try await interop { scope in
            let peer = try scope.script("peripheral.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "eatt-ind", "--eatt",
                "--notify-count", "3", "--notify-interval", "0.05", "--timeout", "80"])
            _ = try await peer.event("ready")
            let central = try await scope.central(on: 0)
            let adv = try await central.find(ScanFilter(nameContains: "eatt-ind"), timeout: .seconds(10))
            let remote = try await central.connect(to: adv.address, timeout: .seconds(10))
            _ = try await remote.openEnhancedATT(count: 2)
            let tree = try await remote.discoverAll()
            let indicate = try #require(tree.flatMap(\.characteristics).first {
                $0.characteristic.uuid == BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef5")!
            }?.characteristic)
            let values = try await remote.notifications(for: indicate)
            let got = try await withTimeout(.seconds(10), "3 indications") {
                var got: [[UInt8]] = []
                for try await v in values {
                    got.append(v)
                    if got.count == 3 { break }
                }
                return got
            }
            #expect(got == [[1], [2], [3]])
            // Heart Rate Measurement (2a37): peripheral.py notifies 00 3c, 00 3d, 00 3e.
            let heartRate = try #require(tree.flatMap(\.characteristics).first { $0.characteristic.uuid == 0x2A37 }?.characteristic)
            let notified = try await remote.notifications(for: heartRate)
            let beats = try await withTimeout(.seconds(10), "3 notifications") {
                var got: [[UInt8]] = []
                for try await v in notified {
                    got.append(v)
                    if got.count == 3 { break }
                }
                return got
            }
            #expect(beats == [[0x00, 0x3C], [0x00, 0x3D], [0x00, 0x3E]])
            // Client Supported Features and both CCCDs (at least) were written over the bearers.
            #expect(peer.all("eattRequest").filter { $0["opcode"] as? String == "ATT_Write_Request" }.count >= 3, "\(peer.all("eattRequest"))")
            let third = try await peer.event("indicated", index: 2)
            #expect(third["confirmed"] as? Bool == true)
            #expect(peer.all("indicationFailed").isEmpty)
            // The CCCD write and the confirmations went over the Enhanced ATT bearers.
            let opcodes = peer.all("eattRequest").compactMap { $0["opcode"] as? String }
            #expect(opcodes.contains("ATT_Handle_Value_Confirmation"), "\(opcodes)")
        }
    }

    @Test func bumblesCentralOpensEnhancedBearersToOurPeripheral() async throws {
        try await interop { scope in
            var options = Scope.stackOptions
            options.enhancedATT = true
            let service = GATTService(uuid: 0xFFE0, characteristics: [
                GATTCharacteristic(uuid: 0xFFE1, properties: .read, value: Array("on every bearer".utf8)),
            ])
            let (peripheral, _) = try await scope.peripheral(on: 0, services: [service], name: "eatt-ours", options: options)
            try await peripheral.startAdvertising(AdvertisingOptions(name: "eatt-ours"))
            let address = await peripheral.address
            let bumble = try scope.script("eatt_central.py", [
                "--transport", scope.controllers.bumbleTransport(1),
                "--connect", "\(address.address)/\(address.type == .public ? "public" : "random")",
                "--bearers", "2", "--read", "ffe1", "--timeout", "60"])
            // Server Supported Features: bit 0, EATT supported (Part G 7.4).
            let features = try await bumble.event("serverFeatures", timeout: .seconds(30))
            #expect(features["value"] as? String == "01")
            let eatt = try await bumble.event("eatt", timeout: .seconds(20))
            #expect((eatt["cids"] as? [Int])?.count == 2)
            // Our receive MTU (4.26: at least 64).
            let reads = try await bumble.firstEvents("read", 2, timeout: .seconds(20))
            #expect(Set(reads.compactMap { $0["cid"] as? Int }).count == 2)
            for r in reads { #expect(r["value"] as? String == Array("on every bearer".utf8).map { String(format: "%02x", $0) }.joined()) }
            let services = try await bumble.firstEvents("services", 2, timeout: .seconds(5))
            for s in services { #expect((s["uuids"] as? [String])?.contains { $0.uppercased().contains("FFE0") } == true, "\(s)") }
            _ = try await bumble.event("done", timeout: .seconds(10))
        }
    }

    /// Our server pushes on an Enhanced ATT bearer (notifications on any bearer, Core v5.4 Vol 3
    /// Part G 4.10; an indication confirmed on its own bearer, Part F 3.4.7.3): Bumble's central
    /// subscribes on both of its bearers and reports by CID where each value arrived; our
    /// indication counts as confirmed only once Bumble's confirmation came on that bearer.
    /// Bumble never sets bit 2 of Client Supported Features (Part G 7.2), so values pushed
    /// together reach it as separate Handle Value Notifications (Part F 3.4.7.4 is only for a
    /// client that set it).
    @Test func ourPeripheralPushesOnBumblesEnhancedBearers() async throws {
        try await interop { scope in
            var options = Scope.stackOptions
            options.enhancedATT = true
            let service = GATTService(uuid: 0xFFE0, characteristics: [
                GATTCharacteristic(uuid: 0xFFE2, properties: .notify),
                GATTCharacteristic(uuid: 0xFFE3, properties: .indicate),
                GATTCharacteristic(uuid: 0xFFE5, properties: .notify),
            ])
            let (peripheral, _) = try await scope.peripheral(on: 0, services: [service], name: "eatt-push", options: options)
            try await peripheral.startAdvertising(AdvertisingOptions(name: "eatt-push"))
            let address = await peripheral.address
            let bumble = try scope.script("eatt_central.py", [
                "--transport", scope.controllers.bumbleTransport(1),
                "--connect", "\(address.address)/\(address.type == .public ? "public" : "random")",
                "--bearers", "2", "--subscribe", "ffe2", "--subscribe", "ffe3", "--subscribe", "ffe5", "--values", "4", "--timeout", "60"])
            let eatt = try await bumble.event("eatt", timeout: .seconds(30))
            let cids = Set(try #require(eatt["cids"] as? [Int]))
            _ = try await bumble.event("subscribed", timeout: .seconds(20))
            try await peripheral.until("three subscriptions") { p in
                [0xFFE2, 0xFFE3, 0xFFE5].allSatisfy { !p.subscribers(of: BluetoothUUID($0 as UInt16)).isEmpty }
            }
            let reached = try await peripheral.notify([0x5A], for: BluetoothUUID(0xFFE2 as UInt16))
            #expect(try await peripheral.indicate([0xA5], for: BluetoothUUID(0xFFE3 as UInt16)) == reached)
            #expect(await peripheral.notifyMultiple([(BluetoothUUID(0xFFE2 as UInt16), [0x01]), (BluetoothUUID(0xFFE5 as UInt16), [0x02])]) == reached)
            let pushed = try await bumble.firstEvents("pushed", 4, timeout: .seconds(10))
            let notification = "ATT_Handle_Value_Notification"
            #expect(pushed.map { $0["opcode"] as? String } == [notification, "ATT_Handle_Value_Indication", notification, notification], "\(pushed)")
            #expect(pushed.map { $0["value"] as? String } == ["5a", "a5", "01", "02"])
            for p in pushed { #expect(cids.contains(p["cid"] as? Int ?? -1), "\(p) not on the bearers \(cids)") }
            _ = try await bumble.event("done", timeout: .seconds(10))
        }
    }

    /// Credit Based Reconfigure Request (Core v5.4 Vol 3 Part A 4.27) from Bumble's central for
    /// both its bearers, opened with MTU 100: we answer result 0x0000 (4.28), and our server's
    /// ATT_MTU on the bearers follows the new MTU (Part G 5.3.1: the smaller of the channel's
    /// MTUs), so a Read Response to a 600-octet value carries ATT_MTU − 1 octets (Part F
    /// 3.4.4.4): 99 before, 299 after, as Bumble counts them. Bumble's client also sends an
    /// Exchange MTU Request on a bearer (Part F 3.4.2.1: not sent on an Enhanced ATT bearer,
    /// whose ATT_MTU follows its channel, Part F 3.2.8): our server answers Request Not
    /// Supported (0x06, Part F 3.4.1.1: a request this bearer does not take) and the bearer's
    /// ATT_MTU stays (Bumble's own server would answer it and change its bearer's ATT_MTU).
    @Test func reconfigurationRaisesTheBearersMTUAndExchangeMTUIsRefused() async throws {
        try await interop { scope in
            var options = Scope.stackOptions
            options.enhancedATT = true
            let service = GATTService(uuid: 0xFFE0, characteristics: [
                GATTCharacteristic(uuid: 0xFFE4, properties: .read, value: (0..<600).map { UInt8($0 % 256) }),
            ])
            let (peripheral, _) = try await scope.peripheral(on: 0, services: [service], name: "eatt-mtu", options: options)
            try await peripheral.startAdvertising(AdvertisingOptions(name: "eatt-mtu"))
            let address = await peripheral.address
            let bumble = try scope.script("eatt_central.py", [
                "--transport", scope.controllers.bumbleTransport(1),
                "--connect", "\(address.address)/\(address.type == .public ? "public" : "random")",
                "--bearers", "2", "--mtu", "100", "--read-first", "ffe4", "--exchange-mtu", "517", "--reconfigure", "300",
                "--timeout", "60"])
            let before = try await bumble.firstEvents("readFirst", 2, timeout: .seconds(30))
            #expect(before.map { $0["length"] as? Int } == [99, 99])
            let exchange = try await bumble.event("exchangeMTU", timeout: .seconds(10))
            #expect(exchange["error"] as? Int == 0x06, "\(exchange)")
            let unchanged = try await bumble.event("readFirst", index: 2, timeout: .seconds(10))
            #expect(unchanged["length"] as? Int == 99)
            let answer = try await bumble.event("reconfigured", timeout: .seconds(10))
            #expect(answer["result"] as? Int == 0)
            let after = try await bumble.firstEvents("readFirst", 5, timeout: .seconds(10)).dropFirst(3)
            #expect(after.map { $0["length"] as? Int } == [299, 299])
            _ = try await bumble.event("done", timeout: .seconds(10))
        }
    }

    /// Part G 5.3.2 / Part A 4.26: on a link that is not encrypted our peripheral refuses the
    /// bearers (result 0x0008, insufficient encryption), which Bumble reports as a failure.
    @Test func ourPeripheralRefusesEnhancedBearersOnAnUnencryptedLink() async throws {
        try await interop { scope in
            var options = Scope.stackOptions
            options.enhancedATT = true
            let (peripheral, _) = try await scope.peripheral(on: 0, services: [], name: "eatt-plain", options: options)
            try await peripheral.startAdvertising(AdvertisingOptions(name: "eatt-plain"))
            let address = await peripheral.address
            let bumble = try scope.script("eatt_central.py", [
                "--transport", scope.controllers.bumbleTransport(1),
                "--connect", "\(address.address)/\(address.type == .public ? "public" : "random")",
                "--bearers", "2", "--no-pair", "--timeout", "60"])
            let failed = try await bumble.event("eattFailed", timeout: .seconds(30))
            #expect((failed["message"] as? String)?.lowercased().contains("encryption") == true, "\(failed)")
        }
    }
}

extension ChildProcess {
    /// Waits for `count` events named `event`; returns all of them so far.
    func firstEvents(_ event: String, _ count: Int, timeout: Duration) async throws -> [[String: Any]] {
        _ = try await self.event(event, index: count - 1, timeout: timeout)
        return all(event)
    }
}
