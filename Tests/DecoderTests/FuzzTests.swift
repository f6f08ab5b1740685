import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import TestSupport
import HCI
import Capture
import Transport
@testable import Decoder

// Hostile input, reproducibly: a fixed-seed generator drives random and mutated H4 packets and
// capture files through every parser `dump` and the live stack use. Nothing may trap, every
// JSON line must parse, and decoding must go on after each bad packet.

private let fixtureNames = ["bumble-central.btsnoop", "bumble-peripheral.btsnoop", "ble-hci-demo.pcap"]

/// The fixtures' files, and every packet in them as H4 bytes.
private let fixtureFiles: [[UInt8]] = fixtureNames.map { [UInt8](FileManager.default.contents(atPath: fixturePath($0)) ?? Data()) }
private let fixturePackets: [[UInt8]] = fixtureFiles.flatMap { bytes -> [[UInt8]] in
    guard var reader = try? CaptureReader(bytes: bytes) else { return [] }
    return reader.readAll().records.compactMap { $0.packet == nil ? nil : $0.raw }
}

extension SeededGenerator {
    mutating func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8.random(in: 0...255, using: &self) } }
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &self) < percent }

    /// Bit flips, byte overwrites, truncation, extension, or a lie in a length field.
    mutating func mutate(_ input: [UInt8]) -> [UInt8] {
        var b = input
        for _ in 0..<Int.random(in: 1...3, using: &self) {
            switch Int.random(in: 0..<6, using: &self) {
            case 0 where !b.isEmpty:
                for _ in 0..<Int.random(in: 1...4, using: &self) {
                    b[Int.random(in: 0..<b.count, using: &self)] ^= 1 << UInt8.random(in: 0...7, using: &self)
                }
            case 1 where !b.isEmpty:
                b[Int.random(in: 0..<b.count, using: &self)] = UInt8.random(in: 0...255, using: &self)
            case 2 where !b.isEmpty:
                b.removeLast(Int.random(in: 1...b.count, using: &self))
            case 3:
                b += bytes(Int.random(in: 1...40, using: &self))
            case 4 where b.count > 3:
                // The H4 length octets sit at 2...4 depending on the type: hit one of them.
                b[Int.random(in: 2...min(4, b.count - 1), using: &self)] = [0, 0xff, UInt8(truncatingIfNeeded: b.count)].randomElement(using: &self)!
            default:
                if b.count > 1 { b.insert(UInt8.random(in: 0...255, using: &self), at: Int.random(in: 1..<b.count, using: &self)) }
            }
        }
        return b
    }

    /// A packet made up from scratch: any indicator (0 and 6...255 are invalid), a header whose
    /// length field is right only some of the time, any body.
    mutating func randomH4() -> [UInt8] {
        let type: UInt8 = chance(85) ? UInt8.random(in: 1...5, using: &self) : UInt8.random(in: 0...255, using: &self)
        let payload = bytes(chance(90) ? Int.random(in: 0...64, using: &self) : Int.random(in: 0...700, using: &self))
        let honest = chance(70)
        switch type {
        case 1:  // command: an opcode the registry knows half the time, so typed decoders see garbage
            let opcode = chance(50) ? (registeredCommandTypes.randomElement(using: &self)!).opcode.rawValue : UInt16.random(in: 0...0xffff, using: &self)
            let p = Array(payload.prefix(255))
            return [1, UInt8(opcode & 0xff), UInt8(opcode >> 8), honest ? UInt8(p.count) : UInt8.random(in: 0...255, using: &self)] + p
        case 4:  // event: LE Meta, Command Complete/Status, or any code
            let code: UInt8 = [0x3e, 0x3e, 0x0e, 0x0f, 0x05, 0x13, UInt8.random(in: 0...255, using: &self)].randomElement(using: &self)!
            var p = Array(payload.prefix(255))
            if code == 0x0e, p.count >= 3, chance(70) {
                let op = (registeredCommandTypes.randomElement(using: &self)!).opcode.rawValue
                p[1] = UInt8(op & 0xff); p[2] = UInt8(op >> 8); p.insert(0, at: 3)
                p = Array(p.prefix(255))
            }
            if code == 0x3e, !p.isEmpty, chance(80) { p[0] = UInt8.random(in: 0...0x2a, using: &self) }
            return [4, code, honest ? UInt8(p.count) : UInt8.random(in: 0...255, using: &self)] + p
        case 2:  // ACL: often an L2CAP header on a fixed channel so ATT/SMP/signaling see hostile bytes
            var data = payload
            if chance(60), data.count >= 4 {
                let len = chance(70) ? data.count - 4 : Int.random(in: 0...0xffff, using: &self)
                data[0] = UInt8(len & 0xff); data[1] = UInt8(len >> 8)
                data[2] = [4, 5, 6, 0x40, UInt8.random(in: 0...255, using: &self)].randomElement(using: &self)!; data[3] = 0
            }
            let hf = UInt16.random(in: 0...3, using: &self) << 12 | UInt16.random(in: 0x40...0x42, using: &self)
            let len = honest ? data.count : Int.random(in: 0...0xffff, using: &self)
            return [2, UInt8(hf & 0xff), UInt8(hf >> 8), UInt8(len & 0xff), UInt8(len >> 8)] + data
        default:
            return [type] + payload
        }
    }
}

