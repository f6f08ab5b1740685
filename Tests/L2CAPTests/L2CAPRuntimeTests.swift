// L2CAP runtime: signaling and LE credit-based channels, between two of our stacks on the
// in-process virtual link (`LinkPair`, one manual deadline clock), and against Bumble's own
// L2CAP (Tools/bumble/l2cap_coc.py) for interop.
import Synchronization
import Testing
import HCI
import Host
import L2CAP
import TestSupport
import StackTestSupport
import Transport

func pattern(_ n: Int, seed: Int) -> [UInt8] { (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ seed) } }

@Suite(.serialized, .timeLimit(.minutes(2)))
struct L2CAPRuntimeTests {
    @Test func unknownSignalingCommandIsRejectedAsNotUnderstood() async throws {
        let l = try await L2CAPPair.make()
        defer { Task { await l.pair.close() } }
        let answer = try await l.central.signalingRequest(.unknown(code: SignalingCode(0x7E), data: [1, 2, 3]))
        #expect(answer.body == .commandReject(.commandNotUnderstood))
        // Reconfiguring a channel that does not exist: result 0x0003, one or more Destination
        // CIDs invalid (Core v5.4 Vol 3 Part A 4.28).
        let second = try await l.peripheral.signalingRequest(.creditBasedReconfigureRequest(mtu: 100, mps: 100, destinationCIDs: [0x40]))
        #expect(second.body == .creditBasedReconfigureResponse(result: 0x0003))
        // A Disconnection Request for a channel that does not exist: Invalid CID with both CIDs.
        let third = try await l.central.signalingRequest(.disconnectionRequest(destinationCID: 0x0055, sourceCID: 0x0066))
        #expect(third.body == .commandReject(.invalidCID(localCID: 0x0055, remoteCID: 0x0066)))
    }

