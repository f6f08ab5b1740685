"""The Bumble side of `make bench`: the same exchanges as ble-hci-bench, between two Bumble
Devices on an in-process LocalLink (as Bumble's own tests set them up).

    bumble_bench.py reads N          central reads a characteristic N times
    bumble_bench.py notifications N  peripheral notifies N values, central counts them
    bumble_bench.py idle SECONDS     a powered-on, advertising peripheral that does nothing

Output: "metric=<name> count=<n> seconds=<s> rate=<n/s>" (idle: nothing; read its VmRSS).
"""
import asyncio
import sys
import time

from bumble.controller import Controller
from bumble.device import Device, Peer
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.hci import Address
from bumble.host import Host
from bumble.link import LocalLink
from bumble.transport.common import AsyncPipeSink

SERVICE = "FFF0"
TICKER = "FFF1"
NAME = "FFF2"


def report(metric, count, seconds):
    print(f"metric={metric} count={count} seconds={seconds:.4f} rate={count / seconds:.1f}", flush=True)


async def connected_pair():
    link = LocalLink()
    addresses = ["F0:F0:F0:F0:F0:F0", "F1:F1:F1:F1:F1:F1"]
    controllers = [Controller(f"C{i}", link=link, public_address=addresses[i]) for i in range(2)]
    central, peripheral = (
        Device(address=Address(addresses[i]), host=Host(controllers[i], AsyncPipeSink(controllers[i])))
        for i in range(2)
    )
    ticker = Characteristic(TICKER, Characteristic.Properties.NOTIFY, Characteristic.READABLE, b"")
    peripheral.add_service(Service(SERVICE, [
        ticker,
        Characteristic(NAME, Characteristic.Properties.READ | Characteristic.Properties.WRITE,
                       Characteristic.READABLE | Characteristic.WRITEABLE, b"ble-hci"),
    ]))
    await central.power_on()
    await peripheral.power_on()
    connected = asyncio.get_running_loop().create_future()
    peripheral.once("connection", connected.set_result)
    await peripheral.start_advertising(advertising_interval_min=1.0)
    connection = await central.connect(peripheral.random_address)
    peripheral_connection = await connected
    peer = Peer(connection)
    await peer.discover_services()
    for s in peer.services:
        await s.discover_characteristics()
        for c in s.characteristics:
            await c.discover_descriptors()
    return central, peripheral, peer, peripheral_connection, ticker


def find(peer, uuid):
    for s in peer.services:
        for c in s.characteristics:
            if c.uuid.to_hex_str() == uuid:
                return c
    raise SystemExit(f"no characteristic {uuid}")


async def reads(n):
    _, _, peer, _, _ = await connected_pair()
    c = find(peer, NAME)
    for _ in range(min(100, n)):
        await c.read_value()
    t0 = time.monotonic()
    for _ in range(n):
        await c.read_value()
    report("gatt-reads", n, time.monotonic() - t0)


async def notifications(n):
    _, peripheral, peer, pconn, local = await connected_pair()
    c = find(peer, TICKER)
    state = {"count": 0, "last": 0.0}
    done = asyncio.get_running_loop().create_future()

    def on_value(_value):
        state["count"] += 1
        state["last"] = time.monotonic()
        if state["count"] == n and not done.done():
            done.set_result(None)

    await c.subscribe(on_value)
    value = b"12345678"
    t0 = time.monotonic()
    for _ in range(n):
        await peripheral.notify_subscriber(pconn, local, value)
    try:
        await asyncio.wait_for(done, 2.0)
    except asyncio.TimeoutError:
        pass
    report("notifications", state["count"], state["last"] - t0)


async def idle(seconds):
    link = LocalLink()
    controller = Controller("C0", link=link, public_address="F0:F0:F0:F0:F0:F0")
    device = Device(address=Address("F0:F0:F0:F0:F0:F0"), host=Host(controller, AsyncPipeSink(controller)))
    await device.power_on()
    await device.start_advertising()
    print("ready", flush=True)
    await asyncio.sleep(seconds)


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    what, arg = sys.argv[1], sys.argv[2]
    if what == "reads":
        asyncio.run(reads(int(arg)))
    elif what == "notifications":
        asyncio.run(notifications(int(arg)))
    elif what == "idle":
        asyncio.run(idle(float(arg)))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
