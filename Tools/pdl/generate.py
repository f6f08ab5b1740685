#!/usr/bin/env python3
"""Generates Swift codecs from the packet descriptions in Tools/pdl/*.pdl.

One description per PDU gives its struct, its decoder (typed errors naming the field), its
encoder, its `fields` for dump/--trace, and the tables keyed by opcode (registry,
Supported_Commands bits). The output is committed; `make pdl-check` (and `--check` here)
fails when it is stale.

Format (one declaration per block, two-space indented members, `#` comments; the reader and
the field model are Tools/pdl/description.py's, shared by every generator here):

  command Name OGF OCF "Spec Name" [bit OCTET.BIT] [status] [handwritten]
    doc   one line of documentation (repeatable)
    param name[@label]: TYPE [= DEFAULT] [SHOW ...] [valid LO...HI]   command parameter, in wire
                                                        order (`valid`: the values allowed)
    ret   name[@label]: TYPE [= DEFAULT] [SHOW ...]     return parameter after Status
    returns SwiftType                                   shared return parameters type

  event Name CODE "Spec Name" [host] [handwritten]   an HCI event (Vol 4 Part E 7.7)
  subevent Name CODE "Spec Name" [host] [handwritten] an LE Meta subevent (7.7.65)
    param ...                                        event parameters, in wire order

  After a command's or event's params, one list of same-layout Elements may end the parameters:
    list name@countLabel: Element min N [items "LABEL"] [need "LABEL"]   a count octet, then that
                                                     many Elements of at least N octets each
                                                     (`items`: the list's field name; `need`: its
                                                     name when too short for the count)
    phys name: Element per MASK [items "LABEL"] [default EXPR]   one Element per bit set in the
                                                     PHY bitmask param MASK, lowest bit first
                                                     (Scanning_PHYs, Initiating_PHYs)
    item ...                                         an Element's fields, in wire order (as param)

`handwritten` declares a command whose struct is written by hand (irregular layout: elements
with optional or variable-length fields, return parameters normalised); it still
gets its table entries from here. `status`: the controller answers with Command Status (the
result comes in a later event). TYPE and SHOW: see description.py.
"""
import re
import sys
from pathlib import Path

from description import Field, decode_case, encode_case, read_blocks, switch_member
from gen_att import generate_att

ROOT = Path(__file__).resolve().parents[2]
TARGETS = {
    "hci.pdl": ROOT / "Sources/HCI/Generated/HCI.swift",
    "signaling.pdl": ROOT / "Sources/L2CAP/Generated/SignalingCommands.swift",
    "att.pdl": ROOT / "Sources/ATT/Generated/ATT.swift",
    "smp.pdl": ROOT / "Sources/SMP/Generated/SMP.swift",
    "hci-codes.pdl": ROOT / "Sources/HCI/Generated/Codes.swift",
    "hci-catalog.pdl": ROOT / "Sources/HCI/Generated/Catalog.swift",
    "l2cap-codes.pdl": ROOT / "Sources/L2CAP/Generated/Codes.swift",
    "gatt-codes.pdl": ROOT / "Sources/GATT/Generated/Codes.swift",
    "gap-codes.pdl": ROOT / "Sources/Host/Generated/Codes.swift",
}

class Command:
    def __init__(self, header, where):
        m = re.match(r'command (\w+) (0x[0-9A-Fa-f]+) (0x[0-9A-Fa-f]+) "([^"]+)"(.*)$', header)
        if not m:
            sys.exit(f"{where}: cannot read command header: {header}")
        self.name, ogf, ocf, self.spec, rest = m.groups()
        self.ogf, self.ocf = int(ogf, 16), int(ocf, 16)
        words = rest.split()
        self.bit = None
        if "bit" in words:
            o, b = words[words.index("bit") + 1].split(".")
            self.bit = (int(o), int(b))
        self.status = "status" in words
        self.handwritten = "handwritten" in words
        self.doc, self.params, self.rets, self.returns, self.list = [], [], [], None, None
        self.where = where

    @property
    def opcode(self):
        return self.ogf << 10 | self.ocf


