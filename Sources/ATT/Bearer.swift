// The ATT bearer (Core Vol 3 Part F 3.2–3.4): ATT over the fixed channel 0x0004 of one LE link.
import HCI
import Host
import L2CAP
import Synchronization
import Transport

/// An `ATTServerDelegate` that can answer synchronously (`GATTServer` does): the bearer then
/// answers requests in the host's isolation as frames arrive, with no task hop. A class (held
/// by reference: the bearer reads it per request, and a class-bound existential is copied with
/// one retain).
public protocol ATTSynchronousServerDelegate: ATTServerDelegate, AnyObject {
    func response(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) -> ATTPDU?
    /// Like `response`, but a request whose answer the application produces asynchronously
    /// (a GATT server's async handlers) is answered `.later`: the bearer runs it off the host's
    /// loop and holds the peer's next PDUs until it is sent. Defaults to `.now(response(...))`.
    func answer(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) -> ATTServerAnswer
}

extension ATTSynchronousServerDelegate {
    public func answer(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) -> ATTServerAnswer {
        .now(response(to: pdu, from: peer, mtu: mtu, security: security))
    }
}

/// How a synchronous server delegate answers one PDU.
public enum ATTServerAnswer: Sendable {
    /// The response (nil for a command or a PDU a server does not answer), ready now.
    case now(ATTPDU?)
    /// Produced by application code that may wait: the bearer awaits it off its host's loop,
    /// within `ATTBearerConfiguration.asyncHandlerTimeout`.
    case later(@Sendable () async -> ATTPDU?)
}

/// Tunables of an `ATTBearer`.
public struct ATTBearerConfiguration: Sendable {
    /// The transaction timeout (Core Vol 3 Part F 3.3.3): 30 s; shorter in tests.
    public var transactionTimeout: Duration = .seconds(30)
    /// How long an application's asynchronous handler may take to answer a request before the
    /// bearer answers Unlikely Error in its place: under the client's 30 s transaction timeout
    /// (Core Vol 3 Part F 3.3.3), so the client gets an answer rather than losing its bearer.
    public var asyncHandlerTimeout: Duration = .seconds(25)
    /// Our Rx MTU, sent in Exchange MTU Responses (and the default of `exchangeMTU`).
    public var serverRxMTU: UInt16 = 517
    /// Called for every dropped or refused PDU.
    public var log: (@Sendable (String) -> Void)?

    public init() {}
}

/// Why an ATT bearer operation failed (an Error Response is thrown as `ATTError` instead).
public enum ATTBearerError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No response / confirmation within the transaction timeout; the bearer is closed since.
    case transactionTimeout(String)
    /// The bearer is closed (link down, or an earlier transaction timeout); carries the cause.
    case closed(String)
    /// The peer answered with a PDU that does not decode or does not fit the request.
    case invalidResponse(String)
    /// The PDU does not fit the current ATT_MTU.
    case pduTooLarge(size: Int, mtu: Int)
    /// `request` was given something that is not a request (or `command` a non-command).
    case invalidArgument(String)

    public var description: String {
        switch self {
        case .transactionTimeout(let what): return "ATT transaction timeout: \(what); the bearer is closed"
        case .closed(let why): return "ATT bearer closed: \(why)"
        case .invalidResponse(let what): return "invalid ATT response: \(what)"
        case let .pduTooLarge(size, mtu): return "ATT PDU of \(size) octets exceeds ATT_MTU \(mtu)"
        case .invalidArgument(let what): return "invalid ATT argument: \(what)"
        }
    }
}

/// What a GATT server pushes through to one peer (`ATTServerPush`), and what it reads of the
/// link without entering its host: the ATT_MTU and the link's security, which live here (their
/// one home: the bearer reads them here too). Sendable: the server is shared by every link.
public final class ATTLink: ATTServerPush, Sendable {
    /// LE's default ATT_MTU, and the smallest it can become: a Rx MTU below it leaves ATT_MTU at
    /// 23 (Core v5.4 Vol 3 Part F 3.4.2.2). So a value of up to 20 octets fits any link's
    /// notification, and needs no look at the link's ATT_MTU (a lock per look).
    public static let defaultMTU = 23

    /// `value` cut to what one Handle Value Notification or Indication carries at `mtu`:
    /// ATT_MTU − 3 octets (Core v5.4 Vol 3 Part F 3.4.7.1, 3.4.7.2). A value of up to 20 octets
    /// is returned as it is, without `mtu` being read.
    public static func cut(_ value: [UInt8], toFit mtu: @autoclosure () -> Int) -> [UInt8] {
        if value.count <= defaultMTU - 3 { return value }
        let room = Swift.max(0, mtu() - 3)
        return value.count > room ? Array(value.prefix(room)) : value
    }

    public let host: Host
    public let handle: UInt16
    struct State {
        var mtu = ATTLink.defaultMTU
        var security = ATTSecurity.none
        var droppedNotifications = 0
    }
    let state = Mutex(State())

    init(host: Host, handle: UInt16) {
        self.host = host
        self.handle = handle
    }

    public var mtu: Int { state.withLock { $0.mtu } }
    public var security: ATTSecurity { state.withLock { $0.security } }
    /// Notifications the bearer dropped unprocessed (`ATTBearer.droppedNotifications`).
    public var droppedNotifications: Int { state.withLock { $0.droppedNotifications } }

