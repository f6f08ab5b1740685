let toolVersion = "0.1.0"

let mainHelp = """
ble-hci \(toolVersion): a Bluetooth Low Energy host stack that talks HCI directly (no bluetoothd),
records every packet and decodes it layer by layer.

Usage: ble-hci [GLOBAL OPTIONS] COMMAND [OPTIONS]

Commands:
  scan          list advertisers (active scan by default)
  central       connect to a peripheral, discover, read, write, subscribe
  peripheral    advertise and serve the `demo`, `band` or `secure` profile, or a GATT table
  advertise     broadcast: a non-connectable extended advertising set, optionally a periodic train
  shell         an interactive session: both roles, several links, Tab completion, history
  session       the shell's commands as JSON lines on stdin (--json), for scripts and tests
  bonds         list or remove the stored bonds (SMP keys)
  dump          decode a btsnoop, pcap, pcapng or PacketLogger capture, layer by layer, or draw it (--flow, --svg)
  demo          central + peripheral on an in-process virtual link, traced
  controllers   serve virtual LE controllers on TCP or UNIX sockets
  proxy         stand between another host stack and a controller: forward, record, decode
  adapters      list the kernel's HCI adapters, who holds them, how to free one

Global options (before or after COMMAND):
  -t, --transport SPEC   controller: hciN | hci:N | tcp:HOST:PORT | unix:PATH |
                         serial:PATH[@BAUD] | virtual (demo only)   (default hci0)
  -w, --capture FILE     record every HCI packet (*.pcap → pcap, *.pcapng → pcapng, else btsnoop)
      --trace[=LAYERS]   print every packet live, decoded (hci,l2cap,att,gatt,smp)
      --json             one JSON object per line on stdout
      --lang LANG        language of the human lines, progress and errors of scan, central,
                         peripheral, demo and dump --flow/--svg, of usage errors and of --help:
                         en or zh-Hans (default: the locale, LC_ALL, then LC_MESSAGES, then
                         LANG: zh_CN*, zh_SG*, zh_Hans* → zh-Hans); JSON, field names and exit
                         codes never change; shell and session say only their help in it,
                         the rest stays English for now (e.g. ble-hci --lang zh-Hans demo)
  -h, --help             help (also: ble-hci COMMAND --help)
      --version          print the version
      --man              print this manual as a man page, ble-hci(1) (roff)
      --completions SH   print the completion script for SH: bash or zsh

Examples:
  ble-hci demo
  ble-hci --lang zh-Hans demo                 # human lines in Simplified Chinese
  sudo ble-hci -t hci0 scan --duration 5
  sudo ble-hci -t hci0 -w run.pcap central name:Heart --subscribe 2a37 --count 10
  ble-hci dump run.pcap --layers hci,l2cap,att

Exit codes: 0 success, 1 operation failed, 2 usage error, 3 transport/adapter unavailable
or lost, 130/143 interrupted by SIGINT/SIGTERM before the command finished (a command that
runs until Ctrl-C, e.g. scan or peripheral without --duration, exits 0 on it).

Environment: NO_COLOR set (to anything) turns colour off; colour is only used on a terminal.
"""

