"""A Bumble central for interop tests: scans, connects, discovers, reads/writes/subscribes.

    python Tools/bumble/central.py --transport tcp-client:127.0.0.1:PORT
        (--address AA:BB:CC:DD:EE:FF[/public|/random] | --name TEXT | --scan-only)
        [--mtu N] [--no-discover] [--read-all]
        [--read CHAR] [--write CHAR=HEX] [--write-without-response CHAR=HEX]
        [--subscribe CHAR [--count N]] [--pair] [--reconnect] [--encrypt] ...
        (actions run in the order given; --reconnect disconnects, connects again and rediscovers;
         --encrypt starts encryption with the key stored by an earlier --pair)
        [--duration S] [--timeout S]
        pairing (--pair): [--io none|display|keyboard|yesno|keyboard-display] [--legacy] [--mitm]
        [--passkey N] (entered when asked; also the one displayed) [--reject] (refuse comparisons)
        [--oob-out FILE] [--oob-in FILE] (OOB data in ble-hci's --oob-out format, common.py)

CHAR is a UUID (2a37, 128-bit dashed) or a value handle (0x0010).
JSON lines on stdout (the same shapes as `ble-hci`'s, see shared CLI contract):
  {"event":"advertisement","address":..,"addressType":..,"rssi":..,"connectable":..,"name":..,
   "services":[..],"manufacturerData":{"ffff":".."},"serviceData":{"180f":"64"},"txPower":4,
   "flags":6}            (once per advertiser, again when its data changes)
  {"event":"connected","address":..,"addressType":..,"handle":..,"mtu":..}
  {"event":"gatt","services":[{"uuid":..,"start":..,"end":..,"characteristics":[{"uuid":..,
     "handle":..,"valueHandle":..,"properties":[..],"value":..,"descriptors":[..]}]}]}
  {"event":"read","uuid":..,"handle":..,"value":..}
  {"event":"write","uuid":..,"handle":..}
  {"event":"notification"|"indication","uuid":..,"handle":..,"value":..}
  {"event":"error","op":..,"uuid":..,"handle":..,"att":"0x03","message":..}
  {"event":"pairing","method":"passkeyEntry","passkey":"012345"} (Bumble displays) /
  {"event":"pairing","method":"numericComparison","number":"123456"}
  {"event":"paired","encrypted":true,"keySize":16,"authenticated":..,"secureConnections":..}
  {"event":"pairingFailed","message":..}
  {"event":"encrypted","keySize":..} / {"event":"encryptionFailed","message":..}
  {"event":"disconnected","reason":"0x16","message":..}
Exit code: 0 when everything succeeded, 1 when any operation failed, 124 on --timeout.
"""
import argparse
import asyncio

from bumble import hci
from bumble.att import ATT_Error
from bumble.core import UUID
from bumble.device import Device, Peer
from bumble.gatt import Characteristic
from bumble.keys import MemoryKeyStore
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport import open_transport

import common

PROPERTY_NAMES = [
    (0x01, "broadcast"), (0x02, "read"), (0x04, "writeWithoutResponse"), (0x08, "write"),
    (0x10, "notify"), (0x20, "indicate"), (0x40, "authenticatedSignedWrites"),
    (0x80, "extendedProperties"),
]


def uuid_string(uuid: UUID) -> str:
    raw = uuid.uuid_bytes
    if len(raw) in (2, 4):
        return raw[::-1].hex()
    h = raw[::-1].hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def parse_advertising_data(data: bytes) -> dict:
    """AD structures -> the CLI contract's advertisement fields."""
    out: dict = {}
    services: list = []
    i = 0
    while i < len(data):
        length = data[i]
        if length == 0 or i + 1 + length > len(data):
            break
        ad_type, value = data[i + 1], data[i + 2:i + 1 + length]
        i += 1 + length
        if ad_type == 0x01 and value:
            out["flags"] = value[0]
        elif ad_type in (0x08, 0x09):
            if ad_type == 0x09 or "name" not in out:
                out["name"] = value.decode("utf-8", "replace")
        elif ad_type in (0x02, 0x03):
            services += [value[j:j + 2][::-1].hex() for j in range(0, len(value) - 1, 2)]
        elif ad_type in (0x04, 0x05):
            services += [value[j:j + 4][::-1].hex() for j in range(0, len(value) - 3, 4)]
        elif ad_type in (0x06, 0x07):
            services += [uuid_string(UUID.from_bytes(value[j:j + 16]))
                         for j in range(0, len(value) - 15, 16)]
        elif ad_type == 0xFF and len(value) >= 2:
            out.setdefault("manufacturerData", {})[value[:2][::-1].hex()] = value[2:].hex()
        elif ad_type == 0x16 and len(value) >= 2:
            out.setdefault("serviceData", {})[value[:2][::-1].hex()] = value[2:].hex()
        elif ad_type == 0x20 and len(value) >= 4:
            out.setdefault("serviceData", {})[value[:4][::-1].hex()] = value[4:].hex()
        elif ad_type == 0x21 and len(value) >= 16:
            out.setdefault("serviceData", {})[uuid_string(UUID.from_bytes(value[:16]))] = value[16:].hex()
        elif ad_type == 0x0A and value:
            out["txPower"] = int.from_bytes(value[:1], "little", signed=True)
    if services:
        out["services"] = services
    return out


