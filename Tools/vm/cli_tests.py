#!/usr/bin/python3
"""The `ble-hci` CLI on the real kernel path, run INSIDE the VM guest (Debian's python3).

Issue 9's VM suite, steps 1-4 (see docs/vm.md):
  1. `ble-hci controllers --listen vhci --listen vhci --json`: two kernel adapters on one link;
  2. `ble-hci peripheral` on hci0 and `ble-hci central`/`scan` on hci1, both over the HCI user
     channel: a full GATT session, a write read back, a refused write, a pcap capture
     (the host reads it with tshark afterwards: Tools/vm/host-checks.sh);
  3. the user channel's error paths for real (EBUSY up, EBUSY held by another program,
     ENODEV, EPERM): exit code 3 and the message issue 2 specifies; the adapter is back
     under the kernel's control (mgmt index list) after `ble-hci` exits;
  4. BlueZ as the peer on hci1 with the kernel's own L2CAP/ATT: gatttool (and hcitool lescan, which a Bluetooth 5 controller refuses once the kernel used the extended commands, Core v5.4 Vol 4 Part E 3.1.1).
  5. BlueZ's own host pairing (the kernel's SMP, through mgmt: btmgmt pair) with
     `ble-hci peripheral --profile secure` on hci0, LE legacy then Secure Connections; then
     gatttool --sec-level medium reads the encrypted ff01 with the key the kernel got.
  6. The kernel's enhanced credit-based L2CAP (an L2CAP socket in BT_MODE_EXT_FLOWCTL, with
     the bluetooth module's enable_ecred on) as the EATT client of `ble-hci peripheral --eatt`:
     paired through mgmt, it opens PSM 0x0027 at security level medium, reads over it, gets
     Request Not Supported for an Exchange MTU Request, and raises its MTU with a Credit Based
     Reconfigure Request (setsockopt BT_RCVMTU), after which the server's answers grow.
  7. BlueZ's bluetoothd (its own D-Bus system bus in the guest) as the central of
     `ble-hci peripheral --eatt`: bluetoothctl pairs and connects, and bluetoothd opens its
     EATT channels (main.conf's [GATT] Channels, 3 by default: two enhanced bearers) and
     runs its GATT client over them (the host reads the capture: host-checks.sh).

Every check prints PASS/FAIL; a failing check prints the command's output. Every command
has a timeout. Exit code: the number of failed checks (capped at 100).
Env: BLE_HCI_BIN (default .build/debug/ble-hci), BLE_HCI_VM_SHARE (pcap goes there),
     VM_CLI_SECTIONS (comma list of 1,2,3,4,5,6,7; default all).
"""
import ctypes
import errno
import json
import os
import re
import select
import signal
import socket
import struct
import subprocess
import sys
import time

BIN = os.path.abspath(os.environ.get("BLE_HCI_BIN", ".build/debug/ble-hci"))
SHARE = os.environ.get("BLE_HCI_VM_SHARE", "/tmp")
SECTIONS = set(os.environ.get("VM_CLI_SECTIONS", "1,2,3,4,5,6,7").split(","))
T0 = time.monotonic()

AF_BLUETOOTH, BTPROTO_HCI, HCI_CHANNEL_CONTROL, HCI_DEV_NONE = 31, 1, 3, 0xFFFF
libc = ctypes.CDLL(None, use_errno=True)

FAILED = []
PASSED = []


def ts():
    return "[%6.1fs]" % (time.monotonic() - T0)


def log(msg):
    print("%s %s" % (ts(), msg), flush=True)


def check(name, ok, detail="", show=None):
    print("%s %s %s%s" % (ts(), "PASS" if ok else "FAIL", name, (": " + detail) if detail else ""), flush=True)
    (PASSED if ok else FAILED).append(name)
    if not ok and show is not None:
        show_result(show)
    return ok


def show_result(r):
    print("      ---- `%s` -> exit %s (%.1fs)" % (r.cmdline, r.rc, r.secs))
    for label, text in (("stdout", r.out), ("stderr", r.err)):
        text = text.rstrip()
        if text:
            lines = text.splitlines()
            if len(lines) > 60:
                lines = lines[:20] + ["      ... (%d lines) ..." % (len(lines) - 50)] + lines[-30:]
            print("      ---- %s:\n%s" % (label, "\n".join("      | " + l for l in lines)))
    sys.stdout.flush()


class Result:
    def __init__(self, cmdline, rc, out, err, secs):
        self.cmdline, self.rc, self.out, self.err, self.secs = cmdline, rc, out, err, secs

    def events(self):
        return parse_json_lines(self.out)


def parse_json_lines(text):
    evs = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                evs.append(json.loads(line))
            except ValueError:
                evs.append({"event": "__unparsable__", "line": line})
    return evs


def run(args, timeout=30, preexec=None):
    """Runs args (list), returns Result; rc 124 on timeout (like timeout(1))."""
    cmdline = " ".join(args)
    s = time.monotonic()
    try:
        p = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout,
                           preexec_fn=preexec)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, e.stdout or b"", (e.stderr or b"") + (b"\n[killed after %ds]" % timeout)
    except OSError as e:
        rc, out, err = 127, b"", str(e).encode()
    r = Result(cmdline, rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), time.monotonic() - s)
    log("ran `%s` -> exit %s in %.1fs" % (cmdline, r.rc, r.secs))
    return r


