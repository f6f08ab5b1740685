import Foundation
import HCI
import Synchronization

/// A virtual LE controller on a `VirtualLink`: answers HCI commands as a real controller
/// does (Core Vol 4 Part E), advertises, scans, connects and carries ACL over the link.
///
/// Hosts talk to it with `receive(fromHost:)` and get packets through the sink set with
/// `attachHost(_:)`. This is a handle: its state (`ControllerState`) lives in the link's
/// context, and what it is asked to do runs there.
public final class VirtualController: Sendable {
    public let link: VirtualLink
    public let index: Int
    /// Distinct public address: F0:F1:F2:F3:F4:(index+1).
    public let publicAddress: BDAddress
    public let aclBuffers: Int
    public let aclDataLength: Int

    /// Where packets for the host go (a struct: a bare closure as a `Mutex`'s value is
    /// re-wrapped at every access).
    private struct HostSink { let deliver: @Sendable (HCIPacket) -> Void }
    private let sink = Mutex<HostSink?>(nil)

    /// Host → controller work not yet run on the link context, in arrival order. One
    /// `link.perform` drains everything queued here (packets and control requests alike), then
    /// runs one connection event for the ACL packets it accepted: one queue hop per burst
    /// instead of two per packet, and one Number Of Completed Packets per burst.
    enum Inbound: Sendable {
        case packet(HCIPacket)
        case control(@Sendable (ControllerState) -> Void)
    }
    let inbox = Mutex<[Inbound]>([])
    /// Whether a drain of `inbox` is scheduled (items are queued, or a drain is about to find
    /// none). Written under the inbox's lock; read without it by `receive(fromHost:)`, which
    /// runs a packet inline only when nothing is queued before it.
    let drainScheduled = Atomic<Bool>(false)
    /// The drain job, made once (not a closure allocated per burst).
    let drainWork: @Sendable (LinkContext) -> Void

    /// Longest a completed packet waits to be reported when fewer than half the buffers are.
    public static let completionReportInterval = 0.005
    public static let defaultEventMask: UInt64 = 0x0000_1FFF_FFFF_FFFF
    public static let maxAdvertisingSets = 4
    public static let rssi: Int8 = -50
    public static let features: LEFeatures = [.leEncryption, .dataPacketLengthExtension, .llPrivacy, .le2MPHY, .leExtendedAdvertising,
                                                     .lePeriodicAdvertising, .periodicAdvertisingSyncTransferSender,
                                                     .periodicAdvertisingSyncTransferRecipient]

    init(link: VirtualLink, index: Int, aclBuffers: Int, aclDataLength: Int) {
        self.link = link
        self.index = index
        self.aclBuffers = max(1, aclBuffers)
        self.aclDataLength = max(27, aclDataLength)
        publicAddress = BDAddress([0xF0, 0xF1, 0xF2, 0xF3, 0xF4, UInt8(truncatingIfNeeded: index + 1)])
        drainWork = { $0.controllers[index].drainInbox() }
    }

    // MARK: - Host side

    /// Host packets and requests queued for the link's context and not run yet (a transport
    /// stops reading its host while this is high).
    public var queuedFromHost: Int { inbox.withLock { $0.count } }

    /// Sets (or clears) where packets for the host go. Called from any thread.
    public func attachHost(_ sink: (@Sendable (HCIPacket) -> Void)?) {
        self.sink.withLock { $0 = sink.map(HostSink.init) }
    }

    /// A packet from the host. Processed on the link's context, in order: at once on the calling
    /// thread when the link is idle (a live link's usual case: the host sends from the thread
    /// that runs the link's work), else queued for the thread running it.
    public func receive(fromHost packet: HCIPacket) {
        let index = index
        if !link.withContextIfIdle({ $0.controllers[index].receiveInline(packet) }) { enqueue(.packet(packet)) }
    }

    /// Stops (or resumes) answering commands: a hung controller, for tests.
    public func setAnsweringCommands(_ answering: Bool) {
        runOnLink { $0.silent = !answering }
    }

