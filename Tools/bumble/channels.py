"""Records the fixture Tests/Fixtures/bumble-channels.btsnoop: dynamic L2CAP channels between
two Bumble hosts (an independent stack), for the decoder's channel following (issue 26).

Two Bumble devices on two of Bumble's virtual controllers on one in-process link
(bumble.controller.Controller + bumble.link.LocalLink); Bumble's snooper (bumble/snoop.py,
btsnoop datalink 1002) records device A's side. What happens, in order:

BR/EDR (A connects to B's public address):
1. L2CAP signaling on CID 0x0001: Information Requests, Connection Request/Response for PSM
   0x001F (ATT over BR/EDR, Core v5.4 Vol 3 Part F 3.2.11), Configuration Request/Response.
2. On that channel (basic mode): ATT Exchange MTU Request/Response, a Read Request of handle
   0x0003 and its Read Response, a Read Request of handle 0x0009 and an Error Response
   (Attribute Not Found, 0x0a), all Bumble's PDU classes (bumble.att) sent and answered by hand.
3. A channel on PSM 0x1001 (unknown to the decoder): one SDU each way.
4. SMP over BR/EDR (CID 0x0007): a Pairing Request from A, answered by Bumble's SMP.
5. Disconnection Request/Response of both channels, then HCI Disconnect.

LE (A connects to B, which advertises):
6. An LE Credit Based Connection (0x14/0x15) on SPSM 0x0080, MPS 23: a 100-octet SDU from A,
   segmented into K-frames, echoed by B.
7. EATT (PSM 0x0027, Enhanced Credit Based Connection 0x17/0x18) with Bumble's GATT client
   and server: service discovery and a read over the enhanced bearer, MPS 23 with an ATT_MTU
   of 100, so long responses span several K-frames.
8. Disconnection of the channels, then of the link.

    .venv/bin/python Tools/bumble/channels.py --out Tests/Fixtures/bumble-channels.btsnoop

Also writes bumble-channels.att.json next to it: every ATT PDU A sent or received on the two
dynamic ATT channels (ATT over BR/EDR, EATT) as Bumble parsed it (bearer, direction, opcode,
attribute handle), in order.
"""
import argparse
import asyncio
import json
import os

from bumble import att, gatt, hci, l2cap, smp
from bumble.controller import Controller
from bumble.core import PhysicalTransport
from bumble.device import Device, DeviceConfiguration
from bumble.gatt_client import Client
from bumble.host import Host
from bumble.link import LocalLink
from bumble.snoop import BtSnooper
from bumble.transport.common import AsyncPipeSink


# Every ATT PDU on a dynamic channel as Bumble parsed it, in order: the fixture's oracle where
# tshark does not follow the channel (it does not know Credit Based Connection 0x17/0x18).
ATT_LOG = []


def log_att(bearer, direction, pdu_bytes):
    pdu = att.ATT_PDU.from_bytes(pdu_bytes)
    entry = {"bearer": bearer, "direction": direction, "opcode": pdu.op_code}
    handle = getattr(pdu, "attribute_handle", getattr(pdu, "attribute_handle_in_error", None))
    if handle is not None:
        entry["handle"] = handle
    ATT_LOG.append(entry)


def tap(channel, bearer):
    """Logs what A's side of `channel` sends (an SDU: `write` of a credit-based channel, whose
    `send_pdu` takes K-frames; `send_pdu` of a basic one) and receives (`sink`)."""
    name = "write" if isinstance(channel, l2cap.LeCreditBasedChannel) else "send_pdu"
    original = getattr(channel, name)
    setattr(channel, name, lambda pdu: (log_att(bearer, "sent", bytes(pdu)), original(pdu))[1])
    sink = channel.sink
    channel.sink = lambda pdu: (log_att(bearer, "received", pdu), sink(pdu))[1]


def make_device(name, public, random, link, eatt=False):
    controller = Controller(name, link=link, public_address=hci.Address(public, hci.Address.PUBLIC_DEVICE_ADDRESS))
    config = DeviceConfiguration(name=name, address=hci.Address(random, hci.Address.RANDOM_DEVICE_ADDRESS), classic_enabled=True, le_enabled=True,
                                 eatt_enabled=eatt)
    host = Host(controller, AsyncPipeSink(controller))
    device = Device(config=config, host=host)
    return device


