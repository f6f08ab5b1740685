// ATT client decoding (ATT.ATTPDU and the GATT.GATTClient procedures): the input is a peer's
// script of answers, one per request, matched to requests as the bearer matches them. The
// client runs discovery, reads and writes against it: nothing traps, every request it sends
// fits ATT_MTU, and every PDU that decodes encodes back to itself.
import Foundation
import FuzzSupport
import HCI
import ATT
import GATT

/// A peer that answers each request with the next message of the input.
final class ScriptedPeer: ATTRequester, @unchecked Sendable {
    private let lock = NSLock()
    private var script: FuzzInput
    let negotiatedMTU: Int

    init(_ script: FuzzInput, mtu: Int) { self.script = script; negotiatedMTU = mtu }

    var mtu: Int { negotiatedMTU }

    nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        require(pdu.bytes.count <= negotiatedMTU, "client sent \(pdu.opcode) of \(pdu.bytes.count) octets, ATT_MTU \(negotiatedMTU)")
        guard let answer = lock.withLock({ script.message() }) else {
            throw ATTBearerError.transactionTimeout("the script has no more answers")
        }
        // As ATTBearer: an Error Response naming the request fails it, the matching response
        // completes it, a malformed answer of a fitting opcode is an invalid response, and
        // anything else leaves the request unanswered (here: a timeout).
        switch ATTPDU.decodeResult(answer) {
        case .pdu(let r):
            require((try? ATTPDU.decode(r.bytes)) == r, "\(r.opcode) does not survive encode/decode: \(answer)")
            if case let .errorResponse(op, handle, code) = r, op == pdu.opcode {
                throw ATTError(code, requestOpcode: op, handle: handle)
            }
            if r.opcode == pdu.opcode.responseOpcode { return r }
            throw ATTBearerError.transactionTimeout("no answer to \(pdu.opcode)")
        case .malformed(let op, let error):
            if op == .errorResponse || op == pdu.opcode.responseOpcode {
                throw ATTBearerError.invalidResponse("\(String(describing: op)): \(error)")
            }
            throw ATTBearerError.transactionTimeout("no answer to \(pdu.opcode)")
        }
    }

    func command(_ pdu: ATTPDU) async throws {
        require(pdu.bytes.count <= negotiatedMTU, "client sent \(pdu.opcode) of \(pdu.bytes.count) octets, ATT_MTU \(negotiatedMTU)")
    }
}

runFuzzer { data in
    var input = FuzzInput(data)
    let mtu = min(23 + Int(input.byte() ?? 0) * 2, 517)
    let peer = ScriptedPeer(input, mtu: mtu)
    let client = GATTClient(requester: peer)
    let done = DispatchSemaphore(value: 0)
    // Detached: this closure runs on the main actor, which is blocked waiting below.
    Task.detached {
        defer { done.signal() }
        // One procedure on its own first, so the script's first answers reach it directly (a
        // whole discovery needs every earlier request answered in order).
        let somewhere = GATTRemoteService(uuid: 0x180D, startHandle: 1, endHandle: 0xFFFF)
        for included in (try? await client.discoverIncludedServices(of: somewhere)) ?? [] {
            _ = try? await client.discoverCharacteristics(of: included)
        }
        let database = (try? await client.discoverDatabase()) ?? []
        for tree in database {
            // As an application would: the included services' characteristics too.
            for included in tree.includedServices { _ = try? await client.discoverCharacteristics(of: included) }
            for c in tree.characteristics {
                _ = try? await client.read(c.characteristic)
                _ = try? await client.write([1, 2, 3], to: c.characteristic)
                for d in c.descriptors { _ = try? await client.read(handle: d.handle) }
                if c.characteristic.properties.contains(.notify) { _ = try? await client.subscribe(c.characteristic) }
            }
        }
        _ = try? await client.readByUUID(0x2A00)
        _ = try? await client.readMultipleVariable(handles: [1, 2])
        _ = try? await client.reliableWrite([(handle: 3, value: Array(repeating: 7, count: 40))])
        _ = try? await client.validateCache()
    }
    done.wait()
}
