import Foundation
import Testing
import HCI
import Capture
@testable import Decoder
#if canImport(Glibc)
import Glibc
#endif

// pcapng read by CaptureReader, with tshark as the oracle: the same frames in the same order,
// the same directions, timestamps to the microsecond and ATT opcodes where both decode.
//
// Fixtures (Wireshark's own pcapng writer, editcap 4.0.17):
// - ble-hci-demo-25-75.pcapng: `editcap -F pcapng -r ble-hci-demo.pcap OUT 25-75`
//   (link type 201, microsecond resolution: no if_tsresol option).
// - bumble-central-60-100-ns.pcapng: `editcap -F nsecpcap bumble-central.btsnoop A.pcap`,
//   `editcap -r A.pcap B.pcap 60-100`, `editcap -F pcapng -t 0.000000123 B.pcap OUT`
//   (link type 201, if_tsresol 9, timestamps with 123 ns below the microsecond).
// Made here from them, by Wireshark's tools where they can: two interfaces (mergecap), link
// type 187 (editcap -T bluetooth-h4), link type 254 (editcap of a btsnoop 2001 file built
// below), an Ethernet interface beside a Bluetooth one, a cut tail. Wireshark writes pcapng
// in the host's byte order only, so the big-endian file is the little-endian one with every
// block field swapped (`bigEndian(_:)`), and tshark reads that file too.

private let tools = ["/usr/bin", "/usr/local/bin"]

/// Runs one of Wireshark's tools; its standard output.
@discardableResult
private func wireshark(_ tool: String, _ args: [String]) throws -> String {
    let exe = try #require(tools.map { "\($0)/\(tool)" }.first { FileManager.default.isExecutableFile(atPath: $0) },
                           "\(tool) is not installed (make test installs it: apt-get install tshark)")
    let p = Process()
    p.executableURL = URL(fileURLWithPath: exe)
    p.arguments = args
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self)
}

private func temp(_ name: String) -> String { "/tmp/ble-hci-pcapng-\(getpid())-\(UInt32.random(in: 0...UInt32.max))-\(name)" }

private let oracleFields = ["frame.number", "frame.time_epoch", "hci_h4.direction", "hci_mon.opcode", "hci_mon.adapter_id", "btatt.opcode"]

