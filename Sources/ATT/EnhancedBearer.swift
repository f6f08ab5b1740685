// Enhanced ATT bearers (Core v5.4 Vol 3 Part F 3.2.11, Part G 5.3.2): ATT over enhanced
// credit-based L2CAP channels on PSM 0x0027, next to the unenhanced bearer of CID 0x0004.
import HCI
import Host
import L2CAP

/// ATT over one enhanced credit-based channel (an L2CAP SDU per ATT PDU): its own one
/// outstanding request and transaction timeout (Core v5.4 Vol 3 Part F 3.3.2, 3.3.3 apply per
/// bearer), its ATT_MTU the smaller of the channel's two MTUs (Part F 3.2.8: no Exchange MTU on
/// it). Requests from the peer go to the link's GATT server, with the unenhanced bearer's peer,
/// security and ATT_MTU rules; notifications to the link's GATT client through the unenhanced
/// bearer's notification path, so they keep one order; indications are confirmed on the bearer
/// that carried them (Part F 3.4.7.3). The server pushes on it too (`ATTBearer.pushBearer`):
/// one indication outstanding on it at a time (Part F 3.3.2), confirmed on it.
///
/// Plain state in the host's isolation, the channel's endpoint (`L2CAPConnection.setEndpoint`).
public final class EnhancedATTBearer: L2CAPChannelEndpoint, ATTRequester {
    /// The SPSM of EATT (Assigned Numbers, L2CAP PSMs: 0x0027).
    public static let psm: UInt16 = 0x0027

    let host: Host
    public let channel: L2CAPChannel
    /// The link's unenhanced bearer: peer, security, server delegate, the GATT client's handlers.
    let fixed: ATTBearer
    public private(set) var mtu: Int
    public private(set) var closedReason: ATTBearerError?

    var transaction: ATTBearer.Transaction?
    var transactionDeadline: DeadlineID?
    var transactionStart: ContinuousClock.Instant?
    var waiting: [(sdu: [UInt8], transaction: ATTBearer.Transaction)] = []
    /// A request answered `.later` is being produced; the PDUs after it wait (bounded).
    var answering = false
    var answerToken: UInt64 = 0
    var answerDeadline: DeadlineID?
    var held: [ATTPDU] = []

    // Server indication: the one outstanding on this bearer (Core v5.4 Vol 3 Part F 3.3.2) and
    // the indications waiting their turn.
    var indication: ATTBearer.Transaction?
    var indicationStart: ContinuousClock.Instant?
    /// The turn of an indication: one outstanding on this bearer at a time (Part F 3.3.2).
    let indicationTurn = OneAtATime()

    public init(channel: L2CAPChannel, fixed: ATTBearer, host: Host) {
        self.host = host
        self.channel = channel
        self.fixed = fixed
        self.mtu = Swift.min(channel.mtu, channel.peerMTU)
    }

    /// Makes a bearer the endpoint of each channel; returns them.
    public static func attach(_ channels: [L2CAPChannel], fixed: ATTBearer, host: isolated Host) throws -> [EnhancedATTBearer] {
        let l2cap = try L2CAPConnection.of(fixed.handle, on: host)
        return try channels.map { ch in
            let bearer = EnhancedATTBearer(channel: ch, fixed: fixed, host: host)
            bearer.armDeadline(after: fixed.configuration.transactionTimeout, host: host)
            try l2cap.setEndpoint(bearer, for: ch.localCID, host: host)
            return bearer
        }
    }

    var isBusy: Bool { transaction != nil || !waiting.isEmpty }

    func log(_ message: @autoclosure () -> String) {
        fixed.log("EATT \(hexCode(channel.localCID, digits: 4)): \(message())")
    }

    /// Hands `sdu` to the channel (its K-frames wait for credits there, in order).
    func send(_ sdu: [UInt8]) {
        let (handle, cid) = (channel.handle, channel.localCID)
        let error: (any Error)? = host.checkedIsolation { host in
            do { try L2CAPConnection.of(handle, on: host).enqueueSDU(cid, sdu, host: host); return nil } catch { return error }
        }
        if let error { log("could not send: \(error)") }
    }