    /// Returns the controller to its power-on state, as HCI Reset does (connections dropped:
    /// the peers see a supervision timeout). Used when a new host attaches.
    public func powerCycle() {
        runOnLink { $0.resetState() }
    }

    /// Stops (or resumes) sending Number Of Completed Packets, as a stalled controller would:
    /// packets are still delivered, their buffers are not returned to the host. Resuming
    /// returns every withheld buffer. For tests of hosts that wait for buffers.
    public func setCompletingPackets(_ completing: Bool) {
        runOnLink { $0.setCompletingPackets(completing) }
    }

    /// Runs `work` with this controller's state on the link's context after what the host
    /// has queued.
    func runOnLink(_ work: @escaping @Sendable (ControllerState) -> Void) { enqueue(.control(work)) }

    private func enqueue(_ item: Inbound) {
        let schedule = inbox.withLock { items -> Bool in
            items.append(item)
            return !drainScheduled.exchange(true, ordering: .acquiringAndReleasing)
        }
        if schedule { link.perform(drainWork) }
    }

    /// Link context: hands `packet` to the host.
    func deliver(_ packet: HCIPacket) {
        sink.withLock { $0 }?.deliver(packet)
    }
}

/// A controller's state: link context only (it lives in `LinkContext.controllers`).
final class ControllerState {
    /// Its public handle (the host sink, the inbox).
    let controller: VirtualController
    /// The link's context, which holds this state (strong, as `LinkContext.link`).
    let link: LinkContext
    let index: Int
    let publicAddress: BDAddress
    let aclBuffers: Int
    let aclDataLength: Int

