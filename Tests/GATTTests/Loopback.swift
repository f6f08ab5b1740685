import Testing
import Synchronization
import HCI
import ATT
import TestSupport
@testable import GATT

/// An in-memory ATT bearer: the client's requests go through the ATT codec (bytes and back) to
/// the server; the server's notifications/indications go to the client. Every PDU must fit the
/// MTU. The client lives on the main actor (the tests that use it run there), as a link's client
/// lives in its host's isolation.
final class Loopback: ATTRequester, ATTServerPush, Sendable {
    struct PDUTooLong: Error { let pdu: ATTPDU; let mtu: Int }

    let server: GATTServer
    let peer: ATTPeer
    private let state: Mutex<(security: ATTSecurity, mtu: Int, confirmations: Int, notifications: Int)>
    @MainActor private var client: GATTClient?

    init(server: GATTServer, id: UInt16, mtu: Int = 23, security: ATTSecurity = .none) {
        self.server = server
        self.peer = ATTPeer(id: id)
        state = Mutex((security, mtu, 0, 0))
    }

    /// Connects a new client through this bearer.
    @MainActor static func connect(_ server: GATTServer, id: UInt16 = 0x40, mtu: Int = 23,
                        security: ATTSecurity = .none) async -> (GATTClient, Loopback) {
        let link = Loopback(server: server, id: id, mtu: mtu, security: security)
        let client = GATTClient(requester: link)
        link.client = client
        await server.peerConnected(link.peer, push: link)
        return (client, link)
    }

    var security: ATTSecurity {
        get { state.withLock { $0.security } }
        set { state.withLock { $0.security = newValue } }
    }
    var confirmations: Int { state.withLock { $0.confirmations } }
    var notifications: Int { state.withLock { $0.notifications } }
    var mtu: Int { state.withLock { $0.mtu } }

    /// Sends raw bytes as the bearer would receive them: malformed/unknown → serverRejection.
    func raw(_ bytes: [UInt8]) async -> ATTPDU? {
        let (mtu, security) = state.withLock { ($0.mtu, $0.security) }
        let decoded = ATTPDU.decodeResult(bytes, mtu: mtu)
        if let rejection = ATTPDU.serverRejection(for: decoded) { return rejection }
        guard case .pdu(let pdu) = decoded else { return nil }
        return await server.respond(to: pdu, from: peer, mtu: mtu, security: security)
    }

    nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        let mtu = state.withLock { $0.mtu }
        let bytes = pdu.bytes
        guard bytes.count <= mtu else { throw PDUTooLong(pdu: pdu, mtu: mtu) }
        guard let response = await raw(bytes) else { throw ATTError(.unlikelyError, requestOpcode: pdu.opcode) }
        let back = response.bytes
        guard back.count <= mtu else { throw PDUTooLong(pdu: response, mtu: mtu) }
        let decoded = try ATTPDU.decode(back)
        if case let .errorResponse(op, handle, code) = decoded { throw ATTError(code, requestOpcode: op, handle: handle) }
        return decoded
    }

    func command(_ pdu: ATTPDU) async throws {
        let mtu = state.withLock { $0.mtu }
        guard pdu.bytes.count <= mtu else { throw PDUTooLong(pdu: pdu, mtu: mtu) }
        let response = await raw(pdu.bytes)
        #expect(response == nil, "a command must not be answered")
    }

    func notify(handle: UInt16, value: [UInt8]) async throws {
        let pdu = ATTPDU.handleValueNotification(handle: handle, value: value)
        let mtu = state.withLock { $0.notifications += 1; return $0.mtu }
        guard pdu.bytes.count <= mtu else { throw PDUTooLong(pdu: pdu, mtu: mtu) }
        await deliver(try ATTPDU.decode(pdu.bytes))
    }

    func indicate(handle: UInt16, value: [UInt8]) async throws {
        let pdu = ATTPDU.handleValueIndication(handle: handle, value: value)
        let mtu = state.withLock { $0.mtu }
        guard pdu.bytes.count <= mtu else { throw PDUTooLong(pdu: pdu, mtu: mtu) }
        await deliver(try ATTPDU.decode(pdu.bytes))
        // The bearer confirms after `received` returns.
        state.withLock { $0.confirmations += 1 }
    }
}

extension Loopback {
    /// Hands a pushed PDU to the client where it lives.
    @MainActor func deliver(_ pdu: ATTPDU) async { await client?.received(pdu) }
}

/// A stream ended before the value a test waited for.
struct TimedOut: Error {}

/// A subscription's values, read by one iterator for the whole test: leaving an iterator ends
/// the subscription (issue 25), so a fresh one per value would end it after the first.
actor Values {
    private var iterator: GATTNotificationStream.Iterator
    init(_ stream: GATTNotificationStream) { iterator = stream.makeAsyncIterator() }
    func next() async throws -> [UInt8]? {
        var it = iterator  // (an actor's property is not passed inout across a suspension)
        defer { iterator = it }
        return try await it.next(isolation: self)
    }
}

/// The next value of a subscription; TimedOut when it ends first. (An `await` of the loopback:
/// the suites' time limit bounds it, as every wait of these stack tests.)
func next(_ values: Values) async throws -> [UInt8] {
    guard let value = try await values.next() else { throw TimedOut() }
    return value
}

/// The next element of a stream; TimedOut when it ends first.
func next<S: AsyncSequence & Sendable>(_ stream: S) async throws -> S.Element where S.Element: Sendable {
    var it = stream.makeAsyncIterator()
    guard let value = try await it.next() else { throw TimedOut() }
    return value
}

/// The ATT error a call threw: code, request opcode and handle in error (nil when it did not
/// throw an ATTError). Tests compare all three with what the specification says.
nonisolated(nonsending) func attError(_ body: () async throws -> Void) async -> ATTError? {
    do { try await body(); return nil } catch let e as ATTError { return e } catch { return nil }
}
