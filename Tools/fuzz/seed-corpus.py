#!/usr/bin/env python3
"""Writes the seed corpora of the libFuzzer targets (Tools/fuzz/Targets) from the capture
fixtures in Tests/Fixtures (recorded by Bumble, and one by ble-hci demo): every input is cut
from real traffic, framed the way the target's main.swift reads its input.

    Tools/fuzz/seed-corpus.py OUT_DIR     # writes OUT_DIR/<target>/<sha1 of input>

Independent of the Swift code: the capture formats are parsed here (btsnoop: RFC 1761 plus
BlueZ's datalinks 1001/1002; pcap linktype 201; pcapng and PacketLogger files are seeds whole), H4 and L2CAP headers per Core v5.4 Vol 4
Part A 2 / Vol 4 Part E 5.4 / Vol 3 Part A 3.1.
"""
import hashlib
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "Tests", "Fixtures")


def records(data):
    """(received: bool|None, h4 bytes) of every record of a btsnoop or pcap file."""
    if data[:8] == b"btsnoop\0":
        _, datalink = struct.unpack(">II", data[8:16])
        off = 16
        while off + 24 <= len(data):
            orig, incl, flags, _drops, _ts = struct.unpack(">IIIIq", data[off:off + 24])
            body = data[off + 24:off + 24 + incl]
            off += 24 + incl
            if datalink == 1002:
                yield bool(flags & 1), body
            elif datalink == 1001:  # no indicator: flags bit 1 says command/event, bit 0 direction
                if flags & 2:
                    yield bool(flags & 1), bytes([0x04 if flags & 1 else 0x01]) + body
                else:
                    yield bool(flags & 1), b"\x02" + body
        return
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    linktype = struct.unpack(endian + "I", data[20:24])[0] & 0x0FFFFFFF
    off = 24
    while off + 16 <= len(data):
        _s, _us, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        body = data[off + 16:off + 16 + incl]
        off += 16 + incl
        if linktype == 201:  # 4-octet big-endian direction, then H4
            yield bool(struct.unpack(">I", body[:4])[0]), body[4:]
        else:
            yield None, body


def le16(v):
    return struct.pack("<H", v)


def framed(msg):
    """One message as FuzzInput.message() reads it: 2-octet little-endian length, then the octets."""
    return le16(len(msg)) + msg


def l2cap_frames(recs):
    """(received, handle, cid, payload) of every whole L2CAP frame in the ACL packets."""
    pending = {}
    for received, h4 in recs:
        if not h4 or h4[0] != 0x02 or len(h4) < 5:
            continue
        hf, length = struct.unpack("<HH", h4[1:5])
        handle, pb, data = hf & 0x0FFF, (hf >> 12) & 3, h4[5:5 + length]
        key = (received, handle)
        buf = data if pb != 0b01 else pending.get(key, b"") + data
        if len(buf) >= 4 and len(buf) >= 4 + struct.unpack("<H", buf[:2])[0]:
            n, cid = struct.unpack("<HH", buf[:4])
            yield received, handle, cid, buf[4:4 + n]
            pending.pop(key, None)
        else:
            pending[key] = buf


def advertising_data(recs):
    """AD data of LE Advertising Reports (subevent 0x02), LE Extended Advertising Reports (0x0d),
    LE Set (Extended) Advertising / Scan Response Data commands."""
    for _, h4 in recs:
        if len(h4) > 3 and h4[0] == 0x04 and h4[1] == 0x3E:
            p = h4[3:]
            if p[0] == 0x02 and len(p) > 2:
                off = 2
                for _ in range(p[1]):  # event type, address type, address, length, data, rssi
                    if off + 9 > len(p):
                        break
                    n = p[off + 8]
                    yield p[off + 9:off + 9 + n]
                    off += 10 + n
            elif p[0] == 0x0D and len(p) > 2:
                off = 2
                for _ in range(p[1]):  # 24 octets of fixed fields, then data length and data
                    if off + 24 > len(p):
                        break
                    n = p[off + 23]
                    yield p[off + 24:off + 24 + n]
                    off += 24 + n
        elif len(h4) > 4 and h4[0] == 0x01:
            opcode = struct.unpack("<H", h4[1:3])[0]
            p = h4[4:]
            if opcode in (0x2008, 0x2009) and p:  # LE Set Advertising / Scan Response Data
                yield p[1:1 + p[0]]
            elif opcode in (0x2037, 0x2038) and len(p) >= 4:  # LE Set Extended Advertising / Scan Response Data
                yield p[4:4 + p[3]]


