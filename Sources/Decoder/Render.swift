import HCI
import Capture

/// The layers `--layers` / `--trace=` can name.
public let allDecoderLayers: Set<String> = ["hci", "l2cap", "att", "gatt", "smp"]

/// Renders a decoded packet: one JSON object (CLI.md's `dump --json` line, no newline), or the
/// human tree (lines ending in "\n"). Layers not in `layers` are left out.
public func render(_ p: DecodedPacket, layers: Set<String> = allDecoderLayers, json: Bool) -> String {
    var s = ""
    if json { appendJSON(p, layers: layers, to: &s) } else { appendTree(p, layers: layers, to: &s) }
    return s
}

/// JSON: `{"index":7,"time":"...","direction":"sent","type":"acl","hci":{...},...}`.
public func appendJSON(_ p: DecodedPacket, layers: Set<String>, to s: inout String) {
    var b = RenderBuffer()
    appendJSON(p, layers: LayerSelection(layers), to: &b)
    s += b.string
}

/// Human tree (see `appendTree(_:layers:to:)` on a `RenderBuffer`).
public func appendTree(_ p: DecodedPacket, layers: Set<String>, to s: inout String) {
    var b = RenderBuffer()
    appendTree(p, layers: LayerSelection(layers), to: &b)
    s += b.string
}

// MARK: - Byte renderer
//
// Performance (dump must be ≥ 20× faster than `tshark -V`): the tree and JSON are written as
// UTF-8 bytes into one growing [UInt8] (`RenderBuffer`) that `dump` writes to fd 1 in chunks.
// Appending to a String costs a uniqueness check, a capacity/ASCII-flag update and a
// breadcrumbs invalidation per `+=`; appending bytes to an array is a memcpy. Numbers, hex and
// timestamps are written digit by digit into the buffer (no temporary Strings). The text is
// byte-identical to the String renderer it replaces (DecoderTests check both formats).

/// Which decoded layers to print, resolved once from the `--layers` names (no Set<String>
/// hashing per layer per packet). Signaling belongs to L2CAP, btmon records to HCI.
public struct LayerSelection: Sendable {
    var hci, l2cap, att, gatt, smp: Bool
    var others: Set<String>

    public init(_ layers: Set<String>) {
        hci = layers.contains("hci")
        l2cap = layers.contains("l2cap")
        att = layers.contains("att")
        gatt = layers.contains("gatt")
        smp = layers.contains("smp")
        others = layers
    }

    /// Whether `p` has anything in the selected layers (a malformed packet always has: its
    /// reason and raw bytes). `dump --layers` leaves the others out.
    public func shows(_ p: DecodedPacket) -> Bool {
        p.malformed != nil || p.layers.contains { includes($0) }
    }

    @inline(__always)
    func includes(_ layer: DecodedLayer) -> Bool {
        switch layer.kind {
        case .hci, .monitor, .note: return hci
        case .l2cap, .signaling: return l2cap
        case .att: return att
        case .gatt: return gatt
        case .smp: return smp
        case .other: return others.contains(layer.name)
        }
    }

    @inline(__always)
    func includes(_ layer: String) -> Bool {
        switch layer {
        case "hci", "monitor", "note": return hci
        case "l2cap", "signaling": return l2cap
        case "att": return att
        case "gatt": return gatt
        case "smp": return smp
        default: return others.contains(layer)
        }
    }
}

