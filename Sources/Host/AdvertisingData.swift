import HCI

// Advertising and scan response data: Core Vol 3 Part C 11 (format) and the Core
// Specification Supplement Part A (data types); AD type numbers from Assigned Numbers 2.3.

// ADType (its constants and names) and ADFlags are generated from Tools/pdl/gap-codes.pdl.

extension ADType {
    /// Width in octets of the UUIDs a service UUID list / solicitation list carries, or nil.
    var uuidListWidth: Int? {
        switch rawValue {
        case 0x02, 0x03, 0x14: return 2
        case 0x04, 0x05, 0x1F: return 4
        case 0x06, 0x07, 0x15: return 16
        default: return nil
        }
    }

    /// Width of the UUID that starts a service data structure, or nil.
    var serviceDataUUIDWidth: Int? {
        switch rawValue {
        case 0x16: return 2
        case 0x20: return 4
        case 0x21: return 16
        default: return nil
        }
    }
}

/// One AD structure: Length (not stored: `1 + data.count`), AD Type, AD Data.
public struct ADStructure: Sendable, Equatable {
    public var type: ADType
    /// At most 254 octets are encodable; `AdvertisingData.bytes` truncates longer data.
    public var data: [UInt8]

    public init(type: ADType, data: [UInt8]) {
        self.type = type
        self.data = data
    }
}

/// Peripheral Connection Interval Range (Supplement Part A 1.9), units of 1.25 ms; 0xFFFF = no specific value.
public struct ConnectionIntervalRange: Sendable, Equatable {
    public var min: UInt16
    public var max: UInt16
    public init(min: UInt16, max: UInt16) {
        self.min = min
        self.max = max
    }
}

/// Something wrong in advertising data. Parsing keeps every good structure and reports these.
public enum ADProblem: Sendable, Equatable, CustomStringConvertible {
    /// The Length octet at `offset` claims `length` octets but only `available` follow.
    case lengthOverrun(offset: Int, length: Int, available: Int)
    /// Octets after the zero-length terminator (the non-significant part) are not all zero.
    case nonZeroPadding(offset: Int)
    /// A structure of a known type whose data has a size the type doesn't allow; kept raw.
    case badDataLength(type: ADType, length: Int)

    public var description: String {
        switch self {
        case let .lengthOverrun(offset, length, available):
            return "malformed: AD structure at offset \(offset) has length \(length) but only \(available) octet(s) follow"
        case let .nonZeroPadding(offset):
            return "non-zero octets after the end of the significant part (offset \(offset))"
        case let .badDataLength(type, length):
            return "malformed: \(type) with \(length) data octet(s)"
        }
    }
}

/// Advertising data or scan response data: an ordered list of AD structures.
public struct AdvertisingData: Sendable, Equatable, FieldDescribable {
    public var structures: [ADStructure]
    /// What parsing found wrong (empty for data built in code).
    public var problems: [ADProblem]

    public init(_ structures: [ADStructure] = []) {
        self.structures = structures
        self.problems = []
    }

    /// Parses advertising data. Never throws: structures before a malformed one are kept, and
    /// what is wrong is listed in `problems`. A zero Length octet ends the significant part.
    public init(parsing bytes: [UInt8]) {
        var structures: [ADStructure] = []
        var problems: [ADProblem] = []
        var i = 0
        let n = bytes.count
        while i < n {
            let length = Int(bytes[i])
            if length == 0 {
                // End of the significant part; the rest should be zero padding.
                if let nz = bytes[(i + 1)...].firstIndex(where: { $0 != 0 }) {
                    problems.append(.nonZeroPadding(offset: nz))
                }
                break
            }
            let available = n - i - 1
            if length > available {
                problems.append(.lengthOverrun(offset: i, length: length, available: available))
                break
            }
            let type = ADType(bytes[i + 1])
            let data = Array(bytes[(i + 2)..<(i + 1 + length)])
            let s = ADStructure(type: type, data: data)
            if !s.hasValidLength { problems.append(.badDataLength(type: type, length: data.count)) }
            structures.append(s)
            i += 1 + length
        }
        self.structures = structures
        self.problems = problems
    }

