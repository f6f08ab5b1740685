"""The host's event dispatch, generated with the rest of Sources/HCI/Generated/HCI.swift.

Events and LE subevents marked `host` in hci.pdl get one method each in `HCIEventHandler`
(the Host conforms, so a mark without its behaviour does not compile) and a case in its
`dispatch`, a switch by event code and then by subevent code; the rest are ignored by the host,
and the generated comment names them.
"""


def emit_event_handler(events):
    handled = [e for e in events if e.host and e.kind == "event"]
    subevents = [e for e in events if e.host and e.kind == "subevent"]
    ignored = [e for e in events if not e.host and e.name != "LEMetaEvent"]
    out = ["/// The host's event handling: one method per event and LE subevent Tools/pdl/hci.pdl marks",
           "/// `host`, so a mark without its behaviour does not compile (the Host conforms).",
           "/// The host ignores the others: " + ", ".join(f"{e.spec}" + (f" (LE 0x{e.code:02X})" if e.kind == "subevent" else f" (0x{e.code:02X})") for e in ignored) + ",",
           "/// and every code no description declares.",
           "package protocol HCIEventHandler: Actor {"]
    out += [f"    func handle(_ event: {e.name})" for e in handled + subevents]
    out += ["}", "",
            "extension HCIEventHandler {",
            "    /// Decodes `packet` by its event code (LE Meta by its subevent code) and calls its handler;",
            "    /// false for an event the host does not handle. Throws (naming the field) when the",
            "    /// parameters are short. Octets after the described parameters are ignored, as the Linux",
            "    /// kernel does (hci_event.c checks minimum lengths): a newer controller may append fields.",
            "    package func dispatch(_ packet: HCIEventPacket) throws(DecodeError) -> Bool {",
            "        var r = ByteReader(packet.parameters)",
            "        switch packet.code {"]
    for e in handled:
        out += [f"        case 0x{e.code:02X}:",
                f"            let e = try {e.name}(parameters: &r)",
                "            handle(e)"]
    if subevents:
        out += ["        case 0x3E:",
                '            switch try r.u8("subeventCode") {']
        for e in subevents:
            out += [f"            case 0x{e.code:02X}:",
                    f"                let e = try {e.name}(parameters: &r)",
                    "                handle(e)"]
        out += ["            default: return false", "            }"]
    out += ["        default: return false", "        }", "        return true", "    }", "}", ""]
    return out