class Background:
    """A long-running command whose stdout/stderr go to files we poll."""

    def __init__(self, args, name):
        self.args, self.name = args, name
        self.outpath, self.errpath = "/tmp/%s.out" % name, "/tmp/%s.err" % name
        self.start = time.monotonic()
        self.p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=open(self.outpath, "wb"),
                                  stderr=open(self.errpath, "wb"))
        log("started `%s` (pid %d)" % (" ".join(args), self.p.pid))

    def out(self):
        with open(self.outpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def err(self):
        with open(self.errpath, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def events(self):
        return parse_json_lines(self.out())

    def wait_for(self, pred, timeout):
        """Polls until pred(events) is truthy (returns it) or the process ends or time runs out."""
        deadline = time.monotonic() + timeout
        while True:
            v = pred(self.events())
            if v:
                return v
            if self.p.poll() is not None or time.monotonic() > deadline:
                return None
            time.sleep(0.1)

    def stop(self, sig=signal.SIGINT, timeout=10):
        if self.p.poll() is None:
            self.p.send_signal(sig)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                log("%s: did not stop within %ds of %s; killed" % (self.name, timeout, signal.Signals(sig).name))
                return None
        return self.p.returncode

    def result(self):
        return Result(" ".join(self.args) + "  [background]", self.p.poll(), self.out(), self.err(),
                      time.monotonic() - self.start)


# --- kernel side: mgmt index list, /sys/class/bluetooth ---------------------------------

class SockaddrHCI(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("dev", ctypes.c_ushort), ("channel", ctypes.c_ushort)]


def mgmt_index_list():
    """MGMT Read Controller Index List on the kernel's control channel: indices the kernel manages."""
    s = socket.socket(AF_BLUETOOTH, socket.SOCK_RAW | socket.SOCK_CLOEXEC, BTPROTO_HCI)
    try:
        addr = SockaddrHCI(AF_BLUETOOTH, HCI_DEV_NONE, HCI_CHANNEL_CONTROL)
        if libc.bind(s.fileno(), ctypes.byref(addr), ctypes.sizeof(addr)) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "bind mgmt control channel: " + os.strerror(e))
        os.write(s.fileno(), struct.pack("<HHH", 0x0003, HCI_DEV_NONE, 0))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            r, _, _ = select.select([s], [], [], 0.5)
            if not r:
                continue
            ev = os.read(s.fileno(), 1024)
            if len(ev) >= 11:
                code = struct.unpack("<H", ev[:2])[0]
                if code == 0x0001 and struct.unpack("<H", ev[6:8])[0] == 0x0003:
                    n = struct.unpack("<H", ev[9:11])[0]
                    return list(struct.unpack("<%dH" % n, ev[11:11 + 2 * n]))
        raise OSError(errno.ETIMEDOUT, "no answer to MGMT Read Index List")
    finally:
        s.close()


def mgmt_pair(index, address, io_cap=3, timeout=35.0):
    """MGMT Pair Device (Core-independent BlueZ mgmt API, doc/mgmt-api.txt) to an LE public
    address, answering the kernel's User Confirmation Request with User Confirmation Reply as
    bluetoothd's agent does for Just Works. Returns (status, log lines)."""
    s = socket.socket(AF_BLUETOOTH, socket.SOCK_RAW | socket.SOCK_CLOEXEC, BTPROTO_HCI)
    lines = []
    try:
        addr = SockaddrHCI(AF_BLUETOOTH, HCI_DEV_NONE, HCI_CHANNEL_CONTROL)
        if libc.bind(s.fileno(), ctypes.byref(addr), ctypes.sizeof(addr)) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "bind mgmt control channel: " + os.strerror(e))
        bd = bytes(reversed(bytes.fromhex(address.replace(":", ""))))
        os.write(s.fileno(), struct.pack("<HHH", 0x0019, index, 8) + bd + bytes([1, io_cap]))  # 1: LE public
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([s], [], [], 0.5)
            if not r:
                continue
            ev = os.read(s.fileno(), 1024)
            code, idx, _ = struct.unpack("<HHH", ev[:6])
            if idx != index:
                continue
            if code == 0x000F:  # User Confirmation Request: address, type, hint, value
                lines.append("User Confirmation Request (hint %d, value %06d): replying yes" % (ev[13], struct.unpack("<I", ev[14:18])[0]))
                os.write(s.fileno(), struct.pack("<HHH", 0x001C, index, 7) + ev[6:13])
            elif code in (0x0001, 0x0002) and struct.unpack("<H", ev[6:8])[0] == 0x0019:
                lines.append("Pair Device: %s status 0x%02x" % ("Command Complete" if code == 1 else "Command Status", ev[8]))
                if code == 0x0001 or ev[8] != 0:
                    return ev[8], lines
            elif code == 0x000A:  # New Long Term Key
                lines.append("New Long Term Key (store hint %d)" % ev[6])
        return None, lines + ["no Pair Device completion within %ds" % timeout]
    finally:
        s.close()