    /// Encoded: each structure as Length, AD Type, AD Data (data beyond 254 octets is dropped).
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(structures.reduce(0) { $0 + 2 + Swift.min($1.data.count, 254) })
        for s in structures {
            let d = s.data.count > 254 ? Array(s.data.prefix(254)) : s.data
            out.append(UInt8(d.count + 1))
            out.append(s.type.rawValue)
            out.append(contentsOf: d)
        }
        return out
    }

    /// Encoded length in octets.
    public var encodedLength: Int { structures.reduce(0) { $0 + 2 + Swift.min($1.data.count, 254) } }

    /// Advertising data followed by the scan response's structures (accessors that return the
    /// first match therefore prefer the advertising data).
    public func merged(with scanResponse: AdvertisingData) -> AdvertisingData {
        var m = AdvertisingData(structures + scanResponse.structures)
        m.problems = problems + scanResponse.problems
        return m
    }

    // MARK: Typed accessors

    public func structures(of type: ADType) -> [ADStructure] { structures.filter { $0.type == type } }
    private func first(_ type: ADType) -> [UInt8]? { structures.first { $0.type == type }?.data }

    /// The Flags octet (first Flags structure with at least one octet).
    public var flags: UInt8? {
        structures.first { $0.type == .flags && !$0.data.isEmpty }?.data[0]
    }

    public var completeLocalName: String? { first(.completeLocalName).map { String(decoding: $0, as: UTF8.self) } }
    public var shortenedLocalName: String? { first(.shortenedLocalName).map { String(decoding: $0, as: UTF8.self) } }
    /// The complete local name, else the longest shortened one (advertising data and scan
    /// response may each carry one, each a prefix of the full name, Supplement Part A 1.2).
    public var name: String? {
        completeLocalName ?? structures(of: .shortenedLocalName).max { $0.data.count < $1.data.count }
            .map { String(decoding: $0.data, as: UTF8.self) }
    }

    /// Tx Power Level in dBm.
    public var txPower: Int8? {
        structures.first { $0.type == .txPowerLevel && $0.data.count == 1 }.map { Int8(bitPattern: $0.data[0]) }
    }

    public var appearance: UInt16? {
        structures.first { $0.type == .appearance && $0.data.count == 2 }.map { UInt16($0.data[0]) | UInt16($0.data[1]) << 8 }
    }

    public var peripheralConnectionIntervalRange: ConnectionIntervalRange? {
        guard let d = structures.first(where: { $0.type == .peripheralConnectionIntervalRange && $0.data.count == 4 })?.data else { return nil }
        return ConnectionIntervalRange(min: UInt16(d[0]) | UInt16(d[1]) << 8, max: UInt16(d[2]) | UInt16(d[3]) << 8)
    }

    /// UUIDs of one list type (16/32/128-bit, complete, incomplete or solicitation), in order.
    public func uuids(_ type: ADType) -> [BluetoothUUID] {
        guard let w = type.uuidListWidth else { return [] }
        var out: [BluetoothUUID] = []
        for s in structures where s.type == type { out += Self.uuidList(s.data, width: w) }
        return out
    }

    /// Every advertised service UUID (complete and incomplete lists, 16/32/128-bit), deduplicated, in order.
    public var services: [BluetoothUUID] {
        var seen = Set<BluetoothUUID>()
        var out: [BluetoothUUID] = []
        for s in structures {
            switch s.type.rawValue {
            case 0x02...0x07:
                for u in Self.uuidList(s.data, width: s.type.uuidListWidth ?? 2) where seen.insert(u).inserted { out.append(u) }
            default: continue
            }
        }
        return out
    }

    /// Service Solicitation UUIDs (16/32/128-bit), deduplicated, in order.
    public var solicitedServices: [BluetoothUUID] {
        var seen = Set<BluetoothUUID>()
        var out: [BluetoothUUID] = []
        for s in structures where [0x14, 0x15, 0x1F].contains(s.type.rawValue) {
            for u in Self.uuidList(s.data, width: s.type.uuidListWidth ?? 2) where seen.insert(u).inserted { out.append(u) }
        }
        return out
    }

    /// Every Manufacturer Specific Data structure, in order (several are allowed).
    public var manufacturerSpecificData: [(companyIdentifier: UInt16, data: [UInt8])] {
        structures.compactMap { s in
            guard s.type == .manufacturerSpecificData, s.data.count >= 2 else { return nil }
            return (UInt16(s.data[0]) | UInt16(s.data[1]) << 8, Array(s.data[2...]))
        }
    }

    /// Manufacturer data by company identifier (the first structure of a company wins).
    public var manufacturerData: [UInt16: [UInt8]] {
        var out: [UInt16: [UInt8]] = [:]
        for m in manufacturerSpecificData where out[m.companyIdentifier] == nil { out[m.companyIdentifier] = m.data }
        return out
    }

    /// Every Service Data structure (16/32/128-bit UUID), in order.
    public var serviceDataList: [(uuid: BluetoothUUID, data: [UInt8])] {
        structures.compactMap { s in
            guard let w = s.type.serviceDataUUIDWidth, s.data.count >= w,
                  let u = BluetoothUUID(littleEndian: Array(s.data[0..<w])) else { return nil }
            return (u, Array(s.data[w...]))
        }
    }

    /// Service data by UUID (the first structure of a UUID wins).
    public var serviceData: [BluetoothUUID: [UInt8]] {
        var out: [BluetoothUUID: [UInt8]] = [:]
        for e in serviceDataList where out[e.uuid] == nil { out[e.uuid] = e.data }
        return out
    }

    /// The URI with its scheme expanded from the URI Scheme Name String Mapping.
    public var uri: String? { first(.uri).map(Self.decodeURI) }

    /// LE Supported Features, little-endian octets as carried (bit 0 of octet 0 = LE Encryption).
    public var leSupportedFeatures: [UInt8]? { first(.leSupportedFeatures) }

    // MARK: Builder

    public mutating func append(_ s: ADStructure) { structures.append(s) }
    public mutating func append(type: ADType, data: [UInt8]) { structures.append(ADStructure(type: type, data: data)) }

    public mutating func addFlags(_ f: UInt8) { append(type: .flags, data: [f]) }
    public mutating func addFlags(_ f: ADFlags) { addFlags(f.rawValue) }

    /// Adds one list structure per UUID width present (16, 32, 128 bits), in that order.
    public mutating func addServiceUUIDs(_ uuids: [BluetoothUUID], complete: Bool = true) {
        let types: [ADType] = complete
            ? [.completeServiceUUIDs16, .completeServiceUUIDs32, .completeServiceUUIDs128]
            : [.incompleteServiceUUIDs16, .incompleteServiceUUIDs32, .incompleteServiceUUIDs128]
        addUUIDLists(uuids, types: types)
    }

    public mutating func addSolicitedServices(_ uuids: [BluetoothUUID]) {
        addUUIDLists(uuids, types: [.serviceSolicitationUUIDs16, .serviceSolicitationUUIDs32, .serviceSolicitationUUIDs128])
    }

    private mutating func addUUIDLists(_ uuids: [BluetoothUUID], types: [ADType]) {
        for (i, width) in [2, 4, 16].enumerated() {
            let group = uuids.filter { $0.bytes.count == width }
            if !group.isEmpty { append(type: types[i], data: group.flatMap(\.littleEndian)) }
        }
    }

    public mutating func addLocalName(_ name: String, complete: Bool = true) {
        append(type: complete ? .completeLocalName : .shortenedLocalName, data: Array(name.utf8))
    }

    /// Adds the complete local name if it fits in `limit` octets of data in total, else a
    /// Shortened Local Name cut at a UTF-8 character boundary. Adds nothing if not even one character fits.
    public mutating func addLocalName(_ name: String, fittingIn limit: Int) {
        let room = limit - encodedLength - 2
        let utf8 = Array(name.utf8)
        if utf8.count <= room { addLocalName(name, complete: true); return }
        var cut = ""
        var used = 0
        for ch in name {
            let n = String(ch).utf8.count
            if used + n > room { break }
            cut.append(ch)
            used += n
        }
        if !cut.isEmpty { addLocalName(cut, complete: false) }
    }

    public mutating func addTxPower(_ dBm: Int8) { append(type: .txPowerLevel, data: [UInt8(bitPattern: dBm)]) }

    public mutating func addManufacturerData(company: UInt16, data: [UInt8]) {
        append(type: .manufacturerSpecificData, data: [UInt8(company & 0xff), UInt8(company >> 8)] + data)
    }

    /// Service data; the AD type follows the UUID's width.
    public mutating func addServiceData(_ uuid: BluetoothUUID, data: [UInt8]) {
        let type: ADType = uuid.bytes.count == 2 ? .serviceData16 : uuid.bytes.count == 4 ? .serviceData32 : .serviceData128
        append(type: type, data: uuid.littleEndian + data)
    }

    public mutating func addAppearance(_ v: UInt16) { append(type: .appearance, data: [UInt8(v & 0xff), UInt8(v >> 8)]) }

    public mutating func addPeripheralConnectionIntervalRange(_ r: ConnectionIntervalRange) {
        append(type: .peripheralConnectionIntervalRange,
               data: [UInt8(r.min & 0xff), UInt8(r.min >> 8), UInt8(r.max & 0xff), UInt8(r.max >> 8)])
    }

    /// Adds a URI, replacing a known scheme by its code point (an unknown scheme: "empty scheme" 0x01 + the full text).
    public mutating func addURI(_ uri: String) { append(type: .uri, data: Self.encodeURI(uri)) }

    public mutating func addLESupportedFeatures(_ octets: [UInt8]) { append(type: .leSupportedFeatures, data: octets) }

    // MARK: Fields

    public var fields: [Field] { describe() }

    /// Fields for `dump`, with optional name lookups from higher layers (e.g. GATT's AssignedNumbers).
    public func describe(companyName: (UInt16) -> String? = { _ in nil },
                         uuidName: (BluetoothUUID) -> String? = { _ in nil },
                         appearanceName: (UInt16) -> String? = { _ in nil }) -> [Field] {
        var list: [FieldValue] = []
        list.reserveCapacity(structures.count)
        for s in structures {
            var f: [Field] = [.int("length", s.data.count + 1), .code("adType", s.type.rawValue, note: s.type.description)]
            func uuidValue(_ u: BluetoothUUID) -> FieldValue { .text(u.description) }
            guard s.hasValidLength else {
                f.append(.bytes("data", s.data, note: "malformed: wrong length for this AD type"))
                list.append(.object(f))
                continue
            }
            switch s.type.rawValue {
            case 0x01:
                f.append(.code("flags", s.data[0], note: ADFlags(rawValue: s.data[0]).description))
            case 0x02...0x07, 0x14, 0x15, 0x1F:
                let us = Self.uuidList(s.data, width: s.type.uuidListWidth ?? 2)
                let names = us.map { uuidName($0) ?? "" }
                f.append(Field("uuids", .list(us.map(uuidValue)),
                               note: names.contains(where: { !$0.isEmpty }) ? names.map { $0.isEmpty ? "?" : $0 }.joined(separator: ", ") : nil))
            case 0x08, 0x09:
                f.append(.text("localName", String(decoding: s.data, as: UTF8.self)))
            case 0x0A:
                f.append(.int("txPowerLevel", Int8(bitPattern: s.data[0]), note: "dBm"))
            case 0x12:
                let r = peripheralConnectionIntervalRange(s.data)
                f.append(.interval("connIntervalMin", r.min, unitMicroseconds: 1250))
                f.append(.interval("connIntervalMax", r.max, unitMicroseconds: 1250))
            case 0x16, 0x20, 0x21:
                let w = s.type.serviceDataUUIDWidth ?? 2
                if let u = BluetoothUUID(littleEndian: Array(s.data[0..<w])) {
                    f.append(Field("uuid", uuidValue(u), note: uuidName(u)))
                }
                f.append(.bytes("serviceData", Array(s.data[w...])))
            case 0x19:
                let v = UInt16(s.data[0]) | UInt16(s.data[1]) << 8
                f.append(.code("appearance", v, note: appearanceName(v)))
            case 0x24:
                f.append(.text("uri", Self.decodeURI(s.data)))
            case 0xFF:
                let id = UInt16(s.data[0]) | UInt16(s.data[1]) << 8
                f.append(.code("companyIdentifier", id, note: companyName(id)))
                f.append(.bytes("data", Array(s.data[2...])))
            default:
                f.append(.bytes("data", s.data))
            }
            list.append(.object(f))
        }
        var out = [Field("adStructures", .list(list))]
        if !problems.isEmpty { out.append(Field("problems", .list(problems.map { .text($0.description) }))) }
        return out
    }

    private func peripheralConnectionIntervalRange(_ d: [UInt8]) -> ConnectionIntervalRange {
        ConnectionIntervalRange(min: UInt16(d[0]) | UInt16(d[1]) << 8, max: UInt16(d[2]) | UInt16(d[3]) << 8)
    }

    // MARK: Helpers

    static func uuidList(_ data: [UInt8], width: Int) -> [BluetoothUUID] {
        var out: [BluetoothUUID] = []
        var i = 0
        while i + width <= data.count {
            if let u = BluetoothUUID(littleEndian: Array(data[i..<(i + width)])) { out.append(u) }
            i += width
        }
        return out
    }

    /// URI Scheme Name String Mapping (Assigned Numbers 2.7): code point 0x02 is "aaa:", ...
    /// Code point 0x01 means "no scheme"; the rest of the data is the URI as UTF-8.
    public static let uriSchemes: [String] = [
        "aaa:", "aaas:", "about:", "acap:", "acct:", "cap:", "cid:", "coap:", "coaps:", "crid:", "data:",
        "dav:", "dict:", "dns:", "file:", "ftp:", "geo:", "go:", "gopher:", "h323:", "http:", "https:",
        "iax:", "icap:", "im:", "imap:", "info:", "ipp:", "ipps:", "iris:", "iris.beep:", "iris.xpc:",
        "iris.xpcs:", "iris.lwz:", "jabber:", "ldap:", "mailto:", "mid:", "msrp:", "msrps:", "mtqp:",
        "mupdate:", "news:", "nfs:", "ni:", "nih:", "nntp:", "opaquelocktoken:", "pop:", "pres:",
        "reload:", "rtsp:", "rtsps:", "rtspu:", "service:", "session:", "shttp:", "sieve:", "sip:",
        "sips:", "sms:", "snmp:", "soap.beep:", "soap.beeps:", "stun:", "stuns:", "tag:", "tel:",
        "telnet:", "tftp:", "thismessage:", "tn3270:", "tip:", "turn:", "turns:", "tv:", "urn:",
        "vemmi:", "ws:", "wss:", "xcon:", "xcon-userid:", "xmlrpc.beep:", "xmlrpc.beeps:", "xmpp:",
        "z39.50r:", "z39.50s:",
    ]

    static func decodeURI(_ data: [UInt8]) -> String {
        let text = String(decoding: data, as: UTF8.self)
        guard let first = text.unicodeScalars.first else { return "" }
        let rest = String(text.unicodeScalars.dropFirst())
        switch first.value {
        case 0x01: return rest
        case 0x02..<(0x02 + UInt32(uriSchemes.count)): return uriSchemes[Int(first.value) - 2] + rest
        default: return text
        }
    }

    static func encodeURI(_ uri: String) -> [UInt8] {
        // Longest matching scheme ("https:" before "http:" is automatic: the colon ends each).
        if let colon = uri.firstIndex(of: ":") {
            let scheme = String(uri[...colon]).lowercased()
            if let i = uriSchemes.firstIndex(of: scheme) {
                return [UInt8(i + 2)] + Array(uri[uri.index(after: colon)...].utf8)
            }
        }
        return [0x01] + Array(uri.utf8)
    }
}

extension ADStructure {
    /// Whether the data length is one the type allows (unknown and free-form types: always).
    public var hasValidLength: Bool {
        let n = data.count
        switch type.rawValue {
        case 0x01: return n >= 1
        case 0x0A: return n == 1
        case 0x12: return n == 4
        case 0x19: return n == 2
        case 0xFF: return n >= 2
        default:
            if let w = type.uuidListWidth { return n % w == 0 }
            if let w = type.serviceDataUUIDWidth { return n >= w }
            return true
        }
    }
}
