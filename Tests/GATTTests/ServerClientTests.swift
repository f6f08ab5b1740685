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

@MainActor @Suite(.timeLimit(.minutes(1))) struct DiscoveryTests {
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
        #expect(await attError { _ = try await client.read(handle: 8) } == ATTError(.readNotPermitted, requestOpcode: .readRequest, handle: 8))
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

@MainActor @Suite(.timeLimit(.minutes(1))) struct ReadWriteTests {
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
        #expect(await attError { _ = try await link.request(.readBlobRequest(handle: h, offset: 601)) } == ATTError(.invalidOffset, requestOpcode: .readBlobRequest, handle: h))
        // A value shorter than ATT_MTU − 1 is read from any offset up to its length (Core v5.4
        // Vol 3 Part F 3.4.4.5: Attribute Not Long is a "may" for fixed-length values only; an
        // offset equal to the length answers an empty value; past it, Invalid Offset).
        let short = try #require(server.valueHandle(of: 0xFFF2))
        #expect(try await link.request(.readBlobRequest(handle: short, offset: 2)) == .readBlobResponse(value: Array("e-hci".utf8)))
        #expect(try await link.request(.readBlobRequest(handle: short, offset: 7)) == .readBlobResponse(value: []))
        #expect(await link.raw(ATTPDU.readBlobRequest(handle: short, offset: 8).bytes)
                == .errorResponse(requestOpcode: .readBlobRequest, handle: short, error: .invalidOffset))
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
        #expect(await attError { _ = try await client.readByUUID(0xABCD) } == ATTError(.attributeNotFound, requestOpcode: .readByTypeRequest, handle: 0x0001))
        #expect(try await client.readMultiple(handles: [h1, h2]) == Array("ble-hciread only".utf8))
        #expect(try await client.readMultipleVariable(handles: [h1, h2]) == [Array("ble-hci".utf8), Array("read only".utf8)])
        // Regression (issue 13, defect 3): the response is cut at ATT_MTU − 1 octets but each
        // Value Length is the attribute's whole length (Core v5.4 Vol 3 Part F 3.4.4.12):
        // 600 = 0x0258, then the first 20 octets. No room is left for the second value.
        let long = try #require(server.valueHandle(of: 0xFFE2))
        let (_, link) = await Loopback.connect(server, id: 0x41)
        #expect(await link.raw(ATTPDU.readMultipleVariableRequest(handles: [long, h1]).bytes)?.bytes
                == [0x21, 0x58, 0x02] + long600.prefix(20))
        // The client completes the cut value with Read Blob and reads the missing one.
        #expect(try await client.readMultipleVariable(handles: [long, h1]) == [long600, Array("ble-hci".utf8)])
        #expect(try await client.readMultipleVariable(handles: [h1, long]) == [Array("ble-hci".utf8), long600])
        #expect(await attError { _ = try await client.readMultiple(handles: [h1, 0x0FFF]) } == ATTError(.invalidHandle, requestOpcode: .readMultipleRequest, handle: 0x0FFF))
    }

    @Test func handlersAndApplicationErrors() async throws {
        let store = Store([0x10])
        let server = GATTServer(services: demoServices(handlerValue: store))
        let (client, _) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFD4))
        #expect(try await client.read(handle: h) == [0x10])
        try await client.write([7, 8], handle: h)
        #expect(store.value == [7, 8])
        #expect(await attError { try await client.write([0xFF], handle: h) } == ATTError(.valueNotAllowed, requestOpcode: .writeRequest, handle: h))
        #expect(await attError { try await client.write([1, 2, 3, 4, 5], handle: h) } == ATTError(.invalidAttributeValueLength, requestOpcode: .writeRequest, handle: h))
        let (other, _) = await Loopback.connect(server, id: 0x99)
        #expect(await attError { _ = try await other.read(handle: h) } == ATTError(.application(0x05), requestOpcode: .readRequest, handle: h))
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

