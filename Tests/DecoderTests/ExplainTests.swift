import Foundation
import Testing
import HCI
import Capture
import TestSupport
@testable import Decoder

// `dump --explain`: standard characteristic values decoded per their definitions (GATT
// Specification Supplement; Core v5.4 Vol 3 Part C 12 and Part G 3.3.3.3, 7), properties and
// the permissions an ATT error reveals. Each value is built from the definition's fields; the
// expected text is what the definition says those octets mean.

/// A Read Response carrying `value` for the characteristic `uuid`, as the decoder lays it out.
private func readResponse(_ uuid: String, _ value: [UInt8]) -> (DecodedLayer, DecodedPacket) {
    let att = DecodedLayer("att", [.code("opcode", UInt8(0x0b)), .text("name", "Read Response"), .bytes("value", value)])
    let gatt = DecodedLayer("gatt", [.int("handle", 3), .text("uuid", uuid)])
    let p = DecodedPacket(index: 1, time: CaptureTime(seconds: 0, nanoseconds: 0), direction: .received, type: "acl",
                          summary: "ATT Read Response", layers: [att, gatt])
    return (att, p)
}

private func decodedValue(_ uuid: String, _ value: [UInt8]) -> [String]? {
    let (att, p) = readResponse(uuid, value)
    return explanation(of: att.fields[2], in: att, of: p)?.decoded
}

