import Testing
import Synchronization
import HCI
import ATT
@testable import GATT

let long600: [UInt8] = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }

/// CLI.md's demo profile plus characteristics for long values, permissions and handlers.
final class Store: Sendable {
    let m: Mutex<[UInt8]>
    init(_ v: [UInt8]) { m = Mutex(v) }
    var value: [UInt8] { m.withLock { $0 } }
}

func demoServices(handlerValue: Store? = nil) -> [GATTService] {
    [
        GATTService(uuid: 0xFFF0, characteristics: [
            GATTCharacteristic(uuid: 0xFFF1, properties: .notify, permissions: [], value: []),
            GATTCharacteristic(uuid: 0xFFF2, properties: [.read, .write], value: Array("ble-hci".utf8),
                               descriptors: [.userDescription("name")]),
        ]),
        GATTService(uuid: 0xFFE0, includes: [0xFFF0], characteristics: [
            GATTCharacteristic(uuid: 0xFFE1, properties: .read, value: Array("read only".utf8)),
            GATTCharacteristic(uuid: 0xFFE2, properties: [.read, .write, .extendedProperties], value: long600,
                               maximumLength: 1024, descriptors: [.extendedProperties(reliableWrite: true)]),
            GATTCharacteristic(uuid: 0xFFE3, properties: [.read, .indicate, .notify], value: [1, 2, 3]),
        ]),
        GATTService(uuid: BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!, characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef1")!,
                               properties: [.read, .writeWithoutResponse], value: [9]),
        ]),
        GATTService(uuid: 0xFFD0, characteristics: [
            GATTCharacteristic(uuid: 0xFFD1, properties: [.read, .write],
                               permissions: [.readable, .writable, .readEncryptionRequired, .writeEncryptionRequired],
                               value: [1], minimumKeySize: 16),
            GATTCharacteristic(uuid: 0xFFD2, properties: [.read, .write],
                               permissions: [.readable, .writable, .readAuthenticationRequired, .writeAuthenticationRequired],
                               value: [2]),
            GATTCharacteristic(uuid: 0xFFD3, properties: [.read],
                               permissions: [.readable, .readAuthorizationRequired], value: [3]),
            GATTCharacteristic(uuid: 0xFFD4, properties: [.read, .write], // handler-backed
                               read: { ctx in
                                   if ctx.peer.id == 0x99 { throw ATTError.rejecting(.application(0x05)) }
                                   return handlerValue?.value ?? [0xAA]
                               },
                               write: { _, v in
                                   if v == [0xFF] { throw ATTError.rejecting(.valueNotAllowed) }
                                   handlerValue?.m.withLock { $0 = v }
                               }, maximumLength: 4),
            GATTCharacteristic(uuid: 0xFFD5, properties: .write, value: []),
        ]),
    ]
}

func findChar(_ tree: [GATTRemoteServiceTree], _ uuid: BluetoothUUID) -> GATTRemoteServiceTree.Characteristic? {
    tree.flatMap(\.characteristics).first { $0.characteristic.uuid == uuid }
}