/// Checks that `line` is one JSON object.
private func expectJSONObject(_ line: [UInt8], _ what: @autoclosure () -> String) {
    let object = try? JSONSerialization.jsonObject(with: Data(line))
    #expect(object is [String: Any], "not a JSON object: \(what()): \(String(decoding: line.prefix(300), as: UTF8.self))")
}

/// Renders `p` as JSON (checked) and as a tree; with `explain`, with `--explain`'s
/// explanations too (bit fields and characteristic values decoded from hostile octets).
private func renderBoth(_ p: DecodedPacket, hex: Bool = false, explain: Bool = false, _ what: @autoclosure () -> String) {
    let all = LayerSelection(allDecoderLayers)
    var json = RenderBuffer()
    appendJSON(p, layers: all, hex: hex, explain: explain, to: &json)
    expectJSONObject(json.bytes, what())
    var tree = RenderBuffer()
    appendTree(p, layers: all, hex: hex, explain: explain, to: &tree)
    #expect(!tree.bytes.isEmpty)
}

/// `dump --stats` of what `decoder` decoded: its JSON parses, its text renders.
private func expectStatistics(_ decoder: PacketDecoder, packets: Int, _ what: @autoclosure () -> String) {
    guard let s = decoder.statistics() else { Issue.record("no statistics: \(what())"); return }
    #expect(s.packets == packets, "\(what())")
    #expect(s.connections.count <= CaptureStatistics.maxConnections)
    #expect(s.connections.allSatisfy { $0.channels.count <= CaptureStatistics.maxChannelsPerConnection })
    expectJSONObject(Array(s.json.utf8), what())
    #expect(!s.text.isEmpty)
}

/// A Reset command: decodes cleanly whatever came before it.
private let resetH4: [UInt8] = [0x01, 0x03, 0x0c, 0x00]

@Test func fuzzH4PacketsThroughEveryDecoder() {
    #expect(fixturePackets.count > 500, "fixtures missing")
    var rng = SeededGenerator(seed: 0x0b1e_4c1_f022)
    // With --stats' counting, --attributes' tables and --hex's octets on: they must not trap either.
    let decoder = PacketDecoder(statistics: true, layerOctets: true, attributes: true)
    let directions: [Direction?] = [.sent, .received, nil]
    var inputs: [[UInt8]] = []
    // Every fixture packet mutated at least twice, the rest made up.
    for p in fixturePackets { inputs.append(rng.mutate(p)); inputs.append(rng.mutate(p)) }
    while inputs.count < 20_000 {
        inputs.append(rng.chance(50) ? rng.randomH4() : rng.mutate(fixturePackets.randomElement(using: &rng)!))
    }
    var malformed = 0
    var index = 0
    for (i, h4) in inputs.enumerated() {
        let parsed = Result { () throws(DecodeError) in try HCIPacket(h4: h4) }
        switch parsed {
        case .success(.command(let c)):
            if let cmd = try? HCICommands.decode(c) { _ = cmd.fields }
        case .success(.event(let e)):
            if let ev = try? HCIEvents.decode(e) { _ = ev.fields }
        default: break
        }
        let p = decoder.decode(direction: directions[i % 3], packet: parsed, raw: h4, time: t0)
        index += 1
        #expect(p.index == index)
        if p.malformed != nil {
            malformed += 1
            #expect(p.raw == h4, "a malformed packet carries its raw bytes")
        }
        renderBoth(p, hex: true, explain: i % 4 == 0, "packet \(i) \(h4.hex)")
        // Decoding goes on: a good packet after hostile ones decodes as such.
        if i % 1000 == 999 {
            let reset = decoder.decode(direction: .sent, packet: .success(try! HCIPacket(h4: resetH4)), raw: resetH4, time: t0)
            index += 1
            #expect(reset.index == index && reset.malformed == nil && reset.summary == "HCI Command Reset")
        }
    }
    // The generator must actually reach both outcomes.
    #expect(malformed > 1000 && malformed < inputs.count - 1000)
    expectStatistics(decoder, packets: index, "statistics of the fuzzed packets")
    // Whatever the tables learnt, each finished one is within its bounds.
    let servers = decoder.attributes() ?? []
    #expect(servers.count <= 64)
    #expect(servers.allSatisfy { $0.values.values.allSatisfy { $0.count <= ServerAttributes.maximumValueLength } })
}

