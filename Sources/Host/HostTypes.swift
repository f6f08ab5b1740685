import HCI
import Transport

/// Tunables of a `Host`. The defaults suit real controllers and the virtual ones.
public struct HostConfiguration: Sendable {
    /// Longest L2CAP frame (basic header included) the reassembler accepts; longer frames
    /// are dropped and reported with `HostEvent.warning`.
    public var maxL2CAPFrame: Int = 65535 + 4
    /// Frames a link holds before its consumer starts (or in its `frames` stream) before new
    /// ones are dropped (and reported). The L2CAP layer's sink holds none: it handles each at once.
    public var maxQueuedFramesPerLink: Int = 4096
    /// Events buffered for the consumer of `Host.events` before new ones are dropped (and logged).
    public var maxQueuedEvents: Int = 16384
    /// Frames `Host.enqueueL2CAP` may leave waiting for ACL buffers per link (answers to a
    /// peer's requests, which nobody awaits). Beyond it `enqueueL2CAP` throws `HostError.busy`:
    /// a peer that keeps sending requests without reading the answers (an ATT client may have
    /// one request outstanding, Core v5.4 Vol 3 Part F 3.3.2) cannot grow memory.
    public var maxEnqueuedFramesPerLink: Int = 64
    /// Frames of the link's own protocols (`EnqueuedFrameKind.control`: SMP, L2CAP signaling)
    /// `Host.enqueueL2CAP` may leave waiting per link, counted apart from the answers so that a
    /// client flooding ATT cannot starve pairing. These protocols have one PDU outstanding per
    /// exchange (SMP: Core v5.4 Vol 3 Part H 3.3; signaling: one request per identifier), so a
    /// few suffice; the bound only stops a misbehaving peer from growing memory.
    public var maxEnqueuedControlFramesPerLink: Int = 16
    /// How long frames may wait for the controller to free an ACL buffer (Number Of Completed
    /// Packets, Core Vol 4 Part E 4.1.1) before they fail with `HostError.procedureTimeout`.
    public var aclCreditTimeout: Duration = .seconds(30)
    /// Default timeout of `Host.execute`.
    public var commandTimeout: Duration = .seconds(5)
    /// The clock of every deadline (`Host.arm`); tests inject a `ManualDeadlineClock`.
    public var clock: any DeadlineClock = SystemDeadlineClock()
    /// Own random static address to use instead of generating one (nil: generated once per Host).
    public var randomStaticAddress: BDAddress?
    /// Called with every warning the host emits (also sent as `HostEvent.warning`).
    public var log: (@Sendable (String) -> Void)?

    public init() {}
}

/// What bring-up learnt about the controller.
public struct ControllerInfo: Sendable, CustomStringConvertible {
    public var address: BDAddress
    public var hciVersion: UInt8
    public var hciSubversion: UInt16
    public var lmpVersion: UInt8
    public var lmpSubversion: UInt16
    public var companyIdentifier: UInt16
    /// Supported_Commands bit mask (64 octets; empty when the controller can't report it).
    public var supportedCommands: [UInt8]
    /// LMP features page 0 (8 octets, little-endian).
    public var features: UInt64
    /// LE features (8 octets, little-endian).
    public var leFeatures: UInt64
    /// Longest ACL data packet payload the controller accepts for LE links.
    public var aclDataLength: Int
    /// Number of ACL data packets the controller can buffer for LE links.
    public var aclBufferCount: Int
    /// ISO buffers (0 when unknown).
    public var isoDataLength: Int
    public var isoBufferCount: Int

    public init(address: BDAddress = .zero, hciVersion: UInt8 = 0, hciSubversion: UInt16 = 0, lmpVersion: UInt8 = 0,
                lmpSubversion: UInt16 = 0, companyIdentifier: UInt16 = 0, supportedCommands: [UInt8] = [],
                features: UInt64 = 0, leFeatures: UInt64 = 0, aclDataLength: Int = 27, aclBufferCount: Int = 1,
                isoDataLength: Int = 0, isoBufferCount: Int = 0) {
        self.address = address
        self.hciVersion = hciVersion
        self.hciSubversion = hciSubversion
        self.lmpVersion = lmpVersion
        self.lmpSubversion = lmpSubversion
        self.companyIdentifier = companyIdentifier
        self.supportedCommands = supportedCommands
        self.features = features
        self.leFeatures = leFeatures
        self.aclDataLength = aclDataLength
        self.aclBufferCount = aclBufferCount
        self.isoDataLength = isoDataLength
        self.isoBufferCount = isoBufferCount
    }

    /// Whether the controller's Supported_Commands mask lists `opcode` (false when unknown).
    public func supports(_ opcode: HCIOpcode) -> Bool {
        guard !supportedCommands.isEmpty else { return false }
        return ReadLocalSupportedCommands.ReturnParameters(supportedCommands: supportedCommands).supports(opcode)
    }

