// LE credit-based connection-oriented channels (Core Vol 3 Part A 3.4, 4.22–4.24, 10.1), and
// the data path they share with enhanced credit-based channels (EnhancedCreditBasedChannel.swift,
// Core v5.4 Vol 3 Part A 10.2: the same K-frames, SDU segmentation and credits).
import HCI
import Host

/// One LE credit-based connection-oriented channel: SDUs in both directions with flow control.
///
/// `send` segments to the peer's MPS and waits for credits (back-pressure); `sdus` yields the
/// reassembled SDUs and returns the peer's credits as they are consumed; it ends normally when
/// either side closes the channel and throws when the link goes down or the peer violates the
/// protocol (the channel is then disconnected).
public struct L2CAPChannel: Sendable, CustomStringConvertible {
    /// The host of the link, and the link.
    public let host: Host
    public let handle: UInt16
    public let psm: UInt16
    /// Our CID (the peer sends to it) and the peer's.
    public let localCID: UInt16
    public let remoteCID: UInt16
    /// What we can receive.
    public let mtu: Int
    public let mps: Int
    /// What the peer can receive.
    public let peerMTU: Int
    public let peerMPS: Int
    /// Opened in enhanced credit-based flow control mode (Core v5.4 Vol 3 Part A 4.25).
    public var enhanced: Bool = false

    /// Sends one SDU (at most `peerMTU` octets); returns when its last K-frame went to the controller.
    public func send(_ sdu: [UInt8]) async throws {
        let (handle, cid) = (handle, localCID)
        try await host.run { host in try await L2CAPConnection.of(handle, on: host).channelSend(cid, sdu, host: host) }
    }

    /// The next received SDU; nil once the channel closed normally.
    public func receive() async throws -> [UInt8]? {
        let (handle, cid) = (handle, localCID)
        return try await host.run { host in try await L2CAPConnection.of(handle, on: host).nextSDU(cid, host: host) }
    }

    /// Received SDUs, in order.
    public var sdus: SDUs { SDUs(channel: self) }

    /// Sends a Disconnection Request and waits (signaling timeout) for its response.
    public func close() async throws {
        let (handle, cid) = (handle, localCID)
        try await host.run { host in try await L2CAPConnection.of(handle, on: host).closeChannel(cid, host: host) }
    }

    public var description: String {
        "\(enhanced ? "ECRED" : "LE CoC") PSM \(hexCode(psm)) \(hexCode(localCID, digits: 4))→\(hexCode(remoteCID, digits: 4)) MTU \(mtu)/\(peerMTU) MPS \(mps)/\(peerMPS)"
    }

    public struct SDUs: AsyncSequence, Sendable {
        public typealias Element = [UInt8]
        let channel: L2CAPChannel
        public struct AsyncIterator: AsyncIteratorProtocol {
            let channel: L2CAPChannel
            public mutating func next() async throws -> [UInt8]? { try await channel.receive() }
        }
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel) }
    }
}

/// Per-channel state, owned by its `L2CAPConnection`.
final class ChannelState {
    let psm: UInt16
    let localCID: UInt16
    let remoteCID: UInt16
    /// MTU and MPS change only by reconfiguration (enhanced mode, Core v5.4 Vol 3 Part A 4.27).
    var localMTU: Int
    var localMPS: Int
    var peerMTU: Int
    var peerMPS: Int
    let enhanced: Bool
    /// Takes every complete SDU as it arrives, in the host's handling of its last K-frame
    /// (instead of `receive()`); its credit goes back at once.
    var endpoint: (any L2CAPChannelEndpoint)?
    /// Credits the peer gave us (K-frames we may send).
    var txCredits: Int
    /// Credits we gave the peer that it has not used.
    var rxCredits: Int
    let rxInitialCredits: Int
    /// Credits consumed and not yet returned (sent in batches).
    var pendingReturn = 0
    var reassembler: SDUReassembler
    /// Complete SDUs not yet read; each still holds the credit of its last K-frame.
    var queue: [[UInt8]] = []
    var queueHead = 0
    var receiver: CheckedContinuation<[UInt8]?, any Error>?
    /// `send` calls waiting for credits, by waiter number (each has a timeout).
    var creditWaiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
    var nextCreditWaiter: UInt64 = 0
    /// The turn of an SDU: one is sent at a time, its K-frames not mixed with another's.
    let sendTurn = OneAtATime()
    /// SDUs handed to `enqueueSDU` and not yet sent.
    var enqueued = 0
    /// Set once the channel is closed; `nil` error = closed normally.
    var closed = false
    var closeError: L2CAPError?

