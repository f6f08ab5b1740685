"""A Bumble central that opens Enhanced ATT bearers (EATT, PSM 0x0027) to a peripheral.

    python Tools/bumble/eatt_central.py --transport tcp-client:127.0.0.1:PORT
        --connect ADDRESS[/public|/random] [--bearers 2] [--read UUID]... [--no-pair]

Connects, pairs (Just Works; EATT needs an encrypted link, unless --no-pair), reads Server
Supported Features (2b3a) on the unenhanced bearer, opens --bearers Enhanced ATT bearers with
one Credit Based Connection Request (bumble.gatt_client.Client.connect_eatt), then on each
bearer discovers the services and reads every --read characteristic by UUID. JSON lines:
  {"event":"connected","handle":..}
  {"event":"paired","encrypted":true}
  {"event":"serverFeatures","value":"01"}             ("" when the server has none)
  {"event":"eatt","cids":[..],"peerCids":[..],"peerMtus":[..]}
  {"event":"services","cid":..,"uuids":[..]}
  {"event":"read","cid":..,"uuid":..,"value":"<hex>"}
  {"event":"eattFailed","message":..}
  {"event":"done"}
"""
import asyncio

from bumble import hci
from bumble.core import UUID
from bumble.device import Device, Peer
from bumble.gatt_client import Client
from bumble.keys import MemoryKeyStore
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport import open_transport

import common


async def main(args) -> int:
    async with await open_transport(args.transport) as (source, sink):
        device = Device.with_hci("eatt-central", common.random_static_address(), source, sink)
        device.keystore = MemoryKeyStore()
        device.pairing_config_factory = lambda _c: PairingConfig(
            sc=True, mitm=False, bonding=True, delegate=PairingDelegate(PairingDelegate.NO_OUTPUT_NO_INPUT))
        await device.power_on()
        connection = await device.connect(common.parse_address(args.connect), own_address_type=hci.OwnAddressType.RANDOM)
        common.emit("connected", handle=connection.handle)
        if not args.no_pair:
            await connection.pair()
            common.emit("paired", encrypted=bool(connection.is_encrypted))
        peer = Peer(connection)
        features = await peer.gatt_client.read_characteristics_by_uuid(UUID.from_16_bits(0x2B3A), None)
        common.emit("serverFeatures", value=features[0].hex() if features else "")
        try:
            clients = await Client.connect_eatt(connection, count=args.bearers)
        except Exception as error:  # noqa: BLE001
            common.emit("eattFailed", message=f"{type(error).__name__}: {error}")
            await connection.disconnect()
            return common.EXIT_FAILED
        clients = clients if isinstance(clients, list) else [clients]
        common.emit("eatt", cids=[c.bearer.source_cid for c in clients], peerCids=[c.bearer.destination_cid for c in clients],
                    peerMtus=[c.bearer.peer_mtu for c in clients])
        for client in clients:
            services = await client.discover_services()
            common.emit("services", cid=client.bearer.source_cid, uuids=[str(s.uuid) for s in services])
            for uuid in args.read:
                values = await client.read_characteristics_by_uuid(UUID(uuid), None)
                common.emit("read", cid=client.bearer.source_cid, uuid=uuid, value=values[0].hex() if values else "")
        common.emit("done")
        await connection.disconnect()
    return common.EXIT_OK


if __name__ == "__main__":
    parser = common.base_parser("Bumble EATT central for interop tests")
    parser.add_argument("--connect", required=True, help="ADDRESS[/public|/random]")
    parser.add_argument("--bearers", type=int, default=2)
    parser.add_argument("--read", action="append", default=[], metavar="UUID")
    parser.add_argument("--no-pair", action="store_true", help="open the bearers on an unencrypted link")
    common.run(main, parser.parse_args())
