// The ATT bearer between two of our stacks on the in-process virtual link (`LinkPair`: 27-octet
// ACL buffers, so every PDU above 23 octets is fragmented; one manual deadline clock).
import Synchronization
import Testing
import HCI
import Host
import L2CAP
@testable import ATT
import TestSupport
import StackTestSupport
import Transport


/// Answers Read Request with `value(handle)` and Write Request with Write Response; records commands.
final class TestServer: ATTServerDelegate {
    let connected = Mutex<[ATTPeer]>([])
    let commands = Mutex<[ATTPDU]>([])
    let push = Mutex<(any ATTServerPush)?>(nil)
    func peerConnected(_ peer: ATTPeer, push p: any ATTServerPush) async {
        connected.withLock { $0.append(peer) }
        push.withLock { $0 = p }
    }
    func respond(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) async -> ATTPDU? {
        switch pdu {
        case .readRequest(let h): return .readResponse(value: Array(value(h).prefix(mtu - 1)))
        case .writeRequest: return .writeResponse
        case .writeCommand: commands.withLock { $0.append(pdu) }; return nil
        default: return .errorResponse(requestOpcode: pdu.opcode, handle: 0, error: .requestNotSupported)
        }
    }
    func peerDisconnected(_ peer: ATTPeer) async {}
}

func value(_ handle: UInt16) -> [UInt8] { (0..<600).map { UInt8(truncatingIfNeeded: $0 + Int(handle)) } }

struct BearerPair {
    let pair: LinkPair
    let client: ATTEnd      // on the central
    let server: ATTEnd      // on the peripheral
    let delegate: TestServer

    static func make(timeout: Duration = .seconds(30)) async throws -> BearerPair {
        let pair = try await LinkPair.make()
        var config = ATTBearerConfiguration()
        config.transactionTimeout = timeout
        let d = TestServer()
        let c = await ATTEnd.start(on: pair.centralHost, pair.central, configuration: config)
        let s = await ATTEnd.start(on: pair.peripheralHost, pair.peripheral, configuration: config, delegate: d)
        return BearerPair(pair: pair, client: c, server: s, delegate: d)
    }
}