let scanHelp = """
    Usage: ble-hci scan [--duration S] [--passive] [--duplicates] [--service UUID]... [--name TEXT]
                        [--rssi DBM] [--phy 1m|2m|coded] [--manufacturer ID]... [--service-data UUID]...
                        [--bonds DIR]
           ble-hci scan --sync TARGET [--count N] [--duration S]

    Scans for advertisers and prints one line per advertiser when first seen and whenever its
    data change (every report with --duplicates). Filters of different kinds must all match; a
    repeated filter matches any of its values. At the end, a summary per advertiser shown: its
    advertising events, measured advertising interval and RSSI range over the scan (stderr, or
    {"event":"summary",...} on stdout with --json; see docs/cli.md).

      --duration S        stop after S seconds (default: until Ctrl-C)
      --passive           passive scan (no scan requests, so no scan response data)
      --duplicates        report every advertising report, not only changes
      --service UUID      only advertisers listing this service (repeatable; any matches)
      --name TEXT         only advertisers whose name contains TEXT (ignoring case)
      --rssi DBM          only reports at least this strong, -127 to 20 dBm (also --rssi-min);
                          a report without an RSSI does not match
      --phy P             only advertising whose data came on P: 1m, 2m or coded (the secondary
                          PHY of extended advertising, else the primary; legacy is 1m). The scan
                          runs on LE Coded as well as LE 1M when the controller has the LE Coded
                          PHY feature; on one without it, long-range (Coded primary) advertisers
                          are not heard
      --manufacturer ID   only advertisers with Manufacturer Specific Data from company ID
                          (16-bit hex, e.g. 0x004c; repeatable; any matches)
      --service-data UUID only advertisers with Service Data for UUID (repeatable; any matches)
      --bonds DIR         bonds whose IRKs resolve private addresses: a bonded peer is shown with
                          its identity address ("bonded AA:BB:../public"; JSON identityAddress)
                          (default $XDG_STATE_HOME/ble-hci, else ~/.local/state/ble-hci)
      --sync TARGET       instead of listing advertisers: find TARGET (an address, optionally
                          /public or /random, or name:TEXT, as central takes it; within 10 s),
                          synchronise to its periodic advertising train (LE Periodic Advertising
                          Create Sync; within 10 s) and print each periodic advertisement whole,
                          its reports joined ({"event":"periodicReport","data":HEX,"rssi":N,
                          "sync":N}, "truncated":true when the controller cut it short), then
                          terminate the sync. Exit 1 when TARGET has no train or the sync is lost
      --count N           with --sync: stop after N periodic advertisements

    The interval is the median time between an advertiser's advertising reports as they reach
    this host (its advertising interval plus the 0-10 ms advDelay a controller adds); when the
    scan window misses events (a real radio listens 30 ms of every 60 ms here) it can be a
    multiple of the interval: the shortest gap is given too.

    Examples:
      sudo ble-hci -t hci0 scan --duration 10 --service 180d --json
      ble-hci -t tcp:127.0.0.1:9002 scan --duration 5 --rssi -70 --manufacturer 0x004c
      ble-hci -t tcp:127.0.0.1:9002 scan --duration 5 --service-data 180f --phy 1m --json
      ble-hci -t tcp:127.0.0.1:9002 --json scan --sync name:train --count 3
    """

let centralHelp = """
    Usage: ble-hci central TARGET... [ACTIONS] [--mtu N] [--timeout S] [--profile band [--date YYYY-MM-DD]]
                          [--pair] [--eatt N [--eatt-mtu M]] [SECURITY OPTIONS]

    TARGET: AA:BB:CC:DD:EE:FF[/public|/random] or name:TEXT (first advertiser whose name
    contains TEXT, ignoring case). CHAR: a UUID (2a37, 32-bit or 128-bit) or a handle (0x0010).
    Several TARGETs are found and connected at once, and each link runs the same actions; every
    --json event carries the link's "connection" and its "target", human lines and errors start
    with [TARGET]. A target not found or not connected fails the run (exit 1) without stopping
    the others.

    Actions, run in the order given:
      --read CHAR                       read a value (long values read in full)
      --write CHAR=HEX                  write with response
      --write-without-response CHAR=HEX write command
      --subscribe CHAR [--count N] [--duration S]
                                        notifications or indications, whichever it has;
                                        an indication is confirmed once printed; values
                                        lost beyond 1024 waiting are reported (stderr, or
                                        {"event":"dropped","count":N,"total":T} with --json)
      --discover                        discover and print the GATT tree
    With no action: connect, exchange MTU, discover everything, read every readable value and
    descriptor, print the tree, disconnect.

      --mtu N        ATT MTU to request (23-517, default 517)
      --timeout S    seconds to find and connect to TARGET (default 10)
      --profile band speak the band profile's framed protocol (see docs/band.md): total
                     steps and the hourly step/sleep history of --date (default: today, UTC)
      --pair         pair right after connecting (or only encrypt when a bond exists)
      --pair-again   as --pair, and when the peripheral has lost our bond (encrypting from it
                     fails with PIN or Key Missing, 0x06) pair afresh: the new bond replaces
                     ours. Without it the central says so and does not pair again by itself
      --eatt N       open N (1-5) Enhanced ATT bearers after connecting (enhanced credit-based
                     channels on PSM 0x0027, one request; the link is encrypted first, pairing
                     if there is no bond) and spread the GATT requests over them: each bearer
                     has its own outstanding request ({"event":"eatt","bearers":N,"mtu":M}),
                     and bits 1-2 of Client Supported Features (0x2B29) are set.
                     Exchange MTU stays on the unenhanced bearer; notifications come on either.
                     Refused (a peripheral without EATT): "bearers":0, and the run goes on
                     over the unenhanced bearer
      --eatt-mtu M   then raise the bearers' receive MTU from 517 to M (517-65535) with a Credit
                     Based Reconfigure Request: {"event":"eattMTU","mtu":M,"attMTU":A} (A: the
                     smaller of each channel's MTUs), or "message" when the peripheral refuses
    Without --pair the central pairs when it must: an Insufficient Authentication (0x05) or
    Insufficient Encryption (0x0F) answer makes it encrypt (bond) or pair and retry that request
    once; a peripheral's Security Request is honoured. A bonded peripheral is encrypted at once.

    \(securityHelp)

    Examples:
      ble-hci -t tcp:127.0.0.1:9001 central name:ble-hci
      sudo ble-hci -t hci0 central F0:F1:F2:F3:F4:F5/random --read fff2 --write fff2=6869 --subscribe fff1 --count 3
      ble-hci -t tcp:127.0.0.1:9001 central name:left name:right --read 2a19 --json   # two links at once
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --read ff01          # pairs on 0x05, then reads
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --pair --io keyboard --mitm --passkey 123456 --read ff02
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --pair --io yesno --mitm --yes --json
      ble-hci -t tcp:127.0.0.1:9002 central name:ble-hci --eatt 2 --read fff2 --read ffe1   # over two EATT bearers
      ble-hci -t tcp:127.0.0.1:9002 central name:ble-hci --eatt 2 --eatt-mtu 1024    # then reconfigured
    """

