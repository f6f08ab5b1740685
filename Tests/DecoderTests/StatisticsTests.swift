import Foundation
import Testing
import TestSupport
import HCI
import Capture
@testable import Decoder

// `dump --stats` (issue 26). Two oracles, never our own output:
// 1. tshark over the same fixture (`-T fields`): the test segments the frames into connections
//    itself (a Connection Complete, Vol 4 Part E 7.7.3, or LE (Enhanced) Connection Complete,
//    7.7.65.1 / 7.7.65.10 / v2, with status 0x00 starts one on its handle; Disconnection
//    Complete, 7.7.5, ends it), counts ACL packets and their Data_Total_Length (5.4.2) per
//    direction, L2CAP frames and their Length (Vol 3 Part A 3.1) per CID and direction, pairs
//    each ATT request with the next response or Error Response the other way on the same
//    channel (one transaction at a time, Vol 3 Part F 3.3.2) by frame times, and counts Error
//    Responses by code and failed commands (7.7.14, 7.7.15).
// 2. A capture built here from the specification's PDU layouts with known timestamps.

// MARK: - tshark

private let statsFields = [
    "frame.number", "frame.time_epoch", "hci_h4.direction", "hci_h4.type", "bthci_acl.chandle", "bthci_acl.length",
    "btl2cap.cid", "btl2cap.length", "btatt.opcode", "btatt.req_opcode_in_error", "btatt.error_code",
    "bthci_evt.code", "bthci_evt.le_meta_subevent", "bthci_evt.connection_handle", "bthci_evt.status",
    "bthci_evt.opcode", "btsmp.opcode", "btsmp.reason", "packetlogger.type",
]

/// PacketLogger's record types (Wireshark's packet-packetlogger.c) as (H4 type, direction).
private let packetLoggerTypes: [Int: (type: Int, direction: Int)] = [
    0x00: (0x01, 0), 0x01: (0x04, 1), 0x02: (0x02, 0), 0x03: (0x02, 1), 0x08: (0x03, 0), 0x09: (0x03, 1),
]

private func tsharkRows(_ path: String) throws -> [[String]] {
    let data = try Tshark.output(["-n", "-r", path, "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"] + statsFields.flatMap { ["-e", $0] })
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map {
        $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
    }
}

/// "1796433600.004851000" → nanoseconds, exactly.
private func epochNanoseconds(_ s: String) -> Int64 {
    let parts = s.split(separator: ".")
    let secs = Int64(parts[0])!
    var frac = parts.count > 1 ? String(parts[1]) : ""
    while frac.count < 9 { frac += "0" }
    return secs * 1_000_000_000 + Int64(frac.prefix(9))!
}

private func number(_ s: String) -> Int? {
    guard !s.isEmpty else { return nil }
    return s.hasPrefix("0x") ? Int(s.dropFirst(2), radix: 16) : Int(s)
}

/// The ATT requests (Vol 3 Part F 3.4.8, Table 3.37): a server answers each with its
/// response (opcode + 1) or an Error Response.
private let attRequests: Set<Int> = [0x02, 0x04, 0x06, 0x08, 0x0A, 0x0C, 0x0E, 0x10, 0x12, 0x16, 0x18, 0x20]

struct ExpectedFlow: Equatable, CustomStringConvertible {
    var packets = 0, octets = 0
    var description: String { "\(packets)/\(octets)" }
}

/// A connection as the test sees it in tshark's rows.
struct ExpectedConnection {
    var handle: Int
    var start: Int64
    var end: Int64
    var connected: Bool
    var sent = ExpectedFlow(), received = ExpectedFlow()
    /// By (CID, direction 0 sent / 1 received).
    var frames: [[Int]: ExpectedFlow] = [:]
    /// Request → answer latencies by CID (fixed channels, and dynamic channels whose two
    /// endpoints have the same CID, as in the fixtures).
    var latencies: [Int: [Int64]] = [:]
    var errors: [Int: [Int: Int]] = [:]
}

