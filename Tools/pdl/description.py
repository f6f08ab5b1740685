"""The description model every generator under Tools/pdl shares: how a description file is read
(blocks of a header line and two-space indented members) and what a field is (its Swift type,
how it is read, written, sized and shown). Each gen_*.py is only its emitter.

A field line: `name[@label]: TYPE [= DEFAULT] [SHOW ...] [valid LO...HI] [note {EXPR}]`; `label` is
the field's name in errors and in `fields` (the specification's name in lowerCamelCase), `name` the
Swift one. `valid LO...HI`: the values the specification allows (an integer, flag or addressType
field); the decoder throws, naming the field, on any other (reserved or out of range: a controller
answers Invalid HCI Command Parameters).

TYPE: u8 i8 u16 u24 u32 u64 handle address addressType status flag key16 bytesN cidsN
uuid16 uuid handles value RECORD[1+] dataN paddedN, or Swift(u8|u16|u64) for an
OptionSet/RawRepresentable over that integer:
  bytesN      N octets (written zero-padded or cut to N; ATT's enum payloads are appended as given)
  cidsN       the rest: N or more 16-bit CIDs (L2CAP signaling)
  uuid16      a 16-bit UUID, shown as a UUID; uuid: 2 or 16 octets, the rest of the PDU (ATT)
  handles     the rest: two 16-bit handles or more (ATT); RECORD[1+]: one record or more (ATT)
  value       octets: the rest of the PDU but for the fixed-size fields after it (ATT)
  dataN       a length octet, then that many octets (at most N)
  paddedN     a length octet, then always N octets, the data zero-padded (legacy advertising)
SHOW: int | code | interval UNIT_US [zero "TEXT"] | dBm | phy | phyMask | us | bytes | utf8z |
address [type EXPR] | addressType | status | handle | enabled; optional `note {EXPR}`.
"""
import re
import sys

INTS = {"u8": "UInt8", "i8": "Int8", "u16": "UInt16", "u24": "UInt32", "u32": "UInt32", "u64": "UInt64"}
OCTETS = {"u8": 1, "i8": 1, "u16": 2, "u24": 3, "u32": 4, "u64": 8}

# Fixed types: Swift type, read ({l}: label), write ({n}: the value), octets, default presentation.
TYPES = {t: (s, f'try r.{t}("{{l}}")', f'w.{t}({{n}})', OCTETS[t], "int") for t, s in INTS.items()}
TYPES.update({
    "handle": ("UInt16", 'try r.handle("{l}")', 'w.u16({n})', 2, "handle"),
    "address": ("BDAddress", 'try r.address("{l}")', 'w.address({n})', 6, "address"),
    "addressType": ("AddressType", 'try r.addressType("{l}")', 'w.u8({n}.rawValue)', 1, "addressType"),
    "status": ("HCIStatus", 'HCIStatus(try r.u8("{l}"))', 'w.u8({n}.rawValue)', 1, "status"),
    "flag": ("Bool", 'try r.u8("{l}") != 0', 'w.u8({n} ? 1 : 0)', 1, "enabled"),
    "key16": ("[UInt8]", 'try r.block16("{l}")', 'w.padded({n}, to: 16)', 16, "bytes"),
    "uuid16": ("UInt16", 'try r.u16("{l}")', 'w.u16({n})', 2, "uuid16"),
    "uuid": ("BluetoothUUID", 'try readUUID(&r, length: r.remaining)', 'w.append({n}.littleEndianFor16Or128)', None, "uuid"),
    "handles": ("[UInt16]", 'try readHandles(&r, pdu: "{pdu}")', 'for h in {n} {{ w.u16(h) }}', None, "ints"),
    "value": ("[UInt8]", None, 'w.append({n})', None, "bytes"),
})
# Sized by the number in the type's name: read, write, presentation.
SIZED = {
    "bytes": ('try r.bytes({N}, "{l}")', 'w.padded({n}, to: {N})', "bytes"),
    "cids": ('try SignalingCommand.readCIDs(&r, min: {N}, "{l}")', 'for c in {n} {{ w.u16(c) }}', "ints"),
    "data": ('try r.lengthPrefixed(max: {N}, "{l}Length", "{l}")', 'w.lengthPrefixed({n}, max: {N})', "counted"),
    "padded": ('try r.paddedData({N}, "{l}Length", "{l}")', 'w.paddedData({n}, to: {N})', "counted"),
}