class OrderedAction(argparse.Action):
    def __call__(self, parser, namespace, values, option_string=None):
        actions = getattr(namespace, "actions", None) or []
        actions.append((self.dest, values))
        namespace.actions = actions


class Central:
    def __init__(self, args):
        self.args = args
        self.seen: dict = {}
        self.found: asyncio.Future | None = None
        self.failed = False

    def on_advertisement(self, advertisement):
        # Bumble merges a scannable advertisement with its scan response into `data`; `data_bytes`
        # holds only the last report's (the scan response's, empty when the advertiser sends none).
        fields = parse_advertising_data(bytes(advertisement.data))
        key = (common.address_string(advertisement.address), advertisement.address.is_public)
        record = {"address": key[0], "addressType": common.address_type_string(advertisement.address),
                  "rssi": advertisement.rssi, "connectable": bool(advertisement.is_connectable),
                  **fields}
        if self.args.all_reports or self.seen.get(key) != record:
            self.seen[key] = record
            common.emit("advertisement", **record)
        if self.found is None or self.found.done() or not advertisement.is_connectable:
            return
        target = self.args.address
        if target is not None:
            if common.address_string(advertisement.address) == common.address_string(target) and \
               (not self.args.address_typed or advertisement.address.is_public == target.is_public):
                self.found.set_result(advertisement.address)
        elif self.args.name is not None and self.args.name in fields.get("name", ""):
            self.found.set_result(advertisement.address)

    def error(self, op, error, uuid=None, handle=None):
        self.failed = True
        fields = {"op": op}
        if uuid is not None:
            fields["uuid"] = uuid
        if handle is not None:
            fields["handle"] = handle
        if isinstance(error, ATT_Error):
            fields["att"] = f"0x{int(error.error_code):02x}"
            fields["message"] = str(error.error_name)
        else:
            fields["message"] = f"{type(error).__name__}: {error}"
        common.emit("error", **fields)

    def find(self, spec: str):
        """CHAR spec -> CharacteristicProxy."""
        characteristics = [c for s in self.peer.services for c in s.characteristics]
        if spec.lower().startswith("0x"):
            handle = int(spec, 16)
            for c in characteristics:
                if c.handle == handle:
                    return c
        else:
            uuid = UUID(spec)
            for c in characteristics:
                if c.uuid == uuid:
                    return c
        raise LookupError(f"no characteristic {spec}")

    async def read_tree(self) -> None:
        services = []
        for service in self.peer.services:
            chars = []
            for c in service.characteristics:
                props = [name for bit, name in PROPERTY_NAMES if c.properties & bit]
                entry = {"uuid": uuid_string(c.uuid), "handle": c.handle - 1,
                         "valueHandle": c.handle, "properties": props}
                if self.args.read_all and c.properties & Characteristic.Properties.READ:
                    try:
                        entry["value"] = (await self.peer.read_value(c)).hex()
                    except Exception as error:  # noqa: BLE001
                        self.error("read", error, uuid_string(c.uuid), c.handle)
                descriptors = []
                for d in c.descriptors:
                    dentry = {"uuid": uuid_string(d.type), "handle": d.handle}
                    if self.args.read_all:
                        try:
                            dentry["value"] = (await self.peer.read_value(d)).hex()
                        except Exception as error:  # noqa: BLE001
                            self.error("read", error, uuid_string(d.type), d.handle)
                    descriptors.append(dentry)
                entry["descriptors"] = descriptors
                chars.append(entry)
            services.append({"uuid": uuid_string(service.uuid), "start": service.handle,
                             "end": service.end_group_handle, "characteristics": chars})
        common.emit("gatt", services=services)

    async def pair(self, connection) -> None:
        """SMP pairing as Bumble's initiator, with the options' IO capability and flags."""
        start = asyncio.get_running_loop().time()
        try:
            await connection.pair()
        except Exception as error:  # noqa: BLE001 - reported as an event
            self.failed = True
            common.emit("pairingFailed", message=f"{type(error).__name__}: {error}")
            return
        common.emit("paired", encrypted=bool(connection.is_encrypted),
                    keySize=connection.encryption_key_size if hasattr(connection, "encryption_key_size") else None,
                    authenticated=bool(getattr(connection, "authenticated", False)),
                    secureConnections=bool(getattr(connection, "sc", False)),
                    seconds=round(asyncio.get_running_loop().time() - start, 4))

    async def run_action(self, kind: str, value) -> None:
        if kind == "pair":
            await self.pair(self.connection)
            return
        if kind == "encrypt":
            try:
                await self.connection.encrypt()
                common.emit("encrypted", keySize=self.connection.encryption_key_size)
            except Exception as error:  # noqa: BLE001 - reported as an event
                self.failed = True
                common.emit("encryptionFailed", message=f"{type(error).__name__}: {error}")
            return
        spec = value.split("=", 1)[0] if kind in ("write", "write_without_response") else value
        try:
            c = self.find(spec)
        except LookupError as error:
            self.error(kind, error)
            return
        uuid = uuid_string(c.uuid)
        try:
            if kind == "read":
                data = await self.peer.read_value(c)
                common.emit("read", uuid=uuid, handle=c.handle, value=data.hex())
            elif kind in ("write", "write_without_response"):
                data = bytes.fromhex(value.split("=", 1)[1])
                await self.peer.write_value(c, data, with_response=(kind == "write"))
                common.emit("write", uuid=uuid, handle=c.handle)
            elif kind == "subscribe":
                received = asyncio.Queue()
                indicate = not (c.properties & Characteristic.Properties.NOTIFY)
                name = "indication" if indicate else "notification"

                def on_value(v, uuid=uuid, handle=c.handle):
                    common.emit(name, uuid=uuid, handle=handle, value=bytes(v).hex())
                    received.put_nowait(v)

                await self.peer.subscribe(c, on_value, prefer_notify=not indicate)
                common.emit("subscribed", uuid=uuid, handle=c.handle)
                deadline = asyncio.get_running_loop().time() + self.args.duration
                count = 0
                while count < self.args.count:
                    remaining = deadline - asyncio.get_running_loop().time()
                    if remaining <= 0:
                        raise TimeoutError(f"{count} of {self.args.count} values in {self.args.duration} s")
                    await asyncio.wait_for(received.get(), remaining)
                    count += 1
                await self.peer.unsubscribe(c, on_value)
                common.emit("unsubscribed", uuid=uuid, handle=c.handle)
        except Exception as error:  # noqa: BLE001 - every failure is reported as an event
            self.error(kind.replace("_", "-"), error, uuid, c.handle)

    async def run(self) -> int:
        args = self.args
        async with await open_transport(args.transport) as (source, sink):
            device = Device.with_hci("bumble-central", common.random_static_address(), source, sink)
            oob = common.oob_config(args)
            device.pairing_config_factory = lambda _connection: PairingConfig(
                sc=not args.legacy, mitm=args.mitm, bonding=True, delegate=CentralPairingDelegate(args), oob=oob)
            device.keystore = MemoryKeyStore()
            device.on("advertisement", self.on_advertisement)
            await device.power_on()
            if args.public_identity:
                # Distributed as the identity while pairing (Bumble prefers the public address),
                # though this device connects and advertises from its random static address.
                device.public_address = args.public_identity
            if args.scan_only:
                await device.start_scanning(active=not args.passive, filter_duplicates=False)
                await asyncio.sleep(args.duration)
                await device.stop_scanning()
                return common.EXIT_OK
            connection, disconnected = await self.connect(device)
            self.connection = connection
            if not args.no_discover:
                await self.peer.discover_all()
                await self.read_tree()
            for kind, value in getattr(args, "actions", None) or []:
                if kind == "reconnect":
                    await self.disconnect(connection, disconnected)
                    connection, disconnected = await self.connect(device)
                    self.connection = connection
                    await self.peer.discover_all()
                    continue
                if connection.handle not in device.connections:
                    break
                await self.run_action(kind, value)
            await self.disconnect(connection, disconnected)
        return common.EXIT_FAILED if self.failed else common.EXIT_OK

    async def connect(self, device):
        """Scans until the target advertises, connects, exchanges MTU (--mtu) and prints
        `connected`; returns the connection and a future of its disconnection reason."""
        self.found = asyncio.get_running_loop().create_future()
        await device.start_scanning(active=not getattr(self.args, "passive", False), filter_duplicates=False)
        address = await self.found
        await device.stop_scanning()
        connection = await device.connect(address, own_address_type=hci.OwnAddressType.RANDOM)
        disconnected = asyncio.get_running_loop().create_future()
        connection.on("disconnection",
                      lambda reason: disconnected.done() or disconnected.set_result(reason))
        self.peer = Peer(connection)
        if self.args.mtu:
            try:
                await self.peer.request_mtu(self.args.mtu)
            except Exception as error:  # noqa: BLE001
                self.error("mtu", error)
        common.emit("connected", address=common.address_string(address),
                    addressType=common.address_type_string(address),
                    handle=connection.handle, mtu=connection.att_mtu)
        return connection, disconnected

    async def disconnect(self, connection, disconnected) -> None:
        """Disconnects (unless the peer already did) and prints `disconnected` with the reason."""
        if not disconnected.done():
            await connection.disconnect()
        reason = await asyncio.wait_for(disconnected, 5)
        common.emit("disconnected", reason=f"0x{int(reason):02x}",
                    message=hci.HCI_Constant.error_name(reason))


