import Foundation
import Testing
import TestSupport
import HCI
import Capture
@testable import Decoder

// Apple PacketLogger (.pklg) read by CaptureReader (issue 26), with tshark (Wireshark's
// wiretap/packetlogger.c and packet-packetlogger.c) as the oracle: the same records in the same
// order, the same directions (PacketLogger's type: 0x00, 0x02, 0x08 sent; 0x01, 0x03, 0x09
// received), timestamps to the microsecond, the text records' texts, and ATT opcodes where
// both decode.
//
// Fixtures (Tools/captures/make-pklg.py, independent of the Swift reader; Tests/Fixtures/README.md):
// - bumble-central-notes.pklg: bumble-central.btsnoop as PacketLogger writes it (big-endian),
//   with a New Controller, a Note, a Power, a Syslog and a Kernel record among the packets.
// - bumble-channels-le.pklg: bumble-channels.btsnoop in the little-endian layout.

private func tsharkRows(_ path: String, _ fields: [String]) throws -> [[String]] { try Tshark.fields(path, fields, allOccurrences: false) }

@Suite struct PacketLoggerTests {
    static let fields = ["frame.number", "frame.time_epoch", "packetlogger.type", "packetlogger.info",
                         "packetlogger.syslog.message", "btatt.opcode", "_ws.col.Info"]

    /// Our reading against tshark's; returns the disagreements and the number of text records.
    func compare(_ fixture: String, bigEndian: Bool) throws -> (problems: [String], notes: Int, att: Int, packets: Int) {
        let path = fixturePath(fixture)
        var reader = try CaptureReader(path: path)
        #expect(reader.format == .packetLogger(bigEndian: bigEndian))
        let (records, error) = reader.readAll()
        #expect(error == nil)
        let decoder = PacketDecoder()
        let ours = records.map { decoder.decode($0) }
        let theirs = try tsharkRows(path, Self.fields)
        var problems: [String] = []
        if ours.count != theirs.count { problems.append("count: ours \(ours.count), tshark \(theirs.count)") }
        var notes = 0, att = 0
        for (p, t) in zip(ours, theirs) where t.count == Self.fields.count {
            func fail(_ what: String, _ o: Any, _ w: Any) { problems.append("#\(p.index) \(what): ours \(o), tshark \(w)") }
            if Int(t[0]) != p.index { fail("frame.number", p.index, t[0]) }
            // frame.time_epoch: seconds and nanoseconds; PacketLogger counts microseconds.
            let parts = t[1].split(separator: ".")
            let secs = Int64(parts.first ?? "") ?? -1
            let nanos = parts.count > 1 ? Int32(parts[1].prefix(9).padding(toLength: 9, withPad: "0", startingAt: 0)) ?? -1 : 0
            if p.time.seconds != secs || p.time.nanoseconds != nanos { fail("time", "\(p.time.seconds).\(p.time.nanoseconds)", t[1]) }
            let type = Int(t[2].dropFirst(2), radix: 16) ?? -1
            let direction: Direction? = [0x00, 0x02, 0x08].contains(type) ? .sent : [0x01, 0x03, 0x09].contains(type) ? .received : nil
            if p.direction != direction { fail("direction", p.direction as Any, t[2]) }
            // tshark's Info says "Sent"/"Rcvd" for HCI packets too.
            if t[6].hasPrefix("Sent ") && p.direction != .sent || t[6].hasPrefix("Rcvd ") && p.direction != .received {
                fail("direction (Info)", p.direction as Any, t[6])
            }
            if direction == nil {
                notes += 1
                guard p.type == "note", let text = field("text", p.layer("note")).flatMap({ v -> String? in
                    if case .text(let s) = v { return s } else { return nil } }) else { fail("note", p.summary, t[2]); continue }
                let theirText = t[4].isEmpty ? t[3] : t[4]
                if !text.hasSuffix(theirText) { fail("note text", text, theirText) }
            } else if p.malformed != nil {
                fail("malformed", p.malformed!, "-")
            }
            let op = p.layer("att").flatMap { intValue(field("opcode", $0)) }
            // tshark 4.0 follows no Enhanced Credit Based channel (ChannelTests, behaviour 1).
            let eatt = field("mode", p.layer("l2cap")) == .text("enhanced credit based")
            if (op.map { String(format: "0x%02x", $0) } ?? "") != t[5], !(eatt && t[5].isEmpty) { fail("ATT opcode", op as Any, t[5]) }
            if op != nil { att += 1 }
        }
        return (problems, notes, att, ours.count)
    }