let peripheralHelp = """
    Usage: ble-hci peripheral [--name NAME] [--profile demo|band|secure | --gatt FILE] [--duration S]
                              [--security-request] [--eatt] [--directed TARGET] [SECURITY OPTIONS]

    Advertises (connectable: flags, complete local name, the profile's 16-bit service UUIDs) and
    serves the profile until Ctrl-C or --duration; advertises again after each disconnection.

      --name NAME          advertised and GAP device name (default ble-hci)
      --profile P          demo (default), band, or secure: service ff66 with ff01 (read/write,
                           encryption required, "secret") and ff02 (read/notify, authenticated
                           encryption required, "authenticated"; CCCD needs encryption)
      --duration S         stop after S seconds
      --gatt FILE          serve the GATT table in FILE instead of a profile: the central's
                           `gatt` event (or its --json output as is), with values, optional
                           "permissions" (read, write, readEncrypted, writeEncrypted,
                           readAuthenticated, writeAuthenticated), "includes" and "primary".
                           The file's handles (start, end, handle, valueHandle, descriptor
                           handles) are kept when consistent (increasing, inside their service,
                           value right after its declaration, a handle for every CCCD the server
                           needs); the server's own 1800/1801 then take handles 1-13 if the
                           first service starts after 13, else the handles after the last one.
                           Otherwise handles are reassigned in the file's order, and stderr
                           says why. 1800/1801 are the server's own (the file's Device Name is
                           the default --name); CCCD values are per client.
                           A bad file exits 2 naming the JSON path of the problem.
      --security-request   ask every central to pair (SMP Security Request) once connected
      --eatt               serve Enhanced ATT bearers (PSM 0x0027) on encrypted links, and say so
                           in Server Supported Features (0x2B3A, bit 0); on an unencrypted link
                           they are refused (result 0x0008, insufficient encryption). The server
                           answers on every bearer and pushes on one: notifications on the first
                           open one, indications on one with none outstanding (confirmed there).
                           The characteristic takes two more handles in 1801 (1-15)
      --directed TARGET    directed advertising (ADV_DIRECT_IND, low duty cycle) to one central
                           only: TARGET is its identity address (AA:BB:CC:DD:EE:FF[/public|
                           /random], public by default) or "bonded" (the last bond stored). No
                           advertising data is sent. With --privacy and the central bonded with
                           an IRK, the controller puts the central's RPA in TargetA

    Every request is shown with its answer: value reads and writes, descriptor reads with the
    value answered, refusals (--json: "error" events), discovery ("request" events).

    \(securityHelp)

    Examples:
      sudo ble-hci -t hci0 peripheral --profile demo --json
      ble-hci -t tcp:127.0.0.1:9001 peripheral --profile secure --name secure
      ble-hci -t tcp:127.0.0.1:9001 peripheral --eatt       # EATT for centrals that pair
      ble-hci -t tcp:127.0.0.1:9001 peripheral --profile secure --io display --mitm --passkey 123456
      ble-hci --json -t tcp:127.0.0.1:9002 central F0:F1:F2:F3:F4:F5 > table.json   # clone a device
      ble-hci -t tcp:127.0.0.1:9001 peripheral --gatt table.json
      ble-hci -t tcp:127.0.0.1:9001 peripheral --profile secure --privacy --directed bonded
    """

