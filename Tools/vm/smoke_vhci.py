#!/usr/bin/python3
"""Smoke test of the kernel's HCI user channel on /dev/vhci, run inside the test VM.

    Tools/vm/run.sh /usr/bin/python3 Tools/vm/smoke_vhci.py

Must be Debian's /usr/bin/python3 (a pyenv build lacks AF_BLUETOOTH). Checks:
  1. /dev/vhci + 0xff 0x80 creates a raw hciN and answers ff 80 <index LE16>.
  2. AF_BLUETOOTH/SOCK_RAW/BTPROTO_HCI bound to that index on HCI_CHANNEL_USER:
     HCI Reset written on the user channel comes out of /dev/vhci, a Command Complete
     written to /dev/vhci comes out of the user channel.
  3. The errnos of bind(): a second user channel on the same index, a missing index,
     an adapter the kernel is initialising (0xff 0x00) and one that is up (HCIDEVUP).
Prints one line per check; exits 0 when all pass. Uses no third-party code.
"""
import ctypes
import errno
import fcntl
import os
import select
import socket
import struct
import sys
import threading
import time

AF_BLUETOOTH = 31
BTPROTO_HCI = 1
HCI_CHANNEL_RAW = 0
HCI_CHANNEL_USER = 1
HCI_CHANNEL_CONTROL = 3
HCI_DEV_NONE = 0xFFFF
HCIDEVUP = 0x400448C9     # _IOW('H', 201, int)
HCIDEVDOWN = 0x400448CA   # _IOW('H', 202, int)

libc = ctypes.CDLL(None, use_errno=True)

FAILED = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + (": " + detail if detail else ""), flush=True)
    if not ok:
        FAILED.append(name)


def errname(e):
    return errno.errorcode.get(e, str(e)) if e else "OK"


class SockaddrHCI(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("dev", ctypes.c_ushort), ("channel", ctypes.c_ushort)]


def hci_socket():
    return socket.socket(AF_BLUETOOTH, socket.SOCK_RAW | socket.SOCK_CLOEXEC, BTPROTO_HCI)


def bind_hci(sock, dev, channel):
    """bind() with a full sockaddr_hci (Python's own bind cannot set hci_channel). Returns errno or 0."""
    addr = SockaddrHCI(AF_BLUETOOTH, dev, channel)
    rc = libc.bind(sock.fileno(), ctypes.byref(addr), ctypes.sizeof(addr))
    return ctypes.get_errno() if rc != 0 else 0


def mgmt_index_list():
    """MGMT Read Controller Index List (0x0003) on the control channel -> list of indices."""
    s = hci_socket()
    try:
        e = bind_hci(s, HCI_DEV_NONE, HCI_CHANNEL_CONTROL)
        if e:
            raise OSError(e, "bind control channel: " + errname(e))
        os.write(s.fileno(), struct.pack("<HHH", 0x0003, HCI_DEV_NONE, 0))
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            ev = read_fd(s.fileno(), 0.5)
            if not ev or len(ev) < 6:
                continue
            code, _, _ = struct.unpack("<HHH", ev[:6])
            if code == 0x0001 and struct.unpack("<H", ev[6:8])[0] == 0x0003:
                n = struct.unpack("<H", ev[9:11])[0]
                return list(struct.unpack("<%dH" % n, ev[11:11 + 2 * n]))
        raise OSError(errno.ETIMEDOUT, "no answer to Read Index List")
    finally:
        s.close()


def read_fd(fd, timeout=2.0):
    r, _, _ = select.select([fd], [], [], timeout)
    if not r:
        return None
    return os.read(fd, 1024)


def new_vhci(opcode):
    fd = os.open("/dev/vhci", os.O_RDWR | os.O_CLOEXEC)
    os.write(fd, bytes([0xFF, opcode]))
    return fd


def vhci_index(fd):
    ans = read_fd(fd)
    if ans is None or len(ans) != 4 or ans[0] != 0xFF:
        raise RuntimeError("unexpected vhci answer %r" % (ans,))
    return ans[1], struct.unpack("<H", ans[2:4])[0]


def cmd_complete(opcode, params):
    body = bytes([1]) + struct.pack("<H", opcode) + params
    return bytes([0x04, 0x0E, len(body)]) + body


class MiniController(threading.Thread):
    """Answers the kernel's init commands on a 0xff 0x00 vhci plausibly (an LE-only 5.0 controller)."""

    def __init__(self, fd):
        super().__init__(daemon=True)
        self.fd = fd
        self.stop = False
        self.seen = []

    def answer(self, op, params):
        if op == 0x1001:    # Read Local Version: status, hci ver 5.0, rev, lmp ver, manufacturer, subver
            return b"\x00" + struct.pack("<BHBHH", 9, 0, 9, 0x05F1, 0)
        if op == 0x1003:    # Read Local Features: LE supported, BR/EDR not supported
            return b"\x00" + bytes([0, 0, 0, 0, 0x60, 0, 0, 0])
        if op == 0x1009:    # Read BD_ADDR
            return b"\x00" + bytes([0x11, 0x22, 0x33, 0x44, 0x55, 0xC6])
        if op == 0x1005:    # Read Buffer Size
            return b"\x00" + struct.pack("<HBHH", 251, 0, 8, 0)
        if op == 0x2002:    # LE Read Buffer Size
            return b"\x00" + struct.pack("<HB", 251, 8)
        if op == 0x200F:    # LE Read Filter Accept List Size
            return b"\x00\x08"
        if op == 0x201C:    # LE Read Supported States
            return b"\x00" + b"\xff" * 8
        if op == 0x2007:    # LE Read Advertising Channel TX Power
            return b"\x00\x00"
        if op == 0x1002:    # Read Local Supported Commands: none beyond the mandatory ones
            return b"\x00" + bytes(64)
        # Everything else: success, generous zero return parameters.
        return b"\x00" + bytes(32)

    def run(self):
        while not self.stop:
            pkt = read_fd(self.fd, 0.2)
            if not pkt or pkt[0] != 0x01 or len(pkt) < 4:
                continue
            op = struct.unpack("<H", pkt[1:3])[0]
            self.seen.append(op)
            os.write(self.fd, cmd_complete(op, self.answer(op, pkt[4:])))


