// The L2CAP runtime of one LE link (Core Vol 3 Part A): fixed-channel demultiplexing, the LE
// signaling channel, and credit-based connection-oriented channels, LE (CreditBasedChannel.swift)
// and enhanced (EnhancedCreditBasedChannel.swift).
import HCI
import Host
import Transport

/// Tunables of an `L2CAPConnection`.
public struct L2CAPConfiguration: Sendable {
    /// How long a signaling request waits for its response (RTX, Core Vol 3 Part A 6.2.1).
    public var signalingTimeout: Duration = .seconds(30)
    /// How long `L2CAPChannel.send` waits for the peer's credits (a K-frame needs one, Core v5.4
    /// Vol 3 Part A 10.1) before it fails with `L2CAPError.creditTimeout`.
    public var creditTimeout: Duration = .seconds(30)
    /// Called for every dropped frame, rejected command and protocol violation.
    public var log: (@Sendable (String) -> Void)?
    /// Default receive MTU / MPS / initial credits for credit-based channels we accept.
    public var defaultMTU: UInt16 = 2048
    public var defaultMPS: UInt16 = 247
    public var defaultCredits: UInt16 = 16

    public init() {}
}

/// Why an L2CAP operation failed. Every case names its cause.
public enum L2CAPError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The link went down; everything pending on it failed.
    case disconnected(handle: UInt16)
    /// A signaling request got no response within the signaling timeout.
    case signalingTimeout(String)
    /// The peer answered a request with Command Reject.
    case commandRejected(String, reason: CommandRejectReason)
    /// The peer refused an LE Credit Based Connection Request.
    case connectionRefused(CreditBasedConnectionResult)
    /// The credit-based channel is closed (by us, the peer, or a protocol violation).
    case channelClosed(cid: UInt16, reason: String)
    /// The peer answered with something that does not fit the request.
    case unexpectedResponse(String)
    /// Not allowed in this role or state.
    case notAllowed(String)
    /// No free dynamic CID.
    case noResources(String)
    /// An SDU larger than the peer's MTU.
    case sduTooLarge(length: Int, mtu: Int)
    /// A parameter outside the range the spec allows.
    case invalidArgument(String)
    /// The peer gave no credits for a K-frame within `L2CAPConfiguration.creditTimeout`.
    case creditTimeout(cid: UInt16, waited: Duration)

    public var description: String {
        switch self {
        case .disconnected(let h): return "L2CAP: connection \(hexCode(h, digits: 4)) disconnected"
        case .signalingTimeout(let what): return "L2CAP: no response to \(what) (signaling timeout)"
        case let .commandRejected(what, reason): return "L2CAP: \(what) rejected by the peer: \(reason.name) (\(hexCode(reason.code, digits: 4)))"
        case .connectionRefused(let r): return "L2CAP: credit-based connection refused: \(r)"
        case let .channelClosed(cid, reason): return "L2CAP: channel \(hexCode(cid, digits: 4)) closed: \(reason)"
        case .unexpectedResponse(let what): return "L2CAP: unexpected response: \(what)"
        case .notAllowed(let what): return "L2CAP: not allowed: \(what)"
        case .noResources(let what): return "L2CAP: no resources: \(what)"
        case let .sduTooLarge(length, mtu): return "L2CAP: SDU of \(length) octets exceeds the peer's MTU \(mtu)"
        case .invalidArgument(let what): return "L2CAP: invalid argument: \(what)"
        case let .creditTimeout(cid, waited): return "L2CAP: channel \(hexCode(cid, digits: 4)): the peer gave no credits for \(waited)"
        }
    }
}

/// A Connection Parameter Update Request received by the central (units as on the air).
public struct ConnectionParameterUpdateRequest: Sendable, Equatable {
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var latency: UInt16
    public var timeout: UInt16

