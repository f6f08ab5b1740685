// The Host layer: controller bring-up, command and ACL flow control, connections, GAP.
import HCI
import Transport

/// The host side of one controller.
///
/// ```swift
/// let host = Host(transport: try TCPTransport.connect(host: "127.0.0.1", port: 9000, timeout: .seconds(2)))
/// let info = try await host.start()                 // Reset + bring-up, returns ControllerInfo
/// Task { for await event in host.events { ... } }   // one consumer: the layer above
/// try await host.startAdvertising(.init(data: ad))  // GAP (see Host+GAP.swift)
/// let link = try await host.connect(to: peer)       // LEConnection; link.frames = L2CAP frames in
/// try await host.sendL2CAP(frame, on: link.handle)  // fragmented + flow controlled out
/// ```
///
/// - Commands: `execute(_:timeout:)` sends any typed `HCICommand`, honouring
///   Num_HCI_Command_Packets; Command Complete commands return their typed return parameters,
///   Command Status commands return once accepted (their result arrives as a `HostEvent`).
///   A non-zero status throws `HCIError` (with the status name), silence throws
///   `HostError.commandTimeout`.
/// - ACL: `sendL2CAP` fragments to the controller's LE ACL data length and never has more
///   packets in flight than the controller has buffers, serving links round-robin. Incoming
///   fragments are reassembled per link with limits (`HostConfiguration.maxL2CAPFrame`).
/// - Failure: on disconnection everything pending on that link fails with
///   `HostError.disconnected(handle:reason:)`; on transport loss or Hardware Error everything
///   pending fails, `.transportLost` / `.hardwareError` is emitted, `events` finishes, and the
///   caller creates a new Host.
public actor Host {
    public let transport: any HCITransport
    public nonisolated let configuration: HostConfiguration

    /// Host events, in controller order. One consumer.
    public nonisolated let events: AsyncStream<HostEvent>
    let eventsContinuation: AsyncStream<HostEvent>.Continuation

    /// Bring-up results (nil before `start()` completes).
    public internal(set) var controller: ControllerInfo?

    // MARK: command flow state
    enum CommandResult: Sendable {
        case complete(CommandComplete)
        case status(CommandStatus)
    }

    struct PendingCommand {
        let id: UInt64
        let packet: HCICommandPacket
        let statusOnly: Bool
        let continuation: CheckedContinuation<CommandResult, any Error>
    }

    var commandCredits = 1
    var commandQueue: [PendingCommand] = []
    var outstandingCommands: [PendingCommand] = []
    var commandTimeouts: [UInt64: DeadlineID] = [:]
    /// Every deadline of the host and the layers on its executor (Deadlines.swift).
    var deadlines = DeadlineTable()
    var nextID: UInt64 = 1

    // MARK: ACL state
    var aclCredits = 1
    var aclBufferCount = 1
    var aclDataLength = 27
    var links = LinkTable()
    /// Links with queued frames, in service order (round-robin).
    var readyLinks: [UInt16] = []
    var readyHead = 0
    /// Fails frames that wait too long for ACL buffers (`HostConfiguration.aclCreditTimeout`):
    /// a deadline in the host's table.
    var creditWatchdog: DeadlineID?
    /// Set when buffers came back since the watchdog last looked.
    var creditProgress = false

    // MARK: procedure waiters (completed by events)
    struct Waiter {
        let id: UInt64
        let kind: WaiterKind
        let handle: UInt16?
        var continuation: CheckedContinuation<WaiterResult, any Error>?
    }

    enum WaiterKind: Equatable {
        case connection
        case connectionUpdate
        case phyUpdate
        case disconnection
        case encryption
        case periodicSync
    }

    enum WaiterResult: Sendable {
        case connection(LEConnection)
        case connectionFailed(HCIStatus)
        case connectionUpdate(ConnectionParameters)
        case phy(tx: UInt8, rx: UInt8)
        case disconnected(HCIStatus)
        case encryption(HCIStatus)
        case periodicSync(PeriodicSync)
        case periodicSyncFailed(HCIStatus)
    }

    var waiters: [Waiter] = []
    /// Results that arrived before their waiter started awaiting.
    var waiterResults: [UInt64: Result<WaiterResult, any Error>] = [:]
    var waiterTimeouts: [UInt64: DeadlineID] = [:]

    // MARK: GAP state
    var randomAddress: BDAddress?
    /// The random address advertising uses (static or resolvable private); nil: the public one.
    var advertisingRandomAddress: BDAddress?
    /// The resolving list entry whose local IRK the controller advertises from (Own_Address_Type 0x03).
    var advertisingResolvingListPeer: DeviceAddress?
    /// The address last written with LE Set Random Address (rewriting it while scanning or
    /// advertising is Command Disallowed, Core Vol 4 Part E 7.8.4, so an unchanged one is not resent).
    var controllerRandomAddress: BDAddress?
    var advertising = false
    var advertisingExtended = false
    var scanning = false
    var scanningExtended = false
    /// Extended advertising report data still arriving in fragments.
    var reportFragments = AdvertisingReportReassembler()
    /// Whether set 0 has its periodic train enabled (PeriodicAdvertising.swift).
    var periodicAdvertising = false
    /// The periodic syncs established and not ended, and their reports' data still arriving.
    var periodicSyncs: Set<UInt16> = []
    var periodicFragments = ReportReassembler<UInt16>()
    /// Whether a connect holds the controller's one initiator; the connects waiting their
    /// turn, first come first served (`takeConnectTurn`).
    var connectBusy = false
    var connectQueue: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
    var localAddressForConnections = DeviceAddress(.zero, type: .public)
    /// Whether the controller's resolving list holds the bonds (nil: not loaded yet), or why
    /// it does not; and entries waiting for the controller to be idle (ResolvingList.swift).
    var resolvingListLoaded: Result<Void, ResolvingListRefusal>?
    var pendingResolvingList: [ResolvingListEntry] = []
    /// The flush of `pendingResolvingList` under way (ResolvingList.swift).
    var resolvingListFlush: Task<Void, Never>?

    // MARK: lifecycle
    var readerStarted = false
    /// Set when the host can no longer work (transport lost, hardware error, closed).
    var fatal: HostError?
    /// Whether the host can no longer work: its links then end without a Disconnection Complete.
    public var hasFailed: Bool { fatal != nil }

    /// The serial executor the host runs on, with the layers that share it (`L2CAPConnection`,
    /// `ATTBearer`, `LinkSecurity`) and the transport's deliveries: the transport's
    /// (`HCITransport.executor`, shared by every host of an in-process virtual link) or one of
    /// its own. Applications that want no thread switch when they await the stack run their
    /// task on it (`withTaskExecutorPreference`, see `Central.executor`).
    public nonisolated let executor: SerialThreadExecutor
    /// Whether `executor` is the host's own (let its thread go at `close`), not the transport's.
    private nonisolated let ownsExecutor: Bool

    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    public init(transport: any HCITransport, configuration: HostConfiguration = .init()) {
        self.transport = transport
        self.configuration = configuration
        if let shared = transport.executor {
            executor = shared
            ownsExecutor = false
        } else {
            executor = SerialThreadExecutor(name: "ble-hci host")
            ownsExecutor = true
        }
        let (stream, continuation) = AsyncStream<HostEvent>.makeStream(
            bufferingPolicy: .bufferingOldest(Swift.max(16, configuration.maxQueuedEvents)))
        self.events = stream
        self.eventsContinuation = continuation
    }

    /// Stops reading, fails everything pending and closes the transport. Idempotent.
    public func close() {
        if fatal == nil {
            failEverything(.transportLost(TransportError(.closed, "the host was closed")))
        }
        transport.close()
        if ownsExecutor { executor.shutdownWhenIdle() }
    }

    /// Starts receiving from the transport if not already done: each batch of packets in its
    /// inbox is a job on the host's executor (one wake per batch from a socket reader thread,
    /// none on an in-process link whose sender runs here).
    func startReader() {
        guard !readerStarted else { return }
        readerStarted = true
        // Holds the host until the transport ends, as a reading task would.
        transport.inbox.deliver(on: executor) { delivery in self.checkedIsolation { $0.received(delivery) } }
    }

    /// A batch from the transport's inbox, on the host's executor, in arrival order.
    private func received(_ delivery: PacketInbox.Delivery) {
        switch delivery {
        case .packets(let batch):
            for packet in batch {
                if fatal != nil { return }
                handle(packet)
            }
        case .ended(let error?):
            transportDied(error)
        case .ended(nil):
            transportDied(TransportError(.closed, "\(transport.name): the transport was closed"))
        }
    }

    func transportDied(_ error: TransportError) {
        guard fatal == nil else { return }
        failEverything(.transportLost(error))
        emit(.transportLost(error))
        eventsContinuation.finish()
    }

    func hardwareFailure(_ code: UInt8) {
        guard fatal == nil else { return }
        failEverything(.hardwareError(code))
        emit(.hardwareError(code))
        eventsContinuation.finish()
    }

    /// Fails every pending command, procedure and ACL send; finishes every link's frames.
    func failEverything(_ error: HostError) {
        fatal = error
        let pending = outstandingCommands + commandQueue
        outstandingCommands.removeAll()
        commandQueue.removeAll()
        for d in commandTimeouts.values { disarm(d) }
        commandTimeouts.removeAll()
        for p in pending { p.continuation.resume(throwing: error) }
        let ws = waiters
        waiters.removeAll()
        for d in waiterTimeouts.values { disarm(d) }
        waiterTimeouts.removeAll()
        for w in ws { w.continuation?.resume(throwing: error) }
        waiterResults.removeAll()
        let queued = connectQueue
        connectQueue.removeAll()
        for q in queued { q.continuation.resume(throwing: error) }
        let gone = links.values
        links.removeAll()
        for link in gone {
            while link.hasQueued { link.popFront().continuation?.resume(throwing: error) }
            close(link, reason: .unspecifiedError)
        }
        readyLinks.removeAll()
        readyHead = 0
        disarm(creditWatchdog)
        creditWatchdog = nil
        disarmAll()
    }

    func checkAlive() throws {
        if let fatal { throw fatal }
    }

    func emit(_ event: HostEvent) {
        if case .dropped = eventsContinuation.yield(event) {
            configuration.log?("host event queue full (\(configuration.maxQueuedEvents)): dropped \(event)")
        }
    }

    func warn(_ message: String) {
        configuration.log?(message)
        emit(.warning(message))
    }

    // MARK: - Commands

    /// Sends `command` and waits for its completion.
    ///
    /// Command Complete commands return the typed return parameters; Command Status commands
    /// (`C.completesWithStatus`) return once the controller accepted them. Throws `HCIError`
    /// for a non-success status, `HostError.commandTimeout` when the controller stays silent,
    /// `HostError.transportLost`/`.hardwareError` when the host died meanwhile.
    public func execute<C: HCICommand>(_ command: C, timeout: Duration? = nil) async throws -> C.ReturnParameters {
        let result = try await send(command.packet, statusOnly: C.completesWithStatus,
                                    timeout: timeout ?? configuration.commandTimeout)
        switch result {
        case .status(let s):
            guard s.status.isSuccess else { throw HCIError(s.status, opcode: C.opcode) }
            var r = ByteReader([])
            do { return try C.ReturnParameters(returnParameters: &r) } catch {
                throw HostError.malformed("\(C.name): answered with Command Status only (\(error))")
            }
        case .complete(let c):
            guard c.status.isSuccess else { throw HCIError(c.status, opcode: C.opcode) }
            var r = ByteReader(Array(c.returnParameters.dropFirst()))
            do { return try C.ReturnParameters(returnParameters: &r) } catch {
                throw HostError.malformed("\(C.name) return parameters: \(error)")
            }
        }
    }

    /// Sends a raw command packet; returns the Command Complete or Command Status that answered it.
    func send(_ packet: HCICommandPacket, statusOnly: Bool, timeout: Duration) async throws -> CommandResult {
        try checkAlive()
        let id = nextID
        nextID &+= 1
        return try await withCheckedThrowingContinuation { (cont: CheckedContinuation<CommandResult, any Error>) in
            do { try checkAlive() } catch { return cont.resume(throwing: error) }  // (looked at again)
            commandQueue.append(PendingCommand(id: id, packet: packet, statusOnly: statusOnly, continuation: cont))
            commandTimeouts[id] = arm(after: timeout) { self.commandTimedOut(id) }
            pumpCommands()
        }
    }

    func commandTimedOut(_ id: UInt64) {
        commandTimeouts[id] = nil
        let p: PendingCommand
        if let i = outstandingCommands.firstIndex(where: { $0.id == id }) {
            p = outstandingCommands.remove(at: i)
            // The controller never answered: don't let its lost credit block every later command.
            if commandCredits == 0 && outstandingCommands.isEmpty { commandCredits = 1 }
        } else if let i = commandQueue.firstIndex(where: { $0.id == id }) {
            p = commandQueue.remove(at: i)
        } else {
            return
        }
        p.continuation.resume(throwing: HostError.commandTimeout(p.packet.opcode.name))
        pumpCommands()
    }

    func pumpCommands() {
        while commandCredits > 0, !commandQueue.isEmpty {
            let p = commandQueue.removeFirst()
            do {
                try transport.send(.command(p.packet))
            } catch {
                disarm(commandTimeouts.removeValue(forKey: p.id))
                p.continuation.resume(throwing: HostError.transportLost(error))
                continue
            }
            commandCredits -= 1
            outstandingCommands.append(p)
        }
    }

    func commandAnswered(opcode: HCIOpcode, credits: UInt8, result: CommandResult) {
        commandCredits = Int(credits)
        if opcode.rawValue != 0 {
            var matched = false
            if let i = outstandingCommands.firstIndex(where: { $0.packet.opcode == opcode }) {
                let p = outstandingCommands[i]
                var accept = true
                if case .status(let s) = result, !p.statusOnly, s.status.isSuccess {
                    // A Command Complete command acknowledged with a pending status: keep waiting.
                    accept = false
                }
                if accept {
                    outstandingCommands.remove(at: i)
                    disarm(commandTimeouts.removeValue(forKey: p.id))
                    p.continuation.resume(returning: result)
                }
                matched = true
            }
            if !matched {
                warn("\(opcode.name): answer to a command the host did not send (ignored)")
            }
        }
        pumpCommands()
    }

    // MARK: - Incoming packets

    func handle(_ packet: HCIPacket) {
        switch packet {
        case .event(let e): handleEvent(e)
        case .acl(let a): handleACL(a)
        case .command, .sco, .iso: break
        }
    }

    func handleACL(_ a: HCIACLPacket) {
        guard let link = links[a.handle] else {
            warn("ACL data for unknown connection handle \(hexCode(a.handle, digits: 4)) (\(a.data.count) octet(s)): dropped")
            return
        }
        switch link.reassembler.push(a.data, start: a.boundary.isStart) {
        case .pending:
            break
        case .frame(let f):
            deliver(f, on: link)
        case .dropped(let reason):
            warn("connection \(hexCode(a.handle, digits: 4)): \(reason)")
        case .replaced(let reason, let frame):
            warn("connection \(hexCode(a.handle, digits: 4)): \(reason)")
            if let frame { deliver(frame, on: link) }
        }
    }

    private func deliver(_ frame: [UInt8], on link: LinkState) {
        if let layer = link.layer {
            layer.received(frame, host: self)
        } else if !link.connection.route.deliver(frame) {
            warn("connection \(hexCode(link.handle, digits: 4)): \(configuration.maxQueuedFramesPerLink) frames queued unread: L2CAP frame dropped")
        }
    }

    func handleEvent(_ e: HCIEventPacket) {
        do {
            _ = try dispatch(e)  // false: an event the host ignores (HCIEventHandler names them)
        } catch {
            // LE Meta: name the subevent too, the part that did not fit.
            let sub = e.code == 0x3E ? e.parameters.first.flatMap(HCIEvents.leSubeventType).map { " (\($0.name))" } ?? "" : ""
            warn("\(HCIEvents.name(code: e.code)) event\(sub): malformed (\(error)): ignored")
        }
    }

    // MARK: - Connections

    /// Registers a new link and returns its public value.
    func addLink(handle: UInt16, role: LERole, peer: DeviceAddress, local: DeviceAddress? = nil, parameters: ConnectionParameters) -> LEConnection {
        if let old = links[handle] {
            warn("connection handle \(hexCode(handle, digits: 4)) reused before its disconnection: old link closed")
            linkDisconnected(old.handle, reason: .connectionTimeout)
        }
        let local = local ?? (role == .peripheral ? advertisingAddress : localAddressForConnections)
        let conn = LEConnection(handle: handle, role: role, peer: peer, local: local, parameters: parameters,
                                route: FrameRoute(limit: configuration.maxQueuedFramesPerLink))
        links.insert(LinkState(connection: conn, maxFrame: configuration.maxL2CAPFrame))
        return conn
    }

    /// Makes `layer` the consumer of `connection`'s frames and events: what arrived before is
    /// handed to it first, then each frame and event as it comes, ending with `.disconnected`
    /// (at once, after the held frames, when the link is gone already: frames that arrived
    /// before a disconnection are still handled). False, and nothing is handed, when the
    /// `frames` stream was chosen as the consumer.
    @discardableResult
    public func attach(_ layer: any HostLinkLayer, to connection: LEConnection) -> Bool {
        guard let held = connection.route.takeForLayer() else { return false }
        let link = linkState(of: connection)
        link?.layer = layer
        for f in held.frames { layer.received(f, host: self) }
        for e in held.events { layer.linkEvent(e, host: self) }
        if link == nil { layer.linkEvent(.disconnected(held.closed ?? .unspecifiedError), host: self) }
        return true
    }

    /// The layer attached to the link `handle`, while it is up.
    public func layer(for handle: UInt16) -> (any HostLinkLayer)? { links[handle]?.layer }

    /// The layer attached to `connection`'s link while that link is up; nil once it is gone,
    /// also when a later link was given the same handle (matched by route, not by handle).
    public func layer(for connection: LEConnection) -> (any HostLinkLayer)? { linkState(of: connection)?.layer }

    /// `connection`'s link while it is up (its route only compared: a copy of the
    /// `LEConnection` would retain each of its references).
    private func linkState(of connection: LEConnection) -> LinkState? {
        guard let link = links[connection.handle], link.connection.route === connection.route else { return nil }
        return link
    }

    /// Runs `body` inside the host's isolation: the application's way to the layers of its
    /// links (one `await` per operation; from a task preferring the host's executor, no thread
    /// switch). Cancellation of the calling task reaches what `body` awaits. In the caller's
    /// isolation: from inside the host (a layer's task) it is a plain call, from outside one hop
    /// in and one out, never a hop to the global executor between.
    public nonisolated(nonsending) func run<R: Sendable>(_ body: @Sendable (isolated Host) async throws -> R) async rethrows -> R {
        try await body(self)
    }

    /// Starts `body` as a task inside the host's isolation, for a layer's work that awaits
    /// (an HCI command, the application's answer) without holding up the link's frames.
    /// `body` must be isolated to this host (a closure formed where `host` is isolated gets
    /// that isolation when it uses `host`): checked here, where the mistake is made.
    @discardableResult
    public func spawn(_ body: @escaping @isolated(any) () async -> Void) -> Task<Void, Never> {
        precondition(body.isolation === self, "Host.spawn: the task's body is not isolated to this host (use `host` in it)")
        // (Using `self` makes the task the host's, so it may hold `body`, which is.)
        return Task { self.preconditionIsolated(); await body() }
    }

    /// Tells the link's layer (or its route, for one to come) that the link is gone.
    private func close(_ link: LinkState, reason: HCIStatus) {
        link.connection.route.close(reason: reason)
        if let layer = link.layer {
            link.layer = nil
            layer.linkEvent(.disconnected(reason), host: self)
        }
    }

    /// Hands `event` to the link's layer, or holds it for one to come.
    func signal(_ event: HostLinkEvent, on handle: UInt16) {
        guard let link = links[handle] else { return }
        if let layer = link.layer { layer.linkEvent(event, host: self) } else { link.connection.route.hold(event) }
    }

    /// The connection with `handle`, if up.
    public func connection(_ handle: UInt16) -> LEConnection? { links[handle]?.connection }

    /// Every link that is up.
    public var connections: [LEConnection] { links.values.map(\.connection) }

    func linkDisconnected(_ handle: UInt16, reason: HCIStatus) {
        guard let link = links.removeValue(forKey: handle) else {
            warn("Disconnection Complete for unknown handle \(hexCode(handle, digits: 4))")
            emit(.disconnected(handle: handle, reason: reason))
            return
        }
        let error = HostError.disconnected(handle: handle, reason: reason)
        // Buffers held by this link's packets are freed by the controller.
        aclCredits = Swift.min(aclBufferCount, aclCredits + link.inFlight)
        if link.inFlight > 0 { creditProgress = true }
        link.inFlight = 0
        while link.hasQueued { link.popFront().continuation?.resume(throwing: error) }
        link.reassembler.reset()
        close(link, reason: reason)
        if link.scheduled {
            link.scheduled = false
            if let i = readyLinks[readyHead...].firstIndex(of: handle) { readyLinks.remove(at: i) }
        }
        while let i = waiters.firstIndex(where: { $0.handle == handle }) {
            let w = waiters[i]
            resolveWaiter(at: i, w.kind == .disconnection ? .success(.disconnected(reason)) : .failure(error))
        }
        emit(.disconnected(handle: handle, reason: reason))
        pumpACL()
    }

    // MARK: - ACL out

    /// Sends one complete L2CAP frame (basic header included) on `handle`.
    ///
    /// Fragments to the controller's LE ACL data length (first fragment PB 0b00, then 0b01)
    /// and waits for buffer credits; links are served round-robin. Returns once the last
    /// fragment was handed to the controller. Throws `HostError.disconnected` at once if the
    /// link is or becomes disconnected, `.unknownConnection` for a handle never seen.
    public func sendL2CAP(_ frame: [UInt8], on handle: UInt16) async throws {
        let link = try outgoingLink(handle, frame)
        if try sendAtOnce(frame, on: link) { return }
        try await withCheckedThrowingContinuation { c in
            // Looked at again: the link may have gone since (an await lets the host's other
            // jobs run first).
            do { queue(frame, on: try outgoingLink(link.handle, frame), resuming: c) } catch { c.resume(throwing: error) }
        }
    }

    /// `sendL2CAP` for a caller that waits on a continuation of its own (no hop into the host
    /// and back out for a task that is not isolated to it): `done` is resumed once the whole
    /// frame is handed to the controller (at once when it can go now), or with the error.
    public func sendL2CAP(_ frame: [UInt8], on handle: UInt16, resuming done: CheckedContinuation<Void, any Error>) {
        do {
            let link = try outgoingLink(handle, frame)
            if try sendAtOnce(frame, on: link) { return done.resume() }
            queue(frame, on: link, resuming: done)
        } catch {
            done.resume(throwing: error)
        }
    }

    private func queue(_ frame: [UInt8], on link: LinkState, resuming done: CheckedContinuation<Void, any Error>) {
        link.queue.append(OutgoingFrame(frame: frame, offset: 0, continuation: done))
        schedule(link)
        pumpACL()
    }

    /// Sends one complete L2CAP frame without waiting: like `sendL2CAP`, but it returns at once
    /// (the frame is queued behind earlier frames when credits are short). For callers running
    /// in the host's isolation (a link layer answering a request). Throws what
    /// `sendL2CAP` throws before queueing.
    /// Throws `HostError.busy` when the frames of `kind` queued this way that still wait on the
    /// link reach their bound (`HostConfiguration.maxEnqueuedFramesPerLink` for answers,
    /// `.maxEnqueuedControlFramesPerLink` for SMP/signaling; the frame is not sent). Each kind
    /// has its own bound, so answers to a flooding ATT client never leave SMP without room.
    public func enqueueL2CAP(_ frame: [UInt8], on handle: UInt16, kind: EnqueuedFrameKind = .answer) throws {
        let link = try outgoingLink(handle, frame)
        if try sendAtOnce(frame, on: link) { return }
        switch kind {
        case .answer, .control:
            let bound = kind == .answer ? configuration.maxEnqueuedFramesPerLink : configuration.maxEnqueuedControlFramesPerLink
            guard link.enqueuedCount(kind) < bound else {
                throw HostError.busy("connection \(hexCode(handle, digits: 4)): \(link.enqueuedCount(kind)) \(kind == .answer ? "answers" : "SMP/signaling PDUs") already wait for ACL buffers")
            }
            if kind == .answer { link.enqueuedAnswerCount += 1 } else { link.enqueuedControlCount += 1 }
        case .request:
            break
        }
        link.queue.append(OutgoingFrame(frame: frame, offset: 0, continuation: nil, enqueued: kind))
        schedule(link)
        pumpACL()
    }

    /// Sends one complete L2CAP frame if it can go out now without waiting (ACL credits for all
    /// of it, nothing queued ahead): true when sent, false when nothing was sent (the caller
    /// then waits its turn with `sendL2CAP`). Throws what `sendL2CAP` throws. For callers on
    /// the host's executor that want no suspension when the link has room (a notification).
    public func sendL2CAPIfReady(_ frame: [UInt8], on handle: UInt16) throws -> Bool {
        try sendAtOnce(frame, on: outgoingLink(handle, frame))
    }

    /// Whether `enqueueL2CAP` would accept an answer on `handle` now (a layer answering a
    /// peer's request checks it before acting on the request).
    public func canEnqueueL2CAP(on handle: UInt16) -> Bool {
        guard let link = links[handle] else { return false }
        return link.enqueuedAnswerCount < configuration.maxEnqueuedFramesPerLink
    }

    private func outgoingLink(_ handle: UInt16, _ frame: [UInt8]) throws -> LinkState {
        try checkAlive()
        guard let link = links[handle] else { throw HostError.unknownConnection(handle) }
        guard !frame.isEmpty else { throw HostError.invalidArgument("empty L2CAP frame") }
        return link
    }

    /// Fast path: nobody waiting and enough credits for the whole frame, so it goes out now
    /// without suspending. False when the frame must queue.
    private func sendAtOnce(_ frame: [UInt8], on link: LinkState) throws -> Bool {
        let fragments = (frame.count + aclDataLength - 1) / aclDataLength
        guard readyHead == readyLinks.count, !link.hasQueued, aclCredits >= fragments else { return false }
        var f = OutgoingFrame(frame: frame, offset: 0, continuation: nil)
        while f.offset < frame.count {
            try sendFragment(&f, on: link)
        }
        return true
    }

    private func schedule(_ link: LinkState) {
        guard !link.scheduled else { return }
        link.scheduled = true
        readyLinks.append(link.handle)
    }

    /// Sends the next fragment of `f`; throws on transport failure.
    private func sendFragment(_ f: inout OutgoingFrame, on link: LinkState) throws {
        let end = Swift.min(f.frame.count, f.offset + aclDataLength)
        let data: [UInt8] = (f.offset == 0 && end == f.frame.count) ? f.frame : Array(f.frame[f.offset..<end])
        let packet = HCIACLPacket(handle: link.handle, boundary: f.offset == 0 ? .firstNonFlushable : .continuing, data: data)
        do {
            try transport.send(.acl(packet))
        } catch {
            transportDied(error)
            throw HostError.transportLost(error)
        }
        f.offset = end
        aclCredits -= 1
        link.inFlight += 1
    }

    /// Hands fragments to the controller while credits last, one fragment per link in turn.
    func pumpACL() {
        while aclCredits > 0, readyHead < readyLinks.count {
            let handle = readyLinks[readyHead]
            readyHead += 1
            guard let link = links[handle], link.hasQueued else {
                links[handle]?.scheduled = false
                continue
            }
            var f = link.queue[link.queueHead]
            do {
                try sendFragment(&f, on: link)
            } catch {
                return  // transportDied failed everything
            }
            if f.offset >= f.frame.count {
                _ = link.popFront()
                f.continuation?.resume()
            } else {
                link.queue[link.queueHead] = f
            }
            if link.hasQueued {
                readyLinks.append(handle)
            } else {
                link.scheduled = false
            }
        }
        if readyHead == readyLinks.count {
            readyLinks.removeAll(keepingCapacity: true)
            readyHead = 0
        } else if readyHead >= 64 {
            readyLinks.removeFirst(readyHead)
            readyHead = 0
        }
        if readyHead < readyLinks.count { armCreditWatchdog() }
    }

    // MARK: - ACL credit watchdog

    /// Frames wait for buffers: make sure they do not wait for ever. One deadline in the host's
    /// table, re-armed while Number Of Completed Packets keeps returning buffers.
    private func armCreditWatchdog() {
        guard creditWatchdog == nil else { return }
        creditProgress = false
        creditWatchdog = arm(after: configuration.aclCreditTimeout) { self.creditWatchdogFired() }
    }

    private func creditWatchdogFired() {
        creditWatchdog = nil
        if !creditWatchdogExpired() { armCreditWatchdog() }
    }

    /// Returns true when the watchdog's work is done.
    private func creditWatchdogExpired() -> Bool {
        if readyHead == readyLinks.count || creditProgress {
            creditProgress = false
            if readyHead < readyLinks.count { return false }
            creditWatchdog = nil
            return true
        }
        creditWatchdog = nil
        let timeout = configuration.aclCreditTimeout
        let error = HostError.procedureTimeout("waiting for ACL buffers: the controller freed none (Number Of Completed Packets) for \(timeout)")
        var failed = 0
        for handle in Set(readyLinks[readyHead...]) {
            guard let link = links[handle] else { continue }
            var kept: [OutgoingFrame] = []
            for i in link.queueHead..<link.queue.count {
                var f = link.queue[i]
                f.continuation?.resume(throwing: error)
                if f.continuation != nil || f.enqueued != nil { failed += 1 }
                f.continuation = nil
                // A frame partly handed to the controller is finished (the peer reassembles it);
                // the others are dropped.
                if f.offset > 0 { kept.append(f) } else { link.forget(f) }
            }
            link.queue = kept
            link.queueHead = 0
        }
        warn("\(error): \(failed) frame(s) failed")
        return true
    }

    func numberOfCompletedPackets(_ e: NumberOfCompletedPackets) {
        for entry in e.entries {
            guard let link = links[entry.connectionHandle] else { continue }
            let n = Swift.min(Int(entry.numCompletedPackets), link.inFlight)
            if n < Int(entry.numCompletedPackets) {
                warn("Number Of Completed Packets: \(entry.numCompletedPackets) for \(hexCode(entry.connectionHandle, digits: 4)) with \(link.inFlight) in flight")
            }
            link.inFlight -= n
            aclCredits = Swift.min(aclBufferCount, aclCredits + n)
            if n > 0 { creditProgress = true }
        }
        pumpACL()
    }

    /// ACL packets in flight (sent, not completed) per handle and free buffers: for tests and diagnostics.
    public var aclStatus: (free: Int, inFlight: [UInt16: Int]) {
        (aclCredits, links.mapValues(\.inFlight))
    }

    /// Sets the ACL buffer geometry (bring-up does this from the controller's answer).
    func configureACL(dataLength: Int, bufferCount: Int) {
        aclDataLength = Swift.max(1, dataLength)
        aclBufferCount = Swift.max(1, bufferCount)
        aclCredits = aclBufferCount
    }

    // MARK: - Waiters

    /// Registers interest in an event before the command that causes it is sent.
    func registerWaiter(_ kind: WaiterKind, handle: UInt16?) throws -> UInt64 {
        try checkAlive()
        let id = nextID
        nextID &+= 1
        waiters.append(Waiter(id: id, kind: kind, handle: handle, continuation: nil))
        return id
    }

    /// Forgets a waiter (its command failed).
    func cancelWaiter(_ id: UInt64) {
        waiters.removeAll { $0.id == id }
        waiterResults[id] = nil
        disarm(waiterTimeouts.removeValue(forKey: id))
    }

    /// Waits for the event a registered waiter expects, at most `timeout`. `cancellable`: the
    /// task's cancellation ends the wait at once with `CancellationError` (the caller undoes
    /// what it started: a connect sends LE Create Connection Cancel).
    func awaitWaiter(_ id: UInt64, timeout: Duration, name: String, cancellable: Bool = false) async throws -> WaiterResult {
        if let r = waiterResults.removeValue(forKey: id) { return try r.get() }
        guard waiters.contains(where: { $0.id == id }) else {
            throw fatal ?? HostError.procedureTimeout(name)
        }
        guard cancellable else { return try await parkWaiter(id, timeout: timeout, name: name) }
        return try await withTaskCancellationHandler {
            try await parkWaiter(id, timeout: timeout, name: name)
        } onCancel: {
            // Any thread: the host's state is touched on its executor.
            executor.submit { self.checkedIsolation { $0.waiterCancelled(id) } }
        }
    }

    /// Parks the waiter `id` until its event, its timeout or its cancellation. It is looked up
    /// again inside the continuation's body: entering `withCheckedThrowingContinuation` may
    /// suspend (a task preferring a task executor is re-enqueued there), and other jobs of the
    /// host may complete or remove waiters meanwhile.
    private func parkWaiter(_ id: UInt64, timeout: Duration, name: String) async throws -> WaiterResult {
        try await withCheckedThrowingContinuation { (cont: CheckedContinuation<WaiterResult, any Error>) in
            if let r = waiterResults.removeValue(forKey: id) { return cont.resume(with: r) }
            guard let i = waiters.firstIndex(where: { $0.id == id }) else {
                return cont.resume(throwing: fatal ?? HostError.procedureTimeout(name))
            }
            waiters[i].continuation = cont
            waiterTimeouts[id] = arm(after: timeout) { self.waiterTimedOut(id, name: name) }
        }
    }

    func waiterCancelled(_ id: UInt64) {
        guard let i = waiters.firstIndex(where: { $0.id == id }) else { return }
        resolveWaiter(at: i, .failure(CancellationError()))
    }

    func waiterTimedOut(_ id: UInt64, name: String) {
        waiterTimeouts[id] = nil
        guard let i = waiters.firstIndex(where: { $0.id == id }) else { return }
        resolveWaiter(at: i, .failure(HostError.procedureTimeout(name)))
    }

    func resolveWaiter(at i: Int, _ result: Result<WaiterResult, any Error>) {
        let w = waiters.remove(at: i)
        disarm(waiterTimeouts.removeValue(forKey: w.id))
        if let c = w.continuation { c.resume(with: result) } else { waiterResults[w.id] = result }
    }

    /// Completes the oldest waiter of `kind` (on `handle` when given). Returns false when none waits.
    @discardableResult
    func complete(_ kind: WaiterKind, handle: UInt16?, with result: Result<WaiterResult, any Error>) -> Bool {
        guard let i = waiters.firstIndex(where: { $0.kind == kind && (handle == nil || $0.handle == handle) }) else { return false }
        resolveWaiter(at: i, result)
        return true
    }
}

extension Host {
    /// Frames waiting for ACL credits on `handle` (diagnostics and tests).
    public func queuedFrameCount(_ handle: UInt16) -> Int {
        guard let l = links[handle] else { return 0 }
        return l.queue.count - l.queueHead
    }
}
