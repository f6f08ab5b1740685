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
        /// A record that holds no HCI packet, and what the reader says about it (a pcapng
        /// packet on an interface whose link type is not Bluetooth HCI).
        case note(String)
    }

    /// 1-based position in the file.
    public var number: Int
    /// Controller index (btsnoop 2001 and link type 254 carry one; other formats: nil).
    public var controllerIndex: UInt16?
    public var time: CaptureTime
    /// nil when the format doesn't say (link type 187 ACL/SCO/ISO).
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

/// Reads btsnoop (datalink 1001, 1002, 2001), pcap (linktype 187, 201, 254; either byte order;
/// microsecond or nanosecond timestamps) and pcapng (draft-ietf-opsawg-pcapng: sections in
/// either byte order, interfaces of those link types with their timestamp resolution and
/// offset, Enhanced, Simple and obsolete Packet Blocks; other blocks are skipped).
///
/// Record lengths are bounded (64 KiB), and a pcapng block's lengths by the block: a larger one
/// means a corrupt file and ends reading with an error. A file cut mid-record yields every
/// whole record, then `next()` throws a `CaptureError` saying where it was cut.
public struct CaptureReader: Sendable {
    public enum Format: Sendable, Equatable, CustomStringConvertible {
        case btsnoop(datalink: UInt32)
        case pcap(linktype: UInt32, bigEndian: Bool, nanoseconds: Bool)
        /// Byte order and link types are per section and interface: see the records.
        case pcapng
        /// Apple PacketLogger (.pklg): records in one byte order, no file header.
        case packetLogger(bigEndian: Bool)

        public var description: String {
            switch self {
            case .btsnoop(let d): "btsnoop (datalink \(d))"
            case .pcap(let l, _, let ns): "pcap (linktype \(l)\(ns ? ", nanosecond" : ""))"
            case .pcapng: "pcapng"
            case .packetLogger(let big): "PacketLogger (\(big ? "big" : "little")-endian)"
            }
        }
    }

    public static let maxRecordLength = 64 * 1024
    /// Link types read in pcap and pcapng: H4 (187), H4 with direction (201), Linux monitor (254).
    static let linktypes: Set<UInt32> = [187, 201, 254]

    public let format: Format
    private let bytes: [UInt8]
    private var offset: Int
    private var number = 0
    private var finished = false
    /// pcapng: the current section's byte order and interfaces (a Section Header Block resets them).
    private var bigEndian = false
    private var interfaces: [PcapngInterface] = []