/// Compares our reading of `path` with tshark's, field by field; returns the disagreements.
/// `expectCut`: the file ends inside a record, which both readers report after the whole ones.
private func compareWithTshark(_ path: String, expectCut: Bool = false) throws -> [String] {
    var reader = try CaptureReader(path: path)
    #expect(reader.format == .pcapng)
    let (records, error) = reader.readAll()
    #expect((error != nil) == expectCut, "\(error?.message ?? "no error")")
    if expectCut { #expect(error?.message.contains("record \(records.count + 1)") == true, "\(error?.message ?? "")") }
    let decoder = PacketDecoder()
    let ours = records.map { decoder.decode($0) }
    let theirs = try wireshark("tshark", ["-r", path, "-T", "fields", "-E", "occurrence=f"] + oracleFields.flatMap { ["-e", $0] })
        .split(separator: "\n").map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
    var problems: [String] = []
    if ours.count != theirs.count { problems.append("packets: ours \(ours.count), tshark \(theirs.count)") }
    for (p, t) in zip(ours, theirs) {
        func fail(_ what: String, _ o: Any, _ w: Any) { problems.append("#\(p.index) \(what): ours \(o), tshark \(w)") }
        guard t.count == oracleFields.count else { fail("tshark columns", oracleFields.count, t.count); continue }
        if Int(t[0]) != p.index { fail("frame.number", p.index, t[0]) }
        // "1795997745.529826123": seconds, and the fraction's first six digits.
        let epoch = t[1].split(separator: ".")
        let micros = String(epoch.count > 1 ? epoch[1].prefix(6) : "")
        let theirTime = "\(epoch[0]).\(micros + String(repeating: "0", count: 6 - micros.count))"
        let us = String(p.time.nanoseconds / 1000)
        let ourTime = "\(p.time.seconds).\(String(repeating: "0", count: 6 - us.count) + us)"
        if ourTime != theirTime { fail("time", ourTime, theirTime) }
        let expected: Direction?
        switch (t[2], Int(t[3])) {
        case ("0x00", _): expected = .sent
        case ("0x01", _): expected = .received
        case ("0xff", _):
            // tshark leaves link type 187 undirected; the reader knows commands go to the
            // controller and events come from it (Core v5.4 Vol 4 Part E 5.4), as for pcap 187.
            expected = p.type == "command" ? .sent : p.type == "event" ? .received : nil
        case ("", let opcode?):
            // Link type 254: the direction is the monitor opcode's (BlueZ monitor/: even
            // opcodes 2–6 and 18 sent, odd 3–7 and 19 received; the others are not packets).
            expected = [2, 4, 6, 18].contains(opcode) ? .sent : [3, 5, 7, 19].contains(opcode) ? .received : nil
            if !(2...7).contains(opcode) && !(18...19).contains(opcode) {
                if intValue(field("opcode", p.layer("monitor"))) != opcode { fail("monitor opcode", p.layers, opcode) }
            }
            let index = records[p.index - 1].controllerIndex.map(Int.init)
            if let adapter = Int(t[4]), index != adapter { fail("adapter", index as Any, adapter) }
        default:
            // Not a Bluetooth frame for tshark either: our reader's note.
            expected = nil
            if p.type != "note" { fail("type", p.type, "not Bluetooth") }
        }
        if p.direction != expected { fail("direction", p.direction as Any, t[2]) }
        let ourATT = intValue(field("opcode", p.layer("att")))
        let theirATT = Int(t[5].dropFirst(2), radix: 16)
        if let o = ourATT, let w = theirATT, o != w { fail("btatt.opcode", o, w) }
        if (ourATT == nil) != (theirATT == nil) { fail("ATT decoded", ourATT as Any, t[5]) }
    }
    return problems
}

/// The same pcapng file with every block's numeric fields in the other byte order: block type
/// and lengths, the Section Header's magic, version and section length, the Interface
/// Description's link type, reserved field and snaplen, the packet blocks' header fields, and
/// each option's code and length. Option values are left alone: Wireshark's fixtures carry only
/// strings and the one-octet if_tsresol.
private func bigEndian(_ le: [UInt8]) -> [UInt8] {
    var b = le
    func swap(_ i: Int, _ n: Int) { b[i..<(i + n)].reverse() }
    func u32(_ i: Int) -> Int { Int(le[i]) | Int(le[i + 1]) << 8 | Int(le[i + 2]) << 16 | Int(le[i + 3]) << 24 }
    func u16(_ i: Int) -> Int { Int(le[i]) | Int(le[i + 1]) << 8 }
    func options(_ from: Int, _ end: Int) {
        var o = from
        while end - o >= 4 {
            let n = u16(o + 2)
            swap(o, 2); swap(o + 2, 2)
            o += 4 + (n + 3) & ~3
        }
    }
    var o = 0
    while o + 12 <= le.count {
        let type = u32(o), length = u32(o + 4), end = o + length - 4
        swap(o, 4); swap(o + 4, 4); swap(end, 4)
        switch type {
        case 0x0a0d_0d0a: swap(o + 8, 4); swap(o + 12, 2); swap(o + 14, 2); swap(o + 16, 8); options(o + 24, end)
        case 1: swap(o + 8, 2); swap(o + 10, 2); swap(o + 12, 4); options(o + 16, end)
        case 6:
            for f in 0..<5 { swap(o + 8 + 4 * f, 4) }
            options(o + 28 + (u32(o + 20) + 3) & ~3, end)
        default: break
        }
        o += length
    }
    return b
}

/// btsnoop 2001 (what btmon writes, RFC 1761 with BlueZ's datalink): a system note, then
/// Reset, its Command Complete and an ATT Read Request on controller 1.
private func btmonCapture() -> [UInt8] {
    var w = ByteWriter()
    w.append(Array("btsnoop".utf8) + [0]); w.u32be(1); w.u32be(2001)
    let records: [([UInt8], UInt32)] = [
        (Array("hello".utf8) + [0], 0xffff_000c),
        ([0x03, 0x0c, 0x00], 0x0001_0002),
        ([0x0e, 0x04, 0x01, 0x03, 0x0c, 0x00], 0x0001_0003),
        ([0x40, 0x00, 0x07, 0x00, 0x03, 0x00, 0x04, 0x00, 0x0a, 0x03, 0x00], 0x0001_0004),
    ]
    for (i, (data, flags)) in records.enumerated() {
        w.u32be(UInt32(data.count)); w.u32be(UInt32(data.count)); w.u32be(flags); w.u32be(0)
        w.u64be(UInt64(BtsnoopWriter.epochOffsetMicroseconds + 1_790_000_000_000_000 + Int64(i) * 1_234_567))
        w.append(data)
    }
    return w.bytes
}

@Suite struct PcapngTests {
    @Test(arguments: ["ble-hci-demo-25-75.pcapng", "bumble-central-60-100-ns.pcapng"])
    func fixturesAgreeWithTshark(_ name: String) throws {
        #expect(try compareWithTshark(fixturePath(name)) == [])
        // The comparison saw ATT: tshark decodes some in each fixture.
        let att = try wireshark("tshark", ["-r", fixturePath(name), "-Y", "btatt", "-T", "fields", "-e", "frame.number"])
        #expect(att.split(separator: "\n").count > 10)
    }

    @Test func nanosecondFixtureKeepsItsNanoseconds() throws {
        var reader = try CaptureReader(path: fixturePath("bumble-central-60-100-ns.pcapng"))
        let first = try #require(try reader.next())
        // tshark -e frame.time_epoch prints the full nanoseconds.
        let epoch = try wireshark("tshark", ["-r", fixturePath("bumble-central-60-100-ns.pcapng"), "-c", "1", "-T", "fields", "-e", "frame.time_epoch"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect("\(first.time.seconds).\(first.time.nanoseconds)" == epoch)
    }

    /// if_tsresol with bit 7 set counts in 2^-n seconds: the nanosecond fixture's option
    /// (code 9, length 1, value 9) rewritten to 2^-20, read by both.
    @Test func binaryResolution() throws {
        var file = [UInt8](try #require(FileManager.default.contents(atPath: fixturePath("bumble-central-60-100-ns.pcapng"))))
        let at = try #require((0..<(file.count - 5)).first { Array(file[$0..<($0 + 5)]) == [0x09, 0x00, 0x01, 0x00, 0x09] })
        file[at + 4] = 0x94
        let out = temp("bin.pcapng")
        defer { unlink(out) }
        _ = FileManager.default.createFile(atPath: out, contents: Data(file))
        #expect(try compareWithTshark(out) == [])
    }

    @Test func twoInterfacesOfDifferentResolutions() throws {
        let out = temp("two.pcapng")
        defer { unlink(out) }
        try wireshark("mergecap", ["-F", "pcapng", "-w", out, fixturePath("ble-hci-demo-25-75.pcapng"), fixturePath("bumble-central-60-100-ns.pcapng")])
        let interfaces = Set(try wireshark("tshark", ["-r", out, "-T", "fields", "-e", "frame.interface_id"]).split(separator: "\n"))
        #expect(interfaces == ["0", "1"])
        #expect(try compareWithTshark(out) == [])
    }

    @Test func bigEndianSection() throws {
        let le = [UInt8](try #require(FileManager.default.contents(atPath: fixturePath("bumble-central-60-100-ns.pcapng"))))
        let out = temp("be.pcapng")
        defer { unlink(out) }
        let be = bigEndian(le)
        #expect(Array(be[8..<12]) == [0x1a, 0x2b, 0x3c, 0x4d])
        _ = FileManager.default.createFile(atPath: out, contents: Data(be))
        #expect(try compareWithTshark(out) == [])
        // Both byte orders in one file: a second section resets the interfaces.
        let mixed = temp("mixed.pcapng")
        defer { unlink(mixed) }
        _ = FileManager.default.createFile(atPath: mixed, contents: Data(be + le))
        #expect(try compareWithTshark(mixed) == [])
    }

    @Test func linktype187HasNoDirection() throws {
        let out = temp("h4.pcapng")
        defer { unlink(out) }
        try wireshark("editcap", ["-F", "pcapng", "-T", "bluetooth-h4", fixturePath("ble-hci-demo-25-75.pcapng"), out])
        #expect(try compareWithTshark(out) == [])
    }

    @Test func linktype254IsBtmon() throws {
        let input = temp("btmon.btsnoop"), out = temp("btmon.pcapng")
        defer { unlink(input); unlink(out) }
        _ = FileManager.default.createFile(atPath: input, contents: Data(btmonCapture()))
        try wireshark("editcap", ["-F", "pcapng", input, out])
        #expect(try compareWithTshark(out) == [])
        var reader = try CaptureReader(path: out)
        let (records, _) = reader.readAll()
        if case .monitor(12, "System Note", "hello") = records.first?.content {} else { Issue.record("\(String(describing: records.first?.content))") }
        #expect(records.dropFirst().map(\.controllerIndex) == [1, 1, 1])
    }

    @Test func packetsOfOtherLinkTypesAreNotes() throws {
        let eth = temp("eth.pcapng"), out = temp("eth-bt.pcapng")
        defer { unlink(eth); unlink(out) }
        try wireshark("editcap", ["-F", "pcapng", "-T", "ether", "-r", fixturePath("ble-hci-demo-25-75.pcapng"), eth, "1-5"])
        try wireshark("mergecap", ["-F", "pcapng", "-a", "-w", out, eth, fixturePath("bumble-central-60-100-ns.pcapng")])
        #expect(try compareWithTshark(out) == [])
        var reader = try CaptureReader(path: out)
        let (records, error) = reader.readAll()
        #expect(error == nil)
        #expect(records.prefix(5).allSatisfy { if case .note(let t) = $0.content { t.contains("link type 1,") } else { false } })
    }

    @Test func cutTailReportsTheRecordWhereItEnds() throws {
        let full = [UInt8](try #require(FileManager.default.contents(atPath: fixturePath("ble-hci-demo-25-75.pcapng"))))
        let out = temp("cut.pcapng")
        defer { unlink(out) }
        for cut in [full.count - 5, full.count - 30] {
            _ = FileManager.default.createFile(atPath: out, contents: Data(full[0..<cut]))
            #expect(try compareWithTshark(out, expectCut: true) == [])
        }
    }

    @Test func unknownBlocksAreSkippedAndLengthsChecked() throws {
        let file = [UInt8](try #require(FileManager.default.contents(atPath: fixturePath("ble-hci-demo-25-75.pcapng"))))
        let shbLength = Int(file[4]) | Int(file[5]) << 8
        // A custom block (type 0x00000BAD, draft section 11.1: local use) after the header.
        var w = ByteWriter(); w.u32(0x0000_0bad); w.u32(16); w.u32(0xdead_beef); w.u32(16)
        var reader = try CaptureReader(bytes: Array(file[0..<shbLength]) + w.bytes + Array(file[shbLength...]))
        let (records, error) = reader.readAll()
        #expect(error == nil)
        #expect(records.count == 51)  // editcap -r ... 25-75
        // A block whose length is not a multiple of 4, or is past the end, or differs at its end.
        for (at, value) in [(4, UInt8(0x6d)), (5, UInt8(0x70)), (shbLength - 4, UInt8(0x70))] {
            var bad = file
            bad[at] = value
            var r = try CaptureReader(bytes: bad)
            let (rs, e) = r.readAll()
            #expect(rs.isEmpty && e != nil, "\(at): \(e?.message ?? "accepted")")
        }
        // Hostile bytes after a valid header: never a trap.
        var g = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            var mutated = file
            for _ in 0..<Int.random(in: 1...8, using: &g) { mutated[Int.random(in: 0..<mutated.count, using: &g)] = UInt8.random(in: 0...255, using: &g) }
            let cut = Array(mutated.prefix(Int.random(in: 0...mutated.count, using: &g)))
            guard var r = try? CaptureReader(bytes: cut) else { continue }
            let decoder = PacketDecoder()
            while let record = try? r.next() { _ = decoder.decode(record) }
        }
    }

    @Test func otherFormatsAreNamed() throws {
        // PacketLogger: length(4, big-endian), seconds(4), microseconds(4), type(1), data: a
        // Reset command (type 0x00) and its Command Complete (0x01).
        var pklg = ByteWriter()
        for (type, data) in [(UInt8(0x00), [UInt8]([0x03, 0x0c, 0x00])), (0x01, [0x0e, 0x04, 0x01, 0x03, 0x0c, 0x00])] {
            pklg.u32be(UInt32(9 + data.count)); pklg.u32be(1_790_000_000); pklg.u32be(0); pklg.append([type] + data)
        }
        // Read since issue 26 (PacketLoggerTests).
        var reader = try CaptureReader(bytes: pklg.bytes, name: "x.pklg")
        #expect(reader.format == .packetLogger(bigEndian: true))
        #expect(reader.readAll().records.count == 2)
        do {
            _ = try CaptureReader(bytes: Array("hello, world".utf8), name: "x.txt")
            Issue.record("text accepted")
        } catch {
            #expect(error.message.contains("it looks like an unknown format"), "\(error)")
        }
        // A Section Header whose byte-order magic is wrong: pcapng, corrupt.
        var shb = [UInt8](try #require(FileManager.default.contents(atPath: fixturePath("ble-hci-demo-25-75.pcapng"))))
        shb[8] = 0
        var r = try CaptureReader(bytes: shb)
        #expect(throws: CaptureError.self) { _ = try r.next() }
    }
}
