import Testing
import Synchronization
import HCI
import ATT
@testable import GATT

/// Issue 25: characteristics and descriptors whose value comes from asynchronous handlers
/// (`asyncRead:` / `asyncWrite:`) answer every ATT procedure as stored values do (the codes and
/// slicing are Core v5.4 Vol 3 Part F's), with the handler's value or thrown code.
@MainActor @Suite(.timeLimit(.minutes(1))) struct AsyncHandlerTests {
    /// Counts handler calls and records the offsets and values they were given.
    final class Calls: Sendable {
        let state = Mutex<(reads: [Int], writes: [(offset: Int, value: [UInt8])])>(([], []))
        var reads: [Int] { state.withLock { $0.reads } }
        var writes: [(offset: Int, value: [UInt8])] { state.withLock { $0.writes } }
    }

    struct NotAnATTError: Error {}

    /// FFA1: async read of a 40-octet value (longer than ATT_MTU 23 − 1), async write.
    /// FFA2: async read that throws application error 0x80. FFA3: throws a non-ATT error.
    /// FFA4: async read needing encryption. FFA5: a descriptor of FFA1 read asynchronously.
    static func server(_ calls: Calls) -> GATTServer {
        let long = (0..<40).map { UInt8($0) }
        return GATTServer(services: [
            GATTService(uuid: 0xFFA0, characteristics: [
                GATTCharacteristic(uuid: 0xFFA1, properties: [.read, .write],
                                   asyncRead: { c in
                                       calls.state.withLock { $0.reads.append(c.offset) }
                                       await Task.yield()
                                       return long
                                   },
                                   asyncWrite: { c, v in
                                       await Task.yield()
                                       calls.state.withLock { $0.writes.append((c.offset, v)) }
                                   },
                                   descriptors: [GATTDescriptor(uuid: 0x2901, permissions: .readable,
                                                                asyncRead: { _ in Array("async".utf8) })]),
                GATTCharacteristic(uuid: 0xFFA2, properties: [.read, .write],
                                   asyncRead: { _ in throw ATTError.rejecting(ATTErrorCode(rawValue: 0x80)) },
                                   asyncWrite: { _, _ in throw ATTError.rejecting(ATTErrorCode(rawValue: 0x81)) }),
                GATTCharacteristic(uuid: 0xFFA3, properties: [.read], asyncRead: { _ in throw NotAnATTError() }),
                GATTCharacteristic(uuid: 0xFFA4, properties: [.read], permissions: [.readable, .readEncryptionRequired],
                                   asyncRead: { _ in
                                       calls.state.withLock { $0.reads.append(-1) }
                                       return [1]
                                   }),
            ]),
        ])
    }

    /// A Read Response carries at most ATT_MTU − 1 octets of the value (3.4.4.4); the GATT client's
    /// Read Long Characteristic Value (Vol 3 Part G 4.8.3) fetches the rest with Read Blob
    /// Requests, whose handler calls see the offset (22 = ATT_MTU − 1).
    @Test func readsTheHandlersValueSlicedAsStoredValuesAre() async throws {
        let calls = Calls()
        let server = Self.server(calls)
        let (client, link) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFA1))
        #expect(await link.raw(ATTPDU.readRequest(handle: h).bytes) == .readResponse(value: (0..<22).map { UInt8($0) }))
        #expect(try await client.read(handle: h) == (0..<40).map { UInt8($0) })
        #expect(calls.reads == [0, 0, 22])
        #expect(await link.raw(ATTPDU.readBlobRequest(handle: h, offset: 41).bytes)
                == .errorResponse(requestOpcode: .readBlobRequest, handle: h, error: .invalidOffset))
    }

    /// A thrown `ATTError` answers with its code and the attribute's handle (3.4.1.1; 0x80–0x9F
    /// are Application Errors); any other error is Unlikely Error (0x0E).
    @Test func thrownErrorsAnswerWithTheirCode() async throws {
        let server = Self.server(Calls())
        let (_, link) = await Loopback.connect(server)
        let app = try #require(server.valueHandle(of: 0xFFA2)), other = try #require(server.valueHandle(of: 0xFFA3))
        #expect(await link.raw(ATTPDU.readRequest(handle: app).bytes)
                == .errorResponse(requestOpcode: .readRequest, handle: app, error: ATTErrorCode(rawValue: 0x80)))
        #expect(await link.raw(ATTPDU.writeRequest(handle: app, value: [1]).bytes)
                == .errorResponse(requestOpcode: .writeRequest, handle: app, error: ATTErrorCode(rawValue: 0x81)))
        #expect(await link.raw(ATTPDU.readRequest(handle: other).bytes)
                == .errorResponse(requestOpcode: .readRequest, handle: other, error: .unlikelyError))
    }

    /// A request the permissions refuse never reaches the handler: unencrypted without a key,
    /// Insufficient Authentication (Vol 3 Part C 10.3.1); encrypted, the handler answers.
    @Test func refusedRequestsDoNotCallTheHandler() async throws {
        let calls = Calls()
        let server = Self.server(calls)
        let (_, link) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFA4))
        #expect(await link.raw(ATTPDU.readRequest(handle: h).bytes)
                == .errorResponse(requestOpcode: .readRequest, handle: h, error: .insufficientAuthentication))
        #expect(calls.reads.isEmpty)
        link.security = ATTSecurity(encrypted: true, keySize: 16)
        #expect(await link.raw(ATTPDU.readRequest(handle: h).bytes) == .readResponse(value: [1]))
        #expect(calls.reads == [-1])
    }

    /// Write Request: answered Write Response after the handler returned (3.4.5.2); a Write
    /// Command reaches it too. A long write (Prepare Write, Execute Write: Vol 3 Part G 4.9.4)
    /// hands it the assembled value once, at the first offset.
    @Test func writesReachTheHandlerBeforeTheyAreAnswered() async throws {
        let calls = Calls()
        let server = Self.server(calls)
        let (client, link) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFA1))
        #expect(await link.raw(ATTPDU.writeRequest(handle: h, value: [7]).bytes) == .writeResponse)
        #expect(calls.writes.map(\.value) == [[7]])
        #expect(await link.raw(ATTPDU.writeCommand(handle: h, value: [8]).bytes) == nil)
        let long = (0..<50).map { UInt8($0) }
        try await client.write(long, handle: h)
        #expect(calls.writes.map(\.value) == [[7], [8], long])
        #expect(calls.writes.map(\.offset) == [0, 0, 0])
    }

    /// Read By Type (3.4.4.1), Read Multiple (3.4.4.7) and Read Multiple Variable (3.4.4.11) read
    /// asynchronous values as stored ones; a descriptor's asynchronous value is read too.
    @Test func multipleAndByTypeReadsUseTheHandlers() async throws {
        let server = Self.server(Calls())
        let (_, link) = await Loopback.connect(server)
        let h = try #require(server.valueHandle(of: 0xFFA1))
        let first19 = (0..<19).map { UInt8($0) }  // ATT_MTU − 4 octets of value per entry
        #expect(await link.raw(ATTPDU.readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: 0xFFA1).bytes)
                == .readByTypeResponse([ATTHandleValue(handle: h, value: first19)]))
        let descriptor = try #require(server.attributeTypes.first { $0.type == 0x2901 }?.handle)
        #expect(await link.raw(ATTPDU.readRequest(handle: descriptor).bytes) == .readResponse(value: Array("async".utf8)))
        #expect(await link.raw(ATTPDU.readMultipleRequest(handles: [descriptor, h]).bytes)
                == .readMultipleResponse(values: Array("async".utf8) + (0..<17).map { UInt8($0) }))
        #expect(await link.raw(ATTPDU.readMultipleVariableRequest(handles: [descriptor, h]).bytes)
                == .readMultipleVariableResponse([ATTLengthValue(length: 5, value: Array("async".utf8)),
                                                  ATTLengthValue(length: 40, value: (0..<13).map { UInt8($0) })]))
    }
}