    @Test func bigEndianWithNotesAgreesWithTshark() throws {
        let r = try compare("bumble-central-notes.pklg", bigEndian: true)
        #expect(r.problems.isEmpty, "\(r.problems.joined(separator: "\n"))")
        // bumble-central.btsnoop's 171 packets (Tests/Fixtures/README.md) and 5 text records.
        #expect(r.packets == 176)
        #expect(r.notes == 5)
        #expect(r.att == 87)
    }

    @Test func littleEndianAgreesWithTshark() throws {
        let r = try compare("bumble-channels-le.pklg", bigEndian: false)
        #expect(r.problems.isEmpty, "\(r.problems.joined(separator: "\n"))")
        #expect(r.packets == 191)
        #expect(r.notes == 0)
    }

    /// The same packets as the btsnoop they were made from: PacketLogger's record is the
    /// packet without its H4 indicator, which the reader puts back.
    @Test func samePacketsAsTheBtsnoop() throws {
        var a = try CaptureReader(path: fixturePath("bumble-channels-le.pklg"))
        var b = try CaptureReader(path: fixturePath("bumble-channels.btsnoop"))
        let (ra, rb) = (a.readAll().records, b.readAll().records)
        #expect(ra.count == rb.count)
        for (x, y) in zip(ra, rb) {
            #expect(x.raw == y.raw && x.direction == y.direction, "record \(x.number)")
            #expect(x.time.seconds == y.time.seconds && x.time.nanoseconds / 1000 == y.time.nanoseconds / 1000, "record \(x.number)")
        }
    }

    @Test func cutAndHostileRecords() throws {
        let whole = [UInt8](try #require(FileManager.default.contents(atPath: fixturePath("bumble-central-notes.pklg"))))
        // Cut inside the last record: every whole one, then the error naming the cut one.
        var cut = try CaptureReader(bytes: Array(whole.dropLast(3)))
        let (records, error) = cut.readAll()
        #expect(records.count == 175)
        #expect(error?.message.contains("record 176") == true, "\(error?.message ?? "")")
        // A length below 8 in record 7, after the 5 the format is recognised by (as Wireshark):
        // corrupt, said so.
        var bad = Array(whole.prefix(2 * 1024))
        var o = 0
        for _ in 0..<6 { o += 4 + Int(UInt32(bad[o]) << 24 | UInt32(bad[o + 1]) << 16 | UInt32(bad[o + 2]) << 8 | UInt32(bad[o + 3])) }
        bad.replaceSubrange(o..<(o + 4), with: [0, 0, 0, 3])
        var r = try CaptureReader(bytes: bad)
        let (some, e2) = r.readAll()
        #expect(some.count == 6)
        #expect(e2?.message.contains("length 3") == true, "\(e2?.message ?? "")")
        // Random mutations never trap.
        var g = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            var m = Array(whole.prefix(4096))
            for _ in 0..<Int.random(in: 1...8, using: &g) { m[Int.random(in: 0..<m.count, using: &g)] = UInt8.random(in: 0...255, using: &g) }
            guard var reader = try? CaptureReader(bytes: m) else { continue }
            let decoder = PacketDecoder()
            while let record = try? reader.next() { _ = decoder.decode(record) }
        }
    }
}