    /// `drainInbox`'s spare buffer (it and the inbox's swap: no allocation per drain).
    private var inboxSpare: [VirtualController.Inbound] = []
    var eventMask: UInt64 = VirtualController.defaultEventMask
    var eventMaskPage2: UInt64 = 0
    var leEventMask: UInt64 = 0x1F
    var randomAddress: BDAddress?
    var silent = false
    /// Airtime mode: the controller's one radio (VirtualLink+Airtime.swift).
    var radio = Radio()
    var nextHandle: UInt16 = 0x0040
    var connections: [UInt16: VirtualConnection] = [:]
    /// The connection the last ACL packet from the host went on: the next one usually goes on
    /// it too, found without hashing its handle. (A connection that ends is not `alive`.)
    private var lastACLConnection: VirtualConnection?
    var suggestedTxOctets: UInt16 = 27
    var suggestedTxTime: UInt16 = 328
    var defaultPHYs: (tx: UInt8, rx: UInt8) = (0x03, 0x03)
    // Legacy advertising.
    var advParams = LESetAdvertisingParameters()
    var advData: [UInt8] = []
    var scanRspData: [UInt8] = []
    var advEnabled = false
    // Extended advertising sets.
    struct AdvertisingSet {
        var params: LESetExtendedAdvertisingParameters
        var data: [UInt8] = []
        var scanResponse: [UInt8] = []
        var randomAddress: BDAddress?
        var enabled = false
        /// Its periodic train (VirtualController+Periodic.swift).
        var periodic: PeriodicTrain?
    }
    var sets: [UInt8: AdvertisingSet] = [:]
    // Periodic advertising synchronisation (VirtualController+Periodic.swift).
    var pendingSync: PendingSync?
    var periodicSyncs: [UInt16: SyncState] = [:]
    var nextSyncHandle: UInt16 = 0
    /// LE Set Default Periodic Advertising Sync Transfer Parameters (7.8.92): mode 0, ignore transfers.
    var defaultPASTParameters = PASTParameters()
    // The resolving list (VirtualController+ResolvingList.swift).
    var resolvingList: [ResolvingListEntry] = []
    var resolvingListCapacity = ControllerState.defaultResolvingListCapacity
    var resolvingListRefusal: HCIStatus?
    var addressResolution = false
    var rpaTimeout: UInt16 = 900
    // Scanning.
    var scanActive = true
    var scanEnabled = false
    var scanExtended = false
    var scanFilterDuplicates = false
    var scanSeen: Set<ReportKey> = []
    var scanFilterPolicy: UInt8 = 0
    var scanOwnAddressType: AddressType = .public
    /// Filter accept list (VirtualController+FilterAcceptList.swift).
    var filterAcceptList: Set<FilterAcceptListEntry> = []
    struct ReportKey: Hashable { var address: BDAddress; var type: UInt8; var scanResponse: Bool; var data: [UInt8] }
    // Initiating.
    struct Initiating {
        var address: BDAddress
        var type: AddressType
        var ownAddress: DeviceAddress
        /// The RPA this controller made for `ownAddress` (Own_Address_Type 0x02/0x03).
        var localRPA: BDAddress?
        var interval: UInt16
        var latency: UInt16
        var timeout: UInt16
        var extended: Bool
        /// Initiator filter policy 0x01: connect to any advertiser in the filter accept list.
        var useFilterAcceptList = false
    }
    var initiating: Initiating?
    /// Which kind of advertising, scanning and initiating commands the host has used since the
    /// last Reset (nil: none yet); the other kind is refused (Core v5.4 Vol 4 Part E 3.1.1).
    var advertisingCommands: AdvertisingCommandKind?
    enum AdvertisingCommandKind { case legacy, extended }
    /// An accepted ACL packet with its connection (looked up once, when the packet is accepted).
    /// (A struct: an array of tuples is destroyed element by element through the runtime.)
    struct QueuedACL {
        let packet: HCIACLPacket
        let connection: VirtualConnection
    }
    /// ACL buffers: packets accepted and not yet completed.
    var aclQueue: [QueuedACL] = []
    /// `flushACL`'s spare buffer: the queue and it swap, so a connection event allocates none.
    private var aclSpare: [QueuedACL] = []
    /// Packets sent to the peer and not yet reported to the host (Number Of Completed Packets),
    /// per connection handle, and their total. Reported once half the buffers are in it (so
    /// the host always has at least half its buffers: it never waits on the report), else by
    /// the link's report tick at most `completionReportInterval` later, as a real controller
    /// reports at its own rate (Core v5.4 Vol 4 Part E 4.3, 7.7.19: one event may carry
    /// several packets and handles).
    /// (The event's own entries: the report hands this array over, no copy made per report.)
    private var unreported: [NumberOfCompletedPackets.Entry] = []
    private var unreportedTotal = 0
    /// Fault: Number Of Completed Packets withheld (`setCompletingPackets(false)`), per handle.
    var withholdingCompletions = false
    var withheldCompletions: [UInt16: UInt16] = [:]
    private var withheldTotal = 0

    init(controller: VirtualController, link: LinkContext) {
        self.controller = controller
        self.link = link
        index = controller.index
        publicAddress = controller.publicAddress
        aclBuffers = controller.aclBuffers
        aclDataLength = controller.aclDataLength
    }

    /// What `receive(fromHost:)` does on the link's context, run inline on the host's thread.
    func receiveInline(_ packet: HCIPacket) {
        // Requests queued before this packet go first: another thread may be between its
        // `enqueue` and its `link.perform`.
        if controller.drainScheduled.load(ordering: .acquiring) {
            controller.inbox.withLock { $0.append(.packet(packet)) }
            drainInbox()
        } else if case .acl(let acl) = packet {
            // What `drainInbox` does for a burst of one ACL packet, without queueing it: the
            // controller's buffers are empty (every drain ends with a connection event).
            if let connection = accept(acl) {
                transmit(acl, on: connection)
                completedPacketsSent()
            }
        } else {
            handle(packet)
            flushACL()
        }
    }

