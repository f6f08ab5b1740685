"""`make soak`: one long-lived `ble-hci peripheral` serves 1 000 connections in sequence, and its
memory is sampled every 100 (docs/performance.md, "Soak").

    .venv/bin/python Tools/soak/soak.py --bin .build/release/ble-hci
        [--connections 1000] [--every 100] [--warmup 200] [--slack-kb 64] [--bound-bytes 256]
        [--wrap 'valgrind --tool=massif ...'] [--at-sample CMD] [--keep DIR] [--rows FILE]

What runs, all on loopback: `ble-hci controllers` (our virtual controller, five listeners on
127.0.0.1), `ble-hci -w FILE peripheral --bonds DIR` on the first (the process measured), and
on the others the centrals, one connection at a time:
  - three Bumble centrals in this process, each on its own controller:
      A  a new random static address every connection, never pairs (a passer-by);
      B  pairs and bonds once, then encrypts from the bond on every later connection;
      C  forgets its keys and pairs afresh every connection (the peripheral replaces the bond);
    each connects, exchanges MTU (every other connection), discovers everything, subscribes to
    fff1, reads fff2, ffe1 and fff2's User Description, writes fff2 and reads it back, waits
    for a notification from fff1 (every other connection: the ticker sends one a second),
    unsubscribes and disconnects;
  - every tenth connection a `ble-hci central` process (our own stack as the peer): it reads
    the whole tree, or pairs once and encrypts from its bond afterwards (`--pair --bonds`), or
    reads, writes and waits for a notification.
After each connection the peripheral's own `disconnected` event is awaited, so the next one
starts on an idle peripheral. Any failure names the connection number, the central and the
step, and exits 1.

Every --every connections (and once before the first) the peripheral's VmRSS, RssAnon and
RssFile (/proc/PID/status), open descriptors and threads are printed as a table row, with the
capture's size and the load average. The run fails (exit 1) when, between the sample at
--warmup and the last one, RssAnon grows by more than --slack-kb plus --bound-bytes per
connection (64 kB + 256 B × 800 = 264 kB by default: a link's smallest object set is larger
than 256 B, so a leak of one per connection fails; docs/performance.md says why), or the
descriptors or threads are more than they were at --warmup (plus 2 threads: the runtime's pool
may start one late).
--at-sample runs a shell command at each sample with SOAK_PID and SOAK_CONNECTIONS set (under
--wrap 'valgrind --tool=massif --vgdb=yes': `vgdb --pid=$SOAK_PID detailed_snapshot FILE`).
"""
import argparse
import asyncio
import json
import os
import random
import shlex
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bumble"))

from bumble import hci  # noqa: E402
from bumble.core import UUID  # noqa: E402
from bumble.device import Device, Peer  # noqa: E402
from bumble.keys import MemoryKeyStore  # noqa: E402
from bumble.pairing import PairingConfig, PairingDelegate  # noqa: E402
from bumble.transport import open_transport  # noqa: E402

import common  # noqa: E402

TICKER, NAME, READ_ONLY, USER_DESCRIPTION = UUID("fff1"), UUID("fff2"), UUID("ffe1"), UUID("2901")
PERIPHERAL_NAME = "soak"
STEP_TIMEOUT = 10.0  # seconds for any one step of a connection (the notification wait: 3)