@Suite struct DiscoveryTests {
    @Test func mandatoryServicesAndLayout() async throws {
        let server = GATTServer(services: [], configuration: .init(deviceName: "dev", appearance: 0x03C1))
        let (client, _) = await Loopback.connect(server)
        let services = try await client.discoverServices()
        #expect(services == [GATTRemoteService(uuid: 0x1800, startHandle: 1, endHandle: 5),
                             GATTRemoteService(uuid: 0x1801, startHandle: 6, endHandle: 13)])
        let chars = try await client.discoverCharacteristics(of: services[1])
        #expect(chars.map(\.uuid) == [0x2A05, 0x2B29, 0x2B2A])
        #expect(chars[0].properties == .indicate && chars[0].valueHandle == 8 && chars[0].endHandle == 9)
        #expect(try await client.discoverDescriptors(of: chars[0]) == [GATTRemoteDescriptor(uuid: 0x2902, handle: 9)])
        #expect(try await client.read(handle: 3) == Array("dev".utf8))
        #expect(try await client.read(handle: 5) == [0xC1, 0x03])
        #expect(try await client.read(handle: 13) == server.databaseHash)
        // Service Changed is indicate-only: not readable.
        #expect(await attCode { _ = try await client.read(handle: 8) } == .readNotPermitted)
    }

    @Test(arguments: [23, 517]) func fullDiscovery(mtu: Int) async throws {
        let server = GATTServer(services: demoServices())
        let (client, _) = await Loopback.connect(server, mtu: mtu)
        let tree = try await client.discoverDatabase()
        #expect(tree.map(\.service.uuid) == [0x1800, 0x1801, 0xFFF0, 0xFFE0,
                                             BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!, 0xFFD0])
        // Handles are contiguous and assigned in order.
        for (a, b) in zip(tree, tree.dropFirst()) { #expect(b.service.startHandle == a.service.endHandle + 1) }
        let fff1 = try #require(findChar(tree, 0xFFF1))
        #expect(fff1.descriptors.map(\.uuid) == [0x2902])
        let fff2 = try #require(findChar(tree, 0xFFF2))
        #expect(fff2.characteristic.properties == [.read, .write])
        #expect(fff2.descriptors.map(\.uuid) == [0x2901])
        #expect(try await client.read(handle: fff2.descriptors[0].handle) == Array("name".utf8))
        let ffe2 = try #require(findChar(tree, 0xFFE2))
        #expect(ffe2.descriptors.map(\.uuid) == [0x2900])
        #expect(try await client.read(handle: ffe2.descriptors[0].handle) == [0x01, 0x00])
        let ffe3 = try #require(findChar(tree, 0xFFE3))
        #expect(ffe3.descriptors.map(\.uuid) == [0x2902])
        // Included service: FFE0 includes FFF0.
        let ffe0 = try #require(tree.first { $0.service.uuid == 0xFFE0 })
        let fff0 = try #require(tree.first { $0.service.uuid == 0xFFF0 })
        #expect(ffe0.includedServices == [GATTRemoteService(uuid: 0xFFF0, primary: false,
                                                            startHandle: fff0.service.startHandle, endHandle: fff0.service.endHandle)])
        // By UUID, 16- and 128-bit.
        #expect(try await client.discoverServices(uuid: 0xFFE0) == [ffe0.service])
        let u128 = BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!
        #expect(try await client.discoverServices(uuid: u128).map(\.uuid) == [u128])
        #expect(try await client.discoverServices(uuid: 0xABCD).isEmpty)
        // Characteristics by UUID.
        #expect(try await client.discoverCharacteristics(of: ffe0.service, uuid: 0xFFE3).map(\.uuid) == [0xFFE3])
        // The cache answers the second time without requests.
        #expect(try await client.discoverDatabase() == tree)
        #expect(try await client.validateCache())
    }

    @Test func includedServiceWith128BitUUID() async throws {
        let u = BluetoothUUID(string: "0000aaaa-1111-2222-3333-444455556666")!
        let server = GATTServer(services: [
            GATTService(uuid: u, primary: false, characteristics: [GATTCharacteristic(uuid: 0xAAA1, properties: .read, value: [1])]),
            GATTService(uuid: 0xBBB0, includes: [u], characteristics: []),
        ])
        let (client, _) = await Loopback.connect(server)
        let services = try await client.discoverServices()
        // The secondary service is not found by primary discovery.
        #expect(services.map(\.uuid) == [0x1800, 0x1801, 0xBBB0])
        let inc = try await client.discoverIncludedServices(of: services[2])
        #expect(inc == [GATTRemoteService(uuid: u, primary: false, startHandle: 14, endHandle: 16)])
    }
}

@Suite struct ReadWriteTests {
    @Test(arguments: [23, 517]) func longReadAndLongWrite(mtu: Int) async throws {
        let server = GATTServer(services: demoServices())
        let (client, _) = await Loopback.connect(server, mtu: mtu)
        let h = try #require(server.valueHandle(of: 0xFFE2))
        #expect(try await client.read(handle: h) == long600)
        let written: [UInt8] = (0..<700).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        try await client.write(written, handle: h)
        #expect(server.value(of: 0xFFE2) == written)
        #expect(try await client.read(handle: h) == written)
        // Short write replaces the value.
        try await client.write([1, 2, 3], handle: h)
        #expect(try await client.read(handle: h) == [1, 2, 3])
    }