    init(psm: UInt16, localCID: UInt16, remoteCID: UInt16, localMTU: Int, localMPS: Int, peerMTU: Int, peerMPS: Int,
         txCredits: Int, rxCredits: Int, enhanced: Bool = false) {
        self.psm = psm
        self.enhanced = enhanced
        self.localCID = localCID
        self.remoteCID = remoteCID
        self.localMTU = localMTU
        self.localMPS = localMPS
        self.peerMTU = peerMTU
        self.peerMPS = peerMPS
        self.txCredits = txCredits
        self.rxCredits = rxCredits
        self.rxInitialCredits = rxCredits
        self.reassembler = SDUReassembler(mtu: localMTU, mps: localMPS)
    }

    var hasQueued: Bool { queueHead < queue.count }
}

/// What a channel's SDUs go to when they are handled as they arrive (an Enhanced ATT bearer):
/// plain state in the host's isolation, as a fixed channel's handler.
public protocol L2CAPChannelEndpoint: AnyObject {
    /// One complete SDU, in order.
    func received(sdu: [UInt8], host: isolated Host)
    /// The MTUs changed (a reconfiguration, Core v5.4 Vol 3 Part A 4.27, 4.28).
    func reconfigured(mtu: Int, peerMTU: Int, host: isolated Host)
    /// The channel closed: `error` nil when either side disconnected it normally. Called once.
    func closed(_ error: L2CAPError?, host: isolated Host)
}

struct Listener {
    let mtu: UInt16
    let mps: UInt16
    let credits: UInt16
    /// Which connection requests it takes: LE Credit Based (0x14) or Credit Based (0x17).
    let enhanced: Bool
    /// Decides whether the link may open channels now (e.g. encryption for EATT); nil: always.
    let admit: (() -> CreditBasedConnectionResult)?
    let accept: @Sendable (L2CAPChannel) -> Void
}

extension L2CAPConnection {
    func channelValue(_ s: ChannelState, host: Host) -> L2CAPChannel {
        L2CAPChannel(host: host, handle: handle, psm: s.psm, localCID: s.localCID, remoteCID: s.remoteCID, mtu: s.localMTU,
                     mps: s.localMPS, peerMTU: s.peerMTU, peerMPS: s.peerMPS, enhanced: s.enhanced)
    }

    /// Makes `endpoint` take the SDUs of channel `cid` as they arrive (those already queued
    /// first). Throws `channelClosed` when the channel is not open.
    public func setEndpoint(_ endpoint: any L2CAPChannelEndpoint, for cid: UInt16, host: isolated Host) throws {
        guard let ch = channels[cid], !ch.closed else { throw L2CAPError.channelClosed(cid: cid, reason: "not open") }
        ch.endpoint = endpoint
        while ch.hasQueued, ch.endpoint === endpoint {
            let sdu = ch.queue[ch.queueHead]
            ch.queueHead += 1
            returnCredits(ch, 1, host: host)
            endpoint.received(sdu: sdu, host: host)
        }
        ch.queue.removeAll()
        ch.queueHead = 0
    }

    func freeLocalCID() -> UInt16? {
        L2CAPCID.dynamicRange.first { channels[$0] == nil && !reservedCIDs.contains($0) }
    }

    // MARK: - Opening

