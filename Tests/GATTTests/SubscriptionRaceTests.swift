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

    /// Unsubscribing while an earlier unsubscription of the same value is still being written:
    /// a `stopNotifications` that finds the subscription already ended waits for the CCCD
    /// write under way (0x0000, Core v5.4 Vol 3 Part G 4.10.1), whichever unsubscription
    /// started it. When the first write was answered it dropped the second's entry, and a
    /// later unsubscribe returned before the second write was answered.
    @MainActor @Test func anUnsubscribeWaitsForTheCCCDWriteUnderWay() async throws {
        let peer = GatedPeer()
        let client = GATTClient(requester: peer)
        let c = GATTRemoteCharacteristic(uuid: BluetoothUUID(0xFFF1), declarationHandle: 0x0002, valueHandle: 0x0003,
                                         properties: [.notify], endHandle: 0x0004)
        let subscribing = Task { @MainActor in try await client.subscribe(c, cccdHandle: 0x0004, onValue: { _ in }, onEnd: {}) }
        await peer.sent(1)
        peer.answer(.success(.writeResponse))
        try await subscribing.value
        // First unsubscription: its write (request 2) waits.
        let firstOff = Task { @MainActor in try await client.unsubscribe(c, cccdHandle: 0x0004) }
        await peer.sent(2)
        // Subscribe again (request 3), then a second unsubscription (request 4) while the first's write still waits.
        let again = Task { @MainActor in try await client.subscribe(c, cccdHandle: 0x0004, onValue: { _ in }, onEnd: {}) }
        await peer.sent(3)
        let secondOff = Task { @MainActor in try await client.unsubscribe(c, cccdHandle: 0x0004) }
        await peer.sent(4)
        #expect(peer.requests == [.writeRequest(handle: 0x0004, value: [0x01, 0x00]), .writeRequest(handle: 0x0004, value: [0x00, 0x00]),
                                  .writeRequest(handle: 0x0004, value: [0x01, 0x00]), .writeRequest(handle: 0x0004, value: [0x00, 0x00])])
        peer.answer(.success(.writeResponse))  // the first unsubscription's write
        try await firstOff.value
        peer.answer(.success(.writeResponse))  // the subscription's
        try await again.value
        // The second unsubscription's write (request 4) is not answered yet: a third
        // unsubscribe waits for it.
        let thirdOff = Task { @MainActor in try await client.unsubscribe(c, cccdHandle: 0x0004) }
        for _ in 0..<10 { await Task.yield() }
        #expect(peer.requests.count == 4, "no second CCCD write of 0x0000")
        let done = Received()
        let watcher = Task { @MainActor in try await thirdOff.value; done.end() }
        for _ in 0..<10 { await Task.yield() }
        #expect(!done.ended, "unsubscribe returned before the CCCD write under way was answered")
        peer.answer(.success(.writeResponse))
        try await secondOff.value
        try await watcher.value
        #expect(!client.isSubscribed(c))
    }
}
