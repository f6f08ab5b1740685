import HCI
import ATT
import Synchronization

/// What the application hears from a `GATTServer`.
public enum GATTServerEvent: Sendable, Equatable {
    case connected(ATTPeer)
    case disconnected(ATTPeer)
    /// The peer wrote a non-zero CCCD of the characteristic (`indications`: bit 1 set).
    case subscribed(ATTPeer, BluetoothUUID, indications: Bool)
    /// The peer wrote the CCCD back to zero.
    case unsubscribed(ATTPeer, BluetoothUUID)
    /// The peer wrote a characteristic value (Write Request, Write Command or Execute Write).
    case wrote(ATTPeer, BluetoothUUID, [UInt8])
    /// The peer read a characteristic value (Read, Read Blob, Read By Type, Read Multiple).
    case read(ATTPeer, BluetoothUUID)
    /// Every request the server answered, with its answer (an Error Response when refused):
    /// for logs that show descriptor reads, discovery and refusals as well. Only with
    /// `Configuration.reportsAnswers`.
    case answered(ATTPeer, request: ATTPDU, response: ATTPDU)
}

/// Checks the Authentication Signature of an ATT Signed Write Command (Core Vol 3 Part H 2.4.5)
/// with the CSRK bonded with `peer`, refusing a SignCounter already used. Returns the security
/// the signing key stands for (its pairing's authentication and key size), or nil to ignore the
/// command.
public protocol GATTSignedWriteVerifier: Sendable {
    func verify(peer: ATTPeer, message: [UInt8], signature: [UInt8]) -> ATTSecurity?
}

/// The GATT server: the attribute database plus per-peer state (CCCDs, Client Supported
/// Features, prepare queue). It answers decoded requests synchronously under one lock (no
/// actor hop); application handlers run outside the lock. As an
/// `ATTSynchronousServerDelegate` (`response(to:from:mtu:security:)`) it lets the ATT bearer answer
/// requests within the host's handling of the frame, with no task hop.
public final class GATTServer: ATTSynchronousServerDelegate, Sendable {
    public struct Configuration: Sendable {
        /// Generic Access Device Name.
        public var deviceName: String
        /// Generic Access Appearance (Assigned Numbers 2.6).
        public var appearance: UInt16
        /// Prepared writes queued per peer before Prepare Queue Full.
        public var prepareQueueLimit: Int
        /// Events kept for a slow consumer (oldest dropped beyond).
        public var eventBufferLimit: Int
        /// Also report every answered request (`GATTServerEvent.answered`), for request logs.
        public var reportsAnswers: Bool
        /// The Server Supported Features value (Core v5.4 Vol 3 Part G 7.4; bit 0: EATT
        /// supported); empty: the characteristic is left out.
        public var serverFeatures: [UInt8]
        public init(deviceName: String = "ble-hci", appearance: UInt16 = 0, prepareQueueLimit: Int = 128,
                    eventBufferLimit: Int = 256, reportsAnswers: Bool = false, serverFeatures: [UInt8] = []) {
            self.deviceName = deviceName; self.appearance = appearance
            self.prepareQueueLimit = prepareQueueLimit; self.eventBufferLimit = eventBufferLimit
            self.reportsAnswers = reportsAnswers
            self.serverFeatures = serverFeatures
        }
    }

    struct Prepared: Sendable { let handle: UInt16; let offset: Int; let value: [UInt8] }

    /// A connected peer as a push needs it, made once when it connects: a push takes it out of
    /// the lock as one reference (not an existential, copied through its value witnesses).
    final class Pusher: Sendable {
        let id: UInt16
        let push: any ATTServerPush
        /// This peer alone as a push's result: a notification to the one subscriber (the
        /// usual case) returns it without allocating an array.
        let alone: Reached
        init(id: UInt16, push: any ATTServerPush) {
            self.id = id; self.push = push; alone = Reached(peers: [ATTPeer(id: id)])
        }
    }

    struct PeerState: Sendable {
        let pusher: Pusher
        var cccd: [UInt16: UInt16] = [:]
        var clientFeatures: [UInt8] = [0]
        var queue: [Prepared] = []
    }

    /// A peer whose CCCD of a characteristic is not zero: what a push to it needs.
    struct Subscription: Sendable {
        let pusher: Pusher
        /// The CCCD's value: bit 0 notifications, bit 1 indications.
        let bits: UInt16
    }

    struct State: Sendable {
        var table: AttributeTable
        var peers: [UInt16: PeerState] = [:]
        /// The subscribers of each characteristic (indexed as `table.characteristics`), by
        /// connection handle: made again (`reindex`) whenever a CCCD, a peer or the table
        /// changes, so that a push reads its targets in place instead of hashing into every
        /// peer's CCCDs.
        private(set) var subscriptions: [[Subscription]] = []
        /// The characteristic last pushed by UUID: a stream of pushes of one characteristic
        /// (the usual case) skips the search by UUID. Cleared by `reindex`.
        private var lastPushed: (uuid: BluetoothUUID, index: Int)?

        init(table: AttributeTable) {
            self.table = table
            reindex()
        }

        mutating func reindex() {
            lastPushed = nil
            subscriptions = table.characteristics.map { c in
                guard let cccd = c.cccdHandle else { return [] }
                return peers.compactMap { id, p -> Subscription? in
                    guard let bits = p.cccd[cccd], bits != 0 else { return nil }
                    return Subscription(pusher: p.pusher, bits: bits)
                }.sorted { $0.pusher.id < $1.pusher.id }
            }
        }

        /// The index of the first characteristic with `uuid` (when given), else with value `handle`.
        mutating func characteristicIndex(uuid: BluetoothUUID?, handle: UInt16?) -> Int? {
            guard let uuid else { return table.characteristics.firstIndex { $0.valueHandle == handle } }
            if let last = lastPushed, last.uuid == uuid { return last.index }
            guard let i = table.characteristics.firstIndex(where: { $0.uuid == uuid }) else { return nil }
            lastPushed = (uuid, i)
            return i
        }
    }

    public let configuration: Configuration
    private let state: Mutex<State>
    /// Whether the table's Database Hash is computed: on the first request answered (or
    /// `databaseHash`), not when the server is made (see `AttributeTable.computeHashIfNeeded`).
    private let hashReady = Atomic<Bool>(false)
    /// Some attribute has asynchronous handlers (the table's `hasAsyncHandlers`, read without the
    /// lock per request: a server without them answers every request `.now`).
    private let asyncHandlers: Atomic<Bool>
    /// Checks Signed Write Commands; none: they are ignored (GATT holds no keys).
    private let signedWrites = Mutex<(any GATTSignedWriteVerifier)?>(nil)
    /// Application events; one consumer. Empty while an event handler is set (`setEventHandler`).
    public let events: AsyncStream<GATTServerEvent>
    private let sink: AsyncStream<GATTServerEvent>.Continuation
    /// Receives the events instead of `events` when set. (In a struct: a closure held directly
    /// as a `Mutex`'s generic value gains a reabstraction thunk at every `withLock` access.)
    private struct EventHandler { let handle: @Sendable (GATTServerEvent) -> Void }
    private let eventHandler = Mutex<EventHandler?>(nil)