def wait_mgmt(index, present, timeout=5.0):
    """Waits until the mgmt index list does (present=True) or does not list index. Returns the last list."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            lst = mgmt_index_list()
        except OSError as e:
            lst = ["error: %s" % e]
        if (index in lst) == present or time.monotonic() > deadline:
            return lst
        time.sleep(0.2)


def sys_adapters():
    try:
        return sorted(os.listdir("/sys/class/bluetooth"))
    except OSError:
        return []


def hci_flags(dev):
    r = run(["hciconfig", dev], timeout=10)
    m = re.search(r"^\s+(UP|DOWN)[^\n]*", r.out, re.M)
    return m.group(0).strip() if m else "?"


def kernel_log(n=25):
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    lines = [l for l in r.stdout.splitlines() if "Bluetooth" in l or " hci" in l][-n:]
    print("      ---- kernel log (dmesg, Bluetooth lines):\n" + "\n".join("      | " + l for l in lines), flush=True)


def back_under_kernel(dev, idx, what):
    lst = wait_mgmt(idx, True, 5)
    check("%s: %s is back under the kernel's control (mgmt index list %s, /sys/class/bluetooth %s)"
          % (what, dev, lst, sys_adapters()), idx in lst and dev in sys_adapters())


# --- the sections --------------------------------------------------------------------------

STATE = {}


def section1():
    log("=== 1. ble-hci controllers --listen vhci --listen vhci --json")
    before = sys_adapters()
    # Instant mode (issue 29's airtime off), as the other test fixtures: these check the kernel path, not timing.
    ctl = Background([BIN, "controllers", "--listen", "vhci", "--listen", "vhci", "--json", "--airtime", "off"], "controllers")
    STATE["controllers"] = ctl
    evs = ctl.wait_for(lambda e: [x for x in e if x.get("event") == "listening"][1:] and e, 20)
    if not check("controllers: two 'listening' events", bool(evs), show=ctl.result()):
        return False
    ls = [x for x in evs if x.get("event") == "listening"]
    devs = [x.get("device") for x in ls]
    ok = all(d and re.fullmatch(r"hci\d+", d) for d in devs) and all(x.get("spec") == "vhci" for x in ls)
    if not check("controllers: each event names its kernel device (%s) and address (%s)"
                 % (devs, [x.get("address") for x in ls]), ok, show=ctl.result()):
        return False
    new = [a for a in sys_adapters() if a not in before]
    check("controllers: /sys/class/bluetooth has the new adapters (%s; before: %s)" % (new, before),
          all(d in new for d in devs))
    check("controllers: they are hci0 and hci1 on a fresh guest", devs == ["hci0", "hci1"], "%s" % devs)
    STATE["h0"], STATE["h1"] = devs[0], devs[1]
    STATE["i0"], STATE["i1"] = int(devs[0][3:]), int(devs[1][3:])
    STATE["addr0"], STATE["addr1"] = ls[0].get("address"), ls[1].get("address")
    # Primary devices: the kernel initialises them (its own HCI init sequence) and lists them in mgmt.
    lst0 = wait_mgmt(STATE["i0"], True, 8)
    lst1 = wait_mgmt(STATE["i1"], True, 2 if STATE["i0"] not in lst0 else 8)
    if not check("controllers: the kernel initialised both and manages them (mgmt index list %s)" % lst1,
                 STATE["i0"] in lst0 and STATE["i1"] in lst1):
        print("      the kernel's own init of a primary vhci device failed: the adapter stays in HCI_SETUP, so every\n"
              "      user-channel bind on it answers EBUSY (hci_sock_bind) and the sections below fail with EBUSY.")
        kernel_log()
        show_result(ctl.result())
    r = run(["hciconfig", "-a"], timeout=10)
    log("hciconfig -a:\n" + "\n".join("      | " + l for l in r.out.rstrip().splitlines()))
    for dev, addr in ((STATE["h0"], STATE["addr0"]), (STATE["h1"], STATE["addr1"])):
        m = re.search(r"^%s:.*?BD Address: ([0-9A-F:]{17})" % dev, r.out, re.M | re.S)
        check("controllers: the kernel read %s's BD_ADDR from our controller (%s)" % (dev, m.group(1) if m else None),
              bool(m) and m.group(1) == addr, show=r)
    check_adapters("two vhci adapters, both managed by the kernel",
                   {STATE["h0"]: (STATE["addr0"], False, None), STATE["h1"]: (STATE["addr1"], False, None)})
    return True


def check_adapters(what, expect):
    """`ble-hci adapters --json` against the kernel's own view: expect maps a device name to
    (address, held by a user channel, up per hciconfig's flags or None to skip)."""
    r = run([BIN, "adapters", "--json"], timeout=20)
    if not check("adapters (%s): exit 0" % what, r.rc == 0, show=r):
        return
    got = {e.get("name"): e for e in r.events() if e.get("event") == "adapter"}
    for dev, (addr, held, up) in expect.items():
        e = got.get(dev, {})
        ok = e.get("address") == addr and e.get("userChannelHeld") == held and (up is None or e.get("up") == up)
        if held:
            ok = ok and "user channel" in e.get("state", "")
        elif up:
            ok = ok and "btmgmt -i %s power off" % dev in e.get("free", "")
        check("adapters (%s): %s %s held=%s up=%s (%s)" % (what, dev, addr, held, up, e), ok, show=r)


def expect_demo_tree(gatt):
    """Checks the demo profile's GATT tree (CLI.md) in a central's `gatt` event."""
    svcs = {s.get("uuid"): s for s in gatt.get("services", [])}
    check("gatt: services 1800, 1801, fff0, ffe0 (%s)" % sorted(svcs), all(u in svcs for u in ("1800", "1801", "fff0", "ffe0")))

    def char(svc, uuid):
        for c in svcs.get(svc, {}).get("characteristics", []):
            if c.get("uuid") == uuid:
                return c
        return {}
    fff1, fff2, ffe1 = char("fff0", "fff1"), char("fff0", "fff2"), char("ffe0", "ffe1")
    check("gatt: fff1 is notify-only (%s)" % fff1.get("properties"), fff1.get("properties") == ["notify"])
    check("gatt: fff1 has a CCCD (2902)", any(d.get("uuid") == "2902" for d in fff1.get("descriptors", [])))
    check("gatt: fff2 is read+write, value 'ble-hci' (%s %s)" % (fff2.get("properties"), fff2.get("value")),
          set(fff2.get("properties", [])) == {"read", "write"} and fff2.get("value") == b"ble-hci".hex())
    d2901 = [d for d in fff2.get("descriptors", []) if d.get("uuid") == "2901"]
    check("gatt: fff2's user description 2901 = 'name' (%s)" % d2901, bool(d2901) and d2901[0].get("value") == b"name".hex())
    check("gatt: ffe1 is read-only, value 'read only' (%s %s)" % (ffe1.get("properties"), ffe1.get("value")),
          ffe1.get("properties") == ["read"] and ffe1.get("value") == b"read only".hex())
    devname = char("1800", "2a00")
    check("gatt: Device Name 2a00 = 'ble-hci' (%s)" % devname.get("value"), devname.get("value") == b"ble-hci".hex())
    sc = char("1801", "2a05")
    check("gatt: Service Changed 2a05 with CCCD", bool(sc) and any(d.get("uuid") == "2902" for d in sc.get("descriptors", [])))
    return fff2.get("valueHandle")


def section2():
    h0, h1, i0 = STATE["h0"], STATE["h1"], STATE["i0"]
    log("=== 2. peripheral on %s, scan and central on %s (user channels); capture %s/p.pcap" % (h0, h1, SHARE))
    pcap = os.path.join(SHARE, "p.pcap")
    per = Background([BIN, "-t", h0, "peripheral", "--profile", "demo", "--json", "-w", pcap, "--duration", "120"], "peripheral")
    STATE["peripheral"] = per
    adv = per.wait_for(lambda e: [x for x in e if x.get("event") == "advertising"], 30)
    if not check("peripheral: 'advertising' event on %s" % h0, bool(adv), show=per.result()):
        per.stop()
        return False
    a = adv[0]
    check("peripheral: advertises as ble-hci, public address %s = controller's %s" % (a.get("address"), STATE["addr0"]),
          a.get("name") == "ble-hci" and a.get("address") == STATE["addr0"] and a.get("addressType") == "public")
    lst = mgmt_index_list()
    check("peripheral: while its user channel holds %s, mgmt does not list index %d (%s)" % (h0, i0, lst), i0 not in lst)
    check_adapters("%s held by the peripheral" % h0, {h0: (STATE["addr0"], True, None), h1: (STATE["addr1"], False, None)})

    # 3b (needs the adapter held): a second process on the same adapter.
    r = run([BIN, "-t", h0, "scan", "--duration", "1"], timeout=30)
    check("second process on held %s: exit 3" % h0, r.rc == 3, show=r)
    check("second process on held %s: message says another program holds it (the kernel answers EBUSY here, not EUSERS)" % h0,
          "another program" in r.err, detail=r.err.strip(), show=r)
    check("second process on held %s: the peripheral is undisturbed" % h0, per.p.poll() is None, show=per.result())

    r = run([BIN, "-t", h1, "scan", "--duration", "2", "--json"], timeout=20)
    advs = [x for x in r.events() if x.get("event") == "advertisement" and x.get("address") == STATE["addr0"]]
    check("scan on %s: exit 0, sees the advertiser %s" % (h1, STATE["addr0"]), r.rc == 0 and bool(advs), show=r)
    if advs:
        x = advs[0]
        check("scan: name ble-hci, connectable, services fff0+ffe0, public (%s)" % json.dumps(x),
              x.get("name") == "ble-hci" and x.get("connectable") is True and x.get("addressType") == "public"
              and {"fff0", "ffe0"} <= set(x.get("services", [])))
    bad = [x for x in r.events() if x.get("event") == "__unparsable__"]
    check("scan --json: stdout is only JSON lines", not bad and all(l.startswith("{") for l in r.out.splitlines() if l.strip()), show=r if bad else None)

    r = run([BIN, "-t", h1, "central", "name:ble-hci", "--json"], timeout=60)
    evs = r.events()
    kinds = [x.get("event") for x in evs]
    check("central name:ble-hci on %s: exit 0, connected/gatt/disconnected (%s)" % (h1, kinds),
          r.rc == 0 and kinds[:1] == ["connected"] and "gatt" in kinds and kinds[-1:] == ["disconnected"], show=r)
    con = [x for x in evs if x.get("event") == "connected"]
    if con:
        check("central: connected to %s, mtu %s" % (con[0].get("address"), con[0].get("mtu")),
              con[0].get("address") == STATE["addr0"] and isinstance(con[0].get("mtu"), int) and con[0]["mtu"] >= 23)
    gatt = [x for x in evs if x.get("event") == "gatt"]
    if gatt:
        expect_demo_tree(gatt[0])

    value = b"vm says hi".hex()
    r = run([BIN, "-t", h1, "central", "name:ble-hci", "--json", "--write", "fff2=" + value, "--read", "fff2"], timeout=60)
    evs = r.events()
    w = [x for x in evs if x.get("event") == "write" and x.get("uuid") == "fff2"]
    rd = [x for x in evs if x.get("event") == "read" and x.get("uuid") == "fff2"]
    check("central --write fff2 --read fff2: exit 0, the value written is read back (%s)" % (rd[0].get("value") if rd else None),
          r.rc == 0 and bool(w) and bool(rd) and rd[0].get("value") == value, show=r)
    # The peripheral prints on its own schedule: wait for the line rather than race the central's exit.
    pw = per.wait_for(lambda e: [x for x in e if x.get("event") == "write" and x.get("uuid") == "fff2"], 5) or []
    check("peripheral: printed the write (%s)" % (pw[-1] if pw else None), bool(pw) and pw[-1].get("value") == value)

    r = run([BIN, "-t", h1, "central", "name:ble-hci", "--json", "--write", "ffe1=00"], timeout=60)
    err = [x for x in r.events() if x.get("event") == "error"]
    check("central --write ffe1=00: exit 1 with an error event att 0x03 Write Not Permitted (%s)" % (err[0] if err else None),
          r.rc == 1 and bool(err) and err[0].get("att") == "0x03" and err[0].get("op") == "write"
          and "Write Not Permitted" in err[0].get("message", ""), show=r)

    rc = per.stop(signal.SIGINT)
    check("peripheral: SIGINT before --duration ends -> exit 130 (interrupted; docs/cli.md)", rc == 130, show=per.result())
    pe = [x.get("event") for x in per.events()]
    check("peripheral: printed connected and disconnected for each central (%d/%d)" % (pe.count("connected"), pe.count("disconnected")),
          pe.count("connected") >= 3 and pe.count("disconnected") >= 3, show=per.result())
    back_under_kernel(h0, i0, "after the peripheral exits")
    try:
        with open(pcap, "rb") as f:
            head = f.read(24)
        size = os.path.getsize(pcap)
    except OSError as e:
        head, size = b"", 0
        log("pcap: %s" % e)
    check("capture %s: pcap, linktype 201, %d bytes" % (pcap, size),
          len(head) == 24 and head[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
          and 201 in struct.unpack("<I", head[20:24]) + struct.unpack(">I", head[20:24]) and size > 1000)
    return True


def section3():
    h0, h1, i0 = STATE["h0"], STATE["h1"], STATE["i0"]
    log("=== 3. error paths on the real kernel")
    # ENODEV
    r = run([BIN, "-t", "hci9", "scan", "--duration", "1"], timeout=30)
    check("ENODEV (-t hci9): exit 3", r.rc == 3, show=r)
    check("ENODEV: message says no such adapter and lists %s, %s" % (h0, h1),
          "no such adapter hci9" in r.err and h0 in r.err and h1 in r.err and "errno %d" % errno.ENODEV in r.err,
          detail=r.err.strip(), show=r)

    # EPERM: a non-root user without CAP_NET_ADMIN
    r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all",
             BIN, "-t", h0, "scan", "--duration", "1"], timeout=30)
    check("EPERM (uid 65534, no CAP_NET_ADMIN): exit 3", r.rc == 3, show=r)
    check("EPERM: message says run as root or grant CAP_NET_ADMIN",
          "errno %d" % errno.EPERM in r.err and "root" in r.err and "CAP_NET_ADMIN" in r.err, detail=r.err.strip(), show=r)
    back_under_kernel(h0, i0, "after EPERM")

    # EBUSY: the adapter is up under the kernel
    r = run(["hciconfig", h0, "up"], timeout=20)
    if not check("hciconfig %s up: exit 0 (the kernel powers our controller on: %s)" % (h0, hci_flags(h0)), r.rc == 0, show=r):
        return
    r = run([BIN, "-t", h0, "scan", "--duration", "1"], timeout=30)
    check("EBUSY (%s up): exit 3" % h0, r.rc == 3, show=r)
    check("EBUSY: message says the adapter is up and how to power it off (btmgmt -i %s power off)" % h0,
          "errno %d" % errno.EBUSY in r.err and "btmgmt -i %s power off" % h0 in r.err, detail=r.err.strip(), show=r)
    check("EBUSY: %s is still up under the kernel (%s)" % (h0, hci_flags(h0)), hci_flags(h0).startswith("UP"))
    # The advice must work as written.
    m = re.search(r"`(btmgmt [^`]*)`", r.err)
    if m:
        adv = run(m.group(1).split(), timeout=20)
        check("EBUSY advice `%s` works: %s is down (%s)" % (m.group(1), h0, hci_flags(h0)),
              adv.rc == 0 and hci_flags(h0).startswith("DOWN"), show=adv)
    else:
        run(["hciconfig", h0, "down"], timeout=20)
    r = run([BIN, "-t", h0, "scan", "--duration", "1", "--json"], timeout=15)
    check("after powering %s off: the user channel opens (scan exit 0)" % h0, r.rc == 0, show=r)
    back_under_kernel(h0, i0, "after the scan")


