import HCI

/// The framed protocol of the `band` profile (a fitness band): documented in docs/band.md.
///
/// Central → band (write to the command characteristic) and band → central (notifications on
/// the response characteristic) use the same frame:
///
///     0xBA | command (1) | payload length (2, LE) | payload | CRC16-CCITT (2, LE)
///
/// The CRC (CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF) covers everything before it. Responses
/// go out as consecutive notifications of at most 20 octets; the central reassembles them from
/// the length in the header.
public enum BandProtocol {
    public static let magic: UInt8 = 0xBA
    public static let headerLength = 4
    public static let crcLength = 2
    /// The seeds' band sends responses in notifications of at most this many octets.
    public static let chunkLength = 20
    /// Largest payload a frame may carry (bounds reassembly).
    public static let maxPayload = 4096

    public enum Command: UInt8, Sendable {
        /// Payload: date (year LE 2, month, day). Response: date + total steps (UInt32 LE).
        case totalSteps = 0x01
        /// Payload: date + number of days (1...7). Response: date + 6-octet records, day by day.
        case history = 0x02
        /// Response to a bad request. Payload: the command refused + reason (1 octet).
        case error = 0x7F
    }

    public struct Frame: Sendable, Equatable {
        public var command: UInt8
        public var payload: [UInt8]
        public init(command: UInt8, payload: [UInt8]) { self.command = command; self.payload = payload }

        public var bytes: [UInt8] {
            var w = ByteWriter(capacity: payload.count + 6)
            w.u8(BandProtocol.magic)
            w.u8(command)
            w.u16(UInt16(payload.count))
            w.append(payload)
            w.u16(crc16CCITT(w.bytes))
            return w.bytes
        }

        /// Decodes one whole frame, checking magic, length and CRC.
        public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> Frame {
            var r = ByteReader(bytes)
            guard try r.u8("magic") == BandProtocol.magic else { throw .invalid("band frame: bad magic octet") }
            let command = try r.u8("command")
            let length = Int(try r.u16("length"))
            guard length <= BandProtocol.maxPayload else { throw .invalid("band frame: payload length \(length) over \(BandProtocol.maxPayload)") }
            let payload = try r.bytes(length, "payload")
            let crc = try r.u16("crc")
            try r.expectEnd("band frame")
            let expected = crc16CCITT(Array(bytes[0..<(BandProtocol.headerLength + length)]))
            guard crc == expected else {
                throw .invalid("band frame: CRC \(hexCode(crc)) does not match \(hexCode(expected))")
            }
            return Frame(command: command, payload: payload)
        }

        /// The frame cut into notification-sized chunks.
        public var chunks: [[UInt8]] {
            let b = bytes
            return stride(from: 0, to: b.count, by: BandProtocol.chunkLength).map {
                Array(b[$0..<min($0 + BandProtocol.chunkLength, b.count)])
            }
        }
    }

    /// Rebuilds frames from notification chunks using the header's length.
    public struct Reassembler: Sendable {
        private var buffer: [UInt8] = []
        public init() {}

        /// Feeds one notification; returns a frame when one is complete. A chunk that doesn't
        /// start with the magic when no frame is pending, or an oversize length, throws and resets.
        public mutating func push(_ chunk: [UInt8]) throws(DecodeError) -> Frame? {
            if buffer.isEmpty, chunk.first != BandProtocol.magic {
                throw .invalid("band frame: notification does not start a frame (no 0xBA)")
            }
            buffer += chunk
            guard buffer.count >= BandProtocol.headerLength else { return nil }
            let length = Int(buffer[2]) | Int(buffer[3]) << 8
            guard length <= BandProtocol.maxPayload else {
                buffer = []
                throw .invalid("band frame: payload length \(length) over \(BandProtocol.maxPayload)")
            }
            let total = BandProtocol.headerLength + length + BandProtocol.crcLength
            guard buffer.count >= total else { return nil }
            defer { buffer = [] }
            guard buffer.count == total else {
                throw .invalid("band frame: \(buffer.count - total) octet(s) after the frame's end")
            }
            return try Frame.decode(buffer)
        }

        public var isPending: Bool { !buffer.isEmpty }
    }

    // MARK: - Records

