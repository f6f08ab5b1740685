"""Bumble virtual LE controllers on one shared link, each served as H4 over TCP.

Like `python -m bumble.apps.controllers`, but with any number of controllers, ports picked by
the kernel (bound to port 0, so no race), a machine-readable ready line, and a bounded life:

    python Tools/bumble/controllers.py --count 2 [--host 127.0.0.1] [--timeout 600]
    -> {"event":"ready","ports":[41235,41236]}

Each port accepts one host connection at a time. Start a fresh process per test: a
controller's state does not fully reset between host connections.
"""
import argparse
import asyncio
import socket

from bumble.controller import Controller
from bumble.link import LocalLink
from bumble.transport.tcp_server import open_tcp_server_transport_with_socket

import common


async def main(args) -> int:
    link = LocalLink()
    transports, controllers, ports = [], [], []
    for index in range(args.count):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((args.host, 0))
        ports.append(sock.getsockname()[1])
        transport = await open_tcp_server_transport_with_socket(sock)
        transports.append(transport)
        controllers.append(Controller(f"C{index}", host_source=transport.source,
                                      host_sink=transport.sink, link=link))
    common.emit("ready", ports=ports, host=args.host)
    try:
        await asyncio.get_running_loop().create_future()  # until the timeout or a signal
    finally:
        for transport in transports:
            await transport.close()
    return common.EXIT_OK


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2, help="number of controllers (default 2)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="exit after this many seconds (default 600)")
    parser.add_argument("--log-level", default="WARNING")
    arguments = parser.parse_args()
    if arguments.host not in ("127.0.0.1", "localhost", "::1"):
        parser.error("controllers listen on loopback only")
    common.run(main, arguments)