    /// Opens an LE credit-based channel to `psm` (LE Credit Based Connection Request). `mtu`,
    /// `mps` and `credits` are what we receive with. Throws `connectionRefused` with the
    /// peer's result, `signalingTimeout`, `disconnected`.
    public func connectChannel(psm: UInt16, mtu: UInt16 = 2048, mps: UInt16 = 247, credits: UInt16 = 16,
                               host: isolated Host) async throws -> L2CAPChannel {
        guard (1...0x00FF).contains(psm) else { throw L2CAPError.invalidArgument("SPSM \(hexCode(psm)) outside 0x0001–0x00FF") }
        guard mtu >= 23, (23...65533).contains(mps), credits >= 1 else {
            throw L2CAPError.invalidArgument("MTU \(mtu) / MPS \(mps) / credits \(credits): MTU and MPS must be ≥ 23, MPS ≤ 65533, credits ≥ 1")
        }
        if isDisconnected { throw L2CAPError.disconnected(handle: handle) }
        guard let cid = freeLocalCID() else { throw L2CAPError.noResources("every dynamic CID is in use") }
        reservedCIDs.insert(cid)
        defer { reservedCIDs.remove(cid) }
        let answer = try await signalingRequest(.leCreditBasedConnectionRequest(
            spsm: psm, sourceCID: cid, mtu: mtu, mps: mps, initialCredits: credits), host: host)
        switch answer.body {
        case let .leCreditBasedConnectionResponse(dcid, peerMTU, peerMPS, peerCredits, result):
            guard result == .successful else { throw L2CAPError.connectionRefused(result) }
            guard L2CAPCID.dynamicRange.contains(dcid), !channels.values.contains(where: { $0.remoteCID == dcid }),
                  peerMTU >= 23, (23...65533).contains(peerMPS) else {
                let bad = "destination CID \(hexCode(dcid, digits: 4)), MTU \(peerMTU), MPS \(peerMPS)"
                log("LE Credit Based Connection Response with invalid parameters (\(bad)): disconnecting")
                if L2CAPCID.dynamicRange.contains(dcid) {
                    host.spawn { _ = try? await self.signalingRequest(.disconnectionRequest(destinationCID: dcid, sourceCID: cid), host: host) }
                }
                throw L2CAPError.unexpectedResponse("LE Credit Based Connection Response: \(bad)")
            }
            let state = ChannelState(psm: psm, localCID: cid, remoteCID: dcid, localMTU: Int(mtu), localMPS: Int(mps),
                                     peerMTU: Int(peerMTU), peerMPS: Int(peerMPS), txCredits: Int(peerCredits),
                                     rxCredits: Int(credits))
            channels[cid] = state
            return channelValue(state, host: host)
        case .commandReject(let reason):
            throw L2CAPError.commandRejected("LE Credit Based Connection Request", reason: reason)
        default:
            throw L2CAPError.unexpectedResponse("\(answer.code) to LE Credit Based Connection Request")
        }
    }

    /// Accepts LE credit-based channels to `psm`; `accept` receives each new channel. Requests
    /// for a PSM nobody listens on are refused with "SPSM not supported".
    /// With `enhanced`, it takes Credit Based Connection Requests (enhanced mode, up to five
    /// channels each, Core v5.4 Vol 3 Part A 4.25) instead, with MTU and MPS at least 64;
    /// `admit` may refuse them all with its result (e.g. insufficient encryption).
    public func listen(psm: UInt16, mtu: UInt16? = nil, mps: UInt16? = nil, credits: UInt16? = nil, enhanced: Bool = false,
                       admit: (() -> CreditBasedConnectionResult)? = nil,
                       accept: @escaping @Sendable (L2CAPChannel) -> Void) {
        let minimum: UInt16 = enhanced ? Self.enhancedMinimum : 23
        listeners[psm] = Listener(mtu: Swift.max(minimum, mtu ?? configuration.defaultMTU),
                                  mps: Swift.min(65533, Swift.max(minimum, mps ?? configuration.defaultMPS)),
                                  credits: Swift.max(1, credits ?? configuration.defaultCredits), enhanced: enhanced,
                                  admit: admit, accept: accept)
    }

    public func stopListening(psm: UInt16) { listeners[psm] = nil }

