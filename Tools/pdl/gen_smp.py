"""Generates Sources/SMP/Generated/SMP.swift from Tools/pdl/smp.pdl (format in its header).

Imported by generate.py. Fields are description.py's, shared by every description: an SMP
parameter is read, written and shown exactly like an HCI one.
"""
import re
import sys

import gen_codes
from description import Field, decode_case, encode_case, read_blocks, switch_member

HEADER = gen_codes.HEADER

class Block:
    def __init__(self, kind, name, code, spec, rest, where):
        self.kind, self.name, self.code, self.spec, self.rest, self.where = kind, name, code, spec, rest, where
        self.members, self.params, self.doc = [], [], []


def parse(path):
    def read_header(line, where):
        table = gen_codes.read_header(line, where)
        if table:
            return table
        m = re.match(r'struct (\w+) "([^"]+)"$', line)
        if m:
            return Block("struct", m.group(1), None, m.group(2), "", where)
        m = re.match(r'pdu (\w+) (0x[0-9A-Fa-f]{2}) "([^"]+)"\s*(\w*)$', line)
        if m:
            return Block("pdu", m.group(1), int(m.group(2), 16), m.group(3), m.group(4), where)
        return None

    def add_member(b, key, body, where):
        if key == "doc":
            b.doc.append(body)
        elif key == "param" and b.kind in ("struct", "pdu"):
            b.params.append(Field(body, where))
        elif b.kind in ("enum", "flags"):
            gen_codes.read_member(b, key, body, where)
        else:
            sys.exit(f"{where}: unknown member {key}")

    return read_blocks(path, read_header, add_member)


def size(fields):
    """Octets of fixed-size fields (every SMP PDU has a fixed length, Vol 3 Part H 3.3)."""
    if any(f.octets is None for f in fields):
        sys.exit(f"{next(f for f in fields if f.octets is None).where}: has no fixed size")
    return sum(f.octets for f in fields)


def describe(fields):
    """The `[Field]` expression for `fields`; SHOW `fields` splices in the value's own fields."""
    parts, run = [], []
    for f in fields:
        if f.show == ["fields"]:
            if run:
                parts.append("[" + ", ".join(run) + "]")
                run = []
            parts.append(f"{f.name}.fields")
        else:
            run.append(f.describe())
    if run or not parts:
        parts.append("[" + ", ".join(run) + "]")
    return " + ".join(parts)


def emit_struct(b):
    fs = b.params
    out = [f"/// {b.spec}", f"public struct {b.name}: Hashable, Sendable {{"]
    out += [f"    public var {f.name}: {f.swift}" for f in fs]
    args = ", ".join(f"{f.name}: {f.swift}" + (f" = {f.default}" if f.default else "") for f in fs)
    out.append(f"    public init({args}) {{")
    out += [f"        self.{f.name} = {f.name}" for f in fs]
    out += ["    }", "", f"    /// The {size(fs)} octets after the PDU's Code.",
            f"    public static let length = {size(fs)}", "",
            "    public init(parameters r: inout ByteReader) throws(DecodeError) {"]
    out += [f"        {f.name} = {f.read()}" for f in fs]
    out += ["    }", "", "    public func encode(into w: inout ByteWriter) {"]
    out += [f"        {f.write()}" for f in fs]
    out += ["    }", "", "    public var fields: [Field] {", f"        {describe(fs)}", "    }", "}"]
    return out


