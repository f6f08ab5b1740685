// `dump --html OUT.html`: the capture explorer, one self-contained page. This file builds the
// page's model (packets with their layer trees and byte ranges, the flow's steps and folded
// runs, request ↔ response links, the GATT tree) as JSON embedded in the page; the page's CSS
// and script are in ExplorerAssets.swift. Nothing is parsed here: the fields, ranges, steps and
// attributes are what the decoder, FlowBuilder and AttributeCollector produced.
import HCI
import Capture
import ATT
import GATT

/// Collects decoded packets (in capture order) and renders the explorer page.
public struct ExplorerPage {
    /// The tooltip of a field (of `layer`, of `packet`), when there is one.
    public typealias Explain = (_ field: Field, _ layer: DecodedLayer, _ packet: DecodedPacket) -> String?

    /// `dump --explain`'s text as the tooltip: the field's meaning, unit, section and
    /// CoreBluetooth counterpart, then its value decoded, a line each.
    public static func fieldExplanations(_ field: Field, _ layer: DecodedLayer, _ packet: DecodedPacket) -> String? {
        explanation(of: field, in: layer, of: packet).map { ([$0.summary] + $0.decoded).joined(separator: "\n") }
    }

    private let title: String
    private let explain: Explain?
    private var packetsJSON = ""
    private var count = 0
    private var flow = FlowBuilder()
    private var links = ExchangeLinks()
    private var start: CaptureTime?

    public init(title: String, explain: Explain? = nil) {
        self.title = title
        self.explain = explain
        packetsJSON.reserveCapacity(1 << 16)
    }

    /// Adds one packet; `raw` is its record's bytes (H4 indicator first), which its fields'
    /// ranges index.
    public mutating func add(_ p: DecodedPacket, raw: [UInt8]) {
        if start == nil { start = p.time }
        flow.add(p)
        links.add(p)
        if count > 0 { packetsJSON += ",\n" }
        count += 1
        var o = "{\"i\":\(p.index),\"t\":"
        o += String(describing: relativeSeconds(p.time))
        o += ",\"d\":\"\(p.direction == .sent ? "s" : p.direction == .received ? "r" : "")\",\"y\":"
        appendJSONString(p.type, to: &o)
        o += ",\"s\":"
        appendJSONString(p.summary, to: &o)
        if let m = p.malformed { o += ",\"m\":"; appendJSONString(m, to: &o) }
        o += ",\"x\":\"\(raw.hex)\",\"l\":["
        for (n, layer) in p.layers.enumerated() {
            if n > 0 { o += "," }
            o += "{\"n\":"
            appendJSONString(layer.name, to: &o)
            if let r = layer.range { o += ",\"r\":[\(r.lowerBound),\(r.upperBound)]" }
            o += ",\"f\":"
            appendFields(layer.fields, layer: layer, packet: p, to: &o)
            o += "}"
        }
        o += "]}"
        packetsJSON += o
    }

    private func relativeSeconds(_ t: CaptureTime) -> Double {
        guard let s = start else { return 0 }
        let ns = (t.seconds - s.seconds) * 1_000_000_000 + Int64(t.nanoseconds) - Int64(s.nanoseconds)
        return Double(ns / 1000) / 1_000_000
    }

    private func appendFields(_ fields: [Field], layer: DecodedLayer, packet: DecodedPacket, to o: inout String) {
        o += "["
        for (n, f) in fields.enumerated() {
            if n > 0 { o += "," }
            o += "{\"n\":"
            appendJSONString(f.name, to: &o)
            switch f.value {
            case .list(let items):
                o += ",\"v\":\"\(items.count) item\(items.count == 1 ? "" : "s")\",\"c\":["
                for (k, item) in items.enumerated() {
                    if k > 0 { o += "," }
                    if case .object(let inner) = item {
                        o += "{\"n\":\"[\(k)]\",\"v\":\"\""
                        if let r = ReadPlacer.span(inner.map(\.range)) { o += ",\"r\":[\(r.lowerBound),\(r.upperBound)]" }
                        o += ",\"c\":"
                        appendFields(inner, layer: layer, packet: packet, to: &o)
                        o += "}"
                    } else {
                        o += "{\"n\":\"[\(k)]\",\"v\":"
                        appendJSONString(item.display, to: &o)
                        o += "}"
                    }
                }
                o += "]"
            case .object(let inner):
                o += ",\"v\":\"\",\"c\":"
                appendFields(inner, layer: layer, packet: packet, to: &o)
            default:
                o += ",\"v\":"
                appendJSONString(f.value.display, to: &o)
            }
            if let note = f.note { o += ",\"o\":"; appendJSONString(note, to: &o) }
            if let r = f.range { o += ",\"r\":[\(r.lowerBound),\(r.upperBound)]" }
            if let e = explain?(f, layer, packet) { o += ",\"e\":"; appendJSONString(e, to: &o) }
            o += "}"
        }
        o += "]"
    }