    /// Whether the LE feature bit `bit` (Core Vol 6 Part B 4.6) is set.
    public func hasLEFeature(bit: Int) -> Bool { bit < 64 && leFeatures & (1 << UInt64(bit)) != 0 }

    public var description: String {
        "\(address), HCI \(coreVersionName(hciVersion)), company \(hexCode(companyIdentifier)), LE ACL \(aclBufferCount)×\(aclDataLength)"
    }
}

/// Why a host operation failed. Every case names its cause.
public enum HostError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The controller did not answer a command in time (the command's name).
    case commandTimeout(String)
    /// The link is (or became) disconnected; carries the reason.
    case disconnected(handle: UInt16, reason: HCIStatus)
    /// No connection with this handle.
    case unknownConnection(UInt16)
    /// The transport died or was closed; create a new Host on a new transport.
    case transportLost(TransportError)
    /// The controller reported Hardware Error; reset it with a new Host.
    case hardwareError(UInt8)
    /// Connecting did not complete in time (LE Create Connection Cancel was sent).
    case connectTimeout(DeviceAddress)
    /// A procedure's completion event did not arrive in time.
    case procedureTimeout(String)
    /// The controller doesn't support what was asked.
    case unsupported(String)
    /// The controller's answer did not decode.
    case malformed(String)
    /// The request is invalid as given.
    case invalidArgument(String)
    /// Another operation of the same kind is already running.
    case busy(String)
    /// `start()` has not completed.
    case notStarted
    /// Encryption Change reported a failure (e.g. PIN or Key Missing 0x06: the peer lost its key).
    case encryptionFailed(handle: UInt16, status: HCIStatus)

    public var description: String {
        switch self {
        case .commandTimeout(let name): return "\(name): no answer from the controller (command timeout)"
        case let .disconnected(handle, reason): return "connection \(hexCode(handle, digits: 4)) disconnected: \(reason)"
        case .unknownConnection(let h): return "no connection with handle \(hexCode(h, digits: 4))"
        case .transportLost(let e): return "transport lost: \(e)"
        case .hardwareError(let code): return "controller hardware error \(hexCode(code)); reset it (create a new Host)"
        case .connectTimeout(let a): return "connecting to \(a) timed out (LE Create Connection cancelled)"
        case .procedureTimeout(let name): return "\(name) timed out"
        case .unsupported(let what): return "not supported by the controller: \(what)"
        case .malformed(let what): return "malformed answer from the controller: \(what)"
        case .invalidArgument(let what): return "invalid argument: \(what)"
        case .busy(let what): return "busy: \(what)"
        case .notStarted: return "the host is not started (call start())"
        case let .encryptionFailed(handle, status):
            let hint = status == .pinOrKeyMissing ? ": the peer has no key for this bond (pair again)" : ""
            return "encrypting connection \(hexCode(handle, digits: 4)) failed: \(status)\(hint)"
        }
    }
}

/// Role of the local device on a link.
public enum LERole: UInt8, Sendable, Equatable, CustomStringConvertible {
    case central = 0
    case peripheral = 1
    public var description: String { self == .central ? "central" : "peripheral" }
}

/// Connection parameters in controller units.
public struct ConnectionParameters: Sendable, Equatable, CustomStringConvertible {
    /// Connection interval, 1.25 ms units.
    public var interval: UInt16
    /// Peripheral latency in connection events.
    public var latency: UInt16
    /// Supervision timeout, 10 ms units.
    public var supervisionTimeout: UInt16

    public init(interval: UInt16, latency: UInt16, supervisionTimeout: UInt16) {
        self.interval = interval
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
    }

    public var description: String {
        "interval \(formatMilliseconds(Double(interval) * 1.25)), latency \(latency), timeout \(formatMilliseconds(Double(supervisionTimeout) * 10))"
    }
}

/// An LE link as the host sees it when it is established.
///
/// The reassembled L2CAP frames (basic header included) received on this link go, in order, to
/// its one consumer: the layer attached with `Host.attach` (the L2CAP layer), or `frames` (for
/// tests and tools).
public struct LEConnection: Sendable {
    public let handle: UInt16
    public let role: LERole
    public let peer: DeviceAddress
    public let local: DeviceAddress
    public let parameters: ConnectionParameters
    /// Where this link's frames wait for their consumer.
    public let route: FrameRoute
    /// The frames as a stream, for a consumer that attaches no layer; finishes at disconnection.
    public var frames: AsyncStream<[UInt8]> { route.stream() }

    public var interval: UInt16 { parameters.interval }
    public var latency: UInt16 { parameters.latency }
    public var supervisionTimeout: UInt16 { parameters.supervisionTimeout }

    public init(handle: UInt16, role: LERole, peer: DeviceAddress, local: DeviceAddress,
                parameters: ConnectionParameters, route: FrameRoute) {
        self.route = route
        self.handle = handle
        self.role = role
        self.peer = peer
        self.local = local
        self.parameters = parameters
    }
}

