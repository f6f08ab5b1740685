import Testing
import TestSupport
@testable import Decoder

// The link-layer state in `dump --flow` (issue 28), from Bumble's HCI captures: the frames
// where it changes and the states it changes to, worked out here from tshark's decoding of
// the same capture and the rules of the specification, not from our decoder.

/// The states after each change, by frame, from tshark's fields: a command counts once its
/// Command Complete or Command Status says Success; LE Set (Extended) Scan Enable starts and
/// stops scanning, LE Set (Extended) Advertising Enable advertising, LE (Extended) Create
/// Connection starts initiating (Core v5.4 Vol 4 Part E 7.8.9, 7.8.11, 7.8.12, 7.8.56, 7.8.65,
/// 7.8.66); LE (Enhanced) Connection Complete ends initiating (central) or advertising
/// (peripheral, Vol 6 Part B 4.4.2) and enters the connection state, Disconnection Complete
/// leaves it (Vol 4 Part E 7.7.5, 7.7.65.1).
private func expectedChanges(_ path: String) throws -> [(Int, String)] {
    let rows = try Tshark.fields(path, ["frame.number", "bthci_cmd.opcode", "bthci_cmd.le_scan_enable", "bthci_cmd.le_advts_enable",
                                        "bthci_evt.code", "bthci_evt.opcode", "bthci_evt.status",
                                        "bthci_evt.le_meta_subevent", "bthci_evt.role"], allOccurrences: false)
    var states: Set<String> = [], pending: [String: (String, Bool)] = [:], out: [(Int, String)] = []
    for r in rows where r.count == 9 {
        let before = states
        let enable = [r[2], r[3]].first { !$0.isEmpty }.map { $0 == "0x01" }
        switch r[1] {
        case "0x200c", "0x2042": pending[r[1]] = ("scanning", enable ?? false)
        case "0x200a", "0x2039": pending[r[1]] = ("advertising", enable ?? false)
        case "0x200d", "0x2043": pending[r[1]] = ("initiating", true)
        default: break
        }
        if ["0x0e", "0x0f"].contains(r[4]), let (state, on) = pending.removeValue(forKey: r[5]), r[6] == "0x00" {
            if on { states.insert(state) } else { states.remove(state) }
        }
        if ["0x01", "0x0a", "0x29"].contains(r[7]) {
            states.remove(r[8] == "0x00" ? "initiating" : "advertising")
            if r[6] == "0x00" { states.insert("connected (1 link)") }
        }
        if r[4] == "0x05", r[6] == "0x00" { states.remove("connected (1 link)") }
        if states != before {
            let order = ["advertising", "scanning", "initiating", "connected (1 link)"]
            out.append((Int(r[0]) ?? 0, states.isEmpty ? "standby" : order.filter(states.contains).joined(separator: " + ")))
        }
    }
    return out
}

@Suite struct FlowLinkStateTests {
    @Test(arguments: ["bumble-central.btsnoop", "bumble-peripheral.btsnoop"])
    func linkLayerStateFollowsTheHCITraffic(_ fixture: String) throws {
        var b = FlowBuilder()
        for p in try decodeCapture(fixturePath(fixture)) { b.add(p) }
        let d = b.finish()
        let expected = try expectedChanges(fixturePath(fixture))
        #expect(expected.count >= 3, "the capture changes state: \(expected)")
        #expect(d.linkStates.map(\.index) == expected.map(\.0))
        #expect(d.linkStates.map(\.to.description) == expected.map(\.1))
        // Each change starts from the state the one before left.
        #expect(zip(d.linkStates, d.linkStates.dropFirst()).allSatisfy { $0.to == $1.from })

        // The text diagram shows each change once, under its packet.
        var buf = RenderBuffer()
        FlowText.render(d, to: &buf)
        let lines = buf.string.split(separator: "\n").filter { $0.contains("◆ link layer: ") }
        #expect(lines.map { String($0.split(separator: "→").last ?? "").trimmingCharacters(in: .whitespaces) } == expected.map(\.1))
    }
}