GATTTOOL_UUID = re.compile(r"^0000([0-9a-f]{4})-0000-1000-8000-00805f9b34fb$")


def short_uuid(u):
    m = GATTTOOL_UUID.match(u)
    return m.group(1) if m else u


def section4():
    h0, h1, i1 = STATE["h0"], STATE["h1"], STATE["i1"]
    addr = STATE["addr0"]
    log("=== 4. BlueZ on %s (kernel L2CAP/ATT) against ble-hci peripheral on %s" % (h1, h0))
    per = Background([BIN, "-t", h0, "peripheral", "--profile", "demo", "--json", "--duration", "150"], "peripheral-bluez")
    STATE["peripheral"] = per
    if not check("peripheral on %s advertising" % h0, bool(per.wait_for(lambda e: [x for x in e if x.get("event") == "advertising"], 30)), show=per.result()):
        per.stop()
        return
    r = run(["hciconfig", h1, "up"], timeout=20)
    if not check("hciconfig %s up (kernel's own init of our controller): %s" % (h1, hci_flags(h1)), r.rc == 0, show=r):
        r = run(["btmgmt", "--index", str(i1), "power", "on"], timeout=20)
        if not check("btmgmt --index %d power on" % i1, r.rc == 0 and "powered" in r.out.lower(), show=r):
            per.stop()
            return

    check_adapters("%s up under the kernel, %s held" % (h1, h0),
                   {h0: (STATE["addr0"], True, None), h1: (STATE["addr1"], False, "UP" in hci_flags(h1))})
    # The kernel brings hci1 up with the LE extended advertising commands (the controller has
    # the feature), so hcitool's legacy LE Set Scan Parameters is Command Disallowed (Core v5.4
    # Vol 4 Part E 3.1.1: no legacy and extended commands mixed without a Reset), as on real
    # Bluetooth 5 adapters: "Set scan parameters failed: Input/output error". (gatttool below
    # connects by address through the kernel.)
    r = run(["timeout", "-s", "INT", "6", "hcitool", "-i", h1, "lescan"], timeout=20)
    check("hcitool -i %s lescan: refused after the kernel's extended commands (3.1.1)" % h1,
          r.rc != 0 and "Set scan parameters failed" in r.err, show=r)

    base = ["gatttool", "-i", h1, "-b", addr, "-t", "public"]
    r = run(base + ["--primary"], timeout=40)
    prim = {}
    for m in re.finditer(r"attr handle = 0x([0-9a-f]{4}), end grp handle = 0x([0-9a-f]{4}) uuid: (\S+)", r.out):
        prim[short_uuid(m.group(3))] = (int(m.group(1), 16), int(m.group(2), 16))
    check("gatttool --primary: 1800, 1801, fff0, ffe0 (%s)" % sorted(prim),
          r.rc == 0 and all(u in prim for u in ("1800", "1801", "fff0", "ffe0")), show=r)

    r = run(base + ["--characteristics"], timeout=40)
    chars = {}
    for m in re.finditer(r"handle = 0x([0-9a-f]{4}), char properties = 0x([0-9a-f]{2}), char value handle = 0x([0-9a-f]{4}), uuid = (\S+)", r.out):
        chars[short_uuid(m.group(4))] = (int(m.group(2), 16), int(m.group(3), 16))
    check("gatttool --characteristics: fff1 notify(0x10), fff2 read+write(0x0a), ffe1 read(0x02) (%s)"
          % {k: "0x%02x@0x%04x" % v for k, v in chars.items()},
          r.rc == 0 and chars.get("fff1", (0,))[0] == 0x10 and chars.get("fff2", (0,))[0] == 0x0A and chars.get("ffe1", (0,))[0] == 0x02,
          show=r)

    def read(uuid):
        h = chars.get(uuid, (0, 0))[1]
        return run(base + ["--char-read", "-a", "0x%04x" % h], timeout=40)

    def hexval(r):
        m = re.search(r"Characteristic value/descriptor: ([0-9a-f ]*)", r.out)
        return m.group(1).replace(" ", "") if m else None

    if "fff2" in chars:
        r = read("fff2")
        check("gatttool --char-read fff2: 'ble-hci' (%s)" % hexval(r), hexval(r) == b"ble-hci".hex(), show=r)
        r = run(base + ["--char-write-req", "-a", "0x%04x" % chars["fff2"][1], "-n", b"bluez".hex()], timeout=40)
        check("gatttool --char-write-req fff2=bluez: written", "written successfully" in r.out, show=r)
        r = read("fff2")
        check("gatttool --char-read fff2 after the write: 'bluez' (%s)" % hexval(r), hexval(r) == b"bluez".hex(), show=r)
    if "ffe1" in chars:
        r = read("ffe1")
        check("gatttool --char-read ffe1: 'read only' (%s)" % hexval(r), hexval(r) == b"read only".hex(), show=r)
        r = run(base + ["--char-write-req", "-a", "0x%04x" % chars["ffe1"][1], "-n", "00"], timeout=40)
        check("gatttool --char-write-req ffe1: refused, Write Not Permitted (0x03 = gatttool's \"Attribute can't be written\")",
              "can't be written" in (r.out + r.err) and "successfully" not in r.out, show=r)
    if "fff1" in chars:
        r = read("fff1")
        check("gatttool --char-read fff1: refused, Read Not Permitted (0x02 = \"Attribute can't be read\")",
              "can't be read" in (r.out + r.err), show=r)
    pw = [x for x in per.events() if x.get("event") == "write" and x.get("uuid") == "fff2"]
    check("peripheral: printed BlueZ's write (%s)" % (pw[-1] if pw else None), bool(pw) and pw[-1].get("value") == b"bluez".hex())
    run(["hciconfig", h1, "down"], timeout=20)
    rc = per.stop(signal.SIGINT)
    check("peripheral (BlueZ session): SIGINT before --duration ends -> exit 130 (interrupted; docs/cli.md)", rc == 130, show=per.result())


