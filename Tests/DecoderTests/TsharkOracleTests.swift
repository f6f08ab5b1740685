import Foundation
import Testing
import TestSupport
import HCI
@testable import Decoder

// The correctness oracle of issue 8: our decoder and tshark, field by field, on every packet.
//
// Documented tshark behaviours the comparison allows for (everything else must agree exactly):
// 1. tshark prints a 128-bit UUID it parses out of PDU bytes in wire (little-endian) order, but
//    one it annotates from earlier discovery in big-endian order: a tshark 128-bit UUID matches
//    ours if it equals it in either byte order.
// 2. tshark leaves `btatt.value` empty when it dissects a value as a known characteristic
//    (Device Name → btatt.device_name, ...) or when the value is a characteristic declaration:
//    we check `btatt.value` only when tshark reports one.
// tshark also repeats the matched request's attribute type in Read By (Group) Type responses
// and their Error Responses; our GATT layer reports that as `requestType`, so it is compared.

private let tsharkFields = [
    "frame.number", "hci_h4.direction", "bthci_cmd.opcode", "bthci_evt.code", "bthci_evt.le_meta_subevent",
    "bthci_evt.opcode", "bthci_acl.chandle", "btl2cap.cid", "btatt.opcode", "btatt.handle", "btatt.uuid16",
    "btatt.uuid128", "btatt.value", "btatt.starting_handle", "btatt.ending_handle",
]

private func tshark(_ path: String) throws -> [[String]] { try Tshark.fields(path, tsharkFields) }

private func hexInts(_ s: String) -> [Int] {
    s.split(separator: ",").compactMap { Int($0.hasPrefix("0x") ? $0.dropFirst(2) : $0[...], radix: 16) }
}

private func reversedHex(_ s: String) -> String {
    var bytes: [String] = []
    var i = s.startIndex
    while i < s.endIndex, let j = s.index(i, offsetBy: 2, limitedBy: s.endIndex) {
        bytes.append(String(s[i..<j])); i = j
    }
    return bytes.reversed().joined()
}

