// `dump --stats` (btmon -a's analysis, BlueZ monitor/analyze.c, is the anchor): what a capture
// carried per connection and per L2CAP channel, counted while the decoder decodes it, from the
// typed values each layer's codec produced (never from rendered fields).
import HCI
import Capture
import L2CAP
import ATT
import SMP

/// The statistics of one capture (`PacketDecoder.statistics()`), every count from the decoded
/// packets:
/// - packets by HCI packet type (Core v5.4 Vol 4 Part E 5.4: command, ACL, SCO, event, ISO) and
///   the capture's notes;
/// - per connection (an ACL connection handle from its Connection Complete / LE (Enhanced)
///   Connection Complete to its Disconnection Complete, Vol 4 Part E 7.7.3, 7.7.5, 7.7.65.1,
///   7.7.65.10): HCI ACL data packets and their Data_Total_Length octets (5.4.2) each way, and
///   per L2CAP channel the L2CAP frames and their information payload octets (the basic
///   header's Length, Vol 3 Part A 3.1) each way;
/// - on every channel carrying ATT: requests, the responses and Error Responses that answer them
///   (one transaction at a time per bearer, Vol 3 Part F 3.3.2) and the request→answer latency,
///   Handle Value Indications and their Confirmations (3.4.7.2, 3.4.7.3), Error Responses by
///   Error Code (3.4.1.1);
/// - SMP Pairing Failed by reason (Vol 3 Part H 3.5.5) per connection and direction;
/// - HCI commands that failed: Command Status with a Status other than Success (Vol 4 Part E
///   7.7.15), Command Complete whose return parameters begin with such a Status (7.7.14).
public struct CaptureStatistics: Sendable, Equatable {
    /// Packets and octets one way.
    public struct Flow: Sendable, Equatable {
        public var packets = 0
        public var octets = 0
    }

    /// Latencies in nanoseconds: exact count, minimum and maximum; the median of the samples
    /// kept (`samples == count` unless the capture had more than `latencySampleBudget`).
    public struct Latency: Sendable, Equatable {
        public var count = 0
        public var minimum: Int64 = .max
        public var maximum: Int64 = .min
        /// The middle sample; of an even number, the mean of the two middle ones (rounded down).
        public var median: Int64 = 0
        public var samples = 0
    }

    public struct ATTCounts: Sendable, Equatable {
        public var requests = 0
        /// Responses and Error Responses that answered a request of this bearer.
        public var answered = 0
        public var latency = Latency()
        public var indications = 0
        public var confirmed = 0
        public var confirmationLatency = Latency()
        /// Error Responses by Error Code, in code order.
        public var errors: [(code: ATTErrorCode, count: Int)] = []

        public static func == (a: Self, b: Self) -> Bool {
            a.requests == b.requests && a.answered == b.answered && a.latency == b.latency
                && a.indications == b.indications && a.confirmed == b.confirmed
                && a.confirmationLatency == b.confirmationLatency
                && a.errors.map(\.code) == b.errors.map(\.code) && a.errors.map(\.count) == b.errors.map(\.count)
        }
    }

    public enum ChannelKind: Sendable, Equatable {
        /// A fixed channel (CID 0x0001–0x003F, Vol 3 Part A 2.1): the same CID both ways.
        case fixed(cid: UInt16)
        /// A dynamic channel followed from its signaling: the CID frames to the controller carry
        /// (the peer's endpoint) and the CID frames from it carry (ours), as far as seen.
        case followed(psm: UInt16, mode: String, sentCID: UInt16?, receivedCID: UInt16?, openedIn: Int)
        /// A dynamic CID whose opening the capture did not show: one endpoint, one direction.
        case unfollowed(cid: UInt16, direction: Direction?)
    }

    public struct Channel: Sendable, Equatable {
        public var kind: ChannelKind
        /// "ATT", "SMP", "EATT", "PSM 0x1001"...
        public var name: String
        public var sent = Flow()
        public var received = Flow()
        /// Frames of a capture that does not say their direction (pcap link type 187).
        public var unknown = Flow()
        public var first: CaptureTime
        public var last: CaptureTime
        public var att: ATTCounts?
    }

    public struct SMPFailure: Sendable, Equatable {
        public var direction: Direction?
        public var reason: SMPPairingFailedReason
        public var count: Int
    }