    /// Runs the host requests queued now, in order, then the connection event.
    /// What comes meanwhile is drained by a new job at the back of the link's work, so the
    /// other controllers' work is not kept waiting behind a host that keeps sending (issue 31).
    func drainInbox() {
        var items: [VirtualController.Inbound] = []
        swap(&items, &inboxSpare)
        controller.inbox.withLock { queued in
            if queued.isEmpty { controller.drainScheduled.store(false, ordering: .releasing) } else { swap(&items, &queued) }
        }
        for item in items {
            switch item {
            case .packet(let p): handle(p)
            case .control(let work): work(self)
            }
        }
        items.removeAll(keepingCapacity: true)
        inboxSpare = items
        flushACL()
        let more = controller.inbox.withLock { queued -> Bool in
            if queued.isEmpty { controller.drainScheduled.store(false, ordering: .releasing); return false }
            return true
        }
        if more { controller.link.perform(controller.drainWork) }
    }

    func deliver(_ packet: HCIPacket) { controller.deliver(packet) }

    private func handle(_ packet: HCIPacket) {
        switch packet {
        case .command(let c): handleCommand(c)
        case .acl(let a): handleACL(a)
        case .event, .sco, .iso:
            link.note("controller \(index): ignored a \(packet.type) packet from the host")
        }
    }

    // MARK: - Events

    func isEnabled(eventCode: UInt8) -> Bool {
        switch eventCode {
        case CommandComplete.eventCode, CommandStatus.eventCode, NumberOfCompletedPackets.eventCode: return true
        default:
            guard eventCode >= 1 && eventCode <= 64 else { return true }
            return eventMask & (1 << UInt64(eventCode - 1)) != 0
        }
    }

    func send(_ event: some HCIEventParameters) {
        guard isEnabled(eventCode: type(of: event).eventCode) else { return }
        deliver(.event(event.packet))
    }

    func isEnabled(subevent: UInt8) -> Bool {
        guard isEnabled(eventCode: LEMetaEvent.eventCode) else { return false }
        guard subevent >= 1 && subevent <= 64 else { return false }
        return leEventMask & (1 << UInt64(subevent - 1)) != 0
    }

    func sendLE(_ subevent: some LEMetaEventParameters) {
        guard isEnabled(subevent: type(of: subevent).subeventCode) else { return }
        deliver(.event(subevent.packet))
    }

    func allocateHandle() -> UInt16 {
        let h = nextHandle
        nextHandle = nextHandle >= 0x0EFF ? 0x0040 : nextHandle + 1
        return h
    }

    func sendConnectionComplete(status: HCIStatus, handle: UInt16, role: UInt8, peer: DeviceAddress, localRPA: BDAddress? = nil,
                                interval: UInt16, latency: UInt16, timeout: UInt16, extended: Bool) {
        let enhanced = LEEnhancedConnectionComplete(status: status, connectionHandle: handle, role: role,
                                                    peerAddressType: peer.type, peerAddress: peer.address,
                                                    localResolvablePrivateAddress: localRPA ?? .zero,
                                                    connectionInterval: interval, peripheralLatency: latency,
                                                    supervisionTimeout: timeout)
        if extended && isEnabled(subevent: LEEnhancedConnectionCompleteV2.subeventCode) {
            sendLE(LEEnhancedConnectionCompleteV2(enhanced))
        } else if isEnabled(subevent: LEEnhancedConnectionComplete.subeventCode) {
            sendLE(enhanced)
        } else {
            sendLE(LEConnectionComplete(status: status, connectionHandle: handle, role: role, peerAddressType: peer.type,
                                        peerAddress: peer.address, connectionInterval: interval,
                                        peripheralLatency: latency, supervisionTimeout: timeout))
        }
    }

    // MARK: - State

