"""A Bumble peripheral for interop tests: advertises and serves a known GATT database.

    python Tools/bumble/peripheral.py --transport tcp-client:127.0.0.1:PORT [--name N]
        [--address C0:11:22:33:44:55] [--legacy] [--notify-count N] [--exit-after N] [--eatt]
        [--oob-out FILE] [--oob-in FILE] (OOB pairing data in ble-hci's --oob-out format, common.py)
        [--add-service-after S] (a service added at run time, Service Changed indicated:
         {"event":"serviceAdded","uuid":..,"start":..,"end":..,"handles":{..}})

Prints one JSON line per thing that happened (stdout):
  {"event":"ready","address":"C0:..","addressType":"random","name":"..","advertising":"extended",
   "advertisingData":"<hex>","handles":{"2a37":..,...},
   "database":[{"uuid":"1800","start":1,"end":5,"characteristics":[{"uuid":"2a00","handle":2,
     "valueHandle":3,"properties":2,"descriptors":[{"uuid":"2902","handle":..}]}]},...]}
     (every service of the server, Bumble's own 1800/1801 included, in handle order)
  {"event":"connected","address":..,"addressType":..,"handle":..}
  {"event":"read","uuid":..,"handle":..}            (dynamic values only)
  {"event":"write","uuid":..,"handle":..,"value":"<hex>"}
  {"event":"subscribed","uuid":..,"handle":..,"notify":true,"indicate":false}
  {"event":"unsubscribed","uuid":..,"handle":..}
  {"event":"notified"|"indicated","uuid":..,"handle":..,"value":"<hex>"}
        ("indicated" carries "confirmed":true: it is printed once the client's Handle Value
         Confirmation arrived; {"event":"indicationFailed",...,"message":..} when none came)
  {"event":"mtu","mtu":..}
  {"event":"eattRequest","cid":..,"opcode":".."}   (--eatt: every PDU on an Enhanced ATT bearer)
  {"event":"disconnected","handle":..,"reason":"0x13","message":".."}

Advertising data (extended advertising, connectable, since it is longer than 31 bytes):
flags 0x06, complete local name, complete 16-bit UUID list (180d, 180f), complete 128-bit UUID
list (12345678-1234-5678-1234-56789abcdef0), manufacturer data (company 0xffff + 01020304),
service data 180f = 64, TX power level (4 dBm). With --legacy: legacy advertising (ADV_IND)
with flags, name, 16-bit list and TX power only (31-byte limit).

GATT database (plus Bumble's own 1800 Generic Access and 1801 Generic Attribute):
  180d Heart Rate:   2a37 notify (00 xx), 2a38 read (01)
  180f Battery:      2a19 read + notify (64)
  12345678-1234-5678-1234-56789abcdef0 custom:
    ...def1 read/write/write without response, 600-byte value bytes(i % 256), a write replaces it
    ...def2 read only: a write -> Write Not Permitted (0x03)
    ...def3 write only: a read -> Read Not Permitted (0x02)
    ...def4 read, needs encryption: a read without it -> Insufficient Encryption/Authentication
    ...def5 indicate
    ...def6 read, needs authentication: a read without it -> Insufficient Authentication (0x05)
After a subscription, --notify-count N values go out (notifications or indications, as the
client enabled), --notify-interval seconds apart.
"""
import asyncio

from bumble import hci
from bumble.att import ATT_Error, Attribute, ErrorCode
from bumble.core import UUID
from bumble.device import (AdvertisingEventProperties, AdvertisingParameters, AdvertisingType,
                           Device)
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.keys import MemoryKeyStore
from bumble.pairing import PairingConfig
from bumble.transport import open_transport

import common

CUSTOM_SERVICE = "12345678-1234-5678-1234-56789abcdef0"
LONG_UUID = "12345678-1234-5678-1234-56789abcdef1"
NO_WRITE_UUID = "12345678-1234-5678-1234-56789abcdef2"
NO_READ_UUID = "12345678-1234-5678-1234-56789abcdef3"
ENCRYPTED_UUID = "12345678-1234-5678-1234-56789abcdef4"
INDICATE_UUID = "12345678-1234-5678-1234-56789abcdef5"
AUTHENTICATED_UUID = "12345678-1234-5678-1234-56789abcdef6"
ADDED_SERVICE_UUID = "12345678-1234-5678-1234-56789abcdef7"
ADDED_CHARACTERISTIC_UUID = "12345678-1234-5678-1234-56789abcdef8"
LONG_VALUE = bytes(i % 256 for i in range(600))
COMPANY_ID = 0xFFFF
MANUFACTURER_BYTES = bytes([1, 2, 3, 4])