    static func sdu(_ pdu: ATTPDU) -> [UInt8] {
        var w = ByteWriter(capacity: pdu.encodedSize)
        pdu.encode(into: &w)
        return w.bytes
    }

    // MARK: Client

    public nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        try await beginRequest(pdu).wait()
    }

    public func begin(_ pdu: ATTPDU) throws -> ATTBearer.Transaction? { try beginRequest(pdu) }

    /// `request(_:)` up to its wait: the request sent or queued, its transaction returned
    /// (`ATTRequester.begin`).
    public func beginRequest(_ pdu: ATTPDU) throws -> ATTBearer.Transaction {
        guard pdu.opcode.isRequest else { throw ATTBearerError.invalidArgument("\(pdu.opcode) is not a request") }
        guard pdu.opcode != .exchangeMTURequest else {
            throw ATTBearerError.invalidArgument("Exchange MTU is not used on an Enhanced ATT bearer (Core v5.4 Vol 3 Part F 3.4.2.1)")
        }
        if let closedReason { throw closedReason }
        try Task.checkCancellation()
        let sdu = Self.sdu(pdu)
        guard sdu.count <= mtu else { throw ATTBearerError.pduTooLarge(size: sdu.count, mtu: mtu) }
        let t = ATTBearer.Transaction(opcode: pdu.opcode)
        if transaction == nil { start(sdu, t) } else { waiting.append((sdu, t)) }
        return t
    }

    public nonisolated(nonsending) func command(_ pdu: ATTPDU) async throws {
        guard pdu.opcode.isCommand else { throw ATTBearerError.invalidArgument("\(pdu.opcode) is not a command") }
        if let closedReason { throw closedReason }
        let sdu = Self.sdu(pdu)
        guard sdu.count <= mtu else { throw ATTBearerError.pduTooLarge(size: sdu.count, mtu: mtu) }
        send(sdu)
    }

    func start(_ sdu: [UInt8], _ t: ATTBearer.Transaction) {
        transaction = t
        transactionStart = host.configuration.clock.now
        send(sdu)
    }

    /// The transaction timeout, armed while the bearer is open (as the unenhanced bearer's):
    /// it fires the outstanding request sent a timeout ago, else it is armed again.
    func armDeadline(after d: Duration, host: isolated Host) {
        transactionDeadline = host.arm(after: d) { self.deadlineFired(host: host) }
    }

    func deadlineFired(host: isolated Host) {
        transactionDeadline = nil
        guard closedReason == nil else { return }
        let timeout = fixed.configuration.transactionTimeout
        // The older of our request and our indication (each is a transaction, Part F 3.3.3).
        let outstanding = [(transaction?.opcode, transactionStart), (indication?.opcode, indicationStart)]
            .compactMap { op, start in op.flatMap { op in start.map { (op, $0) } } }
            .min { $0.1 < $1.1 }
        guard let (op, start) = outstanding else { return armDeadline(after: timeout, host: host) }
        let elapsed = start.duration(to: host.configuration.clock.now)
        if elapsed >= timeout {
            close(.transactionTimeout("no \(op == .handleValueIndication ? "confirmation of" : "response to") \(op) within \(timeout)"), host: host)
        } else {
            armDeadline(after: timeout - elapsed, host: host)
        }
    }

    func finishTransaction(_ r: Result<ATTPDU, any Error>) {
        guard let t = transaction else { return }
        transaction = nil
        transactionStart = nil
        t.resolve(r)
        while transaction == nil, !waiting.isEmpty {
            let (sdu, next) = waiting.removeFirst()
            if next.isSettled { continue }  // cancelled while waiting its turn
            start(sdu, next)
        }
    }

    // MARK: Incoming (L2CAPChannelEndpoint)

    public func received(sdu: [UInt8], host: isolated Host) {
        guard closedReason == nil else { return }
        switch ATTPDU.decodeResult(from: ByteReader(sdu), mtu: mtu) {
        case .malformed(let op?, let error):
            if let t = transaction, op == .errorResponse || op == t.opcode.responseOpcode {
                finishTransaction(.failure(ATTBearerError.invalidResponse("\(op): \(error)")))
            } else if let reply = ATTPDU.serverRejection(for: .malformed(opcode: op, error: error)) {
                log("malformed \(op): \(error): Invalid PDU")
                send(Self.sdu(reply))
            } else {
                log("malformed \(op): \(error): dropped")
            }
        case .malformed(nil, _):
            log("empty ATT PDU: dropped")
        case .pdu(let pdu):
            switch ATTBearer.side(of: pdu) {
            case .client: clientReceived(pdu, host: host)
            case .server: serverReceived(pdu, host: host)
            }
        }
    }

    func clientReceived(_ pdu: ATTPDU, host: isolated Host) {
        switch pdu {
        case let .errorResponse(requestOpcode, handle, code):
            guard transaction?.opcode == requestOpcode else { return log("Error Response for \(requestOpcode) with no such request pending: dropped") }
            finishTransaction(.failure(ATTError(code, requestOpcode: requestOpcode, handle: handle)))
        case .handleValueNotification, .multipleHandleValueNotification:
            fixed.clientReceived(pdu)
        case .handleValueIndication:
            // Confirmed here once the client's handler has it (Core v5.4 Vol 3 Part F 3.4.7.3).
            host.spawn { await self.confirm(pdu, host: host) }
        default:
            guard transaction?.opcode.responseOpcode == pdu.opcode else {
                return log("\(pdu.opcode) with no matching request pending: dropped")
            }
            finishTransaction(.success(pdu))
        }
    }

    /// Hands an indication to the client's handler, then confirms it on this bearer.
    func confirm(_ indication: ATTPDU, host: isolated Host) async {
        await fixed.notificationHandler?(indication)
        guard closedReason == nil else { return }
        send(Self.sdu(.handleValueConfirmation))
    }

    func serverReceived(_ pdu: ATTPDU, host: isolated Host) {
        let op = pdu.opcode
        if answering, op != .handleValueConfirmation {
            guard held.count < ATTBearer.queueLimit else { return log("\(op) dropped: too many PDUs wait for an answer") }
            return held.append(pdu)
        }
        switch pdu {
        case .handleValueConfirmation:
            guard let t = indication else { return log("Handle Value Confirmation with no indication pending on this bearer: dropped") }
            indication = nil
            indicationStart = nil
            t.resolve(.success(pdu))
        case .exchangeMTURequest:
            // Not sent on an Enhanced ATT bearer (Core v5.4 Vol 3 Part F 3.4.2.1; its ATT_MTU
            // follows the channel, 3.2.8): refused rather than dropped, so the client is not left
            // to its transaction timeout, and the ATT_MTU stays.
            log("Exchange MTU Request on an Enhanced ATT bearer: Request Not Supported")
            send(Self.sdu(.errorResponse(requestOpcode: op, handle: 0, error: .requestNotSupported)))
        case .unknown:
            if let reply = ATTPDU.serverRejection(for: .pdu(pdu)) { send(Self.sdu(reply)) }
        default:
            serve(pdu, host: host)
        }
    }

    func serve(_ pdu: ATTPDU, host: isolated Host) {
        let op = pdu.opcode
        guard let server = fixed.synchronousDelegate else {
            if op.isRequest { send(Self.sdu(.errorResponse(requestOpcode: op, handle: 0, error: .requestNotSupported))) }
            return
        }
        switch server.answer(to: pdu, from: fixed.peer, mtu: mtu, security: fixed.security) {
        case .now(let response):
            if op.isRequest { send(Self.sdu(response ?? .errorResponse(requestOpcode: op, handle: 0, error: .unlikelyError))) }
        case .later(let produce):
            // As on CID 0x0004: produced off the loop, the peer's next PDUs held meanwhile, and
            // Unlikely Error in its place once `asyncHandlerTimeout` has passed.
            answering = true
            answerToken &+= 1
            let token = answerToken, timeout = fixed.configuration.asyncHandlerTimeout
            let task = host.spawn {
                let response = await produce()
                self.answered(token, pdu, response, host: host)
            }
            answerDeadline = host.arm(after: timeout) {
                self.log("\(op): the application's handler gave no answer within \(timeout): Unlikely Error")
                task.cancel()
                self.answered(token, pdu, nil, host: host)
            }
        }
    }

    /// The answer to `request` produced `.later` (nil: Unlikely Error for a request); then the
    /// PDUs held meanwhile are served in order. A late one, after its deadline, is dropped.
    func answered(_ token: UInt64, _ request: ATTPDU, _ response: ATTPDU?, host: isolated Host) {
        guard answering, token == answerToken else { return }
        answering = false
        host.disarm(answerDeadline)
        answerDeadline = nil
        let op = request.opcode
        if closedReason == nil, op.isRequest {
            send(Self.sdu(response ?? .errorResponse(requestOpcode: op, handle: ATTBearer.attributeHandle(of: request), error: .unlikelyError)))
        }
        while !answering, closedReason == nil, !held.isEmpty { serverReceived(held.removeFirst(), host: host) }
    }

    public func reconfigured(mtu: Int, peerMTU: Int, host: isolated Host) {
        // The ATT_MTU follows the channel's MTUs (Core v5.4 Vol 3 Part F 3.2.8).
        self.mtu = Swift.min(mtu, peerMTU)
    }

    public func closed(_ error: L2CAPError?, host: isolated Host) {
        close(.closed(error.map { "\($0)" } ?? "the L2CAP channel \(hexCode(channel.localCID, digits: 4)) was disconnected"), host: host)
    }

    func close(_ reason: ATTBearerError, host: isolated Host) {
        guard closedReason == nil else { return }
        closedReason = reason
        log("closed: \(reason)")
        host.disarm(transactionDeadline)
        transactionDeadline = nil
        finishTransaction(.failure(reason))
        for (_, t) in waiting { t.resolve(.failure(reason)) }
        waiting.removeAll()
        held.removeAll()
        host.disarm(answerDeadline)
        answerDeadline = nil
        indication?.resolve(.failure(reason))
        indication = nil
        indicationTurn.fail(reason)
    }

    // MARK: Server push

    /// Sends a PDU of ours that needs no answer; returns once its last K-frame went to the
    /// controller (it waits for credits: back-pressure, as on CID 0x0004).
    public nonisolated(nonsending) func push(_ pdu: ATTPDU) async throws {
        if let closedReason { throw closedReason }
        let sdu = Self.sdu(pdu)
        guard sdu.count <= mtu else { throw ATTBearerError.pduTooLarge(size: sdu.count, mtu: mtu) }
        do { try await channel.send(sdu) } catch { throw closedReason ?? ATTBearerError.closed("\(error)") }
    }

    /// Sends a Handle Value Notification (value cut to ATT_MTU − 3, Part F 3.4.7.1).
    public nonisolated(nonsending) func notify(handle: UInt16, value: [UInt8]) async throws {
        try await push(.handleValueNotification(handle: handle, value: ATTLink.cut(value, toFit: mtu)))
    }

    /// Sends a Handle Value Indication and waits for its confirmation on this bearer (Part F
    /// 3.4.7.2, 3.4.7.3) within the transaction timeout; later ones wait their turn.
    public func indicate(handle: UInt16, value: [UInt8], host: isolated Host) async throws {
        try await indicationTurn.take { closedReason }
        let t = ATTBearer.Transaction(opcode: .handleValueIndication)
        indication = t
        indicationStart = host.configuration.clock.now
        defer {
            if indication === t { indication = nil; indicationStart = nil }
            indicationTurn.pass()
        }
        try await push(.handleValueIndication(handle: handle, value: ATTLink.cut(value, toFit: mtu)))
        _ = try await t.wait()
    }
}