    /// Checks the ranges of Core Vol 3 Part A 4.20 (interval 7.5 ms–4 s, latency < 500,
    /// timeout 100 ms–32 s and larger than (1 + latency) × interval max × 2).
    public var isValid: Bool {
        guard (6...3200).contains(intervalMin), (6...3200).contains(intervalMax), intervalMin <= intervalMax,
              latency <= 499, (10...3200).contains(timeout) else { return false }
        // timeout (10 ms units) * 10 > (1 + latency) * intervalMax (1.25 ms units) * 1.25 * 2
        return Int(timeout) * 40 > (1 + Int(latency)) * Int(intervalMax) * 10
    }
}

/// What a fixed channel (ATT 0x0004, SMP 0x0006, ...) of one link runs: plain state owned by
/// its `L2CAPConnection`, called inside the host's isolation as part of the link's one receive
/// path (`Host` → `L2CAPConnection.received` → here), one payload at a time and in order:
/// keep it short.
public protocol L2CAPFixedChannel: AnyObject {
    /// The information payload of one B-frame, read in place in the received frame (no copy).
    func received(_ payload: ByteReader, host: isolated Host)
    /// An HCI event of the link (encryption, LTK request), in controller order with its frames.
    func linkEvent(_ event: HostLinkEvent, host: isolated Host)
    /// The link is gone: called once, last.
    func closed(_ error: L2CAPError, host: isolated Host)
}

extension L2CAPFixedChannel {
    public func linkEvent(_ event: HostLinkEvent, host: isolated Host) {}
    public func closed(_ error: L2CAPError, host: isolated Host) {}
}

/// The upper layers' set of a link, attached in the `L2CAPConnection`'s place: it hands the
/// connection every frame and event (override `linkEvent` to hear them first), and
/// `L2CAPConnection.of` finds the connection through it. A class, not a protocol: finding the
/// layer is then a class cast, where a cast to a protocol looks the conformance up in the
/// runtime's table on every notification sent.
open class L2CAPLinkOwner: HostLinkLayer {
    public let l2cap: L2CAPConnection
    public init(l2cap: L2CAPConnection) { self.l2cap = l2cap }
    public final func received(_ frame: [UInt8], host: isolated Host) { l2cap.received(frame, host: host) }
    open func linkEvent(_ event: HostLinkEvent, host: isolated Host) { l2cap.linkEvent(event, host: host) }
}

/// The L2CAP layer of one LE link: plain state owned by its host, the layer attached to the
/// link (`Host.attach`), called inside the host's isolation.
///
/// ```swift
/// try await host.run { host in
///     guard let link = host.connection(handle) else { return }
///     let l2cap = L2CAPConnection(connection: link)
///     l2cap.setFixedChannel(.att, bearer)        // before attaching, so no PDU is missed
///     host.attach(l2cap, to: link)
/// }
/// let channel = try await L2CAPConnection.connectChannel(on: host, handle: handle, psm: 0x0080)
/// ```
/// Frames for a fixed channel without a handler are dropped and logged. When the link goes
/// down every pending request, channel and fixed channel fails with `L2CAPError.disconnected`.
/// The host calls `received` synchronously for each reassembled frame, so a frame is
/// demultiplexed and handled to completion before the next one is read.
public final class L2CAPConnection: HostLinkLayer {
    public let connection: LEConnection
    public let configuration: L2CAPConfiguration
    public var handle: UInt16 { connection.handle }
    public var role: LERole { connection.role }

    /// Fixed channels with their CIDs: a few (ATT, SMP), searched in order on every frame (no
    /// hashing per frame, as a dictionary would).
    var fixedChannels: [(cid: UInt16, channel: any L2CAPFixedChannel)] = []
    public private(set) var isDisconnected = false

    // Signaling requests we sent, by identifier.
    struct PendingSignal {
        let name: String
        let continuation: CheckedContinuation<SignalingCommand, any Error>
        /// RTX (Core Vol 3 Part A 6.2.1), in the host's deadline table.
        let timer: DeadlineID
    }
    var pendingSignals: [UInt8: PendingSignal] = [:]
    var lastIdentifier: UInt8 = 0

