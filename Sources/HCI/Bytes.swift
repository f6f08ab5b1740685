import Synchronization

/// Little-endian byte cursor used by every PDU parser in the stack and the decoder.
///
/// Input is hostile: every read checks bounds and throws `DecodeError` instead of trapping.
public struct ByteReader: Sendable {
    public let bytes: [UInt8]
    public private(set) var offset: Int
    public let end: Int

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
        self.offset = 0
        self.end = bytes.count
    }

    public init(_ slice: ArraySlice<UInt8>) {
        self.init(Array(slice))
    }

    /// Reads `bytes[range]` in place (the range clamped to the array): a payload inside a
    /// larger frame, read without copying it out.
    public init(_ bytes: [UInt8], in range: Range<Int>) {
        self.bytes = bytes
        self.offset = Swift.min(Swift.max(0, range.lowerBound), bytes.count)
        self.end = Swift.max(offset, Swift.min(range.upperBound, bytes.count))
    }

    public var remaining: Int { end - offset }
    public var isAtEnd: Bool { offset >= end }

    @inline(__always)
    mutating func need(_ n: Int, _ field: StaticString) throws(DecodeError) {
        guard n >= 0, remaining >= n else {
            throw DecodeError.truncated(field: "\(field)", needed: n, available: remaining)
        }
        if FieldReads.recording.load(ordering: .relaxed) != 0 { FieldReads.note(field, bytes, offset, n) }
    }

    public mutating func u8(_ field: StaticString = "octet") throws(DecodeError) -> UInt8 {
        try need(1, field)
        defer { offset += 1 }
        return bytes[offset]
    }

    public mutating func i8(_ field: StaticString = "octet") throws(DecodeError) -> Int8 {
        Int8(bitPattern: try u8(field))
    }

    public mutating func u16(_ field: StaticString = "uint16") throws(DecodeError) -> UInt16 {
        try need(2, field)
        defer { offset += 2 }
        return UInt16(bytes[offset]) | UInt16(bytes[offset + 1]) << 8
    }

    public mutating func u16be(_ field: StaticString = "uint16") throws(DecodeError) -> UInt16 {
        try need(2, field)
        defer { offset += 2 }
        return UInt16(bytes[offset]) << 8 | UInt16(bytes[offset + 1])
    }

    public mutating func u24(_ field: StaticString = "uint24") throws(DecodeError) -> UInt32 {
        try need(3, field)
        defer { offset += 3 }
        return UInt32(bytes[offset]) | UInt32(bytes[offset + 1]) << 8 | UInt32(bytes[offset + 2]) << 16
    }

    public mutating func u32(_ field: StaticString = "uint32") throws(DecodeError) -> UInt32 {
        try integer(field, bigEndian: false)
    }

    public mutating func u32be(_ field: StaticString = "uint32") throws(DecodeError) -> UInt32 {
        try integer(field, bigEndian: true)
    }

    public mutating func u64(_ field: StaticString = "uint64") throws(DecodeError) -> UInt64 {
        try integer(field, bigEndian: false)
    }

    public mutating func u64be(_ field: StaticString = "uint64") throws(DecodeError) -> UInt64 {
        try integer(field, bigEndian: true)
    }

    /// The next `T`-sized integer, least (or most) significant octet first.
    @inline(__always)
    private mutating func integer<T: FixedWidthInteger & UnsignedInteger>(_ field: StaticString, bigEndian: Bool) throws(DecodeError) -> T {
        let n = MemoryLayout<T>.size
        try need(n, field)
        defer { offset += n }
        var v: T = 0
        for i in 0..<n { v |= T(bytes[offset + i]) << (8 * (bigEndian ? n - 1 - i : i)) }
        return v
    }

    public mutating func bytes(_ n: Int, _ field: StaticString = "bytes") throws(DecodeError) -> [UInt8] {
        try need(n, field)
        defer { offset += n }
        return Array(bytes[offset..<offset + n])
    }

    /// A reader of the next `n` octets, in place (no copy); this reader moves past them.
    public mutating func window(_ n: Int, _ field: StaticString = "bytes") throws(DecodeError) -> ByteReader {
        try need(n, field)
        defer { offset += n }
        return ByteReader(bytes, in: offset..<offset + n)
    }

    /// Everything not read yet.
    public mutating func rest(_ field: StaticString = FieldReads.rest) -> [UInt8] {
        if FieldReads.recording.load(ordering: .relaxed) != 0 { FieldReads.note(field, bytes, offset, remaining) }
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    public mutating func skip(_ n: Int, _ field: StaticString = "reserved") throws(DecodeError) {
        try need(n, field)
        offset += n
    }

    public mutating func address(_ field: StaticString = "address") throws(DecodeError) -> BDAddress {
        BDAddress(littleEndian: try bytes(6, field))
    }

    /// Throws when bytes are left over: a PDU of fixed length must not be longer than the spec says.
    public func expectEnd(_ pdu: String) throws(DecodeError) {
        if remaining != 0 { throw DecodeError.trailingBytes(pdu: pdu, count: remaining) }
    }
}

