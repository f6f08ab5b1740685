"""Records the capture fixtures Tests/Fixtures/bumble-{central,peripheral}.btsnoop.

Runs Bumble's two virtual controllers (controllers.py), peripheral.py on one and central.py on
the other, each with Bumble's snooper (BUMBLE_SNOOPER=btsnoop:file:PATH, see bumble/snoop.py)
recording its side of the HCI traffic: scan, connect, MTU exchange (247), discovery with reads,
a long read (600 bytes), a write, a refused write, a subscription with 3 notifications,
disconnect. Prints the JSON events of both peers on stdout.

    .venv/bin/python Tools/bumble/capture.py --out Tests/Fixtures
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LONG = "12345678-1234-5678-1234-56789abcdef1"
NO_WRITE = "12345678-1234-5678-1234-56789abcdef2"


def start(script, args, snoop=None):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("BUMBLE_SNOOPER", None)
    if snoop:
        env["BUMBLE_SNOOPER"] = f"btsnoop:file:{snoop}"
    return subprocess.Popen([sys.executable, os.path.join(HERE, script), *args], env=env,
                            stdout=subprocess.PIPE, text=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="Tests/Fixtures", help="output folder")
    parser.add_argument("--timeout", type=float, default=40)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    central_file = os.path.abspath(os.path.join(args.out, "bumble-central.btsnoop"))
    peripheral_file = os.path.abspath(os.path.join(args.out, "bumble-peripheral.btsnoop"))
    for path in (central_file, peripheral_file):
        if os.path.exists(path):
            os.remove(path)

    controllers = start("controllers.py", ["--timeout", str(args.timeout + 10)])
    peripheral = central = None
    try:
        ready = json.loads(controllers.stdout.readline())
        p1, p2 = ready["ports"]
        peripheral = start("peripheral.py", [
            "--transport", f"tcp-client:127.0.0.1:{p1}", "--name", "bumble-peer",
            "--address", "C1:22:33:44:55:66", "--notify-count", "3", "--exit-after", "1",
            "--timeout", str(args.timeout)], snoop=peripheral_file)
        line = peripheral.stdout.readline()
        print(line, end="")
        if json.loads(line).get("event") != "ready":
            raise SystemExit("peripheral did not start")
        central = start("central.py", [
            "--transport", f"tcp-client:127.0.0.1:{p2}", "--name", "bumble-peer", "--mtu", "247",
            "--read-all", "--read", LONG, "--write", f"{LONG}=48656c6c6f",
            "--write", f"{NO_WRITE}=00", "--subscribe", "2a37", "--count", "3",
            "--timeout", str(args.timeout)], snoop=central_file)
        central_out, _ = central.communicate(timeout=args.timeout + 5)
        peripheral_out, _ = peripheral.communicate(timeout=10)
        sys.stdout.write(peripheral_out)
        sys.stdout.write(central_out)
        events = [json.loads(l)["event"] for l in central_out.splitlines() if l.startswith("{")]
        for needed in ("connected", "gatt", "read", "write", "notification", "disconnected"):
            if needed not in events:
                raise SystemExit(f"central run is missing a {needed!r} event")
        print(json.dumps({"event": "captured", "files": [central_file, peripheral_file]}))
        return 0
    finally:
        for process in (central, peripheral, controllers):
            if process and process.poll() is None:
                process.kill()
                process.wait()


if __name__ == "__main__":
    sys.exit(main())