/// UTF-8 output under construction: a growable byte buffer written through a pointer (one
/// capacity check and a memcpy per append; `[UInt8].append(contentsOf:)` cost a quarter of
/// `dump`'s time, issue 14). Not copyable: it owns its memory, so an append needs no
/// uniqueness check (read it with `bytes`, `string` or `withUnsafeBytes`).
public struct RenderBuffer: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    public private(set) var count = 0

    public init(capacity: Int = 0) {
        self.capacity = Swift.max(capacity, 256)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// The bytes written so far (a copy).
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
    public var string: String { withUnsafeBytes { String(decoding: $0, as: UTF8.self) } }
    public mutating func removeAll() { count = 0 }

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Room for `n` more bytes: where to write them (then `count += n`).
    @inline(__always)
    private mutating func room(_ n: Int) -> UnsafeMutablePointer<UInt8> {
        if _slowPath(count + n > capacity) { grow(n) }
        return base + count
    }

    @inline(never)
    private mutating func grow(_ n: Int) {
        let bigger = Swift.max(capacity * 2, count + n)
        let new = UnsafeMutablePointer<UInt8>.allocate(capacity: bigger)
        new.update(from: base, count: count)
        base.deallocate()
        base = new
        capacity = bigger
    }

    @inline(__always)
    mutating func append(raw p: UnsafeRawBufferPointer) {
        guard let from = p.baseAddress, p.count > 0 else { return }
        let to = room(p.count)
        to.update(from: from.assumingMemoryBound(to: UInt8.self), count: p.count)
        count += p.count
    }

    @inline(__always)
    public mutating func append(_ s: String) {
        // Native and small strings without a copy of `s` (a copy is a retain and release).
        if s.utf8.withContiguousStorageIfAvailable({ append(raw: UnsafeRawBufferPointer($0)) }) == nil {
            var s = s
            s.withUTF8 { append(raw: UnsafeRawBufferPointer($0)) }
        }
    }

    @inline(__always)
    public mutating func append(byte: UInt8) {
        room(1).pointee = byte
        count += 1
    }

    @inline(__always)
    mutating func append(ascii s: StaticString) {
        s.withUTF8Buffer { append(raw: UnsafeRawBufferPointer($0)) }
    }

    mutating func append(int v: Int) {
        if v < 0 { append(byte: UInt8(ascii: "-")) }
        var m = v.magnitude
        if m < 10 { append(byte: 48 &+ UInt8(m)); return }
        // Digits counted first, then written in place from the last (UInt.max has 20).
        var n = 1
        var rest = m / 10
        while rest > 0 { n += 1; rest /= 10 }
        let to = room(n)
        var i = n
        while m > 0 { i -= 1; to[i] = 48 &+ UInt8(m % 10); m /= 10 }
        count += n
    }

    mutating func append(hex b: ArraySlice<UInt8>) {
        let out = room(b.count * 2)
        var i = 0
        for x in b {
            out[i] = hexDigit(x >> 4)
            out[i + 1] = hexDigit(x & 0x0f)
            i += 2
        }
        count += i
    }

    mutating func append(hex b: [UInt8]) {
        let out = room(b.count * 2)
        var i = 0
        for x in b {
            out[i] = hexDigit(x >> 4)
            out[i + 1] = hexDigit(x & 0x0f)
            i += 2
        }
        count += i
    }

    mutating func append(indent n: Int) {
        guard n > 0 else { return }
        room(n).update(repeating: UInt8(ascii: " "), count: n)
        count += n
    }

    /// `s` as a JSON string, escaped as HCI's `appendJSONString` does (per byte: multi-byte
    /// UTF-8 sequences are copied as they are, as that function copies their scalars).
    mutating func append(jsonString s: String) {
        var s = s
        s.withUTF8 { u in
            append(byte: UInt8(ascii: "\""))
            var clean = true
            for c in u where c < 0x20 || c == 0x22 || c == 0x5c { clean = false; break }
            if clean {
                append(raw: UnsafeRawBufferPointer(u))
            } else {
                for c in u {
                    switch c {
                    case 0x22: append(ascii: "\\\"")
                    case 0x5c: append(ascii: "\\\\")
                    case 0x0a: append(ascii: "\\n")
                    case 0x0d: append(ascii: "\\r")
                    case 0x09: append(ascii: "\\t")
                    case 0..<0x20:
                        append(ascii: "\\u00")
                        if c >= 0x10 { append(byte: hexDigit(c >> 4)) } else { append(byte: UInt8(ascii: "0")) }
                        append(byte: hexDigit(c & 0x0f))
                    default: append(byte: c)
                    }
                }
            }
            append(byte: UInt8(ascii: "\""))
        }
    }

    /// "2026-11-29T23:46:02.123456Z" (same text as `CaptureTime.iso8601`).
    mutating func append(time t: CaptureTime) {
        guard let f = civilTime(t) else { append(t.iso8601); return }
        // Digits by constant divisors (multiplications), written into a fixed 27-byte template.
        var out: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        withUnsafeMutableBytes(of: &out) { b in
            @inline(__always) func two(_ v: Int64, _ at: Int) {
                b[at] = 48 &+ UInt8(truncatingIfNeeded: v / 10); b[at + 1] = 48 &+ UInt8(truncatingIfNeeded: v % 10)
            }
            two(f.y / 100, 0); two(f.y % 100, 2); b[4] = 45; two(f.m, 5); b[7] = 45; two(f.d, 8); b[10] = 84
            two(f.secs / 3600, 11); b[13] = 58; two(f.secs / 60 % 60, 14); b[16] = 58; two(f.secs % 60, 17)
            b[19] = 46; two(f.micros / 10000, 20); two(f.micros / 100 % 100, 22); two(f.micros % 100, 24); b[26] = 90
            append(raw: UnsafeRawBufferPointer(rebasing: b[0..<27]))
        }
    }
}