class Event:
    def __init__(self, header, where):
        m = re.match(r'(event|subevent) (\w+) (0x[0-9A-Fa-f]+) "([^"]+)"(.*)$', header)
        if not m:
            sys.exit(f"{where}: cannot read event header: {header}")
        self.kind, self.name, code, self.spec, rest = m.groups()
        self.code = int(code, 16)
        self.handwritten = "handwritten" in rest.split()
        self.host = "host" in rest.split()  # handled by the Host (gen_events.py)
        self.doc, self.params, self.rets, self.returns, self.list = [], [], [], None, None
        self.where = where


class ListOf:
    """The parameters' last part: a list of same-layout elements (reports, entries, sets), after a
    count octet (`list name@countLabel: Element min N [items "L"] [need "L"]`), or one element per
    bit set in an earlier PHY bitmask parameter (`phys name: Element per MASK [items "L"] [default EXPR]`:
    Scanning_PHYs, Initiating_PHYs, Core Vol 4 Part E 7.8.64, 7.8.66)."""
    def __init__(self, key, line, where):
        if key == "phys":
            m = re.match(r'(\w+):\s*(\w+) per (\w+)(?: items "([^"]+)")?(?: default (.+))?$', line)
            if not m:
                sys.exit(f"{where}: cannot read phys: {line}")
            self.name, self.element, self.mask, items, self.default = m.groups()
            self.count = self.minimum = None
        else:
            m = re.match(r'(\w+)@(\w+):\s*(\w+) min (\d+)(?: items "([^"]+)")?(?: need "([^"]+)")?$', line)
            if not m:
                sys.exit(f"{where}: cannot read list: {line}")
            self.name, self.count, self.element, minimum, items, need = m.groups()
            self.minimum, self.mask, self.default = int(minimum), None, None
            # What a list too short for its count is named by in the error.
            self.need_label = need or items or self.name
        self.items_label = items or self.name
        self.items = []

    @property
    def swift(self):
        return f"[{self.element}]"

    def read(self):
        if self.mask:
            return f"try decodePHYBlocks(&r, phys: {self.mask}) {{ r throws(DecodeError) in try {self.element}(&r) }}"
        return (f'try decodeList(&r, count: "{self.count}", minimumSize: {self.minimum}, "{self.need_label}") '
                f"{{ r throws(DecodeError) in try {self.element}(&r) }}")

    def write(self):
        if self.mask:
            return f"for e in {self.name} {{ e.encode(into: &w) }}"
        return f"encodeList({self.name}, into: &w) {{ e, w in e.encode(into: &w) }}"

    def describe(self):
        if self.mask:
            return (f'Field("{self.items_label}", .list({self.name}.enumerated().map {{ i, e in '
                    f'.object([.text("phy", phyBlockNote({self.mask}, i))] + e.fields) }}))')
        return f'.int("{self.count}", {self.name}.count), Field("{self.items_label}", .list({self.name}.map {{ .object($0.fields) }}))'

    def element_struct(self):
        out = [f"    public struct {self.element}: Sendable, Equatable {{"]
        out += struct_body(self.items, "init(_ r: inout ByteReader) throws(DecodeError)",
                           "func encode(into w: inout ByteWriter)", 8)
        return out + ["    }", ""]


def parse(path):
    def read_header(line, where):
        if line.startswith("command "):
            return Command(line, where)
        if line.startswith("event ") or line.startswith("subevent "):
            return Event(line, where)
        return None

    def add_member(c, key, body, where):
        if key == "doc":
            c.doc.append(body)
        elif key == "param":
            c.params.append(Field(body, where))
        elif key == "ret" and isinstance(c, Command):
            c.rets.append(Field(body, where))
        elif key == "returns":
            c.returns = body.strip()
        elif key in ("list", "phys") and not c.list:
            c.list = ListOf(key, body.strip(), where)
        elif key == "item" and c.list:
            c.list.items.append(Field(body, where))
        else:
            sys.exit(f"{where}: unknown member {key}")

    return read_blocks(path, read_header, add_member, trailing_comments=True)


