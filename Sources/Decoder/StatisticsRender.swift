import HCI
import Capture
import ATT
import SMP

// `dump --stats` output: one JSON object (schema in docs/cli.md) or text for a terminal.
// Small (one record per connection and channel), so built as Strings.

extension CaptureStatistics {
    /// The JSON object of `dump --stats --json` (no newline).
    public var json: String {
        var o = JSONObject()
        o.int("packets", packets)
        o.int("commands", commands); o.int("events", events); o.int("acl", acl)
        o.int("sco", sco); o.int("iso", iso); o.int("notes", notes); o.int("malformed", malformed)
        if let first, let last {
            o.string("start", first.iso8601); o.string("end", last.iso8601)
            o.int("durationUs", Self.micros(Self.nanoseconds(last) - Self.nanoseconds(first)))
        }
        o.raw("connections", "[" + connections.map(Self.json).joined(separator: ",") + "]")
        o.raw("commandFailures", "[" + commandFailures.map { f in
            var c = JSONObject()
            c.string("opcode", hexCode(f.opcode.rawValue)); c.string("name", f.opcode.name)
            c.string("event", f.event); c.string("status", hexCode(f.status.rawValue)); c.string("statusName", f.status.name)
            c.int("count", f.count); c.int("firstIn", f.firstIn)
            return c.text
        }.joined(separator: ",") + "]")
        if untrackedConnections.packets > 0 { o.raw("untrackedConnections", Self.json(untrackedConnections, unit: "packets", ns: 0)) }
        return o.text
    }

    private static func json(_ c: Connection) -> String {
        var o = JSONObject()
        o.int("handle", Int(c.handle))
        if let t = c.transport { o.string("transport", t) }
        if let a = c.address { o.string("address", a.description) }
        if let t = c.addressType { o.string("addressType", t.description) }
        if let i = c.connectedIn { o.int("connectedIn", i) }
        if let i = c.disconnectedIn { o.int("disconnectedIn", i) }
        if let r = c.reason { o.string("reason", hexCode(r.rawValue)); o.string("reasonName", r.name) }
        o.string("start", (c.connectedAt ?? c.first).iso8601)
        o.string("end", (c.disconnectedAt ?? c.last).iso8601)
        let ns = c.duration
        o.int("durationUs", micros(ns))
        o.raw("sent", json(c.sent, unit: "packets", ns: ns))
        o.raw("received", json(c.received, unit: "packets", ns: ns))
        if c.unknown.packets > 0 { o.raw("unknownDirection", json(c.unknown, unit: "packets", ns: ns)) }
        o.raw("channels", "[" + c.channels.map(json).joined(separator: ",") + "]")
        if c.untrackedFrames.packets > 0 { o.raw("untrackedFrames", json(c.untrackedFrames, unit: "frames", ns: 0)) }
        if !c.smpFailures.isEmpty {
            o.raw("smpPairingFailed", "[" + c.smpFailures.map { f in
                var s = JSONObject()
                if let d = f.direction { s.string("direction", d == .sent ? "sent" : "received") }
                s.string("reason", hexCode(f.reason.rawValue)); s.string("name", f.reason.name ?? "Reserved"); s.int("count", f.count)
                return s.text
            }.joined(separator: ",") + "]")
        }
        return o.text
    }

    private static func json(_ ch: Channel) -> String {
        var o = JSONObject()
        switch ch.kind {
        case .fixed(let cid):
            o.int("cid", Int(cid))
        case let .followed(psm, mode, sentCID, receivedCID, openedIn):
            if let s = sentCID { o.int("sentCID", Int(s)) }
            if let r = receivedCID { o.int("receivedCID", Int(r)) }
            o.string("psm", hexCode(psm, digits: 4)); o.string("mode", mode); o.int("openedIn", openedIn)
        case let .unfollowed(cid, direction):
            o.int("cid", Int(cid))
            if let d = direction { o.string("direction", d == .sent ? "sent" : "received") }
        }
        o.string("channel", ch.name)
        let ns = nanoseconds(ch.last) - nanoseconds(ch.first)
        o.string("start", ch.first.iso8601); o.string("end", ch.last.iso8601); o.int("durationUs", micros(ns))
        o.raw("sent", json(ch.sent, unit: "frames", ns: ns))
        o.raw("received", json(ch.received, unit: "frames", ns: ns))
        if ch.unknown.packets > 0 { o.raw("unknownDirection", json(ch.unknown, unit: "frames", ns: ns)) }
        if let a = ch.att {
            var t = JSONObject()
            t.int("requests", a.requests); t.int("answered", a.answered)
            if a.latency.count > 0 { t.raw("latencyUs", json(a.latency)) }
            t.int("indications", a.indications); t.int("confirmed", a.confirmed)
            if a.confirmationLatency.count > 0 { t.raw("confirmationLatencyUs", json(a.confirmationLatency)) }
            t.raw("errors", "[" + a.errors.map { e in
                var x = JSONObject()
                x.string("code", hexCode(e.code.rawValue)); x.string("name", e.code.name); x.int("count", e.count)
                return x.text
            }.joined(separator: ",") + "]")
            o.raw("att", t.text)
        }
        return o.text
    }