@inline(__always)
private func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 48 &+ v : 87 &+ v }

/// JSON: `{"index":7,"time":"...","direction":"sent","type":"acl","hci":{...},...}`.
/// `explain`: an "explain" object by layer, each field's `FieldExplanation` under its path
/// ("connectionInterval", "reports[0].rssi"), for the fields that have one (`dump --explain --json`).
public func appendJSON(_ p: DecodedPacket, layers: LayerSelection, hex: Bool = false, explain: Bool = false, to s: inout RenderBuffer) {
    s.append(ascii: "{\"index\":")
    s.append(int: p.index)
    s.append(ascii: ",\"time\":\"")
    s.append(time: p.time)
    s.append(byte: UInt8(ascii: "\""))
    if let d = p.direction { d == .sent ? s.append(ascii: ",\"direction\":\"sent\"") : s.append(ascii: ",\"direction\":\"received\"") }
    s.append(ascii: ",\"type\":")
    s.append(jsonString: p.type)
    for layer in p.layers where layers.includes(layer) {
        s.append(ascii: ",\"")
        s.append(layer.name)
        s.append(ascii: "\":")
        appendJSONFields(layer.fields, to: &s)
    }
    if let m = p.malformed {
        s.append(ascii: ",\"malformed\":")
        s.append(jsonString: m)
    }
    if let raw = p.raw {
        s.append(ascii: ",\"raw\":\"")
        s.append(hex: raw)
        s.append(byte: UInt8(ascii: "\""))
    }
    if hex {
        // `dump --hex --json`: {"hex":{"hci":"...","l2cap":"...","att":"..."}}, shown layers only.
        var first = true
        for layer in p.layers where layers.includes(layer) {
            guard let octets = layer.octets else { continue }
            s.append(ascii: first ? ",\"hex\":{\"" : ",\"")
            first = false
            s.append(layer.name)
            s.append(ascii: "\":\"")
            s.append(hex: octets)
            s.append(byte: UInt8(ascii: "\""))
        }
        if !first { s.append(byte: UInt8(ascii: "}")) }
    }
    if explain { appendJSONExplanations(p, layers: layers, to: &s) }
    s.append(byte: UInt8(ascii: "}"))
}

private func appendJSONExplanations(_ p: DecodedPacket, layers: LayerSelection, to s: inout RenderBuffer) {
    var firstLayer = true
    for layer in p.layers where layers.includes(layer) {
        var found: [(String, FieldExplanation)] = []
        func walk(_ fields: [Field], _ prefix: String) {
            for f in fields {
                let path = prefix + f.name
                if let e = explanation(of: f, in: layer, of: p) { found.append((path, e)) }
                switch f.value {
                case .object(let inner): walk(inner, path + ".")
                case .list(let items):
                    for (i, item) in items.enumerated() { if case .object(let inner) = item { walk(inner, path + "[\(i)].") } }
                default: break
                }
            }
        }
        walk(layer.fields, "")
        guard !found.isEmpty else { continue }
        s.append(ascii: firstLayer ? ",\"explain\":{" : ",")
        firstLayer = false
        s.append(jsonString: layer.name)
        s.append(ascii: ":{")
        for (i, (path, e)) in found.enumerated() {
            if i > 0 { s.append(byte: UInt8(ascii: ",")) }
            s.append(jsonString: path)
            s.append(ascii: ":{\"meaning\":")
            s.append(jsonString: e.meaning)
            if let u = e.unit { s.append(ascii: ",\"unit\":"); s.append(jsonString: u) }
            if let spec = e.specSection { s.append(ascii: ",\"spec\":"); s.append(jsonString: spec) }
            if let cb = e.coreBluetooth { s.append(ascii: ",\"coreBluetooth\":"); s.append(jsonString: cb) }
            if !e.decoded.isEmpty {
                s.append(ascii: ",\"decoded\":[")
                for (j, line) in e.decoded.enumerated() {
                    if j > 0 { s.append(byte: UInt8(ascii: ",")) }
                    s.append(jsonString: line)
                }
                s.append(byte: UInt8(ascii: "]"))
            }
            s.append(byte: UInt8(ascii: "}"))
        }
        s.append(byte: UInt8(ascii: "}"))
    }
    if !firstLayer { s.append(byte: UInt8(ascii: "}")) }
}

