import Foundation
import HCI
import Testing
import TestSupport
import Transport
@testable import Capture
#if canImport(Glibc)
import Glibc
#endif

let samplePackets: [(HCIPacket, Direction)] = [
    (.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0c03))), .sent),
    (.event(HCIEventPacket(code: 0x0e, parameters: [0x01, 0x03, 0x0c, 0x00])), .received),
    (.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x2006), parameters: Array(repeating: 0, count: 15))), .sent),
    (.event(HCIEventPacket(code: 0x0f, parameters: [0x00, 0x01, 0x06, 0x20])), .received),
    (.acl(HCIACLPacket(handle: 0x40, boundary: .firstNonFlushable, data: [0x03, 0x00, 0x04, 0x00, 0x02, 0x17, 0x00])), .sent),
    (.acl(HCIACLPacket(handle: 0x40, boundary: .first, data: [0x03, 0x00, 0x04, 0x00, 0x03, 0xf7, 0x00])), .received),
]

func tempPath(_ suffix: String) -> String {
    "/tmp/ble-hci-capture-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))\(suffix)"
}

func writeSample(_ path: String) throws -> Date {
    let w = try CaptureWriter.open(path: path)
    let start = Date(timeIntervalSince1970: 1_790_000_000.123456)
    for (i, (p, d)) in samplePackets.enumerated() { w.write(p, direction: d, time: start.addingTimeInterval(Double(i) * 0.001)) }
    w.close()
    #expect(w.failure == nil)
    return start
}

/// Runs tshark and returns one array of fields per frame.
func tshark(_ path: String, fields: [String]) throws -> (rows: [[String]], stderr: String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/tshark")
    p.arguments = ["-r", path, "-T", "fields"] + fields.flatMap { ["-e", $0] }
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    let rows = String(decoding: data, as: UTF8.self).split(separator: "\n").map {
        $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    }
    // tshark warns when run as root; anything else on stderr is a real complaint.
    let stderr = String(decoding: errData, as: UTF8.self).split(separator: "\n")
        .filter { !$0.hasPrefix("Running as user") }.joined(separator: "\n")
    return (rows, stderr)
}

let hasTshark = FileManager.default.isExecutableFile(atPath: "/usr/bin/tshark")

