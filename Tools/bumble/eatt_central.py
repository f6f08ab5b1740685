"""A Bumble central that opens Enhanced ATT bearers (EATT, PSM 0x0027) to a peripheral.

    python Tools/bumble/eatt_central.py --transport tcp-client:127.0.0.1:PORT
        --connect ADDRESS[/public|/random] [--bearers 2] [--read UUID]... [--no-pair]
        [--mtu 2048] [--subscribe UUID]... [--values N] [--exchange-mtu MTU] [--reconfigure MTU]

Connects, pairs (Just Works; EATT needs an encrypted link, unless --no-pair), reads Server
Supported Features (2b3a) on the unenhanced bearer, opens --bearers Enhanced ATT bearers with
one Credit Based Connection Request (bumble.gatt_client.Client.connect_eatt), then on each
bearer discovers the services and reads every --read characteristic by UUID (and each
--read-first UUID with one Read Request: as many octets as the bearer's ATT_MTU - 1 carry).
--subscribe UUID writes its CCCD on every bearer (Bumble's client keeps subscribers per
bearer) and reports each value pushed on an Enhanced ATT bearer, by that bearer's CID, until
--values N came. --exchange-mtu MTU sends an Exchange MTU Request on the first Enhanced ATT
bearer (Bumble's client allows it; Core v5.4 Vol 3 Part F 3.4.2.1 does not) and reports the
answer, then reads --read-first there again. --reconfigure MTU sends a Credit Based Reconfigure Request (Core v5.4 Vol 3
Part A 4.27) for all bearers with that MTU and their MPS, and on success reads --read-first
again. JSON lines:
  {"event":"connected","handle":..}
  {"event":"paired","encrypted":true}
  {"event":"serverFeatures","value":"01"}             ("" when the server has none)
  {"event":"eatt","cids":[..],"peerCids":[..],"peerMtus":[..]}
  {"event":"services","cid":..,"uuids":[..]}
  {"event":"read","cid":..,"uuid":..,"value":"<hex>"}
  {"event":"readFirst","cid":..,"uuid":..,"length":..}
  {"event":"subscribed","uuids":[..]}
  {"event":"pushed","cid":..,"opcode":"ATT_Handle_Value_Notification"|..,"value":"<hex>"}
  {"event":"exchangeMTU","cid":..,"mtu":..}        (or "error": the Error Response's code)
  {"event":"reconfigured","result":..}             (the peer's result code)
  {"event":"eattFailed","message":..}
  {"event":"done"}
"""
import asyncio

from bumble import att, hci, l2cap
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
            spec = l2cap.LeCreditBasedChannelSpec(psm=att.EATT_PSM, mtu=args.mtu)
            clients = await Client.connect_eatt(connection, spec, count=args.bearers)
        except Exception as error:  # noqa: BLE001
            common.emit("eattFailed", message=f"{type(error).__name__}: {error}")
            await connection.disconnect()
            return common.EXIT_FAILED
        clients = clients if isinstance(clients, list) else [clients]
        common.emit("eatt", cids=[c.bearer.source_cid for c in clients], peerCids=[c.bearer.destination_cid for c in clients],
                    peerMtus=[c.bearer.peer_mtu for c in clients])
        pushed = asyncio.Queue()
        for client in clients:
            report_pushes(client, pushed)
            services = await client.discover_services()
            common.emit("services", cid=client.bearer.source_cid, uuids=[str(s.uuid) for s in services])
            for uuid in args.read:
                values = await client.read_characteristics_by_uuid(UUID(uuid), None)
                common.emit("read", cid=client.bearer.source_cid, uuid=uuid, value=values[0].hex() if values else "")
            await read_first(client, args.read_first)
            for uuid in args.subscribe:
                characteristics = await client.discover_characteristics([UUID(uuid)], None)
                await client.subscribe(characteristics[0], lambda _value: None)
        if args.subscribe:
            common.emit("subscribed", uuids=args.subscribe)
            for _ in range(args.values):
                await pushed.get()
        if args.exchange_mtu:
            client = clients[0]
            try:
                common.emit("exchangeMTU", cid=client.bearer.source_cid, mtu=await client.request_mtu(args.exchange_mtu))
            except att.ATT_Error as error:
                common.emit("exchangeMTU", cid=client.bearer.source_cid, error=int(error.error_code))
            await read_first(client, args.read_first)
        if args.reconfigure:
            result = await reconfigure(connection, [c.bearer for c in clients], args.reconfigure)
            common.emit("reconfigured", result=result)
            if result == 0:
                for client in clients:
                    await read_first(client, args.read_first)
        common.emit("done")
        await connection.disconnect()
    return common.EXIT_OK


def report_pushes(client: Client, pushed: asyncio.Queue) -> None:
    """Reports the server's PDUs on the client's bearer, then hands them on."""
    sink = client.bearer.sink

    def on_pdu(pdu: bytes) -> None:
        parsed = att.ATT_PDU.from_bytes(pdu)
        if isinstance(parsed, (att.ATT_Handle_Value_Notification, att.ATT_Handle_Value_Indication)):
            common.emit("pushed", cid=client.bearer.source_cid, opcode=type(parsed).__name__,
                        value=parsed.attribute_value.hex())
            pushed.put_nowait(parsed)
        sink(pdu)

    client.bearer.sink = on_pdu


async def read_first(client: Client, uuids) -> None:
    for uuid in uuids:
        characteristics = await client.discover_characteristics([UUID(uuid)], None)
        value = await client.read_value(characteristics[0].handle, no_long_read=True)
        common.emit("readFirst", cid=client.bearer.source_cid, uuid=uuid, length=len(value))


async def reconfigure(connection, channels, mtu: int) -> int:
    """Sends one Credit Based Reconfigure Request for `channels` (their CIDs on our side, Core
    v5.4 Vol 3 Part A 4.27; Bumble has the PDU but not the procedure) and returns the peer's
    result; on success the channels receive SDUs of up to `mtu` octets."""
    manager = connection.device.l2cap_channel_manager
    answered = asyncio.get_running_loop().create_future()
    manager.on_l2cap_credit_based_reconfigure_response = lambda _c, _cid, frame: answered.set_result(frame.result)
    mps = channels[0].mps
    manager.send_control_frame(connection, l2cap.L2CAP_LE_SIGNALING_CID, l2cap.L2CAP_Credit_Based_Reconfigure_Request(
        identifier=manager.next_identifier(connection), mtu=mtu, mps=mps,
        destination_cid=[c.source_cid for c in channels]))
    result = await asyncio.wait_for(answered, 10)
    if result == 0:
        for c in channels:
            c.mtu = mtu
    return int(result)


if __name__ == "__main__":
    parser = common.base_parser("Bumble EATT central for interop tests")
    parser.add_argument("--connect", required=True, help="ADDRESS[/public|/random]")
    parser.add_argument("--bearers", type=int, default=2)
    parser.add_argument("--read", action="append", default=[], metavar="UUID")
    parser.add_argument("--no-pair", action="store_true", help="open the bearers on an unencrypted link")
    parser.add_argument("--mtu", type=int, default=2048, help="the bearers' receive MTU")
    parser.add_argument("--read-first", action="append", default=[], metavar="UUID")
    parser.add_argument("--subscribe", action="append", default=[], metavar="UUID")
    parser.add_argument("--values", type=int, default=0, help="pushed values to wait for after --subscribe")
    parser.add_argument("--exchange-mtu", type=int, default=0, metavar="MTU")
    parser.add_argument("--reconfigure", type=int, default=0, metavar="MTU")
    common.run(main, parser.parse_args())