IO_CAPABILITIES = {
    "none": PairingDelegate.NO_OUTPUT_NO_INPUT,
    "display": PairingDelegate.DISPLAY_OUTPUT_ONLY,
    "keyboard": PairingDelegate.KEYBOARD_INPUT_ONLY,
    "yesno": PairingDelegate.DISPLAY_OUTPUT_AND_YES_NO_INPUT,
    "keyboard-display": PairingDelegate.DISPLAY_OUTPUT_AND_KEYBOARD_INPUT,
}


class CentralPairingDelegate(PairingDelegate):
    """Answers like a user would: the --passkey when asked to type one, yes to comparisons
    (unless --reject), and prints what it would display."""

    def __init__(self, args):
        super().__init__(io_capability=IO_CAPABILITIES[args.io])
        self.args = args

    async def compare_numbers(self, number: int, digits: int) -> bool:
        common.emit("pairing", method="numericComparison", number=f"{number:0{digits}d}")
        return not self.args.reject

    async def get_number(self) -> int | None:
        return self.args.passkey

    async def display_number(self, number: int, digits: int) -> None:
        common.emit("pairing", method="passkeyEntry", passkey=f"{number:0{digits}d}")

    async def generate_passkey(self) -> int:
        return self.args.passkey if self.args.passkey is not None else await super().generate_passkey()