/// Human tree:
/// ```
/// #7 2026-11-29T23:46:02.123456Z → ATT Read By Group Type Request
///   HCI
///     handle: 64
///   ...
/// ```
/// `→` host to controller, `←` controller to host, `·` unknown direction.
/// `explain`: after each field that has a `FieldExplanation`, an "explain:" line and its decoded
/// lines (`dump --explain`).
public func appendTree(_ p: DecodedPacket, layers: LayerSelection, hex: Bool = false, explain: Bool = false, to s: inout RenderBuffer) {
    s.append(byte: UInt8(ascii: "#"))
    s.append(int: p.index)
    s.append(byte: UInt8(ascii: " "))
    s.append(time: p.time)
    switch p.direction {
    case .sent?: s.append(ascii: " → ")
    case .received?: s.append(ascii: " ← ")
    case nil: s.append(ascii: " · ")
    }
    s.append(p.summary.isEmpty ? p.type : p.summary)
    s.append(byte: 10)
    for i in p.layers.indices where layers.includes(p.layers[i]) {
        let layer = p.layers[i]
        s.append(ascii: "  ")
        switch layer.kind {
        case .hci: s.append(ascii: "HCI")
        case .l2cap: s.append(ascii: "L2CAP")
        case .signaling: s.append(ascii: "L2CAP Signaling")
        case .att: s.append(ascii: "ATT")
        case .smp: s.append(ascii: "SMP")
        case .gatt: s.append(ascii: "GATT")
        case .monitor: s.append(ascii: "Monitor")
        case .note: s.append(ascii: "Note")
        case .other: s.append(layer.name)
        }
        s.append(byte: 10)
        if explain {
            appendTreeFields(layer.fields, indent: 4, to: &s) { f in explanation(of: f, in: layer, of: p) }
        } else {
            appendTreeFields(layer.fields, indent: 4, to: &s)
        }
        if hex, let octets = layer.octets { appendHexDump(octets, indent: 4, to: &s) }
    }
    if let m = p.malformed {
        s.append(ascii: "  malformed: ")
        s.append(m)
        s.append(byte: 10)
    }
    if let raw = p.raw {
        s.append(ascii: "  raw: ")
        if raw.isEmpty { s.append(ascii: "(empty)") } else { s.append(hex: raw) }
        s.append(byte: 10)
    }
}

/// `dump --hex`: "octets (N):" then 16 octets a line after their offset, as `tshark -x`.
private func appendHexDump(_ octets: ArraySlice<UInt8>, indent: Int, to s: inout RenderBuffer) {
    s.append(indent: indent)
    s.append(ascii: "octets (")
    s.append(int: octets.count)
    s.append(ascii: "):\n")
    var offset = 0
    var i = octets.startIndex
    while i < octets.endIndex {
        let end = octets.index(i, offsetBy: 16, limitedBy: octets.endIndex) ?? octets.endIndex
        s.append(indent: indent + 2)
        for shift in stride(from: offset > 0xffff ? 28 : 12, through: 0, by: -4) {
            s.append(byte: hexDigit(UInt8((offset >> shift) & 0x0f)))
        }
        s.append(byte: UInt8(ascii: " "))
        var j = i
        while j < end {
            s.append(byte: UInt8(ascii: " "))
            if j - i == 8 { s.append(byte: UInt8(ascii: " ")) }
            s.append(byte: hexDigit(octets[j] >> 4))
            s.append(byte: hexDigit(octets[j] & 0x0f))
            j += 1
        }
        s.append(byte: 10)
        offset += end - i
        i = end
    }
}

private func appendTreeFields(_ fields: [Field], indent: Int, to s: inout RenderBuffer,
                              explain: ((Field) -> FieldExplanation?)? = nil) {
    // By index: each field is borrowed from the array, not copied (retained) per iteration.
    for i in fields.indices { appendTreeField(fields[i], indent: indent, to: &s, explain: explain) }
}