    public struct Connection: Sendable, Equatable {
        public var handle: UInt16
        /// "LE" or "BR/EDR" from the event that created it; nil when the capture did not show it.
        public var transport: String?
        public var address: BDAddress?
        public var addressType: AddressType?
        public var connectedIn: Int?
        public var connectedAt: CaptureTime?
        public var disconnectedIn: Int?
        public var disconnectedAt: CaptureTime?
        public var reason: HCIStatus?
        /// HCI ACL data packets and their octets.
        public var sent = Flow()
        public var received = Flow()
        public var unknown = Flow()
        /// First and last packet on the handle (ACL data, or its connection events).
        public var first: CaptureTime
        public var last: CaptureTime
        public var channels: [Channel] = []
        /// Frames on channels beyond `maxChannelsPerConnection`.
        public var untrackedFrames = Flow()
        public var smpFailures: [SMPFailure] = []

        /// From the Connection Complete (else the first packet) to the Disconnection Complete
        /// (else the last packet), in nanoseconds.
        public var duration: Int64 {
            CaptureStatistics.nanoseconds(disconnectedAt ?? last) - CaptureStatistics.nanoseconds(connectedAt ?? first)
        }
    }

    public struct CommandFailure: Sendable, Equatable {
        public var opcode: HCIOpcode
        /// "Command Status" or "Command Complete".
        public var event: String
        public var status: HCIStatus
        public var count: Int
        public var firstIn: Int
    }

    public var commands = 0, events = 0, acl = 0, sco = 0, iso = 0, notes = 0, malformed = 0
    public var packets = 0
    public var first: CaptureTime?
    public var last: CaptureTime?
    public var connections: [Connection] = []
    /// ACL packets of connections beyond `maxConnections`.
    public var untrackedConnections = Flow()
    public var commandFailures: [CommandFailure] = []

    /// Bounds (a hostile capture must not grow memory without bound): connections kept, channels
    /// per connection, latency samples kept for medians across the capture (8 MiB), distinct
    /// command failures kept.
    public static let maxConnections = 1024
    public static let maxChannelsPerConnection = 64
    public static let latencySampleBudget = 1 << 20
    public static let maxCommandFailures = 256

    /// A capture time in nanoseconds since 1970, clamped so differences never overflow.
    static func nanoseconds(_ t: CaptureTime) -> Int64 {
        let limit: Int64 = 4_000_000_000  // seconds: year 2096; clamped both ways
        let s = Swift.min(Swift.max(t.seconds, -limit), limit)
        return s * 1_000_000_000 + Int64(t.nanoseconds)
    }

    /// Bits per second for `octets` in `nanoseconds`, nil when no time passed.
    public static func bitsPerSecond(octets: Int, nanoseconds: Int64) -> Int? {
        guard nanoseconds > 0 else { return nil }
        let v = Double(octets) * 8 * 1e9 / Double(nanoseconds)
        return v < 9e18 ? Int(v) : Int.max
    }
}

/// Counts a capture's statistics as `PacketDecoder` decodes it (created only for `--stats`).
struct StatisticsCollector {
    private(set) var stats = CaptureStatistics()
    /// The handle's connection now (an index into `stats.connections`).
    private var current: [UInt16: Int] = [:]
    private var channelIndex: [Int: [ChannelKey: Int]] = [:]
    private var samples: [SampleKey: [Int64]] = [:]
    private var samplesLeft = CaptureStatistics.latencySampleBudget
    /// The Handle Value Indication waiting for its Confirmation, per channel and direction.
    private var indications: [IndicationKey: CaptureTime] = [:]
    private var failureIndex: [FailureKey: Int] = [:]
    /// The channel of the current packet's L2CAP frame, for the ATT PDU it carries.
    private var frameChannel: (connection: Int, channel: Int)?

    enum ChannelKey: Hashable {
        case fixed(UInt16)
        case followed(Int)
        case unfollowed(UInt16, Direction?)
    }

    struct SampleKey: Hashable {
        var connection: Int
        var channel: Int
        var confirmation: Bool
    }

    struct IndicationKey: Hashable {
        var connection: Int
        var channel: Int
        var direction: Direction?
    }

    struct FailureKey: Hashable {
        var opcode: UInt16
        var event: UInt8
        var status: UInt8
    }

    /// What an L2CAP frame's channel is, from the decoder's channel tracking.
    enum FrameChannel {
        case fixed(cid: UInt16, name: String)
        case followed(serial: Int, psm: UInt16, mode: String, cid: UInt16, name: String, openedIn: Int)
        case unfollowed(cid: UInt16)
    }

    // MARK: Packets