def uuid_string(uuid: UUID) -> str:
    raw = uuid.uuid_bytes
    if len(raw) in (2, 4):
        return raw[::-1].hex()
    h = raw[::-1].hex()
    return f"{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def ad(ad_type: int, data: bytes) -> bytes:
    return bytes([len(data) + 1, ad_type]) + data


def advertising_data(name: str, tx_power: int, legacy: bool) -> bytes:
    flags = ad(0x01, bytes([0x06]))
    local_name = ad(0x09, name.encode())
    uuids16 = ad(0x03, bytes.fromhex("0d180f18"))
    tx = ad(0x0A, tx_power.to_bytes(1, "little", signed=True))
    if legacy:
        data = flags + local_name + uuids16 + tx
        if len(data) > 31:
            raise SystemExit(f"advertising data is {len(data)} bytes, over 31: use a shorter --name")
        return data
    uuids128 = ad(0x07, UUID(CUSTOM_SERVICE).uuid_bytes)
    manufacturer = ad(0xFF, COMPANY_ID.to_bytes(2, "little") + MANUFACTURER_BYTES)
    service_data = ad(0x16, bytes.fromhex("0f18") + bytes([0x64]))
    return flags + local_name + uuids16 + uuids128 + manufacturer + service_data + tx


class Peripheral:
    def __init__(self, args):
        self.args = args
        self.long_value = LONG_VALUE
        self.disconnections = 0
        self.done = asyncio.Event()
        self.tasks = set()
        self.subscribed = set()  # (connection handle, attribute handle)

    def dynamic(self, uuid: str, initial: bytes, writable: bool):
        state = {"value": initial}
        holder = {}

        def read(_connection):
            common.emit("read", uuid=uuid, handle=holder["c"].handle)
            return state["value"]

        def write(_connection, value):
            state["value"] = bytes(value)
            common.emit("write", uuid=uuid, handle=holder["c"].handle, value=bytes(value).hex())

        return state, holder, CharacteristicValue(read=read, write=write if writable else None)

    def build_services(self):
        P = Characteristic.Properties
        R, W = Attribute.Permissions.READABLE, Attribute.Permissions.WRITEABLE
        self.heart_rate = Characteristic("2a37", P.NOTIFY, R, bytes([0x00, 0x48]))
        body_location = Characteristic("2a38", P.READ, R, bytes([0x01]))
        self.battery = Characteristic("2a19", P.READ | P.NOTIFY, R, bytes([0x64]))

        self.long_state, holder, value = self.dynamic(LONG_UUID, LONG_VALUE, writable=True)
        long_char = Characteristic(LONG_UUID, P.READ | P.WRITE | P.WRITE_WITHOUT_RESPONSE, R | W,
                                   value)
        holder["c"] = long_char
        def refuse_write(_connection, _value):
            common.emit("refused", op="write", uuid=NO_WRITE_UUID, att="0x03")
            raise ATT_Error(ErrorCode.WRITE_NOT_PERMITTED)

        def refuse_read(_connection):
            common.emit("refused", op="read", uuid=NO_READ_UUID, att="0x02")
            raise ATT_Error(ErrorCode.READ_NOT_PERMITTED)

        def accept_write(_connection, value):
            common.emit("write", uuid=NO_READ_UUID, handle=no_read.handle, value=bytes(value).hex())

        no_write = Characteristic(NO_WRITE_UUID, P.READ, R | W,
                                  CharacteristicValue(read=lambda _c: b"read only",
                                                      write=refuse_write))
        no_read = Characteristic(NO_READ_UUID, P.WRITE, R | W,
                                 CharacteristicValue(read=refuse_read, write=accept_write))
        encrypted = Characteristic(ENCRYPTED_UUID, P.READ,
                                   Attribute.Permissions.READ_REQUIRES_ENCRYPTION, b"secret")
        self.indicate = Characteristic(INDICATE_UUID, P.INDICATE, R, bytes([0x01]))
        authenticated = Characteristic(AUTHENTICATED_UUID, P.READ,
                                       Attribute.Permissions.READ_REQUIRES_AUTHENTICATION, b"private")
        self.characteristics = [self.heart_rate, body_location, self.battery, long_char,
                                no_write, no_read, encrypted, self.indicate, authenticated]
        return [
            Service("180d", [self.heart_rate, body_location]),
            Service("180f", [self.battery]),
            Service(CUSTOM_SERVICE, [long_char, no_write, no_read, encrypted, self.indicate,
                                     authenticated]),
        ]

    def next_value(self, characteristic, i: int) -> bytes:
        if characteristic is self.heart_rate:
            return bytes([0x00, (60 + i) % 256])
        if characteristic is self.battery:
            return bytes([(100 - i) % 256])
        return bytes([(i + 1) % 256])

    async def send_updates(self, connection, characteristic, indicate: bool):
        uuid = uuid_string(characteristic.uuid)
        for i in range(self.args.notify_count):
            await asyncio.sleep(self.args.notify_interval)
            if (connection.handle, characteristic.handle) not in self.subscribed:
                return
            value = self.next_value(characteristic, i)
            if indicate:
                try:
                    # Returns once the Handle Value Confirmation arrived (Bumble waits for it).
                    await self.device.indicate_subscriber(connection, characteristic, value)
                except Exception as error:  # noqa: BLE001 - report, the test decides
                    common.emit("indicationFailed", uuid=uuid, handle=characteristic.handle,
                                value=value.hex(), message=f"{type(error).__name__}: {error}")
                    return
                common.emit("indicated", uuid=uuid, handle=characteristic.handle, value=value.hex(),
                            confirmed=True)
            else:
                await self.device.notify_subscriber(connection, characteristic, value)
                common.emit("notified", uuid=uuid, handle=characteristic.handle, value=value.hex())

    def on_subscription(self, connection, characteristic, notify_enabled, indicate_enabled):
        # A CCCD written on an Enhanced ATT bearer names the bearer (an L2CAP channel).
        connection = getattr(connection, "connection", connection)
        uuid = uuid_string(characteristic.uuid)
        key = (connection.handle, characteristic.handle)
        if not notify_enabled and not indicate_enabled:
            self.subscribed.discard(key)
            common.emit("unsubscribed", uuid=uuid, handle=characteristic.handle)
            return
        self.subscribed.add(key)
        common.emit("subscribed", uuid=uuid, handle=characteristic.handle,
                    notify=bool(notify_enabled), indicate=bool(indicate_enabled))
        if uuid == "2a05" and self.args.add_service_after is not None:
            task = asyncio.create_task(self.add_service_later(connection, characteristic))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)
            return
        if self.args.notify_count > 0:
            task = asyncio.create_task(
                self.send_updates(connection, characteristic, bool(indicate_enabled)))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def add_service_later(self, connection, service_changed):
        """--add-service-after: a service added to the running database, then Service Changed
        indicated with its handle range (Core v5.4 Vol 3 Part G 7.1)."""
        await asyncio.sleep(self.args.add_service_after)
        added = Characteristic(ADDED_CHARACTERISTIC_UUID, Characteristic.Properties.READ,
                               Attribute.Permissions.READABLE, b"added")
        service = Service(ADDED_SERVICE_UUID, [added])
        self.device.add_service(service)
        start, end = service.handle, service.end_group_handle
        await self.device.indicate_subscriber(connection, service_changed,
                                              start.to_bytes(2, "little") + end.to_bytes(2, "little"))
        common.emit("serviceAdded", uuid=ADDED_SERVICE_UUID, start=start, end=end,
                    handles={ADDED_CHARACTERISTIC_UUID: added.handle})

    def on_connection(self, connection):
        common.emit("connected", address=common.address_string(connection.peer_address),
                    addressType=common.address_type_string(connection.peer_address),
                    handle=connection.handle)
        connection.on("disconnection", lambda reason: self.on_disconnection(connection, reason))
        connection.on("connection_att_mtu_update",
                      lambda *_: common.emit("mtu", mtu=connection.att_mtu))

    def on_disconnection(self, connection, reason):
        self.subscribed = {k for k in self.subscribed if k[0] != connection.handle}
        common.emit("disconnected", handle=connection.handle, reason=f"0x{int(reason):02x}",
                    message=hci.HCI_Constant.error_name(reason))
        self.disconnections += 1
        if self.args.exit_after and self.disconnections >= self.args.exit_after:
            self.done.set()

    def database(self):
        """Every service, characteristic and descriptor of the server, with handles."""
        from bumble.gatt import CharacteristicDeclaration, Descriptor
        services, current, characteristic = [], None, None
        for attribute in self.device.gatt_server.attributes:
            if isinstance(attribute, Service):
                current = {"uuid": uuid_string(attribute.uuid), "start": attribute.handle,
                           "end": attribute.end_group_handle, "characteristics": []}
                services.append(current)
                characteristic = None
            elif isinstance(attribute, CharacteristicDeclaration) and current is not None:
                characteristic = {"uuid": uuid_string(attribute.characteristic.uuid),
                                  "handle": attribute.handle, "valueHandle": attribute.value_handle,
                                  "properties": int(attribute.characteristic.properties),
                                  "descriptors": []}
                current["characteristics"].append(characteristic)
            elif isinstance(attribute, Descriptor) and characteristic is not None:
                characteristic["descriptors"].append(
                    {"uuid": uuid_string(attribute.type), "handle": attribute.handle})
        return services

    def serve_eatt(self) -> None:
        """Bumble's EATT server (PSM 0x0027, gatt_server.register_eatt), reporting the PDUs
        that arrive on each Enhanced ATT bearer by the bearer's CID."""
        from bumble import att
        server = self.device.gatt_server
        serve = server.on_gatt_pdu

        def on_gatt_pdu(bearer, pdu):
            if att.is_enhanced_bearer(bearer):
                common.emit("eattRequest", cid=bearer.source_cid, opcode=type(pdu).__name__)
            serve(bearer, pdu)

        server.on_gatt_pdu = on_gatt_pdu
        server.register_eatt()

    async def run(self) -> int:
        args = self.args
        address = args.address or common.random_static_address()
        async with await open_transport(args.transport) as (source, sink):
            self.device = Device.with_hci(args.name, address, source, sink)
            # Bonds made by a central's pairing are kept for this run (LTK requests on reconnection).
            self.device.keystore = MemoryKeyStore()
            oob = common.oob_config(args)
            if oob:
                # Bumble's default pairing answers, plus the OOB data of --oob-out/--oob-in.
                self.device.pairing_config_factory = lambda _connection: PairingConfig(oob=oob)
            self.device.add_services(self.build_services())
            if args.eatt:
                self.serve_eatt()
            self.device.on("connection", self.on_connection)
            self.device.on("characteristic_subscription", self.on_subscription)
            await self.device.power_on()
            if args.public_identity:
                # Distributed as the identity while pairing (Bumble prefers the public address),
                # though this device connects and advertises from its random static address.
                self.device.public_address = args.public_identity
            data = advertising_data(args.name, args.tx_power, args.legacy)
            if args.legacy:
                await self.device.start_advertising(
                    advertising_type=AdvertisingType.UNDIRECTED_CONNECTABLE_SCANNABLE,
                    own_address_type=hci.OwnAddressType.RANDOM, auto_restart=True,
                    advertising_data=data, scan_response_data=data)
            else:
                await self.device.create_advertising_set(
                    advertising_parameters=AdvertisingParameters(
                        advertising_event_properties=AdvertisingEventProperties(
                            is_connectable=True, is_scannable=False, is_legacy=False),
                        own_address_type=hci.OwnAddressType.RANDOM,
                        primary_advertising_interval_min=args.interval,
                        primary_advertising_interval_max=args.interval,
                        advertising_tx_power=args.tx_power),
                    random_address=address, advertising_data=data, auto_restart=True)
            handles = {}
            for c in self.characteristics:
                handles.setdefault(uuid_string(c.uuid), c.handle)
            common.emit("ready", address=common.address_string(address), addressType="random",
                        name=args.name, advertising="legacy" if args.legacy else "extended",
                        intervalMs=None if args.legacy else args.interval,
                        advertisingData=data.hex(), handles=handles, database=self.database())
            await self.done.wait()
            await asyncio.sleep(0.2)  # let the last events reach the controller / snooper
        return common.EXIT_OK


