import Testing
import Synchronization
import HCI
import ATT
import TestSupport
@testable import GATT

/// A peer server that answers every request with hostile octets (fixed seed): mostly the
/// right response opcode with inconsistent contents (handles 0, reversed, outside the range
/// asked, out of order; lengths that disagree), sometimes an Error Response with any code.
/// What the bearer would not match to the request counts as no answer (the transaction
/// timeout). After `budget` requests it stops answering, so a procedure always ends.
final class HostilePeer: ATTRequester, Sendable {
    struct Exhausted: Error {}
    private let rng: Mutex<SeededGenerator>
    private let requests = Mutex(0)
    let budget: Int
    init(seed: UInt64, budget: Int = 200) { rng = Mutex(SeededGenerator(seed: seed)); self.budget = budget }

    var mtu: Int { 23 }
    func command(_ pdu: ATTPDU) async throws {}

    nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        guard requests.withLock({ $0 += 1; return $0 }) <= budget else { throw Exhausted() }
        let bytes = rng.withLock { answer(to: pdu, &$0) }
        // As ATTBearer resolves a transaction: a malformed answer is an invalid response, an
        // Error Response for this request throws ATTError, anything else is not an answer.
        guard let decoded = try? ATTPDU.decode(bytes) else { throw ATTBearerError.invalidResponse("malformed") }
        if case let .errorResponse(op, handle, code) = decoded, op == pdu.opcode {
            throw ATTError(code, requestOpcode: op, handle: handle)
        }
        guard decoded.opcode == pdu.opcode.responseOpcode else { throw ATTBearerError.transactionTimeout("no answer") }
        return decoded
    }

    private func answer(to pdu: ATTPDU, _ g: inout SeededGenerator) -> [UInt8] {
        func int(_ r: ClosedRange<Int>) -> Int { Int.random(in: r, using: &g) }
        func le(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255, using: &g) } }
        let (start, end): (UInt16, UInt16) = switch pdu {
        case let .readByGroupTypeRequest(s, e, _), let .readByTypeRequest(s, e, _),
             let .findInformationRequest(s, e), let .findByTypeValueRequest(s, e, _, _): (s, e)
        case let .readRequest(h), let .readBlobRequest(h, _): (h, h)
        default: (1, 0xFFFF)
        }
        // Mostly plausible handles, ascending from the start; one in six is hostile: 0,
        // 0xFFFF, before the start, or anywhere.
        var cursor = Int(start)
        func handle() -> UInt16 {
            if int(0...5) == 0 {
                return [0, 0xFFFF, UInt16(clamping: Int(start) - int(1...3)), UInt16.random(in: 0...0xFFFF, using: &g)][int(0...3)]
            }
            cursor += int(0...2)
            defer { cursor += 1 }
            return UInt16(clamping: min(cursor, Int(end)))
        }
        func groupEnd(after h: UInt16) -> UInt16 {
            int(0...5) == 0 ? UInt16(clamping: Int(h) - int(1...3)) : UInt16(clamping: Int(h) + int(0...6))
        }
        let op = pdu.opcode
        switch int(0...19) {
        case 0: return [0x01, op.rawValue] + le(handle()) + [UInt8(int(0...0x13))]   // any Error Response
        case 1...3: return [0x01, op.rawValue] + le(start) + [0x0A]                  // Attribute Not Found
        default: break
        }
        let response = op.responseOpcode?.rawValue ?? 0x01
        switch pdu {
        case .readByGroupTypeRequest:
            let length = [6, 6, 6, 20, 5][int(0...4)]
            return [response, UInt8(length)] + (0..<int(1...3)).flatMap { _ in
                let h = handle(); defer { cursor = Int(groupEnd(after: h)) + 1 }
                return le(h) + le(groupEnd(after: h)) + bytes(length - 4)
            }
        case let .readByTypeRequest(_, _, type) where type == GATTUUID.characteristic:
            let length = [7, 7, 7, 21, 6][int(0...4)]
            return [response, UInt8(length)] + (0..<int(1...3)).flatMap { _ in
                let h = handle(), value = handle()
                return le(h) + (length >= 5 ? [UInt8(int(0...255))] + le(value) + bytes(length - 5) : bytes(length - 2))
            }
        case let .readByTypeRequest(_, _, type) where type == GATTUUID.include:
            let length = [8, 8, 6, 7][int(0...3)]
            return [response, UInt8(length)] + (0..<int(1...2)).flatMap { _ in
                let h = handle()
                let s = int(0...3) == 0 ? UInt16.random(in: 0...0xFFFF, using: &g) : UInt16(int(1...40))
                return le(h) + (length >= 6 ? le(s) + le(groupEnd(after: s)) + bytes(length - 6) : bytes(length - 2))
            }
        case .readByTypeRequest:
            let length = int(2...20)
            return [response, UInt8(length)] + le(handle()) + bytes(length - 2)
        case .findInformationRequest:
            let format = int(0...5) == 0 ? UInt8(2) : UInt8(1)
            return [response, format] + (0..<int(1...3)).flatMap { _ in le(handle()) + bytes(format == 1 ? 2 : 16) }
        case .findByTypeValueRequest:
            return [response] + (0..<int(1...4)).flatMap { _ in let h = handle(); return le(h) + le(groupEnd(after: h)) }
        case .readMultipleVariableRequest:
            return [response] + (0..<int(1...3)).flatMap { _ in le(UInt16(int(0...80))) + bytes(int(0...10)) }
        default:
            return [response] + bytes(int(0...22))
        }
    }
}