@Test func fuzzH4FramerKeepsPacketsWholeOrFailsCleanly() {
    var rng = SeededGenerator(seed: 0xf4a3)
    let stream = fixturePackets.flatMap { $0 }
    // Good stream, random chunking: the same packets come out.
    var framer = H4Framer()
    var out: [[UInt8]] = []
    var offset = 0
    while offset < stream.count {
        let n = min(stream.count - offset, Int.random(in: 1...300, using: &rng))
        out += (try? framer.feed(stream[offset..<(offset + n)]).map(\.h4)) ?? []
        offset += n
    }
    #expect(out == fixturePackets)
    #expect(framer.pendingCount == 0)
    // Mutated streams: packets or a framing error, never a trap or a buffer past one packet + chunk.
    for _ in 0..<200 {
        var f = H4Framer(maxPayloadLength: 1024)
        let bad = rng.mutate(Array(stream.prefix(Int.random(in: 1...4000, using: &rng))))
        var o = 0
        while o < bad.count {
            let n = min(bad.count - o, Int.random(in: 1...300, using: &rng))
            guard (try? f.feed(bad[o..<(o + n)])) != nil else { break }
            #expect(f.pendingCount <= 1 + 4 + 1024)
            o += n
        }
    }
}

@Test func fuzzCaptureFilesThroughReaderAndDecoder() {
    var rng = SeededGenerator(seed: 0xca97)
    // Headers of every supported format, for made-up files.
    let headers: [[UInt8]] = [
        Array("btsnoop".utf8) + [0, 0, 0, 0, 1, 0, 0, 0x03, 0xe9],  // 1001
        Array("btsnoop".utf8) + [0, 0, 0, 0, 1, 0, 0, 0x03, 0xea],  // 1002
        Array("btsnoop".utf8) + [0, 0, 0, 0, 1, 0, 0, 0x07, 0xd1],  // 2001
        [0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 187, 0, 0, 0],
        [0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 201],
    ]
    for i in 0..<2_000 {
        let file: [UInt8]
        let original = fixtureFiles[i % fixtureFiles.count]
        var truncatedOnly = false
        switch i % 4 {
        case 0:
            file = headers.randomElement(using: &rng)! + rng.bytes(Int.random(in: 0...600, using: &rng))
        case 1:
            file = Array(original.prefix(Int.random(in: 0...original.count, using: &rng)))
            truncatedOnly = true
        default:
            var b = original
            // Flip bits anywhere, often in record headers (lengths, flags, timestamps).
            for _ in 0..<Int.random(in: 1...8, using: &rng) {
                b[Int.random(in: 0..<b.count, using: &rng)] ^= 1 << UInt8.random(in: 0...7, using: &rng)
            }
            file = rng.chance(30) ? rng.mutate(b) : b
        }
        guard var reader = try? CaptureReader(bytes: file, name: "fuzz \(i)") else { continue }
        let records = reader.readAll().records
        if truncatedOnly {
            // A cut file gives every whole record before the cut, and says so unless it was
            // cut between records.
            var full = try! CaptureReader(bytes: original)
            let all = full.readAll().records
            #expect(records.map(\.raw) == Array(all.prefix(records.count)).map(\.raw))
            #expect(records.count <= all.count)
        }
        // Decode and render every made-up file and every fourth mutated fixture (all of them
        // would take too long in a debug build; cut copies decode like the fixtures).
        guard i % 4 == 0 || i % 8 == 2 else { continue }
        let decoder = PacketDecoder(statistics: i % 2 == 0, layerOctets: i % 2 == 0)
        for r in records { renderBoth(decoder.decode(r), hex: i % 2 == 0, explain: i % 4 == 1, "capture \(i) record \(r.number)") }
        if i % 2 == 0 { expectStatistics(decoder, packets: records.count, "statistics of capture \(i)") }
    }
}

/// Hostile packets through the flow diagram (`dump --flow` / `--svg`): nothing traps, every
/// packet is an arrow (all layers selected), and the SVG is still well-formed XML.
@Test func fuzzPacketsThroughTheFlowDiagram() {
    var rng = SeededGenerator(seed: 0xf10e)
    let decoder = PacketDecoder()
    var builder = FlowBuilder()
    let directions: [Direction?] = [.sent, .received, nil]
    let count = 5_000
    for i in 0..<count {
        let h4 = rng.chance(50) ? rng.randomH4() : rng.mutate(fixturePackets.randomElement(using: &rng)!)
        let parsed = Result { () throws(DecodeError) in try HCIPacket(h4: h4) }
        builder.add(decoder.decode(direction: directions[i % 3], packet: parsed, raw: h4, time: t0))
    }
    let d = builder.finish()
    #expect(d.packetCount == count)
    #expect(d.peers.count <= FlowBuilder.maxPeerColumns, "\(d.peers.count) peer columns")
    var text = RenderBuffer()
    FlowText.render(d, to: &text)
    let rows = text.string.split(separator: "\n").filter { line in
        let cell = line.drop { $0 == " " }
        return cell.hasPrefix("#") && cell.dropFirst().first?.isNumber == true
    }
    #expect(rows.count == count)
    let parser = XMLParser(data: Data(FlowSVG.render(d).utf8))
    #expect(parser.parse(), "SVG of hostile packets: \(String(describing: parser.parserError))")
}
