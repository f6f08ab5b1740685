// The ATT bearer (Core Vol 3 Part F 3.2–3.4): ATT over the fixed channel 0x0004 of one LE link.
import HCI
import Host
import L2CAP
import Synchronization

/// An `ATTServerDelegate` that can answer synchronously (`GATTServer` does): the bearer then
/// answers requests on the host's executor as frames arrive, with no task hop.
public protocol ATTSynchronousServerDelegate: ATTServerDelegate {
    func response(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) -> ATTPDU?
}

/// Tunables of an `ATTBearer`.
public struct ATTBearerConfiguration: Sendable {
    /// The transaction timeout (Core Vol 3 Part F 3.3.3): 30 s; shorter in tests.
    public var transactionTimeout: Duration = .seconds(30)
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

/// ATT over CID 0x0004 of one `L2CAPConnection`: the client side (`ATTRequester`: one
/// outstanding request, transaction timeout, MTU exchange), the server side (requests handed
/// to an `ATTServerDelegate` one at a time; malformed/unknown PDUs refused per spec) and
/// server pushes (`ATTServerPush`: notifications, indications with one outstanding).
///
/// Create it and `start()` it before `l2cap.start()`, so no PDU is missed.
public actor ATTBearer: ATTRequester, ATTServerPush {
    public nonisolated let l2cap: L2CAPConnection
    public nonisolated let peer: ATTPeer
    public nonisolated let configuration: ATTBearerConfiguration

    /// The current ATT_MTU (23 until an Exchange MTU completes).
    public nonisolated var mtu: Int { fast.state.withLock { $0.mtu } }
    /// Why the bearer is closed (nil while open).
    public private(set) var closedReason: ATTBearerError?

    var started = false
    var answeredMTURequest = false
    var delegate: (any ATTServerDelegate)?
    var notificationHandler: (@Sendable (ATTPDU) async -> Void)?

    /// A request (or indication) waiting for its answer; resolved once, from any context.
    final class Transaction: Sendable {
        let opcode: ATTOpcode
        let deadline: ContinuousClock.Instant
        private let state = Mutex<(CheckedContinuation<ATTPDU, any Error>?, Result<ATTPDU, any Error>?)>((nil, nil))
        init(opcode: ATTOpcode, deadline: ContinuousClock.Instant) { self.opcode = opcode; self.deadline = deadline }
        func resolve(_ r: Result<ATTPDU, any Error>) {
            let c: CheckedContinuation<ATTPDU, any Error>? = state.withLock { s in
                if let c = s.0 { s.0 = nil; return c }
                if s.1 == nil { s.1 = r }
                return nil
            }
            c?.resume(with: r)
        }
        func wait() async throws -> ATTPDU {
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<ATTPDU, any Error>) in
                let r: Result<ATTPDU, any Error>? = state.withLock { s in
                    if let r = s.1 { return r }
                    s.0 = c
                    return nil
                }
                if let r { c.resume(with: r) }
            }
        }
    }
    /// The pending client request (in `fast`, so the host-executor path can answer it).
    var transaction: Transaction? {
        get { fast.state.withLock { $0.transaction } }
        set { fast.state.withLock { $0.transaction = newValue } }
    }
    nonisolated let fast: FastPath

    // Server indication.
    var indication: Transaction?
    var indicationBusy = false
    var indicationWaiters: [CheckedContinuation<Void, any Error>] = []

    /// PDUs held for the actor or the notification handler before new ones are dropped (and
    /// logged): a client has one request outstanding (Core Vol 3 Part F 3.3.2), so only a
    /// flooding or stalled peer reaches this, and it costs it PDUs, not our memory.
    static let queueLimit = 1024

    nonisolated let inbound: AsyncStream<[UInt8]>
    nonisolated let inboundContinuation: AsyncStream<[UInt8]>.Continuation
    nonisolated let notifications: AsyncStream<ATTPDU>
    nonisolated let notificationsContinuation: AsyncStream<ATTPDU>.Continuation
    var tasks: [Task<Void, Never>] = []

    public init(l2cap: L2CAPConnection, configuration: ATTBearerConfiguration = .init()) {
        self.l2cap = l2cap
        self.configuration = configuration
        self.peer = ATTPeer(id: l2cap.connection.handle, address: "\(l2cap.connection.peer.address)")
        (inbound, inboundContinuation) = AsyncStream.makeStream(of: [UInt8].self, bufferingPolicy: .bufferingOldest(Self.queueLimit))
        (notifications, notificationsContinuation) = AsyncStream.makeStream(of: ATTPDU.self,
                                                                            bufferingPolicy: .bufferingOldest(Self.queueLimit))
        fast = FastPath(handle: l2cap.connection.handle, peer: peer, log: configuration.log,
                        inbound: inboundContinuation, notifications: notificationsContinuation)
    }

    /// Registers on CID 0x0004 and starts processing. Idempotent.
    public func start() async {
        guard !started else { return }
        started = true
        let input = inboundContinuation
        let fast = self.fast
        await l2cap.setFixedChannelHandler(.att, FixedChannelHandler(
            receivedOnHost: { host, bytes in fast.received(bytes, host: host) },
            closed: { _ in input.finish() }))
        tasks.append(Task { await self.inboundLoop() })
        tasks.append(Task { await self.notificationLoop() })
        tasks.append(Task { await self.watchdog() })
    }

    /// The GATT server that answers the peer's requests; told `peerConnected` at once.
    public func setServerDelegate(_ d: (any ATTServerDelegate)?) async {
        delegate = d
        fast.state.withLock { $0.syncDelegate = d as? any ATTSynchronousServerDelegate }
        if let d { await d.peerConnected(peer, push: self) }
    }

    /// Receives every Handle Value Notification / Indication / Multiple Handle Value
    /// Notification, in order; an indication is confirmed after the handler returns.
    public func setNotificationHandler(_ h: (@Sendable (ATTPDU) async -> Void)?) {
        notificationHandler = h
    }

    /// An optional synchronous receiver of Handle Value Notifications and Multiple Handle Value
    /// Notifications, called on the host's executor as they arrive, in order, while nothing is
    /// waiting in the notification handler's queue (so the order across both stays the arrival
    /// order). It returns false to have the PDU go to the notification handler instead.
    /// Indications always go to the notification handler (confirmed after it returns).
    public func setNotificationFastHandler(_ h: (@Sendable (ATTPDU) -> Bool)?) {
        fast.state.withLock { $0.notificationFast = h }
    }

    /// Handle Value Notifications (and Indications) dropped unprocessed because
    /// `queueLimit` were already waiting for the notification handler.
    public nonisolated var droppedNotifications: Int { fast.state.withLock { $0.droppedNotifications } }

    /// The security level handed to the server delegate with each request (SMP sets it).
    /// Synchronous, so it can take effect before the next PDU of the link is handled.
    public nonisolated func setSecurity(_ s: ATTSecurity) { fast.state.withLock { $0.security = s } }
    /// The link's current security (`ATTServerPush`).
    public nonisolated var security: ATTSecurity { fast.state.withLock { $0.security } }

    func setMTU(_ m: Int) { fast.state.withLock { $0.mtu = m; $0.inboundMTU = m } }

    func log(_ message: @autoclosure () -> String) {
        configuration.log?("ATT \(hexCode(peer.id, digits: 4)): \(message())")
    }

    func send(_ pdu: ATTPDU) async throws {
        try await l2cap.send(pdu.bytes, on: .att)
    }

    // MARK: - Client

    /// Sends `pdu` (a request) and returns its response; an Error Response throws `ATTError`.
    ///
    /// Nonisolated: the single outstanding-request slot is claimed under the fast path's Mutex
    /// (later requests wait their turn, first come first served), and the request is sent and
    /// its answer awaited on the host's executor, where the fast path resolves it: one hop out.
    public nonisolated func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        guard pdu.opcode.isRequest else { throw ATTBearerError.invalidArgument("\(pdu.opcode) is not a request") }
        let bytes = pdu.bytes
        try await fast.claimClientSlot(size: bytes.count)
        defer { fast.releaseClientSlot() }
        let t = Transaction(opcode: pdu.opcode, deadline: .now + configuration.transactionTimeout)
        try fast.begin(t)
        return try await Self.sendRequest(L2CAPFrame(cid: .att, payload: bytes).bytes, on: l2cap.connection.handle,
                                          awaiting: t, fast: fast, host: l2cap.host)
    }

    /// Sends a request frame and waits for its transaction, on the host's executor (where the
    /// answer is resolved), so neither step hops.
    private static func sendRequest(_ frame: [UInt8], on handle: UInt16, awaiting t: Transaction, fast: FastPath,
                             host: isolated Host) async throws -> ATTPDU {
        do {
            try await host.sendL2CAP(frame, on: handle)
        } catch {
            _ = fast.takeTransaction(where: { $0 === t })
            throw error
        }
        return try await t.wait()
    }

    /// Sends a command (Write Command, Signed Write Command); returns once handed to the link.
    public func command(_ pdu: ATTPDU) async throws {
        guard pdu.opcode.isCommand else { throw ATTBearerError.invalidArgument("\(pdu.opcode) is not a command") }
        if let closedReason { throw closedReason }
        let bytes = pdu.bytes
        guard bytes.count <= mtu else { throw ATTBearerError.pduTooLarge(size: bytes.count, mtu: mtu) }
        try await l2cap.send(bytes, on: .att)
    }

    /// Exchange MTU as client: returns the new ATT_MTU, min(our Rx MTU, the server's), where a
    /// server Rx MTU below 23 counts as 23.
    @discardableResult
    public func exchangeMTU(_ clientRxMTU: UInt16 = 517) async throws -> Int {
        guard clientRxMTU >= 23 else { throw ATTBearerError.invalidArgument("Client Rx MTU \(clientRxMTU) below 23") }
        // The peer may send PDUs up to the new ATT_MTU as soon as it has answered, before our
        // answer is processed: accept up to our Rx MTU meanwhile.
        fast.state.withLock { $0.inboundMTU = Swift.max($0.mtu, Int(clientRxMTU)) }
        let response: ATTPDU
        do {
            response = try await request(.exchangeMTURequest(clientRxMTU: clientRxMTU))
        } catch {
            fast.state.withLock { $0.inboundMTU = $0.mtu }
            throw error
        }
        guard case .exchangeMTUResponse(let server) = response else {
            fast.state.withLock { $0.inboundMTU = $0.mtu }
            throw ATTBearerError.invalidResponse("\(response.opcode) to Exchange MTU Request")
        }
        // Core v5.4 Vol 3 Part F 3.4.2.2: an Rx MTU below the default leaves ATT_MTU at 23.
        let m = server < 23 ? 23 : Swift.min(Int(clientRxMTU), Int(server))
        if server < 23 { log("Server Rx MTU \(server) below 23: ATT_MTU stays 23") }
        setMTU(m)
        return m
    }

    // MARK: - Server push

    /// Sends a Handle Value Notification (value truncated to ATT_MTU − 3, Core Vol 3 Part F 3.4.7.1).
    /// Nonisolated (state read under the fast path's Mutex): one hop, to the host.
    public nonisolated func notify(handle: UInt16, value: [UInt8]) async throws {
        let (closedReason, mtu) = fast.state.withLock { ($0.closedReason, $0.mtu) }
        if let closedReason { throw closedReason }
        let v = value.count > mtu - 3 ? Array(value.prefix(mtu - 3)) : value
        try await l2cap.send(ATTPDU.handleValueNotification(handle: handle, value: v).bytes, on: .att)
    }

    /// Sends a Handle Value Indication and waits for the confirmation (transaction timeout);
    /// one indication outstanding at a time, later ones wait their turn.
    public func indicate(handle: UInt16, value: [UInt8]) async throws {
        if let closedReason { throw closedReason }
        while indicationBusy {
            try await withCheckedThrowingContinuation { indicationWaiters.append($0) }
            if let closedReason { throw closedReason }
        }
        indicationBusy = true
        defer {
            indicationBusy = false
            if !indicationWaiters.isEmpty { indicationWaiters.removeFirst().resume() }
        }
        let v = value.count > mtu - 3 ? Array(value.prefix(mtu - 3)) : value
        let t = Transaction(opcode: .handleValueIndication, deadline: .now + configuration.transactionTimeout)
        indication = t
        fast.wakeWatchdog()
        do {
            try await l2cap.send(ATTPDU.handleValueIndication(handle: handle, value: v).bytes, on: .att)
        } catch {
            if indication === t { indication = nil }
            throw error
        }
        _ = try await t.wait()
    }

    // MARK: - Incoming

    func inboundLoop() async {
        for await bytes in inbound {
            await received(bytes)
        }
        close(.closed("the link is disconnected"))
        if let d = delegate { await d.peerDisconnected(peer) }
    }

    func received(_ bytes: [UInt8]) async {
        guard closedReason == nil else { return }
        switch ATTPDU.decodeResult(bytes, mtu: fast.state.withLock { $0.inboundMTU }) {
        case .malformed(let op?, let error):
            if let t = fast.takeTransaction(where: { op == .errorResponse || op == $0.opcode.responseOpcode }) {
                t.resolve(.failure(ATTBearerError.invalidResponse("\(op): \(error)")))
            } else if let reply = ATTPDU.serverRejection(for: .malformed(opcode: op, error: error)) {
                log("malformed \(op): \(error): Invalid PDU")
                try? await send(reply)
            } else {
                log("malformed \(op): \(error): dropped")
            }
        case .malformed(nil, _):
            log("empty ATT PDU: dropped")
        case .pdu(let pdu):
            await dispatch(pdu)
        }
    }

    func dispatch(_ pdu: ATTPDU) async {
        let op = pdu.opcode
        switch pdu {
        case let .errorResponse(requestOpcode, handle, code):
            guard let t = fast.takeTransaction(where: { $0.opcode == requestOpcode }) else {
                log("Error Response for \(requestOpcode) with no such request pending: dropped")
                return
            }
            t.resolve(.failure(ATTError(code, requestOpcode: requestOpcode, handle: handle)))
        case .handleValueConfirmation:
            guard let t = indication else {
                log("Handle Value Confirmation with no indication pending: dropped")
                return
            }
            indication = nil
            t.resolve(.success(pdu))
        case .handleValueNotification, .handleValueIndication, .multipleHandleValueNotification:
            fast.queueNotification(pdu)
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
                fast.state.withLock { $0.inboundMTU = Swift.max($0.inboundMTU, m) }
                newMTU = m
            }
            try? await send(.exchangeMTUResponse(serverRxMTU: configuration.serverRxMTU))
            if let newMTU { setMTU(newMTU) }
        case .unknown:
            if let reply = ATTPDU.serverRejection(for: .pdu(pdu)) {
                log("unknown request \(op): Request Not Supported")
                try? await send(reply)
            } else {
                log("unknown \(op): ignored")
            }
        default:
            if op.isResponse {
                guard let t = fast.takeTransaction(where: { $0.opcode.responseOpcode == op }) else {
                    log("\(op) with no matching request pending: dropped")
                    return
                }
                t.resolve(.success(pdu))
            } else if op.isRequest || op.isCommand {
                guard let delegate else {
                    if op.isRequest {
                        try? await send(.errorResponse(requestOpcode: op, handle: 0, error: .requestNotSupported))
                    }
                    return
                }
                let response = await delegate.respond(to: pdu, from: peer, mtu: mtu, security: security)
                if op.isRequest {
                    let reply = response ?? .errorResponse(requestOpcode: op, handle: 0, error: .unlikelyError)
                    try? await send(reply)
                }
            } else {
                log("\(op) not expected from the peer: dropped")
            }
        }
    }

    func notificationLoop() async {
        for await pdu in notifications {
            if let h = notificationHandler { await h(pdu) }
            if case .handleValueIndication = pdu, closedReason == nil {
                do { try await send(.handleValueConfirmation) } catch {
                    log("could not confirm an indication: \(error)")
                }
            }
            fast.state.withLock { $0.notificationBacklog = Swift.max(0, $0.notificationBacklog - 1) }
        }
    }

    // MARK: - Timeout and closing

    func watchdog() async {
        while closedReason == nil, !Task.isCancelled {
            let now = ContinuousClock.now
            var next: ContinuousClock.Instant?
            if let t = transaction {
                if t.deadline <= now {
                    let seconds = configuration.transactionTimeout
                    close(.transactionTimeout("no response to \(t.opcode) within \(seconds)"))
                    return
                }
                next = t.deadline
            }
            if let i = indication {
                if i.deadline <= now {
                    close(.transactionTimeout("no Handle Value Confirmation within \(configuration.transactionTimeout)"))
                    return
                }
                next = next.map { Swift.min($0, i.deadline) } ?? i.deadline
            }
            if let next {
                try? await Task.sleep(until: next, clock: .continuous)
            } else {
                // Parks until a request or indication starts (or the bearer closes); a request
                // that started meanwhile (it needs no actor) is seen under the lock.
                let fast = self.fast
                await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                    let park = fast.state.withLock { s in
                        guard s.transaction == nil, s.closedReason == nil, !s.watchdogPoked else {
                            s.watchdogPoked = false
                            return false
                        }
                        s.watchdogWake = c
                        return true
                    }
                    if !park { c.resume() }
                }
            }
        }
    }

    /// Closes the bearer: no ATT PDU is sent or processed afterwards; everything waiting fails
    /// with `reason`.
    public func close(_ reason: ATTBearerError) {
        guard closedReason == nil else { return }
        closedReason = reason
        let clientWaiters = fast.state.withLock { s in
            s.closed = true
            s.closedReason = reason
            defer { s.clientWaiters.removeAll() }
            return s.clientWaiters
        }
        log("closed: \(reason)")
        if let t = fast.takeTransaction(where: { _ in true }) { t.resolve(.failure(reason)) }
        if let i = indication { indication = nil; i.resolve(.failure(reason)) }
        for w in clientWaiters { w.resume(throwing: reason) }
        for w in indicationWaiters { w.resume(throwing: reason) }
        indicationWaiters.removeAll()
        notificationsContinuation.finish()
        fast.wakeWatchdog()
    }
}

