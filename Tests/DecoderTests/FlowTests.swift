import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import TestSupport
import HCI
import ATT
import Capture
@testable import Decoder

// `dump --flow` / `--svg` (issue 17), checked against tshark: the diagram lists tshark's
// packets in tshark's order, and each packet sits in the step its opcodes say it belongs to.

private let fixtures = ["bumble-central.btsnoop", "bumble-peripheral.btsnoop", "ble-hci-demo.pcap"]

private func tsharkRows(_ path: String, _ fields: [String]) throws -> [[String]] { try Tshark.fields(path, fields, allOccurrences: false) }

private func hex(_ s: String) -> Int? {
    s.isEmpty ? nil : Int(s.hasPrefix("0x") ? String(s.dropFirst(2)) : s, radix: 16)
}

private func diagram(_ fixture: String, layers: Set<String> = allDecoderLayers) throws -> FlowDiagram {
    var b = FlowBuilder(layers: layers)
    for p in try decodeCapture(fixturePath(fixture)) { b.add(p) }
    return b.finish()
}

/// The text diagram's rows: (packet number, label), as printed.
private func textRows(_ d: FlowDiagram) -> [(Int, String)] {
    var buf = RenderBuffer()
    FlowText.render(d, to: &buf)
    return buf.string.split(separator: "\n").dropFirst().compactMap { line -> (Int, String)? in  // first: the summary
        let trimmed = line.drop { $0 == " " }.dropFirst()  // "#"
        guard line.drop(while: { $0 == " " }).hasPrefix("#"), let n = Int(trimmed.prefix { $0.isNumber }) else { return nil }
        // The label follows the last lane (two spaces after the lanes).
        let label = line.count > FlowText.prefix + (2 + d.peers.count) * FlowText.lane + 2
            ? String(line.dropFirst(FlowText.prefix + (2 + d.peers.count) * FlowText.lane + 2)) : ""
        return (n, label)
    }
}