@Suite struct CaptureFileTests {
    @Test(arguments: [".btsnoop", ".pcap", ".pcapng"])
    func tsharkReadsWhatWeWrite(_ suffix: String) throws {
        try #require(hasTshark)
        let path = tempPath(suffix)
        defer { unlink(path) }
        _ = try writeSample(path)
        let (rows, stderr) = try tshark(path, fields: ["frame.number", "hci_h4.direction", "bthci_cmd.opcode", "bthci_evt.code", "hci_h4.type"])
        #expect(stderr.isEmpty, "\(stderr)")
        #expect(rows.count == samplePackets.count)
        for (row, (packet, direction)) in zip(rows, samplePackets) {
            #expect(row[1] == (direction == .sent ? "0x00" : "0x01"), "\(row)")
            #expect(row[4] == hexCode(packet.type.rawValue), "\(row)")
            if case .command(let c) = packet { #expect(row[2] == hexCode(c.opcode.rawValue)) }
            if case .event(let e) = packet { #expect(row[3] == hexCode(e.code)) }
        }
    }

    @Test(arguments: [".btsnoop", ".pcap", ".pcapng"])
    func roundTrip(_ suffix: String) throws {
        let path = tempPath(suffix)
        defer { unlink(path) }
        let start = try writeSample(path)
        var reader = try CaptureReader(path: path)
        switch suffix {
        case ".pcap": #expect(reader.format == .pcap(linktype: 201, bigEndian: false, nanoseconds: false))
        case ".pcapng": #expect(reader.format == .pcapng)
        default: #expect(reader.format == .btsnoop(datalink: 1002))
        }
        let (records, error) = reader.readAll()
        #expect(error == nil)
        #expect(records.count == samplePackets.count)
        for (i, (r, (p, d))) in zip(records, samplePackets).enumerated() {
            #expect(r.number == i + 1)
            #expect(try r.packet?.get() == p)
            #expect(r.direction == d)
            #expect(r.raw == p.h4)
            let expected = CaptureTime(start.addingTimeInterval(Double(i) * 0.001))
            #expect(r.time == expected)
        }
        #expect(records[0].time.iso8601 == "2026-09-21T14:13:20.123456Z")
    }

    @Test func truncatedMidRecordReadsWholeRecordsThenSaysSo() throws {
        for suffix in [".btsnoop", ".pcap", ".pcapng"] {
            let path = tempPath(suffix)
            defer { unlink(path) }
            _ = try writeSample(path)
            let full = [UInt8](FileManager.default.contents(atPath: path)!)
            // Cut 3 octets into the last record's payload, and inside the last record's header.
            for cut in [full.count - 3, full.count - samplePackets.last!.0.h4.count - (suffix == ".pcap" ? 4 : 0) - 5] {
                var reader = try CaptureReader(bytes: Array(full[0..<cut]), name: "cut")
                let (records, error) = reader.readAll()
                #expect(records.count == samplePackets.count - 1)
                let e = try #require(error)
                #expect(e.message.contains("truncated"))
                #expect(e.message.contains("record \(samplePackets.count)"))
                #expect(try reader.next() == nil)
            }
        }
    }

    @Test func randomBytesAreNotACapture() throws {
        var g = SystemRandomNumberGenerator()
        for n in [0, 3, 100, 4096] {
            let bytes = (0..<n).map { _ in UInt8.random(in: 0...255, using: &g) }
            do {
                _ = try CaptureReader(bytes: bytes, name: "noise")
                Issue.record("random bytes accepted")
            } catch {
                #expect(error.message.contains("is not a btsnoop, pcap, pcapng or PacketLogger file: it looks like"))
            }
        }
    }

    @Test func hostileLengthsAndGarbageRecordsNeverTrap() throws {
        // A record claiming 1 GiB.
        var w = BtsnoopWriter.fileHeader()
        w += [0x40, 0, 0, 0, 0x40, 0, 0, 0] + [UInt8](repeating: 0, count: 16)
        var reader = try CaptureReader(bytes: w)
        #expect(throws: CaptureError.self) { _ = try reader.next() }
        // Fuzz: header + random record bytes; any outcome but a trap is fine, malformed records are reported.
        var g = SystemRandomNumberGenerator()
        for _ in 0..<200 {
            let body = (0..<Int.random(in: 0...200, using: &g)).map { _ in UInt8.random(in: 0...255, using: &g) }
            for header in [BtsnoopWriter.fileHeader(), PcapWriter.fileHeader()] {
                var r = try CaptureReader(bytes: header + body)
                _ = r.readAll()
            }
        }
        // A malformed packet inside a well-formed record is reported and reading goes on.
        var bad = BtsnoopWriter.fileHeader()
        bad += [0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 3, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 8) + [0x04, 0x0e, 0x05]
        bad += BtsnoopWriter.record(samplePackets[1].0, direction: .received, time: Date())
        var r = try CaptureReader(bytes: bad)
        let (records, error) = r.readAll()
        #expect(error == nil)
        #expect(records.count == 2)
        if case .failure = records[0].packet! {} else { Issue.record("malformed event decoded") }
        #expect(records[0].raw == [0x04, 0x0e, 0x05])
        #expect(try records[1].packet?.get() == samplePackets[1].0)
    }

    @Test func readsBtsnoop1001And2001AndPcap187BigEndianNanos() throws {
        func btsnoopHeader(_ datalink: UInt32) -> [UInt8] {
            var w = ByteWriter(); w.append(Array("btsnoop".utf8) + [0]); w.u32be(1); w.u32be(datalink); return w.bytes
        }
        func btsnoopRecord(_ data: [UInt8], flags: UInt32) -> [UInt8] {
            var w = ByteWriter(); w.u32be(UInt32(data.count)); w.u32be(UInt32(data.count)); w.u32be(flags); w.u32be(0)
            w.u64be(UInt64(BtsnoopWriter.epochOffsetMicroseconds + 1_500_000)); w.append(data); return w.bytes
        }
        let reset = samplePackets[0].0, complete = samplePackets[1].0, aclIn = samplePackets[5].0
        // 1001: no indicator; type from flags.
        var f1001 = btsnoopHeader(1001)
        f1001 += btsnoopRecord(reset.body, flags: 2) + btsnoopRecord(complete.body, flags: 3) + btsnoopRecord(aclIn.body, flags: 1)
        var r = try CaptureReader(bytes: f1001)
        var (records, error) = r.readAll()
        #expect(error == nil)
        #expect(records.map { try? $0.packet?.get() } == [reset, complete, aclIn])
        #expect(records.map(\.direction) == [.sent, .received, .received])
        #expect(records[0].time == CaptureTime(seconds: 1, nanoseconds: 500_000_000))

        // 2001: btmon: index in the high 16 bits, opcode below; a system note too.
        var f2001 = btsnoopHeader(2001)
        f2001 += btsnoopRecord(Array("hello".utf8) + [0], flags: 0xffff_000c)
        f2001 += btsnoopRecord(reset.body, flags: 0x0001_0002) + btsnoopRecord(complete.body, flags: 0x0001_0003)
        f2001 += btsnoopRecord(aclIn.body, flags: 0x0001_0005)
        r = try CaptureReader(bytes: f2001)
        (records, error) = r.readAll()
        #expect(error == nil)
        #expect(records.count == 4)
        if case .monitor(12, "System Note", "hello") = records[0].content {} else { Issue.record("\(records[0].content)") }
        #expect(records[1...].map { try? $0.packet?.get() } == [reset, complete, aclIn])
        #expect(records[1...].map(\.controllerIndex) == [1, 1, 1])
        #expect(records[1...].map(\.direction) == [.sent, .received, .received])

        // pcap 187, big-endian, nanosecond magic.
        var p = ByteWriter()
        p.u32be(0xa1b2_3c4d); p.u16be(2); p.u16be(4); p.u32be(0); p.u32be(0); p.u32be(65535); p.u32be(187)
        for pkt in [reset, complete, aclIn] {
            p.u32be(10); p.u32be(999_999_999); p.u32be(UInt32(pkt.h4.count)); p.u32be(UInt32(pkt.h4.count)); p.append(pkt.h4)
        }
        r = try CaptureReader(bytes: p.bytes)
        #expect(r.format == .pcap(linktype: 187, bigEndian: true, nanoseconds: true))
        (records, error) = r.readAll()
        #expect(error == nil)
        #expect(records.map { try? $0.packet?.get() } == [reset, complete, aclIn])
        #expect(records.map(\.direction) == [.sent, .received, nil])
        #expect(records[0].time == CaptureTime(seconds: 10, nanoseconds: 999_999_999))
    }

    /// A writer thread appends records as fast as it can while the file is copied at an
    /// arbitrary moment: the copy is what a SIGKILL at that moment would leave (the kernel
    /// keeps every completed write(2)). tshark and our reader must read it without a cut record.
    @Test func sigkilledWriterLeavesReadableFile() async throws {
        try #require(hasTshark)
        let path = tempPath(".pcap")
        defer { unlink(path) }
        let writer = try CaptureWriter.open(path: path)
        let stop = ManagedAtomicFlag()
        let written = Watched(0)
        let thread = Thread {
            // Bounded so the test stays fast; the pauses make the copy land mid-stream.
            for i in 0..<20_000 where !stop.isSet {
                let (p, d) = samplePackets[i % samplePackets.count]
                writer.write(p, direction: d)
                if i % 16 == 0 {
                    written.withLock { $0 = i }
                    usleep(100)
                }
            }
        }
        thread.start()
        try await written.until("the writer under way") { $0 >= 1_000 }
        // Snapshot mid-writing, as a SIGKILL would leave it: whatever write(2) calls completed.
        let snapshot = FileManager.default.contents(atPath: path)!
        stop.set()
        let copy = path + ".snap.pcap"
        defer { unlink(copy) }
        _ = FileManager.default.createFile(atPath: copy, contents: snapshot)
        var reader = try CaptureReader(path: copy)
        let (records, error) = reader.readAll()
        #expect(error == nil, "every write(2) holds a whole record")
        #expect(records.count > 10)
        let (rows, stderr) = try tshark(copy, fields: ["frame.number"])
        #expect(stderr.isEmpty, "\(stderr)")
        #expect(rows.count == records.count)
    }
}

final class ManagedAtomicFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

@Suite struct CapturingTransportTests {
    /// A transport that queues received packets in a `PacketInbox`, as every transport does.
    final class FakeTransport: HCITransport, @unchecked Sendable {
        let inbox = PacketInbox()
        let lock = NSLock()
        var sent: [HCIPacket] = []
        var name: String { "fake" }
        func send(_ packet: HCIPacket) throws(TransportError) { lock.withLock { sent.append(packet) } }
        func close() { inbox.finish() }
    }

    /// A capturing transport around a fake, writing to a fresh btsnoop file and telling `seen`.
    func capturing() throws -> (String, FakeTransport, CaptureWriter, ManagedList, CapturingTransport) {
        let path = tempPath(".btsnoop")
        let inner = FakeTransport()
        let writer = try CaptureWriter.open(path: path)
        let seen = ManagedList()
        return (path, inner, writer, seen, CapturingTransport(inner, writers: [writer], observer: { d, p, _ in seen.append((d, p)) }))
    }

    @Test func recordsBothDirectionsAndPassesThrough() async throws {
        let (path, inner, writer, seen, t) = try capturing()
        defer { unlink(path) }
        try t.send(samplePackets[0].0)
        inner.inbox.deliver(samplePackets[1].0)
        inner.inbox.finish(throwing: TransportError(.lost, "gone"))
        var got: [HCIPacket] = []
        do {
            for try await p in t.incoming { got.append(p) }
            Issue.record("loss not passed on")
        } catch let e as TransportError {
            #expect(e.kind == .lost)
        }
        #expect(got == [samplePackets[1].0])
        #expect(inner.sent == [samplePackets[0].0])
        #expect(seen.items.map(\.0) == [.sent, .received])
        writer.close()
        var reader = try CaptureReader(path: path)
        let (records, error) = reader.readAll()
        #expect(error == nil)
        #expect(records.map { try? $0.packet?.get() } == [samplePackets[0].0, samplePackets[1].0])
        #expect(records.map(\.direction) == [.sent, .received])
    }
}

extension CapturingTransportTests {
    /// The host reads a capturing transport's inbox as it would the inner one's (same batches,
    /// no relay task in front), and every packet delivered is recorded once, in order.
    @Test func inboxIsTappedNotRelayed() async throws {
        let (path, inner, writer, seen, t) = try capturing()
        defer { unlink(path) }
        #expect(t.inbox === inner.inbox)
        let fed = samplePackets.map(\.0)
        for p in fed { inner.inbox.deliver(p) }
        inner.inbox.finish()
        var got: [HCIPacket] = []
        while let batch = try await t.inbox.next() { got += batch }
        #expect(got == fed)
        #expect(seen.items.map(\.1) == fed && seen.items.allSatisfy { $0.0 == .received })
        writer.close()
        var reader = try CaptureReader(path: path)
        let (records, error) = reader.readAll()
        #expect(error == nil)
        #expect(records.map { try? $0.packet?.get() } == fed)
    }
}

final class ManagedList: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [(Direction, HCIPacket)] = []
    var items: [(Direction, HCIPacket)] { lock.withLock { list } }
    func append(_ x: (Direction, HCIPacket)) { lock.withLock { list.append(x) } }
}

/// `-w FILE.pcapng` (issue 26): a Bumble capture rewritten as pcapng, block by block, reads in
/// tshark as the original does: the same frames in order, directions, timestamps to the
/// microsecond, HCI opcodes and ATT opcodes (tshark reads both files; Wireshark's `capinfos`
/// names the format).
@Suite struct PcapngWriterTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures")