    func creditBasedConnectionRequest(id: UInt8, spsm: UInt16, remoteCID: UInt16, mtu: UInt16, mps: UInt16, credits: UInt16,
                                      host: isolated Host) {
        func refuse(_ result: CreditBasedConnectionResult) {
            log("LE Credit Based Connection Request for SPSM \(hexCode(spsm)): \(result)")
            sendSignal(SignalingCommand(identifier: id, .leCreditBasedConnectionResponse(
                destinationCID: 0, mtu: 0, mps: 0, initialCredits: 0, result: result)), host: host)
        }
        guard let listener = listeners[spsm], !listener.enhanced else { return refuse(.spsmNotSupported) }
        if let admit = listener.admit, case let result = admit(), result != .successful { return refuse(result) }
        guard L2CAPCID.dynamicRange.contains(remoteCID) else { return refuse(.invalidSourceCID) }
        guard !channels.values.contains(where: { $0.remoteCID == remoteCID }) else { return refuse(.sourceCIDAlreadyAllocated) }
        guard mtu >= 23, (23...65533).contains(mps) else { return refuse(.unacceptableParameters) }
        guard let cid = freeLocalCID() else { return refuse(.noResourcesAvailable) }
        let state = ChannelState(psm: spsm, localCID: cid, remoteCID: remoteCID, localMTU: Int(listener.mtu),
                                 localMPS: Int(listener.mps), peerMTU: Int(mtu), peerMPS: Int(mps),
                                 txCredits: Int(credits), rxCredits: Int(listener.credits))
        channels[cid] = state
        sendSignal(SignalingCommand(identifier: id, .leCreditBasedConnectionResponse(
            destinationCID: cid, mtu: listener.mtu, mps: listener.mps, initialCredits: listener.credits, result: .successful)), host: host)
        listener.accept(channelValue(state, host: host))
    }

    // MARK: - Data

    func channelFrame(cid: UInt16, _ payload: [UInt8], host: isolated Host) {
        guard let ch = channels[cid], !ch.closed else {
            log("K-frame for \(hexCode(cid, digits: 4)) with no open channel (\(payload.count) octets): dropped")
            return
        }
        guard ch.rxCredits > 0 else {
            return violation(ch, "K-frame received with no credits left", host: host)
        }
        ch.rxCredits -= 1
        let sdu: [UInt8]?
        do {
            sdu = try ch.reassembler.push(payload)
        } catch {
            return violation(ch, "\(error)", host: host)
        }
        guard let sdu else {
            returnCredits(ch, 1, host: host)
            return
        }
        if let endpoint = ch.endpoint {
            returnCredits(ch, 1, host: host)
            endpoint.received(sdu: sdu, host: host)
        } else if let r = ch.receiver {
            ch.receiver = nil
            returnCredits(ch, 1, host: host)
            r.resume(returning: sdu)
        } else {
            ch.queue.append(sdu)
        }
    }

    func returnCredits(_ ch: ChannelState, _ n: Int, host: isolated Host) {
        ch.pendingReturn += n
        guard ch.pendingReturn >= Swift.max(1, ch.rxInitialCredits / 2), !ch.closed else { return }
        let give = ch.pendingReturn
        ch.pendingReturn = 0
        ch.rxCredits += give
        sendSignal(SignalingCommand(identifier: nextIdentifier(), .flowControlCreditInd(cid: ch.localCID, credits: UInt16(give))), host: host)
    }

    func nextSDU(_ cid: UInt16, host: isolated Host) async throws -> [UInt8]? {
        guard let ch = channels[cid] else { return nil }
        if let ready = try takeReady(ch, cid, host: host) { return ready }
        guard ch.receiver == nil else {
            throw L2CAPError.notAllowed("channel \(hexCode(cid, digits: 4)) already has a reader")
        }
        return try await withCheckedThrowingContinuation { c in
            // Looked at again: an SDU or the close may have come since (an await lets the
            // host's other jobs run first).
            do {
                if let ready = try takeReady(ch, cid, host: host) { return c.resume(returning: ready) }
            } catch {
                return c.resume(throwing: error)
            }
            ch.receiver = c
        }
    }

    /// The next queued SDU, or the channel's end (`.some(nil)`: closed normally; thrown: its
    /// error); nil when the reader has to wait.
    private func takeReady(_ ch: ChannelState, _ cid: UInt16, host: isolated Host) throws -> [UInt8]?? {
        if ch.hasQueued {
            let sdu = ch.queue[ch.queueHead]
            ch.queueHead += 1
            if ch.queueHead == ch.queue.count {
                ch.queue.removeAll(keepingCapacity: true)
                ch.queueHead = 0
            }
            if ch.closed {
                if !ch.hasQueued { channels[cid] = nil }
            } else {
                returnCredits(ch, 1, host: host)
            }
            return .some(sdu)
        }
        if ch.closed {
            channels[cid] = nil
            if let e = ch.closeError { throw e }
            return .some(nil)
        }
        return nil
    }