    /// Central: decides on a peripheral's Connection Parameter Update Request (default: accept
    /// valid parameters).
    var parameterPolicy: (@Sendable (ConnectionParameterUpdateRequest) async -> Bool)?
    /// A Connection Parameter Update Request is being decided (at most one at a time).
    var decidingParameterUpdate = false

    // Credit-based channels (CreditBasedChannel.swift).
    var channels: [UInt16: ChannelState] = [:]
    var listeners: [UInt16: Listener] = [:]
    /// Local CIDs of channels being opened.
    var reservedCIDs: Set<UInt16> = []

    public init(connection: LEConnection, configuration: L2CAPConfiguration = .init()) {
        self.connection = connection
        self.configuration = configuration
    }

    public var l2cap: L2CAPConnection { self }

    /// The L2CAP layer of the link `handle` of `host` (inside its isolation).
    public static func of(_ handle: UInt16, on host: isolated Host) throws -> L2CAPConnection {
        let layer = host.layer(for: handle)
        if let owner = layer as? L2CAPLinkOwner { return owner.l2cap }
        guard let l2cap = layer as? L2CAPConnection else { throw L2CAPError.disconnected(handle: handle) }
        return l2cap
    }

    /// Makes `channel` (or with nil, nobody) the handler of fixed channel `cid`. A channel set
    /// on a link that is gone is told so at once.
    public func setFixedChannel(_ cid: L2CAPCID, _ channel: (any L2CAPFixedChannel)?, host: isolated Host) {
        if isDisconnected, let channel {
            channel.closed(.disconnected(handle: handle), host: host)
            return
        }
        fixedChannels.removeAll { $0.cid == cid.rawValue }
        if let channel { fixedChannels.append((cid.rawValue, channel)) }
    }

    /// The handler of fixed channel `cid`.
    public func fixedChannel(_ cid: L2CAPCID) -> (any L2CAPFixedChannel)? {
        fixedChannels.first { $0.cid == cid.rawValue }?.channel
    }

    /// The central's policy for Connection Parameter Update Requests; it returns whether to
    /// accept. Accepted parameters are applied with LE Connection Update.
    public func setConnectionParameterPolicy(_ policy: (@Sendable (ConnectionParameterUpdateRequest) async -> Bool)?) {
        parameterPolicy = policy
    }

    func log(_ message: @autoclosure () -> String) {
        configuration.log?("L2CAP \(hexCode(handle, digits: 4)): \(message())")
    }

    // MARK: - Demultiplexing (HostLinkLayer)

    /// Demultiplexes one frame (in arrival order) and handles it to completion: signaling, a
    /// credit-based channel, or a fixed channel.
    public func received(_ bytes: [UInt8], host: isolated Host) {
        let cid: UInt16
        var payload: ByteReader
        do {
            let frame = try L2CAPFrame.decodeInPlace(bytes)
            (cid, payload) = (frame.cid.rawValue, frame.payload)
        } catch {
            log("malformed frame (\(bytes.count) octets): \(error): dropped")
            return
        }
        switch cid {
        case L2CAPCID.leSignaling.rawValue:
            signaling(payload.rest(), host: host)
        case L2CAPCID.dynamicRange:
            channelFrame(cid: cid, payload.rest(), host: host)
        default:
            if let channel = fixedChannels.first(where: { $0.cid == cid })?.channel {
                channel.received(payload, host: host)
            } else {
                log("frame for \(L2CAPCID(cid)) with no handler (\(payload.remaining) octets): dropped")
            }
        }
    }

    /// The link's HCI events go to the fixed channels in their order (SMP hears encryption
    /// before the frames that follow it); the disconnection closes everything.
    public func linkEvent(_ event: HostLinkEvent, host: isolated Host) {
        if case .disconnected(let reason) = event { return linkClosed(reason, host: host) }
        for f in fixedChannels { f.channel.linkEvent(event, host: host) }
    }

