// The L2CAP runtime of one LE link (Core Vol 3 Part A): fixed-channel demultiplexing, the LE
// signaling channel, and LE credit-based connection-oriented channels (CreditBasedChannel.swift).
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

/// Receives a fixed channel's payloads (information payload of each B-frame) synchronously,
/// in order and one at a time, on the host's executor, as part of the link's one receive path
/// (`FrameRoute` sink → `L2CAPConnection.received` → here): keep it short. `closed` is called
/// once, when the link goes away.
public struct FixedChannelHandler: Sendable {
    /// The information payload, read in place in the received frame (no copy).
    public var receivedPayload: @Sendable (ByteReader) -> Void
    public var closed: @Sendable (L2CAPError) -> Void
    public init(receivedPayload: @escaping @Sendable (ByteReader) -> Void, closed: @escaping @Sendable (L2CAPError) -> Void = { _ in }) {
        self.receivedPayload = receivedPayload
        self.closed = closed
    }
    /// A handler that takes each payload as its own array.
    public init(received: @escaping @Sendable ([UInt8]) -> Void, closed: @escaping @Sendable (L2CAPError) -> Void = { _ in }) {
        self.init(receivedPayload: { var r = $0; received(r.rest()) }, closed: closed)
    }
}

/// The L2CAP layer of one LE link.
///
/// ```swift
/// let l2cap = L2CAPConnection(host: host, connection: link)
/// let att = ATTBearer(l2cap: l2cap)          // registers CID 0x0004
/// await att.start()
/// await l2cap.start()                        // installs its sink on link.route
/// let channel = try await l2cap.connectChannel(psm: 0x0080)
/// ```
/// Register fixed-channel handlers before `start()`: frames for a channel without a handler
/// are dropped and logged. When the link goes down every pending request, channel and
/// fixed-channel handler fails with `L2CAPError.disconnected`.
///
/// Runs on the host's executor (`unownedExecutor`): the host calls `received` synchronously
/// for each reassembled frame, so a frame is demultiplexed and handled to completion before
/// the next one is read, with no task hop between the layers.
public actor L2CAPConnection {
    public nonisolated let host: Host
    public nonisolated let connection: LEConnection
    public nonisolated let configuration: L2CAPConfiguration
    public nonisolated var handle: UInt16 { connection.handle }
    public nonisolated var role: LERole { connection.role }

    /// The host's executor: the link's frames are handled where the host reassembles them.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { host.unownedExecutor }

    /// Fixed-channel handlers with their CIDs: a few (ATT, SMP), searched in order on every
    /// frame (no hashing per frame, as a dictionary would).
    var fixedHandlers: [(cid: UInt16, handler: FixedChannelHandler)] = []
    var started = false
    var signalSender: Task<Void, Never>?
    var signalQueue: AsyncStream<(SignalingCode, [UInt8])>.Continuation?
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

    public init(host: Host, connection: LEConnection, configuration: L2CAPConfiguration = .init()) {
        self.host = host
        self.connection = connection
        self.configuration = configuration
    }

    /// Installs this connection as the consumer of the link's frames (frames that arrived
    /// before are handled first). Idempotent.
    public func start() {
        guard !started, !isDisconnected else { return }
        started = true
        connection.route.install({ frame in self.assumeIsolated { $0.received(frame) } },
                                 closed: { self.assumeIsolated { $0.linkClosed() } }, on: host)
    }

    /// Registers (or with nil removes) the handler of fixed channel `cid` (ATT 0x0004, SMP 0x0006, ...).
    public func setFixedChannelHandler(_ cid: L2CAPCID, _ handler: FixedChannelHandler?) {
        if isDisconnected, let handler {
            handler.closed(.disconnected(handle: handle))
            return
        }
        fixedHandlers.removeAll { $0.cid == cid.rawValue }
        if let handler { fixedHandlers.append((cid.rawValue, handler)) }
    }

    /// The central's policy for Connection Parameter Update Requests; it returns whether to
    /// accept. Accepted parameters are applied with LE Connection Update.
    public func setConnectionParameterPolicy(_ policy: (@Sendable (ConnectionParameterUpdateRequest) async -> Bool)?) {
        parameterPolicy = policy
    }

    /// Sends one B-frame with `payload` on `cid` (flow controlled by the host).
    public nonisolated func send(_ payload: [UInt8], on cid: L2CAPCID) async throws {
        try await host.sendL2CAP(L2CAPFrame(cid: cid, payload: payload).bytes, on: connection.handle)
    }

    func log(_ message: @autoclosure () -> String) {
        configuration.log?("L2CAP \(hexCode(handle, digits: 4)): \(message())")
    }

    // MARK: - Demultiplexing

    /// Demultiplexes one frame (the host's executor, in arrival order) and handles it to
    /// completion: signaling, a credit-based channel, or a fixed channel's handler.
    func received(_ bytes: [UInt8]) {
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
            signaling(payload.rest())
        case L2CAPCID.dynamicRange:
            channelFrame(cid: cid, payload.rest())
        default:
            if let h = fixedHandlers.first(where: { $0.cid == cid })?.handler {
                h.receivedPayload(payload)
            } else {
                log("frame for \(L2CAPCID(cid)) with no handler (\(payload.remaining) octets): dropped")
            }
        }
    }

    /// Forgets a deadline in the host's table (we run on the host's executor).
    /// Registers a deadline in the host's table (we run on its executor).
    func arm(after: Duration, _ fire: @escaping @Sendable () -> Void) -> DeadlineID {
        host.assumeIsolated { $0.arm(after: after, fire) }
    }

    func disarm(_ id: DeadlineID) {
        host.assumeIsolated { $0.disarm(id) }
    }

    func linkClosed() {
        guard !isDisconnected else { return }
        isDisconnected = true
        let error = L2CAPError.disconnected(handle: handle)
        let pending = pendingSignals
        pendingSignals.removeAll()
        for p in pending.values {
            disarm(p.timer)
            p.continuation.resume(throwing: error)
        }
        for cid in Array(channels.keys) { finishChannel(cid, error) }
        signalQueue?.finish()
        let handlers = fixedHandlers
        fixedHandlers.removeAll()
        for h in handlers { h.handler.closed(error) }
    }

    // MARK: - Signaling

    func sendSignal(_ command: SignalingCommand) {
        // One sender task drains the queue in order, so the demultiplexer never waits on ACL
        // credits and replies leave in the order of the commands they answer. Bounded: a peer
        // flooding the signaling channel loses replies (logged), not memory.
        if signalSender == nil {
            let (stream, continuation) = AsyncStream.makeStream(of: (SignalingCode, [UInt8]).self,
                                                               bufferingPolicy: .bufferingOldest(Self.signalQueueLimit))
            signalQueue = continuation
            let host = self.host, handle = self.handle, log = configuration.log
            signalSender = Task {
                for await (code, frame) in stream {
                    do { try await host.sendL2CAP(frame, on: handle) } catch {
                        log?("L2CAP \(hexCode(handle, digits: 4)): could not send \(code): \(error)")
                    }
                }
            }
        }
        let frame = L2CAPFrame(cid: .leSignaling, payload: command.bytes).bytes
        if case .dropped = signalQueue?.yield((command.code, frame)) {
            log("signaling queue full (\(Self.signalQueueLimit)): \(command.code) not sent")
        }
    }

    /// Signaling commands waiting for ACL credits before further ones are dropped.
    static let signalQueueLimit = 256

    func nextIdentifier() -> UInt8 {
        for _ in 0..<255 {
            lastIdentifier = lastIdentifier == 255 ? 1 : lastIdentifier + 1
            if pendingSignals[lastIdentifier] == nil { return lastIdentifier }
        }
        return lastIdentifier
    }

    /// Sends a signaling request and returns the peer's answer with the same identifier (its
    /// response or a Command Reject). Throws `signalingTimeout` or `disconnected`.
    public func signalingRequest(_ body: SignalingCommand.Body) async throws -> SignalingCommand {
        if isDisconnected { throw L2CAPError.disconnected(handle: handle) }
        guard pendingSignals.count < 255 else { throw L2CAPError.noResources("255 signaling requests outstanding") }
        let id = nextIdentifier()
        let command = SignalingCommand(identifier: id, body)
        let name = command.code.description
        let timeout = configuration.signalingTimeout
        return try await withCheckedThrowingContinuation { (cont: CheckedContinuation<SignalingCommand, any Error>) in
            let timer = host.assumeIsolated { $0.arm(after: timeout) { [weak self] in self?.assumeIsolated { $0.signalTimedOut(id) } } }
            pendingSignals[id] = PendingSignal(name: name, continuation: cont, timer: timer)
            sendSignal(command)
        }
    }

    func signalTimedOut(_ id: UInt8) {
        guard let p = pendingSignals.removeValue(forKey: id) else { return }
        log("no response to \(p.name) (identifier \(id))")
        p.continuation.resume(throwing: L2CAPError.signalingTimeout(p.name))
    }

    func signaling(_ bytes: [UInt8]) {
        let command: SignalingCommand
        do {
            command = try SignalingCommand.decode(bytes)
        } catch {
            log("malformed signaling command \(bytes.first.map { SignalingCode($0).description } ?? "(empty)"): \(error)")
            if let reject = SignalingCommand.rejection(for: bytes) { sendSignal(reject) }
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
            disarm(p.timer)
            p.continuation.resume(returning: command)
        case let .disconnectionRequest(dcid, scid):
            disconnectionRequest(id: id, localCID: dcid, remoteCID: scid)
        case let .connectionParameterUpdateRequest(minI, maxI, latency, timeout):
            guard id != 0 else { return }
            guard role == .central else {
                log("Connection Parameter Update Request received as peripheral: rejected")
                sendSignal(SignalingCommand(identifier: id, .commandReject(.commandNotUnderstood)))
                return
            }
            let req = ConnectionParameterUpdateRequest(intervalMin: minI, intervalMax: maxI, latency: latency, timeout: timeout)
            // One decision at a time: a request arriving while one is being decided is
            // answered at once with result 0x0001, Connection Parameters rejected (Core v5.4
            // Vol 3 Part A 4.21), so a peer's requests cannot multiply tasks.
            guard !decidingParameterUpdate else {
                log("Connection Parameter Update Request while another is being decided: rejected")
                sendSignal(SignalingCommand(identifier: id, .connectionParameterUpdateResponse(result: 1)))
                return
            }
            decidingParameterUpdate = true
            Task { await self.decideParameterUpdate(id: id, req) }
        case let .leCreditBasedConnectionRequest(spsm, scid, mtu, mps, credits):
            guard id != 0 else { return }
            creditBasedConnectionRequest(id: id, spsm: spsm, remoteCID: scid, mtu: mtu, mps: mps, credits: credits)
        case let .flowControlCreditInd(cid, credits):
            creditIndication(remoteCID: cid, credits: credits)
        case let .creditBasedConnectionRequest(_, _, _, _, sourceCIDs):
            // Enhanced credit-based mode is not supported: refuse every channel, one Destination
            // CID 0x0000 per Source CID of the request (Core Vol 3 Part A 4.26).
            guard id != 0 else { return }
            sendSignal(SignalingCommand(identifier: id, .creditBasedConnectionResponse(
                mtu: 0, mps: 0, initialCredits: 0, result: .spsmNotSupported,
                destinationCIDs: [UInt16](repeating: 0x0000, count: sourceCIDs.count))))
        case .creditBasedReconfigureRequest, .unknown:
            log("\(command.code): not understood, Command Reject sent")
            sendSignal(SignalingCommand(identifier: id, .commandReject(.commandNotUnderstood)))
        }
    }

    /// Asks the policy, answers, then (accepted) runs the LE Connection Update. The next
    /// request is decided as soon as this one is answered: the peer may send it as soon as it
    /// has the answer, before the update completes (Core v5.4 Vol 3 Part A 4.20, 4.21).
    func decideParameterUpdate(id: UInt8, _ req: ConnectionParameterUpdateRequest) async {
        var accept = req.isValid
        if accept, let policy = parameterPolicy { accept = await policy(req) }
        sendSignal(SignalingCommand(identifier: id, .connectionParameterUpdateResponse(result: accept ? 0 : 1)))
        decidingParameterUpdate = false
        guard accept else { return }
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
                                                 timeout: UInt16) async throws -> Bool {
        guard role == .peripheral else {
            throw L2CAPError.notAllowed("the central updates parameters with LE Connection Update, not by request")
        }
        let req = ConnectionParameterUpdateRequest(intervalMin: intervalMin, intervalMax: intervalMax, latency: latency, timeout: timeout)
        guard req.isValid else { throw L2CAPError.invalidArgument("connection parameters out of range: \(req)") }
        let answer = try await signalingRequest(.connectionParameterUpdateRequest(
            intervalMin: intervalMin, intervalMax: intervalMax, latency: latency, timeout: timeout))
        switch answer.body {
        case .connectionParameterUpdateResponse(let result): return result == 0
        case .commandReject(let reason): throw L2CAPError.commandRejected("Connection Parameter Update Request", reason: reason)
        default: throw L2CAPError.unexpectedResponse("\(answer.code) to Connection Parameter Update Request")
        }
    }
}