let advertiseHelp = """
    Usage: ble-hci advertise [--name NAME] [--data HEX] [--periodic-data HEX] [--interval MS]
                             [--periodic-interval MS] [--duration S]

    The broadcaster role (beacons, periodic trains): a non-connectable, non-scannable extended
    advertising set (extended advertising PDUs, set 0, SID 0) carrying the complete local name and
    --data, and with --periodic-data a periodic advertising train on that set. Both stay on until
    --duration ends or Ctrl-C, then are disabled. --json prints {"event":"advertising",
    "address":...,"addressType":...,"name":...,"data":HEX[,"periodicData":HEX,"periodicInterval":N]}
    (periodicInterval in 1.25 ms units). Needs a controller with extended advertising, and with
    periodic advertising for --periodic-data (stderr names the command it lacks). Receive a train
    with scan --sync.

      --name NAME             Complete Local Name in the set's data (default ble-hci)
      --data HEX              more AD structures (length, type, value; Core Vol 3 Part C 11) after
                              the name, e.g. 05ff4c000102 (Manufacturer Specific Data); at most
                              1650 octets with the name
      --periodic-data HEX     the periodic train's AD structures (at most 1650 octets; sent to the
                              controller in fragments of 252, received in reports of at most 247)
      --interval MS           advertising interval, 20 to 10240 ms (default 100)
      --periodic-interval MS  periodic advertising interval, 7.5 to 81918.75 ms (default 100)
      --duration S            stop after S seconds (default: until Ctrl-C)

    Examples:
      ble-hci -t tcp:127.0.0.1:9001 advertise --name beacon --data 05ff4c000102
      ble-hci -t tcp:127.0.0.1:9001 advertise --name train --periodic-data 0aff4c00010203040506 --periodic-interval 50
      ble-hci -t tcp:127.0.0.1:9002 scan --sync name:train --count 5
    """

let bondsHelp = """
    Usage: ble-hci bonds [--bonds DIR] [list | remove ADDRESS | clear]

    Lists the stored bonds (peer identity address and type, key size, Secure Connections, MITM,
    whether an IRK is held; --json: {"event":"bond",...}), or removes one peer's bond, or all.
    DIR defaults to $XDG_STATE_HOME/ble-hci, else ~/.local/state/ble-hci.

    Examples:
      ble-hci bonds
      ble-hci bonds remove F0:F1:F2:F3:F4:F5
      ble-hci bonds --bonds /tmp/bonds clear
    """