extension ATTBearer {
    /// The part of the bearer that runs on the host's executor as ATT frames arrive (the L2CAP
    /// `FrameRoute` sink): answers to our pending request resolve it at once; requests go to a
    /// synchronous server delegate and are answered with `Host.enqueueL2CAP`; notifications and
    /// indications go into the (ordered) notification stream. Anything else (Exchange MTU,
    /// confirmations, malformed or unexpected PDUs, an asynchronous delegate) goes to the
    /// actor's inbound loop as before. Frames arrive here one at a time, in order.
    ///
    /// Thread safety: shared state is in the `state` Mutex; the actor writes MTU, security,
    /// the pending transaction, the delegate and the closed flag through it.
    final class FastPath: Sendable {
        struct State {
            var mtu = 23
            /// The largest PDU accepted from the peer: ATT_MTU, or the MTU being negotiated.
            var inboundMTU = 23
            var security = ATTSecurity.none
            var closed = false
            var closedReason: ATTBearerError?
            var transaction: Transaction?
            var syncDelegate: (any ATTSynchronousServerDelegate)?
            /// The client's single outstanding-request slot and the requests waiting for it.
            var clientBusy = false
            var clientWaiters: [CheckedContinuation<Void, any Error>] = []
            /// The watchdog, parked while no transaction runs; `watchdogPoked` records a wake
            /// that came while it was not parked.
            var watchdogWake: CheckedContinuation<Void, Never>?
            var watchdogPoked = false
            /// Synchronous notification receiver and the count of PDUs queued in the
            /// notification stream (the fast receiver is used only while it is 0).
            var notificationFast: (@Sendable (ATTPDU) -> Bool)?
            var notificationBacklog = 0
            /// Notifications/indications dropped because `queueLimit` were waiting.
            var droppedNotifications = 0
        }
        let state = Mutex(State())
        let handle: UInt16
        let peer: ATTPeer
        let log: (@Sendable (String) -> Void)?
        let inbound: AsyncStream<[UInt8]>.Continuation
        let notifications: AsyncStream<ATTPDU>.Continuation