    func linkClosed(_ reason: HCIStatus, host: isolated Host) {
        guard !isDisconnected else { return }
        isDisconnected = true
        let error = L2CAPError.disconnected(handle: handle)
        let pending = pendingSignals
        pendingSignals.removeAll()
        for p in pending.values {
            host.disarm(p.timer)
            p.continuation.resume(throwing: error)
        }
        for cid in Array(channels.keys) { finishChannel(cid, error, host: host) }
        let closing = fixedChannels
        fixedChannels.removeAll()
        for f in closing { f.channel.linkEvent(.disconnected(reason), host: host) }
        for f in closing { f.channel.closed(error, host: host) }
    }

    // MARK: - Signaling

    /// Queues a signaling command behind what the host already queued on the link (the
    /// demultiplexer never waits on ACL credits, and replies leave in the order of the
    /// commands they answer). Bounded by the host: a peer flooding the signaling channel loses
    /// replies (logged), not memory.
    func sendSignal(_ command: SignalingCommand, host: isolated Host) {
        guard !isDisconnected else { return }
        do {
            try host.enqueueL2CAP(L2CAPFrame(cid: .leSignaling, payload: command.bytes).bytes, on: handle, kind: .control)
        } catch {
            log("could not send \(command.code): \(error)")
        }
    }

    func nextIdentifier() -> UInt8 {
        for _ in 0..<255 {
            lastIdentifier = lastIdentifier == 255 ? 1 : lastIdentifier + 1
            if pendingSignals[lastIdentifier] == nil { return lastIdentifier }
        }
        return lastIdentifier
    }

    /// Sends a signaling request and returns the peer's answer with the same identifier (its
    /// response or a Command Reject). Throws `signalingTimeout` or `disconnected`.
    public func signalingRequest(_ body: SignalingCommand.Body, host: isolated Host) async throws -> SignalingCommand {
        if isDisconnected { throw L2CAPError.disconnected(handle: handle) }
        guard pendingSignals.count < 255 else { throw L2CAPError.noResources("255 signaling requests outstanding") }
        let id = nextIdentifier()
        let command = SignalingCommand(identifier: id, body)
        let name = command.code.description
        let timeout = configuration.signalingTimeout
        return try await withCheckedThrowingContinuation { (cont: CheckedContinuation<SignalingCommand, any Error>) in
            let timer = host.arm(after: timeout) { self.signalTimedOut(id) }
            pendingSignals[id] = PendingSignal(name: name, continuation: cont, timer: timer)
            sendSignal(command, host: host)
        }
    }

    func signalTimedOut(_ id: UInt8) {
        guard let p = pendingSignals.removeValue(forKey: id) else { return }
        log("no response to \(p.name) (identifier \(id))")
        p.continuation.resume(throwing: L2CAPError.signalingTimeout(p.name))
    }