let dumpHelp = """
    Usage: ble-hci dump FILE [--layers LAYERS] [--json | --flow | --svg OUT.svg] [--hex] [--explain]
           ble-hci dump FILE --html OUT.html
           ble-hci dump FILE --stats [--json]
           ble-hci dump FILE --attributes [--json]

    Decodes a btsnoop (datalink 1001, 1002, 2001), pcap or pcapng (Wireshark's default format;
    link types 187, 201, 254 as btmon writes) or Apple PacketLogger (.pklg, either byte order)
    capture, layer by layer, with the Core specification's field names. Malformed packets are
    printed with their raw bytes and the reason; decoding goes on. A pcapng packet of another
    link type, and PacketLogger's text records (notes, power, kernel, syslog...), are notes.

      --layers LAYERS   which layers to show: a comma list of hci,l2cap,att,gatt,smp (default:
                        all, every packet shown). A packet with nothing in the chosen layers
                        is left out (e.g. --layers att shows only ATT PDUs); malformed packets
                        are always shown. FILE - reads the capture from stdin.
      --json            one JSON object per packet; a malformed one carries "malformed" (the
                        reason) and "raw" (hex)
      --flow            the capture as a sequence diagram in text: columns for this host, its
                        controller and each peer (by address); one arrow per packet, labelled in
                        the words of the deepest layer it has among LAYERS (packets with none of
                        them are left out); grouped under numbered steps (power on, advertise,
                        scan, connect, exchange MTU, discover services / characteristics /
                        descriptors, read, write, subscribe, notify, pair, encrypt, disconnect...)
                        each naming the CoreBluetooth call that causes it (centralManager.connect,
                        peripheral.readValue(for:), or peripheralManager's side when this host
                        is the GATT server); a step the stack or the controller takes by itself
                        says so instead: advertising off right after a connection,
                        a server's reads of the attributes its stack holds (Generic Access,
                        Generic Attribute, descriptors), the client's GATT caching reads and
                        writes, a request sent again after pairing or encryption;
                        a "link layer: standby → advertising" line under
                        each packet that changed the controller's link-layer state (standby,
                        advertising, scanning, initiating, connected: from the enables the
                        controller accepted and the connection events)
      --svg OUT.svg     the same diagram as a standalone SVG (no scripts, no external resources):
                        layers in colours, time since the first packet on the left, repeated
                        exchanges and repeated sessions folded into one "× N" row (clicking a
                        folded exchange lists up to 40 of its packets; the text diagram lists
                        every packet). With --flow, both.
      --html OUT.html   the capture explorer: one self-contained page to open in a browser
                        (no network, no external script or font). The packet list grouped by
                        the steps of --flow with repeated exchanges folded (click to unfold),
                        the sequence diagram beside it row by row; the selected packet's layer
                        tree and its octets in hex, one colour band per layer (H4, HCI, L2CAP,
                        ATT / SMP / signaling); pointing at or clicking a field highlights the
                        octets it was read from; a request's or command's row links to its
                        response (ATT, HCI Command Complete / Status) and back; the GATT
                        database the capture revealed (as --attributes; a handle filters);
                        filters by layer, opcode, attribute handle and text; the controller's
                        link-layer state (standby, advertising, scanning, initiating,
                        connected) marked on the rows that change it and given for the
                        selected packet, as --flow's "link layer:" lines. Only the visible
                        rows are drawn: a 50 000-packet capture scrolls. Partial: fields of a
                        frame reassembled from several ACL packets, AD structures, the GATT
                        layer's and those of commands and events only the catalog describes
                        have no octet range (they are listed, not highlighted). Not with
                        other options.
      --hex             under each layer's fields, that layer's octets in hex (16 a line after
                        their offset, as tshark -x): hci the HCI packet after the H4 indicator,
                        l2cap the whole frame with its basic header (a fragment: its ACL data),
                        signaling, att and smp their PDU (ATT on a credit-based channel: the SDU
                        reassembled from its K-frames). With --json, a "hex" object by layer
                        name ({"hci":"...","l2cap":"...","att":"..."}) of the layers shown.
      --explain         under each field an "explain:" line: what it means, its unit, the
                        specification section and the CoreBluetooth counterpart where there is
                        one; then the value decoded: the bits set of Supported Commands, event
                        masks, LE and LMP features one per line as btmon prints them; the values
                        of standard characteristics (Device Name, Appearance, Peripheral Preferred
                        Connection Parameters, Service Changed, Battery Level, Heart Rate
                        Measurement, Body Sensor Location, Device Information strings, CCCD,
                        Client/Server Supported Features); characteristic properties with
                        CoreBluetooth's names; what an ATT error reveals of the attribute's
                        permissions (permissions are never sent). Partial: the parameters of
                        commands and events the stack does not send (hci-catalog.pdl) get only
                        their specification name and their command's section, no meaning or
                        unit; LMP features pages 1 and 2 are not named. With --json,
                        an "explain" object by layer and field path ({"hci":{"connectionInterval":
                        {"meaning":...,"unit":...,"spec":...,"coreBluetooth":...,"decoded":[...]}}}).
      --stats           no packet listing: what the capture carried, as btmon -a reports it.
                        Packets by type; per connection (handle, LE or BR/EDR, peer address,
                        the packets that connected and disconnected it, the reason, duration)
                        ACL packets and octets each way and their throughput; per L2CAP channel
                        (fixed ones by CID, dynamic ones followed from their signaling with PSM
                        and mode, others by CID) frames and octets each way; on ATT channels
                        (CID 0x0004, PSM 0x001F, EATT) requests, answers and the request →
                        response latency (min, median, max), indications and confirmations,
                        Error Responses by code; SMP Pairing Failed by reason; HCI commands that
                        failed (Command Status or Command Complete with a Status other than
                        Success). With --json, one JSON object (docs/cli.md has its fields).
      --attributes      no packet listing: each GATT server's attribute table as the capture
                        reveals it (Wireshark's "ATT Server Attributes"), per connection:
                        services (Read By Group Type, Find By Type Value), characteristics (Read
                        By Type 0x2803), descriptors (Find Information), the values last read
                        (Read, Read Blob assembled, Read By Type, Read Multiple Variable; else the
                        last notified), refusals (Error Responses to reads and writes) and
                        handles outside the discovered services. Only what the capture shows: a
                        client that had the database cached discovers nothing, and a requirement
                        the traffic never ran into (a value first read after pairing) is not
                        known, so a clone serves it without it. With --json, one
                        {"event":"gatt",...} line per server, with the permissions the refusals
                        revealed: `peripheral --gatt FILE` serves it, so a device seen in a
                        phone's log can be emulated.

    Pairing (SMP) and encryption packets get their own steps; the steps' CoreBluetooth names for
    them are generic (the system pairs, no app call).

    L2CAP: the LE and the BR/EDR signaling channels are decoded (a BR/EDR C-frame's commands
    one by one, configuration options included), and SMP over BR/EDR (CID 0x0007). Dynamic
    channels are followed from the Connection Request/Response that opened them (BR/EDR,
    LE Credit Based, Enhanced Credit Based), per connection handle and direction: the l2cap
    layer then shows the channel's "psm", "mode" and "openedIn" (the packet that opened it),
    K-frames their "sduLength" and the packets an SDU came in. ATT is decoded on PSM 0x001F
    (ATT over BR/EDR) and 0x0027 (EATT); other PSMs show the SDU's octets with the PSM.
    A Disconnection Response, a Disconnection Complete or a new connection on the handle ends
    a channel; one opened before the capture started is shown as raw octets. Frames of a
    channel configured for Enhanced Retransmission or Streaming mode are shown with their PSM
    and mode, not decoded. At most 64 channels are followed at once (the oldest is dropped).

    A damaged capture (cut mid-record, or a record whose lengths make no sense) prints every
    record before the damage, then names the record number and byte offset on stderr and
    exits 1, as tshark fails on it. A missing or unreadable file, or one that is not a capture,
    exits 1. So does a header with no packets after it (saying so on stderr).

    Examples:
      ble-hci dump demo.pcap --layers hci,att
      ble-hci dump demo.pcap --flow
      ble-hci dump demo.pcap --layers att --flow --svg demo.svg
      ble-hci dump demo.pcap --html demo.html             # then open demo.html in a browser
      ble-hci dump btsnoop_hci.log --layers l2cap,att   # ATT over BR/EDR and EATT channels too
      ble-hci dump iphone.pklg --json
      ble-hci dump demo.pcap --layers l2cap,att --hex     # each layer's octets under its fields
      ble-hci dump demo.pcap --layers hci,gatt --explain  # what each field means; bit fields, values decoded
      ble-hci dump btsnoop_hci.log --stats                # per connection and channel: octets, latency, errors
      ble-hci dump capture.pcapng --stats --json | jq '.connections[].channels[].att.latencyUs'
      ble-hci dump btsnoop_hci.log --attributes --json > device.json && ble-hci peripheral --gatt device.json
    """