    @Test func readBlobOffsets() async throws {
        let server = GATTServer(services: demoServices())
        let (_, link) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFE2))
        #expect(try await link.request(.readBlobRequest(handle: h, offset: 590)) == .readBlobResponse(value: Array(long600[590...])))
        #expect(try await link.request(.readBlobRequest(handle: h, offset: 600)) == .readBlobResponse(value: []))
        #expect(await attCode { _ = try await link.request(.readBlobRequest(handle: h, offset: 601)) } == .invalidOffset)
        let short = try #require(server.valueHandle(of: 0xFFF2))
        #expect(await attCode { _ = try await link.request(.readBlobRequest(handle: short, offset: 2)) } == .attributeNotLong)
        #expect(await attCode { _ = try await link.request(.readBlobRequest(handle: short, offset: 8)) } == .invalidOffset)
    }

    @Test func writeAndEvents() async throws {
        let server = GATTServer(services: demoServices())
        let (client, link) = await Loopback.connect(server)
        #expect(try await next(server.events) == .connected(link.peer))
        let h = try #require(server.valueHandle(of: 0xFFF2))
        #expect(try await client.read(handle: h) == Array("ble-hci".utf8))
        #expect(try await next(server.events) == .read(link.peer, 0xFFF2))
        try await client.write(Array("hello".utf8), handle: h)
        #expect(try await next(server.events) == .wrote(link.peer, 0xFFF2, Array("hello".utf8)))
        #expect(try await client.read(handle: h) == Array("hello".utf8))
        // Write Without Response.
        let u = BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef1")!
        let wh = try #require(server.valueHandle(of: u))
        try await client.writeWithoutResponse([0x42], handle: wh)
        #expect(server.value(of: u) == [0x42])
        await #expect(throws: GATTClientError.valueTooLong(length: 21, maximum: 20)) {
            try await client.writeWithoutResponse([UInt8](repeating: 0, count: 21), handle: wh)
        }
        await server.peerDisconnected(link.peer)
    }

    @Test func readByUUIDAndMultiple() async throws {
        let server = GATTServer(services: demoServices())
        let (client, _) = await Loopback.connect(server)
        let h1 = try #require(server.valueHandle(of: 0xFFF2)), h2 = try #require(server.valueHandle(of: 0xFFE1))
        #expect(try await client.readByUUID(0xFFE1) == [ATTHandleValue(handle: h2, value: Array("read only".utf8))])
        #expect(try await client.readByUUID(0x2A00) == [ATTHandleValue(handle: 3, value: Array("ble-hci".utf8))])
        #expect(await attCode { _ = try await client.readByUUID(0xABCD) } == .attributeNotFound)
        #expect(try await client.readMultiple(handles: [h1, h2]) == Array("ble-hciread only".utf8))
        #expect(try await client.readMultipleVariable(handles: [h1, h2]) == [Array("ble-hci".utf8), Array("read only".utf8)])
        // The first value larger than the MTU is cut; a second cannot follow.
        let long = try #require(server.valueHandle(of: 0xFFE2))
        #expect(try await client.readMultipleVariable(handles: [long, h1]) == [Array(long600.prefix(20))])
        #expect(await attCode { _ = try await client.readMultiple(handles: [h1, 0x0FFF]) } == .invalidHandle)
    }

    @Test func handlersAndApplicationErrors() async throws {
        let store = Store([0x10])
        let server = GATTServer(services: demoServices(handlerValue: store))
        let (client, _) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFD4))
        #expect(try await client.read(handle: h) == [0x10])
        try await client.write([7, 8], handle: h)
        #expect(store.value == [7, 8])
        #expect(await attCode { try await client.write([0xFF], handle: h) } == .valueNotAllowed)
        #expect(await attCode { try await client.write([1, 2, 3, 4, 5], handle: h) } == .invalidAttributeValueLength)
        let (other, _) = await Loopback.connect(server, id: 0x99)
        #expect(await attCode { _ = try await other.read(handle: h) } == .application(0x05))
    }

    @Test func reliableWriteAcrossHandles() async throws {
        let server = GATTServer(services: demoServices())
        let (client, _) = await Loopback.connect(server)
        let a = try #require(server.valueHandle(of: 0xFFE2)), b = try #require(server.valueHandle(of: 0xFFF2))
        try await client.reliableWrite([(a, Array(long600.prefix(50))), (b, Array("xy".utf8))])
        #expect(server.value(of: 0xFFE2) == Array(long600.prefix(50)))
        #expect(server.value(of: 0xFFF2) == Array("xy".utf8))
    }
}

