import Testing
import Synchronization
import HCI
import ATT
@testable import GATT

/// A peer whose answers to Write Requests the test releases one by one (a Write Response, or
/// an error thrown as the bearer throws it), so two subscriptions of one value can be under
/// way at once.
private final class GatedPeer: ATTRequester {
    private struct State {
        var waiting: [CheckedContinuation<ATTPDU, any Error>] = []
        var sent: [ATTPDU] = []
        var watcher: (count: Int, continuation: CheckedContinuation<Void, Never>)?
    }
    private let state = Mutex(State())
    var mtu: Int { 23 }

    nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        try await withCheckedThrowingContinuation { c in
            let ready: CheckedContinuation<Void, Never>? = state.withLock { s in
                s.waiting.append(c)
                s.sent.append(pdu)
                guard let w = s.watcher, s.sent.count >= w.count else { return nil }
                s.watcher = nil
                return w.continuation
            }
            ready?.resume()
        }
    }

    func command(_ pdu: ATTPDU) async throws {}

    /// Returns once `count` requests were sent.
    func sent(_ count: Int) async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let now = state.withLock { s -> Bool in
                if s.sent.count >= count { return true }
                s.watcher = (count, c)
                return false
            }
            if now { c.resume() }
        }
    }

    var requests: [ATTPDU] { state.withLock { $0.sent } }

    /// Answers the oldest unanswered request.
    func answer(_ result: Result<ATTPDU, any Error>) {
        let c = state.withLock { $0.waiting.removeFirst() }
        c.resume(with: result)
    }
}

private final class Received: Sendable {
    let values = Mutex<[[UInt8]]>([])
    private let endedFlag = Atomic<Bool>(false)
    var ended: Bool { endedFlag.load(ordering: .relaxed) }
    func end() { endedFlag.store(true, ordering: .relaxed) }
}

@Suite struct SubscriptionRaceTests {
    /// Two subscriptions of one value under way at once: the second replaces the first (which
    /// ends), and when the first's CCCD write then fails, only the first fails; the second
    /// keeps its subscriber and gets the value's notifications. (It removed the second's.)
    /// Core v5.4 Vol 3 Part G 4.10.1: the client writes 0x0001 to the CCCD to be notified.
    @MainActor @Test func aFailedSubscriptionLeavesTheOneThatReplacedIt() async throws {
        let peer = GatedPeer()
        let client = GATTClient(requester: peer)
        let c = GATTRemoteCharacteristic(uuid: BluetoothUUID(0xFFF1), declarationHandle: 0x0002, valueHandle: 0x0003,
                                         properties: [.notify], endHandle: 0x0004)
        let first = Received(), second = Received()
        let subscribingFirst = Task { @MainActor in
            try await client.subscribe(c, cccdHandle: 0x0004, onValue: { v in first.values.withLock { $0.append(v) } },
                                       onEnd: { first.end() })
        }
        await peer.sent(1)
        let subscribingSecond = Task { @MainActor in
            try await client.subscribe(c, cccdHandle: 0x0004, onValue: { v in second.values.withLock { $0.append(v) } },
                                       onEnd: { second.end() })
        }
        await peer.sent(2)
        // Both wrote 0x0001 to the CCCD (Write Request, Part F 3.4.5.1).
        #expect(peer.requests == [.writeRequest(handle: 0x0004, value: [0x01, 0x00]), .writeRequest(handle: 0x0004, value: [0x01, 0x00])])
        #expect(first.ended, "the replaced subscription ends")
        // The first write fails (the peer's Error Response: Write Not Permitted, Part F 3.4.1.1), the second succeeds.
        peer.answer(.failure(ATTError(.writeNotPermitted, requestOpcode: .writeRequest, handle: 0x0004)))
        await #expect(throws: ATTError.self) { try await subscribingFirst.value }
        peer.answer(.success(.writeResponse))
        try await subscribingSecond.value
        #expect(client.isSubscribed(c))
        #expect(!second.ended)
        await client.received(.handleValueNotification(handle: 0x0003, value: [0x2A]))
        #expect(second.values.withLock { $0 } == [[0x2A]])
        #expect(first.values.withLock { $0 }.isEmpty)
    }
}