async def main(args) -> int:
    return await Central(args).run()


def address_argument(text: str):
    return common.parse_address(text, "random")


if __name__ == "__main__":
    parser = common.base_parser("Bumble GATT central for interop tests")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--address", type=address_argument,
                        help="peer address, optionally /public or /random (default: any type)")
    target.add_argument("--name", help="connect to the first advertiser whose name contains this")
    target.add_argument("--scan-only", action="store_true",
                        help="only scan for --duration seconds and print advertisements")
    parser.add_argument("--passive", action="store_true", help="passive scanning")
    parser.add_argument("--all-reports", action="store_true",
                        help="print every report, not only new or changed advertisers")
    parser.add_argument("--mtu", type=int, default=0, help="exchange MTU with this value")
    parser.add_argument("--no-discover", action="store_true", help="skip full discovery")
    parser.add_argument("--read-all", action="store_true",
                        help="read every readable characteristic and descriptor while discovering")
    parser.add_argument("--read", action=OrderedAction, metavar="CHAR")
    parser.add_argument("--write", action=OrderedAction, metavar="CHAR=HEX")
    parser.add_argument("--write-without-response", action=OrderedAction, metavar="CHAR=HEX")
    parser.add_argument("--subscribe", action=OrderedAction, metavar="CHAR")
    parser.add_argument("--count", type=int, default=1, help="values to wait for per --subscribe")
    parser.add_argument("--pair", action=OrderedAction, nargs=0, metavar="", help="pair (SMP) at this point")
    parser.add_argument("--reconnect", action=OrderedAction, nargs=0, metavar="",
                        help="disconnect, connect again, rediscover")
    parser.add_argument("--encrypt", action=OrderedAction, nargs=0, metavar="",
                        help="encrypt with the stored key")
    parser.add_argument("--io", choices=sorted(IO_CAPABILITIES), default="none", help="IO capability for pairing")
    parser.add_argument("--public-identity", type=lambda t: common.parse_address(t, "public"), metavar="ADDRESS",
                        help="distribute this public identity address while pairing from the random static one")
    parser.add_argument("--legacy", action="store_true", help="LE legacy pairing (no Secure Connections)")
    parser.add_argument("--mitm", action="store_true", help="require MITM protection")
    parser.add_argument("--passkey", type=int, help="passkey to enter when asked (and to display)")
    parser.add_argument("--reject", action="store_true", help="answer numeric comparisons with no")
    common.add_oob_arguments(parser)
    parser.add_argument("--duration", type=float, default=5.0,
                        help="seconds to scan (--scan-only) or to wait for --count values")
    arguments = parser.parse_args()
    if arguments.address is not None:
        import sys
        raw = next((a for a in sys.argv if "/" in a and ":" in a), "")
        arguments.address_typed = "/" in raw
    else:
        arguments.address_typed = False
    common.run(main, arguments)