// AdvertisingEventKind (Event_Type bits, Core Vol 4 Part E 7.7.65.13) is generated from
// Tools/pdl/gap-codes.pdl.
extension AdvertisingEventKind {
    /// Maps a legacy Event_Type (ADV_IND 0, ADV_DIRECT_IND 1, ADV_SCAN_IND 2, ADV_NONCONN_IND 3, SCAN_RSP 4).
    public init(legacyEventType t: UInt8) {
        switch t {
        case 0: self = [.legacy, .connectable, .scannable]
        case 1: self = [.legacy, .connectable, .directed]
        case 2: self = [.legacy, .scannable]
        case 3: self = [.legacy]
        case 4: self = [.legacy, .scanResponse]
        default: self = [.legacy]
        }
    }
}

/// One advertising report (legacy or extended), normalised.
public struct AdvertisingReportValue: Sendable, Equatable {
    public var address: DeviceAddress
    public var kind: AdvertisingEventKind
    /// dBm; nil when the controller didn't measure it (127).
    public var rssi: Int8?
    /// dBm; nil when absent (127).
    public var txPower: Int8?
    /// Advertising (or scan response) data bytes, as received.
    public var data: [UInt8]
    /// Extended reports only: Data_Status of the reassembled data, 0 complete or 2 truncated
    /// (Core Vol 4 Part E 7.7.65.13); fragments "more data to come" (1) are joined by the host.
    public var dataStatus: UInt8
    /// Extended reports only: Advertising SID (0xFF when none).
    public var sid: UInt8
    /// Primary_PHY (Core v5.4 Vol 4 Part E 7.7.65.13): 0x01 LE 1M, 0x03 LE Coded. A legacy
    /// report's advertising is on LE 1M (what an extended report says of a legacy PDU).
    public var primaryPHY: UInt8
    /// Secondary_PHY (7.7.65.13): 0x00 no packets on the secondary advertising channel (legacy
    /// PDUs), 0x01 LE 1M, 0x02 LE 2M, 0x03 LE Coded.
    public var secondaryPHY: UInt8
    /// Extended reports only: Periodic_Advertising_Interval, 1.25 ms units (0: no periodic train).
    public var periodicInterval: UInt16

    public init(address: DeviceAddress, kind: AdvertisingEventKind, rssi: Int8?, txPower: Int8?, data: [UInt8],
                dataStatus: UInt8 = 0, sid: UInt8 = 0xFF, primaryPHY: UInt8 = 0x01, secondaryPHY: UInt8 = 0x00,
                periodicInterval: UInt16 = 0) {
        self.address = address
        self.kind = kind
        self.rssi = rssi
        self.txPower = txPower
        self.data = data
        self.dataStatus = dataStatus
        self.sid = sid
        self.primaryPHY = primaryPHY
        self.secondaryPHY = secondaryPHY
        self.periodicInterval = periodicInterval
    }

    public var isConnectable: Bool { kind.contains(.connectable) }
    public var isScanResponse: Bool { kind.contains(.scanResponse) }
}

/// Everything the host reports to the layer above, in controller order.
public enum HostEvent: Sendable {
    case advertisement(AdvertisingReportValue)
    /// A link came up (as central through `connect`, or as peripheral while advertising).
    case connected(LEConnection)
    case disconnected(handle: UInt16, reason: HCIStatus)
    case connectionUpdated(handle: UInt16, status: HCIStatus, parameters: ConnectionParameters)
    case dataLengthChanged(handle: UInt16, maxTxOctets: UInt16, maxTxTime: UInt16, maxRxOctets: UInt16, maxRxTime: UInt16)
    case phyUpdated(handle: UInt16, status: HCIStatus, txPHY: UInt8, rxPHY: UInt8)
    case encryptionChanged(handle: UInt16, enabled: Bool, status: HCIStatus)
    case longTermKeyRequest(handle: UInt16, random: UInt64, ediv: UInt16)
    case scanTimeout
    case advertisingSetTerminated(handle: UInt8, status: HCIStatus, connectionHandle: UInt16, completedEvents: UInt8)
    /// A periodic sync came up (`Host.createPeriodicSync`).
    case periodicSyncEstablished(PeriodicSync)
    /// One periodic advertisement of a sync, its fragments joined.
    case periodicReport(PeriodicReport)
    /// The controller lost a sync (no train for its sync timeout, Core v5.4 Vol 4 Part E 7.7.65.16).
    case periodicSyncLost(handle: UInt16)
    /// The peer on a connection gave us a sync (Periodic Advertising Sync Transfer, Core v5.4
    /// Vol 4 Part E 7.7.65.24), with the service data it sent.
    case periodicSyncTransferred(PeriodicSync, connection: UInt16, serviceData: UInt16)
    case hardwareError(UInt8)
    case transportLost(TransportError)
    /// Something was dropped or ignored (malformed event, bad ACL fragment, full queue).
    case warning(String)
}
