#!/usr/bin/python3
"""Generate docs/tutorial.md from docs/tutorial.template.md, and docs/tutorial.zh-Hans.md from
docs/tutorial.zh-Hans.template.md, with REAL `ble-hci` output (the same captures for both).

    Tools/docs/generate-tutorial.sh            # regenerate both tutorials
    Tools/docs/generate-tutorial.sh --check    # exit 1 if either is stale

Every packet excerpt comes from captures made by this script, on this machine, right now:
  demo   `ble-hci demo -w`                 (both sides, in-process link; docs/flow-demo-*.svg drawn from them)
  band*  `ble-hci controllers` + `peripheral --profile band` + `central --profile band`, each -w
  pp/pc* `ble-hci controllers` + `peripheral` (profile demo) + four `central` runs, each -w
  eatt*  `ble-hci controllers` + `peripheral --eatt` + `central --eatt 2`, each -w
The Chinese tutorial also shows `--lang zh-Hans` runs of `demo`, `central --discover` and
`dump --flow`; every other run is in English whatever the caller's locale.
Packets are chosen by content (first ATT Read By Group Type Request, ...), never by index.

The doc replaces times with <time>. --check regenerates into memory and compares after also
masking what legitimately changes between runs: packet numbers (#N, fragment lists; the order of
Number Of Completed Packets events is racy), the demo's notification values (the current second)
and random addresses. The ble-hci binary: $BLE_HCI, else `swift build --show-bin-path`.
Traffic stays on 127.0.0.1 (ports picked free by the kernel).
"""
import json, os, re, signal, socket, subprocess, sys, tempfile, time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# (template, output): English, and Simplified Chinese (issue #28), filled from the same captures
TUTORIALS = [(os.path.join(ROOT, "docs", t), os.path.join(ROOT, "docs", o)) for t, o in
             (("tutorial.template.md", "tutorial.md"), ("tutorial.zh-Hans.template.md", "tutorial.zh-Hans.md"))]
# Every run in English unless it says `--lang zh-Hans`, whatever the caller's locale
# (POSIX: an empty LC_ALL or LC_MESSAGES counts as unset).
ENV = dict(os.environ, LC_ALL="", LC_MESSAGES="", LANG="C.UTF-8")
BAND_DATE = "2026-03-14"
LONG_TEXT = b"The quick brown fox jumps over the lazy dog, twice: the quick brown fox!"

TIME_RE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
CLOCK_RE = re.compile(r"\b\d\d:\d\d:\d\d\.\d{3}\b")


def die(msg):
    print(f"generate-tutorial: {msg}", file=sys.stderr)
    sys.exit(2)