def main():
    out = sys.argv[1]
    corpora = {t: set() for t in ["h4", "hci", "acl", "l2cap-signaling", "att-server", "att-client", "smp", "ad", "capture",
                                  "gatt-file"]}
    # `--gatt` tables (docs/cli.md): the example a new user copies, as an object and as the
    # central's JSON lines around it.
    with open(os.path.join(HERE, "..", "examples", "Testing", "heart-rate.json"), "rb") as f:
        table = f.read()
    corpora["gatt-file"].add(table)
    corpora["gatt-file"].add(b'{"event":"connected","handle":64}\n' + table.replace(b"\n", b"") + b'\n{"event":"done"}\n')
    # pcapng fixtures (editcap's conversions of the others, Tests/DecoderTests/PcapngTests.swift):
    # whole files for the capture reader, and all of them one after another (one section
    # each: a new Section Header Block resets the interfaces). Their packets are the other
    # fixtures', already in the other targets' seeds.
    pcapngs = []
    for name in sorted(os.listdir(FIXTURES)):
        if name.endswith(".pklg"):  # PacketLogger (Tools/captures/make-pklg.py): whole files, both byte orders
            with open(os.path.join(FIXTURES, name), "rb") as f:
                corpora["capture"].add(f.read())
    for name in sorted(os.listdir(FIXTURES)):
        if name.endswith(".pcapng"):
            with open(os.path.join(FIXTURES, name), "rb") as f:
                pcapngs.append(f.read())
    corpora["capture"].update(pcapngs)
    corpora["capture"].add(b"".join(pcapngs))
    for name in sorted(os.listdir(FIXTURES)):
        if not name.endswith((".btsnoop", ".pcap")):
            continue
        with open(os.path.join(FIXTURES, name), "rb") as f:
            data = f.read()
        recs = list(records(data))
        # Whole files are the best seeds for the capture reader; also cut into pieces of 16
        # records (header kept), which run faster.
        corpora["capture"].add(data)
        header = 16 if data[:8] == b"btsnoop\0" else 24
        bounds, off = [header], header
        while off < len(data):
            incl = struct.unpack(">I", data[off + 4:off + 8])[0] if header == 16 else struct.unpack("<I", data[off + 8:off + 12])[0]
            off += (24 if header == 16 else 16) + incl
            bounds.append(off)
        for i in range(0, len(bounds) - 1, 16):
            corpora["capture"].add(data[:header] + data[bounds[i]:bounds[min(i + 16, len(bounds) - 1)]])

        h4s = [h4 for _, h4 in recs]
        for i in range(0, len(h4s), 8):  # max payload 16 KiB-ish, piece pattern, 8 packets
            corpora["h4"].add(bytes([0xFF, i & 0xFF]) + b"".join(h4s[i:i + 8]))
        for h4 in h4s:
            if h4[:1] == b"\x04" and len(h4) >= 4:
                corpora["hci"].add(bytes([0x00, h4[1]]) + h4[3:])
            elif h4[:1] == b"\x01" and len(h4) >= 4:
                corpora["hci"].add(bytes([0x01]) + h4[1:3] + h4[4:])
        acl = [(rx, h4) for rx, h4 in recs if h4[:1] == b"\x02" and len(h4) >= 5]
        for i in range(0, len(acl), 8):  # frames up to 4+255*16, MTU 23+4*64, MPS 23+100
            seed = bytes([0xFF, 64, 100])
            for rx, h4 in acl[i:i + 8]:
                hf = struct.unpack("<H", h4[1:3])[0]
                flags = (hf & 0x0F) << 4 | (1 if (hf >> 12) & 3 == 0b01 else 0) | (2 if rx else 0)
                seed += bytes([flags]) + framed(h4[5:])
            corpora["acl"].add(seed)

        att_requests, att_responses = {}, {}
        for rx, handle, cid, payload in l2cap_frames(recs):
            if cid in (0x0005, 0x0001):  # LE and BR/EDR signaling (one target reads both ways)
                corpora["l2cap-signaling"].add(payload)
            elif cid in (0x0006, 0x0007):  # SMP on LE-U and over BR/EDR
                corpora["smp"].add(payload)
            elif cid == 0x0004 and payload:
                op = payload[0]
                is_response = op == 0x01 or (op in range(0x03, 0x22, 2) and op not in (0x1B, 0x1D))
                (att_responses if is_response else att_requests).setdefault(handle, []).append(payload)
        for pdus in att_requests.values():  # the client side's PDUs, in order, MTU 247, then encrypted
            for start in range(0, len(pdus), 6):
                for sec in (0x00, 0xF3):
                    corpora["att-server"].add(bytes([112, sec]) + b"".join(framed(p) for p in pdus[start:start + 6]))
        for pdus in att_responses.values():  # the server side's answers, in order, MTU 247
            corpora["att-client"].add(bytes([112]) + b"".join(framed(p) for p in pdus))
        for ad in advertising_data(recs):
            corpora["ad"].add(bytes(ad))

    # The HCI catalog (Tools/pdl/hci-catalog.pdl): each command, its Command Complete, each event
    # and LE subevent the fixtures lack, parameters zero (counts and lengths 0), as the hci target
    # frames them, so the fuzzer starts inside every catalog layout.
    sys.path.insert(0, os.path.join(HERE, "..", "pdl"))
    from gen_catalog import parse as parse_catalog
    from pathlib import Path

    def zeros(params):
        size = 0
        for p in params:
            t = p["type"]
            size += {"u8": 1, "i8": 1, "u16": 2, "i16": 2, "u24": 3, "u32": 4, "u64": 8, "status": 1,
                     "address": 6, "handle": 2, "data": 1, "list": 1}.get(t, 0)
            if t[:5] in ("bytes", "text") and t[5:].isdigit():
                size += int(t[5:])
        return bytes(size)

    for e in parse_catalog(Path(HERE, "..", "pdl", "hci-catalog.pdl")):
        if e.kind in ("command", "vendor"):
            corpora["hci"].add(bytes([0x01]) + le16(e.code) + zeros(e.params))
            corpora["hci"].add(bytes([0x00, 0x0E, 0x01]) + le16(e.code) + b"\x00" + zeros(e.rets))
        elif e.kind == "event":
            params = zeros(e.params)
            corpora["hci"].add(bytes([0x00, e.code]) + (params or b"\x00"))
        else:
            corpora["hci"].add(bytes([0x00, 0x3E, e.code]) + zeros(e.params))

    if not corpora["smp"]:
        # The fixtures have no pairing: one PDU of each code with its fixed length (Core v5.4
        # Vol 3 Part H 3.5 - 3.6: code, then fields), fields zero.
        for code, length in [(0x01, 6), (0x02, 6), (0x03, 16), (0x04, 16), (0x05, 1), (0x06, 16), (0x07, 10),
                             (0x08, 16), (0x09, 7), (0x0A, 16), (0x0B, 1), (0x0C, 64), (0x0D, 16), (0x0E, 1)]:
            corpora["smp"].add(bytes([code]) + bytes(length))

    if not corpora["l2cap-signaling"]:
        # Nor LE signaling: one command of each LE code with its fixed data length (Core v5.4
        # Vol 3 Part A 4: code, identifier, 2-octet length, data), data zero, identifier 1.
        for code, length in [(0x01, 2), (0x06, 4), (0x07, 4), (0x12, 8), (0x13, 2), (0x14, 10), (0x15, 10),
                             (0x16, 4), (0x17, 10), (0x18, 10), (0x19, 6), (0x1A, 2)]:
            corpora["l2cap-signaling"].add(bytes([code, 1]) + le16(length) + bytes(length))

    for target, inputs in corpora.items():
        d = os.path.join(out, target)
        os.makedirs(d, exist_ok=True)
        for data in inputs:
            with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
                f.write(data)
        print(f"seed corpus {target}: {len(inputs)} inputs", file=sys.stderr)


if __name__ == "__main__":
    main()