        init(handle: UInt16, peer: ATTPeer, log: (@Sendable (String) -> Void)?,
             inbound: AsyncStream<[UInt8]>.Continuation, notifications: AsyncStream<ATTPDU>.Continuation) {
            self.handle = handle
            self.peer = peer
            self.log = log
            self.inbound = inbound
            self.notifications = notifications
        }

        /// Waits for the client's outstanding-request slot (FIFO); throws if the bearer is or
        /// gets closed, or if `size` exceeds ATT_MTU.
        func claimClientSlot(size: Int) async throws {
            enum Claim { case claimed, busy, failed(ATTBearerError) }
            let first: Claim = state.withLock { s in
                if let r = s.closedReason { return .failed(r) }
                if size > s.mtu { return .failed(.pduTooLarge(size: size, mtu: s.mtu)) }
                if s.clientBusy { return .busy }
                s.clientBusy = true
                return .claimed
            }
            switch first {
            case .claimed: return
            case .failed(let e): throw e
            case .busy: break
            }
            try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
                let now: Claim = state.withLock { s in
                    if let r = s.closedReason { return .failed(r) }
                    if !s.clientBusy { s.clientBusy = true; return .claimed }
                    s.clientWaiters.append(c)
                    return .busy
                }
                switch now {
                case .claimed: c.resume()
                case .failed(let e): c.resume(throwing: e)
                case .busy: break
                }
            }
        }

