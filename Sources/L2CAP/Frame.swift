import HCI
import Host

/// An L2CAP channel identifier (Core Vol 3 Part A 2.1, LE-U).
public struct L2CAPCID: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let att = L2CAPCID(0x0004)
    public static let leSignaling = L2CAPCID(0x0005)
    public static let smp = L2CAPCID(0x0006)
    /// Dynamically allocated CIDs on LE-U: 0x0040–0x007F.
    public static let dynamicRange: ClosedRange<UInt16> = 0x0040...0x007F

    public var isDynamic: Bool { L2CAPCID.dynamicRange.contains(rawValue) }

    /// The ACL-U (BR/EDR) signaling channel (Core v5.4 Vol 3 Part A 2.1, Table 2.1).
    public static let signaling = L2CAPCID(0x0001)
    /// The BR/EDR Security Manager (SMP over ACL-U, Core v5.4 Vol 3 Part H 3.2).
    public static let bredrSMP = L2CAPCID(0x0007)

    /// "ATT", "LE Signaling", "SMP", "Dynamic"; the ACL-U fixed channels "Signaling",
    /// "Connectionless", "BR/EDR SMP"; nil for other (reserved/unused) CIDs.
    public var name: String? {
        switch rawValue {
        case 0x0001: return "Signaling"
        case 0x0002: return "Connectionless"
        case 0x0007: return "BR/EDR SMP"
        case 0x0004: return "ATT"
        case 0x0005: return "LE Signaling"
        case 0x0006: return "SMP"
        case 0x0040...0x007F: return "Dynamic"
        default: return nil
        }
    }

    public var description: String { "\(name ?? "CID") (\(hexCode(rawValue)))" }
}

/// A B-frame (basic information frame, Core Vol 3 Part A 3.1): Length(2) + Channel ID(2) +
/// Information payload. Also the outer shape of C-frames and K-frames.
public struct L2CAPFrame: Sendable, Hashable, FieldDescribable {
    public var cid: L2CAPCID
    public var payload: [UInt8]

    public static let headerLength = 4

    public init(cid: L2CAPCID, payload: [UInt8]) {
        self.cid = cid
        self.payload = payload
    }

    /// The total frame length (header + payload) announced by the first 4 octets of a frame,
    /// for reassembling ACL fragments; nil while fewer than 4 octets are available.
    public static func totalLength<C: Collection>(header: C) -> Int? where C.Element == UInt8 {
        L2CAPReassembler.totalLength(header: header)
    }

    /// Decodes one complete frame. Fewer payload octets than the length field says →
    /// `DecodeError.truncated` (incomplete); more → `DecodeError.trailingBytes` (malformed).
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> L2CAPFrame {
        var (cid, payload) = try decodeInPlace(bytes)
        return L2CAPFrame(cid: cid, payload: payload.rest())
    }

    /// `decode` without copying the payload out: the channel, and a reader of the information
    /// payload in place in `bytes` (a received frame is demultiplexed and its PDU decoded
    /// from the octets the link delivered).
    public static func decodeInPlace(_ bytes: [UInt8]) throws(DecodeError) -> (cid: L2CAPCID, payload: ByteReader) {
        var r = ByteReader(bytes)
        let length = Int(try r.u16("length"))
        let cid = L2CAPCID(try r.u16("channelId"))
        let payload = try r.window(length, "information payload")
        try r.expectEnd("L2CAP frame")
        return (cid, payload)
    }

    /// Header + payload. The payload must be at most 65535 octets.
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: L2CAPFrame.headerLength + payload.count)
        w.u16(UInt16(truncatingIfNeeded: payload.count))
        w.u16(cid.rawValue)
        w.append(payload)
        return w.bytes
    }

    /// A frame's octets built in one buffer (no payload array copied in): the header, then
    /// what `writePayload` appends (at most 65535 octets; `payloadCapacity` is what to reserve).
    public static func encode(cid: L2CAPCID, payloadCapacity: Int, _ writePayload: (inout ByteWriter) -> Void) -> [UInt8] {
        var w = ByteWriter(capacity: headerLength + payloadCapacity)
        w.u16(0)  // the length, set below
        w.u16(cid.rawValue)
        writePayload(&w)
        let length = UInt16(truncatingIfNeeded: w.bytes.count - headerLength)
        w.bytes[0] = UInt8(length & 0xff)
        w.bytes[1] = UInt8(length >> 8)
        return w.bytes
    }

    /// CLI.md: `{"cid":4,"length":7,"channel":"ATT"}`.
    public var fields: [Field] {
        var f: [Field] = [.int("cid", cid.rawValue), .int("length", payload.count)]
        if let name = cid.name { f.append(.text("channel", name)) }
        return f
    }
}