async def main(args) -> int:
    return await Peripheral(args).run()


if __name__ == "__main__":
    parser = common.base_parser("Bumble GATT peripheral for interop tests")
    parser.add_argument("--name", default="bumble-peer", help="complete local name")
    parser.add_argument("--address", type=lambda t: common.parse_address(t, "random"),
                        help="random static address (default: a generated one)")
    parser.add_argument("--public-identity", type=lambda t: common.parse_address(t, "public"), metavar="ADDRESS",
                        help="distribute this public identity address while pairing from the random static one")
    parser.add_argument("--eatt", action="store_true", help="serve Enhanced ATT bearers (PSM 0x0027)")
    parser.add_argument("--legacy", action="store_true",
                        help="legacy advertising with a subset of the data (31-byte limit)")
    parser.add_argument("--tx-power", type=int, default=4, help="TX power level AD (dBm)")
    parser.add_argument("--interval", type=float, default=1000.0,
                        help="extended advertising interval in ms (default 1000, Bumble's default; "
                             "not for --legacy, whose interval Bumble's controller reads as ms)")
    parser.add_argument("--notify-count", type=int, default=0,
                        help="values to notify/indicate after each subscription")
    parser.add_argument("--notify-interval", type=float, default=0.1)
    parser.add_argument("--exit-after", type=int, default=0,
                        help="exit after this many disconnections (0: run until --timeout)")
    parser.add_argument("--add-service-after", type=float, metavar="S",
                        help="S seconds after a client subscribes to Service Changed, add the service ...def7 "
                             "(characteristic ...def8, read \"added\") and indicate Service Changed with its range")
    common.add_oob_arguments(parser)
    common.run(main, parser.parse_args())