    /// Enters the host and sends the notification on the link's push bearer (an Enhanced ATT
    /// bearer, `ATTBearer.pushBearer`), else on CID 0x0004: at once, with a plain call into the
    /// host, when the link has room (the usual case); else it waits its turn.
    public nonisolated(nonsending) func notify(handle valueHandle: UInt16, value: [UInt8]) async throws {
        try await Self.notify(handle: valueHandle, value: value, link: handle, on: host)
    }

    /// `notify(handle:value:)` inside the host: entered directly, as a `Host.run` closure would
    /// be, one frame fewer (one executor check and preference lookup fewer per notification).
    private static func notify(handle valueHandle: UInt16, value: [UInt8], link handle: UInt16, on host: isolated Host) async throws {
        let bearer = try ATTBearer.of(handle, on: host)
        if let enhanced = bearer.pushBearer { return try await enhanced.notify(handle: valueHandle, value: value) }
        let frame = bearer.notificationFrame(handle: valueHandle, value: value)
        if try bearer.sendIfReady(frame, host: host) { return }
        try await bearer.push(frame)
    }

    /// Sent at once, with a plain call, when the caller is on the host's thread (code in its
    /// isolation, or a task preferring its executor) and CID 0x0004 has room: awaiting `notify`
    /// costs a hop into the host and one back (two task switches; from a task preferring the
    /// thread, two jobs). Elsewhere, or with an Enhanced ATT push bearer (its credits), false.
    public func notifyIfReady(handle valueHandle: UInt16, value: [UInt8]) throws -> Bool {
        guard host.executor.isCurrent else { return false }
        let handle = handle
        return try host.checkedIsolation { host in
            let bearer = try ATTBearer.of(handle, on: host)
            guard bearer.pushBearer == nil else { return false }
            return try bearer.sendIfReady(bearer.notificationFrame(handle: valueHandle, value: value), host: host)
        }
    }

    /// Enters the host once and sends the notifications there, in order, as `notify(handle:value:)`.
    public nonisolated(nonsending) func notify(handle valueHandle: UInt16, values: [[UInt8]]) async throws {
        let handle = handle
        try await host.run { host in
            let bearer = try ATTBearer.of(handle, on: host)
            for value in values {
                if let enhanced = bearer.pushBearer { try await enhanced.notify(handle: valueHandle, value: value); continue }
                let frame = bearer.notificationFrame(handle: valueHandle, value: value)
                if try bearer.sendIfReady(frame, host: host) { continue }
                try await bearer.push(frame)
            }
        }
    }

    /// Enters the host and sends one Multiple Handle Value Notification on the link's push bearer.
    public nonisolated(nonsending) func notifyMultiple(_ list: [ATTHandleValue]) async throws {
        let handle = handle
        try await host.run { host in
            let bearer = try ATTBearer.of(handle, on: host)
            if let enhanced = bearer.pushBearer { return try await enhanced.push(.multipleHandleValueNotification(list)) }
            try await bearer.push(ATTBearer.frame(.multipleHandleValueNotification(list)))
        }
    }

    /// Enters the host and indicates (waits for the confirmation) on an Enhanced ATT bearer
    /// with no indication outstanding, else on CID 0x0004 (`ATTBearer.indicationBearer`).
    public func indicate(handle valueHandle: UInt16, value: [UInt8]) async throws {
        let handle = handle
        try await host.run { host in
            let bearer = try ATTBearer.of(handle, on: host)
            if let enhanced = bearer.indicationBearer { return try await enhanced.indicate(handle: valueHandle, value: value, host: host) }
            try await bearer.indicate(handle: valueHandle, value: value, host: host)
        }
    }
}

/// ATT over CID 0x0004 of one link: the client side (`ATTRequester`: one outstanding request,
/// transaction timeout, MTU exchange; `clientReceived`), the server side (requests handed to an
/// `ATTServerDelegate` one at a time; malformed/unknown PDUs refused per spec;
/// `serverReceived`) and server pushes (notifications, indications with one outstanding).
/// `received` decodes each PDU once and `dispatch` hands it to one side.
///
/// Plain state owned by the link's `L2CAPConnection` (its fixed channel 0x0004), inside the
/// host's isolation: each ATT PDU is handled by `received` synchronously, within the host's
/// handling of the frame that carried it (a response resolves the waiting request, a request
/// is answered by a synchronous server delegate with `Host.enqueueL2CAP`). Not `Sendable`: the
/// application reaches it with `Host.run` (`ATTBearer.of`), GATT servers through its `link`.
/// The client side (`request`, `command`, `notify`, `exchangeMTU`) runs in the caller's
/// isolation, which is the host's (the bearer never leaves it); its calls into the host are
/// checked there (`Host.checkedIsolation`).
///
/// Create it, `start` it and make it the L2CAP connection's fixed channel before attaching the
/// L2CAP layer to the link, so no PDU is missed.
public final class ATTBearer: L2CAPFixedChannel, ATTRequester {
    let host: Host
    public let handle: UInt16
    public let peer: ATTPeer
    public let configuration: ATTBearerConfiguration
    /// What servers push through, and the home of ATT_MTU and the link's security.
    public let link: ATTLink