async def main(out: str) -> None:
    link = LocalLink()
    a = make_device("A", "00:1B:DC:F0:F1:F2", "F0:F1:F2:F3:F4:F5", link)
    b = make_device("B", "00:1B:DC:C1:22:33", "C1:22:33:44:55:66", link, eatt=True)
    b.add_service(gatt.Service("180f", [
        gatt.Characteristic("2a19", gatt.Characteristic.Properties.READ, gatt.Characteristic.READABLE, bytes([0x64])),
    ]))
    b.add_service(gatt.Service("12345678-1234-5678-1234-56789abcdef0", [
        gatt.Characteristic("12345678-1234-5678-1234-56789abcdef1", gatt.Characteristic.Properties.READ,
                            gatt.Characteristic.READABLE, bytes(range(180))),
    ]))
    with open(out, "wb") as f:
        a.host.snooper = BtSnooper(f)
        await a.power_on()
        await b.power_on()

        # --- BR/EDR ---
        def on_att_channel(channel):
            def on_pdu(pdu):
                req = att.ATT_PDU.from_bytes(pdu)
                if isinstance(req, att.ATT_Exchange_MTU_Request):
                    channel.send_pdu(bytes(att.ATT_Exchange_MTU_Response(server_rx_mtu=200)))
                elif isinstance(req, att.ATT_Read_Request) and req.attribute_handle == 0x0003:
                    channel.send_pdu(bytes(att.ATT_Read_Response(attribute_value=b"bumble-bredr")))
                else:
                    channel.send_pdu(bytes(att.ATT_Error_Response(
                        request_opcode_in_error=req.op_code, attribute_handle_in_error=req.attribute_handle,
                        error_code=att.ErrorCode.ATTRIBUTE_NOT_FOUND)))
            channel.sink = on_pdu

        def on_other_channel(channel):
            channel.sink = lambda sdu: channel.send_pdu(b"echo:" + sdu)

        b.create_l2cap_server(spec=l2cap.ClassicChannelSpec(psm=0x001F), handler=on_att_channel)
        b.create_l2cap_server(spec=l2cap.ClassicChannelSpec(psm=0x1001), handler=on_other_channel)
        await b.set_connectable(True)
        await b.set_discoverable(True)
        connection = await a.connect(hci.Address("00:1B:DC:C1:22:33", hci.Address.PUBLIC_DEVICE_ADDRESS),
                                     transport=PhysicalTransport.BR_EDR)
        answers = asyncio.Queue()
        att_channel = await connection.create_l2cap_channel(spec=l2cap.ClassicChannelSpec(psm=0x001F))
        att_channel.sink = answers.put_nowait
        tap(att_channel, "bredr")
        for pdu in (att.ATT_Exchange_MTU_Request(client_rx_mtu=300), att.ATT_Read_Request(attribute_handle=0x0003),
                    att.ATT_Read_Request(attribute_handle=0x0009)):
            att_channel.send_pdu(bytes(pdu))
            await asyncio.wait_for(answers.get(), 5)
        other = await connection.create_l2cap_channel(spec=l2cap.ClassicChannelSpec(psm=0x1001))
        other.sink = answers.put_nowait
        other.send_pdu(b"hello")
        await asyncio.wait_for(answers.get(), 5)
        pairing = smp.SMP_Pairing_Request_Command(
            io_capability=smp.SMP_NO_INPUT_NO_OUTPUT_IO_CAPABILITY, oob_data_flag=0,
            auth_req=smp.AuthReq(0x09), maximum_encryption_key_size=16,
            initiator_key_distribution=smp.KeyDistribution(0), responder_key_distribution=smp.KeyDistribution(0))
        connection.send_l2cap_pdu(smp.SMP_BR_CID, bytes(pairing))
        await asyncio.sleep(0.5)
        await other.disconnect()
        await att_channel.disconnect()
        await connection.disconnect()
        await asyncio.sleep(0.2)
        
        # --- LE ---
        def on_coc(channel):
            channel.sink = lambda sdu: channel.write(sdu)

        b.create_l2cap_server(spec=l2cap.LeCreditBasedChannelSpec(psm=0x0080, mtu=256, mps=23, max_credits=4),
                              handler=on_coc)
        await b.start_advertising(auto_restart=False)
        le = await a.connect(hci.Address("C1:22:33:44:55:66", hci.Address.RANDOM_DEVICE_ADDRESS), transport=PhysicalTransport.LE)
        coc = await le.create_l2cap_channel(spec=l2cap.LeCreditBasedChannelSpec(psm=0x0080, mtu=256, mps=23, max_credits=8))
        coc.sink = answers.put_nowait
        coc.write(bytes(range(100)))
        await asyncio.wait_for(answers.get(), 5)
        client = await Client.connect_eatt(le, spec=l2cap.LeCreditBasedChannelSpec(psm=att.EATT_PSM, mtu=100, mps=23))
        client.mtu = 100
        tap(client.bearer, "eatt")
        for bearer in list(b.gatt_server.prepared_writes) + [c for c in b.l2cap_channel_manager.le_coc_channels.get(le.handle, {}).values()]:
            if att.is_enhanced_bearer(bearer):
                bearer.att_mtu = 100
        await client.discover_services()
        for service in client.services:
            await service.discover_characteristics()
        for service in client.services:
            for characteristic in service.characteristics:
                if characteristic.properties & gatt.Characteristic.Properties.READ:
                    await client.read_value(characteristic.handle)
        await coc.disconnect()
        await client.bearer.disconnect()
        await le.disconnect()
        await asyncio.sleep(0.2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="Tests/Fixtures/bumble-channels.btsnoop")
    args = parser.parse_args()
    if os.path.exists(args.out):
        os.remove(args.out)
    asyncio.run(asyncio.wait_for(main(args.out), 30))
    with open(os.path.splitext(args.out)[0] + ".att.json", "w") as f:
        json.dump(ATT_LOG, f, indent=0)
        f.write("\n")