    public enum RecordKind: UInt8, Sendable, CustomStringConvertible {
        case steps = 0b00
        case sleep = 0b01
        public var description: String { self == .steps ? "steps" : "sleep" }
    }

    /// A 6-octet history record: kind (2 bits) and count (14 bits) in the first two octets
    /// (big-endian: kind in the top bits), then hour of day, minutes, average heart rate (bpm)
    /// and intensity (0-3). For steps the count is steps; for sleep it is minutes asleep.
    public struct Record: Sendable, Equatable {
        public var kind: RecordKind
        public var count: UInt16
        public var hour: UInt8
        public var minutes: UInt8
        public var heartRate: UInt8
        public var intensity: UInt8

        public init(kind: RecordKind, count: UInt16, hour: UInt8, minutes: UInt8, heartRate: UInt8, intensity: UInt8) {
            self.kind = kind
            self.count = count & 0x3FFF
            self.hour = hour
            self.minutes = minutes
            self.heartRate = heartRate
            self.intensity = intensity
        }

        public static let length = 6

        public var bytes: [UInt8] {
            let head = UInt16(kind.rawValue) << 14 | (count & 0x3FFF)
            return [UInt8(head >> 8), UInt8(head & 0xFF), hour, minutes, heartRate, intensity]
        }

        public init(_ b: ArraySlice<UInt8>) throws(DecodeError) {
            guard b.count == Record.length else { throw .invalid("band record: \(b.count) octets, want 6") }
            let i = b.startIndex
            let head = UInt16(b[i]) << 8 | UInt16(b[i + 1])
            guard let kind = RecordKind(rawValue: UInt8(head >> 14)) else {
                throw .invalid("band record: reserved kind \(head >> 14)")
            }
            self.init(kind: kind, count: head & 0x3FFF, hour: b[i + 2], minutes: b[i + 3], heartRate: b[i + 4], intensity: b[i + 5])
        }
    }

    public struct Day: Sendable, Hashable, CustomStringConvertible {
        public var year: UInt16
        public var month: UInt8
        public var day: UInt8
        public init(year: UInt16, month: UInt8, day: UInt8) { self.year = year; self.month = month; self.day = day }

        /// Parses YYYY-MM-DD (a real calendar date).
        public init?(_ text: String) {
            let p = text.split(separator: "-")
            guard p.count == 3, p[0].count == 4, p[1].count == 2, p[2].count == 2,
                  let y = UInt16(p[0]), let m = UInt8(p[1]), let d = UInt8(p[2]),
                  (1...12).contains(m), d >= 1, d <= Day.daysIn(month: m, year: y) else { return nil }
            self.init(year: y, month: m, day: d)
        }

        public var description: String {
            func two(_ v: UInt8) -> String { v < 10 ? "0\(v)" : "\(v)" }
            return "\(year)-\(two(month))-\(two(day))"
        }

        var bytes: [UInt8] { [UInt8(year & 0xFF), UInt8(year >> 8), month, day] }

        static func decode(_ r: inout ByteReader) throws(DecodeError) -> Day {
            let y = try r.u16("year"), m = try r.u8("month"), d = try r.u8("day")
            guard (1...12).contains(m), d >= 1, d <= daysIn(month: m, year: y) else {
                throw .invalid("band: invalid date \(y)-\(m)-\(d)")
            }
            return Day(year: y, month: m, day: d)
        }

        static func daysIn(month: UInt8, year: UInt16) -> UInt8 {
            switch month {
            case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
            case 4, 6, 9, 11: return 30
            default: return 31
            }
        }

        public var next: Day {
            if day < Day.daysIn(month: month, year: year) { return Day(year: year, month: month, day: day + 1) }
            if month < 12 { return Day(year: year, month: month + 1, day: 1) }
            return Day(year: year + 1, month: 1, day: 1)
        }
    }