    public init(path: String) throws(CaptureError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CaptureError("cannot read \(path): no such file or not readable")
        }
        try self.init(bytes: [UInt8](data), name: path)
    }

    public init(bytes: [UInt8], name: String = "input") throws(CaptureError) {
        self.bytes = bytes
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
        if bytes.count >= 4, le32(bytes, 0) == PcapngBlock.sectionHeader {
            // The blocks, the first Section Header Block included, are checked as they are read.
            format = .pcapng
            offset = 0
            return
        }
        guard bytes.count >= 4 else { throw CaptureError(notCapture(bytes, name)) }
        if let big = packetLoggerByteOrder(bytes) {
            format = .packetLogger(bigEndian: big)
            offset = 0
            return
        }
        let magicLE = le32(bytes, 0), magicBE = be32(bytes, 0)
        let bigEndian: Bool, nanos: Bool
        switch (magicLE, magicBE) {
        case (0xa1b2_c3d4, _): (bigEndian, nanos) = (false, false)
        case (0xa1b2_3c4d, _): (bigEndian, nanos) = (false, true)
        case (_, 0xa1b2_c3d4): (bigEndian, nanos) = (true, false)
        case (_, 0xa1b2_3c4d): (bigEndian, nanos) = (true, true)
        default: throw CaptureError(notCapture(bytes, name))
        }
        guard bytes.count >= 24 else { throw CaptureError("\(name): pcap header truncated (\(bytes.count) of 24 octets)") }
        let linktype = (bigEndian ? be32(bytes, 20) : le32(bytes, 20)) & 0x0fff_ffff
        guard CaptureReader.linktypes.contains(linktype) else {
            throw CaptureError("\(name): unsupported pcap linktype \(linktype) (supported: \(linktypeNames))")
        }
        format = .pcap(linktype: linktype, bigEndian: bigEndian, nanoseconds: nanos)
        offset = 24
    }

    /// The next record, nil at a clean end of file. Throws at a cut or corrupt record; after
    /// that it returns nil.
    public mutating func next() throws(CaptureError) -> CaptureRecord? {
        guard !finished else { return nil }
        do {
            let record = try readRecord()
            if record == nil { finished = true }
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

    /// The next record; nil at the end of the file.
    private mutating func readRecord() throws(CaptureError) -> CaptureRecord? {
        let pcap: (linktype: UInt32, big: Bool, nanos: Bool)?
        let datalink: UInt32
        switch format {
        case .pcapng: return try readPcapngRecord()
        case .packetLogger(let big): return try readPacketLoggerRecord(bigEndian: big)
        case .btsnoop(let d): (pcap, datalink) = (nil, d)
        case .pcap(let l, let big, let nanos): (pcap, datalink) = ((l, big, nanos), 0)
        }
        if offset == bytes.count { return nil }
        let recordNumber = number + 1
        let headerLength = pcap == nil ? 24 : 16
        let available = bytes.count - offset
        guard available >= headerLength else {
            throw CaptureError("file truncated: record \(recordNumber) is cut in its header (\(available) of \(headerLength) octets at offset \(offset)); \(number) whole record(s) read")
        }
        let h = offset
        let time: CaptureTime
        let included: Int
        var flags: UInt32 = 0
        if let pcap {
            let rd = pcap.big ? be32 : le32
            let frac = rd(bytes, h + 4)
            included = Int(rd(bytes, h + 8))
            let ns = pcap.nanos ? Int32(frac % 1_000_000_000) : Int32(frac % 1_000_000) * 1000
            time = CaptureTime(seconds: Int64(rd(bytes, h)), nanoseconds: ns)
        } else {
            included = Int(be32(bytes, h + 4))
            flags = be32(bytes, h + 8)
            let micros = Int64(bitPattern: be64(bytes, h + 16)) &- BtsnoopWriter.epochOffsetMicroseconds
            let secs = micros.floorDiv(1_000_000)
            time = CaptureTime(seconds: secs, nanoseconds: Int32(micros - secs * 1_000_000) * 1000)
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

        let encapsulation: Encapsulation
        switch (pcap?.linktype, datalink) {
        case (let linktype?, _): encapsulation = .linktype(linktype)
        case (nil, 1001): encapsulation = .btsnoopHCI(flags: flags)
        case (nil, 2001): encapsulation = .monitor(index: UInt16(flags >> 16), opcode: UInt16(flags & 0xffff))
        case (nil, _): encapsulation = .btsnoopH4(flags: flags)
        }
        return record(recordNumber, time, encapsulation, data)
    }

    /// The next packet block of a pcapng file as a record, reading the blocks before it;
    /// nil at the end of the file.
    private mutating func readPcapngRecord() throws(CaptureError) -> CaptureRecord? {
        while offset < bytes.count {
            let start = offset, left = bytes.count - offset
            let recordNumber = number + 1
            guard left >= 12 else {
                throw CaptureError("file truncated: a pcapng block is cut in its header (\(left) of 12 octets at offset \(start)); \(number) whole record(s) read")
            }
            let type = rd32(start)  // the section's byte order; a Section Header's type reads the same in both
            if type == PcapngBlock.sectionHeader {
                switch le32(bytes, start + 8) {
                case 0x1a2b_3c4d: bigEndian = false
                case 0x4d3c_2b1a: bigEndian = true
                default: throw CaptureError("pcapng Section Header Block at offset \(start) has byte-order magic 0x\(hex8(le32(bytes, start + 8))), not 0x1a2b3c4d in either byte order: the file is corrupt; \(number) whole record(s) read")
                }
            }
            let length = Int(rd32(start + 4))
            let what = PcapngBlock.name(type) + (PcapngBlock.isPacket(type) ? " (record \(recordNumber))" : "")
            guard length >= 12, length % 4 == 0 else {
                throw CaptureError("pcapng \(what) at offset \(start) has length \(length) (at least 12, a multiple of 4): the file is corrupt; \(number) whole record(s) read")
            }
            guard length <= left else {
                throw CaptureError("file truncated: pcapng \(what) is cut (\(left) of \(length) octets at offset \(start)); \(number) whole record(s) read")
            }
            guard Int(rd32(start + length - 4)) == length else {
                throw CaptureError("pcapng \(what) at offset \(start) ends with length \(rd32(start + length - 4)), not \(length): the file is corrupt; \(number) whole record(s) read")
            }
            offset = start + length
            let body = (start + 8)..<(start + length - 4)
            func corrupt(_ why: String) -> CaptureError {
                CaptureError("pcapng \(what) at offset \(start) \(why): the file is corrupt; \(number) whole record(s) read")
            }
            switch type {
            case PcapngBlock.sectionHeader:
                // magic(4) major(2) minor(2) section length(8)
                guard body.count >= 16 else { throw corrupt("is \(length) octets (at least 28)") }
                let major = rd16(body.lowerBound + 4)
                guard major == 1 else { throw corrupt("has major version \(major) (supported: 1)") }
                interfaces = []
            case PcapngBlock.interfaceDescription:
                // link type(2) reserved(2) snaplen(4) options
                guard body.count >= 8 else { throw corrupt("is \(length) octets (at least 20)") }
                var interface = PcapngInterface(linktype: UInt32(rd16(body.lowerBound)), snaplen: rd32(body.lowerBound + 4))
                var o = body.lowerBound + 8
                while body.upperBound - o >= 4 {
                    let code = rd16(o), n = Int(rd16(o + 2))
                    guard n <= body.upperBound - o - 4 else { throw corrupt("has option \(code) of \(n) octets past the block's end") }
                    switch (code, n) {
                    case (0, _): o = body.upperBound; continue  // opt_endofopt
                    case (9, 1):  // if_tsresol
                        interface.resolution = bytes[o + 4]
                        guard interface.resolution & 0x80 != 0 ? interface.resolution & 0x7f <= 63 : interface.resolution <= 19 else {
                            throw corrupt("has if_tsresol 0x\(String(bytes[o + 4], radix: 16)), finer than a 64-bit timestamp can carry")
                        }
                    case (14, 8): interface.offsetSeconds = Int64(bitPattern: UInt64(rd32(o + 4)) << 32 | UInt64(rd32(o + 8)))  // if_tsoffset
                    default: break
                    }
                    o += 4 + (n + 3) & ~3
                }
                interfaces.append(interface)
            case PcapngBlock.enhancedPacket, PcapngBlock.obsoletePacket:
                // EPB: interface(4) timestamp high(4) low(4) captured(4) original(4) data;
                // obsolete Packet Block: interface(2) drops(2), then the same.
                guard body.count >= 20 else { throw corrupt("is \(length) octets (at least 32)") }
                let id = Int(type == PcapngBlock.enhancedPacket ? rd32(body.lowerBound) : UInt32(rd16(body.lowerBound)))
                let captured = Int(rd32(body.lowerBound + 12))
                guard captured <= body.count - 20 else { throw corrupt("claims \(captured) captured octets, more than its \(body.count - 20)") }
                guard id < interfaces.count else { throw corrupt("names interface \(id), but the section describes \(interfaces.count)") }
                let ts = UInt64(rd32(body.lowerBound + 4)) << 32 | UInt64(rd32(body.lowerBound + 8))
                let data = body.lowerBound + 20
                return packetRecord(recordNumber, interfaces[id], ts, Array(bytes[data..<(data + captured)]))
            case PcapngBlock.simplePacket:
                // original length(4) data, on interface 0, cut to its snaplen; no timestamp.
                guard body.count >= 4 else { throw corrupt("is \(length) octets (at least 16)") }
                guard let interface = interfaces.first else { throw corrupt("comes before any Interface Description Block") }
                var captured = min(Int(rd32(body.lowerBound)), body.count - 4)
                if interface.snaplen != 0 { captured = min(captured, Int(interface.snaplen)) }
                let data = body.lowerBound + 4
                return packetRecord(recordNumber, interface, nil, Array(bytes[data..<(data + captured)]))
            default:
                continue  // Name Resolution, Interface Statistics, Decryption Secrets, custom...: nothing for us
            }
        }
        return nil
    }

    /// The next PacketLogger record: length(4, counting what follows it), seconds(4),
    /// microseconds(4), type(1), payload, in the file's byte order (as Wireshark's
    /// wiretap/packetlogger.c reads it: the length is at least 8; its packet, at most
    /// `maxRecordLength`).
    private mutating func readPacketLoggerRecord(bigEndian big: Bool) throws(CaptureError) -> CaptureRecord? {
        if offset == bytes.count { return nil }
        let recordNumber = number + 1, left = bytes.count - offset
        guard left >= 12 else {
            throw CaptureError("file truncated: record \(recordNumber) is cut in its header (\(left) of 12 octets at offset \(offset)); \(number) whole record(s) read")
        }
        let rd = big ? be32 : le32
        let length = Int(rd(bytes, offset))
        guard length >= 8 else {
            throw CaptureError("PacketLogger record \(recordNumber) at offset \(offset) has length \(length) (at least 8): the file is corrupt; \(number) whole record(s) read")
        }
        guard length - 8 <= CaptureReader.maxRecordLength else {
            throw CaptureError("record \(recordNumber) at offset \(offset) claims \(length - 8) octets (more than \(CaptureReader.maxRecordLength)): the file is corrupt; \(number) whole record(s) read")
        }
        guard left - 4 >= length else {
            throw CaptureError("file truncated: record \(recordNumber) is cut (\(left - 4) of \(length) octets at offset \(offset)); \(number) whole record(s) read")
        }
        let seconds = rd(bytes, offset + 4), micros = rd(bytes, offset + 8)
        // tshark takes the microseconds as they are (× 1000 ns), even past a second.
        let time = CaptureTime(seconds: Int64(seconds) + Int64(micros / 1_000_000), nanoseconds: Int32(micros % 1_000_000) * 1000)
        let data = Array(bytes[(offset + 12)..<(offset + 4 + length)])
        offset += 4 + length
        number = recordNumber
        return packetLoggerRecord(recordNumber, time, data)
    }

    private mutating func packetRecord(_ n: Int, _ interface: PcapngInterface, _ ts: UInt64?, _ data: [UInt8]) -> CaptureRecord {
        number = n
        let time = ts.map { interface.time($0) } ?? CaptureTime(seconds: 0, nanoseconds: 0)
        guard CaptureReader.linktypes.contains(interface.linktype) else {
            return CaptureRecord(number: n, controllerIndex: nil, time: time, direction: nil,
                                 content: .note("packet on an interface of link type \(interface.linktype), not Bluetooth HCI (\(linktypeNames)): skipped"), raw: data)
        }
        return record(n, time, .linktype(interface.linktype), data)
    }

    private func rd16(_ i: Int) -> UInt16 {
        bigEndian ? UInt16(bytes[i]) << 8 | UInt16(bytes[i + 1]) : UInt16(bytes[i]) | UInt16(bytes[i + 1]) << 8
    }

    private func rd32(_ i: Int) -> UInt32 { bigEndian ? be32(bytes, i) : le32(bytes, i) }
}

/// How a record's bytes hold its packet: one decoder per encapsulation, whatever the file format.
private enum Encapsulation {
    /// btsnoop 1001: no packet indicator; flags bit 0 received, bit 1 command/event.
    case btsnoopHCI(flags: UInt32)
    /// btsnoop 1002: H4; flags bit 0 received.
    case btsnoopH4(flags: UInt32)
    /// btsnoop 2001 (the index and opcode are in the record's flags).
    case monitor(index: UInt16, opcode: UInt16)
    /// pcap and pcapng: 187 H4, 201 H4 after a 4-octet direction, 254 Linux monitor.
    case linktype(UInt32)
}

private func record(_ number: Int, _ time: CaptureTime, _ encapsulation: Encapsulation, _ data: [UInt8]) -> CaptureRecord {
    var r = CaptureRecord(number: number, controllerIndex: nil, time: time, direction: nil,
                          content: .packet(.failure(.invalid("no packet"))), raw: data)
    switch encapsulation {
    case .btsnoopHCI(let flags):
        let direction: Direction = flags & 1 != 0 ? .received : .sent
        let type: HCIPacketType = flags & 2 != 0 ? (direction == .received ? .event : .command) : .acl
        r.direction = direction
        r.raw = h4Bytes(type, data)
        r.content = .packet(Result { () throws(DecodeError) in try HCIPacket(type: type, body: data) })
    case .btsnoopH4(let flags):
        r.direction = flags & 1 != 0 ? .received : .sent
        r.content = .packet(Result { () throws(DecodeError) in try HCIPacket(h4: data) })
    case .monitor(let index, let opcode):
        r.controllerIndex = index
        if let (type, dir) = monitorPacketType(opcode) {
            r.direction = dir
            r.raw = h4Bytes(type, data)
            r.content = .packet(Result { () throws(DecodeError) in try HCIPacket(type: type, body: data) })
        } else {
            r.content = .monitor(opcode: opcode, name: monitorOpcodeName(opcode), text: monitorText(opcode, data))
        }
    case .linktype(254):
        // LINKTYPE_BLUETOOTH_LINUX_MONITOR: adapter index(2) and opcode(2), big-endian, then
        // what btsnoop 2001 stores.
        guard data.count >= 4 else {
            r.content = .packet(.failure(.truncated(field: "monitor header", needed: 4, available: data.count)))
            break
        }
        r = record(number, time, .monitor(index: UInt16(data[0]) << 8 | UInt16(data[1]), opcode: UInt16(data[2]) << 8 | UInt16(data[3])), Array(data[4...]))
    case .linktype(201):
        guard data.count >= 4 else {
            r.content = .packet(.failure(.truncated(field: "direction", needed: 4, available: data.count)))
            break
        }
        // The direction field is in network order per the linktype spec; some writers
        // used host order: accept 1 either way.
        let d = be32(data, 0)
        r.direction = (d == 1 || d == 0x0100_0000) ? .received : .sent
        r.raw = Array(data[4...])
        let raw = r.raw
        r.content = .packet(Result { () throws(DecodeError) in try HCIPacket(h4: raw) })
    case .linktype:  // 187: plain H4
        r.content = .packet(Result { () throws(DecodeError) in try HCIPacket(h4: data) })
        // No direction: commands go to and events come from the controller; ACL/SCO/ISO
        // could be either, so they stay unknown.
        switch data.first {
        case HCIPacketType.command.rawValue: r.direction = .sent
        case HCIPacketType.event.rawValue: r.direction = .received
        default: r.direction = nil
        }
    }
    return r
}

/// A PacketLogger record's type and payload (Wireshark's epan/dissectors/packet-packetlogger.c):
/// HCI packets with their direction, and the text records as notes.
private func packetLoggerRecord(_ number: Int, _ time: CaptureTime, _ data: [UInt8]) -> CaptureRecord {
    var r = CaptureRecord(number: number, controllerIndex: nil, time: time, direction: nil, content: .note("empty PacketLogger record"), raw: data)
    guard let kind = data.first else { return r }
    let payload = Array(data.dropFirst())
    func text(_ s: ArraySlice<UInt8>) -> String {
        String(decoding: s.prefix { $0 != 0 }, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
    let packet: (HCIPacketType, Direction)?
    switch kind {
    case 0x00: packet = (.command, .sent)
    case 0x01: packet = (.event, .received)
    case 0x02: packet = (.acl, .sent)
    case 0x03: packet = (.acl, .received)
    case 0x08: packet = (.sco, .sent)
    case 0x09: packet = (.sco, .received)
    default: packet = nil
    }
    if let (type, direction) = packet {
        r.direction = direction
        r.raw = h4Bytes(type, payload)
        r.content = .packet(Result { () throws(DecodeError) in try HCIPacket(type: type, body: payload) })
        return r
    }
    switch kind {
    case 0x0A, 0x0B:
        r.direction = kind == 0x0A ? .sent : .received
        r.content = .note("PacketLogger \(kind == 0x0A ? "Sent" : "Received") LMP data: \(payload.hex)")
    case 0xF7:
        // Process ID(4, little-endian), message type(1), then process, sender, subsystem,
        // category and message, each NUL-terminated.
        var fields: [String] = []
        var rest = payload.count >= 5 ? payload[5...] : []
        while fields.count < 5, !rest.isEmpty {
            let s = rest.prefix { $0 != 0 }
            fields.append(text(s))
            rest = rest.dropFirst(s.count + 1)
        }
        let pid = payload.count >= 4 ? Int(le32(payload, 0)) : 0
        let message = fields.count == 5 ? fields[4] : fields.last ?? ""
        let source = [fields.first.map { "\($0)[\(pid)]" }, fields.count > 2 ? fields[2] : nil, fields.count > 3 ? fields[3] : nil]
            .compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: " ")
        r.content = .note("PacketLogger Syslog \(source): \(message)")
    case 0xF8...0xFE:
        let names: [UInt8: String] = [0xF8: "Kernel", 0xF9: "Kernel Debug", 0xFA: "Error", 0xFB: "Power", 0xFC: "Note",
                                      0xFD: "Config", 0xFE: "New Controller"]
        r.content = .note("PacketLogger \(names[kind] ?? "record"): \(text(payload[...]))")
    default:
        r.content = .note("PacketLogger record of type 0x\(String(kind, radix: 16)) (\(payload.count) octets): not read")
    }
    return r
}

private let linktypeNames = "187 Bluetooth H4, 201 Bluetooth H4 with direction, 254 Bluetooth Linux monitor"

/// pcapng block types (draft-ietf-opsawg-pcapng, section 11.1).
private enum PcapngBlock {
    static let sectionHeader: UInt32 = 0x0a0d_0d0a
    static let interfaceDescription: UInt32 = 1
    static let obsoletePacket: UInt32 = 2
    static let simplePacket: UInt32 = 3
    static let enhancedPacket: UInt32 = 6

    static func isPacket(_ type: UInt32) -> Bool { [obsoletePacket, simplePacket, enhancedPacket].contains(type) }

    static func name(_ type: UInt32) -> String {
        switch type {
        case sectionHeader: "Section Header Block"
        case interfaceDescription: "Interface Description Block"
        case obsoletePacket: "Packet Block"
        case simplePacket: "Simple Packet Block"
        case 4: "Name Resolution Block"
        case 5: "Interface Statistics Block"
        case enhancedPacket: "Enhanced Packet Block"
        default: "block of type 0x\(hex8(type))"
        }
    }
}

/// A pcapng interface: its link type, snaplen and how its timestamps count.
private struct PcapngInterface {
    var linktype: UInt32
    var snaplen: UInt32
    /// if_tsresol: bit 7 clear, 10^-n seconds; set, 2^-n. Default 10^-6.
    var resolution: UInt8 = 6
    /// if_tsoffset: seconds added to every timestamp.
    var offsetSeconds: Int64 = 0

    func time(_ ts: UInt64) -> CaptureTime {
        let n = Int(resolution & 0x7f)
        let seconds: UInt64, nanoseconds: UInt64
        if resolution & 0x80 == 0 {
            var units: UInt64 = 1
            for _ in 0..<n { units *= 10 }  // n ≤ 19: checked when the interface was read
            seconds = ts / units
            let fraction = ts % units
            nanoseconds = n <= 9 ? fraction * (units == 0 ? 0 : 1_000_000_000 / units) : fraction / (units / 1_000_000_000)
        } else if n == 0 {
            (seconds, nanoseconds) = (ts, 0)
        } else {
            seconds = ts >> n
            // fraction · 10^9 / 2^n, in 128 bits: the product overflows 64 for n > 34.
            let (high, low) = (ts & (UInt64.max >> (64 - n))).multipliedFullWidth(by: 1_000_000_000)
            nanoseconds = n == 64 ? high : high << (64 - n) | low >> n
        }
        return CaptureTime(seconds: Int64(truncatingIfNeeded: seconds) &+ offsetSeconds, nanoseconds: Int32(nanoseconds))
    }
}

/// "... is not a btsnoop, pcap, pcapng or PacketLogger file: it looks like ..." (what the first octets say).
private func notCapture(_ bytes: [UInt8], _ name: String) -> String {
    let start = Array(bytes.prefix(8)).hex
    return "\(name) is not a btsnoop, pcap, pcapng or PacketLogger file: it looks like an unknown format (\(bytes.count) octets, starts with \(start.isEmpty ? "nothing" : start))"
}

/// PacketLogger has no magic number. As Wireshark's wiretap/packetlogger.c decides: the first
/// length read little-endian with its low 16 bits zero and its high ones not means big-endian;
/// then the first records (up to 5) must have a length of 8 to 65535, microseconds below a
/// million and a type PacketLogger writes. Here also at least one whole record, and every one
/// checked whole or cut by the end of the file. The byte order, or nil for another format.
private func packetLoggerByteOrder(_ bytes: [UInt8]) -> Bool? {
    guard bytes.count >= 13 else { return nil }
    let first = le32(bytes, 0)
    let big = first & 0xFFFF == 0 && first & 0xFFFF_0000 != 0
    let read = big ? be32 : le32
    let types: Set<UInt8> = [0x00, 0x01, 0x02, 0x03, 0x08, 0x09, 0x0A, 0x0B, 0xF7, 0xF8, 0xF9, 0xFA, 0xFB, 0xFC, 0xFD, 0xFE]
    var o = 0, whole = 0
    for _ in 0..<5 {
        guard bytes.count - o >= 12 else { break }
        let length = Int(read(bytes, o))
        guard length >= 8, length < 65536, read(bytes, o + 8) < 1_000_000 else { return nil }
        if length > 8 {
            guard bytes.count - o > 12, types.contains(bytes[o + 12]) else { return nil }
        }
        guard bytes.count - o - 4 >= length else { break }  // cut: reading will say so
        o += 4 + length
        whole += 1
        if o == bytes.count { break }
    }
    return whole > 0 ? big : nil
}

private func hex8(_ v: UInt32) -> String {
    let s = String(v, radix: 16)
    return String(repeating: "0", count: 8 - s.count) + s
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
