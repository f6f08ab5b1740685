import Testing
import TestSupport
import VirtualController
@testable import BLE

/// Service Changed received by our client (Core v5.4 Vol 3 Part G 7.1): the indication is
/// handled in the host's isolation, where the link's GATT client lives, and the client
/// rediscovers the changed range there. (The notification handler used to run on the global
/// executor: with a cached table, the rediscovery's first request trapped off the host.)
@Suite(.timeLimit(.minutes(1))) struct ServiceChangedTests {
    @Test func aChangedTableIsRediscoveredAfterTheIndication() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let before = [GATTService(uuid: 0xFFE0, characteristics: [GATTCharacteristic(uuid: 0xFFE1, properties: [.read], value: [0x01])])]
        let after = before + [GATTService(uuid: 0xFFF0, characteristics: [GATTCharacteristic(uuid: 0xFFF1, properties: [.read], value: [0x02])])]
        let peripheral = try await Peripheral.open(transports[0], services: before, name: "changes")
        try await peripheral.startAdvertising(AdvertisingOptions(name: "changes", restartAfterDisconnection: false))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: "changes"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        let tree = try await remote.discoverAll()
        #expect(!tree.contains { $0.service.uuid == 0xFFF0 })
        // Generic Attribute's Service Changed, indicate (Vol 3 Part G 7.1), which the client
        // subscribes to itself.
        let sc = try #require(tree.first { $0.service.uuid == 0x1801 }?.characteristics.map(\.characteristic).first { $0.uuid == 0x2A05 })
        let indications = try await remote.notifications(for: sc)
        var events = peripheral.events.makeAsyncIterator()
        while let e = await events.next() {
            if case .subscribed = e { break }
        }
        // (Taken as it comes: the client confirms an indication once the application has it.)
        let indicated = Task { () -> [UInt8]? in
            for try await v in indications { return v }
            return nil
        }
        let confirmed = await peripheral.server.update(services: after)
        #expect(confirmed.count == 1, "the central confirmed the indication (Vol 3 Part F 3.4.7.3)")
        // The whole range, as our server indicates it after a table replacement.
        #expect(try await indicated.value == [0x01, 0x00, 0xFF, 0xFF])
        let fresh = try await remote.discoverAll()
        let added = try #require(fresh.first { $0.service.uuid == 0xFFF0 }?.characteristics.first?.characteristic)
        #expect(try await remote.read(added) == [0x02])
        await central.close()
        await peripheral.close()
    }
}
