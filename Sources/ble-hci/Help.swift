let toolVersion = "0.1.0"

let mainHelp = """
ble-hci \(toolVersion): a Bluetooth Low Energy host stack that talks HCI directly (no bluetoothd),
records every packet and decodes it layer by layer.

Usage: ble-hci [GLOBAL OPTIONS] COMMAND [OPTIONS]

Commands:
  scan          list advertisers (active scan by default)
  central       connect to a peripheral, discover, read, write, subscribe
  peripheral    advertise and serve the `demo`, `band` or `secure` profile
  bonds         list or remove the stored bonds (SMP keys)
  dump          decode a btsnoop or pcap capture, layer by layer
  demo          central + peripheral on an in-process virtual link, traced
  controllers   serve virtual LE controllers on TCP or UNIX sockets

Global options (before or after COMMAND):
  -t, --transport SPEC   controller: hciN | hci:N | tcp:HOST:PORT | unix:PATH |
                         serial:PATH[@BAUD] | virtual   (default hci0)
  -w, --capture FILE     record every HCI packet (*.pcap → pcap, else btsnoop)
      --trace[=LAYERS]   print every packet live, decoded (hci,l2cap,att,gatt,smp)
      --json             one JSON object per line on stdout
  -h, --help             help (also: ble-hci COMMAND --help)
      --version          print the version

Examples:
  ble-hci demo
  sudo ble-hci -t hci0 scan --duration 5
  sudo ble-hci -t hci0 -w run.pcap central name:Heart --subscribe 2a37 --count 10
  ble-hci dump run.pcap --layers hci,l2cap,att

Exit codes: 0 success, 1 operation failed, 2 usage error, 3 transport/adapter unavailable.
"""