    /// The band's data for one day, derived only from the date so tests can check it:
    /// 24 hourly step records, then sleep records for the night hours 0-6 and 23.
    public static func records(for day: Day) -> [Record] {
        var rng = SplitMix64(seed: UInt64(day.year) << 16 | UInt64(day.month) << 8 | UInt64(day.day))
        var out: [Record] = []
        for hour in 0..<24 {
            let awake = (7...22).contains(hour)
            let steps = awake ? UInt16(rng.next() % 2_000) + (hour == 8 || hour == 18 ? 3_000 : 0) : UInt16(rng.next() % 40)
            out.append(Record(kind: .steps, count: steps, hour: UInt8(hour), minutes: 60,
                              heartRate: UInt8(awake ? 70 + rng.next() % 50 : 50 + rng.next() % 10),
                              intensity: UInt8(awake ? rng.next() % 4 : 0)))
        }
        for hour in [23, 0, 1, 2, 3, 4, 5, 6] {
            let asleep = UInt16(40 + rng.next() % 21)
            out.append(Record(kind: .sleep, count: asleep, hour: UInt8(hour), minutes: UInt8(asleep),
                              heartRate: UInt8(48 + rng.next() % 8), intensity: UInt8(rng.next() % 3)))
        }
        return out
    }

    public static func totalSteps(for day: Day) -> UInt32 {
        records(for: day).filter { $0.kind == .steps }.reduce(0) { $0 + UInt32($1.count) }
    }

    // MARK: - Requests and responses

    public static func totalStepsRequest(_ day: Day) -> Frame { Frame(command: Command.totalSteps.rawValue, payload: day.bytes) }
    public static func historyRequest(_ day: Day, days: UInt8 = 1) -> Frame { Frame(command: Command.history.rawValue, payload: day.bytes + [days]) }

    /// The band's answer to one request frame (what the peripheral sends back).
    public static func respond(to request: Frame) -> Frame {
        func refuse(_ reason: UInt8) -> Frame { Frame(command: Command.error.rawValue, payload: [request.command, reason]) }
        var r = ByteReader(request.payload)
        switch Command(rawValue: request.command) {
        case .totalSteps:
            guard let day = try? Day.decode(&r), r.isAtEnd else { return refuse(0x01) }
            var w = ByteWriter()
            w.append(day.bytes)
            w.u32(totalSteps(for: day))
            return Frame(command: request.command, payload: w.bytes)
        case .history:
            guard let day = try? Day.decode(&r), let days = try? r.u8("days"), r.isAtEnd, (1...7).contains(days) else {
                return refuse(0x01)
            }
            var payload = day.bytes
            var d = day
            for _ in 0..<days {
                for rec in records(for: d) { payload += rec.bytes }
                d = d.next
            }
            return Frame(command: request.command, payload: payload)
        default:
            return refuse(0x02)
        }
    }

    /// What the central makes of a response.
    public enum Response: Sendable, Equatable {
        case totalSteps(Day, UInt32)
        /// Records of consecutive days starting at the date.
        case history(Day, [Record])
        case refused(command: UInt8, reason: UInt8)
    }

    public static func parseResponse(_ frame: Frame) throws(DecodeError) -> Response {
        var r = ByteReader(frame.payload)
        switch Command(rawValue: frame.command) {
        case .totalSteps:
            let day = try Day.decode(&r)
            let steps = try r.u32("totalSteps")
            try r.expectEnd("total steps response")
            return .totalSteps(day, steps)
        case .history:
            let day = try Day.decode(&r)
            let rest = r.rest()
            guard rest.count % Record.length == 0 else { throw .invalid("band history: \(rest.count) octets is not whole records") }
            var records: [Record] = []
            for i in stride(from: 0, to: rest.count, by: Record.length) {
                records.append(try Record(rest[i..<i + Record.length]))
            }
            return .history(day, records)
        case .error:
            let c = try r.u8("command"), reason = try r.u8("reason")
            return .refused(command: c, reason: reason)
        case nil:
            throw .invalid("band: unknown response command \(hexCode(frame.command))")
        }
    }
}

/// CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, no final XOR).
public func crc16CCITT(_ bytes: [UInt8]) -> UInt16 {
    var crc: UInt16 = 0xFFFF
    for b in bytes {
        crc ^= UInt16(b) << 8
        for _ in 0..<8 { crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1 }
    }
    return crc
}

/// A small deterministic generator for the band's synthetic data (and the bench's varied capture).
package struct SplitMix64 {
    var state: UInt64
    package init(seed: UInt64) { state = seed }
    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