@Suite(.serialized, .timeLimit(.minutes(2)))
struct BearerTests {
    @Test func mtuExchangeBothWaysAndLongReads() async throws {
        let b = try await BearerPair.make()
        defer { Task { await b.pair.close() } }
        #expect(b.client.mtu == 23)
        let r23 = try await b.client.request(.readRequest(handle: 5))
        #expect(r23 == .readResponse(value: Array(value(5).prefix(22))))
        // Client Rx 300 vs server Rx 517: 300 on both ends.
        #expect(try await b.client.exchangeMTU(300) == 300)
        #expect(b.server.mtu == 300)
        let r = try await b.client.request(.readRequest(handle: 7))
        #expect(r == .readResponse(value: Array(value(7).prefix(299))))     // 300-octet PDU over 27-octet buffers
        // The other direction: the peripheral is a client too (its Rx 517 vs the central's server Rx 517).
        #expect(try await b.server.exchangeMTU(517) == 517)
        #expect(b.client.mtu == 517)
        // Error Responses surface as ATTError with the spec's code.
        await #expect(throws: ATTError(.requestNotSupported, requestOpcode: .findInformationRequest)) {
            _ = try await b.client.request(.findInformationRequest(startHandle: 1, endHandle: 0xFFFF))
        }
        try await b.client.command(.writeCommand(handle: 9, value: [1, 2, 3]))
        _ = try await b.client.request(.writeRequest(handle: 9, value: [4]))
        #expect(b.delegate.commands.withLock { $0 } == [.writeCommand(handle: 9, value: [1, 2, 3])])
        #expect(b.delegate.connected.withLock { $0.map(\.id) } == [b.pair.peripheral.handle])
    }

    @Test func notificationsAndIndicationsLargerThanControllerBuffers() async throws {
        let b = try await BearerPair.make()
        defer { Task { await b.pair.close() } }
        try await b.client.exchangeMTU(247)
        let inbox = Inbox<ATTPDU>()
        try await b.client.setNotificationHandler { inbox.continuation.yield($0) }
        let push = try #require(b.delegate.push.withLock { $0 })
        let big = value(3).prefix(244).map { $0 }
        try await push.notify(handle: 3, value: big)
        #expect(try await inbox.next("notification") == .handleValueNotification(handle: 3, value: big))
        try await push.indicate(handle: 4, value: Array(big.reversed()))   // returns after the confirmation
        #expect(try await inbox.next("indication") == .handleValueIndication(handle: 4, value: Array(big.reversed())))
        // Longer than ATT_MTU − 3: truncated.
        try await push.notify(handle: 3, value: value(1))
        #expect(try await inbox.next("truncated") == .handleValueNotification(handle: 3, value: Array(value(1).prefix(244))))
        // Several indications in a row: one outstanding at a time, each confirmed.
        try await withThrowingTaskGroup(of: Void.self) { g in
            for i in 0..<3 { g.addTask { try await push.indicate(handle: UInt16(10 + i), value: [UInt8(i)]) } }
            try await g.waitForAll()
        }
        var handles: Set<UInt16> = []
        for _ in 0..<3 {
            if case .handleValueIndication(let h, _) = try await inbox.next("indications") { handles.insert(h) }
        }
        #expect(handles == [10, 11, 12])
    }

    /// `notifyIfReady` sends with a plain call only on the host's thread and only while the
    /// controller has a buffer: from the test's task (the global pool) nothing is sent; inside
    /// the host the first 8 go out at once (the virtual controller has 8 ACL buffers, and a Host
    /// sends no more ACL packets than the controller has free, Core v5.4 Vol 4 Part E 4.1.1;
    /// none comes back within one job of the host, since Number Of Completed Packets waits in
    /// the host's inbox), the 9th is left to `notify`. The client gets them all, in order.
    @Test func notifyIfReadySendsAtOnceOnlyOnTheHostsThreadWithABuffer() async throws {
        let b = try await BearerPair.make()
        defer { Task { await b.pair.close() } }
        let inbox = Inbox<ATTPDU>()
        try await b.client.setNotificationHandler { inbox.continuation.yield($0) }
        let push = try #require(b.delegate.push.withLock { $0 })
        #expect(try push.notifyIfReady(handle: 3, value: [0]) == false)
        let sentAtOnce = try await b.pair.peripheralHost.run { _ in try (1...9).map { try push.notifyIfReady(handle: 3, value: [UInt8($0)]) } }
        #expect(sentAtOnce == Array(repeating: true, count: 8) + [false])
        try await push.notify(handle: 3, value: [9])
        for i in 1...9 {
            #expect(try await inbox.next("notification \(i)") == .handleValueNotification(handle: 3, value: [UInt8(i)]))
        }
    }

    /// The transaction timeout is 30 s (Core v5.4 Vol 3 Part F 3.3.3): on the manual clock,
    /// 30 s pass at once; the outstanding request and the one queued behind it fail, and the
    /// bearer stays closed ("no more ATT PDUs shall be sent on this bearer").
    @Test func transactionTimeoutClosesTheBearer() async throws {
        let pair = try await LinkPair.make()
        defer { Task { await pair.close() } }
        // The peer runs L2CAP but no ATT bearer: requests are dropped, never answered.
        let c = await ATTEnd.start(on: pair.centralHost, pair.central)
        await L2CAPEnd.start(on: pair.peripheralHost, pair.peripheral)
        let first = Task { try await c.request(.readRequest(handle: 1)) }
        try await c.until("the first request outstanding") { $0.hasOutstandingRequest }
        let waiting = Task { try await c.request(.readRequest(handle: 2)) }   // queued behind the first
        try await c.until("the second queued") { $0.queuedRequestCount == 1 }
        // 1 ms short of the timeout, nothing has failed yet (the bearer's deadline is armed
        // from its start; the manual clock has not moved since).
        await advance(pair.clock, by: .seconds(30) - .milliseconds(1), firing: pair.centralHost)
        #expect(try await c.closedReason == nil)
        await advance(pair.clock, by: .milliseconds(1), firing: pair.centralHost)
        await #expect(throws: ATTBearerError.self) { _ = try await first.value }
        await #expect(throws: ATTBearerError.self) { _ = try await waiting.value }
        guard case .transactionTimeout(let what)? = try await c.closedReason else {
            Issue.record("closedReason is \(String(describing: try await c.closedReason))"); return
        }
        #expect(what.contains("Read Request"))
        // Closed: nothing more goes out.
        await #expect(throws: ATTBearerError.transactionTimeout(what)) { _ = try await c.request(.readRequest(handle: 3)) }
        await #expect(throws: ATTBearerError.transactionTimeout(what)) { try await c.notify(handle: 1, value: [1]) }
    }

    /// Issue 25: a request whose task is cancelled throws `CancellationError` at once, before
    /// any answer. The bearer keeps the transaction outstanding (Core v5.4 Vol 3 Part F 3.3.2:
    /// no other request before its response): the next request goes out only after the late
    /// answer came, and that answer is dropped, not taken for the next one's. The peer here is
    /// the test, answering by hand.
    @Test func cancelledRequestReturnsAtOnceAndItsLateAnswerIsDropped() async throws {
        let pair = try await LinkPair.make()
        defer { Task { await pair.close() } }
        let c = await ATTEnd.start(on: pair.centralHost, pair.central)
        var requests = pair.peripheral.frames.makeAsyncIterator()
        func nextRequest() async throws -> ATTPDU {
            let f = try #require(await requests.next())
            return try ATTPDU.decode(try L2CAPFrame.decode(f).payload)
        }
        func answer(_ pdu: ATTPDU) async throws {
            try await pair.peripheralHost.sendL2CAP(L2CAPFrame(cid: .att, payload: pdu.bytes).bytes, on: pair.peripheral.handle)
        }
        let first = Pending { try await c.request(.readRequest(handle: 1)) }
        #expect(try await nextRequest() == .readRequest(handle: 1))
        first.cancel()
        let cancelled = try await first.result(within: .seconds(5), "the cancelled request")
        guard case .failure(let error) = cancelled else { Issue.record("not ended by the cancellation: \(String(describing: cancelled))"); return }
        #expect(error is CancellationError, "\(error)")
        let carried = pair.link.aclPacketCount
        let second = Task { try await c.request(.readRequest(handle: 2)) }
        // (An isolated call of the bearer runs after the second request was handed to it.)
        try await c.until("the second request queued") { $0.queuedRequestCount == 1 }
        #expect(pair.link.aclPacketCount == carried, "the second request went out with the first outstanding")
        try await answer(.readResponse(value: [0xAA]))  // the first's, late
        #expect(try await nextRequest() == .readRequest(handle: 2))
        try await answer(.readResponse(value: [0xBB]))
        #expect(try await second.value == .readResponse(value: [0xBB]))
    }

    @Test func malformedAndUnknownRequestsAreRefused() async throws {
        let pair = try await LinkPair.make()
        defer { Task { await pair.close() } }
        let server = await ATTEnd.start(on: pair.peripheralHost, pair.peripheral, delegate: TestServer())
        // The central speaks raw ATT.
        let inbox = Inbox<[UInt8]>()
        let lc = await ATTEnd.start(on: pair.centralHost, pair.central, raw: { inbox.continuation.yield($0) })
        try await lc.sendRaw([0x0A, 0x01])                        // Read Request, handle truncated
        #expect(try await inbox.next("Invalid PDU") == [0x01, 0x0A, 0x00, 0x00, 0x04])
        try await lc.sendRaw([0x3F, 0x01, 0x02])                  // unknown request
        #expect(try await inbox.next("Request Not Supported") == [0x01, 0x3F, 0x00, 0x00, 0x06])
        try await lc.sendRaw([0x7F, 0x01])                        // unknown command: ignored
        try await lc.sendRaw([0x13])                              // a response nobody asked for: dropped
        try await lc.sendRaw([0x02, 0x00, 0x01])                  // Exchange MTU 256
        #expect(try await inbox.next("Exchange MTU Response") == [0x03, 0x05, 0x02])   // 517
        #expect(server.mtu == 256)
        try await lc.sendRaw([0x0A, 0x05, 0x00])                  // Read Request handle 5
        let read = try await inbox.next("Read Response")
        #expect(read == [0x0B] + value(5).prefix(255))
    }

    /// Regression (issue 13, defect 5). Core v5.4 Vol 3 Part F 3.4.2.2: a Client Rx MTU below
    /// the default ATT_MTU is answered with the Server Rx MTU and ATT_MTU stays 23 (it used to
    /// be refused with Invalid PDU). 3.2.8: ATT_MTU is the largest PDU either side sends, so a
    /// longer request is Invalid PDU (handle 0) and a longer command is dropped, neither acted on.
    @Test func exchangeMTUBelowDefaultKeeps23AndLongerPDUsAreRefused() async throws {
        let pair = try await LinkPair.make()
        defer { Task { await pair.close() } }
        let delegate = TestServer()
        let server = await ATTEnd.start(on: pair.peripheralHost, pair.peripheral, delegate: delegate)
        let inbox = Inbox<[UInt8]>()
        let lc = await ATTEnd.start(on: pair.centralHost, pair.central, raw: { inbox.continuation.yield($0) })
        try await lc.sendRaw([0x02, 0x10, 0x00])                  // Exchange MTU, Client Rx 16 < 23
        #expect(try await inbox.next("Exchange MTU Response") == [0x03, 0x05, 0x02])   // Server Rx MTU 517
        #expect(server.mtu == 23)
        // A Write Request of 24 octets (> ATT_MTU 23): Invalid PDU, handle 0.
        try await lc.sendRaw([0x12, 0x05, 0x00] + [UInt8](repeating: 0xAB, count: 21))
        #expect(try await inbox.next("Invalid PDU") == [0x01, 0x12, 0x00, 0x00, 0x04])
        // A Write Command of 24 octets is dropped; one of 23 reaches the server.
        try await lc.sendRaw([0x52, 0x05, 0x00] + [UInt8](repeating: 0xCD, count: 21))
        try await lc.sendRaw([0x52, 0x05, 0x00] + [UInt8](repeating: 0xEF, count: 20))
        // The next request's answer proves both commands were processed before it.
        try await lc.sendRaw([0x0A, 0x05, 0x00])
        #expect(try await inbox.next("Read Response") == [0x0B] + value(5).prefix(22))
        #expect(delegate.commands.withLock { $0 } == [.writeCommand(handle: 5, value: [UInt8](repeating: 0xEF, count: 20))])
    }

    /// Core Vol 3 Part F 3.3.2: one request outstanding at a time, the others wait their turn.
    /// Four tasks keep requesting, so some always wait: every one is answered with its own
    /// handle's value, and the waiting list does not grow with the number of requests made.
    @Test func concurrentRequestersAreServedInTurnWithABoundedQueue() async throws {
        let b = try await BearerPair.make()
        defer { Task { await b.pair.close() } }
        let perTask = 25
        let wrong = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<4 {
                group.addTask {
                    var wrong = 0
                    for i in 0..<perTask {
                        let handle = UInt16(1 + task * perTask + i)
                        let r = try await b.client.request(.readRequest(handle: handle))
                        if r != .readResponse(value: Array(value(handle).prefix(22))) { wrong += 1 }
                    }
                    return wrong
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(wrong == 0)
        // The array keeps its capacity when emptied: it shows the most it ever held (100
        // requests were made; at most 3 wait at once).
        let held = try await b.client.run { b, _ in b.queuedRequests.capacity }
        #expect(held < 64, "the waiting list grew to \(held) entries")
    }

    @Test func disconnectionFailsWaitingCalls() async throws {
        let b = try await BearerPair.make(timeout: .seconds(30))
        defer { Task { await b.pair.close() } }
        // The client's handler holds the confirmation back past the disconnection.
        let reached = Watched(false)
        let (never, held) = AsyncStream<Void>.makeStream()
        defer { held.finish() }
        try await b.client.setNotificationHandler { _ in
            reached.withLock { $0 = true }
            for await _ in never {}
        }
        let push = try #require(b.delegate.push.withLock { $0 })
        let waiting = Task { try await push.indicate(handle: 1, value: [1]) }
        try await reached.until("the indication at the client's handler") { $0 }
        try await b.pair.centralHost.disconnect(handle: b.pair.central.handle)
        await #expect(throws: ATTBearerError.self) { try await waiting.value }
        // The bearer went with its link: its host holds it no more.
        await #expect(throws: ATTBearerError.self) { _ = try await b.server.closedReason }
    }
}
