import Foundation
import HCI

/// A capture timestamp: seconds since 1970-01-01 UTC and the fraction in nanoseconds.
public struct CaptureTime: Sendable, Equatable, Comparable {
    public var seconds: Int64
    public var nanoseconds: Int32

    public init(seconds: Int64, nanoseconds: Int32) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    public init(_ date: Date) {
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        seconds = micros.floorDiv(1_000_000)
        nanoseconds = Int32(micros - seconds * 1_000_000) * 1000
    }

    public var date: Date { Date(timeIntervalSince1970: Double(seconds) + Double(nanoseconds) / 1e9) }

    /// "2026-11-29T23:46:02.123456Z" (CLI.md's `time`), microsecond precision.
    public var iso8601: String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ v: Int32, _ n: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, n - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(nanoseconds / 1000, 6))Z"
    }

    public static func < (a: CaptureTime, b: CaptureTime) -> Bool {
        (a.seconds, a.nanoseconds) < (b.seconds, b.nanoseconds)
    }
}

extension Int64 {
    fileprivate func floorDiv(_ d: Int64) -> Int64 {
        let q = self / d
        return (self % d != 0 && (self < 0) != (d < 0)) ? q - 1 : q
    }
}

/// One record of a capture file.
public struct CaptureRecord: Sendable {
    public enum Content: Sendable {
        /// An HCI packet, or why its bytes don't decode (reading goes on).
        case packet(Result<HCIPacket, DecodeError>)
        /// A btmon (datalink 2001) record that is not an HCI packet: new/open/close index,
        /// system note, user logging... `text` holds a note's text when there is one.
        case monitor(opcode: UInt16, name: String, text: String?)
    }

    /// 1-based position in the file.
    public var number: Int
    /// Controller index (btsnoop 2001 carries one; other formats: nil).
    public var controllerIndex: UInt16?
    public var time: CaptureTime
    /// nil when the format doesn't say (pcap 187 ACL/SCO/ISO).
    public var direction: Direction?
    public var content: Content
    /// The packet as H4 bytes (indicator + packet), whatever the format stores; for monitor
    /// records and pcap 201 records too short for a direction header, the bytes as stored.
    public var raw: [UInt8]

    public var packet: Result<HCIPacket, DecodeError>? {
        if case .packet(let r) = content { return r }
        return nil
    }
}

/// Reads btsnoop (datalink 1001, 1002, 2001) and pcap (linktype 187, 201; either byte order;
/// microsecond or nanosecond timestamps).
///
/// Record lengths are bounded (64 KiB): a larger one means a corrupt file and ends reading
/// with an error. A file cut mid-record yields every whole record, then `next()` throws a
/// `CaptureError` saying where it was cut.
public struct CaptureReader: Sendable {
    public enum Format: Sendable, Equatable, CustomStringConvertible {
        case btsnoop(datalink: UInt32)
        case pcap(linktype: UInt32, bigEndian: Bool, nanoseconds: Bool)

        public var description: String {
            switch self {
            case .btsnoop(let d): "btsnoop (datalink \(d))"
            case .pcap(let l, _, let ns): "pcap (linktype \(l)\(ns ? ", nanosecond" : ""))"
            }
        }
    }

    public static let maxRecordLength = 64 * 1024

    public let format: Format
    private let bytes: [UInt8]
    private var offset: Int
    private var number = 0
    private var finished = false