    func channelSend(_ cid: UInt16, _ sdu: [UInt8], host: isolated Host) async throws {
        guard let ch = channels[cid] else { throw L2CAPError.channelClosed(cid: cid, reason: "not open") }
        if ch.closed { throw ch.closeError ?? L2CAPError.channelClosed(cid: cid, reason: "closed") }
        guard sdu.count <= ch.peerMTU else { throw L2CAPError.sduTooLarge(length: sdu.count, mtu: ch.peerMTU) }
        try await ch.sendTurn.take { ch.closed ? ch.closeError ?? L2CAPError.channelClosed(cid: cid, reason: "closed") : nil }
        defer { ch.sendTurn.pass() }
        let frames: [[UInt8]]
        do { frames = try segmentSDU(sdu, mps: ch.peerMPS, mtu: ch.peerMTU) } catch {
            throw L2CAPError.invalidArgument("\(error)")
        }
        let remote = L2CAPCID(ch.remoteCID)
        for (i, f) in frames.enumerated() {
            while ch.txCredits == 0 && !ch.closed {
                do {
                    try await waitForCredits(ch, host: host)
                } catch let e as L2CAPError where i > 0 {
                    // Part of the SDU is out: the channel cannot carry another SDU correctly.
                    if case .creditTimeout = e { violation(ch, "\(e) in the middle of an SDU", host: host) }
                    throw e
                }
            }
            if ch.closed { throw ch.closeError ?? L2CAPError.channelClosed(cid: cid, reason: "closed while sending") }
            ch.txCredits -= 1
            try await host.sendL2CAP(L2CAPFrame(cid: remote, payload: f).bytes, on: handle)
        }
    }

    /// SDUs `enqueueSDU` may hold per channel before it refuses one.
    static let enqueuedSDULimit = 64

    /// Sends `sdu` on channel `cid` without waiting (an answer from inside the handling of a
    /// frame): it goes out behind the channel's earlier SDUs as credits allow; at most
    /// `enqueuedSDULimit` wait, then it throws `noResources`.
    public func enqueueSDU(_ cid: UInt16, _ sdu: [UInt8], host: isolated Host) throws {
        guard let ch = channels[cid], !ch.closed else { throw channels[cid]?.closeError ?? L2CAPError.channelClosed(cid: cid, reason: "not open") }
        guard sdu.count <= ch.peerMTU else { throw L2CAPError.sduTooLarge(length: sdu.count, mtu: ch.peerMTU) }
        guard ch.enqueued < Self.enqueuedSDULimit else {
            throw L2CAPError.noResources("\(Self.enqueuedSDULimit) SDUs wait for credits on \(hexCode(cid, digits: 4))")
        }
        ch.enqueued += 1
        host.spawn {
            defer { ch.enqueued -= 1 }
            do { try await self.channelSend(cid, sdu, host: host) } catch { self.log("channel \(hexCode(cid, digits: 4)): SDU not sent: \(error)") }
        }
    }

    /// Waits for a Flow Control Credit Ind, at most `configuration.creditTimeout` (a deadline
    /// in the host's table).
    private func waitForCredits(_ ch: ChannelState, host: isolated Host) async throws {
        let id = ch.nextCreditWaiter
        ch.nextCreditWaiter &+= 1
        let cid = ch.localCID, timeout = configuration.creditTimeout
        let timer = host.arm(after: timeout) { self.creditWaitExpired(cid: cid, waiter: id) }
        defer { host.disarm(timer) }
        try await withCheckedThrowingContinuation { c in
            // Looked at again: credits (or the close) may have come since the caller's check.
            if ch.txCredits > 0 || ch.closed { c.resume() } else { ch.creditWaiters[id] = c }
        }
    }

