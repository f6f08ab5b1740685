// Enhanced credit-based flow control mode (Core v5.4 Vol 3 Part A 4.25–4.28, 10.2): up to five
// channels opened by one Credit Based Connection Request, MTU/MPS reconfiguration. The data
// path (K-frames, segmentation, credits) is the LE credit-based channels' (CreditBasedChannel.swift).
import HCI
import Host

extension L2CAPConnection {
    /// The smallest MTU and MPS of an enhanced credit-based channel (Core v5.4 Vol 3 Part A 4.25).
    public static let enhancedMinimum: UInt16 = 64
    /// Channels one Credit Based Connection Request may open (Core v5.4 Vol 3 Part A 4.25).
    public static let enhancedMaximumChannels = 5

    /// Opens `count` (1–5) enhanced credit-based channels to `psm` with one Credit Based
    /// Connection Request; `mtu`, `mps` and `credits` are what we receive with (MTU and MPS at
    /// least 64). Returns the channels the peer accepted (it may refuse some, Core v5.4 Vol 3
    /// Part A 4.26); throws `connectionRefused` with its result when it accepted none.
    public func connectEnhancedChannels(psm: UInt16, count: Int, mtu: UInt16 = 2048, mps: UInt16 = 247, credits: UInt16 = 16,
                                        host: isolated Host) async throws -> [L2CAPChannel] {
        guard (1...0x00FF).contains(psm) else { throw L2CAPError.invalidArgument("SPSM \(hexCode(psm)) outside 0x0001–0x00FF") }
        guard (1...Self.enhancedMaximumChannels).contains(count) else {
            throw L2CAPError.invalidArgument("\(count) channels: one request opens 1 to \(Self.enhancedMaximumChannels) (Core v5.4 Vol 3 Part A 4.25)")
        }
        guard mtu >= Self.enhancedMinimum, (Self.enhancedMinimum...65533).contains(mps), credits >= 1 else {
            throw L2CAPError.invalidArgument("MTU \(mtu) / MPS \(mps) / credits \(credits): MTU and MPS must be ≥ 64, MPS ≤ 65533, credits ≥ 1")
        }
        if isDisconnected { throw L2CAPError.disconnected(handle: handle) }
        var cids: [UInt16] = []
        for _ in 0..<count {
            guard let cid = freeLocalCID() else { break }
            reservedCIDs.insert(cid)
            cids.append(cid)
        }
        defer { for cid in cids { reservedCIDs.remove(cid) } }
        guard cids.count == count else { throw L2CAPError.noResources("fewer than \(count) dynamic CIDs free") }
        let answer = try await signalingRequest(.creditBasedConnectionRequest(
            spsm: psm, mtu: mtu, mps: mps, initialCredits: credits, sourceCIDs: cids), host: host)
        switch answer.body {
        case let .creditBasedConnectionResponse(peerMTU, peerMPS, peerCredits, result, dcids):
            // One Destination CID per Source CID, in order; 0x0000 for a refused one (4.26).
            guard dcids.count == cids.count else {
                throw L2CAPError.unexpectedResponse("Credit Based Connection Response with \(dcids.count) Destination CIDs for \(cids.count) Source CIDs")
            }
            let accepted = zip(cids, dcids).filter { $0.1 != 0 }
            guard !accepted.isEmpty else { throw L2CAPError.connectionRefused(result) }
            let taken = Set(channels.values.map(\.remoteCID))
            let valid = peerMTU >= Self.enhancedMinimum && peerMPS >= Self.enhancedMinimum && peerMPS <= 65533
                && accepted.allSatisfy { L2CAPCID.dynamicRange.contains($0.1) && !taken.contains($0.1) }
                && Set(accepted.map(\.1)).count == accepted.count
            guard valid else {
                let bad = "Destination CIDs \(dcids.map { hexCode($0, digits: 4) }), MTU \(peerMTU), MPS \(peerMPS)"
                log("Credit Based Connection Response with invalid parameters (\(bad)): disconnecting")
                for (cid, dcid) in accepted where L2CAPCID.dynamicRange.contains(dcid) {
                    host.spawn { _ = try? await self.signalingRequest(.disconnectionRequest(destinationCID: dcid, sourceCID: cid), host: host) }
                }
                throw L2CAPError.unexpectedResponse("Credit Based Connection Response: \(bad)")
            }
            if accepted.count < cids.count { log("Credit Based Connection Response: \(accepted.count) of \(cids.count) channels accepted (\(result))") }
            return accepted.map { cid, dcid in
                let state = ChannelState(psm: psm, localCID: cid, remoteCID: dcid, localMTU: Int(mtu), localMPS: Int(mps),
                                         peerMTU: Int(peerMTU), peerMPS: Int(peerMPS), txCredits: Int(peerCredits),
                                         rxCredits: Int(credits), enhanced: true)
                channels[cid] = state
                return channelValue(state, host: host)
            }
        case .commandReject(let reason):
            throw L2CAPError.commandRejected("Credit Based Connection Request", reason: reason)
        default:
            throw L2CAPError.unexpectedResponse("\(answer.code) to Credit Based Connection Request")
        }
    }