def struct_body(fields, decode_sig, encode_sig, indent, list_of=None):
    """Stored properties, memberwise init, decoder, encoder and `fields` of `fields` in wire order,
    then `list_of`'s list (ListOf) if any."""
    p = " " * indent
    parts = fields + ([list_of] if list_of else [])
    out = [f"{p}public var {f.name}: {f.swift}" for f in parts]
    args = ", ".join(f"{f.name}: {f.swift}" + (f" = {f.default}" if f.default else "") for f in parts)
    if not fields and list_of:
        out.append(f"{p}public init({args}) {{ self.{list_of.name} = {list_of.name} }}")
    else:
        out.append(f"{p}public init({args}) {{")
        out += [f"{p}    self.{f.name} = {f.init_value() if f in fields else f.name}" for f in parts]
        out.append(f"{p}}}")
    out.append(f"{p}{decode_sig} {{")
    out += [f"{p}    {f.name} = {f.read()}" for f in parts]
    out.append(f"{p}}}")
    out.append(f"{p}{encode_sig} {{")
    out += [f"{p}    {f.write()}" for f in parts]
    out.append(f"{p}}}")
    out.append(f"{p}public var fields: [Field] {{")
    out.append(f"{p}    [" + (",\n" + p + "     ").join(f.describe() for f in parts) + "]")
    out.append(f"{p}}}")
    return out


def parameter_members(b):
    """A command's or event's parameters: its list's element struct if any, then the members."""
    out = [""] + b.list.element_struct() if b.list else []
    return out + struct_body(b.params, "public init(parameters r: inout ByteReader) throws(DecodeError)",
                             "public func encodeParameters(into w: inout ByteWriter)", 4, b.list)


def emit_command(c):
    out = [f"/// {d}" for d in c.doc] or [f"/// {c.spec} (0x{c.opcode:04X})."]
    proto = "HCICommand" if c.params or c.list else "HCIParameterlessCommand"
    out.append(f"public struct {c.name}: {proto}, Equatable {{")
    out.append(f"    public static let opcode = HCIOpcode(ogf: 0x{c.ogf:02X}, ocf: 0x{c.ocf:04X})")
    out.append(f'    public static let name = "{c.spec}"')
    if c.status:
        out.append("    public static var completesWithStatus: Bool { true }")
    if c.returns:
        out.append(f"    public typealias ReturnParameters = {c.returns}")
    if c.params or c.list:
        out += parameter_members(c)
    else:
        out.append("    public init() {}")
    if c.rets:
        out.append("")
        out.append("    public struct ReturnParameters: HCIReturnParameters, Equatable {")
        out += struct_body(c.rets, "public init(returnParameters r: inout ByteReader) throws(DecodeError)",
                           "public func encode(into w: inout ByteWriter)", 8)
        out.append("    }")
    out.append("}")
    return out


def emit_event(e):
    proto, key = ("HCIEventParameters", "eventCode") if e.kind == "event" else ("LEMetaEventParameters", "subeventCode")
    out = [f"/// {d}" for d in e.doc] or [f"/// {e.spec} ({'subevent ' if e.kind == 'subevent' else ''}0x{e.code:02X})."]
    out.append(f"public struct {e.name}: {proto}, Equatable {{")
    out.append(f"    public static let {key}: UInt8 = 0x{e.code:02X}")
    out.append(f'    public static let name = "{e.spec}"')
    if e.params or e.list:
        out += parameter_members(e)
    else:
        out.append("    public init() {}")
        out.append("    public init(parameters r: inout ByteReader) throws(DecodeError) {}")
        out.append("    public func encodeParameters(into w: inout ByteWriter) {}")
        out.append("    public var fields: [Field] { [] }")
    out.append("}")
    return out