    private func creditWaitExpired(cid: UInt16, waiter: UInt64) {
        guard let ch = channels[cid], let w = ch.creditWaiters.removeValue(forKey: waiter) else { return }
        let timeout = configuration.creditTimeout
        log("channel \(hexCode(cid, digits: 4)): no credits from the peer for \(timeout)")
        w.resume(throwing: L2CAPError.creditTimeout(cid: cid, waited: timeout))
    }

    func creditIndication(remoteCID: UInt16, credits: UInt16, host: isolated Host) {
        guard let ch = channels.values.first(where: { $0.remoteCID == remoteCID && !$0.closed }) else {
            log("Flow Control Credit Ind for unknown CID \(hexCode(remoteCID, digits: 4)): ignored")
            return
        }
        guard ch.txCredits + Int(credits) <= 65535 else {
            return violation(ch, "credit count overflow (\(ch.txCredits) + \(credits) > 65535)", host: host)
        }
        ch.txCredits += Int(credits)
        let waiters = ch.creditWaiters.values
        ch.creditWaiters.removeAll()
        for w in waiters { w.resume() }
    }

    // MARK: - Closing

    /// A protocol violation by the peer: the channel is disconnected (Core Vol 3 Part A 3.4.3, 10.1).
    func violation(_ ch: ChannelState, _ reason: String, host: isolated Host) {
        log("channel \(hexCode(ch.localCID, digits: 4)): \(reason): disconnecting it")
        let local = ch.localCID, remote = ch.remoteCID
        finishChannel(local, .channelClosed(cid: local, reason: reason), host: host)
        host.spawn { _ = try? await self.signalingRequest(.disconnectionRequest(destinationCID: remote, sourceCID: local), host: host) }
    }

    /// Marks the channel closed and wakes everyone waiting on it. `error` nil: closed normally.
    func finishChannel(_ cid: UInt16, _ error: L2CAPError?, host: isolated Host) {
        guard let ch = channels[cid], !ch.closed else { return }
        ch.closed = true
        ch.closeError = error
        let failure = error ?? .channelClosed(cid: cid, reason: "closed")
        for w in ch.creditWaiters.values { w.resume(throwing: failure) }
        ch.sendTurn.fail(failure)
        ch.creditWaiters.removeAll()
        if let endpoint = ch.endpoint {
            ch.endpoint = nil
            channels[cid] = nil
            endpoint.closed(error, host: host)
            return
        }
        // A waiting reader learns the outcome now; otherwise the state stays until the next
        // `receive()` reports it (its CID stays reserved until then).
        if let r = ch.receiver {
            ch.receiver = nil
            channels[cid] = nil
            if let error { r.resume(throwing: error) } else { r.resume(returning: nil) }
        }
    }

    func disconnectionRequest(id: UInt8, localCID: UInt16, remoteCID: UInt16, host: isolated Host) {
        guard let ch = channels[localCID], ch.remoteCID == remoteCID else {
            log("Disconnection Request for unknown channel \(hexCode(localCID, digits: 4))/\(hexCode(remoteCID, digits: 4)): Command Reject")
            sendSignal(SignalingCommand(identifier: id, .commandReject(.invalidCID(localCID: localCID, remoteCID: remoteCID))), host: host)
            return
        }
        sendSignal(SignalingCommand(identifier: id, .disconnectionResponse(destinationCID: localCID, sourceCID: remoteCID)), host: host)
        if !ch.closed { finishChannel(localCID, nil, host: host) }
    }

    func closeChannel(_ cid: UInt16, host: isolated Host) async throws {
        guard let ch = channels[cid], !ch.closed else { return }
        let remote = ch.remoteCID
        finishChannel(cid, nil, host: host)
        let answer = try await signalingRequest(.disconnectionRequest(destinationCID: remote, sourceCID: cid), host: host)
        switch answer.body {
        case .disconnectionResponse: return
        case .commandReject(let reason): throw L2CAPError.commandRejected("Disconnection Request", reason: reason)
        default: throw L2CAPError.unexpectedResponse("\(answer.code) to Disconnection Request")
        }
    }

    /// Open credit-based channels (diagnostics and tests).
    public func openChannels(host: isolated Host) -> [L2CAPChannel] {
        channels.values.filter { !$0.closed }.map { channelValue($0, host: host) }
    }
}
