import HCI
import Capture
import L2CAP

/// The dynamic L2CAP channels a capture opens, so a channel's PSM decides how its frames are
/// decoded (as Wireshark's btl2cap follows them). Learnt from the signaling channels' Connection
/// Requests and Responses, per ACL connection handle and direction: BR/EDR Connection Request /
/// Response (0x02/0x03, Core v5.4 Vol 3 Part A 4.2, 4.3; basic mode unless a Retransmission and
/// Flow Control option says otherwise, 5.4), LE Credit Based Connection Request / Response
/// (0x14/0x15, 4.22, 4.23) and Credit Based Connection Request / Response (0x17/0x18, 4.25,
/// 4.26: one channel per non-zero Destination CID, paired with the Source CID in the same
/// position). A Disconnection Response (4.7), a Disconnection Complete or a new connection on
/// the handle ends them. A channel the capture did not see opened is not followed.
///
/// Bounded: at most `maxChannels` followed channels (the oldest is forgotten first),
/// `maxPendingRequests` unanswered requests and `maxPendingSDUs` SDUs being reassembled from
/// K-frames (each at most 65535 octets, the SDU Length field's range, 3.4.3).
struct ChannelTracker {
    static let maxChannels = 64
    static let maxPendingRequests = 32
    static let maxPendingSDUs = 16

    /// How the channel's frames carry SDUs.
    enum Mode: Equatable {
        /// B-frames: one SDU per frame (3.1).
        case basic
        /// K-frames (3.4): LE Credit Based Flow Control mode.
        case leCreditBased
        /// K-frames: Enhanced Credit Based Flow Control mode.
        case enhancedCreditBased
        /// I-frames and S-frames of a Retransmission and Flow Control mode (3.3): not decoded.
        case framed(ChannelMode)

        var name: String {
            switch self {
            case .basic: return "basic"
            case .leCreditBased: return "LE credit based"
            case .enhancedCreditBased: return "enhanced credit based"
            case .framed(let m): return m.name
            }
        }

        var usesKFrames: Bool { self == .leCreditBased || self == .enhancedCreditBased }
    }

    /// The CID that packets going in `direction` on `handle` carry: the endpoint at the
    /// receiving side of that direction.
    struct Key: Hashable {
        var handle: UInt16
        var direction: Direction?
        var cid: UInt16
    }

    struct Channel {
        var psm: UInt16
        var mode: Mode
        /// The packet whose response opened it.
        var openedIn: Int
        /// Shared by both directions of the channel: the ATT bearer's identity for GATT.
        var serial: Int
    }

    /// An SDU being reassembled from K-frames on one key.
    struct PartialSDU {
        var length: Int
        var octets: [UInt8]
        var frames: [Int]
    }

    enum Request {
        case bredr(psm: UInt16, sourceCID: UInt16)
        case le(psm: UInt16, sourceCID: UInt16)
        case enhanced(psm: UInt16, sourceCIDs: [UInt16])
    }

    struct PendingKey: Hashable {
        var handle: UInt16
        /// The request's direction.
        var direction: Direction?
        var identifier: UInt8
    }

    private(set) var channels: [Key: Channel] = [:]
    private var pending: [PendingKey: (request: Request, order: Int)] = [:]
    private var partial: [Key: PartialSDU] = [:]
    private var serials = 0
    private var requests = 0

    static func reverse(_ d: Direction?) -> Direction? { d.map { $0 == .sent ? .received : .sent } }

    func channel(handle: UInt16, direction: Direction?, cid: UInt16) -> Channel? {
        channels[Key(handle: handle, direction: direction, cid: cid)]
    }

    mutating func reset(handle: UInt16) {
        channels = channels.filter { $0.key.handle != handle }
        pending = pending.filter { $0.key.handle != handle }
        partial = partial.filter { $0.key.handle != handle }
    }

    // MARK: Signaling

    /// A command of the LE signaling channel, or a shared one of the BR/EDR channel.
    mutating func observe(_ body: SignalingCommand.Body, identifier: UInt8, handle: UInt16, direction: Direction?, index: Int) {
        switch body {
        case let .leCreditBasedConnectionRequest(spsm, scid, _, _, _):
            request(.le(psm: spsm, sourceCID: scid), handle: handle, direction: direction, identifier: identifier)
        case let .leCreditBasedConnectionResponse(dcid, _, _, _, result):
            guard let req = answer(handle: handle, direction: direction, identifier: identifier, final: true),
                  case let .le(psm, scid) = req, result == .successful, dcid != 0 else { return }
            open(psm: psm, mode: .leCreditBased, requesterCID: scid, responderCID: dcid, handle: handle,
                 responseDirection: direction, index: index)
        case let .creditBasedConnectionRequest(spsm, _, _, _, scids):
            request(.enhanced(psm: spsm, sourceCIDs: scids), handle: handle, direction: direction, identifier: identifier)
        case let .creditBasedConnectionResponse(_, _, _, _, dcids):
            // Some channels may be refused (result 0x0004, 0x0009...): each non-zero
            // Destination CID is one established channel (4.26).
            guard let req = answer(handle: handle, direction: direction, identifier: identifier, final: true),
                  case let .enhanced(psm, scids) = req else { return }
            for (scid, dcid) in zip(scids, dcids) where dcid != 0 {
                open(psm: psm, mode: .enhancedCreditBased, requesterCID: scid, responderCID: dcid, handle: handle,
                     responseDirection: direction, index: index)
            }
        case .commandReject:
            _ = answer(handle: handle, direction: direction, identifier: identifier, final: true)
        case let .disconnectionResponse(dcid, scid):
            // Sent by the side whose endpoint is `dcid` (4.7): packets to it go the other way.
            close(Key(handle: handle, direction: Self.reverse(direction), cid: dcid))
            close(Key(handle: handle, direction: direction, cid: scid))
        default:
            break
        }
    }