    private static func json(_ f: Flow, unit: String, ns: Int64) -> String {
        var o = JSONObject()
        o.int(unit, f.packets); o.int("octets", f.octets)
        if let b = bitsPerSecond(octets: f.octets, nanoseconds: ns) { o.int("bitsPerSecond", b) }
        return o.text
    }

    private static func json(_ l: Latency) -> String {
        var o = JSONObject()
        o.int("count", l.count); o.int("min", micros(l.minimum)); o.int("median", micros(l.median)); o.int("max", micros(l.maximum))
        if l.samples < l.count { o.int("medianOfFirst", l.samples) }
        return o.text
    }

    /// Whole microseconds (rounded towards minus infinity).
    static func micros(_ ns: Int64) -> Int { Int(ns >= 0 ? ns / 1000 : (ns - 999) / 1000) }

    // MARK: Text

    /// `dump --stats` for a terminal: one block per connection, a table of its channels.
    public var text: String {
        var out = ""
        func line(_ s: String = "") { out += s + "\n" }
        var head = "\(packets) packets"
        if let first, let last {
            head += " from \(first.iso8601) to \(last.iso8601) (\(Self.seconds(Self.nanoseconds(last) - Self.nanoseconds(first))))"
        }
        line(head)
        line("  \(commands) commands, \(events) events, \(acl) ACL, \(sco) SCO, \(iso) ISO, \(notes) notes; \(malformed) malformed")
        if connections.isEmpty { line(); line("No connections.") }
        for (i, c) in connections.enumerated() {
            line()
            var title = "Connection \(i + 1): handle \(hexCode(c.handle, digits: 4))"
            if let t = c.transport { title += ", \(t)" }
            if let a = c.address { title += ", peer \(a)" + (c.addressType.map { " (\($0))" } ?? "") }
            line(title)
            var life = "  " + (c.connectedIn.map { "connected in #\($0)" } ?? "connection setup not in the capture")
            if let d = c.disconnectedIn {
                life += ", disconnected in #\(d)" + (c.reason.map { " (\(hexCode($0.rawValue)) \($0.name))" } ?? "")
            } else {
                life += ", not disconnected in the capture"
            }
            line(life + "; \(Self.seconds(c.duration))")
            let ns = c.duration
            line("  " + Self.pad("ACL data", 40) + Self.lpad("packets", 9) + Self.lpad("octets", 11) + Self.lpad("throughput", 14))
            for (label, f) in [("sent", c.sent), ("received", c.received), ("no direction", c.unknown)] where label != "no direction" || f.packets > 0 {
                line("    " + Self.pad(label, 38) + Self.row(f, ns: ns))
            }
            if !c.channels.isEmpty {
                line("  " + Self.pad("L2CAP channels", 40) + Self.lpad("frames", 9) + Self.lpad("octets", 11) + Self.lpad("throughput", 14))
            }
            for ch in c.channels {
                let cns = Self.nanoseconds(ch.last) - Self.nanoseconds(ch.first)
                var first = true
                for (label, f) in [("sent", ch.sent), ("received", ch.received), ("no direction", ch.unknown)] where f.packets > 0 {
                    let name = first ? Self.channelTitle(ch) : ""
                    first = false
                    line("    " + Self.pad(name, 28) + Self.pad(label, 10) + Self.row(f, ns: cns))
                }
                if case let .followed(psm, mode, _, _, openedIn) = ch.kind {
                    line("      PSM \(hexCode(psm, digits: 4)), \(mode) mode, opened in #\(openedIn)")
                }
                if let a = ch.att { Self.attLines(a).forEach { line("      " + $0) } }
            }
            if c.untrackedFrames.packets > 0 {
                line("    \(c.untrackedFrames.packets) frames (\(c.untrackedFrames.octets) octets) on channels past the first \(Self.maxChannelsPerConnection)")
            }
            for f in c.smpFailures {
                let d = f.direction.map { $0 == .sent ? "sent" : "received" } ?? "seen"
                line("  SMP Pairing Failed \(d): \(f.count) × \(hexCode(f.reason.rawValue)) \(f.reason.name ?? "Reserved")")
            }
        }
        if untrackedConnections.packets > 0 {
            line()
            line("\(untrackedConnections.packets) ACL packets (\(untrackedConnections.octets) octets) on connections past the first \(Self.maxConnections)")
        }
        line()
        if commandFailures.isEmpty {
            line("HCI command failures: none")
        } else {
            line("HCI command failures:")
            for f in commandFailures {
                line("  \(f.count) × \(f.opcode.name) (\(hexCode(f.opcode.rawValue))): \(f.event) status \(hexCode(f.status.rawValue)) \(f.status.name) (first in #\(f.firstIn))")
            }
        }
        return out
    }

