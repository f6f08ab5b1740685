"""A Bumble GATT client that exercises a peer's GATT server step by step (interop tests).

    python Tools/bumble/gatt_client_check.py --transport tcp-client:127.0.0.1:PORT --name TEXT
        [--mtu N] [--no-discover] [--read-all]
        [--read CHAR] [--write CHAR=HEX] [--write-without-response CHAR=HEX]
        [--subscribe CHAR] [--wait CHAR=N] [--unsubscribe CHAR] [--sleep S] ...
        [--duration S] [--timeout S]

Connects to the first connectable advertiser whose name contains --name, exchanges MTU (--mtu),
discovers every service, characteristic and descriptor (reading every readable value and
descriptor with --read-all; long values in full, with Read Blob), then runs the actions in the
order given, and disconnects. Unlike central.py, a subscription stays on until --unsubscribe:
  --subscribe CHAR      writes the CCCD (notifications, or indications when that's all it has)
  --wait CHAR=N         waits (at most --duration s) until N values arrived on CHAR in total
  --unsubscribe CHAR    writes 0x0000 to the CCCD
  --sleep S             stays connected S seconds (values keep being printed)
A --write longer than ATT_MTU - 3 goes as a long write (Prepare Write / Execute Write).
Bumble confirms every indication it receives, after printing it.

JSON lines on stdout (as central.py's; each value event has "index", 1-based per CHAR):
  {"event":"connected",..,"mtu":..}, {"event":"gatt","services":[..]},
  {"event":"read"|"write"|"subscribed"|"unsubscribed","uuid":..,"handle":..[,"value":..]},
  {"event":"notification"|"indication","uuid":..,"handle":..,"value":..,"index":..},
  {"event":"waited","uuid":..,"count":..}, {"event":"error","op":..,"att":"0x0f",..},
  {"event":"disconnected","reason":..,"message":..}
Exit code: 0 when every step succeeded, 1 when any failed (an ATT error counts), 124 on --timeout.
"""
import asyncio

from bumble.device import Device
from bumble.gatt import Characteristic
from bumble.transport import open_transport

import common
from central import Central, OrderedAction, uuid_string


class Check(Central):
    def __init__(self, args):
        super().__init__(args)
        self.args.address = None
        self.args.all_reports = False
        self.counts: dict = {}
        self.arrived = asyncio.Condition()
        self.callbacks: dict = {}

    async def step(self, kind: str, value: str) -> None:
        if kind == "sleep":
            await asyncio.sleep(float(value))
            return
        if kind in ("read", "write", "write_without_response"):
            await self.run_action(kind, value)  # central.py's read / write (long when needed)
            return
        spec, _, argument = value.partition("=")
        try:
            c = self.find(spec)
        except LookupError as error:
            self.error(kind, error)
            return
        uuid = uuid_string(c.uuid)
        try:
            if kind == "subscribe":
                indicate = not (c.properties & Characteristic.Properties.NOTIFY)
                name = "indication" if indicate else "notification"

                def on_value(v, uuid=uuid, handle=c.handle, name=name):
                    self.counts[handle] = self.counts.get(handle, 0) + 1
                    common.emit(name, uuid=uuid, handle=handle, value=bytes(v).hex(),
                                index=self.counts[handle])
                    asyncio.get_running_loop().create_task(self.notify_waiters())

                self.callbacks[c.handle] = on_value
                await self.peer.subscribe(c, on_value, prefer_notify=not indicate)
                common.emit("subscribed", uuid=uuid, handle=c.handle, indicate=indicate)
            elif kind == "unsubscribe":
                await self.peer.unsubscribe(c, self.callbacks.pop(c.handle, None))
                common.emit("unsubscribed", uuid=uuid, handle=c.handle)
            elif kind == "wait":
                wanted = int(argument or "1")
                async with self.arrived:
                    await asyncio.wait_for(
                        self.arrived.wait_for(lambda: self.counts.get(c.handle, 0) >= wanted),
                        self.args.duration)
                common.emit("waited", uuid=uuid, handle=c.handle, count=self.counts.get(c.handle, 0))
        except Exception as error:  # noqa: BLE001 - every failure is reported as an event
            if isinstance(error, asyncio.TimeoutError):
                error = TimeoutError(f"{self.counts.get(c.handle, 0)} values in {self.args.duration} s")
            self.error(kind, error, uuid, c.handle)

    async def notify_waiters(self) -> None:
        async with self.arrived:
            self.arrived.notify_all()

    async def run(self) -> int:
        args = self.args
        async with await open_transport(args.transport) as (source, sink):
            device = Device.with_hci("bumble-check", common.random_static_address(), source, sink)
            device.on("advertisement", self.on_advertisement)
            await device.power_on()
            connection, disconnected = await self.connect(device)
            if args.no_discover:
                await self.peer.discover_services()
                for service in self.peer.services:
                    await service.discover_characteristics()
                    for c in service.characteristics:
                        await c.discover_descriptors()
            else:
                await self.peer.discover_all()
                await self.read_tree()
            for kind, value in getattr(args, "actions", None) or []:
                if disconnected.done():
                    self.error(kind, ConnectionError("the peer disconnected"))
                    break
                await self.step(kind, value)
            await self.disconnect(connection, disconnected)
        return common.EXIT_FAILED if self.failed else common.EXIT_OK


async def main(args) -> int:
    return await Check(args).run()


if __name__ == "__main__":
    parser = common.base_parser("Bumble GATT client check for interop tests")
    parser.add_argument("--name", required=True,
                        help="connect to the first advertiser whose name contains this")
    parser.add_argument("--mtu", type=int, default=0, help="exchange MTU with this value")
    parser.add_argument("--no-discover", action="store_true",
                        help="discover without printing the tree or reading values")
    parser.add_argument("--read-all", action="store_true",
                        help="read every readable characteristic and descriptor while discovering")
    for option in ("--read", "--write", "--write-without-response", "--subscribe", "--wait",
                   "--unsubscribe", "--sleep"):
        parser.add_argument(option, action=OrderedAction)
    parser.add_argument("--duration", type=float, default=10.0,
                        help="seconds a --wait waits at most")
    common.run(main, parser.parse_args())