    func resetState() {
        for conn in Array(connections.values) { conn.drop(silentlyFor: self, reason: .connectionTimeout) }
        connections = [:]
        lastACLConnection = nil
        withholdingCompletions = false
        withheldCompletions = [:]
        withheldTotal = 0
        unreported.removeAll()
        unreportedTotal = 0
        eventMask = VirtualController.defaultEventMask
        eventMaskPage2 = 0
        filterAcceptList = []
        scanFilterPolicy = 0
        scanOwnAddressType = .public
        leEventMask = 0x1F
        randomAddress = nil
        nextHandle = 0x0040
        suggestedTxOctets = 27
        suggestedTxTime = 328
        defaultPHYs = (0x03, 0x03)
        advParams = LESetAdvertisingParameters()
        advData = []
        scanRspData = []
        advEnabled = false
        for (handle, set) in sets where set.periodic?.enabled == true { trainStopped(set: handle) }
        sets = [:]
        pendingSync = nil
        periodicSyncs = [:]
        nextSyncHandle = 0
        defaultPASTParameters = PASTParameters()
        // (Reset empties the list and turns resolution off, Vol 4 Part E 7.3.2; the capacity and
        // a refusal set by a test stay: they are what this controller is.)
        resolvingList = []
        addressResolution = false
        rpaTimeout = 900
        scanActive = true
        scanEnabled = false
        scanExtended = false
        scanFilterDuplicates = false
        scanSeen = []
        initiating = nil
        advertisingCommands = nil
        aclQueue = []
        radio.inFlight = 0
        silent = false
    }

    var isScanning: Bool { scanEnabled }
    var isAdvertising: Bool { advEnabled || sets.values.contains { $0.enabled } }

    /// What this controller is currently advertising.
    struct Advertisement {
        var address: BDAddress
        var addressType: AddressType
        var connectable: Bool
        var scannable: Bool
        var legacyPDU: Bool
        /// Legacy PDU type (0 ADV_IND, 1 ADV_DIRECT_IND, 2 ADV_SCAN_IND, 3 ADV_NONCONN_IND).
        var legacyType: UInt8
        var data: [UInt8]
        var scanResponse: [UInt8]
        var sid: UInt8
        var txPower: Int8
        /// nil for legacy advertising commands.
        var setHandle: UInt8?
        /// Advertising_Filter_Policy: bit 0 scan requests, bit 1 connection requests only from the filter accept list.
        var filterPolicy: UInt8
        /// Periodic advertising interval of the set's train (1.25 ms units), 0 when none.
        var periodicInterval: UInt16 = 0
        /// Primary advertising channels (bit 0: 37, bit 1: 38, bit 2: 39), for the air view.
        var channelMap: UInt8 = 0x07
        /// The RPA this controller made for the advertiser (Own_Address_Type 0x02/0x03).
        var localRPA: BDAddress?
        /// TargetA of a directed PDU (ADV_DIRECT_IND, or an extended set with the directed property).
        var targetA: DeviceAddress?
    }

    /// The address Own_Address_Type `type` names, and whether this controller made it. 0x02/0x03:
    /// the RPA made from the local IRK of the resolving list entry for `peer` (an identity: type
    /// 0x00/0x01 and address), else the public (0x02) or the random (0x03) address (Core v5.4
    /// Vol 4 Part E 7.8.5, 7.8.12, 7.8.53, 7.8.66).
    func ownAddress(_ type: AddressType, setRandom: BDAddress? = nil,
                    peer: (type: UInt8, address: BDAddress)? = nil) -> (address: DeviceAddress, generated: Bool) {
        if type == .publicIdentity || type == .randomIdentity, let peer, let rpa = localRPA(peerType: peer.type, peer: peer.address) {
            return (DeviceAddress(rpa, type: .random), true)
        }
        switch type {
        case .public, .publicIdentity: return (DeviceAddress(publicAddress, type: .public), false)
        case .random, .randomIdentity: return (DeviceAddress(setRandom ?? randomAddress ?? publicAddress, type: .random), false)
        }
    }