def emit_pdus(pdus, structs):
    def plen(p):
        return structs[p.rest].length if p.rest else size(p.params)
    out = ["/// One SMP PDU: Code (1 octet) + Data (Vol 3 Part H 3.3).",
           "public enum SMPPDU: Sendable, Hashable, FieldDescribable {"]
    for p in pdus:
        out += [f"    /// {d}" for d in p.doc]
        if p.rest:
            out.append(f"    case {p.name}({p.rest})")
        else:
            out.append(f"    case {p.name}(" + ", ".join(f.case_label for f in p.params) + ")")
    out += ["    /// A code this stack doesn't know (a reserved code: the receiver ignores it, Core Vol 3 Part H 3.3).",
            "    case unknown(code: UInt8, data: [UInt8])", "",
            "    public enum Code {"]
    out += [f"        public static let {p.name}: UInt8 = 0x{p.code:02X}" for p in pdus]
    out += ["    }", "", "    /// The specification's name of a code; nil for a reserved one."]
    out += switch_member("public static func name(ofCode code: UInt8) -> String?", "code",
                         [(f"0x{p.code:02X}", f'"{p.spec}"') for p in pdus], "default: nil")
    out += ["", '    public var name: String { Self.name(ofCode: code) ?? "Unknown SMP Command (\\(hexCode(code)))" }', "",
            "    /// The length of a PDU with this code, Code octet included; nil for a reserved code."]
    out += switch_member("public static func length(ofCode code: UInt8) -> Int?", "code",
                         [(f"0x{p.code:02X}", f"{1 + plen(p)}") for p in pdus], "default: nil")
    out += [""] + switch_member("public var code: UInt8", "self", [(f".{p.name}", f"Code.{p.name}") for p in pdus],
                                "case .unknown(let code, _): code")
    out += ["",
            "    /// Decodes one SMP PDU (the whole L2CAP payload). Every known PDU has a fixed length:",
            "    /// too short throws `.truncated` naming the field, too long throws `.trailingBytes`.",
            "    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> SMPPDU {",
            "        var r = ByteReader(bytes)",
            '        let code = try r.u8("code")',
            "        let pdu: SMPPDU",
            "        switch code {"]
    for p in pdus:
        if p.rest:
            out.append(f"        case Code.{p.name}: pdu = .{p.name}(try {p.rest}(parameters: &r))")
            continue
        out += decode_case(f"Code.{p.name}", p.name, p.params, "pdu =")
    out += ["        default:", "            return .unknown(code: code, data: r.rest())", "        }",
            '        try r.expectEnd(Self.name(ofCode: code) ?? "SMP PDU")', "        return pdu", "    }", "",
            "    /// The PDU's octets. Fixed-size values shorter than the spec's size are zero-padded and",
            "    /// longer ones cut, so what is sent is always well-formed.",
            "    public var bytes: [UInt8] {",
            "        var w = ByteWriter(capacity: Self.length(ofCode: code) ?? 1)",
            "        w.u8(code)",
            "        switch self {"]
    for p in pdus:
        if p.rest:
            out.append(f"        case .{p.name}(let v): v.encode(into: &w)")
            continue
        out += encode_case(p.name, p.params)
    out += ["        case .unknown(_, let data): w.append(data)", "        }", "        return w.bytes", "    }", "",
            "    /// Code and name, then the parameters as `dump` and `--trace` show them.",
            "    public var fields: [Field] {",
            '        [.code("code", code), .text("name", name)] + parameterFields', "    }", "",
            "    var parameterFields: [Field] {", "        switch self {"]
    for p in pdus:
        if p.rest:
            out.append(f"        case .{p.name}(let v): v.fields")
            continue
        out.append(f"        case let .{p.name}(" + ", ".join(f.name for f in p.params) + "):")
        out.append(f"            {describe(p.params)}")
    out += ['        case .unknown(_, let data): [.bytes("data", data)]', "        }", "    }", "}"]
    return out


def generate_smp(src):
    blocks = parse(src)
    pdus = [b for b in blocks if b.kind == "pdu"]
    if len({p.code for p in pdus}) != len(pdus):
        sys.exit(f"{src.name}: a PDU code is declared twice")
    structs = {}
    out = [HEADER.format(name=src.name), "import HCI", ""]
    for b in blocks:
        if b.kind in ("enum", "flags"):
            out += gen_codes.emit(b) + [""]
        elif b.kind == "struct":
            b.length = size(b.params)
            structs[b.name] = b
            out += emit_struct(b) + [""]
    for p in pdus:
        if p.rest and p.rest not in structs:
            sys.exit(f"{p.where}: no struct {p.rest} declared before it")
    out += emit_pdus(pdus, structs)
    return "\n".join(out) + "\n"
