"""A Bumble LE credit-based channel (CoC) peer for interop tests: an echo server, or with
--connect a central that opens a channel and checks the echo.

    python Tools/bumble/l2cap_coc.py --transport tcp-client:127.0.0.1:PORT --psm 0x0080
        [--mtu 2048] [--mps 64] [--credits 8]
    python Tools/bumble/l2cap_coc.py --transport ... --connect ADDRESS[/public|/random] --psm 0x0080
        [--sdus 20] [--mtu ..] [--mps ..] [--credits ..]

With --connect it connects to ADDRESS, opens an LE credit-based channel to --psm, sends
--sdus SDUs (SDU i: 100 + 37 * i octets, octet k = (k * 7 + i) & 0xFF), expects each back in
order on the same channel, and prints {"event":"echoed","count":..,"ok":true|false,...}, then
closes the channel and disconnects. Otherwise (the server):

Advertises (legacy, connectable, random static address), accepts LE credit-based channels on
--psm with the given MTU / MPS / initial credits, and sends every SDU it receives back on the
same channel. Prints JSON lines on stdout:
  {"event":"ready","address":"C0:..","addressType":"random","psm":128}
  {"event":"connected","handle":..}
  {"event":"channel","sourceCid":..,"destinationCid":..,"peerMtu":..,"peerMps":..}
  {"event":"sdu","length":..,"total":..}          (every SDU received; total = octets so far)
  {"event":"channelClosed","total":..}
  {"event":"disconnected","reason":".."}
"""
import asyncio

from bumble import hci, l2cap
from bumble.device import AdvertisingType, Device
from bumble.transport import open_transport

import common


def pattern(i: int) -> bytes:
    return bytes(((k * 7 + i) & 0xFF) for k in range(100 + 37 * i))


async def open_and_check(device, args) -> int:
    """The central: opens a channel to the peer and checks that every SDU comes back."""
    connection = await device.connect(common.parse_address(args.connect), own_address_type=hci.OwnAddressType.RANDOM)
    common.emit("connected", handle=connection.handle)
    channel = await connection.create_l2cap_channel(
        spec=l2cap.LeCreditBasedChannelSpec(psm=args.psm, mtu=args.mtu, mps=args.mps, max_credits=args.credits))
    common.emit("channel", sourceCid=channel.source_cid, destinationCid=channel.destination_cid,
                peerMtu=channel.peer_mtu, peerMps=channel.peer_mps)
    received: asyncio.Queue = asyncio.Queue()
    channel.sink = received.put_nowait
    sent = [pattern(i) for i in range(args.sdus)]
    for sdu in sent:
        channel.write(sdu)
        await channel.drain()
    ok = True
    for i, sdu in enumerate(sent):
        back = await asyncio.wait_for(received.get(), timeout=10)
        if back != sdu:
            ok = False
            common.emit("mismatch", index=i, length=len(back), expected=len(sdu))
    common.emit("echoed", count=len(sent), ok=ok, total=sum(len(s) for s in sent))
    await channel.disconnect()
    await connection.disconnect()
    return common.EXIT_OK if ok else common.EXIT_FAILED


async def main(args) -> int:
    address = common.random_static_address()
    if args.connect:
        async with await open_transport(args.transport) as (source, sink):
            device = Device.with_hci("coc-central", address, source, sink)
            await device.power_on()
            return await open_and_check(device, args)
    done = asyncio.Event()
    async with await open_transport(args.transport) as (source, sink):
        device = Device.with_hci("coc-echo", address, source, sink)

        def on_connection(connection):
            common.emit("connected", handle=connection.handle)
            connection.on("disconnection", lambda reason: (
                common.emit("disconnected", reason=hci.HCI_Constant.error_name(reason)), done.set()))

        def on_channel(channel: l2cap.LeCreditBasedChannel):
            total = 0
            common.emit("channel", sourceCid=channel.source_cid, destinationCid=channel.destination_cid,
                        peerMtu=channel.peer_mtu, peerMps=channel.peer_mps)

            def on_sdu(sdu: bytes):
                nonlocal total
                total += len(sdu)
                common.emit("sdu", length=len(sdu), total=total)
                channel.write(sdu)

            channel.sink = on_sdu
            channel.on("close", lambda: common.emit("channelClosed", total=total))

        device.on("connection", on_connection)
        await device.power_on()
        device.create_l2cap_server(
            spec=l2cap.LeCreditBasedChannelSpec(psm=args.psm, mtu=args.mtu, mps=args.mps, max_credits=args.credits),
            handler=on_channel)
        data = bytes([2, 0x01, 0x06, 9, 0x09]) + b"coc-echo"
        await device.start_advertising(advertising_type=AdvertisingType.UNDIRECTED_CONNECTABLE_SCANNABLE,
                                       own_address_type=hci.OwnAddressType.RANDOM, auto_restart=False,
                                       advertising_data=data)
        common.emit("ready", address=common.address_string(address), addressType="random", psm=args.psm)
        await done.wait()
        await asyncio.sleep(0.2)
    return common.EXIT_OK


if __name__ == "__main__":
    parser = common.base_parser("Bumble LE CoC echo server for interop tests")
    parser.add_argument("--psm", type=lambda t: int(t, 0), default=0x0080)
    parser.add_argument("--mtu", type=int, default=2048)
    parser.add_argument("--mps", type=int, default=64)
    parser.add_argument("--credits", type=int, default=8)
    parser.add_argument("--connect", help="connect to ADDRESS[/public|/random] and check the echo")
    parser.add_argument("--sdus", type=int, default=20)
    common.run(main, parser.parse_args())
