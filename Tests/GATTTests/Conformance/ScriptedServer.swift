import Testing
import Synchronization
import HCI
import ATT
@testable import GATT

/// A peer GATT server played from a script of raw PDUs, for client conformance: each request
/// the client sends must be the next one in the script, octet for octet, and is answered with
/// the scripted octets, decoded as `ATTBearer` does (an Error Response throws `ATTError`).
/// A command's step has an empty response.
final class ScriptedServer: ATTRequester {
    struct Step: Sendable { let request: [UInt8]; let response: [UInt8] }
    struct OffScript: Error, CustomStringConvertible { let description: String }

    private let state: Mutex<(steps: [Step], next: Int)>
    private let attMTU: Int

    /// `steps`: (request, response) as hex, spaces allowed.
    init(mtu: Int = 23, _ steps: [(String, String)]) {
        attMTU = mtu
        state = Mutex((steps.map { Step(request: [UInt8](hex: $0.0)!, response: [UInt8](hex: $0.1)!) }, 0))
    }

    var mtu: Int { attMTU }

    /// Steps the client has not asked for yet.
    var unused: Int { state.withLock { $0.steps.count - $0.next } }

    nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        let sent = pdu.bytes
        let step: Step? = state.withLock { s in
            guard s.next < s.steps.count else { return nil }
            defer { s.next += 1 }
            return s.steps[s.next]
        }
        guard let step else {
            Issue.record("request after the script ended: \(sent.hex)")
            throw OffScript(description: "request after the script ended: \(sent.hex)")
        }
        guard step.request == sent else {
            Issue.record("client sent \(sent.hex); the script expects \(step.request.hex)")
            throw OffScript(description: "client sent \(sent.hex), expected \(step.request.hex)")
        }
        let answer: ATTPDU
        do { answer = try ATTPDU.decode(step.response) } catch {
            throw ATTBearerError.invalidResponse("\(error)")
        }
        if case let .errorResponse(op, handle, code) = answer { throw ATTError(code, requestOpcode: op, handle: handle) }
        return answer
    }

    /// A command must be the next step, scripted with an empty response (none is sent).
    func command(_ pdu: ATTPDU) async throws {
        let sent = pdu.bytes
        let step: Step? = state.withLock { s in
            guard s.next < s.steps.count else { return nil }
            defer { s.next += 1 }
            return s.steps[s.next]
        }
        guard let step, step.request == sent, step.response.isEmpty else {
            Issue.record("unexpected command \(sent.hex)")
            throw OffScript(description: "unexpected command \(sent.hex)")
        }
    }
}