    public convenience init(services: [GATTService], configuration: Configuration = Configuration()) {
        self.init(table: AttributeTable(deviceName: configuration.deviceName, appearance: configuration.appearance,
                                        services: services, serverFeatures: configuration.serverFeatures), configuration: configuration)
    }

    /// A server with `template`'s database as it stands (handles, values, hash) and no peer
    /// state, event consumer or signed-write verifier: a fresh server without rebuilding the
    /// table and its hash (the ATT server fuzz target makes one per input).
    public convenience init(copying template: GATTServer) {
        template.computeHashIfNeeded()
        self.init(table: template.state.withLock { $0.table }, configuration: template.configuration)
    }

    private init(table: AttributeTable, configuration: Configuration) {
        self.configuration = configuration
        asyncHandlers = Atomic(table.hasAsyncHandlers)
        state = Mutex(State(table: table))
        (events, sink) = AsyncStream.makeStream(of: GATTServerEvent.self,
                                                bufferingPolicy: .bufferingNewest(max(1, configuration.eventBufferLimit)))
    }

    deinit { sink.finish() }

    /// Hands every later event to `handler`, synchronously, where it happens (an event caused
    /// by a request: on the host's executor, while the request is answered), instead of to
    /// `events`; nil goes back to `events`. For a layer that relays the events (`Peripheral`):
    /// no stream, task or hop per event in between.
    public func setEventHandler(_ handler: (@Sendable (GATTServerEvent) -> Void)?) {
        eventHandler.withLock { $0 = handler.map(EventHandler.init) }
    }

    private func emit(_ event: GATTServerEvent) {
        if let handler = eventHandler.withLock({ $0 }) { handler.handle(event) } else { sink.yield(event) }
    }

    /// Installs what checks the signature of Signed Write Commands (the stack, which holds the
    /// bonds' CSRKs: GATT sits below SMP in the module graph).
    public func setSignedWriteVerifier(_ verifier: (any GATTSignedWriteVerifier)?) {
        signedWrites.withLock { $0 = verifier }
    }

    // MARK: Application API

    /// The Database Hash the server publishes (little-endian, as read over the air).
    public var databaseHash: [UInt8] {
        computeHashIfNeeded()
        return state.withLock { $0.table.hash }
    }

    private func computeHashIfNeeded() {
        guard !hashReady.load(ordering: .acquiring) else { return }
        state.withLock { $0.table.computeHashIfNeeded() }
        hashReady.store(true, ordering: .releasing)
    }

    /// Why `services`' explicit handles (`GATTService.startHandle`, ...) cannot be served as
    /// given, so that the server assigns handles instead; nil when they can (or there are none).
    public static func explicitHandleProblem(_ services: [GATTService]) -> String? {
        AttributeTable.explicitLayout(services).problem
    }

    /// Every attribute as (handle, type): for diagnostics and tests.
    public var attributeTypes: [(handle: UInt16, type: BluetoothUUID)] {
        state.withLock { $0.table.attributes.map { ($0.handle, $0.type) } }
    }

    /// The value handle of the first characteristic with `uuid`.
    public func valueHandle(of uuid: BluetoothUUID) -> UInt16? {
        state.withLock { $0.table.characteristics.first { $0.uuid == uuid }?.valueHandle }
    }

    /// The stored value of the first characteristic with `uuid` (nil for handler-backed ones).
    public func value(of uuid: BluetoothUUID) -> [UInt8]? {
        if uuid == GATTUUID.databaseHash { computeHashIfNeeded() }
        return state.withLock { s in
            guard let h = s.table.characteristics.first(where: { $0.uuid == uuid })?.valueHandle,
                  let i = s.table.index(h), case .stored = s.table.attributes[i].kind else { return nil }
            return s.table.attributes[i].value
        }
    }

    /// Replaces the stored value of the first characteristic with `uuid` (does not notify).
    @discardableResult
    public func setValue(_ value: [UInt8], of uuid: BluetoothUUID) -> Bool {
        state.withLock { s in
            guard let h = s.table.characteristics.first(where: { $0.uuid == uuid })?.valueHandle,
                  let i = s.table.index(h), case .stored = s.table.attributes[i].kind else { return false }
            s.table.attributes[i].value = value
            return true
        }
    }

    /// Peers whose CCCD of the characteristic has `bit` (1 notifications, 2 indications) set.
    public func subscribers(of uuid: BluetoothUUID, indications: Bool = false) -> [ATTPeer] {
        state.withLock { s in
            guard let ci = s.table.characteristics.firstIndex(where: { $0.uuid == uuid }) else { return [] }
            let bit: UInt16 = indications ? 2 : 1
            return s.subscriptions[ci].filter { $0.bits & bit != 0 }.map { ATTPeer(id: $0.pusher.id) }
        }
    }

    /// Notifies the characteristic's value to every peer that enabled notifications (or only to
    /// `peers` among them), truncated to ATT_MTU − 3. Returns the peers it was sent to; a peer
    /// whose link fails, or lacks the security a read of the value needs (encryption, key size,
    /// authentication, authorization), is left out. Waits for each send (back-pressure of the link).
    @discardableResult
    public func notify(characteristic uuid: BluetoothUUID, value: [UInt8], to peers: [ATTPeer]? = nil) async -> [ATTPeer] {
        await push(uuid: uuid, handle: nil, value: value, to: peers, indicate: false)
    }

    /// Notifies several characteristics at once (each value cut to ATT_MTU − 3, as `notify`
    /// does). A peer subscribed to two or more of them that set bit 2 of its Client Supported
    /// Features (Multiple Handle Value Notifications, Core v5.4 Vol 3 Part G 7.2) gets them
    /// together in Multiple Handle Value Notifications (Part F 3.4.7.4), as many as fit ATT_MTU
    /// in each; other peers get them one by one. Returns the peers that got all of theirs.
    @discardableResult
    public func notifyMultiple(_ values: [(characteristic: BluetoothUUID, value: [UInt8])], to peers: [ATTPeer]? = nil) async -> [ATTPeer] {
        var items: [UInt16: (push: any ATTServerPush, list: [ATTHandleValue])] = [:]
        for (uuid, value) in values {
            let (first, more) = pushTargets(uuid: uuid, handle: nil, to: peers, bit: 1)
            for t in (first.map { [$0] } ?? []) + more {
                items[t.pusher.id, default: (t.pusher.push, [])].list.append(ATTHandleValue(handle: t.valueHandle, value: value))
            }
        }
        let together = state.withLock { s in Set(items.keys.filter { (s.peers[$0]?.clientFeatures.first ?? 0) & 0x04 != 0 }) }
        var reached: [ATTPeer] = []
        for id in items.keys.sorted() {
            guard let (push, list) = items[id] else { continue }
            let mtu = push.mtu
            let cut = list.map { ATTHandleValue(handle: $0.handle, value: ATTLink.cut($0.value, toFit: mtu)) }
            do {
                for batch in together.contains(id) ? Self.batches(cut, mtu: mtu) : cut.map({ [$0] }) {
                    if batch.count == 1 { try await push.notify(handle: batch[0].handle, value: batch[0].value) } else { try await push.notifyMultiple(batch) }
                }
                reached.append(ATTPeer(id: id))
            } catch {
                continue
            }
        }
        return reached
    }