extension ATTBearer {
    /// Where the server's notifications go: the first open Enhanced ATT bearer (notifications
    /// may go on any ATT bearer of the client, Core v5.4 Vol 3 Part G 4.10; always the same one,
    /// so they keep their order) whose ATT_MTU is at least this bearer's, as the server sizes
    /// values to `link.mtu`; nil: CID 0x0004.
    var pushBearer: EnhancedATTBearer? { enhanced.first { $0.closedReason == nil && $0.mtu >= mtu } }

    /// Where an indication goes: such a bearer with none outstanding (each bearer has its own,
    /// Part F 3.3.2), else nil: CID 0x0004, whose indications wait their turn.
    var indicationBearer: EnhancedATTBearer? {
        enhanced.first { $0.closedReason == nil && $0.mtu >= mtu && $0.indicationTurn.isFree }
    }
}

/// The GATT client's requester over every ATT bearer of a link: the unenhanced one, and the
/// Enhanced ATT bearers once opened, over which requests and commands are spread (the next
/// idle one in turn, else the least loaded). ATT_MTU is the smallest of the bearers in use, so
/// a procedure sized by it fits whichever carries it.
public final class ATTBearers: ATTRequester {
    public let fixed: ATTBearer
    var next = 0

    public init(fixed: ATTBearer) { self.fixed = fixed }