/// "explain: ..." under a field, then its decoded lines, indented under it.
private func appendExplanation(_ e: FieldExplanation, indent: Int, to s: inout RenderBuffer) {
    s.append(indent: indent)
    s.append(ascii: "explain: ")
    s.append(e.summary)
    s.append(byte: 10)
    for line in e.decoded {
        s.append(indent: indent + 2)
        s.append(line)
        s.append(byte: 10)
    }
}

/// `explainIndent`: where the field's explanation lines go (a list item's first field is
/// written after "- ", at indent 0).
private func appendTreeField(_ f: Field, indent: Int, to s: inout RenderBuffer,
                             explain: ((Field) -> FieldExplanation?)? = nil, explainIndent: Int? = nil) {
    let explained = explain.flatMap { $0(f) }
    let under = (explainIndent ?? indent) + 2
    s.append(indent: indent)
    s.append(f.name)
    s.append(byte: UInt8(ascii: ":"))
    switch f.value {
    case .object(let inner):
        if let note = f.note { s.append(ascii: " ("); s.append(note); s.append(byte: UInt8(ascii: ")")) }
        s.append(byte: 10)
        if let explained { appendExplanation(explained, indent: under, to: &s) }
        appendTreeFields(inner, indent: indent + 2, to: &s, explain: explain)
    case .list(let items) where items.contains(where: { if case .object = $0 { return true } else { return false } }):
        if let note = f.note { s.append(ascii: " ("); s.append(note); s.append(byte: UInt8(ascii: ")")) }
        s.append(byte: 10)
        if let explained { appendExplanation(explained, indent: under, to: &s) }
        for item in items {
            if case .object(let inner) = item, let first = inner.first {
                // "- first: value" then the rest aligned under it.
                s.append(indent: indent + 2)
                s.append(ascii: "- ")
                appendTreeField(first, indent: 0, to: &s, explain: explain, explainIndent: indent + 4)
                for rest in inner.dropFirst() { appendTreeField(rest, indent: indent + 4, to: &s, explain: explain) }
            } else {
                s.append(indent: indent + 2)
                s.append(ascii: "- ")
                s.append(item.display)
                s.append(byte: 10)
            }
        }
    default:
        s.append(byte: UInt8(ascii: " "))
        switch f.value {
        case .bytes(let b): if b.isEmpty { s.append(ascii: "(empty)") } else { s.append(hex: b) }
        case .int(let i): s.append(int: i)
        case .code(let t), .text(let t): s.append(t)
        default: s.append(f.value.display)
        }
        if let note = f.note, !note.isEmpty { s.append(ascii: " ("); s.append(note); s.append(byte: UInt8(ascii: ")")) }
        s.append(byte: 10)
        if let explained { appendExplanation(explained, indent: under, to: &s) }
    }
}

func appendJSONValue(_ v: FieldValue, to out: inout RenderBuffer) {
    switch v {
    case .int(let i): out.append(int: i)
    case .code(let s), .text(let s): out.append(jsonString: s)
    case .bytes(let b): out.append(byte: UInt8(ascii: "\"")); out.append(hex: b); out.append(byte: UInt8(ascii: "\""))
    case .bool(let b): b ? out.append(ascii: "true") : out.append(ascii: "false")
    case .list(let items):
        out.append(byte: UInt8(ascii: "["))
        var first = true
        for item in items {
            if !first { out.append(byte: UInt8(ascii: ",")) }
            first = false
            appendJSONValue(item, to: &out)
        }
        out.append(byte: UInt8(ascii: "]"))
    case .object(let fields): appendJSONFields(fields, to: &out)
    }
}

func appendJSONFields(_ fields: [Field], to out: inout RenderBuffer) {
    out.append(byte: UInt8(ascii: "{"))
    var first = true
    for f in fields {
        if !first { out.append(byte: UInt8(ascii: ",")) }
        first = false
        out.append(jsonString: f.name)
        out.append(byte: UInt8(ascii: ":"))
        appendJSONValue(f.value, to: &out)
    }
    out.append(byte: UInt8(ascii: "}"))
}

// MARK: - Time

/// Calendar fields of `t` (Howard Hinnant's civil_from_days), nil outside years 0...9999.
@inline(__always)
func civilTime(_ t: CaptureTime) -> (y: Int64, m: Int64, d: Int64, secs: Int64, micros: Int64)? {
    var secs = t.seconds
    var days = secs / 86400
    secs -= days * 86400
    if secs < 0 { secs += 86400; days -= 1 }
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
    guard (0...9999).contains(y) else { return nil }
    return (y, m, d, secs, Int64(t.nanoseconds / 1000))
}
