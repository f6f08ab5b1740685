import Synchronization
import HCI
import Transport
import Host
import L2CAP
import ATT
import GATT
import SMP

/// Settings shared by `Central` and `Peripheral`.
public struct StackOptions: Sendable {
    public var host = HostConfiguration()
    /// ATT transaction timeout (30 s in the spec; shorter in tests).
    public var attTimeout: Duration = .seconds(30)
    /// Peripheral: how long an asynchronous read or write handler (`GATTCharacteristic(asyncRead:)`)
    /// may take before the central is answered Unlikely Error instead (25 s: under the central's
    /// 30 s ATT transaction timeout).
    public var asyncHandlerTimeout: Duration = .seconds(25)
    /// L2CAP signaling timeout.
    public var signalingTimeout: Duration = .seconds(30)
    /// Central: decides a peripheral's Connection Parameter Update Request (Core v5.4 Vol 3
    /// Part A 4.20); true accepts it, and the central then applies it with LE Connection Update.
    /// nil (the default) accepts every request whose parameters are in the spec's ranges.
    public var connectionParameterPolicy: (@Sendable (ConnectionParameterUpdateRequest) async -> Bool)?
    /// Central: the Client Rx MTU `connect` exchanges before it returns (ATT Exchange MTU,
    /// Core v5.4 Vol 3 Part F 3.4.2.1), as CoreBluetooth does; nil leaves ATT_MTU at 23 until
    /// `RemotePeripheral.exchangeMTU`.
    public var mtuOnConnect: UInt16? = 517
    /// Called with diagnostics from every layer (dropped packets, protocol errors).
    public var log: (@Sendable (String) -> Void)?
    /// SMP: IO capability, bonding, key sizes, bond directory, Security Request.
    public var security = SecurityConfiguration()
    /// Answers passkey entry and numeric comparison, and hears every security event.
    public var pairingDelegate: (any PairingDelegate)?
    /// Our own resolvable private address for advertising, scanning and connecting; nil (the
    /// default): the identity address. Our IRK is kept with the bonds (`security.bondDirectory`).
    public var privacy: PrivacyOptions?
    /// Serve Enhanced ATT bearers (Core v5.4 Vol 3 Part G 5.3.2): every link accepts enhanced
    /// credit-based channels on PSM 0x0027 once it is encrypted (before: refused with
    /// insufficient encryption, Part A 4.26), and a peripheral's GATT server says so in
    /// Server Supported Features (bit 0, Part G 7.4).
    public var enhancedATT = false
    public init() {}
}

/// Why an operation of the BLE API failed, in words a user can act on: the one error type the
/// `BLE` API throws (besides Swift's `CancellationError` when the calling task is cancelled, as
/// `Task.sleep` and every other async API do). The case is the cause; `description` says it in
/// words. What a layer below failed with arrives here as one of these cases, whatever layer it
/// came from (`init(_:)`), so the same disconnection is `.disconnected(reason)` from a read, a
/// write, a discovery or a notification stream.
public enum BLEError: Error, Sendable, Equatable, CustomStringConvertible {
    case notFound(String)
    /// The link went down, with the reason the controller gave (Disconnection Complete, Core
    /// v5.4 Vol 4 Part E 7.7.5), or Unknown Connection Identifier when it was never up.
    case disconnected(HCIStatus)
    case notPermitted(String)
    case unknownCharacteristic(String)
    case closed
    /// Pairing failed with this SMP reason (sent by us, or by the peer when `remote`).
    case pairingFailed(SMPPairingFailedReason, remote: Bool)
    /// Encryption did not start (PIN or Key Missing 0x06: the peer has lost the bond).
    case encryptionFailed(HCIStatus)
    case securityFailed(String)
    /// The peer answered with an ATT Error Response (Core v5.4 Vol 3 Part F 3.4.1.1): its code
    /// and name are in the `ATTError` (CoreBluetooth's `CBATTError`).
    case att(ATTError)
    /// The controller refused a command: the HCI status and the command (Vol 4 Part E 7.7.14/15).
    case hci(HCIError)
    /// The transport to the controller could not be opened or was lost.
    case transport(TransportError)
    /// A wait ran out: connecting, an ATT transaction (30 s, Vol 3 Part F 3.3.3), a controller's
    /// answer, an SMP procedure. Says which.
    case timeout(String)
    /// The peer or the controller answered with something that does not decode or does not fit.
    case invalidResponse(String)
    /// The call's arguments cannot be carried as given (a value too long, a bad handle range).
    case invalidArgument(String)
    /// The controller or the peer does not support what was asked.
    case unsupported(String)
    /// The peer refused or ended an L2CAP request (a channel to a PSM, a parameter update).
    case refused(String)
    /// The controller failed (Hardware Error, Vol 4 Part E 7.7.16) or is busy with the same kind
    /// of operation.
    case controller(String)