def section5():
    h0, h1, i1 = STATE["h0"], STATE["h1"], STATE["i1"]
    addr = STATE["addr0"]
    log("=== 5. BlueZ's host pairing (kernel SMP via mgmt) with ble-hci peripheral --profile secure on %s" % h0)
    # Bondable (keys distributed and kept) and Secure Connections allowed, as bluetoothd sets them.
    for setting in ("bondable", "sc", "power"):
        r = run(["btmgmt", "--index", str(i1), setting, "on"], timeout=20)
        if not check("btmgmt --index %d %s on" % (i1, setting), r.rc == 0, show=r):
            return
    modes = (("LE legacy", ["--legacy"]), ("LE Secure Connections", []))
    for mode, extra in [m for m in modes if m[0] in os.environ.get("VM_SMP_MODES", "LE legacy,LE Secure Connections").split(",")]:
        capture = os.path.join(os.environ.get("BLE_HCI_VM_SHARE", "/tmp"), "smp-%s.pcap" % mode.replace(" ", "-"))
        per = Background([BIN, "-t", h0, "-w", capture, "peripheral", "--profile", "secure", "--json",
                          "--bonds", "/tmp/vm-bonds-" + mode.replace(" ", "-")] + extra, "peripheral-smp")
        STATE["peripheral"] = per
        if not check("peripheral --profile secure %s on %s advertising" % (" ".join(extra), h0),
                     bool(per.wait_for(lambda e: [x for x in e if x.get("event") == "advertising"], 30)), show=per.result()):
            per.stop()
            return
        # NoInputNoOutput (Just Works) to the LE public address. This kernel asks user space to
        # confirm even Just Works (mgmt User Confirmation Request, hint 1), which `btmgmt pair`
        # leaves unanswered: mgmt_pair answers it as bluetoothd's agent would.
        status, lines = mgmt_pair(i1, addr)
        check("%s: mgmt Pair Device %s -> status 0x00 (%s)" % (mode, addr, "; ".join(lines)), status == 0)
        got = per.wait_for(lambda e: [x for x in e if x.get("event") in ("paired", "pairingFailed")], 15)
        paired = [x for x in (got or []) if x.get("event") == "paired"]
        check("%s: the peripheral reports paired, justWorks, secureConnections=%s, bonded (%s)" % (mode, mode != "LE legacy", got),
              bool(paired) and paired[0].get("secureConnections") == (mode != "LE legacy") and paired[0].get("method") == "justWorks"
              and paired[0].get("bonded") is True)
        # The kernel keeps the key: gatttool at security level medium encrypts with it and reads ff01.
        r = run(["gatttool", "-i", h1, "-b", addr, "-t", "public", "--sec-level", "medium", "--char-read", "--uuid", "ff01"], timeout=40)
        check("%s: gatttool --sec-level medium --char-read --uuid ff01: 'secret'" % mode,
              b"secret".hex() in r.out.replace(" ", ""), show=r)
        run(["btmgmt", "--index", str(i1), "unpair", "-t", "1", addr], timeout=20)
        rc = per.stop(signal.SIGINT)
        check("peripheral (%s): SIGINT -> exit 0" % mode, rc == 0, show=per.result())
        STATE.pop("peripheral", None)
    run(["btmgmt", "--index", str(i1), "power", "off"], timeout=20)