    public init(path: String) throws(CaptureError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CaptureError("cannot read \(path): no such file or not readable")
        }
        try self.init(bytes: [UInt8](data), name: path)
    }

    public init(bytes: [UInt8], name: String = "input") throws(CaptureError) {
        self.bytes = bytes
        let notCapture = CaptureError("\(name) is not a btsnoop or pcap file (\(bytes.count) octets, starts with \(Array(bytes.prefix(8)).hex.isEmpty ? "nothing" : Array(bytes.prefix(8)).hex))")
        if bytes.count >= 8, Array(bytes[0..<8]) == Array("btsnoop".utf8) + [0] {
            guard bytes.count >= 16 else { throw CaptureError("\(name): btsnoop header truncated (\(bytes.count) of 16 octets)") }
            let version = be32(bytes, 8)
            guard version == 1 else { throw CaptureError("\(name): unsupported btsnoop version \(version)") }
            let datalink = be32(bytes, 12)
            guard [1001, 1002, 2001].contains(datalink) else {
                throw CaptureError("\(name): unsupported btsnoop datalink \(datalink) (supported: 1001, 1002, 2001)")
            }
            format = .btsnoop(datalink: datalink)
            offset = 16
            return
        }
        guard bytes.count >= 4 else { throw notCapture }
        let magicLE = le32(bytes, 0), magicBE = be32(bytes, 0)
        let bigEndian: Bool, nanos: Bool
        switch (magicLE, magicBE) {
        case (0xa1b2_c3d4, _): (bigEndian, nanos) = (false, false)
        case (0xa1b2_3c4d, _): (bigEndian, nanos) = (false, true)
        case (_, 0xa1b2_c3d4): (bigEndian, nanos) = (true, false)
        case (_, 0xa1b2_3c4d): (bigEndian, nanos) = (true, true)
        default: throw notCapture
        }
        guard bytes.count >= 24 else { throw CaptureError("\(name): pcap header truncated (\(bytes.count) of 24 octets)") }
        let linktype = (bigEndian ? be32(bytes, 20) : le32(bytes, 20)) & 0x0fff_ffff
        guard linktype == 187 || linktype == 201 else {
            throw CaptureError("\(name): unsupported pcap linktype \(linktype) (supported: 187 Bluetooth H4, 201 Bluetooth H4 with direction)")
        }
        format = .pcap(linktype: linktype, bigEndian: bigEndian, nanoseconds: nanos)
        offset = 24
    }

    /// The next record, nil at a clean end of file. Throws at a cut or corrupt record; after
    /// that it returns nil.
    public mutating func next() throws(CaptureError) -> CaptureRecord? {
        guard !finished else { return nil }
        if offset == bytes.count { finished = true; return nil }
        do {
            let record = try readRecord()
            return record
        } catch {
            finished = true
            throw error
        }
    }

    /// Every record plus the error that ended reading early, if any.
    public mutating func readAll() -> (records: [CaptureRecord], error: CaptureError?) {
        var records: [CaptureRecord] = []
        do {
            while let r = try next() { records.append(r) }
            return (records, nil)
        } catch {
            return (records, error)
        }
    }

    private mutating func readRecord() throws(CaptureError) -> CaptureRecord {
        let recordNumber = number + 1
        let headerLength: Int
        switch format {
        case .btsnoop: headerLength = 24
        case .pcap: headerLength = 16
        }
        let available = bytes.count - offset
        guard available >= headerLength else {
            throw CaptureError("file truncated: record \(recordNumber) is cut in its header (\(available) of \(headerLength) octets at offset \(offset)); \(number) whole record(s) read")
        }
        let h = offset
        var direction: Direction?
        var time: CaptureTime
        let included: Int
        var flags: UInt32 = 0
        switch format {
        case .btsnoop:
            included = Int(be32(bytes, h + 4))
            flags = be32(bytes, h + 8)
            let micros = Int64(bitPattern: be64(bytes, h + 16)) &- BtsnoopWriter.epochOffsetMicroseconds
            let secs = micros.floorDiv(1_000_000)
            time = CaptureTime(seconds: secs, nanoseconds: Int32(micros - secs * 1_000_000) * 1000)
        case .pcap(_, let big, let nanos):
            let rd = big ? be32 : le32
            let frac = rd(bytes, h + 4)
            included = Int(rd(bytes, h + 8))
            let ns = nanos ? Int32(frac % 1_000_000_000) : Int32(frac % 1_000_000) * 1000
            time = CaptureTime(seconds: Int64(rd(bytes, h)), nanoseconds: ns)
        }
        guard included <= CaptureReader.maxRecordLength else {
            throw CaptureError("record \(recordNumber) at offset \(offset) claims \(included) octets (more than \(CaptureReader.maxRecordLength)): the file is corrupt; \(number) whole record(s) read")
        }
        guard available - headerLength >= included else {
            throw CaptureError("file truncated: record \(recordNumber) is cut (\(available - headerLength) of \(included) octets at offset \(offset)); \(number) whole record(s) read")
        }
        let data = Array(bytes[(h + headerLength)..<(h + headerLength + included)])
        offset = h + headerLength + included
        number = recordNumber

        var index: UInt16?
        let content: CaptureRecord.Content
        var raw = data
        switch format {
        case .btsnoop(1001):
            direction = flags & 1 != 0 ? .received : .sent
            let type: HCIPacketType = flags & 2 != 0 ? (direction == .received ? .event : .command) : .acl
            raw = h4Bytes(type, data)
            content = .packet(Result { () throws(DecodeError) in try HCIPacket(type: type, body: data) })
        case .btsnoop(2001):
            index = UInt16(flags >> 16)
            let opcode = UInt16(flags & 0xffff)
            if let (type, dir) = monitorPacketType(opcode) {
                direction = dir
                raw = h4Bytes(type, data)
                content = .packet(Result { () throws(DecodeError) in try HCIPacket(type: type, body: data) })
            } else {
                content = .monitor(opcode: opcode, name: monitorOpcodeName(opcode), text: monitorText(opcode, data))
            }
        case .pcap(201, _, _):
            guard data.count >= 4 else {
                content = .packet(.failure(.truncated(field: "direction", needed: 4, available: data.count)))
                break
            }
            // The direction field is in network order per the linktype spec; some writers
            // used host order: accept 1 either way.
            let d = be32(data, 0)
            direction = (d == 1 || d == 0x0100_0000) ? .received : .sent
            raw = Array(data[4...])
            content = .packet(Result { () throws(DecodeError) in try HCIPacket(h4: raw) })
        default:  // btsnoop 1002, pcap 187: plain H4
            content = .packet(Result { () throws(DecodeError) in try HCIPacket(h4: data) })
            if case .pcap = format {
                // pcap 187 has no direction: commands go to and events come from the
                // controller; ACL/SCO/ISO could be either, so they stay unknown.
                switch data.first {
                case HCIPacketType.command.rawValue: direction = .sent
                case HCIPacketType.event.rawValue: direction = .received
                default: direction = nil
                }
            } else {
                direction = flags & 1 != 0 ? .received : .sent
            }
        }
        return CaptureRecord(number: recordNumber, controllerIndex: index, time: time, direction: direction, content: content, raw: raw)
    }
}