    /// A peer's Credit Based Connection Request (Core v5.4 Vol 3 Part A 4.25, 4.26): each Source
    /// CID gets a channel or Destination CID 0x0000, and the result says why one was refused.
    func enhancedConnectionRequest(id: UInt8, spsm: UInt16, mtu: UInt16, mps: UInt16, credits: UInt16, sourceCIDs: [UInt16],
                                   host: isolated Host) {
        func answer(_ result: CreditBasedConnectionResult, _ dcids: [UInt16], _ listener: Listener?) {
            if result != .successful { log("Credit Based Connection Request for SPSM \(hexCode(spsm)): \(result)") }
            sendSignal(SignalingCommand(identifier: id, .creditBasedConnectionResponse(
                mtu: listener?.mtu ?? 0, mps: listener?.mps ?? 0, initialCredits: dcids.contains { $0 != 0 } ? listener?.credits ?? 0 : 0,
                result: result, destinationCIDs: dcids)), host: host)
        }
        let none = [UInt16](repeating: 0, count: sourceCIDs.count)
        guard let listener = listeners[spsm], listener.enhanced else { return answer(.spsmNotSupported, none, nil) }
        if let admit = listener.admit, case let result = admit(), result != .successful { return answer(result, none, listener) }
        guard mtu >= Self.enhancedMinimum, (Self.enhancedMinimum...65533).contains(mps) else {
            return answer(.unacceptableParameters, none, listener)
        }
        var result = CreditBasedConnectionResult.successful
        var dcids: [UInt16] = []
        var opened: [ChannelState] = []
        for scid in sourceCIDs {
            let inUse = channels.values.contains { $0.remoteCID == scid } || sourceCIDs.filter({ $0 == scid }).count > 1
            guard L2CAPCID.dynamicRange.contains(scid) else { result = .invalidSourceCID; dcids.append(0); continue }
            guard !inUse else { result = .sourceCIDAlreadyAllocated; dcids.append(0); continue }
            guard let cid = freeLocalCID() else { result = .noResourcesAvailable; dcids.append(0); continue }
            let state = ChannelState(psm: spsm, localCID: cid, remoteCID: scid, localMTU: Int(listener.mtu),
                                     localMPS: Int(listener.mps), peerMTU: Int(mtu), peerMPS: Int(mps),
                                     txCredits: Int(credits), rxCredits: Int(listener.credits), enhanced: true)
            channels[cid] = state
            opened.append(state)
            dcids.append(cid)
        }
        answer(result, dcids, listener)
        for state in opened { listener.accept(channelValue(state, host: host)) }
    }

    // MARK: - Reconfiguration

