import Foundation
import Testing
import TestSupport
import HCI
import Capture
@testable import Decoder

// `dump --hex` (issue 26): each layer's octets. Oracles: the octets tshark attributes to each
// protocol (`tshark -T json -x`: `<proto>_raw` = [hex, offset, length, ...], over the reassembled
// frame for a fragmented one), and PDUs built here from the specification's layouts.

private func tsharkRaw(_ path: String) throws -> [[String: String]] {
    let data = try Tshark.output(["-n", "-r", path, "-T", "json", "-x"])
    let frames = try #require(try JSONSerialization.jsonObject(with: data) as? [[String: Any]])
    return frames.map { frame in
        let layers = (frame["_source"] as? [String: Any])?["layers"] as? [String: Any] ?? [:]
        var raw: [String: String] = [:]
        for (key, value) in layers where key.hasSuffix("_raw") {
            if let v = value as? [Any], let hex = v.first as? String { raw[String(key.dropLast(4))] = hex }
        }
        return raw
    }
}

private func decodeWithOctets(_ path: String) throws -> [DecodedPacket] {
    var reader = try CaptureReader(path: path)
    let (records, error) = reader.readAll()
    if let error { throw error }
    let decoder = PacketDecoder(layerOctets: true)
    return records.map { decoder.decode($0) }
}

private func hex(_ b: ArraySlice<UInt8>?) -> String? { b.map { $0.map { String(format: "%02x", $0) }.joined() } }