def generate(src):
    everything = parse(src)
    commands = [c for c in everything if isinstance(c, Command)]
    events = [e for e in everything if isinstance(e, Event)]
    for kind in ("event", "subevent"):
        seen = {}
        for e in events:
            if e.kind == kind:
                if e.code in seen:
                    sys.exit(f"{e.where}: {kind} code 0x{e.code:02X} already declared by {seen[e.code]}")
                seen[e.code] = e.name
    seen = {}
    for c in commands:
        if c.opcode in seen:
            sys.exit(f"{c.where}: opcode 0x{c.opcode:04X} already declared by {seen[c.opcode]}")
        seen[c.opcode] = c.name
    out = [f"// Generated by Tools/pdl/generate.py from Tools/pdl/{src.name}. Do not edit: change the",
           "// description and run `python3 Tools/pdl/generate.py` (make pdl-check fails when stale).", ""]
    for c in commands:
        if not c.handwritten:
            out += emit_command(c)
        else:
            # The struct is written by hand; its identity still comes from the description.
            out.append(f"extension {c.name} {{")
            out.append(f"    public static let opcode = HCIOpcode(ogf: 0x{c.ogf:02X}, ocf: 0x{c.ocf:04X})")
            out.append(f'    public static let name = "{c.spec}"')
            if c.status:
                out.append("    public static var completesWithStatus: Bool { true }")
            out.append("}")
        out.append("")
    for e in events:
        if not e.handwritten:
            out += emit_event(e)
        else:
            key = "eventCode" if e.kind == "event" else "subeventCode"
            out.append(f"extension {e.name} {{")
            out.append(f"    public static let {key}: UInt8 = 0x{e.code:02X}")
            out.append(f'    public static let name = "{e.spec}"')
            out.append("}")
        out.append("")
    out.append("/// Every event and LE subevent the stack decodes; the decoder's tables by code are built from them.")
    out.append("let allEventTypes: [any HCIEventParameters.Type] = [")
    out += [f"    {e.name}.self," for e in events if e.kind == "event"]
    out.append("]")
    out.append("")
    out.append("let allLESubeventTypes: [any LEMetaEventParameters.Type] = [")
    out += [f"    {e.name}.self," for e in events if e.kind == "subevent"]
    out.append("]")
    out.append("")
    from gen_events import emit_event_handler
    out += emit_event_handler(events)
    out.append("/// Every command the stack knows, in description order: the registry by opcode (dump,")
    out.append("/// --trace, the virtual controller) is built from it.")
    out.append("let allCommandTypes: [any HCICommand.Type] = [")
    for c in commands:
        out.append(f"    {c.name}.self,")
    out.append("]")
    out.append("")
    out.append("/// A controller's command handling: one method per described command, so a description")
    out.append("/// added without its behaviour does not compile (the virtual controller conforms).")
    out.append("package protocol HCICommandHandler {")
    out += [f"    func handle(_ command: {c.name})" for c in commands]
    out.append("}")
    out.append("")
    out.append("extension HCICommandHandler {")
    out.append("    /// Decodes `packet` by its opcode and calls its handler; false for an opcode no description")
    out.append("    /// declares. Throws (naming the field) when the parameters don't fit the description.")
    out.append("    package func dispatch(_ packet: HCICommandPacket) throws(DecodeError) -> Bool {")
    out.append("        switch packet.opcode.rawValue {")
    out += [f"        case 0x{c.opcode:04X}: handle(try {c.name}.decode(packet.parameters))" for c in commands]
    out.append("        default: return false")
    out.append("        }")
    out.append("        return true")
    out.append("    }")
    out.append("}")
    out.append("")
    out.append("/// Octet and bit of each command in the Supported_Commands bitmask (Core Vol 4 Part E 6.27), by opcode.")
    out.append("let supportedCommandBits: [UInt16: (octet: Int, bit: Int)] = [")
    for c in commands:
        if c.bit:
            out.append(f"    0x{c.opcode:04X}: ({c.bit[0]}, {c.bit[1]}),  // {c.spec}")
    out.append("]")
    return "\n".join(out) + "\n"


class Case:
    def __init__(self, header, where):
        m = re.match(r'case (\w+) (0x[0-9A-Fa-f]+) "([^"]+)"(.*)$', header)
        if not m:
            sys.exit(f"{where}: cannot read case header: {header}")
        self.name, code, self.spec, rest = m.groups()
        self.code = int(code, 16)
        self.request = "request" in rest.split()
        # Table 4.2: `le` LE-U only, `aclu` ACL-U only, neither: both.
        self.le = "le" in rest.split()
        self.aclu = "aclu" in rest.split()
        h = re.search(r'handwritten\((\w+)\)', rest)
        self.handwritten = h.group(1) if h else None
        self.params, self.doc, self.where = [], [], where


