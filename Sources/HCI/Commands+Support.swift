// Small helpers shared by the command and event codecs of this module.

extension Field {
    /// A Status or Reason code with the specification's name as note.
    static func status(_ s: HCIStatus, _ name: String = "status") -> Field {
        .code(name, s.rawValue, note: s.name)
    }
    /// A signed power or RSSI value in dBm; 127 is "not available" in every place the spec uses it.
    static func dBm(_ name: String, _ v: Int8) -> Field {
        .int(name, v, note: v == 127 ? "not available" : "\(v) dBm")
    }
    static func addressType(_ name: String, _ t: AddressType) -> Field {
        .code(name, t.rawValue, note: t.description)
    }
    static func phy(_ name: String, _ v: UInt8) -> Field { .code(name, v, note: phyName(v)) }
    static func handle(_ v: UInt16) -> Field { .int("connectionHandle", v) }
}

/// Role of a connection complete event: 0x00 central, 0x01 peripheral.
func roleNote(_ role: UInt8) -> String { role == 0 ? "central" : role == 1 ? "peripheral" : "reserved" }

/// Names the bits of a PHY bitmask (All_PHYs/TX_PHYs/Scanning_PHYs: bit 0 1M, bit 1 2M, bit 2 Coded).
func phyMaskNote(_ mask: UInt8) -> String {
    var names: [String] = []
    if mask & 0x01 != 0 { names.append("LE 1M") }
    if mask & 0x02 != 0 { names.append("LE 2M") }
    if mask & 0x04 != 0 { names.append("LE Coded") }
    return names.isEmpty ? "none" : names.joined(separator: ", ")
}

/// The PHY of the `index`th per-PHY block after `mask` (see `decodePHYBlocks`); "?" past the bits set.
func phyBlockNote(_ mask: UInt8, _ index: Int) -> String {
    let bits = (0..<8).map { UInt8(1) << $0 }.filter { mask & $0 != 0 }
    return index < bits.count ? phyMaskNote(bits[index]) : "?"
}

extension ByteReader {
    /// A length octet, then always `count` octets of which the first `length` are the data
    /// (legacy advertising and scan response data, Core Vol 4 Part E 7.8.7, 7.8.8).
    mutating func paddedData(_ count: Int, _ lengthField: StaticString, _ dataField: StaticString) throws(DecodeError) -> [UInt8] {
        let n = Int(try u8(lengthField))
        let all = try bytes(count, dataField)
        guard n <= count else { throw .invalid("\(lengthField) \(n) exceeds \(count)") }
        return Array(all.prefix(n))
    }
    /// A length octet, then that many octets: at most `max`, or the length is invalid.
    mutating func lengthPrefixed(max: Int, _ lengthField: StaticString, _ dataField: StaticString) throws(DecodeError) -> [UInt8] {
        let n = Int(try u8(lengthField))
        guard n <= max else { throw .invalid("\(lengthField) \(n) exceeds \(max)") }
        return try bytes(n, dataField)
    }
    mutating func addressType(_ field: StaticString) throws(DecodeError) -> AddressType {
        try AddressType.decode(try u8(field))
    }
    /// `value` when it is in `range`, the values a description's `valid` allows (Tools/pdl):
    /// another is reserved or out of range (a controller answers Invalid HCI Command Parameters).
    func valid<T: FixedWidthInteger>(_ value: T, _ range: ClosedRange<T>, _ field: StaticString) throws(DecodeError) -> T {
        guard range.contains(value) else {
            throw .invalid("\(field) 0x\(String(value, radix: 16)) outside 0x\(String(range.lowerBound, radix: 16))...0x\(String(range.upperBound, radix: 16))")
        }
        return value
    }
    /// A 16-octet key or block, as the HCI carries it (little-endian, not reversed here).
    mutating func block16(_ field: StaticString) throws(DecodeError) -> [UInt8] { try bytes(16, field) }
    /// A connection handle: only the 12 low bits carry the handle.
    mutating func handle(_ field: StaticString = "connectionHandle") throws(DecodeError) -> UInt16 {
        try u16(field) & 0x0fff
    }
}

extension ByteWriter {
    /// Writes exactly `count` octets: `data` then zero padding (legacy advertising data is always 31 octets).
    package mutating func padded(_ data: [UInt8], to count: Int) {
        append(data.prefix(count))
        if data.count < count { append(repeatElement(0, count: count - data.count)) }
    }
    /// The length octet (at most `count`), then `data` zero-padded to `count` octets (`ByteReader.paddedData`).
    mutating func paddedData(_ data: [UInt8], to count: Int) {
        u8(UInt8(Swift.min(data.count, count))); padded(data, to: count)
    }
    /// A length-prefixed block; longer data is cut at `max` (at most 255) octets rather than
    /// writing a lying length.
    mutating func lengthPrefixed(_ data: [UInt8], max: Int = 255) {
        let d = data.prefix(Swift.min(max, 255))
        u8(UInt8(d.count)); append(d)
    }
    /// An item count octet (lists longer than 255 are cut by the caller's encode loop).
    mutating func count(_ n: Int) { u8(UInt8(clamping: n)) }
}

/// Reads a count octet (`countField`) and that many items, each at least `minimumSize` octets:
/// a lying count is rejected (naming `itemsField`) before anything is allocated.
func decodeList<T>(_ r: inout ByteReader, count countField: StaticString, minimumSize: Int, _ itemsField: StaticString,
                   _ item: (inout ByteReader) throws(DecodeError) -> T) throws(DecodeError) -> [T] {
    let n = Int(try r.u8(countField))
    try r.need(n * minimumSize, itemsField)
    var items: [T] = []
    items.reserveCapacity(n)
    for _ in 0..<n { items.append(try item(&r)) }
    return items
}

/// Writes at most 255 items after a count octet, so the count never lies.
func encodeList<T>(_ items: [T], into w: inout ByteWriter, _ body: (T, inout ByteWriter) -> Void) {
    let list = items.prefix(255)
    w.count(list.count)
    for item in list { body(item, &w) }
}

/// One block per bit set in a PHY bitmask, lowest bit first (Scanning_PHYs, Initiating_PHYs:
/// Core Vol 4 Part E 7.8.64, 7.8.66); at most eight, so a hostile mask cannot grow it further.
func decodePHYBlocks<T>(_ r: inout ByteReader, phys mask: UInt8,
                        _ block: (inout ByteReader) throws(DecodeError) -> T) throws(DecodeError) -> [T] {
    var blocks: [T] = []
    blocks.reserveCapacity(mask.nonzeroBitCount)
    for _ in 0..<mask.nonzeroBitCount { blocks.append(try block(&r)) }
    return blocks
}