/// Error Responses name the request and the attribute in error (Core v5.4 Vol 3 Part F
/// 3.4.1.1); codes per Table 3.4; prepared-write errors per 3.4.6.1 and 3.4.6.3 (the handle
/// from the prepare queue that caused the error).
@MainActor @Suite(.timeLimit(.minutes(1))) struct PermissionTests {
    @Test func everyPermissionError() async throws {
        let server = GATTServer(services: demoServices())
        let (client, link) = await Loopback.connect(server)
        func h(_ u: BluetoothUUID) throws -> UInt16 { try #require(server.valueHandle(of: u)) }
        let (fff1, ffe1, ffd5, ffd1) = (try h(0xFFF1), try h(0xFFE1), try h(0xFFD5), try h(0xFFD1))
        let (ffd2, ffd3, ffe2) = (try h(0xFFD2), try h(0xFFD3), try h(0xFFE2))
        #expect(await attError { _ = try await client.read(handle: fff1) } == ATTError(.readNotPermitted, requestOpcode: .readRequest, handle: fff1))
        #expect(await attError { try await client.write([1], handle: ffe1) } == ATTError(.writeNotPermitted, requestOpcode: .writeRequest, handle: ffe1))
        #expect(await attError { _ = try await client.read(handle: ffd5) } == ATTError(.readNotPermitted, requestOpcode: .readRequest, handle: ffd5))
        // Unencrypted, no key with this peer: it must pair (Core Vol 3 Part C 10.3.1).
        #expect(await attError { _ = try await client.read(handle: ffd1) } == ATTError(.insufficientAuthentication, requestOpcode: .readRequest, handle: ffd1))
        #expect(await attError { try await client.write([1], handle: ffd1) } == ATTError(.insufficientAuthentication, requestOpcode: .writeRequest, handle: ffd1))
        // Unencrypted with a bond: it only has to encrypt.
        link.security = ATTSecurity(keyAvailable: true)
        #expect(await attError { _ = try await client.read(handle: ffd1) } == ATTError(.insufficientEncryption, requestOpcode: .readRequest, handle: ffd1))
        #expect(await attError { try await client.write([1], handle: ffd1) } == ATTError(.insufficientEncryption, requestOpcode: .writeRequest, handle: ffd1))
        link.security = .none
        #expect(await attError { _ = try await client.read(handle: ffd2) } == ATTError(.insufficientAuthentication, requestOpcode: .readRequest, handle: ffd2))
        #expect(await attError { _ = try await client.read(handle: ffd3) } == ATTError(.insufficientAuthorization, requestOpcode: .readRequest, handle: ffd3))
        #expect(await attError { try await client.write(Array(repeating: 0, count: 1025), handle: ffe2) } == ATTError(.invalidAttributeValueLength, requestOpcode: .executeWriteRequest, handle: ffe2))
        #expect(await attError { _ = try await client.read(handle: 0x0FFF) } == ATTError(.invalidHandle, requestOpcode: .readRequest, handle: 0x0FFF))
        #expect(await attError { _ = try await client.read(handle: 0) } == ATTError(.invalidHandle, requestOpcode: .readRequest, handle: 0))
        #expect(await attError { try await client.write([1], handle: 0x0FFF) } == ATTError(.invalidHandle, requestOpcode: .writeRequest, handle: 0x0FFF))
        // Encrypted with a 7-octet key: too short for FFD1's 16.
        link.security = ATTSecurity(encrypted: true, keySize: 7)
        #expect(await attError { _ = try await client.read(handle: ffd1) } == ATTError(.encryptionKeySizeTooShort, requestOpcode: .readRequest, handle: ffd1))
        #expect(await attError { _ = try await client.read(handle: ffd2) } == ATTError(.insufficientAuthentication, requestOpcode: .readRequest, handle: ffd2))
        link.security = ATTSecurity(encrypted: true, authenticated: true, authorized: true, keySize: 16)
        #expect(try await client.read(handle: h(0xFFD1)) == [1])
        #expect(try await client.read(handle: h(0xFFD2)) == [2])
        #expect(try await client.read(handle: h(0xFFD3)) == [3])
        // Error Responses carry the request opcode and handle.
        do { _ = try await link.request(.readRequest(handle: try h(0xFFF1))); Issue.record("no error") }
        catch let e as ATTError { #expect(e == ATTError(.readNotPermitted, requestOpcode: .readRequest, handle: try h(0xFFF1))) }
        // Read By Type: a first value that can't be read answers its error.
        #expect(await attError { _ = try await client.readByUUID(0xFFF1) } == ATTError(.readNotPermitted, requestOpcode: .readByTypeRequest, handle: fff1))
    }

    @Test func prepareQueueLimitsAndExecuteChecks() async throws {
        var config = GATTServer.Configuration()
        config.prepareQueueLimit = 4
        let server = GATTServer(services: demoServices(), configuration: config)
        let (client, link) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFE2))
        // 4 prepares fit, the 5th is refused.
        for i in 0..<4 { _ = try await link.request(.prepareWriteRequest(handle: h, offset: UInt16(i * 18), value: [UInt8](repeating: 1, count: 18))) }
        #expect(await attError { _ = try await link.request(.prepareWriteRequest(handle: h, offset: 72, value: [1])) } == ATTError(.prepareQueueFull, requestOpcode: .prepareWriteRequest, handle: h))
        #expect(try await link.request(.executeWriteRequest(flags: .cancel)) == .executeWriteResponse)
        #expect(server.value(of: 0xFFE2) == long600, "cancel writes nothing")
        // A long write that needs more prepares than the queue holds fails and writes nothing.
        #expect(await attError { try await client.write([UInt8](repeating: 5, count: 100), handle: h) } == ATTError(.prepareQueueFull, requestOpcode: .prepareWriteRequest, handle: h))
        #expect(server.value(of: 0xFFE2) == long600)
        // Offsets are checked at execute: a gap → Invalid Offset.
        _ = try await link.request(.prepareWriteRequest(handle: h, offset: 0, value: [1, 2]))
        _ = try await link.request(.prepareWriteRequest(handle: h, offset: 10, value: [3]))
        #expect(await attError { _ = try await link.request(.executeWriteRequest(flags: .write)) } == ATTError(.invalidOffset, requestOpcode: .executeWriteRequest, handle: h))
        // Too long at execute → Invalid Attribute Value Length.
        let small = try #require(server.valueHandle(of: 0xFFD4))
        _ = try await link.request(.prepareWriteRequest(handle: small, offset: 0, value: [1, 2, 3]))
        _ = try await link.request(.prepareWriteRequest(handle: small, offset: 3, value: [4, 5]))
        #expect(await attError { _ = try await link.request(.executeWriteRequest(flags: .write)) } == ATTError(.invalidAttributeValueLength, requestOpcode: .executeWriteRequest, handle: small))
        // Prepare checks permissions at once.
        let ro = try #require(server.valueHandle(of: 0xFFE1))
        #expect(await attError { _ = try await link.request(.prepareWriteRequest(handle: ro, offset: 0, value: [1])) } == ATTError(.writeNotPermitted, requestOpcode: .prepareWriteRequest, handle: ro))
        #expect(await attError { _ = try await link.request(.prepareWriteRequest(handle: 0x0FFF, offset: 0, value: [1])) } == ATTError(.invalidHandle, requestOpcode: .prepareWriteRequest, handle: 0x0FFF))
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

@MainActor @Suite(.timeLimit(.minutes(1))) struct PermissionNameTests {
    /// CLI.md `--gatt FILE`: "permissions" names; the secure ones imply the access.
    @Test func namesMapToPermissions() throws {
        #expect(try GATTPermissions(names: ["read", "write"]) == .readWrite)
        #expect(try GATTPermissions(names: ["readEncrypted"]) == [.readable, .readEncryptionRequired])
        #expect(try GATTPermissions(names: ["readAuthenticated", "writeEncrypted"])
                == [.readable, .readAuthenticationRequired, .writable, .writeEncryptionRequired])
        #expect(throws: GATTPermissions.UnknownPermissionName(name: "readSecret")) { try GATTPermissions(names: ["read", "readSecret"]) }
    }
}