    @Test func bumbleCaptureRewrittenAsPcapngReadsTheSameInTshark() throws {
        try #require(hasTshark)
        let original = Self.fixtures.appendingPathComponent("bumble-central.btsnoop").path
        var reader = try CaptureReader(path: original)
        let (records, error) = reader.readAll()
        #expect(error == nil)
        let path = tempPath(".pcapng")
        defer { unlink(path) }
        #expect(CaptureWriter.format(forPath: path) == .pcapng)
        #expect(CaptureWriter.format(forPath: "/tmp/X.PCAPNG") == .pcapng)
        let w = try CaptureWriter.open(path: path)
        for r in records {
            guard let p = try r.packet?.get(), let d = r.direction else { Issue.record("record \(r.number)"); continue }
            w.write(p, direction: d, time: r.time.date)
        }
        w.close()
        #expect(w.failure == nil)
        let fields = ["frame.number", "frame.time_epoch", "hci_h4.direction", "hci_h4.type", "bthci_cmd.opcode", "bthci_evt.code",
                      "btatt.opcode", "btatt.handle"]
        let (ours, stderr) = try tshark(path, fields: fields)
        let (theirs, _) = try tshark(original, fields: fields)
        #expect(stderr.isEmpty, "\(stderr)")
        #expect(ours.count == 171)
        #expect(ours == theirs)
        // Whole blocks: the file is the header plus one Enhanced Packet Block per record, each
        // 32 octets + the padded direction header and packet.
        let size = try #require(FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        let header = PcapngWriter.fileHeader().count
        #expect(size == header + records.reduce(0) { $0 + 32 + ((4 + $1.raw.count + 3) & ~3) })
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/capinfos") {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/capinfos")
            p.arguments = ["-t", "-E", "-c", path]
            let out = Pipe()
            p.standardOutput = out
            p.standardError = FileHandle.nullDevice
            try p.run()
            let text = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            #expect(text.contains("pcapng"), "\(text)")
            #expect(text.contains("Bluetooth H4 with linux header"), "\(text)")
            #expect(text.contains("171"), "\(text)")
        }
    }

    /// A write that fails part-way leaves the file at its last whole block (as btsnoop and pcap).
    @Test func everyBlockIsWhole() throws {
        let path = tempPath(".pcapng")
        defer { unlink(path) }
        _ = try writeSample(path)
        let bytes = [UInt8](try #require(FileManager.default.contents(atPath: path)))
        // Walk the blocks: each one's two length fields agree and they tile the file.
        var o = 0, blocks = 0
        while o < bytes.count {
            let n = Int(bytes[o + 4]) | Int(bytes[o + 5]) << 8 | Int(bytes[o + 6]) << 16 | Int(bytes[o + 7]) << 24
            #expect(n % 4 == 0 && o + n <= bytes.count)
            let m = Int(bytes[o + n - 4]) | Int(bytes[o + n - 3]) << 8 | Int(bytes[o + n - 2]) << 16 | Int(bytes[o + n - 1]) << 24
            #expect(m == n)
            o += n
            blocks += 1
        }
        #expect(o == bytes.count)
        #expect(blocks == 2 + samplePackets.count)  // SHB, IDB, one EPB per packet
    }
}