let demoHelp = """
    Usage: ble-hci demo [--capture FILE] [--airtime] [--air FILE]

    A central and a peripheral (profile demo) in one process on an in-process virtual link:
    advertise, scan, connect, MTU exchange, discovery, reads, a write, a refused write,
    notifications, disconnect, traced layer by layer. Both hosts are traced (each trace line
    starts with [central] or [peripheral]; in --json, a "host" key) and, with -w FILE, recorded:
    the central in FILE, the peripheral in FILE with "-peripheral" before its extension
    (demo.pcap → demo-peripheral.pcap). Needs no adapter and no root. --airtime runs the link
    with the airtime model of `controllers` (connection events at the 30 ms interval, PDUs per
    event, advertising events at 100 ms + advDelay): the capture's timestamps then show the
    latency a radio gives; without it every packet goes through at once.

      --air FILE  the air view: both controllers' link layer in one pcap (linktype 256,
                  LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR) that Wireshark and tshark decode: each
                  advertising event's PDU (ADV_IND... or ADV_EXT_IND and AUX_ADV_IND), SCAN_REQ and
                  SCAN_RSP, CONNECT_IND with the link's access address, CRCInit, interval, timeout
                  and hop, a data PDU per ACL fragment (LLID start/continuation, split at the data
                  length), the LL control PDUs the HCI commands imply (LL_ENC_REQ... LL_START_ENC_RSP,
                  LL_TERMINATE_IND with the reason, LL_CONNECTION_UPDATE_IND, LL_LENGTH_REQ/RSP,
                  LL_PHY_REQ/RSP/UPDATE_IND, LL_FEATURE_REQ/RSP), with the CRC of each packet. Times
                  are the airtime model's with --airtime, else a monotonic clock. Partial: the
                  virtual controller does not encrypt, so what follows LL_START_ENC is written in
                  plaintext (no MIC) and flagged decrypted; instant mode writes no empty PDUs; one
                  primary channel per advertising event; no LL_VERSION_IND (no Read Remote Version
                  Information). ble-hci dump does not read this link type (tshark does)

    Examples:
      ble-hci demo -w demo.pcap && ble-hci dump demo.pcap --json
      ble-hci demo --air air.pcap && tshark -r air.pcap
      ble-hci demo --airtime -w air.pcap && ble-hci dump air.pcap --stats
      ble-hci demo -w demo.pcap && ble-hci dump demo-peripheral.pcap --flow
    """