    /// Raises the MTU (and sets the MPS) we receive with on our enhanced channels `cids` (Credit
    /// Based Reconfigure Request, Core v5.4 Vol 3 Part A 4.27): the MTU may not shrink, the MPS
    /// only on one channel at a time. Throws with the peer's result when it refuses.
    public func reconfigure(_ cids: [UInt16], mtu: UInt16, mps: UInt16, host: isolated Host) async throws {
        guard (1...Self.enhancedMaximumChannels).contains(cids.count) else {
            throw L2CAPError.invalidArgument("\(cids.count) channels: one request reconfigures 1 to \(Self.enhancedMaximumChannels)")
        }
        let states = try cids.map { cid in
            guard let ch = channels[cid], !ch.closed, ch.enhanced else {
                throw L2CAPError.invalidArgument("\(hexCode(cid, digits: 4)) is no open enhanced credit-based channel")
            }
            return ch
        }
        guard mtu >= Self.enhancedMinimum, (Self.enhancedMinimum...65533).contains(mps) else {
            throw L2CAPError.invalidArgument("MTU \(mtu) / MPS \(mps): both must be ≥ 64, MPS ≤ 65533")
        }
        guard states.allSatisfy({ Int(mtu) >= $0.localMTU }) else {
            throw L2CAPError.invalidArgument("MTU \(mtu) is smaller than a channel's (Core v5.4 Vol 3 Part A 4.27: it may not shrink)")
        }
        guard states.count == 1 || states.allSatisfy({ Int(mps) >= $0.localMPS }) else {
            throw L2CAPError.invalidArgument("the MPS of more than one channel may not shrink at once (Core v5.4 Vol 3 Part A 4.27)")
        }
        // Received K-frames may be as large as the new MPS as soon as the peer has the request.
        for ch in states { ch.reassembler.mtu = Swift.max(ch.reassembler.mtu, Int(mtu)); ch.reassembler.mps = Swift.max(ch.reassembler.mps, Int(mps)) }
        let answer = try await signalingRequest(.creditBasedReconfigureRequest(mtu: mtu, mps: mps, destinationCIDs: cids), host: host)
        switch answer.body {
        case .creditBasedReconfigureResponse(let result):
            guard result == 0 else {
                for ch in states { ch.reassembler.mtu = ch.localMTU; ch.reassembler.mps = ch.localMPS }
                throw L2CAPError.unexpectedResponse("Credit Based Reconfigure Response: \(reconfigureResultName(result)) (\(hexCode(result, digits: 4)))")
            }
            for ch in states where !ch.closed {
                ch.localMTU = Int(mtu)
                ch.localMPS = Int(mps)
                ch.reassembler.mtu = Int(mtu)
                ch.reassembler.mps = Int(mps)
                ch.endpoint?.reconfigured(mtu: ch.localMTU, peerMTU: ch.peerMTU, host: host)
            }
        case .commandReject(let reason):
            throw L2CAPError.commandRejected("Credit Based Reconfigure Request", reason: reason)
        default:
            throw L2CAPError.unexpectedResponse("\(answer.code) to Credit Based Reconfigure Request")
        }
    }

    /// A peer's Credit Based Reconfigure Request (Core v5.4 Vol 3 Part A 4.27, 4.28): its CIDs
    /// are its own (our channels' remote CIDs); applied to all of them or to none.
    func reconfigureRequest(id: UInt8, mtu: UInt16, mps: UInt16, remoteCIDs: [UInt16], host: isolated Host) {
        func answer(_ result: UInt16) {
            if result != 0 { log("Credit Based Reconfigure Request: \(reconfigureResultName(result))") }
            sendSignal(SignalingCommand(identifier: id, .creditBasedReconfigureResponse(result: result)), host: host)
        }
        var states: [ChannelState] = []
        for remote in remoteCIDs {
            guard let ch = channels.values.first(where: { $0.remoteCID == remote && !$0.closed && $0.enhanced }) else { return answer(0x0003) }
            states.append(ch)
        }
        guard mtu >= Self.enhancedMinimum, mps >= Self.enhancedMinimum, mps <= 65533 else { return answer(0x0004) }
        guard states.allSatisfy({ Int(mtu) >= $0.peerMTU }) else { return answer(0x0001) }
        guard states.count == 1 || states.allSatisfy({ Int(mps) >= $0.peerMPS }) else { return answer(0x0002) }
        for ch in states {
            ch.peerMTU = Int(mtu)
            ch.peerMPS = Int(mps)
        }
        answer(0x0000)
        for ch in states { ch.endpoint?.reconfigured(mtu: ch.localMTU, peerMTU: ch.peerMTU, host: host) }
    }
}
