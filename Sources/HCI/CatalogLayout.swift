// The HCI catalog (Tools/pdl/hci-catalog.pdl, generated into Generated/Catalog.swift): every
// command, event and LE subevent of Core v5.4 Vol 4 Part E 7 the stack has no Swift type for,
// named and with its parameters' layout, so `dump` and `--trace` decode other stacks' captures
// (BR/EDR, LE features the stack does not use, Android's vendor commands). The stack's own PDUs
// keep their hand-written / generated types (hci.pdl); the catalog only names and shows.

/// How many elements a list parameter has.
public enum CatalogCount: Sendable, Equatable {
    /// A count octet in the list's place, under this name.
    case inline(String)
    /// The value of an earlier parameter.
    case field(String)
    /// One element per bit set in an earlier PHY bitmask parameter (Core v5.4 Vol 4 Part E 7.8.66).
    case phys(String)
    /// Elements until the parameters end.
    case remaining
}

/// A parameter's wire type.
public enum CatalogType: Sendable, Equatable {
    case u8, i8, u16, i16, u24, u32, u64, status, address, handle
    /// N octets.
    case bytes(Int)
    /// N octets of UTF-8, zero-padded.
    case text(Int)
    /// A length octet, then that many octets.
    case data
    /// The octets left.
    case rest
    /// An earlier parameter's value times `times` octets.
    case counted(String, times: Int)
    /// Elements of the same layout, laid out element by element.
    case list(CatalogCount, [CatalogParameter])
}

public struct CatalogParameter: Sendable, Equatable {
    /// The specification's parameter name in lowerCamelCase.
    public var name: String
    public var type: CatalogType
    /// An integer shown in hex (a bit mask, a LAP, a packet type), not as a number.
    public var code: Bool
    public init(_ name: String, _ type: CatalogType, code: Bool = false) {
        self.name = name
        self.type = type
        self.code = code
    }
}

/// One catalog entry: a command (opcode), event or LE subevent (code).
public struct CatalogEntry: Sendable {
    public var code: UInt16
    /// The specification's name, without "Command" / "Event".
    public var name: String
    /// Where it is specified ("Core v5.4 Vol 4 Part E 7.3.56", or a vendor's document).
    public var source: String
    public var parameters: [CatalogParameter]
    /// Return parameters after Status (commands).
    public var returnParameters: [CatalogParameter]

    init(_ code: UInt16, _ name: String, _ source: String, _ parameters: [CatalogParameter],
         returns: [CatalogParameter] = []) {
        self.code = code
        self.name = name
        self.source = source
        self.parameters = parameters
        self.returnParameters = returns
    }
}

/// The catalog's tables, by code.
public enum HCICatalog {
    public static func command(_ opcode: HCIOpcode) -> CatalogEntry? { commandsByOpcode[opcode.rawValue] }
    public static func event(_ code: UInt8) -> CatalogEntry? { eventsByCode[code] }
    public static func leSubevent(_ code: UInt8) -> CatalogEntry? { subeventsByCode[code] }

    /// Every entry (tests build one sample per entry).
    public static var allCommands: [CatalogEntry] { commands + vendorCommands }
    public static var allEvents: [CatalogEntry] { events }
    public static var allLESubevents: [CatalogEntry] { leSubevents }

    private static let commandsByOpcode: [UInt16: CatalogEntry] = {
        var d: [UInt16: CatalogEntry] = [:]
        for e in commands + vendorCommands { d[e.code] = e }
        return d
    }()
    private static let eventsByCode: [UInt8: CatalogEntry] = {
        var d: [UInt8: CatalogEntry] = [:]
        for e in events { d[UInt8(truncatingIfNeeded: e.code)] = e }
        return d
    }()
    private static let subeventsByCode: [UInt8: CatalogEntry] = {
        var d: [UInt8: CatalogEntry] = [:]
        for e in leSubevents { d[UInt8(truncatingIfNeeded: e.code)] = e }
        return d
    }()
}

/// What a catalog layout made of some octets: the fields that parsed, and why the rest did not.
public struct CatalogDecoding: Sendable, Equatable {
    public var fields: [Field]
    /// nil when the octets fit the layout exactly; else what went wrong (too short, octets left
    /// over). The octets not parsed are the last field ("unparsed").
    public var problem: String?

    public init(fields: [Field], problem: String?) {
        self.fields = fields
        self.problem = problem
    }
}

/// Decodes parameters by a catalog layout. Input is hostile: every read is bounds-checked, a
/// list holds at most as many elements as octets remain, and nothing traps. What does not fit
/// is shown as octets.
public enum CatalogLayout {
    public static func decode(_ layout: [CatalogParameter], _ bytes: [UInt8]) -> CatalogDecoding {
        var cursor = Cursor(bytes: bytes)
        var fields: [Field] = []
        var values: [String: Int] = [:]
        let ok = decode(layout, &cursor, into: &fields, values: &values)
        var problem: String? = nil
        if !ok {
            problem = "parameters end at octet \(cursor.failedAt ?? cursor.offset) of \(bytes.count): too short for \(cursor.failedField ?? "the layout")"
        } else if cursor.remaining > 0 {
            problem = "\(cursor.remaining) octet(s) after the last parameter"
        }
        if cursor.remaining > 0 { fields.append(.bytes("unparsed", Array(bytes[cursor.offset...]))) }
        return CatalogDecoding(fields: fields, problem: problem)
    }

