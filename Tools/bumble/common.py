"""Shared helpers of the Bumble peer scripts (Tools/bumble/*.py).

Every script prints one JSON object per line on stdout (`{"event": ..., ...}`), flushed at
once, logs to stderr, and exits by itself within --timeout. With the environment variable
BLE_HCI_EXIT_ON_STDIN_EOF=1 (the Swift TestSupport sets it) a script also exits as soon as
its stdin reaches EOF, so a test process that dies never leaves it running.
"""
import argparse
import asyncio
import json
import logging
import os
import random
import sys
import threading

from bumble import hci

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 124


def emit(event: str, **fields) -> None:
    print(json.dumps({"event": event, **fields}, separators=(",", ":")), flush=True)


def address_string(address: hci.Address) -> str:
    return address.to_string(False)


def address_type_string(address: hci.Address) -> str:
    return "public" if address.is_public else "random"


def parse_address(text: str, default_type: str = "random") -> hci.Address:
    """`AA:BB:CC:DD:EE:FF[/public|/random]` -> Address."""
    text, _, kind = text.partition("/")
    kind = (kind or default_type).lower()
    if kind not in ("public", "random", "p", "r"):
        raise argparse.ArgumentTypeError(f"address type must be public or random, not {kind}")
    address_type = (hci.Address.PUBLIC_DEVICE_ADDRESS if kind.startswith("p")
                    else hci.Address.RANDOM_DEVICE_ADDRESS)
    return hci.Address(text.upper(), address_type)


def random_static_address() -> hci.Address:
    octets = [random.randrange(256) for _ in range(6)]
    octets[0] |= 0xC0  # random static: the two most significant bits are 1
    if all(o == 0xFF for o in octets[1:]) and octets[0] == 0xFF:
        octets[5] = 0xFE
    return hci.Address(":".join(f"{o:02X}" for o in octets), hci.Address.RANDOM_DEVICE_ADDRESS)


def add_oob_arguments(parser: argparse.ArgumentParser) -> None:
    """`--oob-out FILE` / `--oob-in FILE`, in the file format of `ble-hci --oob-out` (docs/cli.md):
    {"confirm": hex, "random": hex, "tk": hex}, 16 octets each, least significant octet first
    (the order of the SMP PDUs and of the OOB AD types, Core v5.4 Vol 3 Part H 2.3.5.6.4)."""
    parser.add_argument("--oob-out", metavar="FILE", help="write our OOB data (SC confirm/random, legacy TK) to FILE")
    parser.add_argument("--oob-in", metavar="FILE", help="read the peer's OOB data from FILE")


def oob_config(args):
    """The PairingConfig.OobConfig for --oob-out/--oob-in, or None without them.

    Bumble needs its own SC context even when it shares nothing; its r then stays 0, the value
    of an r that was never sent (Vol 3 Part H 2.3.5.6.4: a device that did not receive the
    peer's OOB data uses 0 for the peer's r)."""
    if not (args.oob_out or args.oob_in):
        return None
    from bumble.pairing import PairingConfig
    from bumble.smp import OobContext, OobLegacyContext, OobSharedData
    our = OobContext() if args.oob_out else OobContext(r=bytes(16))
    legacy = OobLegacyContext()
    if args.oob_out:
        shared = our.share()
        text = json.dumps({"confirm": shared.c.hex(), "random": shared.r.hex(), "tk": legacy.tk.hex()})
        temporary = args.oob_out + ".tmp"
        with open(temporary, "w") as file:
            file.write(text + "\n")
            file.flush()
            os.fsync(file.fileno())
        os.rename(temporary, args.oob_out)
    peer = None
    if args.oob_in:
        with open(args.oob_in) as file:
            data = json.load(file)
        if "confirm" in data and "random" in data:
            peer = OobSharedData(c=bytes.fromhex(data["confirm"]), r=bytes.fromhex(data["random"]))
        if "tk" in data:
            # Legacy OOB: both sides hold the same TK, the one the peer wrote.
            legacy = OobLegacyContext(tk=bytes.fromhex(data["tk"]))
    return PairingConfig.OobConfig(our_context=our, peer_data=peer, legacy_context=legacy)


def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--transport", required=True,
                        help="Bumble transport of the controller, e.g. tcp-client:127.0.0.1:9001")
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="exit after this many seconds whatever happens (default 30)")
    parser.add_argument("--log-level", default="WARNING", help="log level on stderr")
    return parser


def _watch_stdin() -> None:
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except Exception:  # noqa: BLE001 - any failure means the parent is gone
        pass
    os._exit(EXIT_FAILED)


def run(main, args) -> None:
    """Runs `main(args)` (a coroutine function returning an exit code) bounded by args.timeout."""
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    if os.environ.get("BLE_HCI_EXIT_ON_STDIN_EOF") == "1":
        threading.Thread(target=_watch_stdin, daemon=True).start()

    async def bounded():
        try:
            return await asyncio.wait_for(main(args), timeout=args.timeout)
        except asyncio.TimeoutError:
            emit("timeout", seconds=args.timeout)
            return EXIT_TIMEOUT

    try:
        code = asyncio.run(bounded())
    except KeyboardInterrupt:
        code = EXIT_FAILED
    except Exception as error:  # noqa: BLE001 - report, never hang
        emit("error", message=f"{type(error).__name__}: {error}")
        logging.exception("failed")
        code = EXIT_FAILED
    sys.stdout.flush()
    # Leave at once: Bumble transports may hold threads or sockets that delay a clean exit.
    os._exit(code if isinstance(code, int) else EXIT_OK)
