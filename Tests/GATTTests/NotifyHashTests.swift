import Testing
import HCI
import ATT
@testable import GATT

@MainActor @Suite(.timeLimit(.minutes(1))) struct NotificationTests {
    @Test func notificationsAndIndicationsPerPeer() async throws {
        let server = GATTServer(services: demoServices())
        let (c1, l1) = await Loopback.connect(server, id: 1)
        let (c2, l2) = await Loopback.connect(server, id: 2, mtu: 100)
        let t1 = try await c1.discoverDatabase(), t2 = try await c2.discoverDatabase()
        let fff1a = try #require(findChar(t1, 0xFFF1)).characteristic
        let ffe3b = try #require(findChar(t2, 0xFFE3)).characteristic
        let fff1b = try #require(findChar(t2, 0xFFF1)).characteristic
        // Nobody subscribed: nothing is sent.
        #expect(await server.notify(characteristic: 0xFFF1, value: [1]).isEmpty)
        let s1 = Values(try await c1.subscribe(fff1a))
        #expect(server.subscribers(of: 0xFFF1) == [l1.peer])
        // Only peer 1 enabled notifications of FFF1.
        #expect(await server.notify(characteristic: 0xFFF1, value: Array("42".utf8)) == [l1.peer])
        #expect(try await next(s1) == Array("42".utf8))
        // Peer 2 subscribes too: both get it; each reads back its own CCCD.
        let s2 = Values(try await c2.subscribe(fff1b))
        #expect(await server.notify(characteristic: 0xFFF1, value: [7]) == [l1.peer, l2.peer])
        #expect(try await next(s1) == [7])
        #expect(try await next(s2) == [7])
        // Restricting to one peer.
        #expect(await server.notify(characteristic: 0xFFF1, value: [8], to: [l2.peer]) == [l2.peer])
        #expect(try await next(s2) == [8])
        // Indications on FFE3 for peer 2 only; confirmed before indicate returns.
        let i2 = Values(try await c2.subscribe(ffe3b, indications: true))
        let cccd = try #require(findChar(t2, 0xFFE3)?.descriptors.first).handle
        #expect(try await c2.read(handle: cccd) == [0x02, 0x00])
        #expect(try await c1.read(handle: cccd) == [0x00, 0x00])
        #expect(await server.notify(characteristic: 0xFFE3, value: [1]).isEmpty)
        // Confirmed once the application has taken the value (see IndicationDeliveryTests).
        let indicated = Task { await server.indicate(characteristic: 0xFFE3, value: [5, 6]) }
        #expect(try await next(i2) == [5, 6])
        #expect(await indicated.value == [l2.peer])
        #expect(l2.confirmations == 1 && l1.confirmations == 0)
        // Values are truncated to ATT_MTU − 3 per peer.
        let big = [UInt8](repeating: 0x33, count: 200)
        #expect(await server.notify(characteristic: 0xFFF1, value: big) == [l1.peer, l2.peer])
        #expect(try await next(s1).count == 20)
        #expect(try await next(s2).count == 97)
        // Unsubscribe: peer 1 stops receiving; its stream ends.
        try await c1.unsubscribe(fff1a)
        #expect(try await s1.next() == nil)
        #expect(await server.notify(characteristic: 0xFFF1, value: [9]) == [l2.peer])
        // A disconnected peer's state is dropped.
        await server.peerDisconnected(l2.peer)
        #expect(await server.notify(characteristic: 0xFFF1, value: [9]).isEmpty)
        #expect(server.subscribers(of: 0xFFF1).isEmpty)
    }

    /// The peers a push reaches follow the CCCDs through reconnections and a new table: a
    /// non-bonded peer's CCCD is 0x0000 again on a new connection (Core v5.4 Vol 3 Part G
    /// 3.3.3.3), and `update(services:)` clears every CCCD but Service Changed's.
    @Test func pushTargetsFollowConnectionsAndTableUpdates() async throws {
        let server = GATTServer(services: demoServices())
        let (c9, l9) = await Loopback.connect(server, id: 9)
        let (c3, l3) = await Loopback.connect(server, id: 3)
        let t9 = try await c9.discoverDatabase(), t3 = try await c3.discoverDatabase()
        let s9 = Values(try await c9.subscribe(try #require(findChar(t9, 0xFFF1)).characteristic))
        let s3 = Values(try await c3.subscribe(try #require(findChar(t3, 0xFFF1)).characteristic))
        // In connection-handle order, whatever the order the peers subscribed in.
        #expect(await server.notify(characteristic: 0xFFF1, value: [1]) == [l3.peer, l9.peer])
        #expect(try await next(s3) == [1])
        #expect(try await next(s9) == [1])
        // Peer 9 goes; a new connection with the same handle has not subscribed.
        await server.peerDisconnected(l9.peer)
        let (_, l9again) = await Loopback.connect(server, id: 9)
        #expect(await server.notify(characteristic: 0xFFF1, value: [2]) == [l3.peer])
        #expect(try await next(s3) == [2])
        #expect(l9again.notifications == 0)
        // A new table with a service before FFF0: FFF1 moves; its old subscription is gone.
        let oldHandle = try #require(server.valueHandle(of: 0xFFF1))
        var services = demoServices()
        services.insert(GATTService(uuid: 0xFFC0, characteristics: [GATTCharacteristic(uuid: 0xFFC1, properties: .read, value: [0xC1])]), at: 0)
        _ = await server.update(services: services)
        #expect(try #require(server.valueHandle(of: 0xFFF1)) != oldHandle)
        #expect(await server.notify(characteristic: 0xFFF1, value: [3]).isEmpty)
        #expect(server.subscribers(of: 0xFFF1).isEmpty)
        // A peer subscribing in the new table gets the value at the new value handle.
        let (c5, l5) = await Loopback.connect(server, id: 5)
        let s5 = Values(try await c5.subscribe(try #require(findChar(try await c5.discoverDatabase(), 0xFFF1)).characteristic))
        #expect(await server.notify(characteristic: 0xFFF1, value: [4]) == [l5.peer])
        #expect(try await next(s5) == [4])
    }

    /// The client routes each notification by its attribute handle (Core v5.4 Vol 3 Part F
    /// 3.4.7.1) to that characteristic's subscription, however many there are and in whatever
    /// order they were made.
    @Test func clientRoutesEachSubscriptionByHandle() async throws {
        let server = GATTServer(services: demoServices())
        let (client, _) = await Loopback.connect(server)
        let tree = try await client.discoverDatabase()
        let ffe3 = try #require(findChar(tree, 0xFFE3)).characteristic
        let fff1 = try #require(findChar(tree, 0xFFF1)).characteristic
        #expect(ffe3.valueHandle > fff1.valueHandle)
        let sHigh = Values(try await client.subscribe(ffe3))  // the higher handle first
        let sLow = Values(try await client.subscribe(fff1))
        #expect(await server.notify(characteristic: 0xFFF1, value: [0x11]).count == 1)
        #expect(await server.notify(characteristic: 0xFFE3, value: [0xE3]).count == 1)
        #expect(try await next(sLow) == [0x11])
        #expect(try await next(sHigh) == [0xE3])
        try await client.unsubscribe(ffe3)
        #expect(await server.notify(characteristic: 0xFFF1, value: [0x12]).count == 1)
        #expect(try await next(sLow) == [0x12])
        #expect(try await sHigh.next() == nil)
    }

    @Test func subscriptionEvents() async throws {
        let server = GATTServer(services: demoServices())
        let (client, link) = await Loopback.connect(server)
        #expect(try await next(server.events) == .connected(link.peer))
        let fff1 = try #require(try await client.discoverCharacteristics(of: GATTRemoteService(uuid: 0xFFF0, startHandle: 1, endHandle: 0xFFFF), uuid: 0xFFF1).first)
        _ = try await client.subscribe(fff1)
        // Discovery reads produce read events for characteristic values? No: discovery reads declarations only.
        var e = try await next(server.events)
        while case .read = e { e = try await next(server.events) }
        #expect(e == .subscribed(link.peer, 0xFFF1, indications: false))
        try await client.unsubscribe(fff1)
        #expect(try await next(server.events) == .unsubscribed(link.peer, 0xFFF1))
        await #expect(throws: GATTClientError.notSubscribable(0xFFF2)) {
            let c = try #require(try await client.discoverCharacteristics(of: GATTRemoteService(uuid: 0xFFF0, startHandle: 1, endHandle: 0xFFFF), uuid: 0xFFF2).first)
            _ = try await client.subscribe(c)
        }
    }

    @Test func multipleHandleValueNotificationReachesSubscribers() async throws {
        let server = GATTServer(services: demoServices())
        let (client, _) = await Loopback.connect(server)
        let tree = try await client.discoverDatabase()
        let a = try #require(findChar(tree, 0xFFF1)).characteristic, b = try #require(findChar(tree, 0xFFE3)).characteristic
        let sa = Values(try await client.subscribe(a)), sb = Values(try await client.subscribe(b))
        await client.received(.multipleHandleValueNotification([ATTHandleValue(handle: a.valueHandle, value: [1]),
                                                                ATTHandleValue(handle: b.valueHandle, value: [2, 2])]))
        #expect(try await next(sa) == [1])
        #expect(try await next(sb) == [2, 2])
    }
}

@MainActor @Suite(.timeLimit(.minutes(1))) struct DatabaseHashTests {
    // AES-CMAC itself (OpenSSLCrypto.AES128.cmac) is checked against RFC 4493 in SMPCryptoTests.

    @Test func hashOfTheMandatoryDatabase() async throws {
        let server = GATTServer(services: [], configuration: .init(deviceName: "dev"))
        // The message, built by hand from Core Vol 3 Part G 7.3.1 for handles 1–13.
        let expectedMessage = [UInt8](hex: "010000280018" + "02000328020300002a" + "04000328020500012a"
            + "060000280118" + "07000328200800052a" + "09000229" + "0a0003280a0b00292b" + "0c000328020d002a2b")!
        let table = AttributeTable(deviceName: "dev", appearance: 0, services: [])
        #expect(GATTDatabaseHash.message(table.attributes.map { ($0.handle, $0.type, $0.value) }) == expectedMessage)
        // Expected CMAC computed independently: `openssl mac -cipher AES-128-CBC -macopt hexkey:00…00 CMAC`.
        let cmac = [UInt8](hex: "16ce756326c5062bf74022f845c2b21f")!
        #expect(server.databaseHash == Array(cmac.reversed()))
        let (client, _) = await Loopback.connect(server)
        #expect(try await client.readByUUID(0x2B2A) == [ATTHandleValue(handle: 13, value: Array(cmac.reversed()))])
        // Values that aren't hashed (Device Name) don't change it; structure does.
        #expect(GATTServer(services: [], configuration: .init(deviceName: "other")).databaseHash == server.databaseHash)
        #expect(GATTServer(services: demoServices()).databaseHash != server.databaseHash)
    }

    /// The hash is computed on first use, not when the table is built (an idle server never
    /// starts OpenSSL): a server whose first request reads the hash over the air answers the
    /// same CMAC as above, and the table alone holds none yet.
    @Test func hashIsComputedOnFirstUse() async throws {
        var table = AttributeTable(deviceName: "dev", appearance: 0, services: [])
        #expect(table.hash.isEmpty)
        table.computeHashIfNeeded()
        let cmac = Array([UInt8](hex: "16ce756326c5062bf74022f845c2b21f")!.reversed())
        #expect(table.hash == cmac)
        #expect(table.attributes.first { $0.type == GATTUUID.databaseHash && $0.isCharacteristicValue }?.value == cmac)
        let (client, _) = await Loopback.connect(GATTServer(services: [], configuration: .init(deviceName: "dev")))
        #expect(try await client.readByUUID(0x2B2A) == [ATTHandleValue(handle: 13, value: cmac)])
    }

    @Test func serviceChangedUpdatesTheClientCache() async throws {
        let server = GATTServer(services: demoServices())
        let (client, link) = await Loopback.connect(server)
        let before = try await client.discoverDatabase()
        let sc = try #require(findChar(before, 0x2A05)).characteristic
        _ = try await client.subscribe(sc)  // indicate-only → writes 0x0002
        #expect(server.subscribers(of: 0x2A05, indications: true) == [link.peer])
        let oldHash = server.databaseHash
        var services = demoServices()
        services.append(GATTService(uuid: 0xFFC0, characteristics: [GATTCharacteristic(uuid: 0xFFC1, properties: .read, value: [0xC1])]))
        #expect(await server.update(services: services) == [link.peer])
        #expect(server.databaseHash != oldHash)
        #expect(link.confirmations == 1)
        #expect(try await next(client.serviceChanges) == 1...0xFFFF)
        let after = try #require(await client.cachedDatabase)
        #expect(after.map(\.service.uuid).last == 0xFFC0)
        #expect(try await client.validateCache())
        let ffc1 = try #require(findChar(after, 0xFFC1)).characteristic
        #expect(try await client.read(ffc1) == [0xC1])
    }

    @Test func hashChangeInvalidatesTheCache() async throws {
        let server = GATTServer(services: demoServices())
        let (client, _) = await Loopback.connect(server)
        _ = try await client.discoverDatabase()
        #expect(try await client.validateCache())
        // Nobody subscribed to Service Changed: only the hash tells.
        _ = await server.update(services: [])
        #expect(try await client.validateCache() == false)
        #expect(await client.cachedDatabase == nil)
        #expect(try await client.discoverDatabase().map(\.service.uuid) == [0x1800, 0x1801])
    }
}

@MainActor @Suite(.timeLimit(.minutes(1))) struct CharacteristicDeclarationTests {
    @Test func roundTripsAndRejectsBadLengths() throws {
        // Core Vol 3 Part G 3.3.1: properties 0x12 (read, notify), value handle 0x0003, UUID 0x2A37.
        let bytes: [UInt8] = [0x12, 0x03, 0x00, 0x37, 0x2A]
        let d = try GATTCharacteristicDeclaration(value: bytes)
        #expect(d == GATTCharacteristicDeclaration(properties: [.read, .notify], valueHandle: 3, uuid: 0x2A37))
        #expect(d.value == bytes)
        #expect(throws: DecodeError.self) { try GATTCharacteristicDeclaration(value: Array(bytes.prefix(4))) }
        #expect(throws: DecodeError.self) { try GATTCharacteristicDeclaration(value: bytes + [0]) }
    }
}