    private static func channelTitle(_ ch: Channel) -> String {
        switch ch.kind {
        case .fixed(let cid): return "\(ch.name) (\(hexCode(cid, digits: 4)))"
        case let .followed(_, _, sentCID, receivedCID, _):
            // The CIDs of frames sent / received: the peer's endpoint / ours.
            let cids = [sentCID, receivedCID].compactMap { $0 }.map { hexCode($0, digits: 4) }.joined(separator: "/")
            return cids.isEmpty ? ch.name : "\(ch.name) (\(cids))"
        case .unfollowed(let cid, _): return "CID \(hexCode(cid, digits: 4)), not followed"
        }
    }

    private static func attLines(_ a: ATTCounts) -> [String] {
        var lines: [String] = []
        var r = "ATT: \(a.requests) requests, \(a.answered) answered"
        if a.latency.count > 0 { r += "; latency " + latencyText(a.latency) }
        lines.append(r)
        if a.indications > 0 {
            var i = "     \(a.indications) indications, \(a.confirmed) confirmed"
            if a.confirmationLatency.count > 0 { i += "; latency " + latencyText(a.confirmationLatency) }
            lines.append(i)
        }
        if !a.errors.isEmpty {
            lines.append("     Error Responses: " + a.errors.map { "\($0.count) × \(hexCode($0.code.rawValue)) \($0.code.name)" }.joined(separator: ", "))
        }
        return lines
    }

    private static func latencyText(_ l: Latency) -> String {
        var s = "min \(millis(l.minimum)), median \(millis(l.median)), max \(millis(l.maximum))"
        if l.samples < l.count { s += " (median of the first \(l.samples))" }
        return s
    }

    private static func row(_ f: Flow, ns: Int64) -> String {
        lpad(String(f.packets), 9) + lpad(String(f.octets), 11) + lpad(bitsPerSecond(octets: f.octets, nanoseconds: ns).map(rate) ?? "-", 14)
    }

    static func rate(_ bps: Int) -> String {
        if bps >= 1_000_000 { return fixed(Double(bps) / 1e6, 2) + " Mbit/s" }
        if bps >= 1000 { return fixed(Double(bps) / 1e3, 1) + " kbit/s" }
        return "\(bps) bit/s"
    }

    static func millis(_ ns: Int64) -> String { fixed(Double(ns) / 1e6, 3) + " ms" }
    static func seconds(_ ns: Int64) -> String { fixed(Double(ns) / 1e9, 6) + " s" }

    private static func fixed(_ v: Double, _ digits: Int) -> String {
        var p = 1.0
        for _ in 0..<digits { p *= 10 }
        let scaled = (abs(v) * p).rounded()
        guard scaled < 9e18 else { return String(v) }
        let n = Int(scaled), whole = n / Int(p), frac = n % Int(p)
        var f = String(frac)
        while f.count < digits { f = "0" + f }
        return (v < 0 ? "-" : "") + "\(whole)" + (digits > 0 ? "." + f : "")
    }

    private static func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s + " " : s + String(repeating: " ", count: n - s.count) }
    private static func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? " " + s : String(repeating: " ", count: n - s.count) + s }
}

/// A JSON object under construction, keys in insertion order.
private struct JSONObject {
    private var parts: [String] = []
    var text: String { "{" + parts.joined(separator: ",") + "}" }

    mutating func raw(_ key: String, _ value: String) { parts.append(Self.quote(key) + ":" + value) }
    mutating func int(_ key: String, _ value: Int) { raw(key, String(value)) }
    mutating func string(_ key: String, _ value: String) { raw(key, Self.quote(value)) }

    static func quote(_ s: String) -> String {
        var b = RenderBuffer()
        b.append(jsonString: s)
        return b.string
    }
}