let adaptersHelp = """
    Usage: ble-hci adapters [--json]

    Lists the kernel's HCI adapters (HCIGETDEVLIST/HCIGETDEVINFO): name, address, up or down,
    and who holds it: the kernel's Bluetooth stack (up and managed: bluetoothd), a program
    through its HCI user channel (the kernel's management interface no longer lists it), or
    nobody (down: free for ble-hci). For a held adapter it prints the command that frees it.
    On a kernel without Bluetooth it says so and exits 3. Needs no root.

      --json    one {"event":"adapter",...} object per adapter: name, index, address, up,
                userChannelHeld, state, free (the command that frees it, when held)

    Example:
      ble-hci adapters && sudo ble-hci -t hci0 scan --duration 5
    """

let proxyHelp = """
    Usage: ble-hci proxy --host SPEC --controller SPEC [-w FILE] [--trace[=LAYERS]] [--json]

    Stands between another host stack (Bumble, Zephyr's native build, any H4 host) and a
    controller, as Bumble's hci-bridge and BlueZ's btproxy do: forwards every H4 packet unchanged both ways, records them
    with -w FILE (as -w does for the other commands: commands and data from the host are
    "sent", events and data from the controller "received") and decodes them live with --trace.
    Runs until Ctrl-C (exit 0); a lost controller exits 3.

      --host SPEC        where the other host stack is: tcp:HOST:PORT or unix:PATH, which the
                         proxy listens on (port 0: any free port; the `listening` line, or
                         {"event":"listening","spec":...} with --json, says which), or
                         serial:PATH[@BAUD], a UART the host is wired to. One host at a time: a
                         second connection while one is attached is refused (closed, logged);
                         when the host disconnects the proxy waits for the next one
      --controller SPEC  the controller: any -t SPEC (hciN, tcp:HOST:PORT, unix:PATH,
                         serial:PATH[@BAUD], or virtual: an in-process virtual controller alone
                         on its link)
    Host connections and disconnections, and a summary at the end, go to stderr. What the
    controller sends while no host is attached is recorded but not forwarded.

    Examples:
      ble-hci proxy --host tcp:127.0.0.1:9100 --controller tcp:127.0.0.1:9001 -w bumble.btsnoop
      sudo ble-hci proxy --host unix:/tmp/hci0.sock --controller hci0 --trace=hci,att
      ble-hci proxy --host tcp:127.0.0.1:0 --controller virtual --trace --json
    """

let controllersHelp = """
    Usage: ble-hci controllers --listen SPEC [--listen SPEC]... [--airtime on|off] [--air FILE]

    Serves virtual LE controllers that share one virtual link. Each --listen (tcp:HOST:PORT or
    unix:PATH) is one controller an H4 host connects to; each new connection starts that
    controller from reset. --listen vhci attaches a controller to the kernel through /dev/vhci
    (root, module hci_vhci): it appears as a new hciN adapter. Port 0 picks a free port (the
    `listening` line says which). One host per listener: a second host connecting while one is
    attached is refused (closed at once, logged) and the first keeps working. Host connections,
    refusals and disconnections are logged on stderr. Runs until Ctrl-C.

    --airtime on (the default) simulates time on the air: data goes in connection events at the
    connection interval (PDUs per event from the PHY, 1M or 2M, the data length and the event
    length; empty PDUs and the MD bit), advertising events come at their interval plus advDelay,
    all links and advertising sets of a controller share its one radio, and a link whose peer
    goes silent (its host disconnected) ends at the supervision timeout. --airtime off passes
    every packet at once (fast tests). Partial: no Coded PHY on links, no peripheral latency,
    idle links' empty events take no radio time (docs/performance.md).

      --air FILE  every controller's link layer in one pcap (linktype 256) that Wireshark
                  decodes, as `demo --air` writes it (see `ble-hci demo --help`), until Ctrl-C

    Examples:
      ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 &
      ble-hci -t tcp:127.0.0.1:9001 peripheral &
      ble-hci -t tcp:127.0.0.1:9002 central name:ble-hci
      ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 --airtime off
      ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 --air air.pcap
    """

let commandSpecs: [String: OptionSpec] = [
    "scan": OptionSpec(flags: ["passive", "duplicates"],
                       valued: ["duration", "service", "name", "bonds", "rssi", "rssi-min", "phy", "manufacturer", "service-data",
                                "sync", "count"]),
    "advertise": OptionSpec(flags: [], valued: ["name", "data", "periodic-data", "interval", "periodic-interval", "duration"]),
    "central": OptionSpec(flags: Set(["discover", "pair", "pair-again"]).union(securityFlags),
                          valued: Set(["read", "write", "write-without-response", "subscribe", "count",
                                       "duration", "mtu", "timeout", "profile", "date", "eatt", "eatt-mtu"]).union(securityValued)),
    "peripheral": OptionSpec(flags: Set(["security-request", "eatt"]).union(securityFlags),
                             valued: Set(["name", "profile", "duration", "gatt", "directed"]).union(securityValued)),
    "bonds": OptionSpec(flags: [], valued: ["bonds"]),
    "session": OptionSpec(flags: securityFlags, valued: securityValued),
    "shell": OptionSpec(flags: securityFlags, valued: securityValued),
    "dump": OptionSpec(flags: ["flow", "stats", "hex", "attributes", "explain"], valued: ["layers", "svg", "html"]),
    "demo": OptionSpec(flags: ["airtime"], valued: ["air"]),
    "controllers": OptionSpec(flags: [], valued: ["listen", "airtime", "air"]),
    "proxy": OptionSpec(flags: [], valued: ["host", "controller"]),
    "adapters": OptionSpec(flags: [], valued: []),
]