# <bluetooth/bluetooth.h>, <bluetooth/l2cap.h>: socket options and struct sockaddr_l2.
BTPROTO_L2CAP, SOL_BLUETOOTH, BT_SECURITY, BT_RCVMTU, BT_MODE = 0, 274, 4, 13, 15
BT_SECURITY_MEDIUM, BT_MODE_EXT_FLOWCTL, BDADDR_LE_PUBLIC = 2, 0x04, 1


def sockaddr_l2(address, psm):
    """struct sockaddr_l2: family, PSM, bdaddr (little-endian), CID 0, LE public address type."""
    bd = bytes(reversed(bytes.fromhex(address.replace(":", "")))) if address else bytes(6)
    return ctypes.create_string_buffer(struct.pack("<HH6sHBx", AF_BLUETOOTH, psm, bd, 0, BDADDR_LE_PUBLIC), 14)


def ecred_socket(peer, psm, rcvmtu, timeout=30.0):
    """An LE L2CAP socket in enhanced credit-based mode connected to peer's psm (kernel:
    l2cap_sock_setsockopt BT_MODE needs enable_ecred). Returns the socket; raises OSError."""
    s = socket.socket(AF_BLUETOOTH, socket.SOCK_SEQPACKET, BTPROTO_L2CAP)
    try:
        local = sockaddr_l2(None, 0)
        if libc.bind(s.fileno(), local, 14) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "bind: " + os.strerror(e))
        s.setsockopt(SOL_BLUETOOTH, BT_MODE, bytes([BT_MODE_EXT_FLOWCTL]))
        s.setsockopt(SOL_BLUETOOTH, BT_SECURITY, bytes([BT_SECURITY_MEDIUM, 0]))
        s.setsockopt(SOL_BLUETOOTH, BT_RCVMTU, struct.pack("<H", rcvmtu))
        s.setblocking(False)
        if libc.connect(s.fileno(), sockaddr_l2(peer, psm), 14) != 0 and ctypes.get_errno() != errno.EINPROGRESS:
            e = ctypes.get_errno()
            raise OSError(e, "connect: " + os.strerror(e))
        _, w, _ = select.select([], [s], [], timeout)
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if not w or err:
            raise OSError(err or errno.ETIMEDOUT, "connect to %s PSM 0x%04x: %s" % (peer, psm, os.strerror(err or errno.ETIMEDOUT)))
        return s
    except BaseException:
        s.close()
        raise


