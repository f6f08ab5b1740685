/// A decoded PDU described as named fields: the one representation that `dump`, `--trace`
/// (human tree) and `dump --json` print. Every layer's codec describes its PDUs with it, so
/// there is one parser per PDU and the decoder never re-parses bytes.
public struct Field: Sendable, Equatable {
    /// The specification's parameter name in lowerCamelCase ("connectionHandle").
    public var name: String
    public var value: FieldValue
    /// A human gloss shown after the value in the tree ("30.00 ms", "Success"); not in JSON.
    public var note: String?
    /// The octets of the packet (H4 indicator at 0) the field was read from; nil unless the
    /// decoder was asked for ranges (`dump --html`), or when the parser read it from a copy
    /// or from other packets (a reassembled frame).
    public var range: Range<Int>?

    @inlinable
    public init(_ name: String, _ value: FieldValue, note: String? = nil, range: Range<Int>? = nil) {
        self.name = name
        self.value = value
        self.note = note
        self.range = range
    }
}

/// Not `indirect`: `list` and `object` hold arrays (already references), so no case needs a
/// box, and a boxed allocation per value was a large part of `dump`'s time (issue 14).
public enum FieldValue: Sendable, Equatable {
    /// A count, length, handle or other number (JSON number).
    case int(Int)
    /// An opcode or code, written "0x.." (JSON string).
    case code(String)
    /// Binary data, lowercase hex (JSON string).
    case bytes([UInt8])
    case text(String)
    case bool(Bool)
    case list([FieldValue])
    case object([Field])
}

/// Something that can present itself as fields (every typed PDU of every layer).
public protocol FieldDescribable {
    var fields: [Field] { get }
}

// Inlinable: specialized where they are called (a generic call per field was measurable in
// `dump`, issue 14).
extension Field {
    @inlinable
    public static func int<T: BinaryInteger>(_ name: String, _ v: T, note: String? = nil) -> Field {
        Field(name, .int(Int(v)), note: note)
    }
    @inlinable
    public static func code<T: FixedWidthInteger>(_ name: String, _ v: T, note: String? = nil) -> Field {
        Field(name, .code(hexCode(v)), note: note)
    }
    @inlinable
    public static func bytes(_ name: String, _ v: [UInt8], note: String? = nil) -> Field {
        Field(name, .bytes(v), note: note)
    }
    @inlinable
    public static func text(_ name: String, _ v: String, note: String? = nil) -> Field {
        Field(name, .text(v), note: note)
    }
    @inlinable
    public static func bool(_ name: String, _ v: Bool) -> Field { Field(name, .bool(v)) }
    public static func address(_ name: String, _ a: BDAddress, type: AddressType? = nil) -> Field {
        Field(name, .text(a.description), note: type.map { "\($0)" })
    }
    /// An interval in units of `unitMicroseconds` (1250 for connection intervals, 625 for
    /// advertising). `whenZero` glosses a 0 the specification gives a meaning ("no limit").
    public static func interval(_ name: String, _ v: some BinaryInteger, unitMicroseconds: Int, whenZero: String? = nil) -> Field {
        if v == 0, let whenZero { return Field(name, .int(0), note: whenZero) }
        let ms = Double(Int(v) * unitMicroseconds) / 1000
        return Field(name, .int(Int(v)), note: formatMilliseconds(ms))
    }
}

public func formatMilliseconds(_ ms: Double) -> String {
    let hundredths = Int(ms * 100 + 0.5)
    let frac = hundredths % 100
    return "\(hundredths / 100).\(frac < 10 ? "0" : "")\(frac) ms"
}

// MARK: - Rendering

extension FieldValue {
    /// Appends this value as JSON.
    public func appendJSON(to out: inout String) {
        switch self {
        case .int(let v): out += String(v)
        case .code(let s), .text(let s): appendJSONString(s, to: &out)
        case .bytes(let b): out += "\""; out += b.hex; out += "\""
        case .bool(let b): out += b ? "true" : "false"
        case .list(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.appendJSON(to: &out)
            }
            out += "]"
        case .object(let fields):
            appendJSONObject(fields, to: &out)
        }
    }

    /// Short text for the human tree.
    public var display: String {
        switch self {
        case .int(let v): return String(v)
        case .code(let s): return s
        case .text(let s): return s
        case .bytes(let b): return b.isEmpty ? "(empty)" : b.hex
        case .bool(let b): return b ? "yes" : "no"
        case .list(let items): return "[" + items.map(\.display).joined(separator: ", ") + "]"
        case .object(let fields): return "{" + fields.map { "\($0.name): \($0.value.display)" }.joined(separator: ", ") + "}"
        }
    }
}

public func appendJSONObject(_ fields: [Field], to out: inout String) {
    out += "{"
    for (i, f) in fields.enumerated() {
        if i > 0 { out += "," }
        appendJSONString(f.name, to: &out)
        out += ":"
        f.value.appendJSON(to: &out)
    }
    out += "}"
}

public func appendJSONString(_ s: String, to out: inout String) {
    out += "\""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 {
                out += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    out += "\""
}

/// JSON text of one object: `{"a":1,...}`.
public func jsonObject(_ fields: [Field]) -> String {
    var s = ""
    appendJSONObject(fields, to: &s)
    return s
}
