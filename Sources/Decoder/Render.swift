import HCI
import Capture

/// The layers `--layers` / `--trace=` can name.
public let allDecoderLayers: Set<String> = ["hci", "l2cap", "att", "gatt", "smp"]

/// Which `--layers` name governs a decoded layer (signaling belongs to L2CAP; btmon records to HCI).
func selectorName(_ layer: String) -> String {
    switch layer {
    case "signaling": return "l2cap"
    case "monitor": return "hci"
    default: return layer
    }
}

/// Renders a decoded packet: one JSON object (CLI.md's `dump --json` line, no newline), or the
/// human tree (lines ending in "\n"). Layers not in `layers` are left out.
public func render(_ p: DecodedPacket, layers: Set<String> = allDecoderLayers, json: Bool) -> String {
    var s = ""
    if json { appendJSON(p, layers: layers, to: &s) } else { appendTree(p, layers: layers, to: &s) }
    return s
}

/// JSON: `{"index":7,"time":"...","direction":"sent","type":"acl","hci":{...},...}`.
public func appendJSON(_ p: DecodedPacket, layers: Set<String>, to s: inout String) {
    s += "{\"index\":"
    s += String(p.index)
    s += ",\"time\":\""
    s += fastISO8601(p.time)
    s += "\""
    if let d = p.direction { s += d == .sent ? ",\"direction\":\"sent\"" : ",\"direction\":\"received\"" }
    s += ",\"type\":"
    appendJSONStringFast(p.type, to: &s)
    for layer in p.layers where layers.contains(selectorName(layer.name)) {
        s += ",\""
        s += layer.name
        s += "\":"
        appendJSONFields(layer.fields, to: &s)
    }
    if let m = p.malformed {
        s += ",\"malformed\":"
        appendJSONStringFast(m, to: &s)
    }
    if let raw = p.raw {
        s += ",\"raw\":\""
        s += fastHex(raw)
        s += "\""
    }
    s += "}"
}

private let layerTitles: [String: String] = [
    "hci": "HCI", "l2cap": "L2CAP", "signaling": "L2CAP Signaling", "att": "ATT", "smp": "SMP",
    "gatt": "GATT", "monitor": "Monitor",
]

/// Human tree:
/// ```
/// #7 2026-11-29T23:46:02.123456Z → ATT Read By Group Type Request
///   HCI
///     handle: 64
///   ...
/// ```
/// `→` host to controller, `←` controller to host, `·` unknown direction.
public func appendTree(_ p: DecodedPacket, layers: Set<String>, to s: inout String) {
    s += "#"
    s += String(p.index)
    s += " "
    s += fastISO8601(p.time)
    switch p.direction {
    case .sent?: s += " → "
    case .received?: s += " ← "
    case nil: s += " · "
    }
    s += p.summary.isEmpty ? p.type : p.summary
    s += "\n"
    for layer in p.layers where layers.contains(selectorName(layer.name)) {
        s += "  "
        s += layerTitles[layer.name] ?? layer.name
        s += "\n"
        appendTreeFields(layer.fields, indent: 4, to: &s)
    }
    if let m = p.malformed {
        s += "  malformed: "
        s += m
        s += "\n"
    }
    if let raw = p.raw {
        s += "  raw: "
        s += raw.isEmpty ? "(empty)" : fastHex(raw)
        s += "\n"
    }
}

private let indents: [String] = (0..<64).map { String(repeating: " ", count: $0) }

@inline(__always)
private func appendIndent(_ n: Int, to s: inout String) {
    s += n < indents.count ? indents[n] : String(repeating: " ", count: n)
}