    public var description: String {
        switch self {
        case .notFound(let what): return "no advertiser matching \(what) was found"
        case .disconnected(let reason): return "the link is disconnected: \(reason.name) (\(hexCode(reason.rawValue)))"
        case .notPermitted(let why): return why
        case .unknownCharacteristic(let what): return "the peer has no characteristic \(what)"
        case .closed: return "the stack was closed"
        case let .pairingFailed(reason, remote):
            return "pairing failed: \(reason.description) (\(hexCode(reason.rawValue)))\(remote ? ", reported by the peer" : "")"
        case .encryptionFailed(let status):
            let hint = status == .pinOrKeyMissing ? ": the peer has no key for our bond (remove the bond and pair again)" : ""
            return "encryption failed: \(status.name) (\(hexCode(status.rawValue)))\(hint)"
        case .securityFailed(let why): return why
        case .att(let e): return e.description
        case .hci(let e): return e.description
        case .transport(let e): return e.description
        case .timeout(let what), .invalidResponse(let what), .invalidArgument(let what), .unsupported(let what),
             .refused(let what), .controller(let what):
            return what
        }
    }

    /// `error` as the BLE API reports it: the lower layers' errors mapped to their cause, kept
    /// in their words. `CancellationError` stays what it is (`BLE.boundary` passes it through).
    public init(_ error: any Error) {
        switch error {
        case let e as BLEError: self = e
        case let e as ATTError: self = .att(e)
        case let e as HCIError: self = .hci(e)
        case let e as TransportError: self = .transport(e)
        case let e as HostError:
            switch e {
            case .commandTimeout, .connectTimeout, .procedureTimeout: self = .timeout(e.description)
            case .disconnected(_, let reason): self = .disconnected(reason)
            case .unknownConnection: self = .disconnected(.unknownConnectionIdentifier)
            case .transportLost(let t): self = .transport(t)
            case .hardwareError, .busy, .notStarted: self = .controller(e.description)
            case .unsupported: self = .unsupported(e.description)
            case .malformed: self = .invalidResponse(e.description)
            case .invalidArgument: self = .invalidArgument(e.description)
            case .encryptionFailed(_, let status): self = .encryptionFailed(status)
            }
        case let e as ATTBearerError:
            switch e {
            case .transactionTimeout: self = .timeout(e.description)
            // The bearer closes when its link goes down; `boundary` names the link's reason when it knows it.
            case .closed: self = .disconnected(.unknownConnectionIdentifier)
            case .invalidResponse: self = .invalidResponse(e.description)
            case .pduTooLarge, .invalidArgument: self = .invalidArgument(e.description)
            }
        case let e as GATTClientError:
            switch e {
            case .unexpectedResponse, .invalidResponse: self = .invalidResponse(e.description)
            case .valueTooLong, .invalidHandleRange: self = .invalidArgument(e.description)
            case .notSubscribable: self = .notPermitted(e.description)
            }
        case let e as GATTPushError: self = .invalidArgument(e.description)
        case let e as L2CAPError:
            switch e {
            case .disconnected: self = .disconnected(.unknownConnectionIdentifier)
            case .signalingTimeout, .creditTimeout: self = .timeout(e.description)
            case .unexpectedResponse: self = .invalidResponse(e.description)
            case .sduTooLarge, .invalidArgument: self = .invalidArgument(e.description)
            case .commandRejected, .connectionRefused, .channelClosed, .notAllowed, .noResources: self = .refused(e.description)
            }
        case let e as SMPBondStoreError: self = .securityFailed(e.description)
        default: self = .controller("\(error)")
        }
    }
}

/// Runs one BLE API operation and reports its failure as a `BLEError` (`CancellationError`
/// passes through): the one place the layers' errors cross into the application. A closed
/// bearer or channel on a link that went down is that link's disconnection, with its reason.
nonisolated(nonsending) func boundary<R>(_ link: Link? = nil, _ body: nonisolated(nonsending) () async throws -> R) async throws -> R {
    do {
        return try await body()
    } catch {
        throw boundaryError(error, link)
    }
}

/// What `boundary` throws for `error`.
func boundaryError(_ error: any Error, _ link: Link?) -> any Error {
    if error is CancellationError { return error }
    var mapped = BLEError(error)
    if case .disconnected(.unknownConnectionIdentifier) = mapped, let reason = link?.disconnectReason {
        mapped = .disconnected(reason)
    }
    return mapped
}

/// `boundary` for an ATT exchange (a GATT read, write, discovery, notification), run with the
/// host's task executor preferred: a task from the global pool (or another actor) moves to the
/// host's thread once on the way in and once on the way out. Without it each await inside the
/// host left the thread in between: a continuation resumes on the generic executor (the Swift
/// runtime's rule), so the answer to a request went out to a pool thread and straight back to
/// the host, four thread wakes per read instead of two (docs/performance.md, Round 16). A task
/// already on the host's thread (one preferring `Central.executor`) goes on as it is: asking the
/// runtime for its preference costs a lock, pushing it again two.
/// An await inside the host may let its other jobs run first, as an await may (for a task
/// without the preference every hop there does): host code looks its state up again after one.
/// Written out flat (not through `boundary`): each closure between the application's call and
/// the host costs the task a hop (an executor check and the runtime's lookup of its preference,
/// under a lock). `Link.exchange` is the same for a link's layers. `link`, when the exchange is
/// on one, names its disconnection reason in the error (`boundaryError`).
nonisolated(nonsending) func exchange<R>(on host: Host, link: Link? = nil, _ body: nonisolated(nonsending) () async throws -> R) async throws -> R {
    do {
        let executor = host.executor
        if executor.isCurrent { return try await body() }
        return try await withTaskExecutorPreference(executor.taskExecutor) { try await body() }
    } catch {
        throw boundaryError(error, link)
    }
}