    /// The page: `servers` is what `PacketDecoder(attributes: true)` revealed.
    public func render(servers: [ServerAttributes]) -> String {
        let diagram = flow.finish()
        var model = "{\"title\":"
        appendJSONString(title, to: &model)
        model += ",\"lanes\":["
        for (n, t) in (["host", "controller"] + diagram.peers).enumerated() {
            if n > 0 { model += "," }
            appendJSONString(t, to: &model)
        }
        model += "],\"packets\":[\n" + packetsJSON + "\n],\"arrows\":{"
        var first = true
        for step in diagram.steps {
            for a in step.arrows {
                if !first { model += "," }
                first = false
                model += "\"\(a.index)\":[\(FlowText.column(a.from)),\(FlowText.column(a.to)),"
                appendJSONString(a.layer, to: &model)
                model += "]"
            }
        }
        model += "},\"rows\":["
        for (n, row) in FlowSVG.rows(diagram).enumerated() {
            if n > 0 { model += "," }
            switch row {
            case let .step(number, step):
                model += "[\"s\",\(number),"
                appendJSONString(step.kind.rawValue, to: &model)
                model += ","
                appendJSONString(step.coreBluetooth, to: &model)
                model += "]"
            case .arrow(let a):
                model += "[\"p\",\(a.index)]"
            case let .folded(count, cycle, firstIndex, lastIndex, hidden):
                model += "[\"f\",\(count),\(firstIndex),\(lastIndex),"
                appendJSONString(cycle.map(\.shape).joined(separator: " + "), to: &model)
                model += ",[" + hidden.map { String($0.index) }.joined(separator: ",") + "]]"
            case let .repeatedSteps(steps, times, firstIndex, lastIndex):
                model += "[\"r\",\(steps),\(times),\(firstIndex),\(lastIndex)]"
            }
        }
        model += "],\"links\":{"
        model += links.pairs.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",")
        // The controller's link-layer state after each packet that changed it (FlowLinkState.swift).
        model += "},\"states\":["
        for (n, change) in diagram.linkStates.enumerated() {
            if n > 0 { model += "," }
            model += "[\(change.index),"
            appendJSONString(change.from.description, to: &model)
            model += ","
            appendJSONString(change.to.description, to: &model)
            model += "]"
        }
        model += "],\"gatt\":"
        model += gattJSON(servers)
        model += "}"
        return ExplorerAssets.page(title: title, model: Self.scriptSafe(model))
    }

    /// The GATT tree of each server, as services → characteristics → descriptors.
    private func gattJSON(_ servers: [ServerAttributes]) -> String {
        func name(_ u: BluetoothUUID) -> String { AssignedNumbers.name(of: u).map { "\($0) (\(u))" } ?? u.description }
        var o = "["
        for (n, server) in servers.enumerated() {
            if n > 0 { o += "," }
            o += "{\"connection\":\(server.connection),\"side\":\""
            o += server.serverDirection.map { $0 == .received ? "remote" : "local" } ?? ""
            o += "\",\"services\":["
            for (k, s) in server.tree.enumerated() {
                if k > 0 { o += "," }
                o += "{\"n\":"
                appendJSONString((s.service.primary ? "Primary " : "Secondary ") + "service " + name(s.service.uuid), to: &o)
                o += ",\"h\":[\(s.service.startHandle),\(s.service.endHandle)],\"c\":["
                for (j, c) in s.characteristics.enumerated() {
                    if j > 0 { o += "," }
                    let ch = c.characteristic
                    var label = "Characteristic " + name(ch.uuid) + " [" + ch.properties.names.joined(separator: ", ") + "]"
                    if let v = server.values[ch.valueHandle] { label += " = " + (v.isEmpty ? "(empty)" : v.hex) }
                    o += "{\"n\":"
                    appendJSONString(label, to: &o)
                    o += ",\"h\":[\(ch.declarationHandle),\(ch.valueHandle)],\"c\":["
                    o += c.descriptors.map { d in
                        var s = "{\"n\":"
                        var label = "Descriptor " + name(d.uuid)
                        if let v = server.values[d.handle] { label += " = " + (v.isEmpty ? "(empty)" : v.hex) }
                        appendJSONString(label, to: &s)
                        return s + ",\"h\":[\(d.handle)]}"
                    }.joined(separator: ",")
                    o += "]}"
                }
                o += "]}"
            }
            o += "]}"
        }
        return o + "]"
    }

    /// JSON that cannot end the `<script>` element it sits in: `<`, `>` and `&` only occur in
    /// strings, where their \u escapes mean the same (a device named "</script>" stays text).
    static func scriptSafe(_ json: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(json.utf8.count + 64)
        for byte in json.utf8 {
            switch byte {
            case UInt8(ascii: "<"): out += Array("\\u003c".utf8)
            case UInt8(ascii: ">"): out += Array("\\u003e".utf8)
            case UInt8(ascii: "&"): out += Array("\\u0026".utf8)
            default: out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Request ↔ response pairs, by packet index (both ways). ATT: one outstanding request per
/// direction of a bearer, answered by the next response or Error Response in the other
/// direction, and an indication by the next confirmation (Core v5.4 Vol 3 Part F 3.3.2,
/// 3.4.7.2-3). HCI: a command by the next Command Complete or Command Status carrying its
/// opcode (Vol 4 Part E 4.4, 7.7.14, 7.7.15).
struct ExchangeLinks {
    private(set) var pairs: [Int: Int] = [:]
    private struct Key: Hashable { var handle: Int; var sent: Bool; var indication: Bool }
    private var outstanding: [Key: Int] = [:]
    private var commands: [String: Int] = [:]

    mutating func add(_ p: DecodedPacket) {
        if let hci = p.layer("hci") {
            if p.type == "command", let op = code(hci, "opcode") {
                commands[op] = p.index
            } else if p.type == "event", let op = code(hci, "commandOpcode"), let cmd = commands.removeValue(forKey: op) {
                link(cmd, p.index)
            }
        }
        guard let att = p.layer("att"), let dir = p.direction, let op = code(att, "opcode"),
              let raw = UInt8(op.dropFirst(2), radix: 16), let handle = int(p.layer("hci"), "handle") else { return }
        let opcode = ATTOpcode(raw)
        let sent = dir == .sent
        switch opcode.info?.kind {
        case .request?:
            outstanding[Key(handle: handle, sent: sent, indication: false)] = p.index
        case .indication?:
            outstanding[Key(handle: handle, sent: sent, indication: true)] = p.index
        case .response?, .error?:
            if let req = outstanding.removeValue(forKey: Key(handle: handle, sent: !sent, indication: false)) { link(req, p.index) }
        case .confirmation?:
            if let ind = outstanding.removeValue(forKey: Key(handle: handle, sent: !sent, indication: true)) { link(ind, p.index) }
        default:
            break
        }
    }

    private mutating func link(_ a: Int, _ b: Int) {
        pairs[a] = b
        pairs[b] = a
    }

    private func code(_ fields: [Field], _ name: String) -> String? {
        guard let f = fields.first(where: { $0.name == name }), case .code(let c) = f.value else { return nil }
        return c
    }

    private func int(_ fields: [Field]?, _ name: String) -> Int? {
        guard let f = fields?.first(where: { $0.name == name }), case .int(let v) = f.value else { return nil }
        return v
    }
}