let commandHelp: [String: String] = [
    "scan": """
    Usage: ble-hci scan [--duration S] [--passive] [--duplicates] [--service UUID]... [--name TEXT]

    Scans for advertisers and prints one line per advertiser when first seen and whenever its
    data changes (every report with --duplicates).

      --duration S      stop after S seconds (default: until Ctrl-C)
      --passive         passive scan (no scan requests, so no scan response data)
      --duplicates      report every advertising report, not only changes
      --service UUID    only advertisers listing this service (repeatable; any matches)
      --name TEXT       only advertisers whose name contains TEXT

    Example:
      sudo ble-hci -t hci0 scan --duration 10 --service 180d --json
    """,
    "central": """
    Usage: ble-hci central TARGET [ACTIONS] [--mtu N] [--timeout S] [--profile band [--date YYYY-MM-DD]]
                          [--pair] [SECURITY OPTIONS]

    TARGET: AA:BB:CC:DD:EE:FF[/public|/random] or name:TEXT (first advertiser whose name
    contains TEXT). CHAR: a UUID (2a37, 32-bit or 128-bit) or a handle (0x0010).

    Actions, run in the order given:
      --read CHAR                       read a value (long values read in full)
      --write CHAR=HEX                  write with response
      --write-without-response CHAR=HEX write command
      --subscribe CHAR [--count N] [--duration S]
                                        notifications or indications, whichever it has
      --discover                        discover and print the GATT tree
    With no action: connect, exchange MTU, discover everything, read every readable value and
    descriptor, print the tree, disconnect.

      --mtu N        ATT MTU to request (23-517, default 517)
      --timeout S    seconds to find and connect to TARGET (default 10)
      --profile band speak the band profile's framed protocol (see docs/band.md): total
                     steps and the hourly step/sleep history of --date (default: today, UTC)
      --pair         pair right after connecting (or only encrypt when a bond exists)
    Without --pair the central pairs when it must: an Insufficient Authentication (0x05) or
    Insufficient Encryption (0x0F) answer makes it encrypt (bond) or pair and retry that request
    once; a peripheral's Security Request is honoured. A bonded peripheral is encrypted at once.

    \(securityHelp)

    Examples:
      ble-hci -t tcp:127.0.0.1:9001 central name:ble-hci
      sudo ble-hci -t hci0 central F0:F1:F2:F3:F4:F5/random --read fff2 --write fff2=6869 --subscribe fff1 --count 3
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --read ff01          # pairs on 0x05, then reads
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --pair --io keyboard --mitm --passkey 123456 --read ff02
      ble-hci -t tcp:127.0.0.1:9002 central name:secure --pair --io yesno --mitm --yes --json
    """,
    "peripheral": """
    Usage: ble-hci peripheral [--name NAME] [--profile demo|band|secure] [--duration S]
                              [--security-request] [SECURITY OPTIONS]

    Advertises (connectable: flags, complete local name, the profile's 16-bit service UUIDs) and
    serves the profile until Ctrl-C or --duration; advertises again after each disconnection.

      --name NAME          advertised and GAP device name (default ble-hci)
      --profile P          demo (default), band, or secure: service ff66 with ff01 (read/write,
                           encryption required, "secret") and ff02 (read/notify, authenticated
                           encryption required, "authenticated"; CCCD needs encryption)
      --duration S         stop after S seconds
      --security-request   ask every central to pair (SMP Security Request) once connected

    \(securityHelp)

    Examples:
      sudo ble-hci -t hci0 peripheral --profile demo --json
      ble-hci -t tcp:127.0.0.1:9001 peripheral --profile secure --name secure
      ble-hci -t tcp:127.0.0.1:9001 peripheral --profile secure --io display --mitm --passkey 123456
    """,
    "bonds": """
    Usage: ble-hci bonds [--bonds DIR] [list | remove ADDRESS | clear]

    Lists the stored bonds (peer identity address and type, key size, Secure Connections, MITM,
    whether an IRK is held; --json: {"event":"bond",...}), or removes one peer's bond, or all.
    DIR defaults to $XDG_STATE_HOME/ble-hci, else ~/.local/state/ble-hci.

    Examples:
      ble-hci bonds
      ble-hci bonds remove F0:F1:F2:F3:F4:F5
      ble-hci bonds --bonds /tmp/bonds clear
    """,
    "dump": """
    Usage: ble-hci dump FILE [--layers LAYERS] [--json]

    Decodes a btsnoop (datalink 1001, 1002, 2001) or pcap (linktype 187, 201) capture, layer by
    layer, with the Core specification's field names. Malformed packets are printed with their
    raw bytes and the reason; decoding goes on.

      --layers LAYERS   how deep to decode: a comma list of hci,l2cap,att,gatt,smp (default all)
      --json            one JSON object per packet; a malformed one carries "malformed" (the
                        reason) and "raw" (hex)

    A capture cut mid-record (e.g. a killed process) prints every whole record, then a warning
    on stderr, and exits 0. A missing or unreadable file, or one that is not a capture, exits 1.

    Example:
      ble-hci dump demo.pcap --layers hci,att
    """,
    "demo": """
    Usage: ble-hci demo [--capture FILE]

    A central and a peripheral (profile demo) in one process on an in-process virtual link:
    advertise, scan, connect, MTU exchange, discovery, reads, a write, a refused write,
    notifications, disconnect, traced layer by layer. Needs no adapter and no root.

    Example:
      ble-hci demo -w demo.pcap && ble-hci dump demo.pcap --json
    """,
    "controllers": """
    Usage: ble-hci controllers --listen SPEC [--listen SPEC]...

    Serves virtual LE controllers that share one virtual link. Each --listen (tcp:HOST:PORT or
    unix:PATH) is one controller an H4 host connects to; each new connection starts that
    controller from reset. --listen vhci attaches a controller to the kernel through /dev/vhci
    (root, module hci_vhci): it appears as a new hciN adapter. Port 0 picks a free port (the
    `listening` line says which). Runs until Ctrl-C.

    Example:
      ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002 &
      ble-hci -t tcp:127.0.0.1:9001 peripheral &
      ble-hci -t tcp:127.0.0.1:9002 central name:ble-hci
    """,
]

let commandSpecs: [String: OptionSpec] = [
    "scan": OptionSpec(flags: ["passive", "duplicates"], valued: ["duration", "service", "name"]),
    "central": OptionSpec(flags: Set(["discover", "pair"]).union(securityFlags),
                          valued: Set(["read", "write", "write-without-response", "subscribe", "count",
                                       "duration", "mtu", "timeout", "profile", "date"]).union(securityValued)),
    "peripheral": OptionSpec(flags: Set(["security-request"]).union(securityFlags),
                             valued: Set(["name", "profile", "duration"]).union(securityValued)),
    "bonds": OptionSpec(flags: [], valued: ["bonds"]),
    "dump": OptionSpec(flags: [], valued: ["layers"]),
    "demo": OptionSpec(flags: [], valued: []),
    "controllers": OptionSpec(flags: [], valued: ["listen"]),
]