def exchange(s, pdu, timeout=10.0):
    """Sends one ATT PDU as one SDU and returns the next SDU (b"" when none came in time)."""
    s.send(bytes(pdu))
    r, _, _ = select.select([s], [], [], timeout)
    return s.recv(4096) if r else b""


def enable_ecred():
    """Linux 6.1 keeps ECRED behind the bluetooth module's enable_ecred (off unless
    CONFIG_BT_LE_L2CAP_ECRED, which Debian's config lacks); bluetoothd's EATT needs it too."""
    param = "/sys/module/bluetooth/parameters/enable_ecred"
    try:
        with open(param, "w") as f:
            f.write("Y")
        with open(param) as f:
            on = f.read().strip() == "Y"
    except OSError as e:
        on = False
        log("%s: %s" % (param, e))
    return check("the kernel's enhanced credit-based mode is on (%s = Y)" % param, on)


def section6():
    h0, h1, i1 = STATE["h0"], STATE["h1"], STATE["i1"]
    addr = STATE["addr0"]
    log("=== 6. the kernel's enhanced credit-based channels (EATT client) against ble-hci peripheral --eatt on %s" % h0)
    if not enable_ecred():
        return
    for setting in ("bondable", "sc", "power"):
        r = run(["btmgmt", "--index", str(i1), setting, "on"], timeout=20)
        if not check("btmgmt --index %d %s on" % (i1, setting), r.rc == 0, show=r):
            return
    capture = os.path.join(SHARE, "eatt.pcap")
    per = Background([BIN, "-t", h0, "-w", capture, "peripheral", "--profile", "demo", "--eatt", "--json",
                      "--bonds", "/tmp/vm-bonds-eatt"], "peripheral-eatt")
    STATE["peripheral"] = per
    if not check("peripheral --profile demo --eatt on %s advertising" % h0,
                 bool(per.wait_for(lambda e: [x for x in e if x.get("event") == "advertising"], 30)), show=per.result()):
        return
    # EATT needs an encrypted link (Core v5.4 Vol 3 Part G 5.3.2): pair first, then the socket's
    # security level medium makes the kernel encrypt with the key before it opens the channel.
    status, lines = mgmt_pair(i1, addr)
    if not check("EATT: mgmt Pair Device %s -> status 0x00 (%s)" % (addr, "; ".join(lines)), status == 0):
        return
    try:
        s = ecred_socket(addr, 0x0027, 64)
    except OSError as e:
        check("EATT: the kernel opens an enhanced credit-based channel to PSM 0x0027 (MTU 64)", False, str(e), show=per.result())
        kernel_log()
        return
    with s:
        check("EATT: the kernel opens an enhanced credit-based channel to PSM 0x0027 (MTU 64)", True)
        # Read Request (0x0A) of Device Name, handle 0x0003 (Generic Access comes first): Read Response (0x0B).
        r = exchange(s, [0x0A, 0x03, 0x00])
        check("EATT: Read Request of handle 0x0003 -> Read Response 'ble-hci' (%s)" % r.hex(), r == b"\x0b" + b"ble-hci")
        # Part F 3.4.2.1: Exchange MTU is not sent on an Enhanced ATT bearer: Error Response,
        # Request Not Supported (0x06).
        r = exchange(s, [0x02, 0x05, 0x02])
        check("EATT: Exchange MTU Request -> Error Response 0x06 (%s)" % r.hex(), r == bytes([0x01, 0x02, 0x00, 0x00, 0x06]))
        # Find Information over all handles: as many 16-bit pairs as fit in ATT_MTU (Part F
        # 3.4.3.2), which is the smaller of the channel's MTUs (Part G 5.3.1): 64 now.
        find = [0x04, 0x01, 0x00, 0xFF, 0xFF]
        before = exchange(s, find)
        check("EATT: Find Information Response within ATT_MTU 64 (%d octets)" % len(before),
              before[:1] == b"\x05" and 6 <= len(before) <= 64)
        # The kernel sends a Credit Based Reconfigure Request (l2cap_chan_reconfigure) and
        # deletes the channel if the answer is not success (l2cap_ecred_reconf_rsp).
        s.setsockopt(SOL_BLUETOOTH, BT_RCVMTU, struct.pack("<H", 300))
        after = exchange(s, find)
        check("EATT: after BT_RCVMTU 300 (Credit Based Reconfigure) the channel lives and the answer grows (%d -> %d octets)"
              % (len(before), len(after)), after[:1] == b"\x05" and len(after) > len(before) and len(after) <= 300)
    run(["btmgmt", "--index", str(i1), "unpair", "-t", "1", addr], timeout=20)
    rc = per.stop(signal.SIGINT)
    check("peripheral --eatt: SIGINT -> exit 0", rc == 0, show=per.result())
    STATE.pop("peripheral", None)
    run(["btmgmt", "--index", str(i1), "power", "off"], timeout=20)