    /// `items` in order, packed into PDUs of at most `mtu` octets: the opcode, then a handle,
    /// a length and the value per item (Core v5.4 Vol 3 Part F 3.4.7.4).
    static func batches(_ items: [ATTHandleValue], mtu: Int) -> [[ATTHandleValue]] {
        var out: [[ATTHandleValue]] = [], current: [ATTHandleValue] = [], size = 1
        for item in items {
            let n = 4 + item.value.count
            if !current.isEmpty, size + n > mtu {
                out.append(current)
                (current, size) = ([], 1)
            }
            current.append(item)
            size += n
        }
        if !current.isEmpty { out.append(current) }
        return out
    }

    /// `notify` by value handle.
    @discardableResult
    public func notify(handle: UInt16, value: [UInt8], to peers: [ATTPeer]? = nil) async -> [ATTPeer] {
        await push(uuid: nil, handle: handle, value: value, to: peers, indicate: false)
    }

    /// `notify(characteristic:value:to:)` returning the connection handles reached (for
    /// `Peripheral.notify`, which answers with handles: no array mapped per notification), and
    /// refusing a value longer than a target's ATT_MTU − 3 instead of cutting it: nothing is
    /// sent then, and the error names the first such peer and its maximum.
    package nonisolated(nonsending) func notify(characteristic uuid: BluetoothUUID, value: [UInt8],
                                                toHandles handles: [UInt16]?) async throws(GATTPushError) -> [UInt16] {
        // The targets are found once: checked, then sent to (no second search of the index).
        let (first, more) = pushTargets(uuid: uuid, handle: nil, to: handles.map { $0.map { ATTPeer(id: $0) } }, bit: 1)
        guard let first else { return [] }
        if let (peer, maximum) = Self.firstTooShort(first, more, for: value.count) {
            throw .valueTooLong(length: value.count, maximum: maximum, peer: peer)
        }
        return await notify(first, more, value: value).handles
    }

    /// Notifies `values` of the characteristic, in order, to each subscriber (or those on
    /// `handles`), each subscriber's in one entry into its host (`ATTServerPush.notify(handle:values:)`);
    /// a value longer than a subscriber's ATT_MTU − 3 is left out for it, as `notify` refuses it.
    /// For a queue of values offered without waiting (`Peripheral.updateValue`).
    package nonisolated(nonsending) func notify(characteristic uuid: BluetoothUUID, values: [[UInt8]], toHandles handles: [UInt16]?) async {
        let (first, more) = pushTargets(uuid: uuid, handle: nil, to: handles.map { $0.map { ATTPeer(id: $0) } }, bit: 1)
        guard let first else { return }
        for t in [first] + more {
            let maximum = t.pusher.push.mtu - 3
            try? await t.pusher.push.notify(handle: t.valueHandle, values: values.filter { $0.count <= maximum })
        }
    }

    /// The first subscriber (notifications: `bit` 1, indications: 2) of the characteristic whose
    /// link cannot carry a value of `length` in one PDU (ATT_MTU − 3, Core v5.4 Vol 3 Part F
    /// 3.4.7.1), with its maximum.
    package func firstTooShort(uuid: BluetoothUUID, for length: Int, to peers: [ATTPeer]?, bit: UInt16) -> (ATTPeer, Int)? {
        let (first, more) = pushTargets(uuid: uuid, handle: nil, to: peers, bit: bit)
        guard let first else { return nil }
        return Self.firstTooShort(first, more, for: length)
    }

    /// The first of the targets whose ATT_MTU − 3 is below `length`, with that maximum.
    static func firstTooShort(_ first: PushTarget, _ more: [PushTarget], for length: Int) -> (ATTPeer, Int)? {
        if length <= ATTLink.defaultMTU - 3 { return nil }
        let mtu = first.pusher.push.mtu
        if mtu - 3 < length { return (ATTPeer(id: first.pusher.id), mtu - 3) }
        for t in more {
            let mtu = t.pusher.push.mtu
            if mtu - 3 < length { return (ATTPeer(id: t.pusher.id), mtu - 3) }
        }
        return nil
    }

    /// `indicate(characteristic:value:to:)` refusing a value longer than a target's
    /// ATT_MTU − 3 (nothing is indicated then), for `Peripheral.indicate`.
    package func indicateChecked(characteristic uuid: BluetoothUUID, value: [UInt8], to peers: [ATTPeer]?) async throws(GATTPushError) -> [ATTPeer] {
        if let (peer, maximum) = firstTooShort(uuid: uuid, for: value.count, to: peers, bit: 2) {
            throw .valueTooLong(length: value.count, maximum: maximum, peer: peer)
        }
        return await indicate(characteristic: uuid, value: value, to: peers)
    }

    /// Indicates the value to every peer that enabled indications (or `peers` among them) and
    /// whose link has the value's read security, all at once; returns the peers that confirmed
    /// (each within the bearer's timeout).
    @discardableResult
    public func indicate(characteristic uuid: BluetoothUUID, value: [UInt8], to peers: [ATTPeer]? = nil) async -> [ATTPeer] {
        await push(uuid: uuid, handle: nil, value: value, to: peers, indicate: true)
    }

    /// `indicate` by value handle.
    @discardableResult
    public func indicate(handle: UInt16, value: [UInt8], to peers: [ATTPeer]? = nil) async -> [ATTPeer] {
        await push(uuid: nil, handle: handle, value: value, to: peers, indicate: true)
    }

    /// Replaces the application's services: handles are laid out anew (as given when they are
    /// consistent, see `GATTService.startHandle`), the Database Hash recomputed, every peer's
    /// CCCDs (except Service Changed's) and prepare queue cleared, and Service Changed
    /// (0x0001–0xFFFF) indicated to the peers that enabled it. Returns those that confirmed.
    @discardableResult
    public func update(services: [GATTService]) async -> [ATTPeer] {
        var table = AttributeTable(deviceName: configuration.deviceName, appearance: configuration.appearance,
                                   services: services, serverFeatures: configuration.serverFeatures)
        table.computeHashIfNeeded()  // peers read it next (hashReady may already be set)
        if table.hasAsyncHandlers { asyncHandlers.store(true, ordering: .releasing) }
        let scHandle: UInt16 = state.withLock { s in
            let sc = s.table.characteristics.first { $0.valueHandle == s.table.serviceChangedHandle }?.cccdHandle
            s.table = table
            for id in s.peers.keys {
                let kept = sc.flatMap { s.peers[id]?.cccd[$0] }
                s.peers[id]?.cccd = [:]
                if let sc, let kept { s.peers[id]?.cccd[sc] = kept }
                s.peers[id]?.queue = []
            }
            s.reindex()
            return table.serviceChangedHandle
        }
        asyncHandlers.store(table.hasAsyncHandlers, ordering: .releasing)
        return await indicate(handle: scHandle, value: [0x01, 0x00, 0xFF, 0xFF])
    }