    @Test func signalingTimeoutAndDisconnectFailPending() async throws {
        let pair = try await LinkPair.make()
        defer { Task { await pair.close() } }
        // The RTX timer (Core v5.4 Vol 3 Part A 6.2.1) at its default here, 30 s, on the
        // manual clock. Only the central runs L2CAP: the peripheral never answers.
        let c = await L2CAPEnd.start(on: pair.centralHost, pair.central)
        let armed = await pair.centralHost.armedDeadlineCount
        let request = Task { try await c.connectChannel(psm: 0x80) }
        try await pair.advance(by: .seconds(30), once: pair.centralHost, hasArmed: armed + 1)
        await #expect(throws: L2CAPError.signalingTimeout("LE Credit Based Connection Request (0x14)")) {
            _ = try await request.value
        }
        // Link loss fails everything pending at once (no time passes).
        let pending = Task { try await c.connectChannel(psm: 0x81) }
        try await pair.centralHost.armed(armed + 1)
        try await pair.centralHost.disconnect(handle: pair.central.handle)
        await #expect(throws: L2CAPError.disconnected(handle: pair.central.handle)) { try await pending.value }
        #expect(await c.isDisconnected)
    }

    @Test func refusedChannelsCarryTheResult() async throws {
        let l = try await L2CAPPair.make()
        defer { Task { await l.pair.close() } }
        await #expect(throws: L2CAPError.connectionRefused(.spsmNotSupported)) {
            _ = try await l.central.connectChannel(psm: 0x0091)
        }
        try await l.peripheral.listen(psm: 0x0080) { _ in }
        // A request with an out-of-range source CID (sent raw): Invalid Source CID.
        let bad = try await l.central.signalingRequest(.leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x0010, mtu: 100, mps: 100, initialCredits: 1))
        guard case .leCreditBasedConnectionResponse(_, _, _, _, let r1) = bad.body else { Issue.record("\(bad)"); return }
        #expect(r1 == .invalidSourceCID)
        let small = try await l.central.signalingRequest(.leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x0070, mtu: 22, mps: 100, initialCredits: 1))
        guard case .leCreditBasedConnectionResponse(_, _, _, _, let r2) = small.body else { Issue.record("\(small)"); return }
        #expect(r2 == .unacceptableParameters)
        let ok = try await l.central.signalingRequest(.leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x0071, mtu: 100, mps: 100, initialCredits: 1))
        guard case .leCreditBasedConnectionResponse(_, _, _, _, let r3) = ok.body else { Issue.record("\(ok)"); return }
        #expect(r3 == .successful)
        let again = try await l.central.signalingRequest(.leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x0071, mtu: 100, mps: 100, initialCredits: 1))
        guard case .leCreditBasedConnectionResponse(_, _, _, _, let r4) = again.body else { Issue.record("\(again)"); return }
        #expect(r4 == .sourceCIDAlreadyAllocated)
    }

    /// Core v5.4 Vol 3 Part A 4.26: L2CAP_CREDIT_BASED_CONNECTION_RSP carries one Destination
    /// CID per Source CID of the request, 0x0000 for each channel not established. We have no
    /// enhanced credit-based SPSM: all refused, result 0x0002 (SPSM not supported, 4.26).
    @Test func enhancedCreditBasedRefusalAnswersEverySourceCID() async throws {
        let l = try await L2CAPPair.make()
        defer { Task { await l.pair.close() } }
        for sources: [UInt16] in [[0x0040], [0x0040, 0x0041, 0x0042], [0x0050, 0x0051, 0x0052, 0x0053, 0x0054]] {
            let answer = try await l.central.signalingRequest(.creditBasedConnectionRequest(
                spsm: 0x0080, mtu: 100, mps: 100, initialCredits: 1, sourceCIDs: sources))
            guard case .creditBasedConnectionResponse(_, _, _, let result, let destinations) = answer.body else {
                Issue.record("\(answer)"); return
            }
            #expect(result == .spsmNotSupported)
            #expect(destinations == [UInt16](repeating: 0x0000, count: sources.count))
        }
    }

    @Test func creditBasedChannelBetweenOurStacksWithBackPressure() async throws {
        let l = try await L2CAPPair.make()
        defer { Task { await l.pair.close() } }
        let accepted = Accepted()
        // The peripheral gives only 2 credits and an MPS of 30: every SDU needs many K-frames.
        try await l.peripheral.listen(psm: 0x0080, mtu: 1000, mps: 30, credits: 2) { accepted.continuation.yield($0) }
        let ch = try await l.central.connectChannel(psm: 0x0080, mtu: 600, mps: 40, credits: 3)
        let server = try await accepted.next()
        #expect(ch.peerMTU == 1000 && ch.peerMPS == 30 && server.peerMTU == 600 && server.peerMPS == 40)
        #expect(server.remoteCID == ch.localCID && ch.remoteCID == server.localCID)
        let sdus = (0..<20).map { pattern(100 + $0 * 40, seed: $0) }
        let sender = Task { for s in sdus { try await ch.send(s) } }
        var got: [[UInt8]] = []
        for try await sdu in server.sdus {
            got.append(sdu)
            if got.count == sdus.count { break }
        }
        try await sender.value
        #expect(got == sdus)
        // Too large for the peer's MTU.
        await #expect(throws: L2CAPError.sduTooLarge(length: 1001, mtu: 1000)) { try await ch.send(pattern(1001, seed: 0)) }
        // Close: the other side's stream ends normally.
        try await ch.close()
        let end = try await server.receive()  // (the suite's time limit bounds every wait)
        #expect(end == nil)
        await #expect(throws: L2CAPError.self) { try await server.send([1]) }
    }

    @Test func connectionParameterUpdateGoesThroughThePolicy() async throws {
        let l = try await L2CAPPair.make()
        defer { Task { await l.pair.close() } }
        let asked = Accepted2()
        try await l.central.setConnectionParameterPolicy { req in
            asked.append(req)
            return req.latency == 0
        }
        let yes = try await l.peripheral.requestConnectionParameterUpdate(intervalMin: 40, intervalMax: 56, latency: 0, timeout: 500)
        #expect(yes)
        let no = try await l.peripheral.requestConnectionParameterUpdate(intervalMin: 40, intervalMax: 56, latency: 2, timeout: 500)
        #expect(!no)
        #expect(asked.all.count == 2 && asked.all.first?.intervalMax == 56)
        await #expect(throws: L2CAPError.self) {
            _ = try await l.central.requestConnectionParameterUpdate(intervalMin: 40, intervalMax: 56, latency: 0, timeout: 500)
        }
    }

    /// Issue 13 defect 8: a peer's Connection Parameter Update Requests cannot multiply tasks.
    /// While one is being decided (the policy is blocked) the others are answered at once with
    /// result 0x0001, Connection Parameters rejected (Core v5.4 Vol 3 Part A 4.21). Before the
    /// fix each request started its own task: the policy was asked 20 times at once.
    @Test func parameterUpdateRequestsAreDecidedOneAtATime() async throws {
        let pair = try await LinkPair.make()
        defer { Task { await pair.close() } }
        // Only the central runs L2CAP; the peripheral host sends raw signaling frames.
        let c = await L2CAPEnd.start(on: pair.centralHost, pair.central, configuration: L2CAPConfiguration())
        let asked = Accepted2()
        let gate = AsyncStream<Void>.makeStream()
        try await c.setConnectionParameterPolicy { req in
            asked.append(req)
            for await _ in gate.stream { break }
            return true
        }
        let seen = Watched<[SignalingCommand]>([])
        let responses = Pending { () throws -> [SignalingCommand] in
            for await f in pair.peripheral.frames {
                try Task.checkCancellation()
                guard let frame = try? L2CAPFrame.decode(f), frame.cid == .leSignaling,
                      let command = try? SignalingCommand.decode(frame.payload) else { continue }
                if seen.withLock({ $0.append(command); return $0.count }) == 20 { break }
            }
            return seen.withLock { $0 }
        }
        for id in UInt8(1)...20 {
            let request = SignalingCommand(identifier: id, .connectionParameterUpdateRequest(
                intervalMin: 40, intervalMax: 56, latency: 0, timeout: 500))
            try await pair.peripheralHost.sendL2CAP(L2CAPFrame(cid: .leSignaling, payload: request.bytes).bytes,
                                                    on: pair.peripheral.handle)
        }
        // Requests 2–20 are answered while the first is being decided.
        try await seen.until("19 rejections") { $0.count == 19 }
        #expect(asked.all.count == 1)
        gate.continuation.yield()
        guard case .success(let got) = try await responses.result(within: .seconds(10)) else {
            Issue.record("reading the 20 responses failed")
            return
        }
        let rejected = got.filter { $0.body == SignalingCommand.Body.connectionParameterUpdateResponse(result: 1) }.map { $0.identifier }
        let accepted = got.filter { $0.body == SignalingCommand.Body.connectionParameterUpdateResponse(result: 0) }.map { $0.identifier }
        #expect(rejected == Array(2...20))
        #expect(accepted == [1])
        #expect(asked.all.count == 1)
    }

    /// Issue 13 defect 9: a peer that gives no credits does not make `send` wait for ever; it
    /// fails after `L2CAPConfiguration.creditTimeout` with `creditTimeout`. Before the fix the
    /// second send never returned.
    @Test func sendFailsWhenThePeerGivesNoCredits() async throws {
        let pair = try await LinkPair.make()
        defer { Task { await pair.close() } }
        let config = L2CAPConfiguration()  // creditTimeout 30 s, on the manual clock
        let c = await L2CAPEnd.start(on: pair.centralHost, pair.central, configuration: config)
        let p = await L2CAPEnd.start(on: pair.peripheralHost, pair.peripheral, configuration: L2CAPConfiguration())
        // The peripheral's application never reads: it returns no credits after the first.
        try await p.listen(psm: 0x80, credits: 1) { _ in }
        let channel = try await c.connectChannel(psm: 0x80)
        try await channel.send([1, 2, 3])
        let armed = await pair.centralHost.armedDeadlineCount
        let second = Pending { try await channel.send([4, 5, 6]) }
        try await pair.advance(by: config.creditTimeout, once: pair.centralHost, hasArmed: armed + 1)
        guard case .failure(let error) = try await second.result(within: .seconds(10), "the send waiting for credits") else { Issue.record("the second send succeeded without credits"); return }
        #expect(error as? L2CAPError == .creditTimeout(cid: channel.localCID, waited: config.creditTimeout))
    }

    /// 100 KB each way with SDUs larger than the MPS, against Bumble's L2CAP as the echo peer.
    @Test func creditBasedChannelAgainstBumble100KBEachWay() async throws { try await creditBasedChannelAgainstBumble100KBEachWay(on: .bumble) }
    func creditBasedChannelAgainstBumble100KBEachWay(on kind: ControllerKind) async throws {
        let controllers = try await startTestControllers(kind)
        defer { controllers.stop() }
        let peer = try PythonScript.start("l2cap_coc.py", ["--transport", controllers.bumbleTransport(1), "--psm", "0x0080",
                                                           "--mtu", "2048", "--mps", "64", "--credits", "8", "--timeout", "90"])
        defer { peer.stop() }
        let ready = try await peer.nextEvent("ready", timeout: 15)
        guard let text = ready["address"] as? String, let address = BDAddress(string: text) else {
            Issue.record("no address in \(ready)"); return
        }
        let host = Host(transport: try TransportSpec(parsing: controllers.transport(0)).open())
        defer { Task { await host.close() } }
        _ = try await host.start()
        let type: AddressType = ready["addressType"] as? String == "public" ? .public : .random
        let link = try await host.connect(to: DeviceAddress(address, type: type))
        let l2cap = await L2CAPEnd.start(on: host, link)
        let ch = try await l2cap.connectChannel(psm: 0x0080, mtu: 2048, mps: 100, credits: 10)
        #expect(ch.peerMPS == 64 && ch.peerMTU == 2048)
        let sizes = (0..<80).map { 1000 + ($0 * 37) % 1000 }   // 80 SDUs, 1000–1999 octets
        let sdus = sizes.enumerated().map { pattern($0.element, seed: $0.offset) }
        let total = sizes.reduce(0, +)
        #expect(total >= 100_000)
        let sender = Task { for s in sdus { try await ch.send(s) } }
        var echoed: [[UInt8]] = []
        try await withTimeout(.seconds(60), "100 KB echoed") {
            var received: [[UInt8]] = []
            for try await sdu in ch.sdus {
                received.append(sdu)
                if received.count == sdus.count { break }
            }
            return received
        }.forEach { echoed.append($0) }
        try await sender.value
        #expect(echoed == sdus)
        let last = try await peer.nextLine(timeout: 5) { ($0.contains("\"total\":\(total)")) }
        #expect(last.contains("\"sdu\""))
        try await ch.close()
        _ = try await peer.nextEvent("channelClosed", timeout: 5)
    }
}

extension L2CAPRuntimeTests {
    /// Over Rootcanal (`make rootcanal-test`): 100 KB each way through its 20 ACL buffers of 27
    /// octets, so flow control by Number Of Completed Packets is exercised by a second controller.
    @Suite(.rootcanal) struct OverRootcanal {
        @Test func creditBasedChannelAgainstBumble100KBEachWay() async throws {
            try await L2CAPRuntimeTests().creditBasedChannelAgainstBumble100KBEachWay(on: .rootcanal)
        }
    }
}

final class Accepted2: Sendable {
    private let items = Mutex<[ConnectionParameterUpdateRequest]>([])
    func append(_ r: ConnectionParameterUpdateRequest) { items.withLock { $0.append(r) } }
    var all: [ConnectionParameterUpdateRequest] { items.withLock { $0 } }
}