private func appendTreeFields(_ fields: [Field], indent: Int, to s: inout String) {
    for f in fields {
        appendIndent(indent, to: &s)
        s += f.name
        s += ":"
        switch f.value {
        case .object(let inner):
            if let note = f.note { s += " (" + note + ")" }
            s += "\n"
            appendTreeFields(inner, indent: indent + 2, to: &s)
        case .list(let items) where items.contains(where: { if case .object = $0 { return true } else { return false } }):
            if let note = f.note { s += " (" + note + ")" }
            s += "\n"
            for item in items {
                if case .object(let inner) = item, let first = inner.first {
                    // "- first: value" then the rest aligned under it.
                    appendIndent(indent + 2, to: &s)
                    s += "- "
                    var firstLine = ""
                    appendTreeFields([first], indent: 0, to: &firstLine)
                    s += firstLine
                    appendTreeFields(Array(inner.dropFirst()), indent: indent + 4, to: &s)
                } else {
                    appendIndent(indent + 2, to: &s)
                    s += "- "
                    s += item.display
                    s += "\n"
                }
            }
        default:
            s += " "
            switch f.value {
            case .bytes(let b): s += b.isEmpty ? "(empty)" : fastHex(b)
            case .int(let i): s += String(i)
            case .code(let t), .text(let t): s += t
            default: s += f.value.display
            }
            if let note = f.note, !note.isEmpty { s += " (" + note + ")" }
            s += "\n"
        }
    }
}

// MARK: - Fast text primitives (dump must be much faster than `tshark -V`)

/// Appends `s` as a JSON string; copies it whole when nothing needs escaping.
@inline(__always)
func appendJSONStringFast(_ s: String, to out: inout String) {
    for b in s.utf8 where b < 0x20 || b == 0x22 || b == 0x5c {
        appendJSONString(s, to: &out)
        return
    }
    out += "\""
    out += s
    out += "\""
}

private let hexASCII: [UInt8] = Array("0123456789abcdef".utf8)

/// Lowercase hex of `bytes`, written in one allocation.
func fastHex(_ bytes: [UInt8]) -> String {
    if bytes.isEmpty { return "" }
    return String(unsafeUninitializedCapacity: bytes.count * 2) { buf in
        var i = 0
        for b in bytes {
            buf[i] = hexASCII[Int(b >> 4)]
            buf[i + 1] = hexASCII[Int(b & 0x0f)]
            i += 2
        }
        return i
    }
}

func appendJSONValue(_ v: FieldValue, to out: inout String) {
    switch v {
    case .int(let i): out += String(i)
    case .code(let s), .text(let s): appendJSONStringFast(s, to: &out)
    case .bytes(let b): out += "\""; out += fastHex(b); out += "\""
    case .bool(let b): out += b ? "true" : "false"
    case .list(let items):
        out += "["
        var first = true
        for item in items {
            if !first { out += "," }
            first = false
            appendJSONValue(item, to: &out)
        }
        out += "]"
    case .object(let fields): appendJSONFields(fields, to: &out)
    }
}

/// Same output as HCI's `appendJSONObject`, faster.
func appendJSONFields(_ fields: [Field], to out: inout String) {
    out += "{"
    var first = true
    for f in fields {
        if !first { out += "," }
        first = false
        appendJSONStringFast(f.name, to: &out)
        out += ":"
        appendJSONValue(f.value, to: &out)
    }
    out += "}"
}

/// "2026-11-29T23:46:02.123456Z" without gmtime or Foundation (same text as `CaptureTime.iso8601`).
func fastISO8601(_ t: CaptureTime) -> String {
    var secs = t.seconds
    var days = secs / 86400
    secs -= days * 86400
    if secs < 0 { secs += 86400; days -= 1 }
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
    guard (0...9999).contains(y) else { return t.iso8601 }
    let micros = Int64(t.nanoseconds / 1000)
    return String(unsafeUninitializedCapacity: 27) { buf in
        func put(_ v: Int64, _ at: Int, _ n: Int) {
            var v = v
            for k in stride(from: at + n - 1, through: at, by: -1) { buf[k] = UInt8(48 + v % 10); v /= 10 }
        }
        put(y, 0, 4); buf[4] = 45; put(m, 5, 2); buf[7] = 45; put(d, 8, 2); buf[10] = 84
        put(secs / 3600, 11, 2); buf[13] = 58; put(secs / 60 % 60, 14, 2); buf[16] = 58; put(secs % 60, 17, 2)
        buf[19] = 46; put(micros, 20, 6); buf[26] = 90
        return 27
    }
}
