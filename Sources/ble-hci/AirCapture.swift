import Foundation
import Capture
import VirtualController

/// `demo --air FILE` and `controllers --air FILE`: the link layer of every controller on
/// `link` in one pcap of LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR (256) that Wireshark decodes
/// (issue 28). Nil without --air. The caller stops it with `stopAirCapture`.
func startAirCapture(_ c: CommandContext, link: VirtualLink) throws -> CaptureWriter? {
    guard let path = c.args.last("air") else { return nil }
    let writer: CaptureWriter
    do {
        writer = try CaptureWriter(path: path, format: .linkLayer)
    } catch {
        throw CLIFailure("\(error)", exitCode: ExitCode.failure)  // names the file and the reason
    }
    let origin = link.date(atLinkTime: 0)
    link.recordAir { p in
        writer.write(record: LinkLayerPcapWriter.record(
            rfChannel: p.rfChannel, signalPower: VirtualController.rssi, pduType: p.kind.rawValue, phy: p.phy,
            decrypted: p.decrypted, packet: p.octets, time: origin.addingTimeInterval(p.time)))
    }
    return writer
}

func stopAirCapture(_ writer: CaptureWriter?, link: VirtualLink) {
    guard let writer else { return }
    link.recordAir(nil)
    closeCapture(writer)
}