/// The session's commands as the help of `shell` and `session` list them.
var sessionCommandList: String {
    sessionCommands.map { "  " + $0.usage }.joined(separator: "\n")
}

let shellHelp = """
Usage: ble-hci [-t SPEC] [-w FILE] [--trace[=LAYERS]] shell [SECURITY OPTIONS]

An interactive session on one controller, in both roles at once: scan, connect to several
peripherals (each link named by the peer's name, else its address), discover, read, write,
subscribe (notifications print as they come, above the prompt), pair, serve a profile or a
GATT table and advertise it, trace and capture, all with the one-shot commands' words:

\(sessionCommandList)

Editing: Left/Right (Ctrl-B/F), Home/End (Ctrl-A/E), Alt-B/F a word, Backspace, Delete,
Ctrl-K / Ctrl-U / Ctrl-W kill to the end / the start / a word, Ctrl-L clears the screen,
Up/Down (Ctrl-P/N) the history, kept across runs in $XDG_STATE_HOME/ble-hci/history (else
~/.local/state/ble-hci/history). Tab completes commands and options, then the addresses and names seen,
the UUIDs and handles of the selected link and link names; a second Tab lists the choices.
Ctrl-C stops the running command (a scan, a connection) and leaves the shell running; at the
prompt it clears the line. Ctrl-D on an empty line, or quit, ends the session: links are
disconnected, scans and advertising stopped, the capture closed. SIGTERM ends it the same way.
When stdin is not a terminal, lines are read plainly, without a prompt.
Pairing: Just Works; passkey entry and numeric comparison only with --passkey N / --yes
(the shell does not prompt in the middle of a line). No OOB.

\(securityHelp)

Examples:
  ble-hci -t tcp:127.0.0.1:9002 shell
    ble-hci> connect name:ble-hci
    ble-hci [ble-hci]> read fff2
    ble-hci [ble-hci]> subscribe fff1
    ble-hci [ble-hci]> connect F0:F1:F2:F3:F4:F5
    ble-hci [F0:F1:F2:F3:F4:F5]> links
  printf 'connect name:ble-hci\\nread 2a00\\nquit\\n' | ble-hci -t tcp:127.0.0.1:9002 shell
"""

let sessionHelp = """
Usage: ble-hci [-t SPEC] [-w FILE] [--trace[=LAYERS]] session --json [SECURITY OPTIONS]

The shell's commands as JSON lines, for a program driving a device under test (see
Tools/examples/session.py and docs/cli.md). One request per stdin line:
  {"id": 1, "command": "read", "args": ["2a19"], "link": "Thermo"}
  {"id": "r2", "line": "write fff2=6869"}
Every answer and event is one JSON object per stdout line carrying the request's "id"
({"event":"read",...,"id":1}); each request ends with exactly one {"id":1,"done":true} or
{"id":1,"error":"...","exit":N} (N: the one-shot command's exit code). Events a request
causes later carry its id too: a subscription's notifications, a link's disconnection (the
connect request's), advertisements (the scan's), a served table's connections, reads and
writes (the serve request's); the rest carry none. The first line is {"event":"ready",...}.
Requests run concurrently (at most 32 at once; input waits meanwhile); a line is at most
65536 octets and nests at most 8 deep; a malformed line gets an error object naming the cause.
"cancel ID" stops a running request (a scan without --duration ends so); at the end of input
the requests still running get 30 s, then the session quits as "quit" does.
Without --json, one command per line and human output (the shell without its editor).

Commands (as in the shell; "help COMMAND" in a request answers with its help):
\(sessionCommandList)

\(securityHelp)

Examples:
  printf '%s\\n' '{"id":1,"line":"connect name:ble-hci"}' '{"id":2,"line":"read fff2"}' | ble-hci -t tcp:127.0.0.1:9002 session --json
  Tools/examples/session.py --transport tcp:127.0.0.1:9002 name:ble-hci
"""