struct ExpectedStatistics {
    var types: [Int: Int] = [:]
    var connections: [ExpectedConnection] = []
    var failures: [[Int]: Int] = [:]
}

private func expected(from rows: [[String]]) -> ExpectedStatistics {
    var e = ExpectedStatistics()
    var current: [Int: Int] = [:]
    // Pending request per connection and the CID it was sent on (direction, time, opcode).
    var pending: [[Int]: (direction: Int, time: Int64, opcode: Int)] = [:]
    for r in rows {
        let f = Dictionary(uniqueKeysWithValues: zip(statsFields, r))
        let time = epochNanoseconds(f["frame.time_epoch"]!)
        let logged = number(f["packetlogger.type"]!).flatMap { packetLoggerTypes[$0] }
        let type = number(f["hci_h4.type"]!) ?? logged?.type ?? -1
        e.types[type, default: 0] += 1
        let dir = number(f["hci_h4.direction"]!) ?? logged?.direction ?? -1
        if let code = number(f["bthci_evt.code"]!) {
            let status = number(f["bthci_evt.status"]!) ?? 0
            let handle = number(f["bthci_evt.connection_handle"]!)
            let sub = number(f["bthci_evt.le_meta_subevent"]!)
            if status == 0, let handle, code == 0x03 || (code == 0x3E && [0x01, 0x0A, 0x29].contains(sub ?? -1)) {
                current[handle] = e.connections.count
                e.connections.append(ExpectedConnection(handle: handle, start: time, end: time, connected: true))
            }
            if code == 0x05, status == 0, let handle, let c = current.removeValue(forKey: handle) {
                e.connections[c].end = time
                pending = pending.filter { $0.key[0] != c }
            }
            if code == 0x0E || code == 0x0F, status != 0, let op = number(f["bthci_evt.opcode"]!), op != 0, op >> 10 != 0x3F {
                e.failures[[op, code, status], default: 0] += 1
            }
        }
        guard let handle = number(f["bthci_acl.chandle"]!), let length = number(f["bthci_acl.length"]!) else { continue }
        let c: Int
        if let k = current[handle] { c = k } else {
            c = e.connections.count
            current[handle] = c
            e.connections.append(ExpectedConnection(handle: handle, start: time, end: time, connected: false))
        }
        e.connections[c].end = time
        if dir == 0 { e.connections[c].sent.packets += 1; e.connections[c].sent.octets += length }
        if dir == 1 { e.connections[c].received.packets += 1; e.connections[c].received.octets += length }
        guard let cid = number(f["btl2cap.cid"]!), let l2len = number(f["btl2cap.length"]!) else { continue }
        e.connections[c].frames[[cid, dir], default: ExpectedFlow()].packets += 1
        e.connections[c].frames[[cid, dir], default: ExpectedFlow()].octets += l2len
        guard let op = number(f["btatt.opcode"]!) else { continue }
        // The same channel both ways: a fixed CID, or a dynamic channel whose two endpoints the
        // fixtures number alike (checked against the followed channel's CIDs below).
        let key = [c, cid]
        if attRequests.contains(op) { pending[key] = (dir, time, op) }
        if op == 0x01 {
            e.connections[c].errors[cid, default: [:]][number(f["btatt.error_code"]!)!, default: 0] += 1
        }
        if let req = pending[key], req.direction != dir,
           op == req.opcode + 1 || (op == 0x01 && number(f["btatt.req_opcode_in_error"]!) == req.opcode) {
            pending.removeValue(forKey: key)
            e.connections[c].latencies[cid, default: []].append(time - req.time)
        }
    }
    return e
}