@Suite struct PermissionTests {
    @Test func everyPermissionError() async throws {
        let server = GATTServer(services: demoServices())
        let (client, link) = await Loopback.connect(server)
        func h(_ u: BluetoothUUID) throws -> UInt16 { try #require(server.valueHandle(of: u)) }
        #expect(await attCode { _ = try await client.read(handle: h(0xFFF1)) } == .readNotPermitted)
        #expect(await attCode { try await client.write([1], handle: h(0xFFE1)) } == .writeNotPermitted)
        #expect(await attCode { _ = try await client.read(handle: h(0xFFD5)) } == .readNotPermitted)
        // Unencrypted, no key with this peer: it must pair (Core Vol 3 Part C 10.3.1).
        #expect(await attCode { _ = try await client.read(handle: h(0xFFD1)) } == .insufficientAuthentication)
        #expect(await attCode { try await client.write([1], handle: h(0xFFD1)) } == .insufficientAuthentication)
        // Unencrypted with a bond: it only has to encrypt.
        link.security = ATTSecurity(keyAvailable: true)
        #expect(await attCode { _ = try await client.read(handle: h(0xFFD1)) } == .insufficientEncryption)
        #expect(await attCode { try await client.write([1], handle: h(0xFFD1)) } == .insufficientEncryption)
        link.security = .none
        #expect(await attCode { _ = try await client.read(handle: h(0xFFD2)) } == .insufficientAuthentication)
        #expect(await attCode { _ = try await client.read(handle: h(0xFFD3)) } == .insufficientAuthorization)
        #expect(await attCode { try await client.write(Array(repeating: 0, count: 1025), handle: h(0xFFE2)) } == .invalidAttributeValueLength)
        #expect(await attCode { _ = try await client.read(handle: 0x0FFF) } == .invalidHandle)
        #expect(await attCode { _ = try await client.read(handle: 0) } == .invalidHandle)
        #expect(await attCode { try await client.write([1], handle: 0x0FFF) } == .invalidHandle)
        // Encrypted with a 7-octet key: too short for FFD1's 16.
        link.security = ATTSecurity(encrypted: true, keySize: 7)
        #expect(await attCode { _ = try await client.read(handle: h(0xFFD1)) } == .encryptionKeySizeTooShort)
        #expect(await attCode { _ = try await client.read(handle: h(0xFFD2)) } == .insufficientAuthentication)
        link.security = ATTSecurity(encrypted: true, authenticated: true, authorized: true, keySize: 16)
        #expect(try await client.read(handle: h(0xFFD1)) == [1])
        #expect(try await client.read(handle: h(0xFFD2)) == [2])
        #expect(try await client.read(handle: h(0xFFD3)) == [3])
        // Error Responses carry the request opcode and handle.
        do { _ = try await link.request(.readRequest(handle: try h(0xFFF1))); Issue.record("no error") }
        catch let e as ATTError { #expect(e == ATTError(.readNotPermitted, requestOpcode: .readRequest, handle: try h(0xFFF1))) }
        // Read By Type: a first value that can't be read answers its error.
        #expect(await attCode { _ = try await client.readByUUID(0xFFF1) } == .readNotPermitted)
    }

    @Test func prepareQueueLimitsAndExecuteChecks() async throws {
        var config = GATTServer.Configuration()
        config.prepareQueueLimit = 4
        let server = GATTServer(services: demoServices(), configuration: config)
        let (client, link) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFE2))
        // 4 prepares fit, the 5th is refused.
        for i in 0..<4 { _ = try await link.request(.prepareWriteRequest(handle: h, offset: UInt16(i * 18), value: [UInt8](repeating: 1, count: 18))) }
        #expect(await attCode { _ = try await link.request(.prepareWriteRequest(handle: h, offset: 72, value: [1])) } == .prepareQueueFull)
        #expect(try await link.request(.executeWriteRequest(flags: .cancel)) == .executeWriteResponse)
        #expect(server.value(of: 0xFFE2) == long600, "cancel writes nothing")
        // A long write that needs more prepares than the queue holds fails and writes nothing.
        #expect(await attCode { try await client.write([UInt8](repeating: 5, count: 100), handle: h) } == .prepareQueueFull)
        #expect(server.value(of: 0xFFE2) == long600)
        // Offsets are checked at execute: a gap → Invalid Offset.
        _ = try await link.request(.prepareWriteRequest(handle: h, offset: 0, value: [1, 2]))
        _ = try await link.request(.prepareWriteRequest(handle: h, offset: 10, value: [3]))
        #expect(await attCode { _ = try await link.request(.executeWriteRequest(flags: .write)) } == .invalidOffset)
        // Too long at execute → Invalid Attribute Value Length.
        let small = try #require(server.valueHandle(of: 0xFFD4))
        _ = try await link.request(.prepareWriteRequest(handle: small, offset: 0, value: [1, 2, 3]))
        _ = try await link.request(.prepareWriteRequest(handle: small, offset: 3, value: [4, 5]))
        #expect(await attCode { _ = try await link.request(.executeWriteRequest(flags: .write)) } == .invalidAttributeValueLength)
        // Prepare checks permissions at once.
        let ro = try #require(server.valueHandle(of: 0xFFE1))
        #expect(await attCode { _ = try await link.request(.prepareWriteRequest(handle: ro, offset: 0, value: [1])) } == .writeNotPermitted)
        #expect(await attCode { _ = try await link.request(.prepareWriteRequest(handle: 0x0FFF, offset: 0, value: [1])) } == .invalidHandle)
        #expect(server.value(of: 0xFFE2) == long600)
    }