    /// The peers a push reached, and their connection handles. A class: a peer's result made
    /// once is handed on as one reference, not two arrays.
    final class Reached: Sendable {
        let peers: [ATTPeer]
        let handles: [UInt16]
        init(peers: [ATTPeer]) { self.peers = peers; handles = peers.map(\.id) }
        static let none = Reached(peers: [])
    }

    /// A peer a push goes to, and the value handle.
    struct PushTarget {
        let pusher: Pusher
        let valueHandle: UInt16
    }

    /// The peers subscribed to the characteristic (by `uuid`, else by value `handle`) for
    /// notifications (`bit` 1) or indications (2), among `peers` when given, ordered by
    /// connection handle. The first is kept apart so that the usual one subscriber needs no
    /// array. The subscribers come from the index kept with the CCCDs (`State.subscriptions`),
    /// read in place; the characteristic and the value attribute are read by index.
    func pushTargets(uuid: BluetoothUUID?, handle: UInt16?, to peers: [ATTPeer]?, bit: UInt16) -> (first: PushTarget?, more: [PushTarget]) {
        state.withLock { s in
            guard let ci = s.characteristicIndex(uuid: uuid, handle: handle), !s.subscriptions[ci].isEmpty else { return (nil, []) }
            let valueHandle = s.table.characteristics[ci].valueHandle
            guard let ai = s.table.index(valueHandle) else { return (nil, []) }
            let permissions = s.table.attributes[ai].permissions, keySize = s.table.attributes[ai].minimumKeySize
            let wanted = peers.map { Set($0.map(\.id)) }
            var first: PushTarget?
            var more: [PushTarget] = []
            for k in s.subscriptions[ci].indices {
                guard s.subscriptions[ci][k].bits & bit != 0 else { continue }
                let p = s.subscriptions[ci][k].pusher
                guard wanted?.contains(p.id) ?? true else { continue }
                // A notification or indication carries the value as a read does: not to a link
                // without the encryption, authentication, key size or authorization a read of it
                // needs (Core v5.4 Vol 3 Part F 3.2.5: the permissions guard the value, whatever
                // PDU carries it), asked per push: a link's security changes. The readable bit
                // is not asked: a notify-only value is pushed, never read.
                guard Self.securityDenial(permissions, minimumKeySize: keySize, write: false, p.push.security) == nil else { continue }
                let t = PushTarget(pusher: p, valueHandle: valueHandle)
                if first == nil { first = t } else { more.append(t) }
            }
            return (first, more)
        }
    }

    /// Notifies the targets one after the other (each send waits for the link's room).
    nonisolated(nonsending) func pushReaching(uuid: BluetoothUUID?, handle: UInt16?, value: [UInt8], to peers: [ATTPeer]?) async -> Reached {
        let (first, more) = pushTargets(uuid: uuid, handle: handle, to: peers, bit: 1)
        guard let first else { return .none }
        return await notify(first, more, value: value)
    }

    /// Notifies `first`, then `more`, one after the other (each send waits for the link's room).
    nonisolated(nonsending) func notify(_ first: PushTarget, _ more: [PushTarget], value: [UInt8]) async -> Reached {
        nonisolated(nonsending) func send(_ t: PushTarget) async -> Bool {
            // The bearer used in place (a copy of the existential goes through its value witnesses).
            let v = ATTLink.cut(value, toFit: t.pusher.push.mtu)
            do {
                if try t.pusher.push.notifyIfReady(handle: t.valueHandle, value: v) { return true }
                try await t.pusher.push.notify(handle: t.valueHandle, value: v)
                return true
            } catch { return false }
        }
        let firstSent = await send(first)
        if more.isEmpty { return firstSent ? first.pusher.alone : .none }
        var sent: [ATTPeer] = firstSent ? [ATTPeer(id: first.pusher.id)] : []
        for t in more { if await send(t) { sent.append(ATTPeer(id: t.pusher.id)) } }
        return Reached(peers: sent)
    }

    private func push(uuid: BluetoothUUID?, handle: UInt16?, value: [UInt8], to peers: [ATTPeer]?, indicate: Bool) async -> [ATTPeer] {
        if !indicate { return await pushReaching(uuid: uuid, handle: handle, value: value, to: peers).peers }
        let (first, more) = pushTargets(uuid: uuid, handle: handle, to: peers, bit: 2)
        let targets = (first.map { [$0] } ?? []) + more
        return await withTaskGroup(of: ATTPeer?.self) { group in
            for t in targets {
                let (peer, push, h) = (ATTPeer(id: t.pusher.id), t.pusher.push, t.valueHandle)
                group.addTask {
                    let v = ATTLink.cut(value, toFit: push.mtu)
                    do { try await push.indicate(handle: h, value: v); return peer } catch { return nil }
                }
            }
            var confirmed: [ATTPeer] = []
            for await p in group { if let p { confirmed.append(p) } }
            return confirmed.sorted { $0.id < $1.id }
        }
    }

    // MARK: ATTServerDelegate

    public func peerConnected(_ peer: ATTPeer, push: any ATTServerPush) async {
        state.withLock { s in
            s.peers[peer.id] = PeerState(pusher: Pusher(id: peer.id, push: push))
            s.reindex()
        }
        emit(.connected(peer))
    }

    public func peerDisconnected(_ peer: ATTPeer) async {
        let known = state.withLock { s in
            guard s.peers.removeValue(forKey: peer.id) != nil else { return false }
            s.reindex()
            return true
        }
        if known { emit(.disconnected(peer)) }
    }

    public func respond(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) async -> ATTPDU? {
        switch answer(to: pdu, from: peer, mtu: mtu, security: security) {
        case .now(let response): return response
        case .later(let produce): return await produce()
        }
    }

    /// The answer to `pdu`: `.now` unless it reads or writes an attribute with asynchronous
    /// handlers; then `.later`, which awaits those handlers (reads first, writes after the
    /// checks), and answers as `response` would have with their results.
    public func answer(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) -> ATTServerAnswer {
        guard asyncHandlers.load(ordering: .acquiring), let targets = asyncTargets(of: pdu, peer: peer, mtu: mtu) else {
            return .now(response(to: pdu, from: peer, mtu: mtu, security: security))
        }
        return .later { @Sendable [self] in
            await self.deferredResponse(to: pdu, from: peer, mtu: mtu, security: security, reading: targets.reads)
        }
    }

    /// The synchronous core of `respond`: the response (or Error Response) to a request, nil
    /// for a command or anything a server does not answer. Reports each answered request.
    public func response(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) -> ATTPDU? {
        let answer = dispatchedAnswer(to: pdu, from: peer, mtu: mtu, security: security)
        if let answer { reportAnswer(answer, to: pdu, from: peer) }
        return answer
    }

    private func reportAnswer(_ answer: ATTPDU, to pdu: ATTPDU, from peer: ATTPeer) {
        if configuration.reportsAnswers { emit(.answered(peer, request: pdu, response: answer)) }
    }