/// Runs `body` in `host`'s isolation, its task preferring the host's thread
/// (`Central.withStackIsolation`): `body` inherits the isolation, so `exchange` and `Host.run`
/// from inside it are plain calls.
nonisolated(nonsending) func inIsolation<R: Sendable>(of host: Host, _ body: nonisolated(nonsending) @Sendable () async throws -> R) async throws -> R {
    try await withTaskExecutorPreference(host.executor.taskExecutor) {
        try await host.run { _ in try await body() }
    }
}

extension Link {
    /// `exchange(on:_:)` into this link's layers, flat as it is: `body` runs in the host's
    /// isolation (it inherits it: no hop of its own), entered through `enter`.
    nonisolated(nonsending) func exchange<R: Sendable>(_ body: nonisolated(nonsending) @Sendable (LinkLayers) async throws -> R) async throws -> R {
        do {
            let executor = host.executor
            if executor.isCurrent { return try await Self.enter(host, connection, body) }
            return try await withTaskExecutorPreference(executor.taskExecutor) { try await Self.enter(host, connection, body) }
        } catch {
            throw boundaryError(error, self)
        }
    }

    /// `body` with the layers now, without an await, when the caller is on the host's thread
    /// (a task preferring the host's executor, or code in its isolation); nil elsewhere. The
    /// Swift runtime queues every hop to or from an actor on a custom executor, so `exchange`
    /// costs such a task two executor jobs: this none. `Host.checkedIsolation` checks the
    /// executor, and only what is `Sendable` leaves (a request's transaction, not the layers).
    nonisolated func layersNow<R: Sendable>(_ body: @Sendable (LinkLayers) throws -> R?) throws -> R? {
        guard host.executor.isCurrent else { return nil }
        let connection = connection
        do {
            return try host.checkedIsolation { host in try body(Self.layers(of: connection, on: host)) }
        } catch {
            throw boundaryError(error, self)
        }
    }

    /// `body` with the layers of `connection`'s link, in `host`'s isolation.
    private static func enter<R: Sendable>(_ host: isolated Host, _ connection: LEConnection, _ body: nonisolated(nonsending) @Sendable (LinkLayers) async throws -> R) async throws -> R {
        try await body(layers(of: connection, on: host))
    }

    /// The layers of `connection`'s link while it is up; `BLEError.disconnected` once it is
    /// gone. Found by route, not by handle alone: a controller may give a later link the same
    /// handle, and what was started for this link must not act on that one.
    static func layers(of connection: LEConnection, on host: isolated Host) throws -> LinkLayers {
        guard let layers = host.layer(for: connection) as? LinkLayers else {
            throw BLEError.disconnected(connection.route.closedReason ?? .unknownConnectionIdentifier)
        }
        return layers
    }
}

/// The layers of one link the stack set up: plain state owned by the host (the layer attached
/// to the link), inside its isolation. Reached with `Link.run`.
final class LinkLayers: L2CAPLinkOwner {
    let bearer: ATTBearer
    /// The unenhanced bearer and the Enhanced ATT bearers the client spreads its requests over.
    let bearers: ATTBearers
    let security: LinkSecurity
    let client: GATTClient

    /// The application's side of the link, once made (it is made after the layers are attached).
    let slot: LinkSlot

    init(l2cap: L2CAPConnection, bearers: ATTBearers, security: LinkSecurity, client: GATTClient, slot: LinkSlot) {
        self.bearer = bearers.fixed
        self.bearers = bearers
        self.security = security
        self.client = client
        self.slot = slot
        super.init(l2cap: l2cap)
    }

    /// A Write Command of `value` to `characteristic`, signed when the characteristic wants it
    /// and the link is not encrypted (Core v5.4 Vol 3 Part C 10.4.2: on an encrypted link a plain
    /// Write Command is used), with our CSRK.
    nonisolated(nonsending) func writeCommand(_ value: [UInt8], to characteristic: GATTRemoteCharacteristic) async throws {
        if characteristic.properties.contains(.authenticatedSignedWrites), !security.state.encrypted, security.canSign {
            let security = self.security
            try await client.signedWrite(value, handle: characteristic.valueHandle) { try security.sign($0) }
            return
        }
        guard characteristic.properties.contains(.writeWithoutResponse) else {
            throw BLEError.notPermitted("characteristic \(characteristic.uuid) does not allow write without response (properties: \(characteristic.properties))")
        }
        try await client.writeWithoutResponse(value, handle: characteristic.valueHandle)
    }
    /// A Disconnection Complete gives the `Link` its reason before the layers close: a stream or
    /// request they end then reports it (`BLEError.disconnected(reason)`), rather than waiting
    /// for the stack's event loop, which hears the same event later. A host that failed (its
    /// transport lost) received none: the stack reports that failure, not a disconnection.
    override func linkEvent(_ event: HostLinkEvent, host: isolated Host) {
        if case .disconnected(let reason) = event, !host.hasFailed { slot.link?.markDisconnected(reason) }
        super.linkEvent(event, host: host)
    }
}