/// The octets each named read of a parser covered (`dump --html` highlights a field's bytes):
/// the parser of a PDU is the only one that knows where its fields sit, so `ByteReader` notes
/// every bounds-checked read while a `record` is under way. Only reads of a reader over the
/// recorded array itself (or a window of it) count: a parser that copies bytes out and reads
/// the copy has no place in the packet for them. Off (one relaxed load per read) otherwise.
public final class FieldReads: Sendable {
    public struct Read: Sendable, Equatable {
        /// The name the parser gave the read (`r.u16("handle")`), `FieldReads.rest` for `rest()`.
        public let name: String
        /// Octets within the packet: offsets in the recorded array plus the `base` given.
        public let range: Range<Int>
    }

    /// The name of a `rest()` that was not given one.
    public static let rest: StaticString = "(rest)"

    /// How many `record`s are under way in the process: while 0, reads note nothing.
    static let recording = Atomic<Int>(0)
    @TaskLocal static var current: FieldReads?

    private let root: [UInt8]
    private let base: Int
    private let reads = Mutex<[Read]>([])

    private init(root: [UInt8], base: Int) {
        self.root = root
        self.base = base
    }

    /// Runs `body` (which parses `root`) and returns what it returned and the reads it made of
    /// `root`, each placed at `base` + its offset in `root`.
    public static func record<T>(_ root: [UInt8], base: Int, _ body: () -> T) -> (T, [Read]) {
        let r = FieldReads(root: root, base: base)
        recording.add(1, ordering: .relaxed)
        defer { recording.subtract(1, ordering: .relaxed) }
        let value = $current.withValue(r) { body() }
        return (value, r.reads.withLock { $0 })
    }

    static func note(_ field: StaticString, _ bytes: [UInt8], _ offset: Int, _ count: Int) {
        // `==` is an identity check first: a reader over the recorded array costs no comparison.
        guard let r = current, r.root == bytes else { return }
        r.reads.withLock { $0.append(Read(name: "\(field)", range: r.base + offset ..< r.base + offset + count)) }
    }
}

/// Little-endian byte builder.
public struct ByteWriter: Sendable {
    public var bytes: [UInt8]

    public init(capacity: Int = 32) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func i8(_ v: Int8) { bytes.append(UInt8(bitPattern: v)) }
    public mutating func u16(_ v: UInt16) { bytes.append(UInt8(v & 0xff)); bytes.append(UInt8(v >> 8)) }
    public mutating func u16be(_ v: UInt16) { bytes.append(UInt8(v >> 8)); bytes.append(UInt8(v & 0xff)) }
    public mutating func u24(_ v: UInt32) { for i in 0..<3 { bytes.append(UInt8((v >> (8 * UInt32(i))) & 0xff)) } }
    public mutating func u32(_ v: UInt32) { for i in 0..<4 { bytes.append(UInt8((v >> (8 * UInt32(i))) & 0xff)) } }
    public mutating func u32be(_ v: UInt32) { for i in (0..<4).reversed() { bytes.append(UInt8((v >> (8 * UInt32(i))) & 0xff)) } }
    public mutating func u64(_ v: UInt64) { for i in 0..<8 { bytes.append(UInt8((v >> (8 * UInt64(i))) & 0xff)) } }
    public mutating func u64be(_ v: UInt64) { for i in (0..<8).reversed() { bytes.append(UInt8((v >> (8 * UInt64(i))) & 0xff)) } }
    public mutating func append<S: Sequence>(_ s: S) where S.Element == UInt8 { bytes.append(contentsOf: s) }
    public mutating func address(_ a: BDAddress) { bytes.append(contentsOf: a.littleEndian) }
}