    mutating func packet(type: String, time: CaptureTime, malformed: Bool) {
        frameChannel = nil
        stats.packets += 1
        if stats.first == nil { stats.first = time }
        stats.last = time
        switch type {
        case "command": stats.commands += 1
        case "event": stats.events += 1
        case "acl": stats.acl += 1
        case "sco": stats.sco += 1
        case "iso": stats.iso += 1
        case "note", "monitor": stats.notes += 1
        default: break
        }
        if malformed { stats.malformed += 1 }
    }

    /// A Connection Complete (BR/EDR) or LE (Enhanced) Connection Complete with status Success:
    /// a new connection on `handle`, even if the handle had one.
    mutating func connected(handle: UInt16, transport: String, address: BDAddress, addressType: AddressType?,
                            index: Int, time: CaptureTime) {
        guard let c = newConnection(handle: handle, time: time) else { return }
        stats.connections[c].transport = transport
        stats.connections[c].address = address
        stats.connections[c].addressType = addressType
        stats.connections[c].connectedIn = index
        stats.connections[c].connectedAt = time
    }

    /// A Disconnection Complete with status Success ends the handle's connection (one the
    /// capture showed nothing of is not made up from it, as btmon does).
    mutating func disconnected(handle: UInt16, reason: HCIStatus, index: Int, time: CaptureTime) {
        guard let c = current[handle] else { return }
        stats.connections[c].disconnectedIn = index
        stats.connections[c].disconnectedAt = time
        stats.connections[c].reason = reason
        stats.connections[c].last = time
        current.removeValue(forKey: handle)
        indications = indications.filter { $0.key.connection != c }
    }

    mutating func acl(handle: UInt16, direction: Direction?, octets: Int, time: CaptureTime) {
        guard let c = connection(handle, time: time) else {
            stats.untrackedConnections.packets += 1
            stats.untrackedConnections.octets += octets
            return
        }
        stats.connections[c].last = time
        switch direction {
        case .sent?: add(&stats.connections[c].sent, octets)
        case .received?: add(&stats.connections[c].received, octets)
        case nil: add(&stats.connections[c].unknown, octets)
        }
    }

    mutating func commandFailure(opcode: HCIOpcode, event: UInt8, status: HCIStatus, index: Int) {
        let key = FailureKey(opcode: opcode.rawValue, event: event, status: status.rawValue)
        if let i = failureIndex[key] { stats.commandFailures[i].count += 1; return }
        guard stats.commandFailures.count < CaptureStatistics.maxCommandFailures else { return }
        failureIndex[key] = stats.commandFailures.count
        stats.commandFailures.append(.init(opcode: opcode, event: event == 0x0F ? "Command Status" : "Command Complete",
                                           status: status, count: 1, firstIn: index))
    }

    // MARK: L2CAP

    /// One whole L2CAP frame of `octets` information payload octets.
    mutating func frame(handle: UInt16, direction: Direction?, channel: FrameChannel, octets: Int, time: CaptureTime) {
        guard let c = connection(handle, time: time) else { return }
        let key: ChannelKey
        switch channel {
        case let .fixed(cid, _): key = .fixed(cid)
        case let .followed(serial, _, _, _, _, _): key = .followed(serial)
        case let .unfollowed(cid): key = .unfollowed(cid, direction)
        }
        let ch: Int
        if let i = channelIndex[c]?[key] {
            ch = i
        } else {
            guard stats.connections[c].channels.count < CaptureStatistics.maxChannelsPerConnection else {
                add(&stats.connections[c].untrackedFrames, octets)
                return
            }
            let kind: CaptureStatistics.ChannelKind, name: String
            switch channel {
            case let .fixed(cid, n): kind = .fixed(cid: cid); name = n
            case let .followed(_, psm, mode, _, n, openedIn):
                kind = .followed(psm: psm, mode: mode, sentCID: nil, receivedCID: nil, openedIn: openedIn); name = n
            case let .unfollowed(cid): kind = .unfollowed(cid: cid, direction: direction); name = "not followed"
            }
            ch = stats.connections[c].channels.count
            stats.connections[c].channels.append(.init(kind: kind, name: name, first: time, last: time))
            channelIndex[c, default: [:]][key] = ch
        }
        if case let .followed(_, _, _, cid, _, _) = channel,
           case .followed(let psm, let mode, var sentCID, var receivedCID, let openedIn) = stats.connections[c].channels[ch].kind {
            if direction == .sent { sentCID = cid } else if direction == .received { receivedCID = cid }
            stats.connections[c].channels[ch].kind = .followed(psm: psm, mode: mode, sentCID: sentCID, receivedCID: receivedCID, openedIn: openedIn)
        }
        stats.connections[c].channels[ch].last = time
        switch direction {
        case .sent?: add(&stats.connections[c].channels[ch].sent, octets)
        case .received?: add(&stats.connections[c].channels[ch].received, octets)
        case nil: add(&stats.connections[c].channels[ch].unknown, octets)
        }
        frameChannel = (c, ch)
    }

