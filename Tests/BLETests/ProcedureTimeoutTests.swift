// Every timeout of the stack goes through the host's one deadline table (issue 14): an
// injected clock that stands still fires nothing; moved past a procedure's deadline, it fires
// that procedure's timeout, whatever its layer.
import Synchronization
import Testing
import HCI
import Host
import L2CAP
import ATT
import VirtualController
import StackTestSupport
import TestSupport

@Suite(.timeLimit(.minutes(1))) struct ProcedureTimeoutTests {
    /// A central whose host runs on a manual clock, linked to a host that never answers
    /// (no L2CAP layer on its side).
    func linkToASilentPeer(clock: ManualDeadlineClock) async throws -> (Host, Host, LEConnection) {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        var config = HostConfiguration()
        config.clock = clock
        let central = Host(transport: transports[0], configuration: config)
        let silent = Host(transport: transports[1])
        _ = try await silent.start()
        _ = try await central.start()
        let name = Array("silent".utf8)
        try await silent.startAdvertising(AdvertisingParameters(data: [2, 0x01, 0x06, UInt8(name.count + 1), 0x09] + name))
        try await central.startScanning()
        var found: AdvertisingReportValue?
        for await e in central.events {
            if case .advertisement(let r) = e, AdvertisingData(parsing: r.data).name == "silent", r.isConnectable { found = r; break }
        }
        try await central.stopScanning()
        let link = try await central.connect(to: try #require(found).address)
        return (central, silent, link)
    }

    /// The peer's side of the link: it learns of it from its own LE Connection Complete, which
    /// may come after the central's, so wait for it (bounded) rather than race it.
    func connection(of peer: Host) async throws -> LEConnection {
        try await peer.until("the peer's side of the link") { !$0.connections.isEmpty }
        return try #require(await peer.connections.first)
    }

    /// `linkToASilentPeer` and the peer's side of the link: the test puts the layers it needs on each.
    func linkToAPeer(clock: ManualDeadlineClock) async throws -> (central: Host, peer: Host, LEConnection, LEConnection) {
        let (central, peer, link) = try await linkToASilentPeer(clock: clock)
        return (central, peer, link, try await connection(of: peer))
    }

    @Test func attTransactionAndSignalingRequestTimeOutThroughTheDeadlineTable() async throws {
        let clock = ManualDeadlineClock()
        let (central, silent, link) = try await linkToASilentPeer(clock: clock)
        // Transaction timeout 30 s (Core Vol 3 Part F 3.3.3); signaling timeout 30 s (RTX, Part A 6.2.1).
        let bearer = await ATTEnd.start(on: central, link)
        let l2cap = bearer.l2cap
        // The bearer's requests' deadline is armed while it is open (each request is timed
        // from its own start, `attTransactionTimeoutCountsFromEachRequest`).
        #expect(await central.armedDeadlineCount == 1)
        let read = Task { try await bearer.request(.readRequest(handle: 0x0003)) }
        let signal = Task {
            try await l2cap.signalingRequest(.leCreditBasedConnectionRequest(spsm: 0x0080, sourceCID: 0x0040, mtu: 23, mps: 23,
                                                                              initialCredits: 1))
        }
        try await central.armed(2)
        #expect(await central.armedDeadlineCount == 2)
        // 29 s: neither deadline has come.
        await advance(clock, by: .seconds(29), firing: central)
        #expect(await central.armedDeadlineCount == 2)
        await advance(clock, by: .seconds(1), firing: central)
        await #expect {
            _ = try await read.value
        } throws: { error in
            if case ATTBearerError.transactionTimeout = error { return true }
            return false
        }
        await #expect {
            _ = try await signal.value
        } throws: { error in
            if case L2CAPError.signalingTimeout = error { return true }
            return false
        }
        #expect(await central.armedDeadlineCount == 0)
        await central.close()
        await silent.close()
    }
}

extension ProcedureTimeoutTests {
    /// A credit-based channel's wait for credits is a deadline in the host's table: the peer
    /// gives one credit and no more; the second SDU fails with `creditTimeout` once the clock
    /// passes `L2CAPConfiguration.creditTimeout` (30 s by default), not before.
    @Test func creditWaitTimesOutThroughTheDeadlineTable() async throws {
        let clock = ManualDeadlineClock()
        let (central, peer, link, peerLink) = try await linkToAPeer(clock: clock)
        let c = await L2CAPEnd.start(on: central, link)
        let p = await L2CAPEnd.start(on: peer, peerLink)
        // The peer's application never reads: it returns no credits after the first.
        try await p.listen(psm: 0x80, credits: 1) { _ in }
        let channel = try await c.connectChannel(psm: 0x80)
        try await channel.send([1, 2, 3])
        #expect(await central.armedDeadlineCount == 0)
        let second = Task { try await channel.send([4, 5, 6]) }
        try await central.armed(1)
        #expect(await central.armedDeadlineCount == 1)
        await advance(clock, by: .seconds(29), firing: central)
        #expect(await central.armedDeadlineCount == 1)
        await advance(clock, by: .seconds(1), firing: central)
        await #expect(throws: L2CAPError.creditTimeout(cid: channel.localCID, waited: .seconds(30))) { try await second.value }
        #expect(await central.armedDeadlineCount == 0)
        await central.close()
        await peer.close()
    }
}

