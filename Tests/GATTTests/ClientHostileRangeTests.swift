import Testing
import HCI
import ATT
@testable import GATT

/// A peer whose answers are fixed in advance, matched to requests as ATTBearer matches them.
private final class ScriptedPeer: ATTRequester, @unchecked Sendable {
    private var answers: [[UInt8]]
    init(_ answers: [[UInt8]]) { self.answers = answers }
    var mtu: Int { 23 }
    nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        guard !answers.isEmpty else { throw ATTBearerError.transactionTimeout("no more answers") }
        let answer = try ATTPDU.decode(answers.removeFirst())
        if case let .errorResponse(op, handle, code) = answer { throw ATTError(code, requestOpcode: op, handle: handle) }
        return answer
    }
    func command(_ pdu: ATTPDU) async throws {}
}

/// Issue 13 defect 1, reproduced through the att-client fuzz target's harness (its input is
/// Tools/fuzz/regressions/att-client/included-service-start-after-end): an Include
/// declaration whose range has start > end trapped the client's next characteristic discovery.
@Suite struct ClientHostileRangeTests {
    @Test(arguments: [
        [0x10, 0x00, 0x05, 0x00, 0x0f, 0x18] as [UInt8],  // start 0x0010 > end 0x0005
        [0x00, 0x00, 0x05, 0x00, 0x0f, 0x18],             // start 0x0000: not a handle
    ])
    func includedServiceWithABadRangeIsAnInvalidResponse(_ include: [UInt8]) async throws {
        // Read By Type Response (0x09), 8-octet entries: handle 0x0001 + the Include value
        // (Core v5.4 Vol 3 Part G 3.2, 4.5.1), then Error Response Attribute Not Found (0x0A).
        let client = GATTClient(requester: ScriptedPeer([[0x09, 0x08, 0x01, 0x00] + include, [0x01, 0x08, 0x02, 0x00, 0x0a]]))
        let service = GATTRemoteService(uuid: 0x180D, startHandle: 1, endHandle: 0xFFFF)
        await #expect(throws: GATTClientError.self) { try await client.discoverIncludedServices(of: service) }
    }
}