    struct Cursor {
        let bytes: [UInt8]
        var offset = 0
        var failedAt: Int? = nil
        var failedField: String? = nil
        var remaining: Int { bytes.count - offset }

        mutating func take(_ n: Int, _ name: String) -> ArraySlice<UInt8>? {
            guard n >= 0, n <= remaining else {
                failedAt = offset
                failedField = name
                return nil
            }
            defer { offset += n }
            return bytes[offset..<offset + n]
        }

        mutating func uint(_ n: Int, _ name: String) -> UInt64? {
            guard let s = take(n, name) else { return nil }
            var v: UInt64 = 0
            for (i, b) in s.enumerated() { v |= UInt64(b) << (8 * UInt64(i)) }
            return v
        }
    }

    /// Appends the fields of `layout`; false when the octets ran out (fields so far appended).
    static func decode(_ layout: [CatalogParameter], _ c: inout Cursor, into fields: inout [Field],
                       values: inout [String: Int]) -> Bool {
        for p in layout {
            let name = p.name
            switch p.type {
            case .u8, .u16, .u24, .u32, .handle:
                let n = p.type == .u8 ? 1 : p.type == .u24 ? 3 : p.type == .u32 ? 4 : 2
                guard let v = c.uint(n, name) else { return false }
                values[name] = Int(v)
                fields.append(p.code ? Field(name, .code(hexCode(v, digits: 2 * n))) : .int(name, v))
            case .u64:
                guard let v = c.uint(8, name) else { return false }
                fields.append(.code(name, v))
            case .i8:
                guard let v = c.uint(1, name) else { return false }
                fields.append(.int(name, Int8(truncatingIfNeeded: v)))
            case .i16:
                guard let v = c.uint(2, name) else { return false }
                fields.append(.int(name, Int16(truncatingIfNeeded: v)))
            case .status:
                guard let v = c.uint(1, name) else { return false }
                let s = HCIStatus(UInt8(v))
                fields.append(.code(name, s.rawValue, note: s.name))
            case .address:
                guard let s = c.take(6, name) else { return false }
                fields.append(.address(name, BDAddress(littleEndian: Array(s))))
            case .bytes(let n):
                guard let s = c.take(n, name) else { return false }
                fields.append(.bytes(name, Array(s)))
            case .text(let n):
                guard let s = c.take(n, name) else { return false }
                fields.append(.text(name, String(decoding: s.prefix { $0 != 0 }, as: UTF8.self)))
            case .data:
                guard let n = c.uint(1, name + "Length") else { return false }
                fields.append(.int(name + "Length", n))
                guard let s = c.take(Int(n), name) else { return false }
                fields.append(.bytes(name, Array(s)))
            case .rest:
                fields.append(.bytes(name, Array(c.bytes[c.offset...])))
                c.offset = c.bytes.count
            case let .counted(field, times):
                let n = (values[field] ?? 0).multipliedReportingOverflow(by: times)
                guard !n.overflow, let s = c.take(n.partialValue, name) else { return false }
                fields.append(.bytes(name, Array(s)))
            case let .list(count, items):
                let n: Int
                switch count {
                case .inline(let countName):
                    guard let v = c.uint(1, countName) else { return false }
                    n = Int(v)
                    values[countName] = n
                    fields.append(.int(countName, n))
                case .field(let f):
                    n = values[f] ?? 0
                case .phys(let f):
                    n = (values[f] ?? 0).nonzeroBitCount
                case .remaining:
                    n = c.remaining
                }
                // At most one element per octet left: a hostile count cannot grow the list
                // beyond the input (every element has at least one octet).
                var elements: [FieldValue] = []
                elements.reserveCapacity(Swift.min(n, c.remaining))
                var complete = true
                for _ in 0..<n {
                    var inner: [Field] = []
                    var scoped = values
                    let before = c.offset
                    let fits = decode(items, &c, into: &inner, values: &scoped)
                    if !inner.isEmpty { elements.append(.object(inner)) }
                    if !fits || c.offset == before { complete = fits; break }
                    if count == .remaining, c.remaining == 0 { break }
                }
                fields.append(Field(name, .list(elements)))
                if !complete { return false }
            }
        }
        return true
    }
}

extension HCIOpcode {
    /// "Vendor Command 0x0153 (opcode 0xFD53)": a vendor command no public specification names.
    public var vendorName: String { "Vendor Command \(hexCode(ocf, digits: 4)) (opcode \(hexCode(rawValue)))" }
}