/// One live link, as the application's side holds it: its connection and how it ended. Its
/// layers live in the host (`run`).
final class Link: Sendable {
    let connection: LEConnection
    let host: Host
    /// The ATT bearer's ATT_MTU and counters (read without entering the host).
    let att: ATTLink
    private let disconnection = OneShot<HCIStatus>()
    /// The Write Commands `RemotePeripheral.sendWriteWithoutResponse` took and has not sent.
    let writes: UpdateQueue<WriteCommand>
    /// Called when `writes` has room again after refusing one (the central's event).
    let writesReady = LateCallback()

    /// One queued Write Command (or Signed Write Command) to a characteristic.
    struct WriteCommand: Sendable {
        let value: [UInt8]
        let characteristic: GATTRemoteCharacteristic
    }

    /// Values `sendWriteWithoutResponse` holds at most per link before it refuses one.
    static let writeQueueLimit = 64

    init(connection: LEConnection, host: Host, att: ATTLink) {
        self.connection = connection
        self.host = host
        self.att = att
        let ready = writesReady
        writes = UpdateQueue(limit: Self.writeQueueLimit, executor: host.executor, send: { commands in
            // A link gone meanwhile takes nothing, as CoreBluetooth drops writes to a lost peripheral.
            await host.run { host in
                guard let layers = try? Link.layers(of: connection, on: host) else { return }
                for command in commands { try? await layers.writeCommand(command.value, to: command.characteristic) }
            }
        }, ready: { ready() })
    }

    /// Runs `body` with the link's layers inside the host's isolation (one `await`); throws
    /// `BLEError.disconnected` once the link is gone.
    nonisolated(nonsending) func run<R: Sendable>(_ body: @Sendable (LinkLayers, isolated Host) async throws -> R) async throws -> R {
        let connection = connection
        return try await host.run { host in try await body(Link.layers(of: connection, on: host), host) }
    }

    func markDisconnected(_ reason: HCIStatus) {
        disconnection.fulfil(reason)
        writes.close()
    }
    var disconnectReason: HCIStatus? { disconnection.value }
    func waitForDisconnection() async -> HCIStatus { await disconnection.wait() }
    /// Calls `body` with the reason when the link goes down; returns a token for `stopObserving`.
    func onDisconnection(_ body: @escaping @Sendable (HCIStatus) -> Void) -> Int? { disconnection.observe(body) }
    func stopObserving(_ token: Int?) { disconnection.removeObserver(token) }
}