    public var handle: UInt16 { fixed.handle }

    /// The link's Enhanced ATT bearers, kept by the unenhanced bearer (its server pushes use them too).
    public var enhanced: [EnhancedATTBearer] { fixed.enhanced }

    /// Adds Enhanced ATT bearers to spread requests over; closed ones are dropped (a peer that
    /// opens and closes bearers again and again leaves nothing behind).
    public func add(_ bearers: [EnhancedATTBearer]) { fixed.enhanced = open + bearers }

    public var open: [EnhancedATTBearer] { fixed.enhanced.filter { $0.closedReason == nil } }

    /// Read after every Read Response (is the value longer?): no array is built for it.
    public var mtu: Int {
        var smallest: Int?
        for bearer in fixed.enhanced where bearer.closedReason == nil { smallest = min(smallest ?? bearer.mtu, bearer.mtu) }
        return smallest ?? fixed.mtu
    }

    /// The next idle bearer after the last one used (so that one request after the other
    /// goes over every bearer too), else the one with the fewest requests waiting.
    func pick() -> EnhancedATTBearer? {
        guard fixed.enhanced.contains(where: { $0.closedReason == nil }) else { return nil }  // per request: no array built
        let open = self.open
        let start = next % open.count
        let rotated = open[start...] + open[..<start]
        let bearer = rotated.first { !$0.isBusy } ?? rotated.min { $0.waiting.count < $1.waiting.count }!
        next = (open.firstIndex { $0 === bearer } ?? 0) + 1
        return bearer
    }

    public nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        try await beginRequest(pdu).wait()
    }

    public func begin(_ pdu: ATTPDU) throws -> ATTBearer.Transaction? { try beginRequest(pdu) }

    /// `request(_:)` up to its wait, on the bearer it picks.
    public func beginRequest(_ pdu: ATTPDU) throws -> ATTBearer.Transaction {
        if pdu.opcode != .exchangeMTURequest, let bearer = pick() { return try bearer.beginRequest(pdu) }
        return try fixed.beginRequest(pdu)
    }

    public nonisolated(nonsending) func command(_ pdu: ATTPDU) async throws {
        if let bearer = pick() { return try await bearer.command(pdu) }
        try await fixed.command(pdu)
    }
}