    // MARK: ATT and SMP

    /// An ATT PDU of the current packet's frame; `answered` the request a response or Error
    /// Response answers (the decoder's pairing per bearer, GATTTracker).
    mutating func att(_ pdu: ATTPDU, direction: Direction?, answered: GATTTracker.PendingRequest?, time: CaptureTime) {
        guard let (c, ch) = frameChannel else { return }
        var a = stats.connections[c].channels[ch].att ?? CaptureStatistics.ATTCounts()
        let op = pdu.opcode
        if op.isRequest { a.requests += 1 }
        if let answered, op.isResponse || op == .errorResponse {
            // Only an answer to that request: its response opcode, or an Error Response naming it.
            var matches = answered.pdu.opcode.responseOpcode == op
            if case let .errorResponse(requestOpcode, _, _) = pdu { matches = requestOpcode == answered.pdu.opcode }
            if matches {
                a.answered += 1
                sample(&a.latency, SampleKey(connection: c, channel: ch, confirmation: false),
                       CaptureStatistics.nanoseconds(time) - CaptureStatistics.nanoseconds(answered.time))
            }
        }
        if case let .errorResponse(_, _, code) = pdu {
            if let i = a.errors.firstIndex(where: { $0.code == code }) {
                a.errors[i].count += 1
            } else {
                a.errors.append((code, 1))
                a.errors.sort { $0.code.rawValue < $1.code.rawValue }
            }
        }
        if op == .handleValueIndication {
            a.indications += 1
            indications[IndicationKey(connection: c, channel: ch, direction: direction)] = time
        } else if op == .handleValueConfirmation {
            let reverse: Direction? = direction.map { $0 == .sent ? .received : .sent }
            if let sent = indications.removeValue(forKey: IndicationKey(connection: c, channel: ch, direction: reverse)) {
                a.confirmed += 1
                sample(&a.confirmationLatency, SampleKey(connection: c, channel: ch, confirmation: true),
                       CaptureStatistics.nanoseconds(time) - CaptureStatistics.nanoseconds(sent))
            }
        }
        stats.connections[c].channels[ch].att = a
    }

    mutating func smp(_ pdu: SMPPDU, direction: Direction?) {
        guard case let .pairingFailed(reason) = pdu, let (c, _) = frameChannel else { return }
        if let i = stats.connections[c].smpFailures.firstIndex(where: { $0.direction == direction && $0.reason == reason }) {
            stats.connections[c].smpFailures[i].count += 1
        } else if stats.connections[c].smpFailures.count < 64 {
            stats.connections[c].smpFailures.append(.init(direction: direction, reason: reason, count: 1))
        }
    }

    // MARK: Finishing

    /// The statistics with every median computed.
    func finished() -> CaptureStatistics {
        var s = stats
        for (key, values) in samples {
            let sorted = values.sorted()
            let n = sorted.count
            let median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
            if key.confirmation {
                s.connections[key.connection].channels[key.channel].att?.confirmationLatency.median = median
            } else {
                s.connections[key.connection].channels[key.channel].att?.latency.median = median
            }
        }
        return s
    }

    // MARK: Helpers

    private func add(_ f: inout CaptureStatistics.Flow, _ octets: Int) {
        f.packets += 1
        f.octets += octets
    }

    private mutating func sample(_ l: inout CaptureStatistics.Latency, _ key: SampleKey, _ ns: Int64) {
        l.count += 1
        l.minimum = Swift.min(l.minimum, ns)
        l.maximum = Swift.max(l.maximum, ns)
        guard samplesLeft > 0 else { return }
        samplesLeft -= 1
        l.samples += 1
        samples[key, default: []].append(ns)
    }

    /// The handle's current connection, or a new one when it has none (a capture that started
    /// after the connection was made: no Connection Complete).
    private mutating func connection(_ handle: UInt16, time: CaptureTime) -> Int? {
        if let c = current[handle] { return c }
        return newConnection(handle: handle, time: time)
    }

    private mutating func newConnection(handle: UInt16, time: CaptureTime) -> Int? {
        if let old = current.removeValue(forKey: handle) {
            indications = indications.filter { $0.key.connection != old }
        }
        guard stats.connections.count < CaptureStatistics.maxConnections else { return nil }
        current[handle] = stats.connections.count
        stats.connections.append(.init(handle: handle, first: time, last: time))
        return stats.connections.count - 1
    }
}
