"""A Bumble periodic advertiser or periodic sync for interop tests (Core v5.4 Vol 4 Part E
7.8.61-7.8.63, 7.8.67-7.8.69), through Bumble's own host (bumble.device).

    python Tools/bumble/periodic.py --transport T advertise --name N --data HEX [--sid N]
        [--interval MS] [--periodic-interval MS]
    python Tools/bumble/periodic.py --transport T sync --address ADDR[/public|/random] --sid N
        [--count N]

advertise: a non-connectable, non-scannable extended set (random static address) with the
complete local name, and a periodic train whose data is HEX; prints
  {"event":"ready","address":..,"addressType":"random","name":..,"sid":..,"periodicData":"<hex>"}
then runs until --timeout (or stdin's EOF).

sync: scans, synchronises to ADDR's train of set SID (Bumble's Device.create_periodic_advertising_sync)
and prints
  {"event":"synchronised","address":..,"sid":..,"sync":HANDLE,"interval":..}
  {"event":"periodicReport","data":"<hex>","truncated":false}    (Bumble joins the fragments)
then terminates the sync after --count reports and exits 0; exit 124 when nothing came in time.
"""
import asyncio

import common
from bumble import hci
from bumble.core import AdvertisingData
from bumble.device import (AdvertisingEventProperties, AdvertisingParameters, Device,
                           PeriodicAdvertisingParameters, PeriodicAdvertisingSync)
from bumble.transport import open_transport


async def advertise(args, device: Device, address: hci.Address) -> int:
    name = AdvertisingData([(AdvertisingData.COMPLETE_LOCAL_NAME, args.name.encode())])
    periodic_data = bytes.fromhex(args.data)
    advertising_set = await device.create_advertising_set(
        advertising_parameters=AdvertisingParameters(
            advertising_event_properties=AdvertisingEventProperties(
                is_connectable=False, is_scannable=False, is_legacy=False),
            own_address_type=hci.OwnAddressType.RANDOM,
            primary_advertising_interval_min=args.interval,
            primary_advertising_interval_max=args.interval,
            advertising_sid=args.sid),
        random_address=address, advertising_data=bytes(name),
        periodic_advertising_parameters=PeriodicAdvertisingParameters(
            periodic_advertising_interval_min=args.periodic_interval,
            periodic_advertising_interval_max=args.periodic_interval),
        periodic_advertising_data=periodic_data)
    await advertising_set.start_periodic()
    common.emit("ready", address=common.address_string(address), addressType="random", name=args.name,
                sid=args.sid, periodicData=periodic_data.hex())
    await asyncio.Event().wait()  # until --timeout or stdin's EOF
    return common.EXIT_OK


async def sync(args, device: Device) -> int:
    await device.start_scanning(active=False)
    established = asyncio.Event()
    reports: asyncio.Queue = asyncio.Queue()
    periodic: PeriodicAdvertisingSync = await device.create_periodic_advertising_sync(
        advertiser_address=args.address, sid=args.sid)
    periodic.on("establishment", established.set)
    periodic.on("periodic_advertisement", reports.put_nowait)
    await established.wait()
    await device.stop_scanning()
    common.emit("synchronised", address=common.address_string(args.address), sid=args.sid,
                sync=periodic.sync_handle, interval=periodic.periodic_advertising_interval)
    for _ in range(args.count):
        advertisement = await reports.get()
        common.emit("periodicReport", data=advertisement.data_bytes.hex(), truncated=advertisement.is_truncated,
                    rssi=advertisement.rssi)
    await periodic.terminate()
    common.emit("terminated", sync=periodic.sync_handle)
    return common.EXIT_OK


async def main(args) -> int:
    address = common.random_static_address()
    async with await open_transport(args.transport) as (source, sink):
        device = Device.with_hci("bumble-periodic", address, source, sink)
        await device.power_on()
        if args.role == "advertise":
            return await advertise(args, device, address)
        return await sync(args, device)


if __name__ == "__main__":
    parser = common.base_parser("Bumble periodic advertiser / periodic sync for interop tests")
    roles = parser.add_subparsers(dest="role", required=True)
    adv = roles.add_parser("advertise")
    adv.add_argument("--name", default="bumble-train")
    adv.add_argument("--data", required=True, help="the periodic train's data (AD structures, hex)")
    adv.add_argument("--sid", type=int, default=0, help="Advertising SID (0-15)")
    adv.add_argument("--interval", type=float, default=100.0, help="advertising interval, ms")
    adv.add_argument("--periodic-interval", type=float, default=100.0, help="periodic advertising interval, ms")
    syn = roles.add_parser("sync")
    syn.add_argument("--address", required=True, type=lambda t: common.parse_address(t, "random"))
    syn.add_argument("--sid", type=int, default=0)
    syn.add_argument("--count", type=int, default=3)
    common.run(main, parser.parse_args())