extension ProcedureTimeoutTests {
    /// The ATT transaction timeout counts from each request (Core v5.4 Vol 3 Part F 3.3.3: a
    /// transaction not completed within 30 s times out), also when the requests' deadline was
    /// armed for an earlier request and kept armed after its answer: a request sent 20 s into
    /// the first one's deadline is still waiting when that deadline comes (10 s later), and
    /// times out 30 s after it was sent, not before.
    @Test func attTransactionTimeoutCountsFromEachRequest() async throws {
        let clock = ManualDeadlineClock()
        let (central, peer, link, peerLink) = try await linkToAPeer(clock: clock)
        let bearer = await ATTEnd.start(on: central, link)
        // The peer speaks raw ATT: the test answers the first request by hand.
        let received = Watched<[[UInt8]]>([])
        let p = await ATTEnd.start(on: peer, peerLink, raw: { pdu in received.withLock { $0.append(pdu) } })
        func requestsReceived(_ n: Int) async throws {
            try await received.until("\(n) request(s) at the peer") { $0.count >= n }
            #expect(received.value.count == n)
        }
        let first = Task { try await bearer.request(.readRequest(handle: 0x0001)) }
        try await requestsReceived(1)
        await advance(clock, by: .seconds(20), firing: central)
        try await p.sendRaw([0x0B, 0x2A])  // Read Response (opcode 0x0B, Core v5.4 Vol 3 Part F 3.4.4.4)
        #expect(try await first.value == .readResponse(value: [0x2A]))
        let second = Task { try await bearer.request(.readRequest(handle: 0x0002)) }
        try await requestsReceived(2)
        // 30 s after the first request: its deadline comes; the second has waited 10 s.
        await advance(clock, by: .seconds(10), firing: central)
        #expect(try await bearer.closedReason == nil)
        // 29 s after the second request: still waiting.
        await advance(clock, by: .seconds(19), firing: central)
        #expect(try await bearer.closedReason == nil)
        // 30 s after it: it times out, and the bearer closes.
        await advance(clock, by: .seconds(1), firing: central)
        await #expect {
            _ = try await second.value
        } throws: { error in
            if case ATTBearerError.transactionTimeout = error { return true }
            return false
        }
        await central.close()
        await peer.close()
    }
}

/// The one receive path keeps a link's PDUs in arrival order (issue 14), also when one of them
/// is still being handled by the application while later ones arrive.
@Suite(.timeLimit(.minutes(1))) struct ReceiveOrderTests {
    @Test func notificationsArrivingWhileAnEarlierOneIsStillHandledKeepTheirOrder() async throws {
        let (central, peer, link) = try await ProcedureTimeoutTests().linkToASilentPeer(clock: ManualDeadlineClock())
        let seen = Watched<[UInt8]>([])
        let released = Watched<Set<UInt8>>([])
        // Values 5 and 12 are declined by the synchronous receiver (as GATTClient declines
        // Service Changed) and go to the asynchronous handler, which takes its time (until the
        // test releases it, once every value has arrived): the values after them arrive
        // meanwhile and must still be seen after them.
        await ATTEnd.start(on: central, link, configure: { bearer in
            bearer.setNotificationFastHandler { pdu in
                guard case .handleValueNotification(_, let v) = pdu, v != [5], v != [12] else { return false }
                seen.withLock { $0.append(v[0]) }
                return true
            }
            bearer.setNotificationHandler { pdu in
                guard case .handleValueNotification(_, let v) = pdu else { return }
                if v == [5] || v == [12] {
                    _ = try? await released.until("value \(v[0]) released") { $0.contains(v[0]) }
                }
                seen.withLock { $0.append(v[0]) }
            }
        })
        let handle = try await ProcedureTimeoutTests().connection(of: peer).handle
        for i in UInt8(0)..<20 {
            try await peer.sendL2CAP(L2CAPFrame(cid: .att, payload: ATTPDU.handleValueNotification(handle: 0x0010, value: [i]).bytes).bytes,
                                     on: handle)
        }
        try await central.settled()  // all 20 arrived (one executor for the link); 5 is being handled
        #expect(seen.value == Array(0..<5))
        released.withLock { _ = $0.insert(5) }
        try await seen.until("the values up to 11") { $0.count == 12 }
        try await central.settled()  // 12 is being handled
        #expect(seen.value == Array(0..<12))
        released.withLock { _ = $0.insert(12) }
        try await seen.until("all 20 values") { $0.count == 20 }
        #expect(seen.value == Array(0..<20))
        await central.close()
        await peer.close()
    }
}