        /// Hands the slot to the next waiting request, or frees it.
        func releaseClientSlot() {
            let next: CheckedContinuation<Void, any Error>? = state.withLock { s in
                if s.clientWaiters.isEmpty { s.clientBusy = false; return nil }
                return s.clientWaiters.removeFirst()
            }
            next?.resume()
        }

        /// Makes `t` the pending transaction (the slot is ours) and wakes the watchdog.
        func begin(_ t: Transaction) throws {
            let (closed, wake): (ATTBearerError?, CheckedContinuation<Void, Never>?) = state.withLock { s in
                if let r = s.closedReason { return (r, nil) }
                s.transaction = t
                let w = s.watchdogWake
                s.watchdogWake = nil
                return (nil, w)
            }
            if let closed { throw closed }
            wake?.resume()
        }

        func wakeWatchdog() {
            let w: CheckedContinuation<Void, Never>? = state.withLock { s in
                guard let w = s.watchdogWake else { s.watchdogPoked = true; return nil }
                s.watchdogWake = nil
                return w
            }
            w?.resume()
        }

        /// Puts a notification/indication into the ordered stream for the actor's handler.
        func queueNotification(_ pdu: ATTPDU) {
            state.withLock { $0.notificationBacklog += 1 }
            if case .dropped = notifications.yield(pdu) {
                state.withLock { $0.notificationBacklog -= 1; $0.droppedNotifications += 1 }
                log?("ATT \(hexCode(peer.id, digits: 4)): \(ATTBearer.queueLimit) notifications unhandled: \(pdu.opcode) dropped")
            }
        }