    /// A command only the BR/EDR signaling channel carries.
    mutating func observe(_ body: SignalingCommand.ACLUBody, identifier: UInt8, handle: UInt16, direction: Direction?, index: Int) {
        switch body {
        case let .connectionRequest(psm, scid):
            request(.bredr(psm: psm, sourceCID: scid), handle: handle, direction: direction, identifier: identifier)
        case let .connectionResponse(dcid, scid, result, _):
            // "Connection pending" is followed by another response with the same identifier (4.3).
            guard let req = answer(handle: handle, direction: direction, identifier: identifier, final: result != .pending),
                  case let .bredr(psm, requestSCID) = req, result == .successful, dcid != 0 else { return }
            open(psm: psm, mode: .basic, requesterCID: scid == 0 ? requestSCID : scid, responderCID: dcid, handle: handle,
                 responseDirection: direction, index: index)
        case let .configurationRequest(req):
            // Sent to the endpoint `destinationCID`: its mode is what the option asks (5.4);
            // the channel's other direction is set by the peer's own request.
            guard let mode = req.options.lazy.compactMap(\.mode).last else { return }
            let key = Key(handle: handle, direction: direction, cid: req.destinationCID)
            guard var ch = channels[key], !ch.mode.usesKFrames else { return }
            ch.mode = mode == .basic ? .basic : .framed(mode)
            channels[key] = ch
            // The sender's outgoing packets use that mode too (both sides of a channel agree on it).
            if let other = channels.first(where: { $0.key.handle == handle && $0.key.direction == Self.reverse(direction) && $0.value.serial == ch.serial }) {
                var o = other.value
                o.mode = ch.mode
                channels[other.key] = o
            }
        default:
            break
        }
    }

    private mutating func request(_ r: Request, handle: UInt16, direction: Direction?, identifier: UInt8) {
        if pending.count >= Self.maxPendingRequests, let oldest = pending.min(by: { $0.value.order < $1.value.order }) {
            pending.removeValue(forKey: oldest.key)
        }
        requests += 1
        pending[PendingKey(handle: handle, direction: direction, identifier: identifier)] = (r, requests)
    }

    /// The request a response travelling in `direction` answers (same identifier, other way).
    private mutating func answer(handle: UInt16, direction: Direction?, identifier: UInt8, final: Bool) -> Request? {
        let key = PendingKey(handle: handle, direction: Self.reverse(direction), identifier: identifier)
        return final ? pending.removeValue(forKey: key)?.request : pending[key]?.request
    }

    /// A channel between the requester's `requesterCID` and the responder's `responderCID`:
    /// packets to the requester travel the response's way.
    private mutating func open(psm: UInt16, mode: Mode, requesterCID: UInt16, responderCID: UInt16, handle: UInt16,
                               responseDirection: Direction?, index: Int) {
        serials += 1
        let ch = Channel(psm: psm, mode: mode, openedIn: index, serial: serials)
        for key in [Key(handle: handle, direction: responseDirection, cid: requesterCID),
                    Key(handle: handle, direction: Self.reverse(responseDirection), cid: responderCID)] {
            partial.removeValue(forKey: key)
            if channels[key] == nil, channels.count >= Self.maxChannels,
               let oldest = channels.min(by: { $0.value.serial < $1.value.serial }) {
                close(oldest.key)
            }
            channels[key] = ch
        }
    }

    private mutating func close(_ key: Key) {
        channels.removeValue(forKey: key)
        partial.removeValue(forKey: key)
    }

    // MARK: K-frames

    enum KFrame {
        /// A whole SDU: `length` from the first frame's SDU Length, `frames` the packets it
        /// came in (empty when it came whole in this one).
        case sdu([UInt8], length: Int, frames: [Int])
        case partial(number: Int, firstIndex: Int, received: Int, length: Int)
        case malformed(String)
    }

    /// One K-frame's information payload on a credit-based channel (3.4.3): the first frame of
    /// an SDU starts with its 2-octet SDU Length, the next ones continue it.
    mutating func kFrame(_ payload: [UInt8], key: Key, index: Int) -> KFrame {
        if var p = partial.removeValue(forKey: key) {
            p.octets += payload
            p.frames.append(index)
            if p.octets.count > p.length {
                return .malformed("K-frames of packets \(p.frames.map(String.init).joined(separator: ",")) carry \(p.octets.count) octets for an SDU of \(p.length)")
            }
            if p.octets.count == p.length { return .sdu(p.octets, length: p.length, frames: p.frames) }
            partial[key] = p
            return .partial(number: p.frames.count, firstIndex: p.frames[0], received: p.octets.count, length: p.length)
        }
        guard payload.count >= 2 else { return .malformed("K-frame of \(payload.count) octets has no SDU Length") }
        let length = Int(payload[0]) | Int(payload[1]) << 8
        let octets = Array(payload[2...])
        if octets.count > length { return .malformed("first K-frame carries \(octets.count) octets for an SDU of \(length)") }
        if octets.count == length { return .sdu(octets, length: length, frames: []) }
        if partial.count >= Self.maxPendingSDUs, let oldest = partial.min(by: { $0.value.frames[0] < $1.value.frames[0] }) {
            partial.removeValue(forKey: oldest.key)
        }
        partial[key] = PartialSDU(length: length, octets: octets, frames: [index])
        return .partial(number: 1, firstIndex: index, received: octets.count, length: length)
    }
}