    func currentAdvertisements() -> [Advertisement] {
        var out: [Advertisement] = []
        if advEnabled {
            let peer = (type: advParams.peerAddressType.rawValue & 1, address: advParams.peerAddress)
            let (a, generated) = ownAddress(advParams.ownAddressType, peer: peer)
            let t = advParams.advertisingType == 4 ? 1 : advParams.advertisingType
            out.append(Advertisement(address: a.address, addressType: a.type, connectable: t <= 1, scannable: t == 0 || t == 2,
                                     legacyPDU: true, legacyType: t, data: t == 1 ? [] : advData, scanResponse: scanRspData,
                                     sid: 0xFF, txPower: 127, setHandle: nil,
                                     filterPolicy: advParams.advertisingFilterPolicy, channelMap: advParams.advertisingChannelMap,
                                     localRPA: generated ? a.address : nil,
                                     targetA: t == 1 ? directedTarget(own: advParams.ownAddressType, peerType: peer.type, peer: peer.address) : nil))
        }
        for (handle, set) in sets.sorted(by: { $0.key < $1.key }) where set.enabled {
            let p = set.params.advertisingEventProperties
            let peer = (type: set.params.peerAddressType.rawValue & 1, address: set.params.peerAddress)
            let (a, generated) = ownAddress(set.params.ownAddressType, setRandom: set.randomAddress, peer: peer)
            let legacyType: UInt8 = p.contains(.directed) ? 1 : p.contains(.connectable) ? 0 : p.contains(.scannable) ? 2 : 3
            out.append(Advertisement(address: a.address, addressType: a.type, connectable: p.contains(.connectable),
                                     scannable: p.contains(.scannable), legacyPDU: p.contains(.legacy), legacyType: legacyType,
                                     // ADV_DIRECT_IND has no AdvData (Vol 6 Part B 2.3.1.2): a set's earlier data is not sent.
                                     data: p.contains(.legacy) && p.contains(.directed) ? [] : set.data, scanResponse: set.scanResponse,
                                     sid: p.contains(.legacy) ? 0xFF : set.params.advertisingSID,
                                     txPower: set.params.advertisingTxPower, setHandle: handle,
                                     filterPolicy: set.params.advertisingFilterPolicy, periodicInterval: periodicInterval(ofSet: handle),
                                     channelMap: set.params.primaryAdvertisingChannelMap,
                                     localRPA: generated ? a.address : nil,
                                     targetA: p.contains(.directed) ? directedTarget(own: set.params.ownAddressType, peerType: peer.type, peer: peer.address) : nil))
        }
        return out
    }

    func stopAdvertising(_ adv: Advertisement) {
        if let h = adv.setHandle { sets[h]?.enabled = false } else { advEnabled = false }
    }

    // MARK: - Scanning

    /// One advertising event of every other controller, seen by this scanner.
    func advertisingEvent(from all: [ControllerState]) {
        if initiating != nil {
            link.tryConnect(self)
            if initiating == nil { return }
        }
        guard scanEnabled else { return }
        for other in all where other !== self {
            for adv in other.currentAdvertisements() {
                var event = link.airAdvertise(adv, at: nil)
                if see(adv, from: other) { link.airScan(&event, scanner: ownAddress(scanOwnAddressType).address) }
            }
        }
    }

    /// This scanner sees `adv` of `other` once: its report, and the scan response when the
    /// scan is active and `other` answers it. Returns whether a scan response was sent.
    @discardableResult
    func see(_ adv: Advertisement, from other: ControllerState) -> Bool {
        guard scannerAccepts(adv) else { return false }
        // A directed PDU reaches only the device TargetA names (Vol 6 Part B 4.4.2, 6).
        if let target = adv.targetA, !isAddressed(by: target, own: ownAddress(scanOwnAddressType).address) { return false }
        report(adv, scanResponse: false)
        guard scanActive && adv.scannable && other.advertiser(adv, acceptsScanRequestFrom: ownAddress(scanOwnAddressType).address) else {
            return false
        }
        report(adv, scanResponse: true)
        return true
    }