@Suite struct ExplainTests {
    /// GATT Specification Supplement, Heart Rate Measurement: Flags bit 0 = Heart Rate Value
    /// Format (0 UINT8, 1 UINT16), bits 1–2 Sensor Contact Status (2 not detected, 3 detected),
    /// bit 3 Energy Expended present (UINT16, kJ), bit 4 RR-Interval present (UINT16s, 1/1024 s).
    @Test func heartRateMeasurement() {
        // 0x16: UINT8 format, contact detected, one RR-Interval of 1024/1024 s.
        #expect(decodedValue("2a37", [0x16, 72, 0x00, 0x04]) == [
            "Flags: 0x16", "Heart Rate: 72 bpm (UINT8)", "Sensor Contact: detected", "RR-Interval: 1024/1024 s (1000.00 ms)",
        ])
        // 0x0D: UINT16 format, contact not detected, Energy Expended 16 kJ.
        #expect(decodedValue("2a37", [0x0d, 0x2c, 0x01, 0x10, 0x00]) == [
            "Flags: 0x0d", "Heart Rate: 300 bpm (UINT16)", "Sensor Contact: not detected", "Energy Expended: 16 kJ",
        ])
        // Truncated (UINT16 format with one octet) or with octets the flags do not announce: not
        // decoded, the generic ATT value explanation stays.
        #expect(decodedValue("2a37", [0x01, 0x48]) == [])
        #expect(decodedValue("2a37", [0x00, 0x48, 0x00]) == [])
    }

    /// Battery Level: UINT8 percent, 0–100; larger values are reserved.
    @Test func batteryLevel() {
        #expect(decodedValue("2a19", [100]) == ["100 %"])
        #expect(decodedValue("2a19", [101]) == ["101: reserved (above 100)"])
        #expect(decodedValue("2a19", [1, 2]) == [])
    }

    /// Core v5.4 Vol 3 Part C 12.1 Device Name (UTF-8); 12.2 Appearance (Assigned Numbers 2.6:
    /// category 0x003 Watch, subcategory 0x01 Sports Watch = 0x00C1); 12.3 Peripheral Preferred
    /// Connection Parameters (intervals × 1.25 ms, latency, timeout × 10 ms).
    @Test func genericAccessValues() {
        #expect(decodedValue("2a00", Array("Zoë".utf8)) == ["\"Zoë\""])
        #expect(decodedValue("2a00", [0xff, 0xfe]) == [])  // not UTF-8
        #expect(decodedValue("2a01", [0xc1, 0x00]) == ["Watch: Sports Watch (0x00c1)"])
        #expect(decodedValue("2a04", [0x18, 0x00, 0x28, 0x00, 0x00, 0x00, 0x90, 0x01]) == [
            "Minimum Connection Interval: 30.00 ms", "Maximum Connection Interval: 50.00 ms",
            "Peripheral Latency: 0 connection events", "Connection Supervision Timeout: 4000.00 ms",
        ])
    }

    /// Core v5.4 Vol 3 Part G 7.1 Service Changed (two handles) and 3.3.3.3 Client
    /// Characteristic Configuration (bit 0 notifications, bit 1 indications).
    @Test func gattValues() {
        #expect(decodedValue("2a05", [0x01, 0x00, 0xff, 0xff]) == [
            "Start of Affected Attribute Handle Range: 1", "End of Affected Attribute Handle Range: 65535",
        ])
        #expect(decodedValue("2902", [0x01, 0x00]) == ["Notification enabled (bit 0)"])
        #expect(decodedValue("2902", [0x02, 0x00]) == ["Indication enabled (bit 1)"])
        #expect(decodedValue("2902", [0x00, 0x00]) == ["Notifications and indications disabled"])
        #expect(decodedValue("2902", [0x04, 0x00]) == ["reserved bits 0x0004"])
    }

    /// Core v5.4 Vol 3 Part G 3.3.1.1: 0x1A = Read, Write, Notify; CoreBluetooth's names of them,
    /// and the meaning says its …EncryptionRequired bits never appear on the air.
    @Test func propertiesWithCoreBluetoothNames() throws {
        let gatt = DecodedLayer("gatt", [.code("properties", UInt8(0x1a))])
        let p = DecodedPacket(index: 1, time: CaptureTime(seconds: 0, nanoseconds: 0), direction: .received, type: "acl",
                              summary: "", layers: [gatt])
        let e = try #require(explanation(of: gatt.fields[0], in: gatt, of: p))
        #expect(e.decoded.map { $0.components(separatedBy: " — ").last } == ["CoreBluetooth .read", "CoreBluetooth .write", "CoreBluetooth .notify"])
        #expect(e.meaning.contains("notifyEncryptionRequired"))
        #expect(e.specSection == "Core v5.4 Vol 3 Part G 3.3.1.1")
    }

    /// Core v5.4 Vol 3 Part F 3.4.1.1: Insufficient Authentication (0x05) tells the client the
    /// attribute needs an authenticated link; Read Not Permitted (0x02) that it cannot be read.
    @Test func errorsRevealPermissions() throws {
        func revealed(_ code: UInt8) -> [String]? {
            let att = DecodedLayer("att", [.code("errorCode", code)])
            let p = DecodedPacket(index: 1, time: CaptureTime(seconds: 0, nanoseconds: 0), direction: .received, type: "acl",
                                  summary: "", layers: [att])
            return explanation(of: att.fields[0], in: att, of: p)?.decoded
        }
        #expect(revealed(0x05)?.first?.contains("authenticated link") == true)
        #expect(revealed(0x02)?.first?.contains("not readable") == true)
        #expect(revealed(0x0a) == [])  // Attribute Not Found says nothing about permissions
    }

    /// tshark decodes the same standard values in Bumble's capture (a central reading a Bumble
    /// peripheral's Device Name, Appearance, Body Sensor Location and Battery Level): ours must
    /// say what its fields say, frame by frame.
    @Test func standardValuesAgreeWithTshark() throws {
        let path = fixturePath("bumble-central.btsnoop")
        let rows = try Tshark.fields(path, ["frame.number", "btatt.device_name", "btatt.appearance", "btatt.battery_level",
                                            "btatt.body_sensor_location"])
        var reader = try CaptureReader(path: path)
        let decoder = PacketDecoder()
        var ours: [Int: [String]] = [:]
        while let record = try reader.next() {
            let p = decoder.decode(record)
            guard let att = p.layers.first(where: { $0.name == "att" }), let value = att.fields.first(where: { $0.name == "value" }) else { continue }
            ours[p.index] = explanation(of: value, in: att, of: p)?.decoded
        }
        let sensorNames = [1: "Chest"]  // tshark -V: "Body Sensor Location: Chest (0x01)"
        var compared = 0
        for r in rows where r.count == 5 && r[1...].contains(where: { !$0.isEmpty }) {
            let mine = ours[Int(r[0])!] ?? []
            if !r[1].isEmpty { #expect(mine == ["\"\(r[1])\""], "frame \(r[0])") }
            if !r[2].isEmpty { #expect(mine.first?.hasSuffix("(\(hexCode(UInt16(r[2])!)))") == true, "frame \(r[0]): \(mine)") }
            if !r[3].isEmpty { #expect(mine == ["\(r[3]) %"], "frame \(r[0])") }
            if !r[4].isEmpty { #expect(mine == [sensorNames[Int(r[4].dropFirst(2), radix: 16)!] ?? "?"], "frame \(r[0])") }
            compared += 1
        }
        #expect(compared == 4)
    }

    /// Hostile values (any length, any octets) for every characteristic decoded here: an
    /// explanation or nil, never a trap; a decoded Battery Level or CCCD only at its length.
    @Test func hostileValuesNeverTrap() {
        var rng = SeededGenerator(seed: 28)
        for uuid in ["2a00", "2a01", "2a04", "2a05", "2a19", "2a37", "2a38", "2a29", "2902", "2b29", "2b2a", "2b3a"] {
            for _ in 0..<500 {
                let value = (0..<Int.random(in: 0...24, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                let e = StandardValues.explain(uuid: uuid, value: value)
                if uuid == "2a19" || uuid == "2902" { #expect(e == nil || value.count == (uuid == "2a19" ? 1 : 2)) }
            }
        }
    }

    /// Core v5.4 Vol 4 Part E 7.3.69 Set Event Mask Page 2: bit 25 enables Encryption Change
    /// [v2] (event 0x59, 7.7.8.1), which btmon 5.66 calls "Unknown mask"; bit 26 has no event.
    @Test func eventMaskPage2() {
        #expect(HCIBitFields.eventMaskPage2(1 << 25 | 1 << 26) == [NamedBit(bit: 25, name: "Encryption Change [v2]"),
                                                                  NamedBit(bit: 26, name: "reserved")])
    }

    /// A parameter of a command only the catalog decodes gets its specification name and its
    /// command's section: Core v5.4 Vol 4 Part E 7.1.1 Inquiry (LAP, Inquiry_Length,
    /// Num_Responses), 7.8.99 LE Create CIS (CIS_Count).
    @Test func catalogParametersNameTheirSection() throws {
        var d = PacketDecoder()
        let inquiry = d.decode(direction: .sent, packet: .success(.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0401),
                                                                                              parameters: [0x33, 0x8b, 0x9e, 0x08, 0x00]))),
                               raw: [], time: CaptureTime(seconds: 0, nanoseconds: 0))
        let hci = try #require(inquiry.layers.first)
        let explained = hci.fields.filter { $0.name != "opcode" && $0.name != "name" }
            .compactMap { f in explanation(of: f, in: hci, of: inquiry).map { (f.name, $0) } }
        #expect(explained.map { $0.1.meaning } == ["LAP, a parameter of Inquiry", "Inquiry_Length, a parameter of Inquiry",
                                                   "Num_Responses, a parameter of Inquiry"])
        #expect(explained.allSatisfy { $0.1.specSection == "Core v5.4 Vol 4 Part E 7.1.1" })
        d = PacketDecoder()
        let cis = d.decode(direction: .sent, packet: .success(.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x2064), parameters: [0]))),
                           raw: [], time: CaptureTime(seconds: 0, nanoseconds: 0))
        let layer = try #require(cis.layers.first)
        let count = try #require(layer.fields.first { $0.name == "cisCount" })
        #expect(explanation(of: count, in: layer, of: cis) == FieldExplanation(meaning: "CIS_Count, a parameter of LE Create CIS",
                                                                               specSection: "Core v5.4 Vol 4 Part E 7.8.99"))
    }

    /// The tree puts the explanation under its field; JSON has it in "explain" by layer and path.
    @Test func renderedInTreeAndJSON() throws {
        let (_, p) = readResponse("2a19", [42])
        var tree = RenderBuffer()
        appendTree(p, layers: LayerSelection(allDecoderLayers), explain: true, to: &tree)
        #expect(tree.string.contains("    value: 2a\n      explain: Battery Level: the battery's charge (unit: percent (0–100); GATT Specification Supplement, Battery Level)\n        42 %\n"))
        var json = RenderBuffer()
        appendJSON(p, layers: LayerSelection(allDecoderLayers), explain: true, to: &json)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.bytes)) as? [String: Any])
        let explain = try #require(object["explain"] as? [String: [String: [String: Any]]])
        #expect(explain["att"]?["value"]?["decoded"] as? [String] == ["42 %"])
        #expect(explain["att"]?["value"]?["unit"] as? String == "percent (0–100)")
        // Without --explain nothing is added.
        var plain = RenderBuffer()
        appendJSON(p, layers: LayerSelection(allDecoderLayers), to: &plain)
        #expect(!plain.string.contains("explain"))
    }
}
