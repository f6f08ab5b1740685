import Testing
import HCI
import ATT
@testable import GATT

/// Every path that exposes or compares a value checks the reader's permissions (issue 13,
/// defect 2). The error codes are Core v5.4 Vol 3 Part F 3.4.1.1 Table 3.4's.
@MainActor @Suite(.timeLimit(.minutes(1))) struct PermissionPathTests {
    /// FFD1: readable with encryption and a 16-octet key, value [1]. FFC1: notify, encrypted reads.
    static func services() -> [GATTService] {
        demoServices() + [
            GATTService(uuid: 0xFFC0, characteristics: [
                GATTCharacteristic(uuid: 0xFFC1, properties: [.read, .notify, .indicate],
                                   permissions: [.readable, .readEncryptionRequired], value: [0x5A]),
            ]),
        ]
    }

    /// Regression: Find By Type Value compared the value of FFD1 (encryption required) for an
    /// unencrypted client, which learnt the value by guessing. Unreadable values are not
    /// compared, so the guess finds nothing: Attribute Not Found with the Starting Handle
    /// (3.4.3.3; 3.2.5 for the permissions).
    @Test func findByTypeValueDoesNotCompareValuesTheClientMayNotRead() async throws {
        let server = GATTServer(services: Self.services())
        let (_, link) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFD1))
        let guess = ATTPDU.findByTypeValueRequest(startHandle: 0x0001, endHandle: 0xFFFF, attributeType: 0xFFD1, attributeValue: [1])
        #expect(await link.raw(guess.bytes) == .errorResponse(requestOpcode: .findByTypeValueRequest, handle: 0x0001, error: .attributeNotFound))
        // Encrypted with a key too short (7 < 16): still not compared.
        link.security = ATTSecurity(encrypted: true, keySize: 7)
        #expect(await link.raw(guess.bytes) == .errorResponse(requestOpcode: .findByTypeValueRequest, handle: 0x0001, error: .attributeNotFound))
        // With the security a read needs, the value is compared and found.
        link.security = ATTSecurity(encrypted: true, keySize: 16)
        #expect(await link.raw(guess.bytes) == .findByTypeValueResponse([ATTHandlesInformation(foundAttributeHandle: h, groupEndHandle: h)]))
    }

    /// Read By Type, Read Multiple and Read Multiple Variable answer the first protected
    /// attribute's error with its handle (3.4.4.1, 3.4.4.7, 3.4.4.11).
    @Test func readByTypeAndReadMultipleCheckEveryValue() async throws {
        let server = GATTServer(services: Self.services())
        let (_, link) = await Loopback.connect(server)
        let open = try #require(server.valueHandle(of: 0xFFE1))
        let enc = try #require(server.valueHandle(of: 0xFFD1)), auth = try #require(server.valueHandle(of: 0xFFD2))
        // Unencrypted and no LTK with this peer: Insufficient Authentication (Core Vol 3 Part C 10.3.1).
        #expect(await link.raw(ATTPDU.readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: 0xFFD1).bytes)
                == .errorResponse(requestOpcode: .readByTypeRequest, handle: enc, error: .insufficientAuthentication))
        #expect(await link.raw(ATTPDU.readMultipleRequest(handles: [open, enc]).bytes)
                == .errorResponse(requestOpcode: .readMultipleRequest, handle: enc, error: .insufficientAuthentication))
        // Unencrypted with an LTK available (bonded): Insufficient Encryption (Vol 3 Part C 10.3.1).
        link.security = ATTSecurity(keyAvailable: true)
        #expect(await link.raw(ATTPDU.readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: 0xFFD1).bytes)
                == .errorResponse(requestOpcode: .readByTypeRequest, handle: enc, error: .insufficientEncryption))
        #expect(await link.raw(ATTPDU.readMultipleRequest(handles: [open, enc]).bytes)
                == .errorResponse(requestOpcode: .readMultipleRequest, handle: enc, error: .insufficientEncryption))
        link.security = .none
        #expect(await link.raw(ATTPDU.readMultipleVariableRequest(handles: [open, auth, enc]).bytes)
                == .errorResponse(requestOpcode: .readMultipleVariableRequest, handle: auth, error: .insufficientAuthentication))
    }

    /// Regression: notifications and indications went to a subscriber whose link lacks the
    /// security a read of the value needs. They now go only to links that could read it.
    @Test func notificationsAndIndicationsNeedTheValuesReadSecurity() async throws {
        let server = GATTServer(services: Self.services())
        let (client, link) = await Loopback.connect(server)
        let tree = try await client.discoverDatabase()
        let c = try #require(findChar(tree, 0xFFC1)).characteristic
        let values = Values(try await client.subscribe(c))   // the CCCD itself needs no encryption
        #expect(server.subscribers(of: 0xFFC1) == [link.peer])
        #expect(await server.notify(characteristic: 0xFFC1, value: [0x5B]).isEmpty)
        #expect(link.notifications == 0)
        link.security = ATTSecurity(encrypted: true, keySize: 16)
        #expect(await server.notify(characteristic: 0xFFC1, value: [0x5C]) == [link.peer])
        #expect(try await next(values) == [0x5C])
        // Indications likewise.
        let (other, otherLink) = await Loopback.connect(server, id: 0x41)
        let c2 = try #require(findChar(try await other.discoverDatabase(), 0xFFC1)).characteristic
        _ = try await other.subscribe(c2, indications: true)
        #expect(await server.indicate(characteristic: 0xFFC1, value: [1]).isEmpty)
        #expect(otherLink.confirmations == 0)
        otherLink.security = ATTSecurity(encrypted: true, keySize: 16)
        #expect(await server.indicate(characteristic: 0xFFC1, value: [2]) == [otherLink.peer])
    }
}