/// Compares one capture; returns the disagreements, one line each.
private func compare(_ fixture: String) throws -> (packets: Int, attPackets: Int, problems: [String]) {
    let path = fixturePath(fixture)
    let ours = try decodeCapture(path)
    let theirs = try tshark(path)
    var problems: [String] = []
    if ours.count != theirs.count { problems.append("packet count: ours \(ours.count), tshark \(theirs.count)") }
    var att = 0
    for (p, t) in zip(ours, theirs) {
        func fail(_ what: String, _ o: Any, _ w: Any) { problems.append("\(fixture) #\(p.index) \(what): ours \(o), tshark \(w)") }
        guard t.count == tsharkFields.count else { fail("tshark columns", tsharkFields.count, t.count); continue }
        if Int(t[0]) != p.index { fail("frame.number", p.index, t[0]) }
        if p.malformed != nil { fail("malformed", p.malformed!, "-") }
        let hci = p.layer("hci"), l2 = p.layer("l2cap"), a = p.layer("att"), g = p.layer("gatt")
        let dir = p.direction == .sent ? [0] : p.direction == .received ? [1] : []
        if dir != hexInts(t[1]) { fail("direction", dir, t[1]) }
        let cmdOpcode = p.type == "command" ? intValue(field("opcode", hci)).map { [$0] } ?? [] : []
        if cmdOpcode != hexInts(t[2]) { fail("bthci_cmd.opcode", cmdOpcode, t[2]) }
        let evtCode = intValue(field("eventCode", hci)).map { [$0] } ?? []
        if evtCode != hexInts(t[3]) { fail("bthci_evt.code", evtCode, t[3]) }
        let sub = intValue(field("subeventCode", hci)).map { [$0] } ?? []
        if sub != hexInts(t[4]) { fail("le_meta_subevent", sub, t[4]) }
        let evtOpcode = intValue(field("commandOpcode", hci)).map { [$0] } ?? []
        if evtOpcode != hexInts(t[5]) { fail("bthci_evt.opcode", evtOpcode, t[5]) }
        let chandle = p.type == "acl" ? intValue(field("handle", hci)).map { [$0] } ?? [] : []
        if chandle != hexInts(t[6]) { fail("bthci_acl.chandle", chandle, t[6]) }
        let cid = intValue(field("cid", l2)).map { [$0] } ?? []
        if cid != hexInts(t[7]) { fail("btl2cap.cid", cid, t[7]) }
        let attOpcode = intValue(field("opcode", a)).map { [$0] } ?? []
        if attOpcode != hexInts(t[8]) { fail("btatt.opcode", attOpcode, t[8]) }
        if a != nil { att += 1 }

        let attFields = (a ?? []) + (g ?? [])
        let handles = Set((values(named: "handle", in: attFields) + values(named: "valueHandle", in: g ?? [])).compactMap { intValue($0) })
        if handles != Set(hexInts(t[9])) { fail("btatt.handle", handles.sorted(), t[9]) }

        let uuids = ["uuid", "type", "requestType", "attributeType"].flatMap { values(named: $0, in: attFields) }.compactMap { v -> String? in
            if case .text(let s) = v { return s } else { return nil }
        }
        let ours16 = Set(uuids.filter { $0.count == 4 })
        let theirs16 = Set(t[10].split(separator: ",").map { String($0.dropFirst(2)).lowercased() })
        if ours16 != theirs16 { fail("btatt.uuid16", ours16.sorted(), t[10]) }
        let ours128 = Set(uuids.filter { $0.count == 36 }.map { $0.replacingOccurrences(of: "-", with: "") })
        let theirs128 = Set(t[11].split(separator: ",").map { s -> String in
            let s = String(s).lowercased()
            return ours128.contains(s) ? s : (ours128.contains(reversedHex(s)) ? reversedHex(s) : s)  // quirk 1
        })
        if ours128 != theirs128 { fail("btatt.uuid128", ours128.sorted(), t[11]) }

        if !t[12].isEmpty {  // quirk 2
            let ourValues = values(named: "value", in: a ?? []).compactMap { v -> String? in
                if case .bytes(let b) = v { return b.hex } else { return nil }
            }
            if !ourValues.contains(t[12]) { fail("btatt.value", ourValues, t[12]) }
        }
        let start = intValue(field("startHandle", a)).map { [$0] } ?? []
        if start != hexInts(t[13]) { fail("btatt.starting_handle", start, t[13]) }
        let end = intValue(field("endHandle", a)).map { [$0] } ?? []
        if end != hexInts(t[14]) { fail("btatt.ending_handle", end, t[14]) }
    }
    return (ours.count, att, problems)
}

/// Fixtures/README.md: packets and ATT packets of each capture (Bumble's central and
/// peripheral sides, and `ble-hci demo -w` on our own stack).
@Test(arguments: [("bumble-central.btsnoop", 171, 87), ("bumble-peripheral.btsnoop", 271, 87), ("ble-hci-demo.pcap", 138, 71)])
func agreesWithTsharkOnEveryPacket(_ fixture: String, packets: Int, attPackets: Int) throws {
    let r = try compare(fixture)
    let disagreements = r.problems.count
    #expect(disagreements == 0, "\(r.problems.count) disagreement(s):\n\(r.problems.prefix(40).joined(separator: "\n"))")
    #expect(r.packets == packets)
    #expect(r.attPackets == attPackets)
}

/// The `time` we print must be the time tshark shows for the same record (microseconds).
@Test(arguments: ["bumble-central.btsnoop", "bumble-peripheral.btsnoop", "ble-hci-demo.pcap"])
func timestampsAgreeWithTshark(_ fixture: String) throws {
    let path = fixturePath(fixture)
    let ours = try decodeCapture(path)
    let text = String(decoding: try Tshark.output(["-r", path, "-T", "fields", "-e", "frame.time_epoch"]), as: UTF8.self)
    let theirs = text.split(separator: "\n").map { line -> Int64 in
        let parts = line.split(separator: ".")
        return Int64(parts[0])! * 1_000_000 + Int64(String(parts[1].prefix(6)))!
    }
    #expect(theirs.count == ours.count)
    let mismatches = zip(ours, theirs).filter { $0.0.time.seconds * 1_000_000 + Int64($0.0.time.nanoseconds / 1000) != $0.1 }
    let first = mismatches.first.map { "#\($0.0.index): ours \($0.0.time.iso8601), tshark epoch µs \($0.1)" } ?? ""
    let count = mismatches.count
    #expect(count == 0, "\(count) timestamp(s) differ; first \(first)")
}
