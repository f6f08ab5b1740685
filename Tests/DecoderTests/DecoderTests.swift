import Foundation
import Testing
import HCI
import Capture
@testable import Decoder

// MARK: Fixtures

@Test func centralFixtureGATTAnnotations() throws {
    let ps = try decodeCapture(fixturePath("bumble-central.btsnoop"))
    #expect(ps.allSatisfy { $0.malformed == nil })
    // A notification's handle, learnt from the Read By Type (0x2803) response earlier.
    let notes = ps.filter { intValue(field("opcode", $0.layer("att"))) == 0x1b }
    #expect(notes.count == 3)
    for n in notes {
        let g = n.layer("gatt")
        #expect(field("handle", g) == .int(16))
        #expect(field("uuid", g) == .text("2a37"))
        #expect(field("name", g) == .text("Heart Rate Measurement"))
    }
    // CCCD writes: the descriptor found by Find Information, its characteristic, and the meaning.
    let cccdWrites = ps.filter { intValue(field("opcode", $0.layer("att"))) == 0x12 && field("uuid", $0.layer("gatt")) == .text("2902") }
    #expect(cccdWrites.map { field("meaning", $0.layer("gatt")) } == [.text("enable notifications"), .text("disable notifications and indications")])
    #expect(cccdWrites.allSatisfy { field("characteristic", $0.layer("gatt")) == .text("2a37") && field("handle", $0.layer("gatt")) == .int(17) })
    // Human summary and JSON shape of a packet from CLI.md.
    let rbgt = try #require(ps.first { intValue(field("opcode", $0.layer("att"))) == 0x10 })
    #expect(rbgt.summary == "ATT Read By Group Type Request")
    let json = render(rbgt, json: true)
    #expect(json.hasPrefix("{\"index\":\(rbgt.index),\"time\":\"\(rbgt.time.iso8601)\",\"direction\":\"sent\",\"type\":\"acl\","))
    #expect(json.hasSuffix("\"hci\":{\"handle\":1,\"pb\":\"firstNonFlushable\",\"bc\":0,\"length\":11},\"l2cap\":{\"cid\":4,\"length\":7,\"channel\":\"ATT\"},\"att\":{\"opcode\":\"0x10\",\"name\":\"Read By Group Type Request\",\"startHandle\":1,\"endHandle\":65535,\"type\":\"2800\"}}"))
    // Advertising data → AD structures.
    let report = try #require(ps.first { field("subeventCode", $0.layer("hci")) == .code("0x0d") })
    let ad = values(named: "localName", in: report.layer("hci") ?? [])
    #expect(ad.contains(.text("bumble-peer")))
}

@Test func peripheralFixtureDecodesCleanly() throws {
    let ps = try decodeCapture(fixturePath("bumble-peripheral.btsnoop"))
    #expect(ps.count == 271)
    #expect(ps.allSatisfy { $0.malformed == nil })
    #expect(ps.filter { $0.layer("att") != nil }.count == 87)
    // The server side learns the same database from the same discovery.
    let notes = ps.filter { intValue(field("opcode", $0.layer("att"))) == 0x1b }
    #expect(notes.count == 3 && notes.allSatisfy { field("uuid", $0.layer("gatt")) == .text("2a37") })
}

// MARK: Renderers

@Test func layersSelectDepth() throws {
    let ps = try decodeCapture(fixturePath("bumble-central.btsnoop"))
    let note = try #require(ps.first { intValue(field("opcode", $0.layer("att"))) == 0x1b })
    let json = render(note, layers: ["hci", "l2cap"], json: true)
    #expect(json.contains("\"hci\":") && json.contains("\"l2cap\":"))
    #expect(!json.contains("\"att\":") && !json.contains("\"gatt\":"))
    let tree = render(note, json: false)
    let lines = tree.split(separator: "\n").map(String.init)
    #expect(lines[0] == "#\(note.index) \(note.time.iso8601) ← ATT Handle Value Notification")
    #expect(lines.contains("  ATT") && lines.contains("    handle: 16") && lines.contains("  GATT"))
    #expect(lines.contains("    name: Heart Rate Measurement"))
    let shallow = render(note, layers: ["hci"], json: false)
    #expect(!shallow.contains("  ATT\n") && shallow.contains("  HCI\n"))
}

// MARK: Reassembly