    private func dispatchedAnswer(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) -> ATTPDU? {
        computeHashIfNeeded()
        return dispatch(pdu, ATTRequestContext(peer: peer, mtu: min(max(mtu, 23), 517), security: security))
    }
}

// MARK: - The handlers of the dispatch table by opcode (ATTServerHandler, from Tools/pdl/att.pdl)

extension GATTServer: ATTServerHandler {
    package func readRequest(handle: UInt16, _ c: ATTRequestContext) -> ATTPDU {
        switch read(handle, c.peer, c.security, offset: 0, op: .readRequest) {
        case .success(let v): return .readResponse(value: v.count > c.mtu - 1 ? Array(v.prefix(c.mtu - 1)) : v)
        case .failure(let e): return e.pdu
        }
    }

    package func readBlobRequest(handle: UInt16, offset: UInt16, _ c: ATTRequestContext) -> ATTPDU {
        switch read(handle, c.peer, c.security, offset: Int(offset), op: .readBlobRequest) {
        case .success(let v):
            // Core Vol 3 Part F 3.4.4.5: an offset past the end is Invalid Offset; an offset
            // equal to the length answers an empty Part Attribute Value. Attribute Not Long is
            // only a "may" for fixed-length values, and we keep none: any readable value of
            // any length is answered from the offset.
            let o = Int(offset)
            if o > v.count { return fail(.readBlobRequest, handle, .invalidOffset) }
            return .readBlobResponse(value: Array(v[o..<min(v.count, o + c.mtu - 1)]))
        case .failure(let e): return e.pdu
        }
    }

    package func readMultipleRequest(handles: [UInt16], _ c: ATTRequestContext) -> ATTPDU {
        var out: [UInt8] = []
        for h in handles {
            switch read(h, c.peer, c.security, offset: 0, op: .readMultipleRequest) {
            case .success(let v): if out.count < c.mtu - 1 { out += v }
            case .failure(let e): return e.pdu
            }
        }
        return .readMultipleResponse(values: out.count > c.mtu - 1 ? Array(out.prefix(c.mtu - 1)) : out)
    }

    package func readMultipleVariableRequest(handles: [UInt16], _ c: ATTRequestContext) -> ATTPDU {
        var tuples: [ATTLengthValue] = []
        var room = c.mtu - 1
        for h in handles {
            switch read(h, c.peer, c.security, offset: 0, op: .readMultipleVariableRequest) {
            case .success(let v):
                // Core v5.4 Vol 3 Part F 3.4.4.12: each tuple is the value's whole length then
                // the value; the list is cut at ATT_MTU − 1 octets, so the last value may be
                // cut while its Value Length still says how long it is.
                if room >= 2 {
                    let take = min(v.count, room - 2)
                    tuples.append(ATTLengthValue(length: UInt16(truncatingIfNeeded: v.count),
                                                 value: take == v.count ? v : Array(v.prefix(take))))
                    room -= 2 + take
                }
            case .failure(let e): return e.pdu
            }
        }
        return .readMultipleVariableResponse(tuples)
    }

    package func writeRequest(handle: UInt16, value: [UInt8], _ c: ATTRequestContext) -> ATTPDU {
        if let e = write(handle, value, c.peer, c.security, op: .writeRequest) { return e.pdu }
        return .writeResponse
    }

    package func writeCommand(handle: UInt16, value: [UInt8], _ c: ATTRequestContext) {
        _ = write(handle, value, c.peer, c.security, op: .writeCommand)
    }

    // MARK: Procedures

    /// ATT Signed Write Command (Core v5.4 Vol 3 Part F 3.4.5.4, Part G 4.9.2, Part C 10.4.2): only
    /// to a characteristic with the Authenticated Signed Writes property, and only when the
    /// verifier accepts the signature over opcode || handle || value (a wrong signature or a
    /// replayed SignCounter is ignored, Vol 3 Part H 2.4.5). The write is then checked against the
    /// attribute's permissions with the security the signing key proves.
    package func signedWriteCommand(handle: UInt16, value: [UInt8], signature: [UInt8], _ c: ATTRequestContext) {
        let (peer, security) = (c.peer, c.security)
        let allowed = state.withLock { s -> Bool in
            guard let i = s.table.index(handle), i > 0, s.table.attributes[i].isCharacteristicValue else { return false }
            let declaration = s.table.attributes[i - 1]
            return declaration.type == GATTUUID.characteristic
                && declaration.value.first.map { GATTCharacteristicProperties(rawValue: $0).contains(.authenticatedSignedWrites) } ?? false
        }
        guard allowed, let verifier = signedWrites.withLock({ $0 }) else { return }
        let message = [ATTOpcode.signedWriteCommand.rawValue, UInt8(handle & 0xFF), UInt8(handle >> 8)] + value
        guard let proven = verifier.verify(peer: peer, message: message, signature: signature) else { return }
        var effective = security
        if !security.encrypted { effective = proven }
        _ = write(handle, value, peer, effective, op: .signedWriteCommand)
    }

    @inline(__always)
    private func fail(_ op: ATTOpcode, _ handle: UInt16, _ code: ATTErrorCode) -> ATTPDU {
        .errorResponse(requestOpcode: op, handle: handle, error: code)
    }

    /// Why `s` may not read (or write) `a`, as the Error Response's code (Core Vol 3 Part F
    /// 3.4.1.1 Table 3.4), or nil. Every path that exposes or compares a value asks this.
    static func denial(_ a: Attribute, write: Bool, _ s: ATTSecurity) -> ATTErrorCode? {
        denial(a.permissions, minimumKeySize: a.minimumKeySize, write: write, s)
    }

    /// `denial` of an attribute with permissions `p` and `minimumKeySize`.
    static func denial(_ p: GATTPermissions, minimumKeySize: Int, write: Bool, _ s: ATTSecurity) -> ATTErrorCode? {
        if !p.contains(write ? .writable : .readable) { return write ? .writeNotPermitted : .readNotPermitted }
        return securityDenial(p, minimumKeySize: minimumKeySize, write: write, s)
    }

    /// The security part of `denial` (encryption, authentication, key size, authorization) for
    /// an attribute with permissions `p` and `minimumKeySize`. `security` is asked only when `p`
    /// requires some (a link's security is a lock to read, and a push to each subscriber of an
    /// unguarded value needs none).
    static func securityDenial(_ p: GATTPermissions, minimumKeySize: Int, write: Bool, _ security: @autoclosure () -> ATTSecurity) -> ATTErrorCode? {
        let (enc, auth, authz): (GATTPermissions, GATTPermissions, GATTPermissions) = write
            ? (.writeEncryptionRequired, .writeAuthenticationRequired, .writeAuthorizationRequired)
            : (.readEncryptionRequired, .readAuthenticationRequired, .readAuthorizationRequired)
        guard !p.isDisjoint(with: [enc, auth, authz]) else { return nil }
        let s = security()
        if p.contains(auth) && !s.authenticated { return .insufficientAuthentication }
        if p.contains(enc) || p.contains(auth) {
            // Core Vol 3 Part C 10.3.1: on an unencrypted link, Insufficient Encryption when a
            // key (bond) with this peer exists, Insufficient Authentication when it must pair.
            if !s.encrypted { return s.keyAvailable ? .insufficientEncryption : .insufficientAuthentication }
            if s.keySize < minimumKeySize { return .encryptionKeySizeTooShort }
        }
        if p.contains(authz) && !s.authorized { return .insufficientAuthorization }
        return nil
    }