    private func report(_ advertised: Advertisement, scanResponse: Bool) {
        guard let reported = reportedAddress(of: advertised) else { return }
        var adv = advertised
        adv.address = reported.address
        adv.addressType = reported.type
        let data = scanResponse ? adv.scanResponse : adv.data
        if scanFilterDuplicates {
            let key = ReportKey(address: adv.address, type: adv.addressType.rawValue, scanResponse: scanResponse, data: data)
            if scanSeen.contains(key) { return }
            if scanSeen.count < 4096 { scanSeen.insert(key) }
        }
        if !scanExtended {
            guard adv.legacyPDU else { return }  // a legacy scanner sees legacy PDUs only
            let type: UInt8 = scanResponse ? 0x04 : adv.legacyType
            sendLE(LEAdvertisingReport(reports: [.init(eventType: type, addressType: adv.addressType, address: adv.address,
                                                       data: Array(data.prefix(31)), rssi: VirtualController.rssi)]))
            return
        }
        var bits: UInt16 = 0
        if adv.connectable { bits |= 0x01 }
        if adv.scannable { bits |= 0x02 }
        if adv.legacyType == 1 { bits |= 0x04 }
        if scanResponse { bits |= 0x08 }
        if adv.legacyPDU { bits |= 0x10 }
        // Fragment data over several reports (an LE Meta event holds at most 229 octets of data).
        let chunk = 229
        var offset = 0
        repeat {
            let end = min(data.count, offset + chunk)
            let more = end < data.count
            let status: UInt16 = more ? 0x01 : 0x00
            sendLE(LEExtendedAdvertisingReport(reports: [.init(
                eventType: ExtendedAdvertisingEventType(rawValue: bits | status << 5),
                addressType: adv.addressType.rawValue, address: adv.address, primaryPHY: 1,
                secondaryPHY: adv.legacyPDU ? 0 : 1, advertisingSID: adv.sid, txPower: adv.txPower,
                rssi: VirtualController.rssi, periodicAdvertisingInterval: scanResponse ? 0 : adv.periodicInterval,
                data: Array(data[offset..<end]))]))
            offset = end
        } while offset < data.count
    }

    // MARK: - ACL

    private func handleACL(_ packet: HCIACLPacket) {
        guard let connection = accept(packet) else { return }
        aclQueue.append(QueuedACL(packet: packet, connection: connection))  // sent by flushACL at the end of this drain
    }

    /// The checks a packet from the host passes before it takes a buffer: its connection, or
    /// nil when it is refused (unknown handle; Data Buffer Overflow, Core v5.4 Vol 4 Part E
    /// 7.7.26: too long, or no buffer free).
    private func accept(_ packet: HCIACLPacket) -> VirtualConnection? {
        let connection: VirtualConnection
        if let last = lastACLConnection, last.alive, last.handle(of: self) == packet.handle {
            connection = last
        } else if let found = connections[packet.handle] {
            connection = found
            lastACLConnection = found
        } else {
            link.note("controller \(index): ACL packet for unknown connection handle \(hexCode(packet.handle)) dropped")
            return nil
        }
        if packet.data.count > aclDataLength {
            link.note("controller \(index): host sent an ACL fragment of \(packet.data.count) octets, over the LE ACL data length \(aclDataLength): Data Buffer Overflow")
            send(DataBufferOverflow(linkType: 1))
            return nil
        }
        // A buffer is in use until Number Of Completed Packets has returned it to the host
        // (Core v5.4 Vol 4 Part E 4.1.1), not only while its packet waits to be sent.
        if aclQueue.count + unreportedTotal + withheldTotal + radio.inFlight >= aclBuffers {
            link.note("controller \(index): host sent an ACL packet with all \(aclBuffers) buffers in use: Data Buffer Overflow")
            send(DataBufferOverflow(linkType: 1))
            return nil
        }
        return connection
    }

    func dropQueuedACL(handle: UInt16) {
        aclQueue.removeAll { $0.packet.handle == handle }
        // The host counts its packets on a handle as flushed at Disconnection Complete.
        if let i = unreported.firstIndex(where: { $0.connectionHandle == handle }) {
            unreportedTotal -= Int(unreported[i].numCompletedPackets)
            unreported.remove(at: i)
        }
        if let n = withheldCompletions.removeValue(forKey: handle) { withheldTotal -= Int(n) }
    }

    /// A connection event: sends every buffered packet to its peer, frees the buffers.
    private func flushACL() {
        guard !aclQueue.isEmpty else { return }
        var packets: [QueuedACL] = []
        swap(&packets, &aclQueue)
        swap(&aclQueue, &aclSpare)
        defer {
            packets.removeAll(keepingCapacity: true)
            aclSpare = packets
        }
        for queued in packets { transmit(queued.packet, on: queued.connection) }
        completedPacketsSent()
    }

