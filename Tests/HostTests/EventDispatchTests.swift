import HCI
import Testing
import Transport
@testable import Host

/// The host's event handling goes through the `HCIEventHandler` generated from Tools/pdl/hci.pdl.
@Suite struct EventDispatchTests {
    /// A short event is malformed, reported and not acted on: LE Connection Update Complete
    /// (Core v5.4 Vol 4 Part E 7.7.65.3) carries 9 octets after Subevent_Code; here only 2.
    /// Octets after the described parameters are ignored, as the Linux kernel ignores them
    /// (net/bluetooth/hci_event.c pulls each event's minimum length): LE Scan Timeout (7.7.65.17)
    /// with one octet more is still a scan timeout. LE Read Remote Features Complete (7.7.65.4)
    /// is one the host does not handle: no event at all.
    @Test func eventsAreCheckedAgainstTheirDescriptionThenHandled() async throws {
        let t = FakeTransport(responder: nil)
        let host = Host(transport: t)
        await host.startReader()
        t.inject(.event(HCIEventPacket(code: 0x3E, parameters: [0x03, 0x00, 0x40])))
        t.inject(.event(HCIEventPacket(code: 0x3E, parameters: [0x04, 0x00, 0x40, 0x00] + Array(repeating: 0, count: 8))))
        t.inject(.event(HCIEventPacket(code: 0x3E, parameters: [0x11, 0x00])))
        var seen: [String] = []
        for await e in host.events {
            switch e {
            case .warning(let w): seen.append(w)
            case .scanTimeout: seen.append("scanTimeout")
            default: seen.append("\(e)")
            }
            if seen.count == 2 { break }
        }
        #expect(seen.count == 2)
        #expect(seen.first?.hasPrefix("LE Meta event (LE Connection Update Complete): malformed") == true)
        #expect(seen.last == "scanTimeout")
        await host.close()
    }
}