private func median(_ v: [Int64]) -> Int64 {
    let s = v.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

private func statistics(_ path: String) throws -> CaptureStatistics {
    var reader = try CaptureReader(path: path)
    let (records, error) = reader.readAll()
    if let error { throw error }
    let decoder = PacketDecoder(statistics: true)
    for r in records { _ = decoder.decode(r) }
    return try #require(decoder.statistics())
}

private func ns(_ t: CaptureTime) -> Int64 { t.seconds * 1_000_000_000 + Int64(t.nanoseconds) }

@Suite struct StatisticsTests {
    @Test(arguments: ["bumble-central.btsnoop", "bumble-peripheral.btsnoop", "bumble-channels.btsnoop", "ble-hci-demo.pcap",
                      "bumble-central-60-100-ns.pcapng", "bumble-central-notes.pklg", "bumble-channels-le.pklg"])
    func agreesWithTsharkPerConnectionAndChannel(_ fixture: String) throws {
        let path = fixturePath(fixture)
        let s = try statistics(path)
        let e = expected(from: try tsharkRows(path))

        // Packets by H4 type (Vol 4 Part E 5.4; tshark's hci_h4.type), and the notes tshark
        // has no H4 type for.
        #expect(s.commands == e.types[0x01, default: 0])
        #expect(s.acl == e.types[0x02, default: 0])
        #expect(s.sco == e.types[0x03, default: 0])
        #expect(s.events == e.types[0x04, default: 0])
        #expect(s.iso == e.types[0x05, default: 0])
        #expect(s.packets == e.types.values.reduce(0, +), "every frame tshark read is counted")
        #expect(s.malformed == 0)

        #expect(s.connections.count == e.connections.count, "\(fixture): connections")
        for (ours, theirs) in zip(s.connections, e.connections) {
            let what = "\(fixture) connection handle \(theirs.handle)"
            #expect(Int(ours.handle) == theirs.handle, "\(what)")
            #expect((ours.connectedIn != nil) == theirs.connected, "\(what): setup seen")
            #expect(ExpectedFlow(packets: ours.sent.packets, octets: ours.sent.octets) == theirs.sent, "\(what): ACL sent")
            #expect(ExpectedFlow(packets: ours.received.packets, octets: ours.received.octets) == theirs.received, "\(what): ACL received")
            #expect(ours.duration == theirs.end - theirs.start, "\(what): duration")
            let bps = CaptureStatistics.bitsPerSecond(octets: theirs.sent.octets, nanoseconds: theirs.end - theirs.start)
            #expect(CaptureStatistics.bitsPerSecond(octets: ours.sent.octets, nanoseconds: ours.duration) == bps)

            // Frames per (CID, direction), from our channels: a fixed one both ways by its CID, a
            // followed one by the CID of each direction, one not followed by its CID and direction.
            var frames: [[Int]: ExpectedFlow] = [:]
            var attByCID: [Int: CaptureStatistics.ATTCounts] = [:]
            for ch in ours.channels {
                var sentCID: Int?, receivedCID: Int?
                switch ch.kind {
                case .fixed(let cid): sentCID = Int(cid); receivedCID = Int(cid)
                case let .followed(_, _, s, r, _): sentCID = s.map(Int.init); receivedCID = r.map(Int.init)
                case let .unfollowed(cid, d): if d == .sent { sentCID = Int(cid) } else { receivedCID = Int(cid) }
                }
                if let c = sentCID, ch.sent.packets > 0 { frames[[c, 0], default: ExpectedFlow()].packets += ch.sent.packets; frames[[c, 0], default: ExpectedFlow()].octets += ch.sent.octets }
                if let c = receivedCID, ch.received.packets > 0 { frames[[c, 1], default: ExpectedFlow()].packets += ch.received.packets; frames[[c, 1], default: ExpectedFlow()].octets += ch.received.octets }
                if let a = ch.att, let c = sentCID ?? receivedCID, sentCID == receivedCID || receivedCID == nil || sentCID == nil { attByCID[c] = a }
            }
            #expect(frames == theirs.frames, "\(what): L2CAP frames per CID and direction")

            // ATT where tshark decodes it (CID 0x0004, PSM 0x001F; not EATT, which it does not follow).
            for (cid, latencies) in theirs.latencies {
                let a = try #require(attByCID[cid], "\(what): ATT on CID \(cid)")
                #expect(a.answered == latencies.count, "\(what) CID \(cid): answered requests")
                #expect(a.latency.count == latencies.count)
                #expect(a.latency.minimum == latencies.min(), "\(what) CID \(cid): minimum latency")
                #expect(a.latency.maximum == latencies.max(), "\(what) CID \(cid): maximum latency")
                #expect(a.latency.median == median(latencies), "\(what) CID \(cid): median latency")
            }
            for (cid, errors) in theirs.errors {
                let a = try #require(attByCID[cid])
                #expect(Dictionary(uniqueKeysWithValues: a.errors.map { (Int($0.code.rawValue), $0.count) }) == errors,
                        "\(what) CID \(cid): Error Responses by code")
            }
        }
        var failures: [[Int]: Int] = [:]
        for f in s.commandFailures {
            failures[[Int(f.opcode.rawValue), f.event == "Command Status" ? 0x0F : 0x0E, Int(f.status.rawValue)]] = f.count
        }
        #expect(failures == e.failures, "\(fixture): failed commands")
    }

    @Test func fixturesHaveWhatTheOracleChecks() throws {
        // So the comparison above is not vacuous: the fixtures have latencies, errors, a failed
        // command, followed channels and a capture that starts mid-connection.
        let central = try statistics(fixturePath("bumble-central.btsnoop"))
        #expect(central.connections.first?.channels.contains { $0.att.map { $0.latency.count > 10 && !$0.errors.isEmpty } ?? false } == true)
        let channels = try statistics(fixturePath("bumble-channels.btsnoop"))
        #expect(channels.commandFailures.count == 1)
        #expect(channels.connections.count == 2)
        let followed = channels.connections.flatMap(\.channels).filter { if case .followed = $0.kind { return true } else { return false } }
        #expect(followed.map(\.name).sorted() == ["ATT", "EATT", "PSM 0x0080", "PSM 0x1001"])
        let cut = try statistics(fixturePath("bumble-central-60-100-ns.pcapng"))
        #expect(cut.connections.first?.connectedIn == nil)
    }

    /// EATT and everything tshark does not decode: a capture built from the specification's
    /// layouts, with known times.
    @Test func builtCaptureWithKnownTimes() throws {
        let d = PacketDecoder(statistics: true)
        func at(_ ms: Double) -> CaptureTime {
            let n = Int64((ms * 1000).rounded()) * 1000
            return CaptureTime(seconds: 1_800_000_000 + n / 1_000_000_000, nanoseconds: Int32(n % 1_000_000_000))
        }
        func event(_ code: UInt8, _ params: [UInt8], _ ms: Double) {
            let body = [code, UInt8(params.count)] + params
            _ = d.decode(direction: .received, packet: packet(.event, body), raw: [0x04] + body, time: at(ms))
        }
        func acl(_ dir: Direction, handle: UInt16 = 0x0040, pb: UInt8 = 0x02, _ data: [UInt8], _ ms: Double) {
            let body = aclBody(handle: handle, pb: pb, data)
            _ = d.decode(direction: dir, packet: packet(.acl, body), raw: [0x02] + body, time: at(ms))
        }
        func command(_ opcode: UInt16, _ params: [UInt8], _ ms: Double) {
            let body = [UInt8(opcode & 0xff), UInt8(opcode >> 8), UInt8(params.count)] + params
            _ = d.decode(direction: .sent, packet: packet(.command, body), raw: [0x01] + body, time: at(ms))
        }
        // LE Create Connection refused: Command Status (7.7.15), Command Disallowed (0x0C).
        command(0x200D, [0x60, 0x00, 0x30, 0x00, 0x00, 0x01, 0x66, 0x55, 0x44, 0x33, 0x22, 0xC1, 0x00,
                         0x18, 0x00, 0x28, 0x00, 0x00, 0x00, 0xC8, 0x00, 0x00, 0x00, 0x00, 0x00], 0)
        event(0x0F, [0x0C, 0x01, 0x0D, 0x20], 1)
        // LE Set Advertising Enable → Command Complete (7.7.14) with Status 0x12, twice.
        command(0x200A, [0x01], 2); event(0x0E, [0x01, 0x0A, 0x20, 0x12], 3)
        command(0x200A, [0x01], 4); event(0x0E, [0x01, 0x0A, 0x20, 0x12], 5)
        // A success is not a failure.
        command(0x0C03, [], 6); event(0x0E, [0x01, 0x03, 0x0C, 0x00], 7)
        // LE Connection Complete (7.7.65.1): handle 0x0040, central, random peer C1:22:33:44:55:66.
        event(0x3E, [0x01, 0x00, 0x40, 0x00, 0x00, 0x01, 0x66, 0x55, 0x44, 0x33, 0x22, 0xC1,
                     0x18, 0x00, 0x00, 0x00, 0xC8, 0x00, 0x00], 10)
        // ATT on CID 0x0004: Read Request → Read Response 3 ms; Write Request → Error Response
        // (Write Not Permitted 0x03) 5 ms; Find Information → response 1 ms.
        acl(.sent, l2cap(cid: 4, [0x0A, 0x03, 0x00]), 100)
        acl(.received, l2cap(cid: 4, [0x0B, 0x41, 0x42]), 103)
        acl(.sent, l2cap(cid: 4, [0x12, 0x05, 0x00, 0x01]), 110)
        acl(.received, l2cap(cid: 4, [0x01, 0x12, 0x05, 0x00, 0x03]), 115)
        acl(.sent, l2cap(cid: 4, [0x04, 0x01, 0x00, 0xFF, 0xFF]), 120)
        acl(.received, l2cap(cid: 4, [0x05, 0x01, 0x01, 0x00, 0x00, 0x28]), 121)
        // Handle Value Indication received, Confirmation sent 0.25 ms later (3.4.7.2, 3.4.7.3).
        acl(.received, l2cap(cid: 4, [0x1D, 0x03, 0x00, 0x07]), 130)
        acl(.sent, l2cap(cid: 4, [0x1E]), 130.25)
        // A 30-octet Handle Value Notification in two ACL fragments (PB 0x02 then 0x01).
        let notification = l2cap(cid: 4, [0x1B, 0x10, 0x00] + Array(repeating: 0xAB, count: 27))
        acl(.received, pb: 0x02, Array(notification[..<20]), 140)
        acl(.received, pb: 0x01, Array(notification[20...]), 141)
        // EATT: Credit Based Connection Request (Vol 3 Part A 4.25, code 0x17) on PSM 0x0027 from
        // our CID 0x0041; the response (4.26, code 0x18) gives the peer's 0x0050.
        acl(.sent, l2cap(cid: 5, [0x17, 0x01, 0x0A, 0x00, 0x27, 0x00, 0x64, 0x00, 0x40, 0x00, 0x0A, 0x00, 0x41, 0x00]), 200)
        acl(.received, l2cap(cid: 5, [0x18, 0x01, 0x0A, 0x00, 0x64, 0x00, 0x40, 0x00, 0x0A, 0x00, 0x00, 0x00, 0x50, 0x00]), 201)
        // K-frames (3.4.3: SDU Length, then the SDU): Read Request → Read Response 2 ms;
        // Read Request → Error Response (Read Not Permitted 0x02) 4 ms.
        acl(.sent, l2cap(cid: 0x50, [0x03, 0x00, 0x0A, 0x07, 0x00]), 210)
        acl(.received, l2cap(cid: 0x41, [0x02, 0x00, 0x0B, 0x01]), 212)
        acl(.sent, l2cap(cid: 0x50, [0x03, 0x00, 0x0A, 0x09, 0x00]), 220)
        acl(.received, l2cap(cid: 0x41, [0x05, 0x00, 0x01, 0x0A, 0x09, 0x00, 0x02]), 224)
        // SMP (Vol 3 Part H 3.5.1, 3.5.5): Pairing Request sent, Pairing Failed 0x05 (Pairing Not
        // Supported) received; then Pairing Failed 0x08 (Unspecified Reason) sent.
        acl(.sent, l2cap(cid: 6, [0x01, 0x03, 0x00, 0x01, 0x10, 0x07, 0x07]), 300)
        acl(.received, l2cap(cid: 6, [0x05, 0x05]), 301)
        acl(.sent, l2cap(cid: 6, [0x05, 0x08]), 302)
        // Disconnection Complete (7.7.5), reason Remote User Terminated Connection (0x13).
        event(0x05, [0x00, 0x40, 0x00, 0x13], 1010)
        // A connection whose setup the capture missed: two ACL packets on 0x0041, 500 ms apart.
        acl(.sent, handle: 0x0041, l2cap(cid: 4, [0x52, 0x03, 0x00, 0x01]), 1100)
        acl(.received, handle: 0x0041, l2cap(cid: 4, [0x1B, 0x03, 0x00, 0x02]), 1600)

        let s = try #require(d.statistics())
        #expect(s.commands == 4 && s.events == 6 && s.acl == 21 && s.packets == 31)
        #expect(s.commandFailures.count == 2)
        #expect(s.commandFailures[0].opcode.rawValue == 0x200D && s.commandFailures[0].event == "Command Status"
                && s.commandFailures[0].status.rawValue == 0x0C && s.commandFailures[0].count == 1)
        #expect(s.commandFailures[1].opcode.rawValue == 0x200A && s.commandFailures[1].event == "Command Complete"
                && s.commandFailures[1].status.rawValue == 0x12 && s.commandFailures[1].count == 2)
        #expect(s.commandFailures[0].status.name == "Command Disallowed")
        try #require(s.connections.count == 2)

        let c = s.connections[0]
        #expect(c.handle == 0x0040 && c.transport == "LE" && c.address?.description == "C1:22:33:44:55:66" && c.addressType == .random)
        #expect(c.reason?.rawValue == 0x13 && c.duration == 1_000_000_000, "10 ms to 1010 ms")
        // ACL: the Data_Total_Length of every packet built above, by direction.
        let sentOctets = [3, 4, 5, 1, 14, 5, 5, 7, 2].map { $0 + 4 }.reduce(0, +)
        let receivedOctets = [3, 5, 6, 4].map { $0 + 4 }.reduce(0, +) + 20 + 14 + [14, 4, 7, 2].map { $0 + 4 }.reduce(0, +)
        #expect(c.sent.packets == 9 && c.sent.octets == sentOctets)
        #expect(c.received.packets == 10 && c.received.octets == receivedOctets)
        #expect(CaptureStatistics.bitsPerSecond(octets: c.sent.octets, nanoseconds: c.duration) == sentOctets * 8)

        let att = try #require(c.channels.first { $0.kind == .fixed(cid: 4) })
        #expect(att.sent.packets == 4 && att.sent.octets == 3 + 4 + 5 + 1)
        #expect(att.received.packets == 5 && att.received.octets == 3 + 5 + 6 + 4 + 30, "the fragmented notification is one 30-octet frame")
        let a = try #require(att.att)
        #expect(a.requests == 3 && a.answered == 3)
        #expect(a.latency.minimum == 1_000_000 && a.latency.median == 3_000_000 && a.latency.maximum == 5_000_000)
        #expect(a.indications == 1 && a.confirmed == 1 && a.confirmationLatency.median == 250_000)
        #expect(a.errors.map(\.code.rawValue) == [0x03] && a.errors.map(\.count) == [1])

        let eatt = try #require(c.channels.first { $0.name == "EATT" })
        #expect(eatt.kind == .followed(psm: 0x0027, mode: "enhanced credit based", sentCID: 0x50, receivedCID: 0x41, openedIn: 21))
        #expect(eatt.sent.packets == 2 && eatt.sent.octets == 10 && eatt.received.packets == 2 && eatt.received.octets == 11)
        let ea = try #require(eatt.att)
        #expect(ea.requests == 2 && ea.answered == 2)
        #expect(ea.latency.minimum == 2_000_000 && ea.latency.median == 3_000_000 && ea.latency.maximum == 4_000_000)
        #expect(ea.errors.map(\.code.rawValue) == [0x02])

        #expect(c.smpFailures.count == 2)
        #expect(c.smpFailures[0].direction == .received && c.smpFailures[0].reason.rawValue == 0x05 && c.smpFailures[0].count == 1)
        #expect(c.smpFailures[1].direction == .sent && c.smpFailures[1].reason.rawValue == 0x08)
        #expect(c.smpFailures[0].reason.name == "Pairing Not Supported")

        let late = s.connections[1]
        #expect(late.handle == 0x0041 && late.connectedIn == nil && late.disconnectedIn == nil)
        #expect(late.duration == 500_000_000 && late.sent.packets == 1 && late.received.packets == 1)

        // The JSON object names what docs/cli.md documents.
        let json = try #require(try JSONSerialization.jsonObject(with: Data(s.json.utf8)) as? [String: Any])
        let conns = try #require(json["connections"] as? [[String: Any]])
        #expect(conns.count == 2 && conns[0]["reasonName"] as? String == "Remote User Terminated Connection")
        let chans = try #require(conns[0]["channels"] as? [[String: Any]])
        let attJSON = try #require(chans.first { $0["cid"] as? Int == 4 }?["att"] as? [String: Any])
        let lat = try #require(attJSON["latencyUs"] as? [String: Int])
        #expect(lat == ["count": 3, "min": 1000, "median": 3000, "max": 5000])
        let failures = try #require(json["commandFailures"] as? [[String: Any]])
        #expect(failures.map { $0["statusName"] as? String } == ["Command Disallowed", "Invalid HCI Command Parameters"])
        #expect(s.text.contains("SMP Pairing Failed received: 1 × 0x05 Pairing Not Supported"))
    }

    /// Hostile input: more connections and channels than the bounds, absurd timestamps. No trap,
    /// bounded tables, and what is left out is counted.
    @Test func boundedAgainstHostileCaptures() throws {
        let far = CaptureTime(seconds: .max, nanoseconds: 999_999_999)
        let past = CaptureTime(seconds: .min, nanoseconds: 0)
        let d = PacketDecoder(statistics: true)
        let n = CaptureStatistics.maxConnections + 100
        for h in 0..<n {
            let body = aclBody(handle: UInt16(h), pb: 0x02, l2cap(cid: 4, [0x1B, 0x01, 0x00]))
            _ = d.decode(direction: .received, packet: packet(.acl, body), raw: [0x02] + body, time: h % 2 == 0 ? far : past)
            // Disconnected: the handle's next packet would be a new connection.
            let ev: [UInt8] = [0x05, 0x04, 0x00, UInt8(h & 0xff), UInt8(h >> 8), 0x13]
            _ = d.decode(direction: .received, packet: packet(.event, ev), raw: [0x04] + ev, time: h % 2 == 0 ? past : far)
        }
        let s = try #require(d.statistics())
        #expect(s.connections.count == CaptureStatistics.maxConnections)
        #expect(s.untrackedConnections.packets == n - CaptureStatistics.maxConnections)

        let d2 = PacketDecoder(statistics: true)
        let channels = CaptureStatistics.maxChannelsPerConnection + 10
        for cid in 0x0040..<(0x0040 + channels) {
            let body = aclBody(handle: 0x0040, pb: 0x02, l2cap(cid: UInt16(cid), [0x01]))
            _ = d2.decode(direction: .sent, packet: packet(.acl, body), raw: [0x02] + body, time: far)
        }
        let s2 = try #require(d2.statistics())
        #expect(s2.connections.count == 1)
        #expect(s2.connections[0].channels.count == CaptureStatistics.maxChannelsPerConnection)
        #expect(s2.connections[0].untrackedFrames.packets == 10 && s2.connections[0].untrackedFrames.octets == 10)
        #expect(s2.connections[0].sent.packets == channels, "every ACL packet counted on its connection")
        _ = s2.text
        _ = s2.json
        _ = s.text
        _ = s.json
    }
}
