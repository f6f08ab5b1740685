// HCI commands and events (HCI.HCIEvents / HCICommands, and the catalog of every other command
// and event, HCICatalog / CatalogLayout, as `dump` and the host decode them):
// every input is an event or a command packet run through the decoder and both renderings.
import FuzzSupport
import HCI
import Capture
import Decoder

runFuzzer { data in
    var input = FuzzInput(data)
    guard let selector = input.byte(), let b0 = input.byte(), let b1 = input.byte() else { return }
    let body = input.rest()
    let packet: HCIPacket
    if selector & 1 == 0 {
        // b1 completes nothing for events: the event code is b0, parameters follow.
        packet = .event(HCIEventPacket(code: b0, parameters: [b1] + body))
    } else {
        let opcode = HCIOpcode(rawValue: UInt16(b0) | UInt16(b1) << 8)
        packet = .command(HCICommandPacket(opcode: opcode, parameters: body))
        _ = try? HCICommands.decodeReturn(opcode: opcode, body)?.fields
        // The catalog's return parameters (hci-catalog.pdl) for the commands the stack does not send.
        if let entry = HCICatalog.command(opcode) { _ = CatalogLayout.decode(entry.returnParameters, body).fields }
    }
    let decoded = PacketDecoder().decode(direction: selector & 2 == 0 ? .sent : .received, packet: .success(packet),
                                         raw: packet.h4, time: CaptureTime(seconds: 0, nanoseconds: 0))
    _ = render(decoded, json: false)
    _ = render(decoded, json: true)
}