/// Indicator + body in one allocation (`[t] + data` builds a temporary array first).
@inline(__always)
private func h4Bytes(_ type: HCIPacketType, _ data: [UInt8]) -> [UInt8] {
    var raw: [UInt8] = []
    raw.reserveCapacity(data.count + 1)
    raw.append(type.rawValue)
    raw.append(contentsOf: data)
    return raw
}

/// btmon opcodes that carry HCI packets (BlueZ monitor/: BTSNOOP_OPCODE_*).
private func monitorPacketType(_ opcode: UInt16) -> (HCIPacketType, Direction)? {
    switch opcode {
    case 2: (.command, .sent)
    case 3: (.event, .received)
    case 4: (.acl, .sent)
    case 5: (.acl, .received)
    case 6: (.sco, .sent)
    case 7: (.sco, .received)
    case 18: (.iso, .sent)
    case 19: (.iso, .received)
    default: nil
    }
}

private func monitorOpcodeName(_ opcode: UInt16) -> String {
    switch opcode {
    case 0: "New Index"
    case 1: "Delete Index"
    case 8: "Open Index"
    case 9: "Close Index"
    case 10: "Index Info"
    case 11: "Vendor Diagnostic"
    case 12: "System Note"
    case 13: "User Logging"
    case 14: "Control Open"
    case 15: "Control Close"
    case 16: "Control Command"
    case 17: "Control Event"
    default: "Monitor Opcode \(opcode)"
    }
}

/// Text carried by notes and logging records (NUL-terminated), and a new index's name.
private func monitorText(_ opcode: UInt16, _ data: [UInt8]) -> String? {
    func cString(_ s: ArraySlice<UInt8>) -> String {
        String(decoding: s.prefix { $0 != 0 }, as: UTF8.self)
    }
    switch opcode {
    case 12: return cString(data[...])
    case 13:
        // priority(1) ident_len(1) ident message
        guard data.count >= 2 else { return nil }
        let identLength = Int(data[1])
        guard data.count >= 2 + identLength else { return nil }
        return cString(data[2..<(2 + identLength)]) + ": " + cString(data[(2 + identLength)...])
    case 0:
        // type(1) bus(1) bdaddr(6) name(8)
        guard data.count >= 16 else { return nil }
        return cString(data[8..<16])
    default: return nil
    }
}

private func be32(_ b: [UInt8], _ i: Int) -> UInt32 {
    UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
}

private func le32(_ b: [UInt8], _ i: Int) -> UInt32 {
    UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
}

private func be64(_ b: [UInt8], _ i: Int) -> UInt64 {
    UInt64(be32(b, i)) << 32 | UInt64(be32(b, i + 4))
}