@Suite struct HexTests {
    @Test(arguments: ["bumble-central.btsnoop", "bumble-peripheral.btsnoop", "bumble-channels.btsnoop", "ble-hci-demo.pcap",
                      "bumble-central-notes.pklg"])
    func everyLayersOctetsAreTheOctetsTsharkGivesThatProtocol(_ fixture: String) throws {
        let path = fixturePath(fixture)
        let ours = try decodeWithOctets(path)
        let theirs = try tsharkRaw(path)
        #expect(ours.count == theirs.count)
        var compared: [String: Int] = [:]
        var problems: [String] = []
        for (p, t) in zip(ours, theirs) {
            func check(_ layer: String, _ mine: String?, _ tshark: String?) {
                guard let tshark else { return }
                compared[layer, default: 0] += 1
                if mine != tshark { problems.append("#\(p.index) \(layer): ours \(mine ?? "none"), tshark \(tshark)") }
            }
            for layer in p.layers {
                switch layer.name {
                case "hci":
                    check("hci", hex(layer.octets), t["bthci_cmd"] ?? t["bthci_evt"] ?? t["bthci_acl"] ?? t["bthci_sco"])
                case "l2cap":
                    if layer.fields.contains(where: { $0.name == "fragment" }) {
                        // A fragment: its ACL data, the ACL packet after its 4-octet header (5.4.2).
                        check("l2cap fragment", hex(layer.octets), t["bthci_acl"].map { String($0.dropFirst(8)) })
                    } else {
                        check("l2cap", hex(layer.octets), t["btl2cap"])
                    }
                case "signaling":
                    // The C-frame's payload: the frame after its 4-octet basic header (Vol 3 Part A 4).
                    check("signaling", hex(layer.octets), t["btl2cap"].map { String($0.dropFirst(8)) })
                case "att": check("att", hex(layer.octets), t["btatt"])
                case "smp":
                    // SMP is a fixed channel's whole payload (Vol 3 Part H 3.3); tshark leaves SMP
                    // over BR/EDR (CID 0x0007) undissected, so there its L2CAP payload is the oracle.
                    check("smp", hex(layer.octets), t["btsmp"] ?? t["btl2cap"].map { String($0.dropFirst(8)) })
                default: #expect(layer.octets == nil, "\(fixture) #\(p.index): \(layer.name) has no octets of its own")
                }
            }
        }
        #expect(problems.isEmpty, "\(fixture): \(problems.prefix(10).joined(separator: "; "))")
        #expect(compared["hci", default: 0] == ours.filter { $0.layer("hci") != nil }.count)
        #expect(compared["l2cap", default: 0] > 20)
        // tshark decodes ATT on CID 0x0004 and PSM 0x001F, not on EATT (the built test below).
        #expect(compared["att", default: 0] >= (fixture == "bumble-channels.btsnoop" ? 6 : 20))
        if fixture == "bumble-peripheral.btsnoop" { #expect(compared["l2cap fragment", default: 0] > 10) }
        if fixture == "bumble-channels.btsnoop" { #expect(compared["signaling", default: 0] > 10 && compared["smp", default: 0] == 2) }
    }

    /// ATT over EATT (tshark does not follow it): the SDU reassembled from K-frames is the ATT
    /// layer's octets; each K-frame is the l2cap layer's.
    @Test func eattSDUFromKFramesAndHexDumpLayout() throws {
        let d = PacketDecoder(layerOctets: true)
        func acl(_ dir: Direction, _ data: [UInt8]) -> DecodedPacket {
            let body = aclBody(handle: 0x0040, pb: 0x02, data)
            return d.decode(direction: dir, packet: packet(.acl, body), raw: [0x02] + body, time: t0)
        }
        // Credit Based Connection Request / Response (Vol 3 Part A 4.25, 4.26) on PSM 0x0027.
        _ = acl(.sent, l2cap(cid: 5, [0x17, 0x01, 0x0A, 0x00, 0x27, 0x00, 0x64, 0x00, 0x17, 0x00, 0x0A, 0x00, 0x41, 0x00]))
        _ = acl(.received, l2cap(cid: 5, [0x18, 0x01, 0x0A, 0x00, 0x64, 0x00, 0x17, 0x00, 0x0A, 0x00, 0x00, 0x00, 0x50, 0x00]))
        // A 25-octet Read Response (0x0B + 24 octets) in two K-frames (3.4.3): SDU Length 25.
        let sdu: [UInt8] = [0x0B] + (0..<24).map { UInt8($0) }
        let k1 = l2cap(cid: 0x41, [25, 0] + Array(sdu[..<10]))
        let k2 = l2cap(cid: 0x41, Array(sdu[10...]))
        let first = acl(.received, k1)
        let second = acl(.received, k2)
        #expect(first.layers.first { $0.name == "l2cap" }?.octets.map(Array.init) == k1)
        #expect(second.layers.first { $0.name == "l2cap" }?.octets.map(Array.init) == k2)
        #expect(second.layers.first { $0.name == "att" }?.octets.map(Array.init) == sdu)
        #expect(second.layers.first { $0.name == "hci" }?.octets.map(Array.init) == aclBody(handle: 0x0040, pb: 0x02, k2))

        // Tree: "octets (N):" then 16 a line after the offset, as tshark -x lays them out.
        var tree = RenderBuffer()
        appendTree(second, layers: LayerSelection(allDecoderLayers), hex: true, to: &tree)
        #expect(tree.string.contains("  ATT\n    opcode: 0x0b\n"))
        #expect(tree.string.contains("    octets (25):\n      0000  0b 00 01 02 03 04 05 06  07 08 09 0a 0b 0c 0d 0e\n      0010  0f 10 11 12 13 14 15 16  17\n"),
                "\(tree.string)")
        // JSON: one "hex" object by layer name, of the layers shown.
        var json = RenderBuffer()
        appendJSON(second, layers: LayerSelection(["att"]), hex: true, to: &json)
        let o = try #require(try JSONSerialization.jsonObject(with: Data(json.bytes)) as? [String: Any])
        #expect(o["hex"] as? [String: String] == ["att": sdu.map { String(format: "%02x", $0) }.joined()])
        var plain = RenderBuffer()
        appendJSON(second, layers: LayerSelection(allDecoderLayers), to: &plain)
        #expect(!plain.string.contains("\"hex\""))
    }

    /// The plain decoder keeps no octets (dump without --hex pays nothing for them).
    @Test func plainDecoderKeepsNoOctets() throws {
        let ours = try decodeCapture(fixturePath("bumble-central.btsnoop"))
        #expect(ours.allSatisfy { $0.layers.allSatisfy { $0.octets == nil } })
    }
}