def main():
    if not os.path.exists("/dev/vhci"):
        print("FAIL /dev/vhci missing (hci_vhci not loaded?)")
        return 1

    # 1. raw vhci device
    t0 = time.monotonic()
    vfd = new_vhci(0x80)
    op, idx = vhci_index(vfd)
    check("vhci 0xff 0x80 creates hci%d" % idx, op == 0x80, "answer opcode 0x%02x" % op)
    time.sleep(0.05)

    # 2. user channel on it
    user = hci_socket()
    e = bind_hci(user, idx, HCI_CHANNEL_USER)
    check("bind hci%d HCI_CHANNEL_USER" % idx, e == 0, errname(e))
    if e:
        return 1
    reset = bytes([0x01, 0x03, 0x0C, 0x00])
    os.write(user.fileno(), reset)
    got = read_fd(vfd)
    check("user channel -> vhci: HCI Reset", got == reset, got.hex() if got else "nothing in 2 s")
    cc = cmd_complete(0x0C03, b"\x00")
    os.write(vfd, cc)
    got = read_fd(user.fileno())
    check("vhci -> user channel: Command Complete (Reset)", got == cc, got.hex() if got else "nothing in 2 s")
    print("     round trip done %.0f ms after creating the device" % ((time.monotonic() - t0) * 1000))

    # 3a. second user channel on the same index
    second = hci_socket()
    e = bind_hci(second, idx, HCI_CHANNEL_USER)
    print("     second bind on hci%d (held by a user channel): %s" % (idx, errname(e)))
    check("second user channel on the same index is refused", e in (errno.EUSERS, errno.EBUSY), errname(e))
    second.close()

    # 3b. missing index
    s = hci_socket()
    e = bind_hci(s, 999, HCI_CHANNEL_USER)
    print("     bind hci999 (missing): %s" % errname(e))
    check("missing index -> ENODEV", e == errno.ENODEV, errname(e))
    s.close()

    # after closing the user channel, the index can be bound again
    user.close()
    time.sleep(0.1)
    again = hci_socket()
    e = bind_hci(again, idx, HCI_CHANNEL_USER)
    check("rebind after the holder closed", e == 0, errname(e))
    again.close()
    os.close(vfd)

    # 3c. a device the kernel initialises (0xff 0x00)
    vfd = new_vhci(0x00)
    op, idx2 = vhci_index(vfd)
    ctl = MiniController(vfd)
    ctl.start()
    s = hci_socket()
    e_init = bind_hci(s, idx2, HCI_CHANNEL_USER)
    print("     bind hci%d right after creation (kernel initialising): %s" % (idx2, errname(e_init)))
    s.close()
    e = None
    deadline = time.monotonic() + 5
    t1 = time.monotonic()
    while time.monotonic() < deadline:
        s = hci_socket()
        e = bind_hci(s, idx2, HCI_CHANNEL_USER)
        if e != errno.EBUSY:
            break
        s.close()
        time.sleep(0.01)
    print("     bind hci%d after %.0f ms of retrying: %s (kernel sent %d init commands: %s)" % (
        idx2, (time.monotonic() - t1) * 1000, errname(e), len(ctl.seen),
        " ".join("%04x" % o for o in ctl.seen)))
    check("initialised adapter (0xff 0x00) becomes bindable", e == 0, errname(e))
    s.close()
    time.sleep(0.1)

    # user channel taken: the index leaves mgmt; released: it comes back
    s = hci_socket()
    bind_hci(s, idx2, HCI_CHANNEL_USER)
    during = mgmt_index_list()
    s.close()
    time.sleep(0.2)
    after = mgmt_index_list()
    print("     mgmt index list while held: %s, after close: %s" % (during, after))
    check("mgmt: index removed while held, added back after close", idx2 not in during and idx2 in after)

    # 3d. adapter up (HCIDEVUP through a raw HCI socket) -> EBUSY
    raw = hci_socket()
    try:
        fcntl.ioctl(raw.fileno(), HCIDEVUP, idx2)
        up = "OK"
    except OSError as ex:
        up = errname(ex.errno)
    if up == "EALREADY":
        up = "OK (already up)"
    s = hci_socket()
    e = bind_hci(s, idx2, HCI_CHANNEL_USER)
    print("     HCIDEVUP hci%d: %s; bind while up: %s" % (idx2, up, errname(e)))
    check("adapter up -> EBUSY", e == errno.EBUSY, errname(e))
    s.close()
    try:
        fcntl.ioctl(raw.fileno(), HCIDEVDOWN, idx2)
    except OSError:
        pass
    time.sleep(0.1)
    s = hci_socket()
    e = bind_hci(s, idx2, HCI_CHANNEL_USER)
    check("after HCIDEVDOWN the user channel binds again", e == 0, errname(e))
    s.close()
    raw.close()
    ctl.stop = True
    ctl.join(1)
    os.close(vfd)

    print("smoke_vhci: %s" % ("ALL PASSED" if not FAILED else "FAILED: " + ", ".join(FAILED)), flush=True)
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