    @Test func malformedAndUnsupportedRequests() async throws {
        let server = GATTServer(services: demoServices())
        let (_, link) = await Loopback.connect(server)
        // Truncated Read Request → Invalid PDU; unknown request → Request Not Supported; unknown command ignored.
        #expect(await link.raw([0x0A, 0x01]) == .errorResponse(requestOpcode: .readRequest, handle: 0, error: .invalidPDU))
        #expect(await link.raw([0x3F, 1, 2]) == .errorResponse(requestOpcode: ATTOpcode(0x3F), handle: 0, error: .requestNotSupported))
        #expect(await link.raw([0x7F, 1, 2]) == nil)
        #expect(await link.raw([]) == nil)
        // Handle ranges: 0 or start > end → Invalid Handle with the start handle.
        #expect(await link.raw(ATTPDU.readByGroupTypeRequest(startHandle: 0, endHandle: 5, type: 0x2800).bytes)
                == .errorResponse(requestOpcode: .readByGroupTypeRequest, handle: 0, error: .invalidHandle))
        #expect(await link.raw(ATTPDU.findInformationRequest(startHandle: 9, endHandle: 3).bytes)
                == .errorResponse(requestOpcode: .findInformationRequest, handle: 9, error: .invalidHandle))
        #expect(await link.raw(ATTPDU.readByTypeRequest(startHandle: 5, endHandle: 4, type: 0x2803).bytes)
                == .errorResponse(requestOpcode: .readByTypeRequest, handle: 5, error: .invalidHandle))
        #expect(await link.raw(ATTPDU.findByTypeValueRequest(startHandle: 0, endHandle: 4, attributeType: 0x2800, attributeValue: [0, 0x18]).bytes)
                == .errorResponse(requestOpcode: .findByTypeValueRequest, handle: 0, error: .invalidHandle))
        #expect(await link.raw(ATTPDU.readByGroupTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: 0x2803).bytes)
                == .errorResponse(requestOpcode: .readByGroupTypeRequest, handle: 1, error: .unsupportedGroupType))
        #expect(await link.raw(ATTPDU.findInformationRequest(startHandle: 0x0F00, endHandle: 0xFFFF).bytes)
                == .errorResponse(requestOpcode: .findInformationRequest, handle: 0x0F00, error: .attributeNotFound))
        #expect(await link.raw(ATTPDU.executeWriteRequest(flags: ATTExecuteWriteFlags(rawValue: 7)).bytes)
                == .errorResponse(requestOpcode: .executeWriteRequest, handle: 0, error: .invalidPDU))
        // Exchange MTU reaching the server (the bearer's job) is not supported here; Write Command errors are silent.
        #expect(await link.raw(ATTPDU.exchangeMTURequest(clientRxMTU: 100).bytes)
                == .errorResponse(requestOpcode: .exchangeMTURequest, handle: 0, error: .requestNotSupported))
        #expect(await link.raw(ATTPDU.writeCommand(handle: 0x0FFF, value: [1]).bytes) == nil)
        // CCCD writes must be 2 octets.
        #expect(await link.raw(ATTPDU.writeRequest(handle: 9, value: [1]).bytes)
                == .errorResponse(requestOpcode: .writeRequest, handle: 9, error: .invalidAttributeValueLength))
    }
}

@Suite struct PermissionNameTests {
    /// CLI.md `--gatt FILE`: "permissions" names; the secure ones imply the access.
    @Test func namesMapToPermissions() throws {
        #expect(try GATTPermissions(names: ["read", "write"]) == .readWrite)
        #expect(try GATTPermissions(names: ["readEncrypted"]) == [.readable, .readEncryptionRequired])
        #expect(try GATTPermissions(names: ["readAuthenticated", "writeEncrypted"])
                == [.readable, .readAuthenticationRequired, .writable, .writeEncryptionRequired])
        #expect(throws: GATTPermissions.UnknownPermissionName(name: "readSecret")) { try GATTPermissions(names: ["read", "readSecret"]) }
    }
}
