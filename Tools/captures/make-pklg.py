#!/usr/bin/env python3
"""Writes Apple PacketLogger (.pklg) files from a btsnoop (datalink 1002, H4) capture, for the
test fixtures of `ble-hci dump` (issue 26). Independent of the Swift reader.

    Tools/captures/make-pklg.py IN.btsnoop OUT.pklg [--little-endian] [--notes]

A PacketLogger file has no header: it is a sequence of records, each
  length (4 octets: what follows it, 8 + 1 + payload), seconds (4), microseconds (4),
  type (1), payload
in one byte order for the whole file: big-endian as macOS writes it, or little-endian (the
other layout Wireshark's wiretap/packetlogger.c reads: it takes a first length whose low 16
bits are zero and high bits not as the sign of the swapped order). Types (Wireshark's
epan/dissectors/packet-packetlogger.c): 0x00 HCI command, 0x01 HCI event, 0x02/0x03 ACL
sent/received, 0x08/0x09 SCO sent/received, 0x0A/0x0B LMP sent/received, 0xF7 syslog,
0xF8 kernel, 0xF9 kernel debug, 0xFA error, 0xFB power, 0xFC note, 0xFD config, 0xFE new
controller. The payload of a packet type is the HCI packet without its H4 indicator.

--notes adds the text records PacketLogger interleaves: a "new controller" record first, a
note and a power record after the first packet, a syslog record (process id 4 octets
little-endian, message type 1 octet, then process, sender, subsystem, category and message,
each NUL-terminated) and a kernel record later, each timestamped like the packet before it.
"""
import argparse
import struct

TYPES = {  # (H4 indicator, received) -> PacketLogger type
    (0x01, False): 0x00, (0x04, True): 0x01, (0x02, False): 0x02, (0x02, True): 0x03,
    (0x03, False): 0x08, (0x03, True): 0x09,
}
EPOCH_OFFSET_US = 0x00DCDDB30F2F8000  # btsnoop's epoch (year 0) to 1970, as BlueZ counts it


def btsnoop_records(data):
    assert data[:8] == b"btsnoop\0", "not a btsnoop file"
    version, datalink = struct.unpack(">II", data[8:16])
    assert (version, datalink) == (1, 1002), "btsnoop version 1, datalink 1002 only"
    off = 16
    while off + 24 <= len(data):
        _orig, incl, flags, _drops, ts = struct.unpack(">IIIIq", data[off:off + 24])
        yield ts - EPOCH_OFFSET_US, bool(flags & 1), data[off + 24:off + 24 + incl]
        off += 24 + incl


def record(order, micros, kind, payload):
    body = struct.pack(order + "II", micros // 1_000_000, micros % 1_000_000) + bytes([kind]) + payload
    return struct.pack(order + "I", len(body)) + body


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("input")
    parser.add_argument("output")
    parser.add_argument("--little-endian", action="store_true")
    parser.add_argument("--notes", action="store_true")
    args = parser.parse_args()
    order = "<" if args.little_endian else ">"
    with open(args.input, "rb") as f:
        recs = list(btsnoop_records(f.read()))
    out = bytearray()
    for i, (micros, received, h4) in enumerate(recs):
        if args.notes and i == 0:
            out += record(order, micros, 0xFE, b"Controller 0x0001 (USB)\0")
        out += record(order, micros, TYPES[(h4[0], received)], h4[1:])
        if args.notes and i == 0:
            out += record(order, micros, 0xFC, b"ble-hci fixture: notes between packets\0")
            out += record(order, micros, 0xFB, b"Power On\0")
        if args.notes and i == len(recs) // 2:
            syslog = struct.pack("<IB", 321, 5) + b"bluetoothd\0BTController\0com.apple.bluetooth\0HCI\0link up\0"
            out += record(order, micros, 0xF7, syslog)
            out += record(order, micros, 0xF8, b"IOBluetoothFamily: kernel message")
    with open(args.output, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    main()
