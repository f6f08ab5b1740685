"""A Bumble central that bonds with a privacy peripheral, then finds it again behind its changing
resolvable private addresses with the IRK it distributed (Bumble's own resolver, smp.AddressResolver)
and reconnects, encrypting from the bond (no second pairing).

    python Tools/bumble/privacy_central.py --transport tcp-client:127.0.0.1:PORT --name TEXT
        [--addresses N] (distinct RPAs to see resolve to the identity before reconnecting, default 2)
        [--offload] (Bumble's resolving list in the controller, Device.address_resolution_offload:
                     the controller resolves our TargetA of a directed PDU; with --addresses 0 it
                     reconnects to the identity as soon as the bond is made, the controller
                     finding the peer)

JSON lines on stdout:
  {"event":"connected","address":..}          (the first connection, found by --name)
  {"event":"paired","identityAddress":..,"identityAddressType":..,"irk":..,"ownAddress":..}
  {"event":"resolved","address":..,"identityAddress":..}   (each new RPA that resolves to it)
  {"event":"reconnected","address":..}        (connected to the identity, Bumble finding the RPA)
  {"event":"encrypted","encrypted":true}  (from the bond: Bumble pairs no second time)
Exit code: 0 when everything succeeded, 1 when an operation failed, 124 on --timeout.
"""
import asyncio

from bumble import hci
from bumble.core import AdvertisingData
from bumble.device import Device
from bumble.keys import MemoryKeyStore
from bumble.pairing import PairingConfig
from bumble.transport import open_transport

import common


async def main(args) -> int:
    async with await open_transport(args.transport) as (source, sink):
        device = Device.with_hci("bumble-privacy", common.random_static_address(), source, sink)
        device.keystore = MemoryKeyStore()
        device.address_resolution_offload = args.offload
        device.pairing_config_factory = lambda _connection: PairingConfig(sc=True, mitm=False, bonding=True)
        found = asyncio.get_running_loop().create_future()

        def on_advertisement(advertisement):
            name = advertisement.data.get(AdvertisingData.Type.COMPLETE_LOCAL_NAME) or ""
            if args.name in str(name) and advertisement.is_connectable and not found.done():
                found.set_result(advertisement.address)

        device.on("advertisement", on_advertisement)
        await device.power_on()
        await device.start_scanning(filter_duplicates=False)
        address = await found
        await device.stop_scanning()
        connection = await device.connect(address, own_address_type=hci.OwnAddressType.RANDOM)
        common.emit("connected", address=common.address_string(address))
        await connection.pair()
        # The keys Bumble filed: under the identity address the peer distributed, with its IRK.
        resolving = []
        for _ in range(50):
            resolving = await device.keystore.get_resolving_keys()
            if resolving:
                break
            await asyncio.sleep(0.1)
        if not resolving:
            common.emit("error", op="pair", message="the peripheral distributed no IRK and identity address")
            return common.EXIT_FAILED
        irk, identity = resolving[0]
        common.emit("paired", identityAddress=common.address_string(identity),
                    identityAddressType=common.address_type_string(identity), irk=irk.hex(),
                    ownAddress=common.address_string(device.random_address))
        await connection.disconnect()

        # Bumble's resolver holds the IRK now (Device.refresh_resolving_list after pairing).
        seen = set()
        resolved = asyncio.get_running_loop().create_future()

        def on_rpa(advertisement):
            a = advertisement.address
            if a.is_resolvable and device.address_resolver is not None \
               and device.address_resolver.resolve(a) == identity and a not in seen:
                seen.add(a)
                common.emit("resolved", address=common.address_string(a), identityAddress=common.address_string(identity))
                if len(seen) >= args.addresses and not resolved.done():
                    resolved.set_result(None)

        if args.addresses > 0:
            device.on("advertisement", on_rpa)
            await device.start_scanning(filter_duplicates=False)
            await resolved
            await device.stop_scanning()
            device.remove_listener("advertisement", on_rpa)

        connection = await device.connect(identity, own_address_type=hci.OwnAddressType.RANDOM)
        common.emit("reconnected", address=common.address_string(connection.peer_resolvable_address or connection.peer_address))
        await connection.encrypt()
        common.emit("encrypted", encrypted=bool(connection.is_encrypted))
        await connection.disconnect()
        return common.EXIT_OK


if __name__ == "__main__":
    parser = common.base_parser("Bumble central: bond, resolve the peer's changing RPAs, reconnect")
    parser.add_argument("--name", required=True)
    parser.add_argument("--addresses", type=int, default=2)
    parser.add_argument("--offload", action="store_true")
    common.run(main, parser.parse_args())