    /// The current ATT_MTU (23 until an Exchange MTU completes).
    public var mtu: Int { link.mtu }
    /// Why the bearer is closed (nil while open).
    public private(set) var closedReason: ATTBearerError?

    var started = false
    var answeredMTURequest = false
    /// Our Exchange MTU Request was answered (it is sent once per connection).
    var exchangedMTU = false
    /// The largest PDU accepted from the peer: ATT_MTU, or the larger one being negotiated.
    var inboundMTU = 23
    var delegate: (any ATTServerDelegate)? {
        didSet { synchronousDelegate = delegate as? any ATTSynchronousServerDelegate }
    }
    /// `delegate` when it answers synchronously (cast once, not per request).
    var synchronousDelegate: (any ATTSynchronousServerDelegate)?
    /// Nonsending: it runs in the notification loop's isolation, the host's (a plain async
    /// closure would run on the global executor, off the host that owns the GATT client).
    var notificationHandler: (nonisolated(nonsending) (ATTPDU) async -> Void)?
    var notificationFast: ((ATTPDU) -> Bool)?
    /// PDUs in the notification stream not yet handled (the fast receiver is used only at 0,
    /// so the application sees notifications in arrival order).
    var notificationBacklog = 0

    /// A request (or indication) waiting for its answer; settled once, from any context (the
    /// answer, a failure, or the waiting task's cancellation: the first wins, later ones are
    /// dropped, so an answer that comes after the cancellation is discarded).
    public final class Transaction: Sendable {
        let opcode: ATTOpcode
        /// The parked waiter, and the outcome once settled.
        private let state: Mutex<(CheckedContinuation<ATTPDU, any Error>?, Result<ATTPDU, any Error>?)>
        init(opcode: ATTOpcode) {
            self.opcode = opcode
            state = Mutex((nil, nil))
        }
        func resolve(_ r: Result<ATTPDU, any Error>) {
            let c: CheckedContinuation<ATTPDU, any Error>? = state.withLock { s in
                guard s.1 == nil else { return nil }
                s.1 = r
                defer { s.0 = nil }
                return s.0
            }
            c?.resume(with: r)
        }
        /// Whether it has its outcome (a request cancelled while queued is not sent).
        var isSettled: Bool { state.withLock { $0.1 != nil } }
        /// The outcome: at once when settled, else when it is; `CancellationError` at once when
        /// the waiting task is cancelled (the bearer keeps the transaction: Core v5.4 Vol 3
        /// Part F 3.3.2, the next request waits for its answer, which is then dropped).
        /// The wait itself runs on the generic executor, as `Mutex.takeBatch`'s does (the
        /// closure is not isolated): for a task preferring the host's executor, the same thread;
        /// for one preferring none (a task the host spawned), a pool thread until it returns.
        public nonisolated(nonsending) func wait() async throws -> ATTPDU {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (c: CheckedContinuation<ATTPDU, any Error>) in
                    let r: Result<ATTPDU, any Error>? = state.withLock { s in
                        if let r = s.1 { return r }
                        s.0 = c
                        return nil
                    }
                    if let r { c.resume(with: r) }
                }
            } onCancel: {
                resolve(.failure(CancellationError()))
            }
        }
    }

    // Client: the one outstanding request (Core Vol 3 Part F 3.3.2) and the requests waiting
    // for it to be answered, first come first served (`queuedHead` is the next).
    var transaction: Transaction?
    /// When the outstanding `transaction` was sent (the host's deadline clock).
    var transactionStart: ContinuousClock.Instant?
    /// The transaction timeouts (Core Vol 3 Part F 3.3.3), in the host's deadline table. The
    /// requests' one stays armed while the bearer is open (`transactionDeadlineFired` checks
    /// the transaction outstanding then and re-arms for it).
    var transactionDeadline: DeadlineID?
    var indicationDeadline: DeadlineID?
    var queuedRequests: [(frame: [UInt8], transaction: Transaction)] = []
    var queuedHead = 0

    // Server: a request answered `.later` (`ATTServerAnswer`) while its answer is produced off
    // the loop, and the peer's server-side PDUs that came meanwhile, held in arrival order (a
    // client waits for an answer before its next request, so these are commands; at most
    // `queueLimit`). Tokens tell a handler's late answer from the one being waited for.
    struct DeferredAnswer {
        let token: UInt64
        let request: ATTPDU
        let task: Task<Void, Never>
        let deadline: DeadlineID
    }
    var deferredAnswer: DeferredAnswer?
    var deferredTokens: UInt64 = 0
    var heldWhileDeferred: [ATTPDU] = []
    var heldHead = 0

    /// The link's Enhanced ATT bearers (`ATTBearers.add`), open or closed since.
    var enhanced: [EnhancedATTBearer] = []

    // Server indication.
    var indication: Transaction?
    /// The turn of an indication: one outstanding at a time (Core v5.4 Vol 3 Part F 3.3.2).
    let indicationTurn = OneAtATime()

    /// PDUs held for the notification handler before new ones are dropped (and logged).
    static let queueLimit = 1024

    let notifications: AsyncStream<ATTPDU>
    let notificationsContinuation: AsyncStream<ATTPDU>.Continuation

    public init(connection: LEConnection, host: Host, configuration: ATTBearerConfiguration = .init()) {
        self.host = host
        self.handle = connection.handle
        self.configuration = configuration
        self.peer = ATTPeer(id: connection.handle, address: "\(connection.peer.address)")
        self.link = ATTLink(host: host, handle: connection.handle)
        (notifications, notificationsContinuation) = AsyncStream.makeStream(of: ATTPDU.self,
                                                                            bufferingPolicy: .bufferingOldest(Self.queueLimit))
    }

    /// The ATT bearer of the link `handle` of `host` (inside its isolation).
    public static func of(_ handle: UInt16, on host: isolated Host) throws -> ATTBearer {
        guard let l2cap = try? L2CAPConnection.of(handle, on: host), let bearer = l2cap.fixedChannel(.att) as? ATTBearer else {
            throw ATTBearerError.closed("connection \(hexCode(handle, digits: 4)) is not up")
        }
        return bearer
    }

    /// Starts the notification handler's loop and the transaction deadline. Idempotent.
    public func start(host: isolated Host) {
        guard !started else { return }
        started = true
        armTransactionDeadline(after: configuration.transactionTimeout, host: host)
        host.spawn { await self.notificationLoop(host: host) }
    }

    /// The GATT server that answers the peer's requests; told `peerConnected` at once.
    public func setServerDelegate(_ d: (any ATTServerDelegate)?, host: isolated Host) async {
        delegate = d
        if let d { await d.peerConnected(peer, push: link) }
    }

    /// Receives every Handle Value Notification / Indication / Multiple Handle Value
    /// Notification, in order, in the host's isolation; an indication is confirmed after the
    /// handler returns.
    public func setNotificationHandler(_ h: (nonisolated(nonsending) (ATTPDU) async -> Void)?) {
        notificationHandler = h
    }

    /// An optional synchronous receiver of Handle Value Notifications and Multiple Handle Value
    /// Notifications, called as they arrive, in order, while nothing is waiting in the
    /// notification handler's queue (so the order across both stays the arrival order). It
    /// returns false to have the PDU go to the notification handler instead. Indications
    /// always go to the notification handler (confirmed after it returns).
    public func setNotificationFastHandler(_ h: ((ATTPDU) -> Bool)?) {
        notificationFast = h
    }

    /// Handle Value Notifications (and Indications) dropped unprocessed because
    /// `queueLimit` were already waiting for the notification handler.
    public var droppedNotifications: Int { link.droppedNotifications }

    /// The security level handed to the server delegate with each request (SMP sets it before
    /// the next PDU of the link is handled).
    public func setSecurity(_ s: ATTSecurity) { link.state.withLock { $0.security = s } }
    /// The link's current security.
    public var security: ATTSecurity { link.security }

    func setMTU(_ m: Int) {
        link.state.withLock { $0.mtu = m }
        inboundMTU = m
    }

    func log(_ message: @autoclosure () -> String) {
        configuration.log?("ATT \(hexCode(peer.id, digits: 4)): \(message())")
    }

    /// `pdu` in its B-frame on the ATT channel, encoded in one buffer.
    static func frame(_ pdu: ATTPDU) -> [UInt8] {
        L2CAPFrame.encode(cid: .att, payloadCapacity: pdu.encodedSize) { pdu.encode(into: &$0) }
    }

    /// Queues an answer without waiting (we are inside the host's handling of a frame): a
    /// direct call, no executor check or closure (`enqueueOnHost`) per answer.
    func enqueue(_ pdu: ATTPDU, host: isolated Host) {
        do { try host.enqueueL2CAP(Self.frame(pdu), on: handle, kind: .answer) } catch {
            log("could not send \(pdu.opcode): \(error)")
        }
    }

    // The host's functions on the paths that run in the caller's isolation (the client side,
    // pushes): the bearer lives in its host's isolation, so that is the host's; `checkedIsolation`
    // checks it (and traps if not). They hand the host only Sendable values.

    /// `Host.enqueueL2CAP` of `frame` on this link; the error when it was refused.
    func enqueueOnHost(_ frame: [UInt8], kind: EnqueuedFrameKind) -> (any Error)? {
        let handle = handle
        return host.checkedIsolation { host in
            do { try host.enqueueL2CAP(frame, on: handle, kind: kind); return nil } catch { return error }
        }
    }

    // MARK: - Client

    /// Sends `pdu` (a request) and returns its response; an Error Response throws `ATTError`.
    /// Requests wait their turn for the single outstanding request, first come first served.
    /// A cancelled task's request throws `CancellationError` at once: not sent if it was still
    /// waiting its turn; if it was sent, the bearer keeps it outstanding until its answer (which
    /// it drops) or its timeout, as a client may not send another before (Core v5.4 Vol 3 Part
    /// F 3.3.2). Runs in the caller's isolation (the host's): it sends and suspends once, until
    /// the answer resumes it.
    public nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        try await beginRequest(pdu).wait()
    }

    public func begin(_ pdu: ATTPDU) throws -> Transaction? { try beginRequest(pdu) }

    /// `request(_:)` up to its wait: the request sent or queued, its transaction returned
    /// (`ATTRequester.begin`).
    public func beginRequest(_ pdu: ATTPDU) throws -> Transaction {
        guard pdu.opcode.isRequest else { throw ATTBearerError.invalidArgument("\(pdu.opcode) is not a request") }
        try Task.checkCancellation()
        let t = Transaction(opcode: pdu.opcode)
        submitRequest(Self.frame(pdu), t)
        return t
    }

    /// A request to send (its B-frame): sent now if none is outstanding, else queued (FIFO).
    /// Fails `t` if the bearer is closed or the PDU exceeds ATT_MTU.
    func submitRequest(_ frame: [UInt8], _ t: Transaction) {
        if let closedReason { return t.resolve(.failure(closedReason)) }
        let size = frame.count - L2CAPFrame.headerLength
        if size > mtu { return t.resolve(.failure(ATTBearerError.pduTooLarge(size: size, mtu: mtu))) }
        if transaction == nil && queuedHead == queuedRequests.count {
            startRequest(frame, t)
        } else {
            queuedRequests.append((frame, t))
        }
    }

    /// Makes `t` the outstanding transaction and sends its PDU (queued behind earlier frames
    /// when ACL credits are short).
    func startRequest(_ frame: [UInt8], _ t: Transaction) {
        transaction = t
        transactionStart = host.configuration.clock.now
        if let error = enqueueOnHost(frame, kind: .request) {
            if transaction === t { transaction = nil }
            t.resolve(.failure(error))
            startQueuedRequest()
        }
    }

    /// The outstanding transaction was answered (or failed): sends the next queued request.
    func startQueuedRequest() {
        while transaction == nil, queuedHead < queuedRequests.count {
            let (frame, t) = queuedRequests[queuedHead]
            queuedHead += 1
            if queuedHead == queuedRequests.count {
                queuedRequests.removeAll(keepingCapacity: true)
                queuedHead = 0
            } else if queuedHead >= 16 && queuedHead * 2 >= queuedRequests.count {
                // Requests keep coming while some wait (three or more tasks requesting at
                // once): drop the taken ones, or the array would grow with every request.
                queuedRequests.removeFirst(queuedHead)
                queuedHead = 0
            }
            if let closedReason { t.resolve(.failure(closedReason)); continue }
            if t.isSettled { continue }  // its task was cancelled while it waited its turn
            startRequest(frame, t)
        }
    }

    /// Whether a request is outstanding (sent, its answer not come), and how many wait their
    /// turn behind it (diagnostics and tests).
    public var hasOutstandingRequest: Bool { transaction != nil }
    public var queuedRequestCount: Int { queuedRequests.count - queuedHead }

    /// Removes and returns the pending transaction if `match` accepts it; the next queued
    /// request is sent.
    func takeTransaction(where match: (Transaction) -> Bool) -> Transaction? {
        guard let t = transaction, match(t) else { return nil }
        transaction = nil
        startQueuedRequest()
        return t
    }

    /// Sends a command (Write Command, Signed Write Command); returns once handed to the link.
    public nonisolated(nonsending) func command(_ pdu: ATTPDU) async throws {
        guard pdu.opcode.isCommand else { throw ATTBearerError.invalidArgument("\(pdu.opcode) is not a command") }
        let frame = Self.frame(pdu)
        try await push(frame, checkingSize: frame.count - L2CAPFrame.headerLength)
    }

    /// Sends a frame of ours that needs no answer (a command, a notification) and returns once
    /// the link has taken it: at once when the link has room; else it waits its turn (flow
    /// control) on one continuation, resumed where the frame goes out.
    /// Throws if the bearer is closed, or if `size` (the ATT PDU's, when given) exceeds ATT_MTU.
    nonisolated(nonsending) func push(_ frame: [UInt8], checkingSize size: Int? = nil) async throws {
        if let closedReason { throw closedReason }
        if let size, size > mtu { throw ATTBearerError.pduTooLarge(size: size, mtu: mtu) }
        if try sendIfReady(frame) { return }
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in send(frame, resuming: c) }
    }

    /// `frame` sent now if the bearer is open and the link has room (true), from the host's
    /// isolation: a direct call, no check of the executor (`checkedIsolation`) and no closure.
    func sendIfReady(_ frame: [UInt8], host: isolated Host) throws -> Bool {
        if let closedReason { throw closedReason }
        return try host.sendL2CAPIfReady(frame, on: handle)
    }

    /// `Host.sendL2CAPIfReady` of `frame` on this link: true when it went out now.
    func sendIfReady(_ frame: [UInt8]) throws -> Bool {
        let handle = handle
        return try host.checkedIsolation { try $0.sendL2CAPIfReady(frame, on: handle) }
    }

    /// `Host.sendL2CAP` of `frame`, resuming `done` when it is out.
    func send(_ frame: [UInt8], resuming done: CheckedContinuation<Void, any Error>) {
        let handle = handle
        host.checkedIsolation { $0.sendL2CAP(frame, on: handle, resuming: done) }
    }

    /// Exchange MTU as client: returns the new ATT_MTU, min(our Rx MTU, the server's), where a
    /// server Rx MTU below 23 counts as 23. The request is sent once per connection (Core v5.4
    /// Vol 3 Part F 3.4.2.1): later calls return the ATT_MTU the first one gave.
    @discardableResult
    public nonisolated(nonsending) func exchangeMTU(_ clientRxMTU: UInt16 = 517) async throws -> Int {
        guard clientRxMTU >= 23 else { throw ATTBearerError.invalidArgument("Client Rx MTU \(clientRxMTU) below 23") }
        if exchangedMTU { return mtu }
        // The peer may send PDUs up to the new ATT_MTU as soon as it has answered, before our
        // answer is processed: accept up to our Rx MTU meanwhile.
        inboundMTU = Swift.max(mtu, Int(clientRxMTU))
        let response: ATTPDU
        do {
            response = try await request(.exchangeMTURequest(clientRxMTU: clientRxMTU))
        } catch {
            inboundMTU = mtu
            throw error
        }
        guard case .exchangeMTUResponse(let server) = response else {
            inboundMTU = mtu
            throw ATTBearerError.invalidResponse("\(response.opcode) to Exchange MTU Request")
        }
        // Core v5.4 Vol 3 Part F 3.4.2.2: an Rx MTU below the default leaves ATT_MTU at 23.
        let m = server < 23 ? 23 : Swift.min(Int(clientRxMTU), Int(server))
        if server < 23 { log("Server Rx MTU \(server) below 23: ATT_MTU stays 23") }
        exchangedMTU = true
        setMTU(m)
        return m
    }

    // MARK: - Server push

    /// Sends a Handle Value Notification (value truncated to ATT_MTU − 3, Core Vol 3 Part F 3.4.7.1).
    public nonisolated(nonsending) func notify(handle: UInt16, value: [UInt8]) async throws {
        try await push(notificationFrame(handle: handle, value: value))
    }

    /// A Handle Value Notification's B-frame, the value cut to ATT_MTU − 3.
    func notificationFrame(handle: UInt16, value: [UInt8]) -> [UInt8] {
        Self.frame(.handleValueNotification(handle: handle, value: ATTLink.cut(value, toFit: mtu)))
    }

    /// Sends a Handle Value Indication and waits for the confirmation (transaction timeout);
    /// one indication outstanding at a time, later ones wait their turn.
    public func indicate(handle: UInt16, value: [UInt8], host: isolated Host) async throws {
        try await indicationTurn.take { closedReason }
        defer { indicationTurn.pass() }
        let v = ATTLink.cut(value, toFit: mtu)
        let t = Transaction(opcode: .handleValueIndication)
        setIndication(t, host: host)
        do {
            try await push(Self.frame(.handleValueIndication(handle: handle, value: v)))
        } catch {
            if indication === t { setIndication(nil, host: host) }
            throw error
        }
        _ = try await t.wait()
    }

    // MARK: - Incoming (the one receive path: called by the L2CAP demux, in the host's isolation)

    /// An ATT PDU, read in place in its L2CAP frame.
    public func received(_ pdu: ByteReader, host: isolated Host) {
        guard closedReason == nil else { return }
        switch ATTPDU.decodeResult(from: pdu, mtu: inboundMTU) {
        case .malformed(let op?, let error):
            if let t = takeTransaction(where: { op == .errorResponse || op == $0.opcode.responseOpcode }) {
                t.resolve(.failure(ATTBearerError.invalidResponse("\(op): \(error)")))
            } else if let reply = ATTPDU.serverRejection(for: .malformed(opcode: op, error: error)) {
                log("malformed \(op): \(error): Invalid PDU")
                enqueue(reply, host: host)
            } else {
                log("malformed \(op): \(error): dropped")
            }
        case .malformed(nil, _):
            log("empty ATT PDU: dropped")
        case .pdu(let pdu):
            dispatch(pdu, host: host)
        }
    }

    /// Which side of the bearer handles a PDU the peer sent, by its kind in the table by opcode (Core v5.4
    /// Vol 3 Part F 3.3, Table 3.37 for the opcodes). Lengths were checked once, by the table by opcode
    /// (minimum length) and the codec (`ATTPDU.decodeResult(_:mtu:)`), before this is consulted.
    enum Side { case client, server }
    static func side(of pdu: ATTPDU) -> Side {
        switch pdu.opcode.info?.kind {
        case .response?, .error?, .notification?, .indication?: return .client
        // An unknown opcode goes to the server, which answers a request Request Not Supported.
        case .request?, .command?, .confirmation?, nil: return .server
        }
    }

    func dispatch(_ pdu: ATTPDU, host: isolated Host) {
        switch Self.side(of: pdu) {
        case .client: clientReceived(pdu)
        case .server: serverReceived(pdu, host: host)
        }
    }

    // MARK: Client side: answers to our one outstanding request, and the server's pushes

    func clientReceived(_ pdu: ATTPDU) {
        switch pdu {
        case let .errorResponse(requestOpcode, handle, code):
            guard let t = takeTransaction(where: { $0.opcode == requestOpcode }) else {
                log("Error Response for \(requestOpcode) with no such request pending: dropped")
                return
            }
            t.resolve(.failure(ATTError(code, requestOpcode: requestOpcode, handle: handle)))
        case .handleValueNotification, .multipleHandleValueNotification:
            if notificationBacklog == 0, let direct = notificationFast, direct(pdu) { return }
            queueNotification(pdu)
        case .handleValueIndication:
            queueNotification(pdu)
        default:
            guard let t = takeTransaction(where: { $0.opcode.responseOpcode == pdu.opcode }) else {
                log("\(pdu.opcode) with no matching request pending: dropped")
                return
            }
            t.resolve(.success(pdu))
        }
    }

    // MARK: Server side: the peer's requests and commands, and confirmations of our indications

    func serverReceived(_ pdu: ATTPDU, host: isolated Host) {
        let op = pdu.opcode
        if deferredAnswer != nil, op != .handleValueConfirmation {
            return holdWhileDeferred(pdu)
        }
        switch pdu {
        case .handleValueConfirmation:
            guard let t = indication else {
                log("Handle Value Confirmation with no indication pending: dropped")
                return
            }
            setIndication(nil, host: host)
            t.resolve(.success(pdu))
        case .exchangeMTURequest(let clientRx):
            // Core v5.4 Vol 3 Part F 3.4.2.2: the server answers with its Rx MTU; ATT_MTU is the
            // smaller of the two, except that an Rx MTU below the default ATT_MTU (23) leaves
            // ATT_MTU at 23. The client may use the new ATT_MTU once it has the response, so
            // larger PDUs are accepted from before it is sent.
            var newMTU: Int?
            if answeredMTURequest {
                log("second Exchange MTU Request: answered, ATT_MTU unchanged (\(mtu))")
            } else {
                answeredMTURequest = true
                if clientRx < 23 { log("Exchange MTU Request with Client Rx MTU \(clientRx) below 23: ATT_MTU stays 23") }
                let m = clientRx < 23 ? 23 : Swift.min(Int(clientRx), Int(configuration.serverRxMTU))
                inboundMTU = Swift.max(inboundMTU, m)
                newMTU = m
            }
            enqueue(.exchangeMTUResponse(serverRxMTU: configuration.serverRxMTU), host: host)
            if let newMTU { setMTU(newMTU) }
        case .unknown:
            if let reply = ATTPDU.serverRejection(for: .pdu(pdu)) {
                log("unknown request \(op): Request Not Supported")
                enqueue(reply, host: host)
            } else {
                log("unknown \(op): ignored")
            }
        default:
            serve(pdu, host: host)
        }
    }

    /// A request or command from the peer: answered by the server delegate.
    func serve(_ pdu: ATTPDU, host: isolated Host) {
        let op = pdu.opcode
        guard synchronousDelegate != nil || delegate != nil else {
            if op.isRequest { enqueue(.errorResponse(requestOpcode: op, handle: 0, error: .requestNotSupported), host: host) }
            return
        }
        // A client has one request outstanding at a time (Core v5.4 Vol 3 Part F 3.3.2); one
        // that keeps sending while our answers wait for ACL buffers is not served (neither
        // acted on nor answered) until they drain, so the queue stays bounded.
        if op.isRequest, !host.canEnqueueL2CAP(on: handle) {
            log("\(op) ignored: the client sends requests without waiting for the answers (Core Vol 3 Part F 3.3.2)")
            return
        }
        let (mtu, security) = link.state.withLock { ($0.mtu, $0.security) }
        if let server = synchronousDelegate {
            switch server.answer(to: pdu, from: peer, mtu: mtu, security: security) {
            case .now(let response):
                if op.isRequest { enqueue(response ?? .errorResponse(requestOpcode: op, handle: 0, error: .unlikelyError), host: host) }
            case .later(let produce):
                answerLater(pdu, produce, host: host)
            }
            return
        }
        // An asynchronous delegate is application code: every PDU is answered later, one after
        // the other (the next is held until then), as a synchronous delegate's `.later` answers.
        guard let delegate else { return }
        let peer = self.peer
        answerLater(pdu, { await delegate.respond(to: pdu, from: peer, mtu: mtu, security: security) }, host: host)
    }

    /// Starts producing `request`'s answer off the host's loop (the handler is not isolated to
    /// the host, so its waiting holds up no other link), with its deadline in the host's table.
    func answerLater(_ request: ATTPDU, _ produce: @escaping @Sendable () async -> ATTPDU?, host: isolated Host) {
        deferredTokens &+= 1
        let token = deferredTokens
        let task = host.spawn {
            let response = await produce()
            self.deferredAnswered(token, response, host: host)
        }
        let timeout = configuration.asyncHandlerTimeout
        let deadline = host.arm(after: timeout) {
            self.log("\(request.opcode): the application's handler gave no answer within \(timeout): Unlikely Error")
            self.deferredAnswered(token, nil, host: host)
        }
        deferredAnswer = DeferredAnswer(token: token, request: request, task: task, deadline: deadline)
    }

    /// The answer produced `.later` (nil: none, or its deadline passed: Unlikely Error for a
    /// request); a late one, after the deadline answered, is dropped. Then the PDUs held
    /// meanwhile are served, in order, until one is answered `.later` again.
    func deferredAnswered(_ token: UInt64, _ response: ATTPDU?, host: isolated Host) {
        guard let d = deferredAnswer, d.token == token else { return }
        deferredAnswer = nil
        host.disarm(d.deadline)
        d.task.cancel()  // a handler past its deadline is told; one that answered has ended
        let op = d.request.opcode
        if closedReason == nil, op.isRequest {
            enqueue(response ?? .errorResponse(requestOpcode: op, handle: Self.attributeHandle(of: d.request), error: .unlikelyError), host: host)
        }
        while deferredAnswer == nil, closedReason == nil, heldHead < heldWhileDeferred.count {
            let next = heldWhileDeferred[heldHead]
            heldHead += 1
            serverReceived(next, host: host)
        }
        if heldHead == heldWhileDeferred.count {
            heldWhileDeferred.removeAll()
            heldHead = 0
        }
    }

    /// The attribute a request is about, for its Error Response's Attribute Handle In Error
    /// (Core v5.4 Vol 3 Part F 3.4.1.1); 0 when it names none.
    static func attributeHandle(of request: ATTPDU) -> UInt16 {
        switch request {
        case .readRequest(let h), .readBlobRequest(let h, _), .writeRequest(let h, _), .prepareWriteRequest(let h, _, _): h
        case .readMultipleRequest(let hs), .readMultipleVariableRequest(let hs): hs.first ?? 0
        case .readByTypeRequest(let start, _, _): start
        default: 0
        }
    }

    /// A PDU of the peer's that came while an answer is produced `.later`: served after it.
    func holdWhileDeferred(_ pdu: ATTPDU) {
        guard heldWhileDeferred.count - heldHead < Self.queueLimit else {
            return log("\(pdu.opcode) dropped: \(Self.queueLimit) PDUs already wait for an application handler's answer")
        }
        heldWhileDeferred.append(pdu)
    }

    /// Puts a notification/indication into the ordered stream for the notification handler.
    func queueNotification(_ pdu: ATTPDU) {
        notificationBacklog += 1
        if case .dropped = notificationsContinuation.yield(pdu) {
            notificationBacklog -= 1
            link.state.withLock { $0.droppedNotifications += 1 }
            log("\(Self.queueLimit) notifications unhandled: \(pdu.opcode) dropped")
        }
    }

    func notificationLoop(host: isolated Host) async {
        for await pdu in notifications {
            if let h = notificationHandler { await h(pdu) }
            if case .handleValueIndication = pdu, closedReason == nil {
                do { try await push(Self.frame(.handleValueConfirmation)) } catch {
                    log("could not confirm an indication: \(error)")
                }
            }
            notificationBacklog = Swift.max(0, notificationBacklog - 1)
        }
        // The stream ended: the bearer is closed and calls no handler again. Dropping them frees
        // what they hold: the stack's handler holds the link's GATT client, which holds this
        // bearer as its requester, so keeping it would keep every closed link's layers.
        notificationHandler = nil
        notificationFast = nil
    }

    /// The link is gone (L2CAP).
    public func closed(_ error: L2CAPError, host: isolated Host) {
        close(.closed("the link is disconnected"), host: host)
        if let d = delegate {
            let peer = self.peer
            Task { await d.peerDisconnected(peer) }
        }
    }

    // MARK: - Timeout and closing

    /// Makes `t` the outstanding indication, with its transaction timeout in the host's
    /// deadline table (the previous one disarmed).
    func setIndication(_ t: Transaction?, host: isolated Host) {
        indication = t
        host.disarm(indicationDeadline)
        indicationDeadline = t.map { t in
            host.arm(after: configuration.transactionTimeout) { self.timedOut(t, host: host) }
        }
    }

    /// The requests' deadline, armed while the bearer is open: a request costs a clock reading
    /// (`transactionStart`), not an entry added to and removed from the table.
    func armTransactionDeadline(after d: Duration, host: isolated Host) {
        transactionDeadline = host.arm(after: d) { self.transactionDeadlineFired(host: host) }
    }

    /// The outstanding transaction times out if it was sent a transaction timeout ago; the
    /// deadline is armed again for when the outstanding one will be, or a timeout from now.
    func transactionDeadlineFired(host: isolated Host) {
        transactionDeadline = nil
        guard closedReason == nil else { return }
        let timeout = configuration.transactionTimeout
        guard let t = transaction, let start = transactionStart else { return armTransactionDeadline(after: timeout, host: host) }
        let elapsed = start.duration(to: host.configuration.clock.now)
        if elapsed >= timeout { timedOut(t, host: host) } else { armTransactionDeadline(after: timeout - elapsed, host: host) }
    }

    /// No answer to `t` within the transaction timeout: the bearer closes (Core Vol 3 Part F 3.3.3).
    func timedOut(_ t: Transaction, host: isolated Host) {
        if t === transaction {
            close(.transactionTimeout("no response to \(t.opcode) within \(configuration.transactionTimeout)"), host: host)
        } else if t === indication {
            close(.transactionTimeout("no Handle Value Confirmation within \(configuration.transactionTimeout)"), host: host)
        }
    }

    /// Closes the bearer: no ATT PDU is sent or processed afterwards; everything waiting fails
    /// with `reason`.
    public func close(_ reason: ATTBearerError, host: isolated Host) {
        guard closedReason == nil else { return }
        closedReason = reason
        log("closed: \(reason)")
        host.disarm(transactionDeadline)
        transactionDeadline = nil
        // The outstanding request, then the queued ones (takeTransaction fails them, closed).
        if let t = takeTransaction(where: { _ in true }) { t.resolve(.failure(reason)) }
        startQueuedRequest()
        if let i = indication { setIndication(nil, host: host); i.resolve(.failure(reason)) }
        if let d = deferredAnswer {
            deferredAnswer = nil
            host.disarm(d.deadline)
            d.task.cancel()
        }
        heldWhileDeferred.removeAll()
        heldHead = 0
        indicationTurn.fail(reason)
        notificationsContinuation.finish()
        // Nothing arrives on a closed link: the fast receiver is done; the notification handler
        // is dropped when its loop has handed over what was queued (or now, without a loop).
        notificationFast = nil
        if !started { notificationHandler = nil }
    }
}