class Field:
    """One parameter: how it is read, written, sized and shown. `pads_bytes`: bytesN values
    are written zero-padded to N (a struct's field); ATT's enum payloads are appended as given."""

    pads_bytes = True
    # Any other Swift type is taken as is (a hand-written PDU's payload: no codec here).
    opaque = False

    def __init__(self, line, where):
        m = re.match(r'(\w+)(?:@(\w+))?:\s*(\S+)\s*(?:=\s*(\[[^\]]*\]|\S+))?\s*(.*)$', line)
        if not m:
            sys.exit(f"{where}: cannot read field: {line}")
        self.name, label, self.type, self.default, show = m.groups()
        self.label = label or self.name
        # `_`: an enum case's unlabelled payload, bound as `list`.
        self.binding = "list" if self.name == "_" else self.name
        note = re.search(r'note \{(.*)\}\s*$', show)
        self.note = note.group(1) if note else None
        if note:
            show = show[:note.start()].strip()
        valid = re.search(r'\bvalid (\w+)\.\.\.(\w+)', show)
        self.valid = valid.groups() if valid else None
        if valid:
            show = (show[:valid.start()] + show[valid.end():]).strip()
        self.show = show.split() if show else []
        self.where = where
        self.raw = self.record = None
        self.size_n = None
        t = self.type
        raw = re.match(r'(\w+)\((u8|u16|u64)\)$', t)
        sized = re.match(r'(bytes|cids|data|padded)(\d+)$', t)
        record = re.match(r'(\w+)\[1\+\]$', t)
        if raw:
            self.swift, self.raw = raw.group(1), raw.group(2)
            self.octets, self.presentation = OCTETS[self.raw], "int"
        elif t in TYPES:
            self.swift, _, _, self.octets, self.presentation = TYPES[t]
        elif sized:
            kind, self.size_n = sized.group(1), int(sized.group(2))
            self.swift = "[UInt16]" if kind == "cids" else "[UInt8]"
            self.octets = {"bytes": self.size_n, "padded": 1 + self.size_n}.get(kind)
            self.presentation = SIZED[kind][2]
        elif record:
            self.record = record.group(1)
            self.swift, self.octets, self.presentation = f"[{self.record}]", None, "records"
        elif self.opaque and re.match(r'\[?\w+\]?$', t):
            self.swift, self.octets, self.presentation = t, None, None
        else:
            sys.exit(f"{where}: unknown type {t}")

    @property
    def kind(self):
        return self.type.rstrip("0123456789") if self.size_n is not None else self.type

    @property
    def argument(self):
        """The value passed to an enum case: `name: name`, or the bare binding of `_`."""
        return self.binding if self.name == "_" else f"{self.name}: {self.name}"

    @property
    def case_label(self):
        """The field in an enum case's declaration: `name: Type`, or the bare type of `_`."""
        return self.swift if self.name == "_" else f"{self.name}: {self.swift}"

    def read(self, pdu=None, trailing=0):
        """The expression that reads the field; `pdu` names a list's PDU in errors, `trailing` is
        the octets of fixed-size fields after a `value`."""
        l = self.label
        if self.valid:
            base = {"flag": "u8", "addressType": "u8"}.get(self.type, self.type)
            if base not in INTS:
                sys.exit(f"{self.where}: `valid` needs an integer, flag or addressType field")
            v = f'try r.valid(try r.{base}("{l}"), {self.valid[0]}...{self.valid[1]}, "{l}")'
            return {"flag": f"{v} != 0", "addressType": f"try AddressType.decode({v})"}.get(self.type, v)
        if self.raw:
            return f'{self.swift}(rawValue: try r.{self.raw}("{l}"))'
        if self.record:
            return f'try readRecords(&r, pdu: "{pdu}") as [{self.record}]'
        if self.type == "value":
            # A value runs to the end of the PDU, but for the fixed fields after it.
            return 'r.rest()' if trailing == 0 else f'try r.bytes(Swift.max(0, r.remaining - {trailing}), "{l}")'
        template = SIZED[self.kind][0] if self.size_n is not None else TYPES[self.type][1]
        return template.format(l=l, N=self.size_n, pdu=pdu)

    def write(self):
        n = self.binding
        if self.raw:
            return f'w.{self.raw}({n}.rawValue)'
        if self.record:
            return f'for e in {n} {{ e.encode(into: &w) }}'
        if self.kind == "bytes" and not self.pads_bytes:
            return f'w.append({n})'
        template = SIZED[self.kind][1] if self.size_n is not None else TYPES[self.type][2]
        return template.format(n=n, N=self.size_n)

    def size(self):
        """The field's encoded size: its octets, or the expression that counts them."""
        n = self.binding
        if self.octets and (self.kind != "bytes" or self.pads_bytes):
            return str(self.octets)
        if self.type == "uuid":
            return f'({n}.is16Bit ? 2 : 16)'
        if self.type == "handles":
            return f'2 * {n}.count'
        if self.record:
            return f'{self.record}.encodedSize * {n}.count'
        if self.kind == "data":
            return f'1 + {n}.count'
        return f'{n}.count'

    def init_value(self):
        """What the memberwise init stores: a value the wire cannot carry is cut to what it can."""
        n = self.name
        if self.type == "u24":
            return f"{n} & 0xFFFFFF"
        if self.kind in ("data", "padded"):
            return f"Array({n}.prefix({self.size_n}))"
        return n

    def describe(self):
        n, l = self.binding, self.label
        show = self.show[0] if self.show else self.presentation
        value = f"{n}.rawValue" if self.raw else n
        note = f", note: {self.note}" if self.note else ""
        if show in ("int", "code"):
            return f'.{show}("{l}", {value}{note})'
        if show == "interval":
            zero = ""
            if len(self.show) > 2 and self.show[2] == "zero":
                zero = ", whenZero: " + " ".join(self.show[3:])
            return f'.interval("{l}", {n}, unitMicroseconds: {self.show[1]}{zero})'
        if show == "dBm":
            return f'.dBm("{l}", {n})'
        if show == "phy":
            return f'.phy("{l}", {n})'
        if show == "phyMask":
            return f'.code("{l}", {n}, note: phyMaskNote({n}))'
        if show == "us":
            return f'.int("{l}", {n}, note: "\\({n}) µs")'
        if show == "bytes":
            return f'.bytes("{l}", {n})'
        if show == "counted":
            return f'.int("{l}Length", {n}.count), .bytes("{l}", {n})'
        if show == "ints":
            return f'Field("{l}", .list({n}.map {{ .int(Int($0)) }}))'
        if show == "records":
            return f'Field("{l}", .list({n}.map {{ .object($0.fields) }}))'
        if show == "uuid16":
            return f'.text("{l}", BluetoothUUID({n}).description)'
        if show == "uuid":
            return f'.text("{l}", {n}.description)'
        if show == "utf8z":
            return f'.text("{l}", String(decoding: {n}.prefix {{ $0 != 0 }}, as: UTF8.self))'
        if show == "address":
            typ = f", type: {self.show[2]}" if len(self.show) > 2 and self.show[1] == "type" else ""
            return f'.address("{l}", {n}{typ})'
        if show == "addressType":
            return f'.addressType("{l}", {n})'
        if show == "status":
            return f'.status({n}, "{l}")'
        if show == "handle":
            if l != "connectionHandle":
                return f'.int("{l}", {n})'
            return f'.handle({n})'
        if show == "enabled":
            return f'.code("{l}", UInt8({n} ? 1 : 0), note: {n} ? "enabled" : "disabled")'
        sys.exit(f"{self.where}: unknown presentation {show}")