    /// Sends one accepted packet to the peer on `conn` and frees its buffer (counted for
    /// Number Of Completed Packets), unless a fault drops or delays it.
    private func transmit(_ p: HCIACLPacket, on conn: VirtualConnection) {
        if link.airtime != nil, conn.alive {
            // Airtime: to the link's queue for its next connection event (VirtualLink+Airtime.swift).
            let peer = conn.peer(of: self)
            conn.enqueue(p, out: HCIACLPacket(handle: conn.handle(of: peer), boundary: p.boundary == .continuing ? .continuing : .first,
                                              data: p.data), from: self)
            return
        }
        countCompleted(handle: p.handle)
        // (A connection that ended took its packets out of the queue, `dropQueuedACL`: none here.)
        guard conn.alive else { return }
        link.airData(conn, from: self, acl: p)
        let peer = conn.peer(of: self)
        peer.receiveFromAir(HCIACLPacket(handle: conn.handle(of: peer), boundary: p.boundary == .continuing ? .continuing : .first,
                                         data: p.data), on: conn)
    }

    /// A packet's buffer is free: counted for Number Of Completed Packets (or withheld).
    func countCompleted(handle: UInt16) {
        if withholdingCompletions {
            withheldCompletions[handle, default: 0] += 1
            withheldTotal += 1
        } else {
            if let i = unreported.firstIndex(where: { $0.connectionHandle == handle }) {
                unreported[i].numCompletedPackets += 1
            } else {
                unreported.append(NumberOfCompletedPackets.Entry(connectionHandle: handle, numCompletedPackets: 1))
            }
            unreportedTotal += 1
        }
    }

    /// A packet from the peer on `conn` (already carrying this side's handle) for the host,
    /// unless a fault drops or delays it.
    func receiveFromAir(_ out: HCIACLPacket, on conn: VirtualConnection) {
        let n = link.countACLPacket()
        // (Faults are rare: no hashing per packet when none is set.)
        if !link.dropACL.isEmpty, link.dropACL.remove(n) != nil {
            link.note("fault: dropped ACL packet #\(n)")
            return
        }
        if !link.delayACL.isEmpty, let delay = link.delayACL.removeValue(forKey: n) {
            link.note("fault: delayed ACL packet #\(n) by \(delay) s")
            link.schedule(after: delay) { [self] in if conn.alive { deliver(.acl(out)) } }
            return
        }
        deliver(.acl(out))
    }

    /// After a connection event: reports the completed packets at once when half the buffers
    /// are, else makes sure the link's report tick will (Core v5.4 Vol 4 Part E 4.3).
    func completedPacketsSent() {
        if unreportedTotal >= max(1, aclBuffers / 2) {
            reportCompletions()
        } else if unreportedTotal > 0 {
            link.scheduleCompletionReports()
        }
    }

    /// Link context: one Number Of Completed Packets for every packet not yet reported.
    func reportCompletions() {
        guard unreportedTotal > 0 else { return }
        unreportedTotal = 0
        send(NumberOfCompletedPackets(entries: unreported))
        // (The event is encoded and gone: the array is ours alone again, emptied in place.)
        unreported.removeAll(keepingCapacity: true)
    }

    /// `VirtualController.setCompletingPackets`.
    func setCompletingPackets(_ completing: Bool) {
        // Packets completed before the stall are still reported.
        if !completing { reportCompletions() }
        withholdingCompletions = !completing
        guard completing, !withheldCompletions.isEmpty else { return }
        let entries = withheldCompletions.filter { connections[$0.key] != nil }
            .map { NumberOfCompletedPackets.Entry(connectionHandle: $0.key, numCompletedPackets: $0.value) }
        withheldCompletions = [:]
        withheldTotal = 0
        if !entries.isEmpty { send(NumberOfCompletedPackets(entries: entries)) }
    }
}