@Suite("Flow diagram")
struct FlowTests {
    /// Every packet tshark lists appears once, in the same order, labelled with the name the
    /// spec gives its opcode (HCI command opcode, HCI event code, ATT opcode as tshark read them).
    @Test(arguments: fixtures)
    func listsTsharkPacketsInOrder(_ fixture: String) throws {
        let rows = try tsharkRows(fixturePath(fixture), ["frame.number", "hci_h4.direction", "bthci_cmd.opcode", "bthci_evt.code", "btatt.opcode"])
        let ours = textRows(try diagram(fixture))
        #expect(ours.map(\.0) == rows.map { Int($0[0]) ?? -1 })
        for (o, t) in zip(ours, rows) where t.count == 5 {
            if let op = hex(t[4]) {
                let name = try #require(ATTOpcode(UInt8(op)).name)
                #expect(o.1.hasPrefix("ATT " + name), "#\(o.0): \(o.1) vs ATT opcode \(t[4])")
            } else if let op = hex(t[2]) {
                #expect(o.1.hasPrefix("HCI Command " + HCIOpcode(rawValue: UInt16(op)).name), "#\(o.0): \(o.1) vs command \(t[2])")
            } else if hex(t[3]) != nil {
                #expect(o.1.hasPrefix("HCI Event "), "#\(o.0): \(o.1) vs event \(t[3])")
            }
        }
        // Arrows point the way the packet went (tshark's hci_h4.direction: 0 sent, 1 received).
        let arrows = try diagram(fixture).steps.flatMap(\.arrows)
        for (a, t) in zip(arrows, rows) {
            if t[1] == "0x00" { #expect(a.from == .host, "#\(a.index)") }
            if t[1] == "0x01" { #expect(a.to == .host, "#\(a.index)") }
        }
    }

    /// Issue 30: the Credit Based Connection Request tshark frames (code 0x17, identifier) whose
    /// SPSM is 0x0027 (the first two octets of its data, Core v5.4 Vol 3 Part A 4.25, read
    /// from the raw frame) and its response (0x18, same identifier) are an "EATT bearers" step;
    /// Flow Control Credit Inds (0x16) start no step of their own.
    @Test func enhancedATTBearersAreAStepAndCreditsStartNone() throws {
        let fixture = "bumble-channels.btsnoop"
        let rows = try tsharkRows(fixturePath(fixture), ["frame.number", "btl2cap.cmd_code", "btl2cap.cmd_ident"])
        var reader = try CaptureReader(path: fixturePath(fixture))
        let raw = reader.readAll().records.map { Optional($0.raw) }
        var eatt: Set<Int> = [], credits: Set<Int> = [], ids: Set<String> = []
        for r in rows where r.count == 3 {
            let n = Int(r[0])!
            // H4 type, ACL header (4), L2CAP header (4), signaling header (4), then SPSM.
            if r[1] == "0x17", let b = raw[n - 1], b.count >= 15, Int(b[13]) | Int(b[14]) << 8 == 0x0027 { eatt.insert(n); ids.insert(r[2]) }
            if r[1] == "0x18", ids.contains(r[2]) { eatt.insert(n) }
            if r[1] == "0x16" { credits.insert(n) }
        }
        #expect(eatt.count == 2 && !credits.isEmpty, "EATT \(eatt), credits \(credits)")
        let steps = try diagram(fixture).steps
        for step in steps {
            for a in step.arrows where eatt.contains(a.index) { #expect(step.kind == .enhancedATT, "#\(a.index) in \(step.kind)") }
            if let first = step.arrows.first { #expect(!credits.contains(first.index), "#\(first.index) starts a \(step.kind) step") }
        }
    }

    /// Issue 30: in the kernel's EATT capture (Tests/Fixtures/kernel-eatt.pcap), the packets
    /// tshark finds with command code 0x19/0x1A (Credit Based Reconfigure Request/Response,
    /// Core v5.4 Vol 3 Part A 4.27, 4.28) make a "reconfigure L2CAP channels" step, and the
    /// Credit Based Connection Request/Response (0x17/0x18) the "EATT bearers" step.
    @Test func reconfigurationIsAStepOfItsOwn() throws {
        let fixture = "kernel-eatt.pcap"
        let rows = try tsharkRows(fixturePath(fixture), ["frame.number", "btl2cap.cmd_code"])
        var expected: [Int: FlowStepKind] = [:]
        for r in rows where r.count == 2 {
            switch r[1] {
            case "0x19", "0x1a": expected[Int(r[0])!] = .reconfigureChannels
            case "0x17", "0x18": expected[Int(r[0])!] = .enhancedATT
            default: break
            }
        }
        #expect(expected.values.filter { $0 == .reconfigureChannels }.count == 2)
        var seen = 0
        for step in try diagram(fixture).steps {
            for a in step.arrows { if let kind = expected[a.index] { #expect(step.kind == kind, "#\(a.index) in \(step.kind)"); seen += 1 } }
        }
        #expect(seen == expected.count)
    }

    /// `--layers att`: only packets that carry ATT, labelled in ATT's words.
    @Test func honoursLayers() throws {
        let rows = try tsharkRows(fixturePath("ble-hci-demo.pcap"), ["frame.number", "btatt.opcode"])
        let d = try diagram("ble-hci-demo.pcap", layers: ["att"])
        let arrows = d.steps.flatMap(\.arrows)
        #expect(arrows.map(\.index) == rows.filter { $0.count == 2 && !$0[1].isEmpty }.map { Int($0[0])! })
        #expect(arrows.allSatisfy { $0.layer == "att" && $0.label.hasPrefix("ATT ") })
    }

    // MARK: Steps of the demo capture, derived from tshark's opcodes

    /// The step each packet of the demo capture belongs to, from its opcodes alone:
    /// - ATT requests by GATT procedure (Core v5.4 Vol 3 Part G): Read By Group Type → Discover
    ///   Primary Services (4.4.1); Read By Type 0x2802 → Find Included Services (4.5.1), 0x2803 →
    ///   Discover Characteristics (4.6.1), other types → Read Using Characteristic UUID (4.8.2);
    ///   Find Information → Discover Descriptors (4.7.1); Read → read (4.8.1); Write Request to a
    ///   Client Characteristic Configuration (0x2902) → subscribe when a bit is set, unsubscribe
    ///   when 0000 (3.3.3.3); other writes → write; Handle Value Notification → notify (4.10).
    /// - An ATT response or Error Response belongs to the request it answers: the one pending in
    ///   the other direction (one outstanding request per direction, Vol 3 Part F 3.3.2).
    /// - HCI: Reset → power on; LE Set Extended Scan Parameters/Enable(1) and advertising
    ///   reports → scan; Scan Enable(0) → stop scan; LE Extended Create Connection and LE
    ///   (Enhanced) Connection Complete → connect; Disconnect and Disconnection Complete →
    ///   disconnect; Command Complete/Status → the step of the command they answer (their
    ///   opcode); anything else (Number Of Completed Packets, fragments, other bring-up
    ///   commands) → the step going on.
    /// - The stack's own steps (`system`), no application call: the client's Read By Type of the
    ///   Database Hash 0x2B2A (GATT caching, Vol 3 Part G 2.5.2.1).
    static func expectedSteps() throws -> [(index: Int, kind: FlowStepKind, system: Bool)] { try expectedOnce.get() }
    /// Computed once for the 15 step tests (one tshark run).
    private static let expectedOnce = Result { try computeExpectedSteps() }

    private static func computeExpectedSteps() throws -> [(index: Int, kind: FlowStepKind, system: Bool)] {
        let rows = try tsharkRows(fixturePath("ble-hci-demo.pcap"), [
            "frame.number", "hci_h4.direction", "bthci_cmd.opcode", "bthci_evt.code", "bthci_evt.le_meta_subevent",
            "bthci_evt.opcode", "btatt.opcode", "btatt.uuid16", "btatt.characteristic_configuration_client", "bthci_cmd.le_scan_enable",
        ])
        var out: [(Int, FlowStepKind, Bool)] = []
        var current = (FlowStepKind.powerOn, false)
        var pending: [Bool: (FlowStepKind, Bool)] = [:]  // request direction (sent?) → its step
        var commandSteps: [Int: (FlowStepKind, Bool)] = [:]
        for r in rows {
            let sent = r[1] == "0x00"
            var kind: FlowStepKind? = nil
            var system = false
            if let op = hex(r[6]) {
                let uuids = r[7].split(separator: ",").compactMap { hex(String($0)) }
                switch op {
                case 0x10: kind = .discoverServices
                case 0x08:
                    kind = uuids.contains(0x2803) ? .discoverCharacteristics : uuids.contains(0x2802) ? .discoverIncludedServices : .read
                    system = sent && uuids.contains(0x2B2A)
                case 0x04: kind = .discoverDescriptors
                case 0x02: kind = .exchangeMTU
                case 0x0A, 0x0C: kind = .read
                case 0x12: kind = uuids.contains(0x2902) ? (hex(r[8]) == 0 ? .unsubscribe : .subscribe) : .write
                case 0x1B: kind = .notify
                default: (kind, system) = pending.removeValue(forKey: !sent).map { ($0.0, $0.1) } ?? (nil, false)  // a response
                }
                if [0x02, 0x04, 0x08, 0x0A, 0x0C, 0x10, 0x12].contains(op), let kind { pending[sent] = (kind, system) }
            } else if let op = hex(r[2]) {
                switch op {
                case 0x0C03: kind = .powerOn
                case 0x2041: kind = .scan
                case 0x2042: kind = r[9] == "0x00" ? .stopScan : .scan
                case 0x2043: kind = .connect
                case 0x0406: kind = .disconnect
                default: kind = nil
                }
                if let kind { commandSteps[op] = (kind, system) }
            } else if let code = hex(r[3]) {
                switch code {
                case 0x0E, 0x0F: (kind, system) = hex(r[5]).flatMap { commandSteps[$0] }.map { ($0.0, $0.1) } ?? (nil, false)
                case 0x05: kind = .disconnect
                case 0x3E:
                    switch hex(r[4]) {
                    case 0x02?, 0x0D?: kind = current.0 == .connect ? nil : .scan
                    case 0x01?, 0x0A?: kind = .connect
                    default: kind = nil
                    }
                default: kind = nil
                }
            }
            if let kind { current = (kind, system) }
            out.append((Int(r[0])!, current.0, current.1))
        }
        return out
    }

    /// The steps the demo goes through (the CoreBluetooth calls of `ble-hci demo`).
    static let demoKinds: [FlowStepKind] = [.powerOn, .scan, .connect, .stopScan, .exchangeMTU, .discoverServices,
                                            .discoverIncludedServices, .discoverCharacteristics, .discoverDescriptors,
                                            .read, .write, .subscribe, .notify, .unsubscribe, .disconnect]

    /// One test per step: the packets in steps of this kind, and where each such step starts,
    /// are those the opcodes say.
    @Test(arguments: demoKinds)
    func demoStepDelimited(_ kind: FlowStepKind) throws {
        let expected = try Self.expectedSteps()
        let d = try diagram("ble-hci-demo.pcap")
        let ours = d.steps.filter { $0.kind == kind }
        #expect(!ours.isEmpty, "no \(kind.rawValue) step")
        #expect(ours.flatMap { $0.arrows.map(\.index) } == expected.filter { $0.kind == kind }.map(\.index))
        // Step boundaries: a step starts where the expected step changes (its kind, or whether
        // the stack took it by itself).
        var starts: [Int] = []
        var systemSteps: [Bool] = []
        var previous: (FlowStepKind, Bool)? = nil
        for e in expected {
            if e.kind != previous?.0 || e.system != previous?.1, e.kind == kind {
                starts.append(e.index)
                systemSteps.append(e.system)
            }
            previous = (e.kind, e.system)
        }
        #expect(ours.map { $0.arrows[0].index } == starts)
        #expect(ours.map(\.bySystem) == systemSteps)
        #expect(ours.allSatisfy { $0.coreBluetooth == ($0.system?.label(kind, asServer: false) ?? kind.coreBluetooth(asServer: false)) })
    }

    /// The Bumble peripheral's capture is named from the peripheral's side.
    @Test func peripheralSideUsesPeripheralManagerCalls() throws {
        let d = try diagram("bumble-peripheral.btsnoop")
        let read = try #require(d.steps.first { $0.kind == .read && !$0.bySystem })
        #expect(read.asServer && read.coreBluetooth.hasPrefix("peripheralManager(_:didReceiveRead:)"))
        // Device Name (0x2A00) and CCCDs are the server stack's own attributes (Core v5.4 Vol 3
        // Part C 12.1, Part G 3.3.3.3): answered without the application.
        let stackReads = d.steps.filter { $0.kind == .read && $0.bySystem }
        #expect(!stackReads.isEmpty && stackReads.allSatisfy { $0.asServer && $0.coreBluetooth.hasPrefix("(answered by the stack") })
        #expect(stackReads.flatMap(\.arrows).contains { $0.label.contains("Read Request 0x0003 2a00") })
        #expect(d.steps.contains { $0.kind == .advertise })
    }

    /// A btmon capture (btsnoop datalink 2001: BlueZ's monitor opcodes, a System Note among
    /// the packets) of the Bumble central's exchange: the diagram still lists tshark's frames in
    /// order, draws the note on the host, and finds the same steps as in the H4 capture.
    @Test func worksOnBtmonCaptures() throws {
        var reader = try CaptureReader(path: fixturePath("bumble-central.btsnoop"))
        let records = reader.readAll().records
        var w = ByteWriter()
        w.append(Array("btsnoop".utf8) + [0]); w.u32be(1); w.u32be(2001)
        func record(_ data: [UInt8], opcode: UInt32, index: UInt32, time: CaptureTime) {
            w.u32be(UInt32(data.count)); w.u32be(UInt32(data.count)); w.u32be(index << 16 | opcode); w.u32be(0)
            w.u64be(UInt64(BtsnoopWriter.epochOffsetMicroseconds + time.seconds * 1_000_000 + Int64(time.nanoseconds / 1000)))
            w.append(data)
        }
        // BlueZ src/shared/btsnoop.h: 2 command, 3 event, 4 ACL TX, 5 ACL RX, 12 System Note (index 0xffff).
        record(Array("capture converted for a test".utf8) + [0], opcode: 12, index: 0xffff, time: records[0].time)
        for r in records {
            let opcode: UInt32
            switch r.raw.first {
            case 0x01: opcode = 2
            case 0x04: opcode = 3
            default: opcode = r.direction == .sent ? 4 : 5
            }
            record(Array(r.raw.dropFirst()), opcode: opcode, index: 0, time: r.time)
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ble-hci-flow-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("btmon.btsnoop").path
        try Data(w.bytes).write(to: URL(fileURLWithPath: path))

        let frames = try tsharkRows(path, ["frame.number"]).compactMap { Int($0[0]) }
        #expect(frames.count == records.count + 1)
        var b = FlowBuilder()
        for p in try decodeCapture(path) { b.add(p) }
        let d = b.finish()
        let arrows = d.steps.flatMap(\.arrows)
        #expect(arrows.map(\.index) == frames)
        #expect(arrows.first?.from == .host && arrows.first?.to == .host && arrows.first?.layer == "monitor")
        let original = try diagram("bumble-central.btsnoop")
        #expect(d.steps.map(\.kind) == original.steps.map(\.kind))
    }

    // MARK: SVG

    @Test(arguments: fixtures)
    func svgIsWellFormedXML(_ fixture: String) throws {
        let svg = FlowSVG.render(try diagram(fixture))
        let parser = XMLParser(data: Data(svg.utf8))
        let counter = ElementCounter()
        parser.delegate = counter
        #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        #expect(counter.root == "svg")
        #expect(counter.counts["script", default: 0] == 0)
        #expect(counter.hrefs.isEmpty, "external references: \(counter.hrefs)")  // only "#..." links inside the document
        #expect(counter.counts["line", default: 0] > 0)
    }

    /// A read refused with Insufficient Authentication (0x05), pairing, then the same Read
    /// Request again: the client's stack retries it (Core v5.4 Vol 3 Part F 3.4.1.1: the client
    /// may pair or encrypt and send the request again), so that step is the stack's, not an app
    /// call. On the server the retried request is answered like any other.
    @Test func readRetriedAfterPairingIsTheStacks() {
        func packet(_ i: Int, _ sent: Bool, _ layer: DecodedLayer) -> DecodedPacket {
            DecodedPacket(index: i, time: CaptureTime(seconds: 0, nanoseconds: 0), direction: sent ? .sent : .received, type: "acl",
                          summary: "", layers: [DecodedLayer("hci", [.int("handle", 64)]), layer])
        }
        let read = DecodedLayer("att", [.code("opcode", UInt8(0x0a)), .int("handle", 16)])
        let refusal = DecodedLayer("att", [.code("opcode", UInt8(0x01)), .code("requestOpcodeInError", UInt8(0x0a)),
                                           .int("attributeHandleInError", 16), .code("errorCode", UInt8(0x05))])
        let answer = DecodedLayer("att", [.code("opcode", UInt8(0x0b)), .bytes("value", [1])])
        let pairing = DecodedLayer("smp", [.code("code", UInt8(0x01))])
        for clientSide in [true, false] {
            var b = FlowBuilder()
            for (i, (sentByClient, layer)) in [(true, read), (false, refusal), (true, pairing), (false, pairing), (true, read), (false, answer)].enumerated() {
                b.add(packet(i + 1, sentByClient == clientSide, layer))
            }
            let steps = b.finish().steps
            #expect(steps.map(\.kind) == [.read, .pair, .read])
            #expect(steps.map(\.system) == [nil, nil, clientSide ? .retryAfterSecurity : nil], "client side: \(clientSide)")
        }
    }

    /// Core v5.4 Vol 4 Part E 7.7.65.18: a connection made from an advertising set ends it, and
    /// the stack turns advertising off then: no stopAdvertising() call. Turned off with no
    /// connection before it, it is the application's.
    @Test func advertisingOffAfterAConnectionIsTheSystems() {
        func p(_ i: Int, _ type: String, _ fields: [Field]) -> DecodedPacket {
            DecodedPacket(index: i, time: CaptureTime(seconds: 0, nanoseconds: 0), direction: type == "command" ? .sent : .received,
                          type: type, summary: "", layers: [DecodedLayer("hci", fields)])
        }
        func enable(_ i: Int, _ on: UInt8) -> [DecodedPacket] {
            [p(i, "command", [.code("opcode", UInt16(0x2039)), .text("name", "LE Set Extended Advertising Enable"), .code("enable", on)]),
             p(i + 1, "event", [.code("eventCode", UInt8(0x0e)), .text("name", "Command Complete"), .code("commandOpcode", UInt16(0x2039))])]
        }
        let connected = p(3, "event", [.code("eventCode", UInt8(0x3e)), .text("name", "LE Meta"), .text("subevent", "LE Enhanced Connection Complete"),
                                       .code("status", UInt8(0)), .int("connectionHandle", 64), .code("role", UInt8(1)),
                                       .text("peerAddress", "F0:F1:F2:F3:F4:02")])
        var b = FlowBuilder()
        for packet in enable(1, 1) + [connected] + enable(4, 0) { b.add(packet) }
        var steps = b.finish().steps
        #expect(steps.map(\.kind) == [.advertise, .connect, .stopAdvertising])
        #expect(steps.last?.system == .endedByConnection && steps.last?.arrows.count == 2)
        b = FlowBuilder()
        for packet in enable(1, 1) + enable(3, 0) { b.add(packet) }
        steps = b.finish().steps
        #expect(steps.map(\.kind) == [.advertise, .stopAdvertising])
        #expect(steps.last?.system == nil && steps.last?.coreBluetooth == "peripheralManager.stopAdvertising()")
    }

    /// Issue 28: an arrow label that does not fit between its lifelines is abbreviated, then cut
    /// in the middle, never before its last word ("Advertising Enable o…" lost on/off). Measured
    /// with the renderer's own character width against the arrow's drawn length.
    @Test(arguments: fixtures)
    func svgLabelsKeepTheirLastWord(_ fixture: String) throws {
        let svg = FlowSVG.render(try diagram(fixture))
        func unescape(_ t: Substring) -> String {
            t.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
                .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
                .replacingOccurrences(of: "&amp;", with: "&")
        }
        var checked = 0
        for group in svg.split(separator: "\n") where group.hasPrefix("<g><title>#") {
            let title = unescape(group.drop { $0 != " " }.dropFirst().prefix { $0 != "<" })
            guard let open = group.range(of: ">", options: .backwards, range: group.startIndex..<group.index(group.endIndex, offsetBy: -"</text></g>".count)) else { continue }
            let shown = unescape(group[open.upperBound..<group.index(group.endIndex, offsetBy: -"</text></g>".count)])
            // The room the renderer had: the arrow's length, or a lane for a dot.
            var px = FlowSVG.laneSpacing - 20
            if let x1 = group.firstMatch(of: /x1="(\d+)"/), let x2 = group.firstMatch(of: /x2="(\d+)"/) {
                px = abs(Int(x2.1)! - Int(x1.1)!) - 16
            }
            #expect(shown.count <= FlowSVG.capacity(px: px), "\(shown) is wider than \(px) px")
            // The last word whole, or in the table's short spelling ("Connection" → "Conn").
            let last = title.split(separator: " ").last.map(String.init) ?? ""
            let spellings = [last] + FlowSVG.abbreviations.map { last.replacingOccurrences(of: $0.0.trimmingCharacters(in: .whitespaces),
                                                                                             with: $0.1.trimmingCharacters(in: .whitespaces)) }
            if last.count + 2 < FlowSVG.capacity(px: px) {
                #expect(spellings.contains { shown.hasSuffix(" " + $0) || shown == $0 }, "\(title) drawn as \(shown)")
            }
            checked += 1
        }
        #expect(checked > 10)
        #expect(FlowSVG.fit("HCI Command LE Set Extended Advertising Enable off", px: FlowSVG.laneSpacing - 16).hasSuffix(" off"))
    }

    /// A run of the same exchange collapses into first, "× N", last.
    @Test func svgFoldsRepetition() throws {
        let step = FlowStep(kind: .notify, asServer: false, arrows: (1...60).map {
            FlowArrow(index: $0, time: .init(seconds: 0, nanoseconds: 0), from: .peer(0), to: .host, layer: "att",
                      label: "ATT Handle Value Notification 0x0010 = \($0)", malformed: false, shape: "ATT Handle Value Notification 0x0010")
        })
        let rows = FlowSVG.rows(FlowDiagram(peers: ["p"], steps: [step], start: nil))
        #expect(rows.count == 4)  // step band, first, "× 60", last
        guard case let .folded(count, _, first, last, hidden) = rows[2] else { Issue.record("not folded"); return }
        #expect(count == 58 && first == 2 && last == 59 && hidden.map(\.index) == Array(2...59))
        let svg = FlowSVG.render(FlowDiagram(peers: ["p"], steps: [step], start: nil))
        #expect(svg.contains("× 60 in all"))
        // The row links to a panel listing the folded packets (shown by CSS :target, no script).
        #expect(svg.contains("<a href=\"#fold-1\">") && svg.contains("<g id=\"fold-1\" class=\"panel\">"))
        #expect(svg.contains(">#2 ") && svg.contains("… and 18 more"))
    }

    /// A session repeated (same steps, same packets) is drawn once, then one "repeat × N" row.
    @Test func svgFoldsRepeatedSessions() throws {
        let once = try diagram("ble-hci-demo.pcap").steps
        let d = FlowDiagram(peers: ["p"], steps: Array(repeating: once, count: 5).flatMap { $0 }, start: nil)
        let rows = FlowSVG.rows(d)
        let repeated = rows.compactMap { row -> (Int, Int)? in
            if case let .repeatedSteps(steps, times, _, _) = row { return (steps, times) } else { return nil }
        }
        #expect(repeated.count == 1 && repeated.first?.0 == once.count && repeated.first?.1 == 4)
        let drawnSteps = rows.filter { if case .step = $0 { return true } else { return false } }.count
        #expect(drawnSteps == once.count)
    }
}

private final class ElementCounter: NSObject, XMLParserDelegate {
    var root: String?
    var counts: [String: Int] = [:]
    var hrefs: [String] = []
    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        if root == nil { root = name }
        counts[name, default: 0] += 1
        for (k, v) in attributes where (k.hasSuffix("href") && !v.hasPrefix("#")) || (v.contains("url(") && !v.hasPrefix("url(#")) {
            hrefs.append(v)
        }
    }
}