def switch_member(declaration, subject, rows, last):
    """A Swift member (`declaration`, 4-space indented) whose body switches over `subject`:
    `case K: V` per (K, V) row, then `last` (the default, or the last case)."""
    return ([f"    {declaration} {{", f"        switch {subject} {{"]
            + [f"        case {k}: {v}" for k, v in rows] + [f"        {last}", "        }", "    }"])


def decode_case(label, case, fields, result, pdu=None):
    """An enum codec's decoding of one case (`label` its switch label): a `let` per field, then
    `result` given the case (`return`, `pdu =`). `pdu` names the PDU in a list's errors."""
    out = [f"        case {label}:"]
    for i, f in enumerate(fields):
        trailing = sum(x.octets or 0 for x in fields[i + 1:])
        out.append(f"            let {f.binding} = {f.read(pdu, trailing)}")
    return out + [f"            {result} .{case}(" + ", ".join(f.argument for f in fields) + ")"]


def encode_case(case, fields):
    """An enum codec's encoding of one case: its fields bound, then written in wire order."""
    return ([f"        case let .{case}(" + ", ".join(f.binding for f in fields) + "):"]
            + [f"            {f.write()}" for f in fields])


def read_blocks(path, read_header, add_member, trailing_comments=False):
    """The blocks of a description file: `read_header(line, where)` makes a block of a header
    line (None: not a header), `add_member(block, key, body, where)` adds an indented member.
    `trailing_comments`: ` # ...` ends any line but a `doc` one."""
    blocks = []
    for i, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.rstrip()
        if trailing_comments and not line.lstrip().startswith("doc "):
            line = line.split(" #")[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{path.name}:{i}"
        block = read_header(line, where)
        if block is not None:
            blocks.append(block)
            continue
        if not blocks or not line.startswith("  "):
            sys.exit(f"{where}: unexpected line: {raw}")
        key, _, body = line.strip().partition(" ")
        add_member(blocks[-1], key, body, where)
    return blocks