    func signaling(_ bytes: [UInt8], host: isolated Host) {
        let command: SignalingCommand
        do {
            command = try SignalingCommand.decode(bytes)
        } catch {
            log("malformed signaling command \(bytes.first.map { SignalingCode($0).description } ?? "(empty)"): \(error)")
            if let reject = SignalingCommand.rejection(for: bytes) { sendSignal(reject, host: host) }
            return
        }
        let id = command.identifier
        switch command.body {
        case .commandReject, .disconnectionResponse, .connectionParameterUpdateResponse,
             .leCreditBasedConnectionResponse, .creditBasedConnectionResponse, .creditBasedReconfigureResponse:
            guard let p = pendingSignals.removeValue(forKey: id) else {
                log("\(command.code) with identifier \(id) answers no pending request: dropped")
                return
            }
            host.disarm(p.timer)
            p.continuation.resume(returning: command)
        case let .disconnectionRequest(dcid, scid):
            disconnectionRequest(id: id, localCID: dcid, remoteCID: scid, host: host)
        case let .connectionParameterUpdateRequest(minI, maxI, latency, timeout):
            guard id != 0 else { return }
            guard role == .central else {
                log("Connection Parameter Update Request received as peripheral: rejected")
                sendSignal(SignalingCommand(identifier: id, .commandReject(.commandNotUnderstood)), host: host)
                return
            }
            let req = ConnectionParameterUpdateRequest(intervalMin: minI, intervalMax: maxI, latency: latency, timeout: timeout)
            // One decision at a time: a request arriving while one is being decided is
            // answered at once with result 0x0001, Connection Parameters rejected (Core v5.4
            // Vol 3 Part A 4.21), so a peer's requests cannot multiply tasks.
            guard !decidingParameterUpdate else {
                log("Connection Parameter Update Request while another is being decided: rejected")
                sendSignal(SignalingCommand(identifier: id, .connectionParameterUpdateResponse(result: 1)), host: host)
                return
            }
            decidingParameterUpdate = true
            host.spawn { await self.decideParameterUpdate(id: id, req, host: host) }
        case let .leCreditBasedConnectionRequest(spsm, scid, mtu, mps, credits):
            guard id != 0 else { return }
            creditBasedConnectionRequest(id: id, spsm: spsm, remoteCID: scid, mtu: mtu, mps: mps, credits: credits, host: host)
        case let .flowControlCreditInd(cid, credits):
            creditIndication(remoteCID: cid, credits: credits, host: host)
        case let .creditBasedConnectionRequest(spsm, mtu, mps, credits, sourceCIDs):
            guard id != 0 else { return }
            enhancedConnectionRequest(id: id, spsm: spsm, mtu: mtu, mps: mps, credits: credits, sourceCIDs: sourceCIDs, host: host)
        case let .creditBasedReconfigureRequest(mtu, mps, remoteCIDs):
            guard id != 0 else { return }
            reconfigureRequest(id: id, mtu: mtu, mps: mps, remoteCIDs: remoteCIDs, host: host)
        case .unknown:
            log("\(command.code): not understood, Command Reject sent")
            sendSignal(SignalingCommand(identifier: id, .commandReject(.commandNotUnderstood)), host: host)
        }
    }

    /// Asks the policy, answers, then (accepted) runs the LE Connection Update. The next
    /// request is decided as soon as this one is answered: the peer may send it as soon as it
    /// has the answer, before the update completes (Core v5.4 Vol 3 Part A 4.20, 4.21).
    func decideParameterUpdate(id: UInt8, _ req: ConnectionParameterUpdateRequest, host: isolated Host) async {
        var accept = req.isValid
        if accept, let policy = parameterPolicy { accept = await policy(req) }
        sendSignal(SignalingCommand(identifier: id, .connectionParameterUpdateResponse(result: accept ? 0 : 1)), host: host)
        decidingParameterUpdate = false
        guard accept, !isDisconnected else { return }
        do {
            _ = try await host.updateConnection(handle: handle, intervalMin: req.intervalMin, intervalMax: req.intervalMax,
                                                latency: req.latency, supervisionTimeout: req.timeout)
        } catch {
            log("LE Connection Update after an accepted parameter request failed: \(error)")
        }
    }

    /// Peripheral: asks the central for new connection parameters (Connection Parameter Update
    /// Request). Returns whether the central accepted them; the change itself arrives as
    /// `HostEvent.connectionUpdated`.
    public func requestConnectionParameterUpdate(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16,
                                                 timeout: UInt16, host: isolated Host) async throws -> Bool {
        guard role == .peripheral else {
            throw L2CAPError.notAllowed("the central updates parameters with LE Connection Update, not by request")
        }
        let req = ConnectionParameterUpdateRequest(intervalMin: intervalMin, intervalMax: intervalMax, latency: latency, timeout: timeout)
        guard req.isValid else { throw L2CAPError.invalidArgument("connection parameters out of range: \(req)") }
        let answer = try await signalingRequest(.connectionParameterUpdateRequest(
            intervalMin: intervalMin, intervalMax: intervalMax, latency: latency, timeout: timeout), host: host)
        switch answer.body {
        case .connectionParameterUpdateResponse(let result): return result == 0
        case .commandReject(let reason): throw L2CAPError.commandRejected("Connection Parameter Update Request", reason: reason)
        default: throw L2CAPError.unexpectedResponse("\(answer.code) to Connection Parameter Update Request")
        }
    }
}
