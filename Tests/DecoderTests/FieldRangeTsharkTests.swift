import Foundation
import Testing
import TestSupport
import HCI
import Capture
@testable import Decoder

// `dump --html` highlights the octets each field was read from (`Field.range`, made by the
// layer's own parser through `FieldReads`). The oracle is tshark: `-T pdml` gives every field's
// `pos` and `size` in the frame. Positions are compared relative to tshark's H4 packet type
// (`hci_h4.type`), which is octet 0 of our ranges (a pcap 201 frame has a 4-octet direction
// header before it). A tshark field is compared when it occurs once in its frame and our layer
// has the field of that name; the field must then carry exactly tshark's range. A frame
// reassembled from several ACL packets is not in one packet: tshark gives positions in the
// reassembled frame, and we give none (the page lists such fields without highlighting).

/// tshark field → (our layer, our field). The layouts are the specification's: HCI packets
/// (Core v5.4 Vol 4 Part E 5.4.1–5.4.4), Command Complete / Status (7.7.14, 7.7.15), the L2CAP
/// basic header (Vol 3 Part A 3.1), signaling commands (4), ATT PDUs (Vol 3 Part F 3.3, 3.4),
/// SMP commands (Vol 3 Part H 3.3).
private let mapping: [String: (layer: String, field: String)] = [
    "bthci_cmd.opcode": ("hci", "opcode"),
    "bthci_evt.code": ("hci", "eventCode"),
    "bthci_evt.le_meta_subevent": ("hci", "subeventCode"),
    "bthci_evt.num_command_packets": ("hci", "numHCICommandPackets"),
    "bthci_evt.opcode": ("hci", "commandOpcode"),
    "bthci_evt.status": ("hci", "status"),
    "bthci_evt.lmp_vers_nr": ("hci", "lmpVersion"),
    "bthci_evt.num_supp_le_adv_sets": ("hci", "numSupportedAdvertisingSets"),
    "bthci_acl.chandle": ("hci", "handle"),
    "bthci_acl.length": ("hci", "length"),
    "btl2cap.length": ("l2cap", "length"),
    "btl2cap.cid": ("l2cap", "cid"),
    "btl2cap.cmd_code": ("signaling", "code"),
    "btl2cap.cmd_ident": ("signaling", "identifier"),
    "btl2cap.cmd_length": ("signaling", "length"),
    "btatt.opcode": ("att", "opcode"),
    "btatt.handle": ("att", "handle"),
    "btatt.starting_handle": ("att", "startHandle"),
    "btatt.ending_handle": ("att", "endHandle"),
    "btatt.client_rx_mtu": ("att", "clientRxMtu"),
    "btatt.server_rx_mtu": ("att", "serverRxMtu"),
    "btatt.value": ("att", "value"),
    "btsmp.opcode": ("smp", "code"),
]

/// These must have been compared at least once over the fixtures: the header fields of every
/// layer and the ATT fields every GATT exchange has.
private let required = ["bthci_cmd.opcode", "bthci_evt.code", "bthci_evt.opcode", "bthci_evt.status", "bthci_evt.lmp_vers_nr", "bthci_acl.chandle", "bthci_acl.length",
                        "btl2cap.length", "btl2cap.cid", "btatt.opcode", "btatt.handle", "btatt.starting_handle", "btatt.value"]

private struct PDMLField { var name: String; var pos: Int; var size: Int }

/// The fields of every frame, from tshark's PDML (one `<field .../>` per line).
private func pdml(_ path: String) throws -> [[PDMLField]] {
    let text = String(decoding: try Tshark.output(["-r", path, "-T", "pdml"]), as: UTF8.self)
    var frames: [[PDMLField]] = []
    func attribute(_ name: String, _ line: Substring) -> Substring? {
        guard let start = line.range(of: " \(name)=\"") else { return nil }
        let rest = line[start.upperBound...]
        return rest.firstIndex(of: "\"").map { rest[..<$0] }
    }
    for line in text.split(separator: "\n") {
        if line.hasPrefix("<packet>") { frames.append([]); continue }
        guard line.contains("<field "), let name = attribute("name", line),
              let pos = attribute("pos", line).flatMap({ Int($0) }), let size = attribute("size", line).flatMap({ Int($0) }),
              !frames.isEmpty else { continue }
        frames[frames.count - 1].append(PDMLField(name: String(name), pos: pos, size: size))
    }
    return frames
}

/// The first field of that name in `fields`, at any depth.
private func find(_ name: String, in fields: [Field]) -> Field? {
    for f in fields {
        if f.name == name { return f }
        switch f.value {
        case .object(let inner): if let hit = find(name, in: inner) { return hit }
        case .list(let items):
            for case .object(let inner) in items { if let hit = find(name, in: inner) { return hit } }
        default: break
        }
    }
    return nil
}

@Suite("Field octet ranges against tshark")
struct FieldRangeTsharkTests {
    @Test("every field's range is where tshark finds it (btsnoop and pcap fixtures)",
          arguments: ["bumble-central.btsnoop", "bumble-peripheral.btsnoop", "bumble-channels.btsnoop", "ble-hci-demo.pcap"])
    func rangesMatchTshark(fixture: String) throws {
        let path = fixturePath(fixture)
        var reader = try CaptureReader(path: path)
        let (records, error) = reader.readAll()
        if let error { throw error }
        let decoder = PacketDecoder(fieldRanges: true)
        let ours = records.map { decoder.decode($0) }
        let theirs = try pdml(path)
        #expect(ours.count == theirs.count)
        var problems: [String] = []
        var compared: [String: Int] = [:]
        for (p, frame) in zip(ours, theirs) {
            guard let h4 = frame.first(where: { $0.name == "hci_h4.type" })?.pos else { continue }
            var occurrences: [String: Int] = [:]
            for f in frame { occurrences[f.name, default: 0] += 1 }
            for t in frame where occurrences[t.name] == 1 {
                guard let (layer, name) = mapping[t.name], let fields = p.layer(layer), let ours = find(name, in: fields) else { continue }
                let want = (t.pos - h4)..<(t.pos - h4 + t.size)
                if layer != "hci", p.layer("l2cap")?.contains(where: { $0.name == "fragments" }) == true {
                    if ours.range != nil { problems.append("#\(p.index): \(layer).\(name) of a reassembled frame at \(ours.range!)") }
                    continue
                }
                if ours.range != want {
                    problems.append("#\(p.index) \(p.summary): \(layer).\(name) at \(ours.range.map { "\($0)" } ?? "nil"), tshark \(t.name) at \(want)")
                } else {
                    compared[t.name, default: 0] += 1
                }
            }
        }
        #expect(problems.isEmpty, "\(fixture): \(problems.count) ranges differ:\n\(problems.prefix(30).joined(separator: "\n"))")
        #expect(compared.values.reduce(0, +) > 50, "\(fixture): only \(compared) compared")
        if fixture == "bumble-central.btsnoop" {
            for name in required { #expect(compared[name, default: 0] > 0, "\(name) never compared in \(fixture) (\(compared))") }
        }
    }

    @Test("no ranges unless asked: plain dump keeps none (Field.range nil)")
    func offByDefault() throws {
        let packets = try decodeCapture(fixturePath("bumble-central.btsnoop"))
        func anyRange(_ fields: [Field]) -> Bool {
            fields.contains { f in
                if f.range != nil { return true }
                if case .object(let inner) = f.value { return anyRange(inner) }
                return false
            }
        }
        #expect(!packets.contains { p in p.layers.contains { $0.range != nil || anyRange($0.fields) } })
    }
}