    private static func code(of error: any Error) -> ATTErrorCode {
        (error as? ATTError)?.code ?? .unlikelyError
    }

    /// Reads one attribute's whole value with permission checks.
    private func read(_ handle: UInt16, _ peer: ATTPeer, _ security: ATTSecurity, offset: Int,
                      op: ATTOpcode) -> Result<[UInt8], ATTError> {
        enum Step {
            case value([UInt8], BluetoothUUID?), handler(GATTReadHandler?, BluetoothUUID?), fetched(BluetoothUUID?), error(ATTErrorCode)
        }
        let step: Step = state.withLock { s in
            guard let i = s.table.index(handle) else { return .error(.invalidHandle) }
            // The attribute's fields read in place (a copy of it is a retain per field).
            if let d = Self.denial(s.table.attributes[i].permissions, minimumKeySize: s.table.attributes[i].minimumKeySize,
                                   write: false, security) { return .error(d) }
            let event = s.table.attributes[i].isCharacteristicValue ? s.table.attributes[i].characteristicUUID : nil
            switch s.table.attributes[i].kind {
            case .constant, .stored: return .value(s.table.attributes[i].value, event)
            case .handlers(let r, _): return .handler(r, event)
            case .asyncHandlers: return .fetched(event)
            case .cccd:
                let v = s.peers[peer.id]?.cccd[handle] ?? 0
                return .value([UInt8(v & 0xFF), UInt8(v >> 8)], nil)
            case .clientFeatures: return .value(s.peers[peer.id]?.clientFeatures ?? [0], event)
            }
        }
        switch step {
        case .error(let c): return .failure(ATTError(c, requestOpcode: op, handle: handle))
        case let .value(v, event):
            if let event { emit(.read(peer, event)) }
            return .success(v)
        case let .handler(r, event):
            guard let r else { return .failure(ATTError(.readNotPermitted, requestOpcode: op, handle: handle)) }
            do {
                let v = try r(GATTRequestContext(peer: peer, security: security, offset: offset))
                if let event { emit(.read(peer, event)) }
                return .success(v)
            } catch {
                return .failure(ATTError(Self.code(of: error), requestOpcode: op, handle: handle))
            }
        case .fetched(let event):
            // Read by the asynchronous handler before this dispatch (`deferredResponse`).
            switch Self.deferred?.reads[handle] {
            case .value(let v)?:
                if let event { emit(.read(peer, event)) }
                return .success(v)
            case .refused(let code)?: return .failure(ATTError(code, requestOpcode: op, handle: handle))
            case nil: return .failure(ATTError(.unlikelyError, requestOpcode: op, handle: handle))
            }
        }
    }

    /// Writes one attribute's value with permission and length checks.
    private func write(_ handle: UInt16, _ value: [UInt8], _ peer: ATTPeer, _ security: ATTSecurity,
                       offset: Int = 0, op: ATTOpcode) -> ATTError? {
        enum Step {
            case done([GATTServerEvent]), handler(GATTWriteHandler?, BluetoothUUID?)
            case asyncHandler(GATTAsyncWriteHandler?, BluetoothUUID?), error(ATTErrorCode)
        }
        let step: Step = state.withLock { s in
            guard let i = s.table.index(handle) else { return .error(.invalidHandle) }
            let a = s.table.attributes[i]
            if let d = Self.denial(a, write: true, security) { return .error(d) }
            if value.count > a.maximumLength { return .error(.invalidAttributeValueLength) }
            let event = a.isCharacteristicValue ? a.characteristicUUID : nil
            switch a.kind {
            case .constant: return .error(.writeNotPermitted)
            case .stored:
                s.table.attributes[i].value = value
                return .done(event.map { [.wrote(peer, $0, value)] } ?? [])
            case .handlers(_, let w): return .handler(w, event)
            case .asyncHandlers(_, let w): return .asyncHandler(w, event)
            case let .cccd(_, properties):
                guard value.count == 2 else { return .error(.invalidAttributeValueLength) }
                guard s.peers[peer.id] != nil else { return .error(.unlikelyError) }
                var allowed: UInt16 = 0
                if properties.contains(.notify) { allowed |= 1 }
                if properties.contains(.indicate) { allowed |= 2 }
                let written = UInt16(value[0]) | UInt16(value[1]) << 8
                // Notification/Indication can only be set when the property is (Core Vol 3 Part G
                // 3.3.3.3): refused with CCCD Improperly Configured (CSS Part B 1.2), as BlueZ
                // does. The reserved bits 2–15 are not kept.
                if written & 3 & ~allowed != 0 { return .error(.cccdImproperlyConfigured) }
                let new = written & allowed
                let old = s.peers[peer.id]?.cccd[handle] ?? 0
                s.peers[peer.id]?.cccd[handle] = new
                if old != new { s.reindex() }
                guard let uuid = a.characteristicUUID, old != new else { return .done([]) }
                if new == 0 { return .done([.unsubscribed(peer, uuid)]) }
                return .done([.subscribed(peer, uuid, indications: new & 2 != 0)])
            case .clientFeatures:
                guard !value.isEmpty, s.peers[peer.id] != nil else { return .error(.invalidAttributeValueLength) }
                let old = s.peers[peer.id]?.clientFeatures ?? [0]
                // A client may not clear a feature bit it has set (Core Vol 3 Part G 7.2).
                for (k, o) in old.enumerated() where (k < value.count ? value[k] : 0) & o != o {
                    return .error(.valueNotAllowed)
                }
                s.peers[peer.id]?.clientFeatures = value
                return .done([])
            }
        }
        switch step {
        case .error(let c): return ATTError(c, requestOpcode: op, handle: handle)
        case .done(let events):
            for e in events { emit(e) }
            return nil
        case let .handler(w, event):
            guard let w else { return ATTError(.writeNotPermitted, requestOpcode: op, handle: handle) }
            do {
                try w(GATTRequestContext(peer: peer, security: security, offset: offset), value)
                if let event { emit(.wrote(peer, event, value)) }
                return nil
            } catch {
                return ATTError(Self.code(of: error), requestOpcode: op, handle: handle)
            }
        case let .asyncHandler(w, event):
            guard let w else { return ATTError(.writeNotPermitted, requestOpcode: op, handle: handle) }
            // Checked: the handler runs after this dispatch (`deferredResponse`), in order.
            guard let deferred = Self.deferred else { return ATTError(.unlikelyError, requestOpcode: op, handle: handle) }
            deferred.writes.withLock {
                $0.append(DeferredWrite(handle: handle, op: op, handler: w, event: event, value: value,
                                        context: GATTRequestContext(peer: peer, security: security, offset: offset)))
            }
            return nil
        }
    }