def binary():
    b = os.environ.get("BLE_HCI")
    if b:
        return b
    swift = os.environ.get("SWIFT", "swift")
    path = subprocess.run([swift, "build", "--show-bin-path"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout.strip()
    b = os.path.join(path, "ble-hci")
    if not os.access(b, os.X_OK):
        die(f"{b} not built: run `swift build` (or set BLE_HCI)")
    return b


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port):
    want = f":{port:04X}"
    try:
        with open("/proc/net/tcp") as f:
            return any(l.split()[1].endswith(want) and l.split()[3] == "0A" for l in f.readlines()[1:])
    except OSError:
        return False


def wait_for(pred, what, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        if pred():
            return
        time.sleep(0.05)
    die(f"timed out waiting for {what}")


class Capture:
    """One capture file: its text dump (per --layers) and its JSON dump."""

    def __init__(self, ble, path):
        self.ble, self.path, self.text = ble, path, {}
        out = self.run("", as_json=True)
        self.packets = [json.loads(l) for l in out.splitlines() if l.strip()]
        self.by_index = {p["index"]: p for p in self.packets}
        for idx, lines in self.blocks().items():  # the human summary line, for selecting by name
            if idx in self.by_index:
                self.by_index[idx]["_head"] = re.sub(r"^#\d+ \S+ [→←] ", "", lines[0])

    def run(self, layers, as_json=False):
        args = [self.ble, "dump", self.path] + (["--layers", layers] if layers else [])
        args += ["--json"] if as_json else []
        return subprocess.run(args, check=True, capture_output=True, text=True, env=ENV).stdout

    def blocks(self, layers=""):
        if layers not in self.text:
            out, blocks, cur = self.run(layers), {}, None
            for line in out.splitlines():
                m = re.match(r"#(\d+) ", line)
                if m:
                    cur = int(m.group(1))
                    blocks[cur] = []
                if cur is not None:
                    blocks[cur].append(line)
            self.text[layers] = blocks
        return self.text[layers]

    def find(self, pred, after=0, nth=0, what="packet"):
        hits = [p["index"] for p in self.packets if p["index"] > after and pred(p)]
        if len(hits) <= nth:
            die(f"{os.path.basename(self.path)}: no {what} (after #{after})")
        return hits[nth]

    def block(self, idx, layers=""):
        return "\n".join(self.blocks(layers)[idx])


# --- predicates on `dump --json` objects -------------------------------------------------
def att(name, **fields):
    def pred(p):
        a = p.get("att") or {}
        return a.get("name") == name and all(a.get(k) == v for k, v in fields.items())
    return pred


def gatt_uuid(uuid):
    return lambda p: (p.get("gatt") or {}).get("uuid") == uuid or \
        (p.get("gatt") or {}).get("characteristic") == uuid


def both(*preds):
    return lambda p: all(f(p) for f in preds)


def hci(name):
    """HCI command or event by the summary line's name (`HCI Command Disconnect`, `... LE Meta: X`)."""
    return lambda p: p.get("_head", "") in (f"HCI Command {name}", f"HCI Event {name}", f"HCI Event LE Meta: {name}")


def cmd_complete(name):
    return lambda p: p.get("_head", "") == f"HCI Event Command Complete ({name})"


def adv_report(kind):
    """an advertising report whose event type is `kind` (0x0013 ADV_IND, 0x001b SCAN_RSP to ADV_IND)"""
    return lambda p: any(r.get("eventType") == kind for r in (p.get("hci") or {}).get("reports", []))


def sent(p):
    return p["direction"] == "sent"


def received(p):
    return p["direction"] == "received"


def l2cap_frame_with(pred_fn):
    return lambda p: pred_fn(p) and len((p.get("l2cap") or {}).get("fragments", [])) > 1


# --- running the tool ----------------------------------------------------------------------
class Runner:
    def __init__(self, ble, tmp):
        self.ble, self.tmp, self.procs = ble, tmp, []

    def spawn(self, name, args):
        log = open(os.path.join(self.tmp, name + ".log"), "w")
        p = subprocess.Popen([self.ble] + args, stdout=log, stderr=subprocess.STDOUT, env=ENV)
        self.procs.append(p)
        return p

    def log(self, name):
        with open(os.path.join(self.tmp, name + ".log")) as f:
            return f.read()

    def run(self, name, args, timeout=60):
        r = subprocess.run([self.ble] + args, capture_output=True, text=True, timeout=timeout, env=ENV)
        with open(os.path.join(self.tmp, name + ".log"), "w") as f:
            f.write(r.stdout + r.stderr)
        if r.returncode != 0:
            die(f"`ble-hci {' '.join(args)}` exited {r.returncode}:\n{r.stdout}{r.stderr}")
        return r.stdout

    def stop(self, p):
        # Ctrl-C, then SIGTERM, then SIGKILL (captures are flushed record by record)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
            if p.poll() is not None:
                return
            p.send_signal(sig)
            try:
                p.wait(2)
            except subprocess.TimeoutExpired:
                pass

    def cleanup(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def path(self, name):
        return os.path.join(self.tmp, name + ".pcap")

    def session(self, tag, profile, centrals, peripheral_args=()):
        """controllers + one peripheral + centrals run one after the other."""
        p1, p2 = free_port(), free_port()
        ctl = self.spawn(f"{tag}-controllers", ["controllers", "--listen", f"tcp:127.0.0.1:{p1}",
                                                "--listen", f"tcp:127.0.0.1:{p2}"])
        wait_for(lambda: listening(p1) and listening(p2), "the virtual controllers")
        per = self.spawn(f"{tag}-peripheral", ["-t", f"tcp:127.0.0.1:{p1}", "-w", self.path(f"{tag}-peripheral"),
                                               "peripheral", "--profile", profile, "--duration", "60"]
                         + list(peripheral_args))
        wait_for(lambda: "Advertising as" in self.log(f"{tag}-peripheral"), "the peripheral to advertise")
        outs = []
        for i, args in enumerate(centrals):
            outs.append(self.run(f"{tag}-central{i}", ["-t", f"tcp:127.0.0.1:{p2}", "-w",
                                                       self.path(f"{tag}-central{i}"), "central"] + args))
        self.stop(per)
        self.stop(ctl)
        return outs


def fence(text, lang="text"):
    return f"```{lang}\n{text.rstrip()}\n```"


def build(ble, tmp):
    r = Runner(ble, tmp)
    try:
        demo_out = r.run("demo", ["demo", "-w", r.path("demo")])
        zh_demo_out = r.run("demo-zh", ["--lang", "zh-Hans", "demo"])  # its human lines, for the Chinese tutorial
        band_out = r.session("band", "band", [["name:ble-hci", "--profile", "band", "--date", BAND_DATE]])[0]
        long_hex = LONG_TEXT.hex()
        pc_out = r.session("pp", "demo", [
            ["name:ble-hci", "--discover"],
            ["name:ble-hci", "--mtu", "23", "--write", f"fff2={long_hex}", "--read", "fff2",
             "--write-without-response", "fff2=6869", "--read", "fff2"],
            ["name:ble-hci", "--write", f"fff2={long_hex}{long_hex}", "--read", "fff2"],
            ["name:ble-hci", "--discover", "--lang", "zh-Hans"],  # the Chinese tutorial's attribute table
        ])
        # security: Just Works Secure Connections, then legacy against a peripheral with privacy
        # (bonds in the temporary directory, never the user's)
        # no --pair: the read's Insufficient Authentication makes the central pair, encrypt and retry
        sec_out = r.session("sec", "secure", [["name:ble-hci", "--read", "ff01", "--bonds", os.path.join(tmp, "sec-cb")]],
                            peripheral_args=["--bonds", os.path.join(tmp, "sec-pb")])[0]
        r.session("leg", "secure", [["name:ble-hci", "--pair", "--legacy", "--read", "ff01", "--bonds", os.path.join(tmp, "leg-cb")]],
                  peripheral_args=["--bonds", os.path.join(tmp, "leg-pb"), "--privacy"])
        eatt_out = r.session("eatt", "demo", [["name:ble-hci", "--eatt", "2", "--read", "fff2", "--read", "ffe1",
                                               "--bonds", os.path.join(tmp, "eatt-cb")]],
                             peripheral_args=["--eatt", "--bonds", os.path.join(tmp, "eatt-pb")])[0]
    finally:
        r.cleanup()
    cap = {n: Capture(ble, r.path(n)) for n in
           ["demo", "band-peripheral", "band-central0", "pp-peripheral", "pp-central0", "pp-central1", "pp-central2",
            "sec-peripheral", "sec-central0", "leg-central0", "eatt-central0"]}
    S = fill(cap, demo_out, band_out, pc_out)
    S.update(fill_security(cap, sec_out))
    S.update(fill_eatt(ble, r, cap["eatt-central0"], eatt_out))
    # sequence diagrams of both sides of the demo (`demo -w X.pcap` also writes X-peripheral.pcap)
    svgs = {}
    for side, path in (("central", r.path("demo")), ("peripheral", r.path("demo-peripheral"))):
        out = os.path.join(tmp, f"flow-demo-{side}.svg")
        subprocess.run([ble, "dump", path, "--svg", out], check=True, capture_output=True, env=ENV)
        with open(out) as f:
            svgs[f"flow-demo-{side}.svg"] = f.read()
    for key, lang, subscribe in (("flow_excerpt", "en", " subscribe "), ("zh_flow_excerpt", "zh-Hans", " 订阅 ")):
        flow = subprocess.run([ble, "--lang", lang, "dump", r.path("demo"), "--flow", "--layers", "att,gatt"], check=True,
                              capture_output=True, text=True, env=ENV).stdout.splitlines()
        sub = next(i for i, l in enumerate(flow) if l.startswith("── ") and subscribe in l)
        S[key] = fence("\n".join(flow[:3] + ["  ..."] + flow[sub:]))
    S["zh_demo_outline"] = demo_outline(zh_demo_out)
    return S, svgs


def demo_outline(demo_out):
    """the demo's step headings and CoreBluetooth lines (no values: they vary)"""
    return fence("\n".join(l for l in demo_out.splitlines() if l.startswith("──") or "CoreBluetooth:" in l))


def fill(cap, demo_out, band_out, pc_out):
    d, bp, bc = cap["demo"], cap["band-peripheral"], cap["band-central0"]
    pp, pc1, pc2 = cap["pp-peripheral"], cap["pp-central1"], cap["pp-central2"]
    S = {}

    def ex(c, *idxs, layers=""):
        return fence("\n".join(c.block(i, layers) for i in idxs))

    S["demo_outline"] = demo_outline(demo_out)
    # bring-up
    i = d.find(cmd_complete("LE Read Buffer Size [v2]"), what="LE Read Buffer Size")
    S["buffer_size"] = ex(d, i)
    # scanning
    sp = d.find(hci("LE Set Extended Scan Parameters"), what="scan parameters")
    se = d.find(both(hci("LE Set Extended Scan Enable"), lambda p: p["hci"].get("enable") == "0x01"))
    S["scan_cmds"] = ex(d, sp, se)
    adv = d.find(adv_report("0x0013"), what="ADV_IND report")
    rsp = d.find(adv_report("0x001b"), what="scan response report")
    S["adv_report"] = ex(d, adv)
    S["scan_rsp"] = ex(d, rsp)
    # connecting
    cc = d.find(hci("LE Extended Create Connection"), what="create connection")
    st = d.find(lambda p: (p.get("hci") or {}).get("name") == "Command Status", after=cc)
    done = d.find(hci("LE Enhanced Connection Complete"), after=cc)
    S["connect"] = ex(d, cc, st, done)
    # MTU
    mreq = d.find(att("Exchange MTU Request"))
    mrsp = d.find(att("Exchange MTU Response"))
    S["mtu"] = ex(d, mreq, mrsp)
    nocp = d.find(hci("Number Of Completed Packets"), after=mreq)
    S["nocp"] = ex(d, nocp)
    # services
    g1 = d.find(att("Read By Group Type Request"))
    frag = d.find(lambda p: (p.get("l2cap") or {}).get("fragment") == 1, after=g1)
    g1r = d.find(att("Read By Group Type Response"))
    S["rbgt"] = ex(d, g1)
    S["rbgt_rsp"] = ex(d, frag, g1r)
    g2 = d.find(att("Read By Group Type Request"), after=g1r)
    g2e = d.find(att("Error Response"), after=g2)
    S["rbgt_end"] = ex(d, g2, g2e, layers="att")
    # characteristics: the Read By Type 0x2803 response with the most entries
    rbt = [p for p in d.packets if (p.get("att") or {}).get("name") == "Read By Type Response"
           and (p.get("gatt") or {}).get("requestType") == "2803"]
    best = max(rbt, key=lambda p: (len(p["att"]["attributeDataList"]), -p["index"]))
    req = max(q["index"] for q in d.packets if q["index"] < best["index"]
              and (q.get("att") or {}).get("name") == "Read By Type Request")
    S["rbt_2803"] = ex(d, req, best["index"])
    inc = d.find(att("Read By Type Request", type="2802"))
    S["rbt_2802"] = ex(d, inc, d.find(att("Error Response"), after=inc), layers="att,gatt")
    # the user's service
    svc_req = d.find(both(att("Read By Type Request", type="2803"),
                          lambda p: p["att"]["startHandle"] == next(
                              s["handle"] for q in d.packets for s in (q.get("gatt") or {}).get("services", [])
                              if s.get("uuid") == "fff0")))
    S["rbt_fff0"] = ex(d, d.find(att("Read By Type Response"), after=svc_req), layers="att,gatt")
    # descriptors
    fi = d.find(both(att("Find Information Response"), lambda p: any(
        x.get("characteristic") == "fff1" for x in (p.get("gatt") or {}).get("descriptors", []))))
    fireq = max(q["index"] for q in d.packets if q["index"] < fi
                and (q.get("att") or {}).get("name") == "Find Information Request")
    S["find_info"] = ex(d, fireq, fi, layers="att,gatt")
    # reads
    rr = d.find(both(att("Read Request"), gatt_uuid("2a00")))
    S["read"] = ex(d, rr, d.find(att("Read Response"), after=rr))
    # long read (MTU 23)
    pr = pc1.find(both(att("Read Request"), gatt_uuid("fff2")))
    blobs = [p["index"] for p in pc1.packets if p["index"] > pr and (p.get("att") or {}).get("name", "").startswith("Read Blob")]
    S["read_blob"] = ex(pc1, pr, pc1.find(att("Read Response"), after=pr), *blobs[:2], layers="att,gatt")
    S["read_blob_count"] = str(len([b for b in blobs if pc1.by_index[b]["att"]["name"] == "Read Blob Request"]))
    # the client's MTU (--mtu 23) is in the request; the response carries the server's
    mreq1 = pc1.find(att("Exchange MTU Request"))
    S["pc1_mtu"] = ex(pc1, mreq1, pc1.find(att("Exchange MTU Response"), after=mreq1), layers="att")
    # writes
    wr = d.find(both(att("Write Request"), gatt_uuid("fff2")))
    S["write"] = ex(d, wr, d.find(att("Write Response"), after=wr))
    pw = [p["index"] for p in pc1.packets if (p.get("att") or {}).get("name", "").startswith("Prepare Write")]
    xw = [p["index"] for p in pc1.packets if (p.get("att") or {}).get("name", "").startswith("Execute Write")]
    S["prepare_write"] = ex(pc1, *pw[:4], layers="att")
    S["execute_write"] = ex(pc1, *xw, layers="att")
    S["prepare_count"] = str(len([i for i in pw if pc1.by_index[i]["att"]["name"] == "Prepare Write Request"]))
    S["write_cmd"] = ex(pc1, pc1.find(att("Write Command")))
    # errors
    we = d.find(both(att("Error Response"), lambda p: p["att"].get("errorCode", "").startswith("0x03")))
    wq = max(q["index"] for q in d.packets if q["index"] < we and (q.get("att") or {}).get("name") == "Write Request")
    S["write_not_permitted"] = ex(d, wq, we, layers="att,gatt")
    re_ = d.find(both(att("Error Response"), lambda p: p["att"].get("errorCode", "").startswith("0x02")))
    rq = max(q["index"] for q in d.packets if q["index"] < re_ and (q.get("att") or {}).get("name") == "Read Request")
    S["read_not_permitted"] = ex(d, rq, re_, layers="att,gatt")
    # notifications
    cw = d.find(both(att("Write Request"), lambda p: (p.get("gatt") or {}).get("meaning") == "enable notifications"))
    S["cccd_on"] = ex(d, cw, d.find(att("Write Response"), after=cw))
    S["notification"] = ex(d, d.find(att("Handle Value Notification")))
    off = d.find(both(att("Write Request"), gatt_uuid("2902")), after=cw)
    S["cccd_off"] = ex(d, off, layers="att,gatt")
    # disconnect
    dc = d.find(hci("Disconnect"))
    S["disconnect"] = ex(d, dc, d.find(lambda p: (p.get("hci") or {}).get("name") == "Command Status", after=dc),
                         d.find(hci("Disconnection Complete"), after=dc))
    # peripheral side
    S["gatt_tree"] = fence(pc_out[0])
    S["zh_gatt_tree"] = fence(pc_out[3])
    names = ["LE Set Extended Advertising Parameters", "LE Set Extended Advertising Data",
             "LE Set Extended Scan Response Data", "LE Set Extended Advertising Enable"]
    S["adv_cmds"] = ex(pp, *[pp.find(hci(n), what=n) for n in names])
    S["adv_param_complete"] = ex(pp, pp.find(cmd_complete("LE Set Extended Advertising Parameters")))
    pcc = pp.find(hci("LE Enhanced Connection Complete"))
    S["periph_connected"] = ex(pp, pcc, pp.find(hci("LE Advertising Set Terminated"), after=pcc))
    pg = pp.find(att("Read By Group Type Request"))
    S["periph_rbgt"] = ex(pp, pg, *[i for i in [pp.find(att("Read By Group Type Response"), after=pg)]], layers="hci,l2cap,att")
    prr = pp.find(both(att("Read Request"), gatt_uuid("fff2")))
    S["periph_read"] = ex(pp, prr, pp.find(att("Read Response"), after=prr), layers="att,gatt")
    S["periph_write_cmd"] = ex(pp, pp.find(att("Write Command")), layers="att,gatt")
    # fragmentation
    big_w = pc2.find(both(sent, l2cap_frame_with(att("Write Request"))), what="fragmented Write Request")
    big_r = pc2.find(both(received, l2cap_frame_with(att("Read Response"))), what="fragmented Read Response")
    S["frag_write"] = ex(pc2, *pc2.by_index[big_w]["l2cap"]["fragments"], layers="hci,l2cap")
    S["frag_read"] = ex(pc2, *pc2.by_index[big_r]["l2cap"]["fragments"], layers="hci,l2cap,att")
    S["frag_write_n"] = str(len(pc2.by_index[big_w]["l2cap"]["fragments"]))
    # band
    S["band_central_out"] = fence("\n".join(band_out.splitlines()[:10] + ["  ..."]))
    hist = bc.find(both(att("Write Request"), lambda p: (p["att"].get("value") or "").startswith("ba02")))
    S["band_history_write"] = ex(bc, hist, layers="att,gatt")
    notes = [p for p in bc.packets if p["index"] > hist and (p.get("att") or {}).get("name") == "Handle Value Notification"]
    S["band_first_notes"] = ex(bc, *[p["index"] for p in notes[:2]])
    S["band_last_note"] = ex(bc, notes[-1]["index"], layers="att")
    S["band_table"] = band_table(notes)
    S["band_periph_notes"] = ex(bp, *[p["index"] for p in bp.packets if (p.get("att") or {}).get("name") ==
                                     "Handle Value Notification"][1:3], layers="hci,l2cap,att")
    return S


def smp(name):
    return lambda p: (p.get("smp") or {}).get("name") == name


def retry_flow(c):
    """The encrypted read's path in `dump --flow`: from the read step whose Read Request got
    Insufficient Authentication to the retried read's response (flow-control events and ACL
    fragments left out: they are bookkeeping, and their number depends on timing)."""
    flow = subprocess.run([c.ble, "dump", c.path, "--flow", "--layers", "att,smp,hci"], check=True,
                          capture_output=True, text=True).stdout.splitlines()
    err = next((i for i, l in enumerate(flow) if "Insufficient Authentication (0x05)" in l), None)
    done = next((i for i in range(err or 0, len(flow)) if "ATT Read Response" in flow[i]), None)
    if err is None or done is None or not any("── " in l and " pair " in l for l in flow[err:done]):
        die("the secure profile's read was not refused, paired and retried: " + c.path)
    start = max(i for i in range(err) if flow[i].startswith("── "))
    return "\n".join(l for l in flow[start:done + 1] if "Number Of Completed Packets" not in l and "ACL handle" not in l)


def fill_security(cap, sec_out):
    """The security chapter: one Just Works Secure Connections pairing (both sides' captures) and
    the key distribution of a legacy one."""
    c, p, leg = cap["sec-central0"], cap["sec-peripheral"], cap["leg-central0"]
    S = {}

    def ex(cp, *idxs, layers="smp"):
        return fence("\n".join(cp.block(i, layers) for i in idxs))
    S["sec_central_out"] = fence("\n".join(l for l in sec_out.splitlines() if "paired with" in l or l.startswith("read ")))
    S["sec_retry_flow"] = fence(retry_flow(c))
    req = c.find(smp("Pairing Request"), what="Pairing Request")
    S["sec_features"] = ex(c, req, c.find(smp("Pairing Response"), after=req))
    pk = [q["index"] for q in c.packets if (q.get("smp") or {}).get("name") == "Pairing Public Key"]
    S["sec_public_keys"] = ex(c, *pk[:2])
    conf = c.find(smp("Pairing Confirm"), what="Pairing Confirm")
    rnd = [q["index"] for q in c.packets if q["index"] > conf and (q.get("smp") or {}).get("name") == "Pairing Random"]
    S["sec_confirm_random"] = ex(c, conf, *rnd[:2])
    chk = [q["index"] for q in c.packets if (q.get("smp") or {}).get("name") == "Pairing DHKey Check"]
    S["sec_dhkey_check"] = ex(c, *chk[:2])
    en = c.find(hci("LE Enable Encryption"), what="LE Enable Encryption")
    S["sec_enable_encryption"] = ex(c, en, c.find(hci("Encryption Change"), after=en), layers="hci")
    ltk = p.find(hci("LE Long Term Key Request"), what="LTK request")
    S["sec_ltk_request"] = ex(p, ltk, p.find(hci("LE Long Term Key Request Reply"), after=ltk),
                              p.find(hci("Encryption Change"), after=ltk), layers="hci")
    sig = [q["index"] for q in c.packets if (q.get("smp") or {}).get("name") == "Signing Information"]
    S["sec_signing"] = ex(c, *sig)
    names = ["Encryption Information", "Central Identification", "Identity Information",
             "Identity Address Information", "Signing Information"]
    S["sec_legacy_keys"] = ex(leg, *[leg.find(both(received, smp(n)), what=n) for n in names])
    return S


def signaling(name):
    return lambda p: (p.get("signaling") or {}).get("name") == name


def fill_eatt(ble, r, c, out):
    """The EATT chapter: two Enhanced ATT bearers opened by one Credit Based Connection
    Request, and the reads spread over them."""
    S = {"eatt_central_out": fence("\n".join(l for l in out.splitlines() if l.startswith(("Enhanced ATT", "read "))))}
    req = c.find(signaling("Credit Based Connection Request"), what="Credit Based Connection Request")
    rsp = c.find(signaling("Credit Based Connection Response"), after=req, what="Credit Based Connection Response")
    S["eatt_connect"] = fence("\n".join(c.block(i, "l2cap") for i in (req, rsp)))
    reads = [q["index"] for q in c.packets if (q.get("att") or {}).get("name") == "Read Request"
             and (q.get("l2cap") or {}).get("channel") == "EATT"]
    S["eatt_reads"] = fence("\n".join(c.block(i, "l2cap,att") for i in reads[:2]))
    flow = subprocess.run([ble, "dump", r.path("eatt-central0"), "--flow", "--layers", "l2cap,att"], check=True,
                          capture_output=True, text=True).stdout.splitlines()
    start = next(i for i, l in enumerate(flow) if l.startswith("── ") and " EATT bearers " in l)
    end = next(i for i, l in enumerate(flow) if i > start and l.startswith("── "))
    S["eatt_flow"] = fence("\n".join(flow[start:end]))
    return S


def crc16(data):
    crc = 0xFFFF
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def band_table(notes):
    """The central's reassembly, redone here from the capture's notification values."""
    rows, buf, frame_len = [], b"", None
    for n, p in enumerate(notes, 1):
        v = bytes.fromhex(p["att"]["value"])
        buf += v
        if frame_len is None and len(buf) >= 4:
            frame_len = 4 + int.from_bytes(buf[2:4], "little") + 2
        rows.append(f"| {n} | {len(v)} | {len(buf)} of {frame_len} | `{v.hex()}` |")
        if frame_len is not None and len(buf) >= frame_len:
            break
    body, got = buf[:frame_len - 2], int.from_bytes(buf[frame_len - 2:frame_len], "little")
    magic, command, length = buf[0], buf[1], int.from_bytes(buf[2:4], "little")
    head = ["| notification | value octets | collected | value |", "|---|---|---|---|"]
    tail = [f"\nHeader: magic `0x{magic:02x}`, command `0x{command:02x}`, length {length} → frame of "
            f"4 + {length} + 2 = {frame_len} octets. CRC field `0x{got:04x}` (little-endian), "
            f"CRC-16/CCITT-FALSE of the first {frame_len - 2} octets `0x{crc16(body):04x}`: "
            f"{'match' if crc16(body) == got else 'MISMATCH'}."]
    return "\n".join(head + rows + tail)


def render(S, template):
    with open(template) as f:
        tpl = f.read()
    missing = set()

    def sub(m):
        key = m.group(1)
        if key not in S:
            missing.add(key)
            return m.group(0)
        return S[key]
    out = re.sub(r"\{\{(\w+)\}\}", sub, tpl)
    if missing:
        die(f"template placeholders with no generator: {', '.join(sorted(missing))}")
    out = TIME_RE.sub("<time>", out)
    out = CLOCK_RE.sub("<time>", out)
    header = (f"<!-- GENERATED by Tools/docs/generate-tutorial.sh from docs/{os.path.basename(template)}: "
              "edit the template, then run `make docs`. -->\n")
    return header + out


def volatile(text):
    """Mask what may differ between two correct runs (used by --check only)."""
    text = re.sub(r" *#\d+", "#N", text)
    text = re.sub(r"[+-]\d+\.\d{6}", "+T", text)      # flow diagrams: seconds since the first packet
    text = re.sub(r"= 3\d3\d\b", "= VOLATILE", text)  # flow labels of the demo's notifications
    text = re.sub(r"(frameStart: )\d+", r"\1N", text)
    text = re.sub(r"(fragments: )\[[\d, ]+\]", r"\1[N]", text)
    # how many packets one Number Of Completed Packets reports depends on when the controller
    # sends it (Core Vol 4 Part E 7.7.19 lets it combine; ours waits for half its buffers or 5 ms)
    text = re.sub(r"(numCompletedPackets: )\d+", r"\1N", text)
    text = re.sub(r"([0-9A-F]{2}:){5}[0-9A-F]{2}( \(random\)|/random)", r"RANDOM\2", text)
    # security chapter: keys, nonces and check values are fresh random numbers in every pairing
    text = re.sub(r"\b(publicKeyX|publicKeyY|confirmValue|randomValue|dhKeyCheck|longTermKey|signatureKey|"
                  r"identityResolvingKey): [0-9a-f]+", r"\1: VOLATILE", text)
    text = re.sub(r"\b(ediv|rand|randomNumber|encryptedDiversifier): 0x[0-9a-f]+", r"\1: VOLATILE", text)
    # the demo's fff1 notifications carry the current second as two ASCII digits
    text = re.sub(r"(Handle Value Notification\n(?:    .*\n)*?    handle: \d+\n    value: )3\d3\d(\n  GATT\n    handle: \d+\n    uuid: fff1)",
                  r"\1VOLATILE\2", text)
    text = re.sub(r"(Handle Value Notification\n(?:(?:    |  ).*\n)*?    value: )3\d3\d\n", r"\1VOLATILE\n", text)
    return text


def svg_content(svg):
    """What an SVG diagram draws, without where: the order of racing packets (Number Of Completed
    Packets, the central's stop-scan vs create-connection) differs between runs, moving rows and
    renumbering steps and sometimes splitting one (the peripheral's connection events around its
    stop-advertising command). So the distinct rows are compared as a set, without y coordinates,
    heights, step numbers or the step count."""
    svg = volatile(svg)
    svg = re.sub(r'\b(y|y1|y2|cy)="\d+"', r'\1=""', svg)
    svg = re.sub(r'\b(height="|viewBox="0 0 \d+ )\d+"', r'\1H"', svg)
    svg = re.sub(r'(<tspan font-weight="bold">)\d+\.', r'\1N.', svg)
    svg = re.sub(r'in \d+ steps', 'in N steps', svg)
    # The virtual controller reports completed packets when half its buffers are done or 5 ms
    # after the first (Core Vol 4 Part E 7.7.19), so how many such events a run has varies.
    svg = re.sub(r'flow: \d+ packets', 'flow: N packets', svg)
    return sorted(set(svg.splitlines()))


def main():
    check = "--check" in sys.argv[1:]
    ble = binary()
    with tempfile.TemporaryDirectory(prefix="ble-hci-tutorial-") as tmp:
        # Bonds, history and the privacy IRK of runs without --bonds go here, not to this
        # machine's ~/.local/state: the output does not depend on what earlier runs left.
        os.environ["XDG_STATE_HOME"] = os.path.join(tmp, "state")
        S, svgs = build(ble, tmp)
        docs = [(output, render(S, template)) for template, output in TUTORIALS]
    if check:
        stale = False
        for name, svg in svgs.items():
            try:
                with open(os.path.join(ROOT, "docs", name)) as f:
                    have = f.read()
            except FileNotFoundError:
                have = ""
            if svg_content(have) != svg_content(svg):
                old_lines, new_lines = set(svg_content(have)), set(svg_content(svg))
                for line in sorted(old_lines - new_lines)[:8]:
                    print(f"  - {line[:160]}", file=sys.stderr)
                for line in sorted(new_lines - old_lines)[:8]:
                    print(f"  + {line[:160]}", file=sys.stderr)
                print(f"docs/{name} is stale: run `make docs` and commit it", file=sys.stderr)
                stale = True
        for output, doc in docs:
            name = os.path.relpath(output, ROOT)
            try:
                with open(output) as f:
                    old = f.read()
            except FileNotFoundError:
                print(f"{name} is missing: run `make docs`", file=sys.stderr)
                stale = True
                continue
            if volatile(old) != volatile(doc):
                import difflib
                sys.stderr.writelines(difflib.unified_diff(volatile(old).splitlines(True), volatile(doc).splitlines(True),
                                                           name, "regenerated", n=2))
                print(f"{name} is stale: run `make docs` and commit it", file=sys.stderr)
                stale = True
        if stale:
            return 1
        print(" and ".join(os.path.relpath(o, ROOT) for o, _ in docs) + " are up to date")
        return 0
    for output, doc in docs:
        with open(output, "w") as f:
            f.write(doc)
        print(f"wrote {os.path.relpath(output, ROOT)}")
    for name, svg in svgs.items():
        with open(os.path.join(ROOT, "docs", name), "w") as f:
            f.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