class SoakError(Exception):
    """A failed step; the message names the connection, the central and the cause."""


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Process:
    """A child process whose stdout (JSON lines) is read as it comes and stderr goes to a file."""

    def __init__(self, name: str, argv: list, work: str):
        self.name, self.argv = name, argv
        self.stderr_path = os.path.join(work, f"{name}.stderr")
        self.events: asyncio.Queue = asyncio.Queue()
        self.proc = None
        self.reader = None

    async def start(self) -> "Process":
        self.stderr_file = open(self.stderr_path, "ab")
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=self.stderr_file)
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        while line := await self.proc.stdout.readline():
            try:
                event = json.loads(line)
            except ValueError:
                event = {"event": "text", "text": line.decode(errors="replace").rstrip()}
            self.handle(event)
        self.handle({"event": "exit"})

    def handle(self, event: dict) -> None:
        self.events.put_nowait(event)

    def stderr_tail(self, lines: int = 5) -> str:
        try:
            with open(self.stderr_path, "rb") as f:
                text = f.read().decode(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def died(self) -> str | None:
        if self.proc is None or self.proc.returncode is None:
            return None
        return f"{self.name} exited with status {self.proc.returncode} (stderr: {self.stderr_tail()})"

    async def wait_for(self, kind: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SoakError(f"{self.name} printed no {kind} event within {timeout:.0f} s "
                                f"(stderr: {self.stderr_tail()})")
            try:
                event = await asyncio.wait_for(self.events.get(), remaining)
            except asyncio.TimeoutError:
                continue
            if event.get("event") == kind:
                return event
            if event.get("event") == "exit":
                await self.proc.wait()
                raise SoakError(self.died() or f"{self.name} closed its stdout")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 15)
            except asyncio.TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self.reader is not None:
            await asyncio.gather(self.reader, return_exceptions=True)
        if self.proc is not None:
            self.stderr_file.close()


class Peripheral(Process):
    """The measured process: counts its connections and disconnections from its JSON events."""

    def __init__(self, argv: list, work: str):
        super().__init__("peripheral", argv, work)
        self.connected = 0
        self.disconnected = 0
        self.changed = asyncio.Event()
        self.counts: dict = {}

    def handle(self, event: dict) -> None:
        kind = event.get("event")
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if kind == "connected":
            self.connected += 1
        elif kind == "disconnected":
            self.disconnected += 1
        elif kind in ("advertising", "exit", "text"):
            super().handle(event)
        self.changed.set()

    async def wait_disconnected(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self.disconnected < count:
            if (death := self.died()) is not None:
                raise SoakError(death)
            self.changed.clear()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SoakError(f"the peripheral reported {self.disconnected} disconnections, not "
                                f"{count}, {timeout:.0f} s after the central's")
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass


def sample(pid: int) -> dict:
    """The peripheral's memory, descriptors and threads now (kB, counts)."""
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "Threads"):
                fields[key] = int(value.split()[0])
    fields["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    with open("/proc/loadavg") as f:
        fields["load"] = f.read().split()[0]
    return fields


async def step(what: str, awaitable, timeout: float = STEP_TIMEOUT):
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise SoakError(f"{what}: no answer within {timeout:.0f} s") from None
    except SoakError:
        raise
    except Exception as error:  # noqa: BLE001 - every failure names its step
        raise SoakError(f"{what}: {type(error).__name__}: {error}") from None


class BumbleCentral:
    """One Bumble device on its own controller, kept for the whole run."""

    def __init__(self, label: str, transport_spec: str, security: str):
        self.label, self.spec, self.security = label, transport_spec, security
        self.bonded = False

    async def open(self) -> None:
        self.transport = await open_transport(self.spec)
        address = common.random_static_address()
        self.device = Device.with_hci(f"soak-{self.label}", address,
                                      self.transport.source, self.transport.sink)
        self.device.keystore = MemoryKeyStore()
        self.device.pairing_config_factory = lambda _connection: PairingConfig(
            sc=True, mitm=False, bonding=True,
            # The identity is the static address it connects from (Bumble would give its
            # controller's public address, which the peripheral could not match to this one).
            identity_address_type=hci.Address.RANDOM_DEVICE_ADDRESS,
            delegate=PairingDelegate(io_capability=PairingDelegate.NO_OUTPUT_NO_INPUT))
        await self.device.power_on()

    async def close(self) -> None:
        await self.transport.close()

    async def new_address(self) -> None:
        address = common.random_static_address()
        await self.device.send_command(hci.HCI_LE_Set_Random_Address_Command(random_address=address),
                                       check_result=True)
        self.device.random_address = self.device.static_address = address

    async def connection(self, n: int, target: hci.Address) -> None:
        device = self.device
        if self.security == "new-address":
            await step("set a new random address", self.new_address())
        connection = await step(f"connect to {target}",
                                device.connect(target, own_address_type=hci.OwnAddressType.RANDOM,
                                               timeout=STEP_TIMEOUT), STEP_TIMEOUT + 2)
        disconnected = asyncio.get_running_loop().create_future()
        connection.on("disconnection", lambda reason: disconnected.done() or disconnected.set_result(reason))
        try:
            peer = Peer(connection)
            if n % 2:
                await step("exchange MTU 247", peer.request_mtu(247))
            if self.security == "bond-once":
                if self.bonded:
                    await step("encrypt from the bond", connection.encrypt())
                else:
                    await step("pair (bond)", connection.pair())
                    self.bonded = True
            elif self.security == "pair-always":
                await device.keystore.delete(str(connection.peer_address))
                await step("pair afresh (the peripheral replaces its bond)", connection.pair())
            await step("discover services, characteristics, descriptors", peer.discover_all())
            chars = {c.uuid: c for s in peer.services for c in s.characteristics}
            for uuid in (TICKER, NAME, READ_ONLY):
                if uuid not in chars:
                    raise SoakError(f"discovery: no characteristic {uuid} (found {sorted(map(str, chars))})")
            values: asyncio.Queue = asyncio.Queue()
            await step("subscribe to fff1", peer.subscribe(chars[TICKER], values.put_nowait))
            await step("read fff2", peer.read_value(chars[NAME]))
            await step("read ffe1", peer.read_value(chars[READ_ONLY]))
            await step("discover fff2's descriptors", chars[NAME].discover_descriptors())
            for d in chars[NAME].descriptors:
                if d.type == USER_DESCRIPTION:
                    await step("read fff2's User Description", peer.read_value(d))
            written = f"soak {n}".encode()
            await step("write fff2", peer.write_value(chars[NAME], written, with_response=True))
            back = await step("read fff2 back", peer.read_value(chars[NAME]))
            if bytes(back) != written:
                raise SoakError(f"fff2 read back {bytes(back)!r} after writing {written!r}")
            if n % 2 == 0:
                await step("wait for a notification of fff1", values.get(), 3)
            await step("unsubscribe from fff1", peer.unsubscribe(chars[TICKER], values.put_nowait))
        finally:
            if not disconnected.done() and connection.handle in device.connections:
                await step("disconnect", connection.disconnect())
        reason = await step("wait for the disconnection", disconnected)
        if reason != hci.HCI_CONNECTION_TERMINATED_BY_LOCAL_HOST_ERROR:
            raise SoakError(f"disconnected with reason 0x{reason:02x} "
                            f"({hci.HCI_Constant.error_name(reason)}), not 0x16")


class CLICentral:
    """`ble-hci central` as a new process per connection (our own stack as the peer)."""

    def __init__(self, binary: str, spec: str, work: str):
        self.binary, self.spec, self.work = binary, spec, work
        self.label = "ble-hci central"
        self.bonds = os.path.join(work, "bonds-central")
        self.unbonded = os.path.join(work, "bonds-central-none")
        os.makedirs(self.bonds)
        os.makedirs(self.unbonded)

    async def connection(self, n: int, target: hci.Address) -> None:
        address = f"{common.address_string(target)}/{common.address_type_string(target)}"
        kind = (n // 10) % 3
        if kind == 0:
            actions = ["--bonds", self.unbonded]                       # whole tree, every value
        elif kind == 1:
            actions = ["--pair", "--bonds", self.bonds, "--read", "fff2"]  # pairs once, then encrypts
        else:
            actions = ["--bonds", self.unbonded, "--mtu", "23", "--read", "ffe1",
                       "--write", f"fff2={f'cli {n}'.encode().hex()}", "--read", "fff2",
                       "--subscribe", "fff1", "--count", "1", "--duration", "3"]
        argv = [self.binary, "--json", "-t", self.spec, "central", address, "--timeout", "10", *actions]
        proc = Process(f"central-{n}", argv, self.work)
        await proc.start()
        events = []
        try:
            code = await asyncio.wait_for(proc.proc.wait(), 30)
        except asyncio.TimeoutError:
            await proc.stop()
            raise SoakError(f"{shlex.join(argv)} did not end within 30 s") from None
        await proc.reader
        while not proc.events.empty():
            events.append(proc.events.get_nowait())
        if code != 0:
            raise SoakError(f"{shlex.join(argv)} exited with status {code} "
                            f"(stderr: {proc.stderr_tail()}; last events: {events[-3:]})")
        kinds = {e.get("event") for e in events}
        if not {"connected", "disconnected"} <= kinds:
            raise SoakError(f"{shlex.join(argv)} printed {sorted(k for k in kinds if k)}, "
                            f"not connected and disconnected")
        if kind == 1 and not kinds & {"paired", "encrypted"}:
            raise SoakError(f"{shlex.join(argv)} neither paired nor encrypted "
                            f"(printed {sorted(k for k in kinds if k)})")
        os.remove(proc.stderr_path)


def captured(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def row(n: int, s: dict, elapsed: float, capture: int) -> str:
    return (f"| {n:>5} | {s['VmRSS']:>7} | {s['RssAnon']:>7} | {s['RssFile']:>7} | {s['fds']:>3} | "
            f"{s['Threads']:>7} | {capture // 1024:>8} | {elapsed:>6.0f} | {s['load']:>4} |")


async def soak(args) -> int:
    work = args.keep or tempfile.mkdtemp(prefix="ble-hci-soak.")
    os.makedirs(work, exist_ok=True)
    log(f"soak: work directory {work}")
    binary = os.path.abspath(args.bin)
    if not os.access(binary, os.X_OK):
        log(f"soak: {binary} is not an executable; build it (swift build -c release --product ble-hci) or pass --bin")
        return common.EXIT_USAGE
    listeners = 5  # peripheral, Bumble A, B, C, ble-hci central
    # Instant mode (issue 29's airtime off): the soak measures memory per connection, not timing.
    controllers = Process("controllers", [binary, "--json", "controllers", "--airtime", "off",
                                          *[a for _ in range(listeners) for a in ("--listen", "tcp:127.0.0.1:0")]], work)
    peripheral = None
    centrals: list = []
    rows: list = []
    failure = None
    try:
        await controllers.start()
        specs = []
        for _ in range(listeners):
            event = await controllers.wait_for("listening", 15)
            specs.append(event["spec"])
        if not all(s.startswith("tcp:127.0.0.1:") for s in specs):
            raise SoakError(f"controllers listen on {specs}, not on loopback")
        capture = os.path.join(work, "peripheral.btsnoop")
        bonds = os.path.join(work, "bonds-peripheral")
        os.makedirs(bonds)
        wrap = shlex.split(args.wrap) if args.wrap else []
        capturing = [] if args.no_capture else ["-w", capture]
        peripheral = Peripheral([*wrap, binary, "--json", "-t", specs[0], *capturing, "peripheral",
                                 "--name", PERIPHERAL_NAME, "--bonds", bonds], work)
        await peripheral.start()
        advertising = await peripheral.wait_for("advertising", 60 if wrap else 15)
        target = common.parse_address(advertising["address"], advertising["addressType"])
        log(f"soak: peripheral pid {peripheral.proc.pid} advertising as {target} on {specs[0]}, capture {capture}")

        bumble = [BumbleCentral("A", f"tcp-client:{specs[1][4:]}", "new-address"),
                  BumbleCentral("B", f"tcp-client:{specs[2][4:]}", "bond-once"),
                  BumbleCentral("C", f"tcp-client:{specs[3][4:]}", "pair-always")]
        for c in bumble:
            await step(f"open Bumble central {c.label} on {c.spec}", c.open(), 20)
            centrals.append(c)
        cli = CLICentral(binary, specs[4], work)

        await asyncio.sleep(1)
        start = time.monotonic()
        header = ("| conns | VmRSS kB | RssAnon kB | RssFile kB | fds | threads | capture kB | s | load |\n"
                  "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        print(header, flush=True)
        first = sample(peripheral.proc.pid)
        rows.append((0, first))
        print(row(0, first, 0, captured(capture)), flush=True)
        await at_sample(args.at_sample, peripheral.proc.pid, 0)
        for n in range(1, args.connections + 1):
            central = cli if n % 10 == 0 else bumble[n % 3]
            try:
                await central.connection(n, target)
                await peripheral.wait_disconnected(n, 15 if not wrap else 120)
            except SoakError as error:
                raise SoakError(f"connection {n} ({central.label}): {error}") from None
            if (death := peripheral.died()) is not None:
                raise SoakError(f"connection {n}: {death}")
            if n % args.every == 0:
                s = sample(peripheral.proc.pid)
                rows.append((n, s))
                print(row(n, s, time.monotonic() - start, captured(capture)), flush=True)
                await at_sample(args.at_sample, peripheral.proc.pid, n)
        log(f"soak: {args.connections} connections in {time.monotonic() - start:.0f} s; "
            f"peripheral events: {dict(sorted(peripheral.counts.items()))}")
    except SoakError as error:
        failure = str(error)
    finally:
        for c in centrals:
            await asyncio.gather(c.close(), return_exceptions=True)
        if peripheral is not None:
            await peripheral.stop()
        await controllers.stop()
        if args.rows:
            with open(args.rows, "w") as f:
                json.dump([{"connections": n, **s} for n, s in rows], f)
    if failure is not None:
        log(f"soak: FAILED: {failure}")
        log(f"soak: logs and the capture kept in {work}")
        return common.EXIT_FAILED
    verdict = judge(rows, args)
    if verdict is not None:
        log(f"soak: FAILED: {verdict}")
        log(f"soak: logs and the capture kept in {work}")
        return common.EXIT_FAILED
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return common.EXIT_OK


async def at_sample(command: str | None, pid: int, n: int) -> None:
    if not command:
        return
    proc = await asyncio.create_subprocess_shell(
        command, env={**os.environ, "SOAK_PID": str(pid), "SOAK_CONNECTIONS": str(n)})
    if await proc.wait() != 0:
        raise SoakError(f"--at-sample after connection {n}: {command!r} exited with status {proc.returncode}")


def judge(rows: list, args) -> str | None:
    """None when the growth after the warm-up is within the bounds, else what exceeded them."""
    base = next(((n, s) for n, s in rows if n >= args.warmup), None)
    n1, last = rows[-1]
    if base is None or base[0] == n1:
        log(f"soak: no samples after the warm-up of {args.warmup} connections: growth not judged")
        return None
    n0, s0 = base
    growth = last["RssAnon"] - s0["RssAnon"]
    bound = args.slack_kb + args.bound_bytes * (n1 - n0) // 1024
    log(f"soak: after the warm-up ({n0} → {n1} connections): RssAnon {growth:+d} kB "
        f"({growth * 1024 / (n1 - n0):+.0f} B per connection; bound {bound} kB), "
        f"VmRSS {last['VmRSS'] - s0['VmRSS']:+d} kB, fds {s0['fds']} → {last['fds']}, "
        f"threads {s0['Threads']} → {last['Threads']}")
    if growth > bound:
        return (f"RssAnon grew {growth} kB between connection {n0} and {n1}, more than the "
                f"{bound} kB bound ({growth * 1024 / (n1 - n0):.0f} B per connection): find what "
                f"stays alive with Tools/soak/census.c (docs/performance.md, \"Soak\")")
    if last["fds"] > s0["fds"]:
        return f"open descriptors grew from {s0['fds']} to {last['fds']} after connection {n0}"
    if last["Threads"] > s0["Threads"] + 2:
        return f"threads grew from {s0['Threads']} to {last['Threads']} after connection {n0}"
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", required=True, help="the ble-hci binary (a release build)")
    parser.add_argument("--connections", type=int, default=1000, help="connections in all (default 1000)")
    parser.add_argument("--every", type=int, default=100, help="sample every N connections (default 100)")
    parser.add_argument("--warmup", type=int, default=200,
                        help="connections before the growth is judged (default 200)")
    parser.add_argument("--slack-kb", type=int, default=64,
                        help="RssAnon growth after the warm-up always allowed, kB (default 64)")
    parser.add_argument("--bound-bytes", type=int, default=256,
                        help="and per connection after the warm-up, bytes (default 256)")
    parser.add_argument("--wrap", help="a command the peripheral runs under (valgrind ...); the "
                        "memory figures are then the wrapper's")
    parser.add_argument("--no-capture", action="store_true",
                        help="run the peripheral without -w (to see what the capture costs)")
    parser.add_argument("--at-sample", help="shell command run at each sample, with SOAK_PID and "
                        "SOAK_CONNECTIONS in its environment")
    parser.add_argument("--keep", help="work directory to use and keep (logs, capture, bonds)")
    parser.add_argument("--rows", help="write the samples as JSON to this file")
    parser.add_argument("--seed", type=int, help="seed of the random addresses")
    args = parser.parse_args()
    if args.connections < 1 or args.every < 1:
        parser.error("--connections and --every must be positive")
    if args.seed is not None:
        random.seed(args.seed)
    try:
        code = asyncio.run(soak(args))
    except KeyboardInterrupt:
        code = common.EXIT_FAILED
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
