"""Rootcanal (Android's virtual Bluetooth controller, PyPI `rootcanal`) as a test peer.

Starts the `rootcanal` binary that the PyPI package ships, on four TCP ports picked free on
127.0.0.1 a moment before (Rootcanal has no "port 0" and no bind address: it listens on
0.0.0.0, so only ever connect to it on 127.0.0.1), waits until it listens on all of them, and
serves its HCI port through a relay on 127.0.0.1 (a port the kernel picks, so no race), then
prints one machine-readable line:

    python Tools/rootcanal/serve.py [--timeout 600]
    -> {"event":"ready","hci_port":41235,"rootcanal_hci_port":...,"test_port":...,
        "link_port":...,"link_ble_port":...,"version":"1.10.0","pid":1234}

Every TCP connection to hci_port is a new LE + BR/EDR controller on one shared virtual radio
(H4 framing), with a public address of its own; it is removed when the connection closes.

Why the relay: Rootcanal writes an H4 packet's type octet and the rest in two writes without
TCP_NODELAY, so the rest waits for the ACK of the first octet, which a reader on Linux delays
by up to 40 ms (delayed ACK): ~40 ms per event, seconds per GATT discovery. The relay copies the
octets unchanged both ways and acknowledges at once (TCP_QUICKACK after every read).

A port taken by someone else between the pick and Rootcanal's bind: Rootcanal logs "Error
binding" and goes on without it, so this script stops it and tries fresh ports (3 times).
Any failure is one line {"event":"error","message":...} and exit status 1. Rootcanal's own
log goes to stderr (without its start-up list of excluded commands).

The binary dies with this script (PR_SET_PDEATHSIG); with BLE_HCI_EXIT_ON_STDIN_EOF=1 (the
Swift TestSupport sets it) this script exits as soon as its stdin reaches EOF, so a test process
that dies leaves nothing running; it exits by itself after --timeout seconds in any case.
"""
import argparse
import ctypes
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

EXIT_OK, EXIT_FAILED = 0, 1
PR_SET_PDEATHSIG = 1
PORT_NAMES = ("test_port", "hci_port", "link_port", "link_ble_port")


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}, separators=(",", ":")), flush=True)


def fail(message: str) -> None:
    emit("error", message=message)
    sys.stdout.flush()
    os._exit(EXIT_FAILED)


def binary_and_version():
    try:
        import importlib.metadata
        import rootcanal.binaries
    except ImportError as error:
        fail(f"the Python package rootcanal is not installed in {sys.prefix} ({error}): "
             "run `make deps` (Tools/setup.sh installs rootcanal as pinned in Tools/requirements.txt)")
    path = rootcanal.binaries.get_package_binary_resource_path("rootcanal")
    if not os.access(path, os.X_OK):
        fail(f"rootcanal's package has no binary for this platform at {path} "
             "(it ships linux-x86_64 and macos-x86_64 only)")
    return path, importlib.metadata.version("rootcanal")


def free_ports(count: int):
    """`count` distinct ports the kernel gave to sockets bound on 127.0.0.1 at the same time."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def die_with_parent() -> None:
    """In the child before exec: killed when this script ends, and SIGTERM not blocked (a mask
    inherited from the test process blocked it, so Rootcanal waited for SIGKILL)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def start(binary: str, ports, deadline: float):
    """Starts Rootcanal on `ports`; returns (process, None) once it listens on all of them, or
    (None, reason) when it cannot."""
    arguments = [binary] + [item for name, port in zip(PORT_NAMES, ports) for item in (f"-{name}", str(port))]
    try:
        process = subprocess.Popen(arguments, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    except OSError as error:
        return None, f"cannot run {binary}: {error}"
    lines: "queue.Queue[str | None]" = queue.Queue()

    def pump():
        for raw in process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if "command validation failed" not in line:
                print(line, file=sys.stderr, flush=True)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    waiting = {str(p) for p in ports}
    tail = []
    while waiting:
        try:
            line = lines.get(timeout=max(0.05, deadline - time.monotonic()))
        except queue.Empty:
            line = ""
        if line is None or time.monotonic() > deadline:
            stop(process)
            what = "exited" if line is None else "did not listen in time"
            return None, f"rootcanal {what} (status {process.poll()}); its last output: " + " | ".join(tail[-8:])
        tail.append(line)
        if "Error binding" in line:
            stop(process)
            return None, line.strip()
        for port in list(waiting):
            if f"Listening on: {port} " in line or line.endswith(f"Listening on: {port}"):
                waiting.discard(port)
    return process, None


def pump(source: socket.socket, sink: socket.socket, quick_ack: bool) -> None:
    """Copies octets from `source` to `sink` until either closes; then closes both."""
    try:
        while True:
            data = source.recv(65536)
            if quick_ack:
                source.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    for s in (source, sink):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def relay(listener: socket.socket, rootcanal_port: int) -> None:
    """Accepts hosts on `listener`; each gets its own connection (its own controller) to Rootcanal."""
    while True:
        try:
            host, _ = listener.accept()
        except OSError:
            return
        try:
            controller = socket.create_connection(("127.0.0.1", rootcanal_port), timeout=5)
            controller.settimeout(None)
        except OSError as error:
            print(f"relay: cannot reach Rootcanal's HCI port {rootcanal_port}: {error}", file=sys.stderr, flush=True)
            host.close()
            continue
        for s in (host, controller):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        controller.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        threading.Thread(target=pump, args=(host, controller, False), daemon=True).start()
        threading.Thread(target=pump, args=(controller, host, True), daemon=True).start()


def stop(process) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def watch_stdin(on_eof) -> None:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except Exception:  # noqa: BLE001 - any failure means the parent is gone
        pass
    on_eof()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="stop Rootcanal and exit after this many seconds (default 600)")
    parser.add_argument("--start-timeout", type=float, default=15.0,
                        help="seconds Rootcanal may take to listen (default 15)")
    args = parser.parse_args()
    signal.pthread_sigmask(signal.SIG_SETMASK, [])  # SIGTERM reaches this script whatever the parent blocked
    binary, version = binary_and_version()

    process, reason = None, None
    for _ in range(3):
        process, reason = start(binary, free_ports(len(PORT_NAMES)), time.monotonic() + args.start_timeout)
        if process is not None:
            break
    if process is None:
        fail(f"Rootcanal {version} ({binary}) could not start: {reason}")

    done = threading.Event()
    if os.environ.get("BLE_HCI_EXIT_ON_STDIN_EOF") == "1":
        threading.Thread(target=watch_stdin, args=(done.set,), daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    ports = dict(zip(PORT_NAMES, [int(a) for a in process.args[2::2]]))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    threading.Thread(target=relay, args=(listener, ports["hci_port"]), daemon=True).start()
    ports["rootcanal_hci_port"] = ports.pop("hci_port")
    emit("ready", version=version, pid=process.pid, hci_port=listener.getsockname()[1], **ports)
    deadline = time.monotonic() + args.timeout
    code = EXIT_OK
    while not done.wait(timeout=0.2):
        if process.poll() is not None:
            emit("error", message=f"rootcanal exited by itself with status {process.returncode}")
            code = EXIT_FAILED
            break
        if time.monotonic() > deadline:
            emit("timeout", seconds=args.timeout)
            break
    stop(process)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