    package func prepareWriteRequest(handle: UInt16, offset: UInt16, value: [UInt8], _ c: ATTRequestContext) -> ATTPDU {
        let (peer, security, offset) = (c.peer, c.security, Int(offset))
        let error: ATTErrorCode? = state.withLock { s in
            guard let i = s.table.index(handle) else { return .invalidHandle }
            let a = s.table.attributes[i]
            if let d = Self.denial(a, write: true, security) { return d }
            if case .constant = a.kind { return .writeNotPermitted }
            guard var p = s.peers[peer.id] else { return .unlikelyError }
            guard p.queue.count < configuration.prepareQueueLimit else { return .prepareQueueFull }
            p.queue.append(Prepared(handle: handle, offset: offset, value: value))
            s.peers[peer.id] = p
            return nil
        }
        if let error { return fail(.prepareWriteRequest, handle, error) }
        return .prepareWriteResponse(handle: handle, offset: UInt16(offset), value: value)
    }

    package func executeWriteRequest(flags: ATTExecuteWriteFlags, _ c: ATTRequestContext) -> ATTPDU {
        let (peer, security) = (c.peer, c.security)
        guard flags == .write || flags == .cancel else { return fail(.executeWriteRequest, 0, .invalidPDU) }
        // Take the queue (cleared whatever happens) and each target's current value.
        let (queue, bases): ([Prepared], [UInt16: (stored: [UInt8]?, max: Int)]) = state.withLock { s in
            let q = s.peers[peer.id]?.queue ?? []
            s.peers[peer.id]?.queue = []
            var b: [UInt16: (stored: [UInt8]?, max: Int)] = [:]
            guard flags == .write else { return (q, b) }
            for p in q where b[p.handle] == nil {
                guard let i = s.table.index(p.handle) else { continue }
                let a = s.table.attributes[i]
                if case .stored = a.kind { b[p.handle] = (a.value, a.maximumLength) } else { b[p.handle] = (nil, a.maximumLength) }
            }
            return (q, b)
        }
        guard flags == .write, !queue.isEmpty else { return .executeWriteResponse }
        // Assemble every value first; nothing is written when one of them is invalid.
        var order: [UInt16] = []
        var assembled: [UInt16: (offset: Int, value: [UInt8])] = [:]
        for p in queue {
            guard let base = bases[p.handle] else { return fail(.executeWriteRequest, p.handle, .invalidHandle) }
            // A stored value is patched from offset 0; a handler gets what was written, at the first offset.
            var cur: (offset: Int, value: [UInt8])
            if let a = assembled[p.handle] {
                cur = a
            } else {
                order.append(p.handle)
                cur = base.stored.map { (0, $0) } ?? (p.offset, [])
            }
            let rel = p.offset - cur.offset
            guard rel >= 0, rel <= cur.value.count else { return fail(.executeWriteRequest, p.handle, .invalidOffset) }
            cur.value = Array(cur.value.prefix(rel)) + p.value
            guard cur.offset + cur.value.count <= base.max else {
                return fail(.executeWriteRequest, p.handle, .invalidAttributeValueLength)
            }
            assembled[p.handle] = cur
        }
        for h in order {
            guard let a = assembled[h] else { continue }
            if let e = write(h, a.value, peer, security, offset: a.offset, op: .executeWriteRequest) { return e.pdu }
        }
        return .executeWriteResponse
    }

    package func readByGroupTypeRequest(startHandle start: UInt16, endHandle end: UInt16, type: BluetoothUUID,
                                        _ c: ATTRequestContext) -> ATTPDU {
        let mtu = c.mtu
        let op = ATTOpcode.readByGroupTypeRequest
        guard start != 0, start <= end else { return fail(op, start, .invalidHandle) }
        guard type == GATTUUID.primaryService || type == GATTUUID.secondaryService else {
            return fail(op, start, .unsupportedGroupType)
        }
        let table = state.withLock { $0.table }
        var list: [ATTGroupData] = []
        var length = -1
        var used = 2
        let range = table.indices(start, end)
        var i = range.lowerBound
        let last = range.upperBound
        while i < last {
            let a = table.attributes[i]
            if a.type == type {
                let v = a.value.count > min(mtu - 6, 251) ? Array(a.value.prefix(min(mtu - 6, 251))) : a.value
                if length == -1 { length = v.count }
                guard v.count == length, used + 4 + length <= mtu else { break }
                list.append(ATTGroupData(handle: a.handle, endGroupHandle: a.groupEnd, value: v))
                used += 4 + length
                i = table.firstIndex(atOrAfter: Int(a.groupEnd) + 1)  // the next service starts after this group
            } else {
                i += 1
            }
        }
        return list.isEmpty ? fail(op, start, .attributeNotFound) : .readByGroupTypeResponse(list)
    }

    package func findByTypeValueRequest(startHandle start: UInt16, endHandle end: UInt16, attributeType type: UInt16,
                                        attributeValue value: [UInt8], _ c: ATTRequestContext) -> ATTPDU {
        let (peer, security, mtu) = (c.peer, c.security, c.mtu)
        let op = ATTOpcode.findByTypeValueRequest
        guard start != 0, start <= end else { return fail(op, start, .invalidHandle) }
        let (table, peerState) = state.withLock { ($0.table, $0.peers[peer.id]) }
        let t = BluetoothUUID(type)
        let isGroup = type == 0x2800 || type == 0x2801
        let wantedUUID = isGroup ? BluetoothUUID(littleEndian: value) : nil
        var list: [ATTHandlesInformation] = []
        let capacity = (mtu - 1) / 4
        let range = table.indices(start, end)
        var i = range.lowerBound
        let last = range.upperBound
        while i < last, list.count < capacity {
            let a = table.attributes[i]
            i += 1
            guard a.type == t else { continue }
            // The value this client would read; the application's handler-backed values are
            // not produced for a search (not compared).
            let current: [UInt8]
            switch a.kind {
            case .constant, .stored: current = a.value
            case .cccd:
                let v = peerState?.cccd[a.handle] ?? 0
                current = [UInt8(v & 0xFF), UInt8(v >> 8)]
            case .clientFeatures: current = peerState?.clientFeatures ?? [0]
            case .handlers, .asyncHandlers: continue
            }
            // Only values the client may read are compared: a match on any other would tell it
            // the value (Core v5.4 Vol 3 Part F 3.2.5). Unreadable ones cannot match, so a
            // search that finds nothing else answers Attribute Not Found (3.4.3.3), as for a
            // value that is not there.
            if Self.denial(a, write: false, security) != nil { continue }
            let match = wantedUUID.map { BluetoothUUID(littleEndian: current) == $0 } ?? (current == value)
            if match { list.append(ATTHandlesInformation(foundAttributeHandle: a.handle, groupEndHandle: a.groupEnd)) }
            if isGroup { i = max(i, table.firstIndex(atOrAfter: Int(a.groupEnd) + 1)) }
        }
        return list.isEmpty ? fail(op, start, .attributeNotFound) : .findByTypeValueResponse(list)
    }