/// The runtime under `Central` and `Peripheral`: one `Host` on one transport, the event loop
/// that turns host events into links, scan results and peripheral events.
actor Stack {
    let host: Host
    let transport: any HCITransport
    let options: StackOptions
    nonisolated let controller: ControllerInfo
    /// Set by `Peripheral`: every link gets it as its ATT server.
    private var server: GATTServer?
    private var links: [UInt16: Task<Link, Never>] = [:]
    /// LE credit-based channels published by the peripheral, by SPSM: every link it serves
    /// accepts them (`Peripheral.publishL2CAPChannel`).
    private var published: [UInt16: ChannelListener] = [:]
    private var scanners: [Int: Scanner] = [:]
    private var nextScannerID = 0
    /// Periodic syncs' report streams (PeriodicAdvertising.swift), and the one whose Create
    /// Sync is pending (a controller has one at a time, Core v5.4 Vol 4 Part E 7.8.67).
    var periodicStreams: [UInt16: AsyncThrowingStream<PeriodicReport, any Error>.Continuation] = [:]
    var syncStreamAwaitingEstablishment: (advertiser: DeviceAddress, sid: UInt8,
                                          continuation: AsyncThrowingStream<PeriodicReport, any Error>.Continuation)?
    private var linkObservers: [@Sendable (LinkEvent) -> Void] = []
    private var eventTask: Task<Void, Never>?
    private(set) var lostReason: String?
    /// Repeated-attempts protection across links (Core Vol 3 Part H 2.3.6).
    private let pairingAttempts = SMPAttemptTracker()
    /// Our identity address: bonds are filed under it (never under an RPA).
    nonisolated let localIdentity: DeviceAddress
    /// Our RPA, when `options.privacy` is set.
    nonisolated let privacy: LocalPrivacy?
    nonisolated let peers: PeerResolver

    struct Scanner {
        var filter: ScanFilter
        var everyReport: Bool
        var tracker = AdvertisementTracker()
        var continuation: AsyncThrowingStream<Advertisement, any Error>.Continuation
    }

    enum LinkEvent: Sendable {
        case connected(Link)
        case disconnected(Link, HCIStatus)
        /// LE Connection Update Complete with success (Core v5.4 Vol 4 Part E 7.7.65.3).
        case parametersUpdated(Link, ConnectionParameters)
        case transportLost(String)
    }

    private init(host: Host, transport: any HCITransport, options: StackOptions, controller: ControllerInfo,
                 localIdentity: DeviceAddress, privacy: LocalPrivacy?) {
        self.host = host
        self.transport = transport
        self.options = options
        self.controller = controller
        self.localIdentity = localIdentity
        self.privacy = privacy
        let directory = options.security.bondDirectory, log = options.log
        peers = PeerResolver { directory.flatMap { BondStores.store(directory: $0, localIdentity: localIdentity, create: false, log: log) } }
    }

    static func open(_ transport: any HCITransport, options: StackOptions) async throws -> Stack {
        var hostConfig = options.host
        if hostConfig.log == nil { hostConfig.log = options.log }
        let host = Host(transport: transport, configuration: hostConfig)
        let info: ControllerInfo
        do {
            info = try await host.start()
        } catch {
            await host.close()
            throw error
        }
        let identity = await host.identityAddress
        var options = options
        var privacy: LocalPrivacy?
        if let p = options.privacy {
            do {
                let irk = try options.security.bondDirectory.map {
                    guard let store = BondStores.store(directory: $0, localIdentity: identity, create: true, log: options.log) else {
                        throw BLEError.securityFailed("privacy: the bond directory \($0) cannot hold our IRK")
                    }
                    return try store.localIRK()
                } ?? SMPCrypto.randomBytes(16)   // no bond directory: an IRK for this run only
                let local = SMPIdentity(irk: irk, address: identity)
                privacy = LocalPrivacy(identity: local, rotation: p.rotation)
                // Bonded peers get our IRK and identity, to recognise us behind our RPAs.
                options.security.smp.localIdentity = local
            } catch {
                await host.close()
                throw error
            }
        }
        // The bond file is read here, in the caller's task, not at the first LTK request or
        // Signed Write on the host's loop (a damaged file is reported when a link uses it).
        var bonds: [SMPBond] = []
        if let dir = options.security.bondDirectory,
           let store = BondStores.store(directory: dir, localIdentity: identity, create: false, log: options.log) {
            bonds = (try? store.bonds()) ?? []
        }
        // Bonded peers with an IRK go into the controller's resolving list (Core v5.4 Vol 6 Part
        // B 6); when it refuses or has no room, the host's own resolution (PeerResolver) does it.
        let resolvable = bonds.compactMap { bond in
            bond.peerIRK.map { ResolvingListEntry(identity: bond.peer, peerIRK: $0, localIRK: options.security.smp.localIdentity?.irk) }
        }
        if let refusal = await host.loadResolvingList(resolvable) {
            options.log?("controller resolving list not used (\(refusal)); the host resolves bonded peers' private addresses itself")
        } else if let privacy, let entry = resolvable.last {
            await Stack.useControllerPrivacy(privacy, entry: entry.identity, host: host, log: options.log)
        }
        let stack = Stack(host: host, transport: transport, options: options, controller: info, localIdentity: identity, privacy: privacy)
        await stack.startEventLoop()
        return stack
    }

    private func startEventLoop() {
        let events = host.events
        eventTask = Task {
            for await event in events { await self.handle(event) }
            self.eventsEnded()
        }
    }

    func setServer(_ server: GATTServer) {
        self.server = server
        let directory = options.security.bondDirectory, identity = localIdentity, log = options.log
        server.setSignedWriteVerifier(BondedSignedWrites(bonds: {
            directory.flatMap { BondStores.store(directory: $0, localIdentity: identity, create: false, log: log) }
        }, log: log))
    }
    func observeLinks(_ observer: @escaping @Sendable (LinkEvent) -> Void) { linkObservers.append(observer) }

    private func handle(_ event: HostEvent) async {
        switch event {
        case .advertisement(let report):
            for (id, var s) in scanners {
                if var adv = s.tracker.update(with: report, everyReport: s.everyReport) {
                    adv.identity = Self.controllerResolvedIdentity(adv.address) ?? peers.identity(of: adv.address)
                    if s.filter.matches(adv) { s.continuation.yield(adv) }
                }
                scanners[id] = s
            }
        case .connected(let connection):
            let link = await self.link(for: connection)
            for o in linkObservers { o(.connected(link)) }
        case .disconnected(let handle, let reason):
            guard let task = links.removeValue(forKey: handle) else { return }
            let link = await task.value  // its security heard the disconnection from the host
            link.markDisconnected(reason)
            for o in linkObservers { o(.disconnected(link, reason)) }
        case .connectionUpdated(let handle, let status, let parameters):
            guard status == .success, let task = links[handle] else { return }
            let link = await task.value
            for o in linkObservers { o(.parametersUpdated(link, parameters)) }
        case .transportLost(let error):
            lose("the controller transport was lost: \(error)")
        case .hardwareError(let code):
            lose("the controller reported Hardware Error \(hexCode(code))")
        case .encryptionChanged, .longTermKeyRequest:
            break  // the link's own: its layers hear them (`HostLinkLayer.linkEvent`)
        case .warning(let text):
            options.log?(text)
        case .periodicSyncEstablished, .periodicReport, .periodicSyncLost:
            periodicEvent(event)
        default:
            break
        }
    }

    /// An address the controller reports typed Public/Random Identity Address (0x02/0x03, Core
    /// v5.4 Vol 4 Part E 7.7.65.13) is a peer of its resolving list resolved from its RPA: the
    /// identity itself.
    static func controllerResolvedIdentity(_ a: DeviceAddress) -> DeviceAddress? {
        switch a.type {
        case .publicIdentity: DeviceAddress(a.address, type: .public)
        case .randomIdentity: DeviceAddress(a.address, type: .random)
        case .public, .random: nil
        }
    }

    private func eventsEnded() { lose("the host stopped") }

    private func lose(_ reason: String) {
        guard lostReason == nil else { return }
        lostReason = reason
        for (_, s) in scanners { s.continuation.finish(throwing: BLEError.transport(TransportError(.lost, reason))) }
        scanners = [:]
        for (_, s) in periodicStreams { s.finish(throwing: BLEError.transport(TransportError(.lost, reason))) }
        periodicStreams = [:]
        for o in linkObservers { o(.transportLost(reason)) }
        let pending = links
        links = [:]
        Task {
            for (_, t) in pending {
                // (The host told each link's security when it failed.)
                await t.value.markDisconnected(.unspecifiedError)
            }
        }
    }

    /// The bond store for a local identity address (nil without a bond directory, or when it
    /// can't be opened: logged).
    func bondStore(for local: DeviceAddress) -> SMPBondStore? {
        guard let dir = options.security.bondDirectory else { return nil }
        return BondStores.store(directory: dir, localIdentity: local, create: false, log: options.log)
    }

    /// The link for a connection, set up once: L2CAP, ATT bearer (server and client), SMP.
    func link(for connection: LEConnection) async -> Link {
        if let existing = links[connection.handle] { return await existing.value }
        let server = self.server
        let options = self.options
        let bonds = bondStore(for: localIdentity)
        let attempts = pairingAttempts
        let pairingDelegate = options.pairingDelegate
        let published = self.published
        let slot = LinkSlot()
        let task = Task { [host] () -> Link in
            // Set up in one job of the host: the layers are made, registered and attached there
            // (frames that arrive meanwhile wait in the link's route and are handed over first).
            let (secureNow, att) = await host.run { host -> (Bool, ATTLink) in
                var l2capConfig = L2CAPConfiguration()
                l2capConfig.signalingTimeout = options.signalingTimeout
                l2capConfig.log = options.log
                let l2cap = L2CAPConnection(connection: connection, configuration: l2capConfig)
                l2cap.setConnectionParameterPolicy(options.connectionParameterPolicy)
                var attConfig = ATTBearerConfiguration()
                attConfig.transactionTimeout = options.attTimeout
                attConfig.asyncHandlerTimeout = options.asyncHandlerTimeout
                attConfig.log = options.log
                let bearer = ATTBearer(connection: connection, host: host, configuration: attConfig)
                bearer.start(host: host)
                let security = LinkSecurity(connection: connection, clock: options.host.clock, bearer: bearer,
                                            configuration: options.security, bonds: bonds,
                                            delegate: pairingDelegate, attempts: attempts, log: options.log,
                                            bonded: { [privacy] bond, host in Stack.bondJoinsResolvingList(bond, privacy: privacy, log: options.log, host: host) })
                security.prepare()
                let automatic = connection.role == .central && options.security.automaticSecurity
                let bearers = ATTBearers(fixed: bearer)
                let requester: any ATTRequester = automatic ? SecuringRequester(bearers: bearers, security: security, connection: connection, host: host) : bearers
                let client = GATTClient(requester: requester)
                bearer.setNotificationHandler { pdu in await client.received(pdu) }
                bearer.setNotificationFastHandler { pdu in client.deliverNotification(pdu) }
                if connection.role == .peripheral { for (psm, l) in published { l.listen(psm, on: l2cap, link: slot) } }
                if options.enhancedATT { Self.serveEnhancedATT(on: l2cap, security: security, connection: connection) }
                l2cap.setFixedChannel(.att, bearer, host: host)
                l2cap.setFixedChannel(.smp, security, host: host)
                if let server { await bearer.setServerDelegate(server, host: host) }
                host.attach(LinkLayers(l2cap: l2cap, bearers: bearers, security: security, client: client, slot: slot), to: connection)
                return (connection.role == .peripheral ? options.security.requestSecurityOnConnect
                    : options.security.encryptBondedLinks && security.hasBond(), bearer.link)
            }
            let link = Link(connection: connection, host: host, att: att)
            slot.set(link)
            if secureNow { Task { _ = try? await link.run { layers, host in try await layers.security.secure(host: host) } } }
            return link
        }
        links[connection.handle] = task
        return await task.value
    }

    /// Accepts Enhanced ATT bearers on the link, on an encrypted link only (Core v5.4 Vol 3 Part
    /// G 5.3.2; otherwise every channel is refused, result 0x0008, Part A 4.26). Each joins the
    /// link's bearers: the server answers on it, the client may spread requests over it.
    static func serveEnhancedATT(on l2cap: L2CAPConnection, security: LinkSecurity, connection: LEConnection) {
        l2cap.listen(psm: EnhancedATTBearer.psm, mtu: 517, mps: 247, credits: 8, enhanced: true,
                     admit: { security.state.encrypted ? .successful : .insufficientEncryption }) { channel in
            // Its SDUs wait in the channel until the bearer takes them.
            Task {
                _ = try? await channel.host.run { host in
                    let layers = try Link.layers(of: connection, on: host)
                    layers.bearers.add(try EnhancedATTBearer.attach([channel], fixed: layers.bearer, host: host))
                }
            }
        }
    }

    /// Publishes `listener` on `psm`, or the first free SPSM of the dynamic range (0x0080–0x00FF,
    /// Core v5.4 Vol 3 Part A 4.22) when nil; every link the peripheral serves accepts it, those
    /// up now and those to come. Returns the SPSM.
    func publish(psm: UInt16?, _ listener: ChannelListener) async throws -> UInt16 {
        if let psm, !(0x0001...0x00FF).contains(psm) {
            throw BLEError.notPermitted("SPSM \(hexCode(psm)) is outside 0x0001–0x00FF (Core v5.4 Vol 3 Part A 4.22)")
        }
        if let psm, published[psm] != nil { throw BLEError.notPermitted("SPSM \(hexCode(psm)) is already published") }
        guard let spsm = psm ?? (UInt16(0x0080)...0x00FF).first(where: { published[$0] == nil }) else {
            throw BLEError.notPermitted("every dynamic SPSM (0x0080–0x00FF) is published already")
        }
        published[spsm] = listener
        for link in await currentLinks() where link.connection.role == .peripheral {
            _ = try? await link.run { layers, _ in listener.listen(spsm, on: layers.l2cap, link: LinkSlot(link)) }
        }
        return spsm
    }

    /// Stops accepting channels on `psm` (open ones stay open); ends the stream of channels.
    func unpublish(psm: UInt16) async {
        guard let listener = published.removeValue(forKey: psm) else { return }
        for link in await currentLinks() where link.connection.role == .peripheral {
            _ = try? await link.run { layers, _ in layers.l2cap.stopListening(psm: psm) }
        }
        listener.finish()
    }

    /// Every link that is up (set up by the stack), by connection handle.
    func currentLinks() async -> [Link] {
        var up: [Link] = []
        for handle in links.keys.sorted() {
            if let task = links[handle] { up.append(await task.value) }
        }
        return up.filter { $0.disconnectReason == nil }
    }

    /// The link with `handle`, if it is up.
    func existingLink(_ handle: UInt16) async -> Link? {
        guard let task = links[handle] else { return nil }
        return await task.value
    }

    /// The own address for advertising, scanning and connecting: the current RPA with privacy.
    nonisolated var ownAddress: OwnAddress { privacy.map { $0.ownAddress($0.address()) } ?? .public }

    /// A bond made during the run: its peer joins the controller's resolving list now (not at
    /// the next start; queued at once, in the host's isolation, so the next advertising, scan
    /// or connect has it), and its next connection is resolved by the controller; with
    /// privacy, the controller then makes our RPA from that entry too.
    static func bondJoinsResolvingList(_ bond: SMPBond, privacy: LocalPrivacy?, log: (@Sendable (String) -> Void)?, host: isolated Host) {
        guard let irk = bond.peerIRK else { return }
        guard host.queueResolvingListEntry(ResolvingListEntry(identity: bond.peer, peerIRK: irk, localIRK: privacy?.identity.irk)) else { return }
        // Set now, so the advertising restarted after this link uses it (a controller without
        // LL Privacy is left to the host at once).
        let firstEntry = host.controllerPrivacyMissing == nil && privacy?.controllerEntry.withLock { entry in
            defer { if entry == nil { entry = bond.peer } }
            return entry == nil
        } == true
        host.spawn {
            await host.flushResolvingListWhenIdle()
            if firstEntry, let privacy { await useControllerPrivacy(privacy, entry: bond.peer, host: host, log: log) }
        }
    }

    /// Lets the controller make our RPA from the resolving list entry of `entry` (which holds
    /// our IRK) once it takes the RPA timeout (7.8.45), or says in the log why the host keeps
    /// making it.
    static func useControllerPrivacy(_ privacy: LocalPrivacy, entry: DeviceAddress, host: Host, log: (@Sendable (String) -> Void)?) async {
        privacy.controllerEntry.withLock { $0 = entry }
        if let refusal = await host.prepareControllerPrivacy(rotation: privacy.rotation) {
            privacy.controllerEntry.withLock { $0 = nil }
            log?("the controller does not make our resolvable private address (\(refusal)); the host makes it")
        }
    }

    /// The own address for connecting: as `ownAddress`, but while scanning the RPA in use is kept
    /// (it cannot change under an enabled scan); the next scan or advertising moves on.
    func ownAddressForConnecting() async -> OwnAddress {
        guard let privacy else { return .public }
        return privacy.ownAddress(await host.isScanning ? privacy.currentAddress() : privacy.address())
    }

    // MARK: Scanning

    func scan(filter: ScanFilter, active: Bool, everyReport: Bool) async throws -> AsyncThrowingStream<Advertisement, any Error> {
        if let lostReason { throw BLEError.transport(TransportError(.lost, lostReason)) }
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: Advertisement.self, bufferingPolicy: .bufferingNewest(1024))
        let id = nextScannerID
        nextScannerID += 1
        let wasIdle = scanners.isEmpty
        scanners[id] = Scanner(filter: filter, everyReport: everyReport, continuation: continuation)
        continuation.onTermination = { _ in
            Task { await self.stopScanner(id) }
        }
        if wasIdle {
            do {
                // Duplicate filtering stays off so changes (and RSSI) keep arriving; the tracker dedups.
                try await host.startScanning(ScanParameters(active: active, filterDuplicates: false, ownAddress: ownAddress))
            } catch {
                scanners[id] = nil
                throw error
            }
        }
        return stream
    }

    private func stopScanner(_ id: Int) async {
        guard scanners.removeValue(forKey: id) != nil, scanners.isEmpty, lostReason == nil else { return }
        try? await host.stopScanning()
    }

    func close() async {
        for (_, l) in published { l.finish() }
        published = [:]
        for (_, s) in scanners { s.continuation.finish() }
        scanners = [:]
        for (_, s) in periodicStreams { s.finish() }
        periodicStreams = [:]
        for (handle, _) in links {
            _ = try? await host.disconnect(handle: handle, reason: .remoteUserTerminated, timeout: .seconds(2))
        }
        eventTask?.cancel()
        await host.close()
        transport.close()
        // Bonds saved during the run are written by each store's writer: on disk before the
        // program that closes the stack exits.
        await BondStores.flushAll(log: options.log)
    }
}