@Test func fragmentedATTFrameReassembles() {
    let d = PacketDecoder()
    let value = (0..<40).map { UInt8($0) }
    let frame = l2cap(cid: 4, [0x12, 0x2a, 0x00] + value)  // Write Request, handle 0x002a
    let f1 = d.acl(.sent, pb: 0, Array(frame[0..<10]))
    // A frame in the other direction meanwhile is independent.
    let other = d.acl(.received, pb: 2, l2cap(cid: 4, [0x1b, 0x10, 0x00, 0x01]))
    let f2 = d.acl(.sent, pb: 1, Array(frame[10..<30]))
    let f3 = d.acl(.sent, pb: 1, Array(frame[30...]))
    #expect(f1.malformed == nil && f1.layer("att") == nil)
    #expect(field("fragment", f1.layer("l2cap")) == .int(1))
    #expect(field("frameOctets", f1.layer("l2cap")) == .int(frame.count))
    #expect(f1.summary == "L2CAP fragment 1 of frame starting at #1")
    #expect(field("fragment", f2.layer("l2cap")) == .int(2))
    #expect(field("handle", other.layer("att")) == .int(16))
    let l2 = f3.layer("l2cap")
    #expect(field("cid", l2) == .int(4))
    #expect(field("fragments", l2) == .list([.int(1), .int(3), .int(4)]))
    #expect(field("handle", f3.layer("att")) == .int(0x2a))
    #expect(field("value", f3.layer("att")) == .bytes(value))
    #expect(f3.summary == "ATT Write Request")
}

@Test func reassemblyIsBounded() {
    let d = PacketDecoder()
    // Starts of large frames on many handles: only maxPendingFrames are kept.
    for h in 0..<UInt16(40) { _ = d.acl(.sent, handle: h, pb: 0, [0x10, 0x00, 0x04, 0x00, 0x12]) }
    // Handle 0's frame was evicted: its continuation has no start.
    let cont = d.acl(.sent, handle: 0, pb: 1, [1, 2, 3])
    #expect(cont.malformed?.contains("without the start") == true)
    // The newest pending frame is still there.
    let last = d.acl(.sent, handle: 39, pb: 1, [0x00])
    #expect(last.malformed == nil)
}

// MARK: Hostile input

@Test func malformedPacketsShowRawBytesAndDecodingGoesOn() {
    let d = PacketDecoder()
    // Truncated ATT: Read Request with one handle octet.
    let truncated = d.acl(.sent, pb: 0, l2cap(cid: 4, [0x0a, 0x03]))
    #expect(truncated.malformed?.hasPrefix("ATT Read Request:") == true)
    #expect(truncated.raw == [0x02] + aclBody(pb: 0, l2cap(cid: 4, [0x0a, 0x03])))
    #expect(field("name", truncated.layer("att")) == .text("Read Request"))
    #expect(render(truncated, json: true).contains("\"malformed\":"))
    #expect(render(truncated, json: true).contains("\"raw\":\"02"))
    #expect(render(truncated, json: false).contains("  raw: 02"))
    // Lying L2CAP length: the ACL packet carries more than the frame says.
    let lying = d.acl(.sent, pb: 0, [0x01, 0x00, 0x04, 0x00, 0x0a, 0x03, 0x00])
    #expect(lying.malformed?.contains("longer than the L2CAP frame") == true)
    #expect(lying.raw != nil)
    // Continuation without a start.
    let orphan = d.acl(.received, pb: 1, [1, 2, 3])
    #expect(orphan.malformed != nil)
    // Lying HCI event length (the packet codec rejects it).
    let badEvent = d.decode(direction: .received, packet: packet(.event, [0x0e, 0x09, 0x01]),
                            raw: [0x04, 0x0e, 0x09, 0x01], time: t0)
    #expect(badEvent.type == "event" && badEvent.malformed?.contains("length") == true && badEvent.raw == [0x04, 0x0e, 0x09, 0x01])
    // Event with malformed parameters (Disconnection Complete missing its reason).
    let badParams = d.event(0x05, [0x00, 0x40, 0x00])
    #expect(badParams.malformed?.hasPrefix("Disconnection Complete:") == true)
    #expect(field("parameters", badParams.layer("hci")) == .bytes([0x00, 0x40, 0x00]))
    // Empty ATT payload.
    let empty = d.acl(.sent, pb: 0, l2cap(cid: 4, []))
    #expect(empty.malformed != nil)
    // Decoding goes on: the next good packet decodes fully, with consecutive indexes.
    let good = d.acl(.sent, pb: 0, l2cap(cid: 4, [0x0a, 0x03, 0x00]))
    #expect(good.malformed == nil && field("handle", good.layer("att")) == .int(3))
    #expect(good.index == 7)
}

@Test func randomBytesNeverTrap() {
    var rng = SystemRandomNumberGenerator()
    let d = PacketDecoder()
    for i in 0..<3000 {
        let n = Int.random(in: 0..<40, using: &rng)
        var body = (0..<n).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let type: HCIPacketType = [.command, .acl, .event][i % 3]
        if type == .acl, body.count >= 4 {  // make lengths consistent so L2CAP/ATT see hostile bytes
            let len = body.count - 4
            body[2] = UInt8(len & 0xff); body[3] = UInt8(len >> 8)
            if i % 2 == 0, body.count >= 8 { body[6] = 0x04; body[7] = 0 }
        }
        let p = d.decode(direction: .sent, packet: packet(type, body), raw: [type.rawValue] + body, time: t0)
        _ = render(p, json: true)
        _ = render(p, json: false)
    }
}