@Suite struct HostilePeerTests {
    /// Whatever the peer answers, the client never traps, and either fails with a named error
    /// or keeps only handles that make sense: services and included services start at 0x0001
    /// or above and end at or after their start; a characteristic's value follows its
    /// declaration inside its service; descriptors lie inside their characteristic (Core Vol 3
    /// Part G 3.1–3.3; issue 13, defect 1).
    @Test func clientNeverTrapsAndKeepsOnlyValidHandles() async throws {
        let parent = GATTRemoteService(uuid: 0x180A, startHandle: 1, endHandle: 0x40)
        var kept = (services: 0, included: 0, characteristics: 0, descriptors: 0)
        for seed in UInt64(0)..<500 {
            func peer(_ n: UInt64) -> GATTClient { GATTClient(requester: HostilePeer(seed: seed &* 8 &+ n)) }
            if let services = try? await peer(0).discoverServices() {
                for s in services { #expect(s.startHandle != 0 && s.startHandle <= s.endHandle, "seed \(seed): \(s)") }
                kept.services += services.count
            }
            if let included = try? await peer(1).discoverIncludedServices(of: parent) {
                let client = peer(2)
                for s in included {
                    #expect(s.startHandle != 0 && s.startHandle <= s.endHandle, "seed \(seed): \(s)")
                    _ = try? await client.discoverCharacteristics(of: s)   // the defect's trap
                }
                kept.included += included.count
            }
            if let chars = try? await peer(3).discoverCharacteristics(of: parent) {
                for c in chars {
                    #expect(parent.startHandle <= c.declarationHandle && c.declarationHandle < c.valueHandle
                            && c.valueHandle <= c.endHandle && c.endHandle <= parent.endHandle, "seed \(seed): \(c)")
                }
                for (a, b) in zip(chars, chars.dropFirst()) { #expect(a.endHandle < b.declarationHandle, "seed \(seed)") }
                kept.characteristics += chars.count
            }
            let c = GATTRemoteCharacteristic(uuid: 0x2A37, declarationHandle: 2, valueHandle: 3, properties: .notify, endHandle: 0x10)
            if let descriptors = try? await peer(4).discoverDescriptors(of: c) {
                for d in descriptors { #expect(c.valueHandle < d.handle && d.handle <= c.endHandle, "seed \(seed): \(d)") }
                kept.descriptors += descriptors.count
            }
            _ = try? await peer(5).discoverDatabase()
            _ = try? await peer(6).read(handle: 3)
            _ = try? await peer(7).readMultipleVariable(handles: [3, 5, 7])
        }
        // The checks above ran on something.
        #expect(kept.services > 0 && kept.included > 0 && kept.characteristics > 0 && kept.descriptors > 0, "\(kept)")
    }
}