    package func readByTypeRequest(startHandle start: UInt16, endHandle end: UInt16, type: BluetoothUUID,
                                   _ c: ATTRequestContext) -> ATTPDU {
        let (peer, security, mtu) = (c.peer, c.security, c.mtu)
        let op = ATTOpcode.readByTypeRequest
        guard start != 0, start <= end else { return fail(op, start, .invalidHandle) }
        let handles: [UInt16] = state.withLock { s in
            var out: [UInt16] = []
            let range = s.table.indices(start, end)
            var i = range.lowerBound
            let last = range.upperBound
            // No more handles than entries can fit: each takes at least its 2-octet handle.
            while i < last, out.count < mtu / 2 {
                if s.table.attributes[i].type == type { out.append(s.table.attributes[i].handle) }
                i += 1
            }
            return out
        }
        var list: [ATTHandleValue] = []
        var length = -1
        var used = 2
        let cap = min(mtu - 4, 253)
        for h in handles {
            switch read(h, peer, security, offset: 0, op: op) {
            case .success(let v):
                let value = v.count > cap ? Array(v.prefix(cap)) : v
                if length == -1 { length = value.count }
                guard value.count == length, used + 2 + length <= mtu else {
                    return .readByTypeResponse(list)
                }
                list.append(ATTHandleValue(handle: h, value: value))
                used += 2 + length
            case .failure(let e):
                return list.isEmpty ? e.pdu : .readByTypeResponse(list)
            }
        }
        return list.isEmpty ? fail(op, start, .attributeNotFound) : .readByTypeResponse(list)
    }

    package func findInformationRequest(startHandle start: UInt16, endHandle end: UInt16, _ c: ATTRequestContext) -> ATTPDU {
        let mtu = c.mtu
        let op = ATTOpcode.findInformationRequest
        guard start != 0, start <= end else { return fail(op, start, .invalidHandle) }
        let table = state.withLock { $0.table }
        var list: [ATTHandleUUID] = []
        var format: ATTUUIDFormat? = nil
        var used = 2
        let range = table.indices(start, end)
        var i = range.lowerBound
        let last = range.upperBound
        while i < last {
            let a = table.attributes[i]
            i += 1
            let f: ATTUUIDFormat = a.type.is16Bit ? .uuid16 : .uuid128
            if format == nil { format = f }
            guard f == format, used + 2 + f.uuidLength <= mtu else { break }
            list.append(ATTHandleUUID(handle: a.handle, uuid: a.type))
            used += 2 + f.uuidLength
        }
        guard let format, !list.isEmpty else { return fail(op, start, .attributeNotFound) }
        return .findInformationResponse(format: format, information: list)
    }
}

// MARK: - Asynchronous handlers

extension GATTServer {
    /// What an answer produced `.later` hands the synchronous dispatch it runs: the values its
    /// asynchronous read handlers gave, by handle, and (filled by the dispatch) the writes it
    /// accepted for asynchronous write handlers, run after it in order. Task-local, so the
    /// dispatch and its per-opcode handlers stay one synchronous path for every attribute.
    final class Deferred: Sendable {
        /// An asynchronous read handler's outcome.
        enum Read: Sendable { case value([UInt8]), refused(ATTErrorCode) }
        let reads: [UInt16: Read]
        let writes = Mutex<[DeferredWrite]>([])
        init(reads: [UInt16: Read]) { self.reads = reads }
    }

    struct DeferredWrite: Sendable {
        let handle: UInt16
        let op: ATTOpcode
        let handler: GATTAsyncWriteHandler
        let event: BluetoothUUID?
        let value: [UInt8]
        let context: GATTRequestContext
    }

    @TaskLocal static var deferred: Deferred?

    /// The attributes with asynchronous handlers that `pdu` reads (their values are fetched
    /// first) and whether it writes one; nil when it touches none. Read By Type looks at the
    /// same attributes its answer would (`readByTypeRequest`).
    func asyncTargets(of pdu: ATTPDU, peer: ATTPeer, mtu: Int) -> (reads: [UInt16], writes: Bool)? {
        state.withLock { s in
            func isAsync(_ h: UInt16) -> Bool {
                guard let i = s.table.index(h), case .asyncHandlers = s.table.attributes[i].kind else { return false }
                return true
            }
            var reads: [UInt16] = []
            var writes = false
            switch pdu {
            case .readRequest(let h), .readBlobRequest(let h, _): if isAsync(h) { reads = [h] }
            case .readMultipleRequest(let hs), .readMultipleVariableRequest(let hs): reads = hs.filter(isAsync)
            case let .readByTypeRequest(start, end, type) where start != 0 && start <= end:
                let range = s.table.indices(start, end)
                var found = 0
                for i in range where s.table.attributes[i].type == type && found < min(max(mtu, 23), 517) / 2 {
                    found += 1
                    if case .asyncHandlers = s.table.attributes[i].kind { reads.append(s.table.attributes[i].handle) }
                }
            case .writeRequest(let h, _), .writeCommand(let h, _), .signedWriteCommand(let h, _, _): writes = isAsync(h)
            case .executeWriteRequest(.write): writes = s.peers[peer.id]?.queue.contains { isAsync($0.handle) } ?? false
            default: break
            }
            return reads.isEmpty && !writes ? nil : (reads, writes)
        }
    }

    /// `response(to:...)` for a PDU that reads or writes attributes with asynchronous handlers:
    /// their read handlers are awaited first (each after the same permission check the
    /// dispatch makes, so a refused request never reaches the application), then the
    /// synchronous dispatch answers with their values, then the write handlers it accepted are
    /// awaited in order; the first that throws answers the request with its code.
    func deferredResponse(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity,
                          reading handles: [UInt16]) async -> ATTPDU? {
        var reads: [UInt16: Deferred.Read] = [:]
        for h in handles where reads[h] == nil {
            let handler: GATTAsyncReadHandler?? = state.withLock { s in
                guard let i = s.table.index(h), case .asyncHandlers(let r, _) = s.table.attributes[i].kind,
                      Self.denial(s.table.attributes[i], write: false, security) == nil else { return nil }
                return .some(r)
            }
            guard let handler else { continue }  // refused: the dispatch answers why
            guard let read = handler else { reads[h] = .refused(.readNotPermitted); continue }
            let offset: Int = if case .readBlobRequest(_, let o) = pdu { Int(o) } else { 0 }
            do {
                reads[h] = .value(try await read(GATTRequestContext(peer: peer, security: security, offset: offset)))
            } catch {
                reads[h] = .refused(Self.code(of: error))
            }
        }
        let deferred = Deferred(reads: reads)
        var answer = Self.$deferred.withValue(deferred) { dispatchedAnswer(to: pdu, from: peer, mtu: mtu, security: security) }
        for w in deferred.writes.withLock({ $0 }) {
            do {
                try await w.handler(w.context, w.value)
                if let event = w.event { emit(.wrote(peer, event, w.value)) }
            } catch {
                if answer != nil { answer = ATTError(Self.code(of: error), requestOpcode: w.op, handle: w.handle).pdu }
                break
            }
        }
        if let answer { reportAnswer(answer, to: pdu, from: peer) }
        return answer
    }
}