/// Why a PDU could not be decoded. Carries enough to print "malformed: ..." in `dump`.
public enum DecodeError: Error, Sendable, Equatable, CustomStringConvertible {
    case truncated(field: String, needed: Int, available: Int)
    case trailingBytes(pdu: String, count: Int)
    case invalid(String)

    public var description: String {
        switch self {
        case let .truncated(field, needed, available):
            return "truncated: \(field) needs \(needed) octet(s), \(available) left"
        case let .trailingBytes(pdu, count):
            return "\(pdu): \(count) unexpected trailing octet(s)"
        case let .invalid(reason):
            return reason
        }
    }
}

extension Array where Element == UInt8 {
    /// Lowercase hex without separators, as CLI.md's JSON wants binary values.
    public var hex: String {
        // Into one buffer, no Character appends: `dump` formats one for every binary value.
        String(unsafeUninitializedCapacity: count * 2) { out in
            var i = 0
            for b in self {
                out[i] = lowercaseHexDigit(b >> 4)
                out[i + 1] = lowercaseHexDigit(b & 0x0f)
                i += 2
            }
            return i
        }
    }

    /// Parses "0a1B2c", "0a:1b", "0a 1b" (separators ignored). Nil on odd length or a non-hex digit.
    public init?(hex: String) {
        var out: [UInt8] = []
        var high: UInt8? = nil
        for ch in hex.utf8 {
            if ch == UInt8(ascii: ":") || ch == UInt8(ascii: " ") || ch == UInt8(ascii: "-") { continue }
            let v: UInt8
            switch ch {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = ch - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = ch - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): v = ch - UInt8(ascii: "A") + 10
            default: return nil
            }
            if let h = high { out.append(h << 4 | v); high = nil } else { high = v }
        }
        if high != nil { return nil }
        self = out
    }
}


/// "0x0c", "0x0c03": how CLI.md writes opcodes and codes.
@inlinable
public func hexCode<T: FixedWidthInteger>(_ v: T, digits: Int = MemoryLayout<T>.size * 2) -> String {
    // Inlinable so the generic part (widening to 64 bits) is specialized in the caller: `dump`
    // formats millions of these. Two's complement within T's width for signed types, as the
    // wire carries them.
    hexCode64(UInt64(truncatingIfNeeded: v) & (T.bitWidth >= 64 ? .max : (1 << UInt64(T.bitWidth)) - 1), digits: digits)
}

/// Digit by digit into one small buffer.
@usableFromInline
func hexCode64(_ value: UInt64, digits: Int) -> String {
    var count = 1
    while count < 16, value >> (4 * UInt64(count)) != 0 { count += 1 }
    count = Swift.max(count, Swift.min(digits, 16))
    return String(unsafeUninitializedCapacity: count + 2) { buf in
        buf[0] = UInt8(ascii: "0")
        buf[1] = UInt8(ascii: "x")
        for i in 0..<count {
            buf[2 + i] = lowercaseHexDigit(UInt8(truncatingIfNeeded: (value >> (4 * UInt64(count - 1 - i))) & 0xF))
        }
        return count + 2
    }
}

/// The ASCII lowercase hex digit of a nibble (0...15).
@inline(__always)
func lowercaseHexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 48 &+ v : 87 &+ v }