def parse_cases(path):
    def add_member(case, key, body, where):
        if key != "param":
            sys.exit(f"{where}: unknown member {key}")
        case.params.append(Field(body, where))

    return read_blocks(path, lambda line, where: Case(line, where) if line.startswith("case ") else None, add_member)


def generate_signaling(src):
    all_cases = parse_cases(src)
    codes = [c.code for c in all_cases]
    if len(set(codes)) != len(codes):
        sys.exit(f"{src.name}: a code is declared twice")
    # Body: the LE-U commands (the stack's); ACLUBody: those only ACL-U carries.
    cases = [c for c in all_cases if not c.aclu]
    aclu = [c for c in all_cases if c.aclu]
    cap = lambda n: n[0].upper() + n[1:]
    hexes = lambda cs: "[" + ", ".join(f"0x{c.code:02X}" for c in cs) + "]"
    out = [f"// Generated by Tools/pdl/generate.py from Tools/pdl/{src.name}. Do not edit: change the",
           "// description and run `python3 Tools/pdl/generate.py` (make pdl-check fails when stale).", "",
           "import HCI", "", "extension SignalingCode {"]
    out += [f"    public static let {c.name} = SignalingCode(0x{c.code:02X})" for c in all_cases]
    out += ["", "    /// The specification's command name; nil for a code no description declares."]
    out += switch_member("public var name: String?", "rawValue", [(f"0x{c.code:02X}", f'return "{c.spec}"') for c in all_cases],
                         "default: return nil")
    out += ["",
            "    /// Requests are answered by a response (or a Command Reject) with the same identifier.",
            "    public var isRequest: Bool { " + hexes([c for c in all_cases if c.request]) + ".contains(rawValue) }",
            "",
            "    /// Whether LE-U carries the command (Core v5.4 Vol 3 Part A Table 4.2).",
            "    public var isLEU: Bool { " + hexes([c for c in all_cases if not c.aclu]) + ".contains(rawValue) }",
            "",
            "    /// Whether ACL-U (BR/EDR) carries the command (Core v5.4 Vol 3 Part A Table 4.2).",
            "    public var isACLU: Bool { " + hexes([c for c in all_cases if not c.le]) + ".contains(rawValue) }",
            "}", "", "extension SignalingCommand {",
            "    /// The LE-U commands; a code LE-U does not carry is `unknown`.",
            "    public enum Body: Sendable, Hashable {"]
    for c in cases:
        if c.handwritten:
            out.append(f"        case {c.name}({c.handwritten})")
        else:
            out.append(f"        case {c.name}(" + ", ".join(f.case_label for f in c.params) + ")")
    out += ["        case unknown(code: SignalingCode, data: [UInt8])", "    }", ""]
    out += switch_member("public var code: SignalingCode", "body", [(f".{c.name}", f"return .{c.name}") for c in cases],
                         "case .unknown(let code, _): return code")
    out += ["",
            "    /// The data after the header, by code; an unknown code keeps its octets.",
            "    static func decodeBody(_ code: SignalingCode, _ r: inout ByteReader) throws(DecodeError) -> Body {",
            "        switch code.rawValue {"]
    for c in cases:
        if c.handwritten:
            out.append(f"        case 0x{c.code:02X}: return .{c.name}(try decode{cap(c.name)}(&r))")
            continue
        out += decode_case(f"0x{c.code:02X}", c.name, c.params, "return")
    out += ["        default: return .unknown(code: code, data: r.rest())", "        }", "    }", "",
            "    func encodeBody(into w: inout ByteWriter) {", "        switch body {"]
    for c in cases:
        if c.handwritten:
            out.append(f"        case .{c.name}(let v): encode{cap(c.name)}(v, into: &w)")
            continue
        out += encode_case(c.name, c.params)
    out += ["        case .unknown(_, let data): w.append(data)", "        }", "    }", "",
            "    /// The parameters as `dump` and `--trace` show them.", "    var bodyFields: [Field] {", "        switch body {"]
    for c in cases:
        if c.handwritten:
            out.append(f"        case .{c.name}(let v): return {c.name}Fields(v)")
            continue
        out.append(f"        case let .{c.name}(" + ", ".join(f.name for f in c.params) + "):")
        out.append("            return [" + ",\n                    ".join(f.describe() for f in c.params) + "]")
    out += ['        case .unknown(_, let data): return [.bytes("data", data)]', "        }", "    }", "}", ""]

    # ACL-U only commands: a hand-written type `T` provides `static func decode(_:)`,
    # `encode(into:)` and `fields`.
    out += ["extension SignalingCommand {",
            "    /// The commands only ACL-U (BR/EDR) carries (Core v5.4 Vol 3 Part A Table 4.2).",
            "    public enum ACLUBody: Sendable, Hashable {"]
    for c in aclu:
        if c.handwritten:
            out.append(f"        case {c.name}({c.handwritten})")
        else:
            out.append(f"        case {c.name}(" + ", ".join(f.case_label for f in c.params) + ")")
    out += ["    }", "",
            "    /// The data after the header of an ACL-U-only command; nil for another code.",
            "    static func decodeACLUBody(_ code: SignalingCode, _ r: inout ByteReader) throws(DecodeError) -> ACLUBody? {",
            "        switch code.rawValue {"]
    for c in aclu:
        if c.handwritten:
            out.append(f"        case 0x{c.code:02X}: return .{c.name}(try {c.handwritten}.decode(&r))")
            continue
        out += decode_case(f"0x{c.code:02X}", c.name, c.params, "return")
    out += ["        default: return nil", "        }", "    }", "}", "",
            "extension SignalingCommand.ACLUBody {"]
    out += switch_member("public var code: SignalingCode", "self", [(f".{c.name}", f"return .{c.name}") for c in aclu][:-1],
                         f"case .{aclu[-1].name}: return .{aclu[-1].name}")
    out += ["", "    func encode(into w: inout ByteWriter) {", "        switch self {"]
    for c in aclu:
        if c.handwritten:
            out.append(f"        case .{c.name}(let v): v.encode(into: &w)")
            continue
        out += encode_case(c.name, c.params)
    out += ["        }", "    }", "",
            "    /// The parameters as `dump` and `--trace` show them.", "    var fields: [Field] {", "        switch self {"]
    for c in aclu:
        if c.handwritten:
            out.append(f"        case .{c.name}(let v): return v.fields")
            continue
        out.append(f"        case let .{c.name}(" + ", ".join(f.name for f in c.params) + "):")
        out.append("            return [" + ",\n                    ".join(f.describe() for f in c.params) + "]")
    out += ["        }", "    }", "}"]
    return "\n".join(out) + "\n"


def main():
    check = "--check" in sys.argv
    stale = []
    for name, target in TARGETS.items():
        src = ROOT / "Tools/pdl" / name
        if name == "smp.pdl":
            from gen_smp import generate_smp
            text = generate_smp(src)
        elif name == "hci-catalog.pdl":
            from gen_catalog import generate_catalog
            text = generate_catalog(src)
        elif name.endswith("-codes.pdl"):
            from gen_codes import generate_codes
            text = generate_codes(src, imports=() if name == "hci-codes.pdl" else ("HCI",))
        else:
            text = {"signaling.pdl": generate_signaling, "att.pdl": generate_att}.get(name, generate)(src)
        if check:
            if not target.exists() or target.read_text() != text:
                stale.append(str(target.relative_to(ROOT)))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            if not target.exists() or target.read_text() != text:
                target.write_text(text)
                print(f"wrote {target.relative_to(ROOT)}")
    if stale:
        print("pdl-check: generated code is stale (run python3 Tools/pdl/generate.py): " + ", ".join(stale))
        sys.exit(1)
    if check:
        print("pdl-check: generated code matches the descriptions")


if __name__ == "__main__":
    main()