        /// Hands a PDU the fast path does not handle to the actor's inbound loop.
        func forwardToActor(_ bytes: [UInt8]) {
            if case .dropped = inbound.yield(bytes) {
                log?("ATT \(hexCode(peer.id, digits: 4)): \(ATTBearer.queueLimit) PDUs unprocessed: PDU dropped")
            }
        }

        /// Removes and returns the pending transaction if `match` accepts it.
        func takeTransaction(where match: (Transaction) -> Bool) -> Transaction? {
            state.withLock { s in
                guard let t = s.transaction, match(t) else { return nil }
                s.transaction = nil
                return t
            }
        }

        func received(_ bytes: [UInt8], host: isolated Host) {
            guard case .pdu(let pdu) = ATTPDU.decodeResult(bytes, mtu: state.withLock { $0.inboundMTU }) else {
                forwardToActor(bytes)
                return
            }
            let op = pdu.opcode
            switch pdu {
            case let .errorResponse(requestOpcode, handle, code):
                guard let t = takeTransaction(where: { $0.opcode == requestOpcode }) else { break }
                t.resolve(.failure(ATTError(code, requestOpcode: requestOpcode, handle: handle)))
                return
            case .handleValueNotification, .multipleHandleValueNotification:
                let (closed, direct) = state.withLock { s in
                    (s.closed, s.notificationBacklog == 0 ? s.notificationFast : nil)
                }
                if closed { return }
                if let direct, direct(pdu) { return }
                queueNotification(pdu)
                return
            case .handleValueIndication:
                if state.withLock({ $0.closed }) { return }
                queueNotification(pdu)
                return
            case .exchangeMTURequest, .handleValueConfirmation, .unknown:
                break
            default:
                if op.isResponse {
                    guard let t = takeTransaction(where: { $0.opcode.responseOpcode == op }) else { break }
                    t.resolve(.success(pdu))
                    return
                }
                guard op.isRequest || op.isCommand else { break }
                let (closed, delegate, mtu, security) = state.withLock { ($0.closed, $0.syncDelegate, $0.mtu, $0.security) }
                if closed { return }
                guard let delegate else { break }
                // A client has one request outstanding at a time (Core v5.4 Vol 3 Part F 3.3.2);
                // one that keeps sending while our answers wait for ACL buffers is not served
                // (neither acted on nor answered) until they drain, so the queue stays bounded.
                if op.isRequest, !host.canEnqueueL2CAP(on: handle) {
                    log?("ATT \(hexCode(peer.id, digits: 4)): \(op) ignored: the client sends requests without waiting for the answers (Core Vol 3 Part F 3.3.2)")
                    return
                }
                let response = delegate.response(to: pdu, from: peer, mtu: mtu, security: security)
                guard op.isRequest else { return }
                let reply = response ?? .errorResponse(requestOpcode: op, handle: 0, error: .unlikelyError)
                do {
                    try host.enqueueL2CAP(L2CAPFrame(cid: .att, payload: reply.bytes).bytes, on: handle)
                } catch {
                    log?("ATT \(hexCode(peer.id, digits: 4)): could not send \(reply.opcode): \(error)")
                }
                return
            }
            forwardToActor(bytes)
        }
    }
}
