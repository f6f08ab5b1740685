// Enhanced credit-based flow control mode (Core v5.4 Vol 3 Part A 4.25–4.28, 10.2) between two
// of our stacks on the in-process link; the answers to bad requests are the spec's result codes.
import Testing
import HCI
import Host
import L2CAP
import TestSupport
import StackTestSupport

@Suite(.serialized, .timeLimit(.minutes(1)))
struct EnhancedCreditBasedTests {
    /// Five channels in one request (4.25), SDUs longer than the MPS on each, both ways.
    @Test func fiveChannelsInOneRequestCarrySDUs() async throws {
        let l = try await L2CAPPair.make()
        defer { Task { await l.pair.close() } }
        let accepted = Accepted()
        try await l.peripheral.listen(psm: 0x0027, mtu: 700, mps: 64, credits: 2, enhanced: true) { accepted.continuation.yield($0) }
        let ours = try await l.central.connectEnhancedChannels(psm: 0x0027, count: 5, mtu: 500, mps: 80, credits: 3)
        #expect(ours.count == 5)
        var theirs: [L2CAPChannel] = []
        for _ in 0..<5 { theirs.append(try await accepted.next()) }
        for (c, p) in zip(ours, theirs) {
            #expect(c.enhanced && p.enhanced)
            #expect(c.remoteCID == p.localCID && p.remoteCID == c.localCID)
            #expect(c.peerMTU == 700 && c.peerMPS == 64 && p.peerMTU == 500 && p.peerMPS == 80)
        }
        for (i, (c, p)) in zip(ours, theirs).enumerated() {
            let sdu = pattern(300 + i * 50, seed: i)
            let send = Task { try await c.send(sdu) }
            #expect(try await p.receive() == sdu)
            try await send.value
            let back = pattern(450, seed: 9 + i)
            let reply = Task { try await p.send(back) }
            #expect(try await c.receive() == back)
            try await reply.value
        }
    }

    /// 4.26: one Destination CID per Source CID; a Source CID already used by the peer's
    /// channel gets 0x0000 and result 0x000A, the others are opened.
    @Test func someRefusedSomeOpened() async throws {
        let l = try await L2CAPPair.make()
        defer { Task { await l.pair.close() } }
        try await l.peripheral.listen(psm: 0x0080, enhanced: true) { _ in }
        let first = try await l.central.signalingRequest(.creditBasedConnectionRequest(
            spsm: 0x0080, mtu: 100, mps: 100, initialCredits: 1, sourceCIDs: [0x0040]))
        guard case .creditBasedConnectionResponse(_, _, _, .successful, let d1) = first.body else { Issue.record("\(first)"); return }
        #expect(d1.count == 1 && d1[0] >= 0x0040)
        let second = try await l.central.signalingRequest(.creditBasedConnectionRequest(
            spsm: 0x0080, mtu: 100, mps: 100, initialCredits: 1, sourceCIDs: [0x0041, 0x0040, 0x0042]))
        guard case let .creditBasedConnectionResponse(_, _, _, result, d2) = second.body else { Issue.record("\(second)"); return }
        #expect(result == .sourceCIDAlreadyAllocated)
        #expect(d2.count == 3 && d2[1] == 0 && d2[0] != 0 && d2[2] != 0)
        // MTU or MPS below 64 (4.25): all refused, unacceptable parameters (0x000B).
        let small = try await l.central.signalingRequest(.creditBasedConnectionRequest(
            spsm: 0x0080, mtu: 63, mps: 100, initialCredits: 1, sourceCIDs: [0x0050, 0x0051]))
        guard case let .creditBasedConnectionResponse(_, _, _, r3, d3) = small.body else { Issue.record("\(small)"); return }
        #expect(r3 == .unacceptableParameters && d3 == [0, 0])
        // An LE Credit Based Connection Request to an enhanced-only SPSM: not supported (4.23).
        let le = try await l.central.signalingRequest(.leCreditBasedConnectionRequest(spsm: 0x0080, sourceCID: 0x0060, mtu: 100, mps: 100, initialCredits: 1))
        guard case .leCreditBasedConnectionResponse(_, _, _, _, let r4) = le.body else { Issue.record("\(le)"); return }
        #expect(r4 == .spsmNotSupported)
    }

    /// 4.27/4.28: reconfiguration raises the MTU both sides see; the MTU may not shrink (0x0001),
    /// the MPS of more than one channel may not shrink at once (0x0002), an unknown CID is 0x0003.
    @Test func reconfigurationRaisesTheMTUAndRefusesWhatTheSpecForbids() async throws {
        let l = try await L2CAPPair.make()
        defer { Task { await l.pair.close() } }
        let accepted = Accepted()
        try await l.peripheral.listen(psm: 0x0027, mtu: 100, mps: 64, enhanced: true) { accepted.continuation.yield($0) }
        let ours = try await l.central.connectEnhancedChannels(psm: 0x0027, count: 2, mtu: 100, mps: 100)
        let p0 = try await accepted.next()
        _ = try await accepted.next()  // the second channel, reconfigured with the first
        // SDU larger than the old MTU is refused before, accepted after the reconfiguration.
        await #expect(throws: L2CAPError.sduTooLarge(length: 400, mtu: 100)) { try await p0.send(pattern(400, seed: 1)) }
        try await l.central.reconfigure(ours.map(\.localCID), mtu: 400, mps: 120)
        let big = pattern(400, seed: 2)
        let send = Task { try await p0.send(big) }
        #expect(try await ours[0].receive() == big)
        try await send.value
        let cids = ours.map(\.localCID)
        let shrinkMTU = try await l.central.signalingRequest(.creditBasedReconfigureRequest(mtu: 300, mps: 120, destinationCIDs: cids))
        #expect(shrinkMTU.body == .creditBasedReconfigureResponse(result: 0x0001))
        let shrinkMPS = try await l.central.signalingRequest(.creditBasedReconfigureRequest(mtu: 400, mps: 100, destinationCIDs: cids))
        #expect(shrinkMPS.body == .creditBasedReconfigureResponse(result: 0x0002))
        let oneMPS = try await l.central.signalingRequest(.creditBasedReconfigureRequest(mtu: 400, mps: 100, destinationCIDs: [cids[0]]))
        #expect(oneMPS.body == .creditBasedReconfigureResponse(result: 0x0000))
        let unknown = try await l.central.signalingRequest(.creditBasedReconfigureRequest(mtu: 400, mps: 120, destinationCIDs: [cids[1], 0x0077]))
        #expect(unknown.body == .creditBasedReconfigureResponse(result: 0x0003))
        // Our own request obeys the same rule: the MTU may not shrink.
        await #expect(throws: L2CAPError.self) { try await l.central.reconfigure(cids, mtu: 300, mps: 120) }
    }
}