def section7():
    h0, h1, addr = STATE["h0"], STATE["h1"], STATE["addr0"]
    log("=== 7. bluetoothd (BlueZ %s) with EATT against ble-hci peripheral --eatt on %s" % (
        run(["/usr/libexec/bluetooth/bluetoothd", "--version"], timeout=10).out.strip(), h0))
    if not enable_ecred():
        return
    # The root is the host's, read-only: bluetoothd keeps its bonds on a tmpfs, the bus is the guest's own.
    r = run(["mount", "-t", "tmpfs", "tmpfs", "/var/lib/bluetooth"], timeout=10)
    if not check("a tmpfs on /var/lib/bluetooth for bluetoothd", r.rc == 0, show=r):
        return
    os.makedirs("/run/dbus", exist_ok=True)
    r = run(["dbus-daemon", "--system", "--fork", "--print-pid"], timeout=20)
    if not check("dbus-daemon --system", r.rc == 0 and r.out.strip().isdigit(), show=r):
        return
    bus = int(r.out.strip())
    capture = os.path.join(SHARE, "bluetoothd-eatt.pcap")
    # The peripheral first: its user channel holds hci0, so bluetoothd takes only hci1.
    per = Background([BIN, "-t", h0, "-w", capture, "peripheral", "--profile", "demo", "--eatt", "--json",
                      "--bonds", "/tmp/vm-bonds-bluetoothd"], "peripheral-bluetoothd")
    STATE["peripheral"] = per
    if not check("peripheral --profile demo --eatt on %s advertising" % h0,
                 bool(per.wait_for(lambda e: [x for x in e if x.get("event") == "advertising"], 30)), show=per.result()):
        return
    btd = Background(["/usr/libexec/bluetooth/bluetoothd", "-n", "-d"], "bluetoothd")
    try:
        time.sleep(3)
        script = ["power on", 1, "scan le", 6, "scan off", 1, "pair " + addr, 10, "connect " + addr, 8, "quit"]
        ctl = subprocess.Popen(["bluetoothctl", "--agent", "NoInputNoOutput"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for step in script:
            if isinstance(step, int):
                time.sleep(step)
            else:
                ctl.stdin.write((step + "\n").encode())
                ctl.stdin.flush()
        try:
            out = ctl.communicate(timeout=20)[0].decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            ctl.kill()
            out = ctl.communicate()[0].decode("utf-8", "replace")
        shown = Result("bluetoothctl " + "; ".join(x for x in script if isinstance(x, str)), ctl.returncode, out, "", 0)
        check("bluetoothd: bluetoothctl pair %s -> Pairing successful" % addr, "Pairing successful" in out, show=shown)
        check("bluetoothd: bluetoothctl connect %s -> Connection successful" % addr, "Connection successful" in out, show=shown)
        # bluetoothd's own account (its debug log): each enhanced bearer it attached.
        eatt = btd.err().count("EATT channel connected") + btd.out().count("EATT channel connected")
        check("bluetoothd: 'EATT channel connected' twice (Channels = 3 by default: two Enhanced ATT bearers), %d" % eatt,
              eatt == 2, show=btd.result())
        paired = per.wait_for(lambda e: [x for x in e if x.get("event") == "paired"], 5)
        check("peripheral --eatt: paired with bluetoothd (%s)" % paired, bool(paired))
    finally:
        btd.stop(signal.SIGTERM)
        os.kill(bus, signal.SIGTERM)
    rc = per.stop(signal.SIGINT)
    check("peripheral --eatt (bluetoothd): SIGINT -> exit 0", rc == 0, show=per.result())
    STATE.pop("peripheral", None)


def main():
    log("ble-hci CLI on the real kernel: %s (sections %s), kernel %s" % (BIN, ",".join(sorted(SECTIONS)), os.uname().release))
    if not check("binary %s exists" % BIN, os.access(BIN, os.X_OK)):
        return 1
    r = run([BIN, "--version"], timeout=20)
    check("ble-hci --version", r.rc == 0, r.out.strip(), show=r)
    try:
        if section1():
            for n, fn in (("2", section2), ("3", section3), ("4", section4), ("5", section5), ("6", section6), ("7", section7)):
                if n in SECTIONS:
                    try:
                        fn()
                    except Exception as e:  # a bug in this script, or an unexpected state: report, go on
                        import traceback
                        traceback.print_exc()
                        check("section %s ran to its end" % n, False, repr(e))
                    per = STATE.pop("peripheral", None)
                    if per is not None and per.p.poll() is None:
                        per.stop(signal.SIGKILL)
        else:
            check("sections 2-7 need the two vhci adapters of section 1", False, "not run")
    finally:
        ctl = STATE.get("controllers")
        if ctl is not None:
            rc = ctl.stop(signal.SIGINT)
            check("controllers: SIGINT -> exit 0", rc == 0, show=ctl.result())
            time.sleep(0.5)
            gone = [d for d in (STATE.get("h0"), STATE.get("h1")) if d and d in sys_adapters()]
            check("controllers: the vhci adapters are gone after exit (%s left)" % gone, not gone)
    print("%s cli_tests: %d passed, %d failed" % (ts(), len(PASSED), len(FAILED)))
    for f in FAILED:
        print("      FAILED: " + f)
    return min(len(FAILED), 100)


if __name__ == "__main__":
    sys.exit(main())