// MARK: GATT state

@Test func disconnectionClearsGATTState() {
    let d = PacketDecoder()
    // Read By Type (2803) request and response on handle 0x40: characteristic 2a19 at value handle 3.
    _ = d.acl(.sent, pb: 0, l2cap(cid: 4, [0x08, 0x01, 0x00, 0xff, 0xff, 0x03, 0x28]))
    _ = d.acl(.received, pb: 2, l2cap(cid: 4, [0x09, 0x07, 0x02, 0x00, 0x12, 0x03, 0x00, 0x19, 0x2a]))
    _ = d.acl(.sent, pb: 0, l2cap(cid: 4, [0x04, 0x04, 0x00, 0x04, 0x00]))
    _ = d.acl(.received, pb: 2, l2cap(cid: 4, [0x05, 0x01, 0x04, 0x00, 0x02, 0x29]))
    let ind = d.acl(.sent, pb: 0, l2cap(cid: 4, [0x12, 0x04, 0x00, 0x02, 0x00]))
    #expect(field("meaning", ind.layer("gatt")) == .text("enable indications"))
    #expect(field("characteristic", ind.layer("gatt")) == .text("2a19"))
    let before = d.acl(.received, pb: 2, l2cap(cid: 4, [0x1b, 0x03, 0x00, 0x64]))
    #expect(field("name", before.layer("gatt")) == .text("Battery Level"))
    // Disconnection Complete on 0x40.
    let disc = d.event(0x05, [0x00, 0x40, 0x00, 0x13])
    #expect(disc.summary == "HCI Event Disconnection Complete")
    let after = d.acl(.received, pb: 2, l2cap(cid: 4, [0x1b, 0x03, 0x00, 0x64]))
    #expect(field("uuid", after.layer("gatt")) == nil)
}

@Test func fastRenderingMatchesReferenceFormatting() {
    for secs: Int64 in [0, 951_782_400, 1_795_997_743, 4_102_444_799, -1] {
        let t = CaptureTime(seconds: secs, nanoseconds: 123_456_000)
        var b = RenderBuffer()
        b.append(time: t)
        #expect(b.string == t.iso8601)
    }
    let fields: [Field] = [.text("a", "quote\" and \\ and \n"), .bytes("b", [0, 0xab, 0xff]), .code("c", UInt8(7)),
                           Field("d", .list([.int(-3), .object([.bool("e", true)])]))]
    var fast = RenderBuffer()
    appendJSONFields(fields, to: &fast)
    #expect(fast.string == jsonObject(fields))
}

/// The byte buffer grows past its first capacity keeping what it holds, and empties for
/// reuse: the same text as String concatenation.
@Test func renderBufferGrowsAndEmpties() {
    var b = RenderBuffer(capacity: 1)
    var reference = ""
    for i in 0..<5_000 {
        let piece = "line \(i): " + String(repeating: "x", count: i % 37) + "\n"
        b.append(piece)
        reference += piece
    }
    #expect(b.count == reference.utf8.count)
    #expect(b.string == reference)
    #expect(b.bytes == Array(reference.utf8))
    b.removeAll()
    #expect(b.count == 0 && b.string.isEmpty)
    b.append("after")
    #expect(b.string == "after")
}

/// Summaries are kept per opcode: Command Complete and Command Status of the same command, and
/// two different commands, each keep their own (names: Core v5.4 Vol 4 Part E 7.7.14, 7.7.15,
/// 7.8.10, 7.8.11).
@Test func summariesPerEventAndCommand() {
    let d = PacketDecoder()
    let complete = d.event(0x0E, [0x01, 0x0C, 0x20, 0x00])  // Command Complete, LE Set Scan Enable
    let status = d.event(0x0F, [0x00, 0x01, 0x0C, 0x20])    // Command Status, LE Set Scan Enable
    let other = d.event(0x0E, [0x01, 0x0B, 0x20, 0x00])     // Command Complete, LE Set Scan Parameters
    let again = d.event(0x0E, [0x01, 0x0C, 0x20, 0x00])
    #expect(complete.summary == "HCI Event Command Complete (LE Set Scan Enable)")
    #expect(status.summary == "HCI Event Command Status (LE Set Scan Enable)")
    #expect(other.summary == "HCI Event Command Complete (LE Set Scan Parameters)")
    #expect(again.summary == complete.summary)
}