/// A published LE credit-based channel's parameters and where its accepted channels go.
struct ChannelListener: Sendable {
    let mtu: UInt16?
    let mps: UInt16?
    let credits: UInt16?
    let channels: AsyncStream<L2CAPChannel>.Continuation

    func listen(_ psm: UInt16, on l2cap: L2CAPConnection, link: LinkSlot) {
        let channels = channels
        l2cap.listen(psm: psm, mtu: mtu, mps: mps, credits: credits) { channels.yield(L2CAPChannel($0, link: link)) }
    }

    func finish() { channels.finish() }
}

/// A value set once that any number of tasks can wait for.
final class OneShot<Value: Sendable>: Sendable {
    typealias Observer = @Sendable (Value) -> Void
    private struct State {
        var stored: Value?
        var waiters: [CheckedContinuation<Value, Never>] = []
        var observers: [Int: Observer] = [:]
        var nextToken = 0
    }
    private let state = Mutex(State())

    var value: Value? { state.withLock { $0.stored } }

    func fulfil(_ v: Value) {
        let (ws, os): ([CheckedContinuation<Value, Never>], [Observer]) = state.withLock {
            guard $0.stored == nil else { return ([], []) }
            $0.stored = v
            let taken = ($0.waiters, Array($0.observers.values))
            $0.waiters = []
            $0.observers = [:]
            return taken
        }
        for w in ws { w.resume(returning: v) }
        for o in os { o(v) }
    }

    func wait() async -> Value {
        await withCheckedContinuation { (c: CheckedContinuation<Value, Never>) in
            let ready: Value? = state.withLock {
                if let s = $0.stored { return s }
                $0.waiters.append(c)
                return nil
            }
            if let ready { c.resume(returning: ready) }
        }
    }

    /// Calls `observer` once with the value (at once if it is already set). Returns a token for
    /// `removeObserver`, so short-lived watchers (one per subscription) don't pile up.
    @discardableResult
    func observe(_ observer: @escaping Observer) -> Int? {
        let (token, ready): (Int?, Value?) = state.withLock {
            if let s = $0.stored { return (nil, s) }
            let t = $0.nextToken
            $0.nextToken += 1
            $0.observers[t] = observer
            return (t, nil)
        }
        if let ready { observer(ready) }
        return token
    }

    func removeObserver(_ token: Int?) {
        guard let token else { return }
        _ = state.withLock { $0.observers.removeValue(forKey: token) }
    }
}
