// The offline/live decoder behind `ble-hci dump` and `--trace`. It never parses a PDU itself:
// every layer's own codec decodes its bytes and describes them as `[Field]`; this module only
// routes bytes between layers (H4 → HCI → ACL → L2CAP reassembly → ATT / SMP / signaling),
// keeps the state a capture needs (fragments, GATT discovery) and renders the result.
import Foundation
import HCI
import Capture
import Host
import L2CAP
import ATT
import GATT
import SMP

/// One layer of a decoded packet: "hci", "l2cap", "signaling", "att", "smp", "gatt", "monitor"
/// or "note" (the capture reader's word on a record that holds no HCI packet).
public struct DecodedLayer: Sendable, Equatable {
    public var name: String { didSet { kind = LayerKind(name) } }
    public var fields: [Field]
    /// The layer's own octets (`dump --hex`; kept only by a decoder made with `layerOctets`):
    /// hci the HCI packet after the H4 indicator (Vol 4 Part E 5.4), l2cap the whole frame,
    /// basic header included (Vol 3 Part A 3), or the ACL fragment's data for a fragment;
    /// signaling, att and smp their PDU (the SDU reassembled from K-frames for ATT on a
    /// credit-based channel). nil for layers that have none of their own (gatt, notes).
    public var octets: ArraySlice<UInt8>?
    /// The octets of the packet (H4 indicator at 0) that are this layer's (its header and, for
    /// the top layer, its parameters); nil unless the decoder keeps ranges (`fieldRanges`) or
    /// when the layer is not within this one packet (a reassembled frame).
    public var range: Range<Int>?
    /// `name` resolved once, so rendering doesn't compare strings per layer per packet.
    private(set) var kind: LayerKind

    public init(_ name: String, _ fields: [Field], octets: ArraySlice<UInt8>? = nil) {
        self.name = name
        self.fields = fields
        self.octets = octets
        kind = LayerKind(name)
    }
}

/// The layers a decoded packet can have.
enum LayerKind: UInt8, Sendable {
    case hci, l2cap, signaling, att, smp, gatt, monitor, note, other

    init(_ name: String) {
        switch name {
        case "hci": self = .hci
        case "l2cap": self = .l2cap
        case "signaling": self = .signaling
        case "att": self = .att
        case "smp": self = .smp
        case "gatt": self = .gatt
        case "monitor": self = .monitor
        case "note": self = .note
        default: self = .other
        }
    }
}

/// A packet decoded through every layer that applies.
public struct DecodedPacket: Sendable {
    /// 1-based position in the capture or live session.
    public var index: Int
    public var time: CaptureTime
    /// nil when the capture format doesn't say (pcap 187 ACL).
    public var direction: Direction?
    /// CLI.md's `type`: command, acl, sco, event, iso ("monitor" for btmon records that are
    /// not HCI packets, "note" for records the reader skipped, "unknown" for bytes that are not
    /// an H4 packet).
    public var type: String
    /// One line for humans: "ATT Read By Group Type Request", "HCI Command Reset", ...
    public var summary: String
    /// In protocol order (hci, l2cap, then att / smp / signaling, then gatt).
    public var layers: [DecodedLayer]
    /// Why a layer could not decode these bytes (nil when everything decoded).
    public var malformed: String?
    /// The packet's bytes (H4), present when `malformed` is set.
    public var raw: [UInt8]?

    public init(index: Int, time: CaptureTime, direction: Direction?, type: String, summary: String,
                layers: [DecodedLayer], malformed: String? = nil, raw: [UInt8]? = nil) {
        self.index = index
        self.time = time
        self.direction = direction
        self.type = type
        self.summary = summary
        self.layers = layers
        self.malformed = malformed
        self.raw = raw
    }

    /// The fields of layer `name`, or nil when the packet has no such layer.
    public func layer(_ name: String) -> [Field]? { layers.first { $0.name == name }?.fields }
}

/// Decodes the packets of one capture or live session, in order. Stateful: it reassembles
/// L2CAP frames from ACL fragments per (connection handle, direction) and learns the GATT
/// database from discovery to annotate later handles. Packets must be given in capture order.
/// Plain state, not `Sendable`: a user decoding from several threads (the live trace) holds it
/// in a `Mutex`.
public final class PacketDecoder {
    /// At most this many L2CAP frames are being reassembled at once (across handles and
    /// directions); a new one evicts the oldest. A frame is at most 65539 octets (16-bit
    /// length), so reassembly holds at most ~1 MiB.
    public static let maxPendingFrames = 16

    private var nextIndex = 1
    private var reassembly = Reassembly()
    private var gatt = GATTTracker()
    private var channels = ChannelTracker()
    private var summaries = Summaries()
    /// `dump --stats`: nil unless asked for (plain `dump` counts nothing).
    private var collector: StatisticsCollector?
    /// `dump --attributes`: nil unless asked for.
    private var attributeCollector: AttributeCollector?
    /// `dump --hex`: whether each layer keeps its octets (`DecodedLayer.octets`).
    private let keepsOctets: Bool
    /// `dump --html`: whether fields and layers get their octets' ranges (`Field.range`).
    private let keepsRanges: Bool
    /// The reads of the current packet's HCI header (H4 body at 1), while keeping ranges.
    private var headerReads: [FieldReads.Read] = []
    /// The current packet's length with its H4 indicator (the end of its top layer's range).
    private var packetLength = 0

    /// `statistics`: count what `statistics()` reports while decoding. `layerOctets`: keep each
    /// layer's octets in its `DecodedLayer.octets`. `fieldRanges`: give fields and layers the
    /// range of the packet's octets they came from (`Field.range`, `DecodedLayer.range`).
    public init(statistics: Bool = false, layerOctets: Bool = false, attributes: Bool = false, fieldRanges: Bool = false) {
        collector = statistics ? StatisticsCollector() : nil
        attributeCollector = attributes ? AttributeCollector() : nil
        keepsOctets = layerOctets
        keepsRanges = fieldRanges
    }

    /// Runs `parse` (a layer's parser over `root`, which sits at `base` in the packet) and, when
    /// ranges are kept and `base` is known, the reads it made.
    private func parsing<T>(_ root: [UInt8], at base: Int?, _ parse: () -> T) -> (T, [FieldReads.Read]) {
        guard keepsRanges, let base else { return (parse(), []) }
        return FieldReads.record(root, base: base, parse)
    }

    /// What the packets decoded so far carried (nil unless made with `statistics: true`).
    public func statistics() -> CaptureStatistics? {
        return collector?.finished()
    }

    /// The GATT servers the packets decoded so far revealed (nil unless made with `attributes: true`).
    public func attributes() -> [ServerAttributes]? {
        attributeCollector?.finished()
    }

    /// Decodes one capture record (HCI packet or btmon record).
    public func decode(_ record: CaptureRecord) -> DecodedPacket {
        switch record.content {
        case .packet(let result):
            return decode(direction: record.direction, packet: result, raw: record.raw, time: record.time, index: record.number)
        case let .monitor(opcode, name, text):
                nextIndex = record.number + 1
            var f: [Field] = [.int("opcode", opcode), .text("name", name)]
            if let i = record.controllerIndex { f.append(.int("controllerIndex", i)) }
            if let text { f.append(.text("text", text)) }
            collector?.packet(type: "monitor", time: record.time, malformed: false)
            return DecodedPacket(index: record.number, time: record.time, direction: record.direction, type: "monitor",
                                 summary: "Monitor \(name)" + (text.map { ": \($0)" } ?? ""),
                                 layers: [DecodedLayer("monitor", f)])
        case .note(let text):
                nextIndex = record.number + 1
            collector?.packet(type: "note", time: record.time, malformed: false)
            return DecodedPacket(index: record.number, time: record.time, direction: record.direction, type: "note",
                                 summary: "Note: \(text)", layers: [DecodedLayer("note", [.text("text", text)])])
        }
    }

    /// Decodes one HCI packet. `raw` is the H4 bytes (kept for malformed packets); `index`
    /// defaults to one more than the previous packet's.
    public func decode(direction: Direction?, packet: Result<HCIPacket, DecodeError>, raw: [UInt8],
                       time: CaptureTime, index: Int? = nil) -> DecodedPacket {
        let idx = index ?? nextIndex
        nextIndex = idx + 1
        var p = DecodedPacket(index: idx, time: time, direction: direction, type: "unknown", summary: "", layers: [])
        p.layers.reserveCapacity(4)  // hci, l2cap, att, gatt: one allocation, not three
        packetLength = raw.count
        switch packet {
        case .failure(let error):
            if let first = raw.first, let t = HCIPacketType(rawValue: first) { p.type = t.description }
            p.summary = "Malformed \(p.type == "unknown" ? "packet" : p.type)"
            p.malformed = "\(error)"
            p.raw = raw
        case .success(let packet):
            p.type = packet.type.description
            if keepsRanges {
                // The packet's own parser again, over the H4 body, for where its header fields sit.
                let body = Array(raw.dropFirst())
                headerReads = parsing(body, at: 1) { try? HCIPacket(type: packet.type, body: body) }.1
            }
            switch packet {
            case .command(let c): decodeCommand(c, into: &p)
            case .event(let e): decodeEvent(e, into: &p)
            case .acl(let a): decodeACL(a, direction: direction, into: &p)
            case .sco(let body), .iso(let body):
                var f: [Field] = []
                if body.count >= 2 {
                    f.append(.int("handle", (UInt16(body[0]) | UInt16(body[1]) << 8) & 0x0fff))
                }
                f.append(.bytes("data", Array(body.dropFirst(packet.type == .sco ? 3 : 4))))
                p.layers.append(DecodedLayer("hci", f))
                p.summary = packet.type == .sco ? "HCI SCO data" : "HCI ISO data"
            }
        }
        if p.malformed != nil, p.raw == nil { p.raw = raw }
        if keepsOctets, !raw.isEmpty, !p.layers.isEmpty, p.layers[0].kind == .hci {
            p.layers[0].octets = raw[1...]  // the HCI packet after its H4 packet indicator
        }
        collector?.packet(type: p.type, time: time, malformed: p.malformed != nil)
        return p
    }

    // MARK: HCI

    private func decodeCommand(_ c: HCICommandPacket, into p: inout DecodedPacket) {
        let (name, summary) = summaries.command(c.opcode)
        var f: [Field] = [.code("opcode", c.opcode.rawValue), .text("name", name)]
        p.summary = summary
        let (decoded, reads) = parsing(c.parameters, at: 4) { Result { () throws(DecodeError) in try HCICommands.decode(c) } }
        defer {
            if keepsRanges {
                p.layers[p.layers.count - 1].fields.place(headerReads + reads, aliases: ["name": "opcode"])
                p.layers[p.layers.count - 1].range = 1..<packetLength
            }
        }
        do {
            if let cmd = try decoded.get() {
                f += expandAdvertisingData(cmd.fields, keys: Self.commandADKeys)
            } else if let entry = HCICatalog.command(c.opcode) {
                // A command the stack does not send: the catalog's layout (hci-catalog.pdl).
                let d = CatalogLayout.decode(entry.parameters, c.parameters)
                if let problem = d.problem { p.malformed = "\(name): \(problem)" }
                f += d.fields
            } else if !c.parameters.isEmpty {
                f.append(.bytes("parameters", c.parameters))
            }
        } catch {
            p.malformed = "\(name): \(error)"
            f.append(.bytes("parameters", c.parameters))
        }
        p.layers.append(DecodedLayer("hci", f))
    }

    private func decodeEvent(_ e: HCIEventPacket, into p: inout DecodedPacket) {
        let (name, summary) = summaries.event(e.code)
        var f: [Field] = [.code("eventCode", e.code), .text("name", name)]
        p.summary = summary
        let (decoded, reads) = parsing(e.parameters, at: 3) { Result { () throws(DecodeError) in try HCIEvents.decode(e) } }
        var returnReads: [FieldReads.Read] = []
        defer {
            if keepsRanges {
                p.layers[p.layers.count - 1].fields.place(headerReads + reads + returnReads, aliases: ["name": "eventCode", "subevent": "subeventCode"])
                p.layers[p.layers.count - 1].range = 1..<packetLength
            }
        }
        do {
            let ev = try decoded.get()
            if let meta = ev as? LEMetaEvent {
                let t = type(of: meta.subevent)
                let code = meta.subeventCode
                let catalog = meta.subevent is UnknownLESubevent ? HCICatalog.leSubevent(code) : nil
                let subName = meta.subevent is UnknownLESubevent ? HCIEvents.leSubeventName(code: code) : t.name
                f.append(.code("subeventCode", code))
                f.append(.text("subevent", subName))
                p.summary = summaries.leMeta(code: code, summary, subName)
                var sub = meta.subevent.fields
                if let catalog, let unknown = meta.subevent as? UnknownLESubevent {
                    let d = CatalogLayout.decode(catalog.parameters, unknown.parameters)
                    if let problem = d.problem { p.malformed = "\(subName): \(problem)" }
                    sub = d.fields
                }
                if meta.subevent is LEAdvertisingReport || meta.subevent is LEExtendedAdvertisingReport {
                    sub = expandAdvertisingData(sub, keys: Self.reportADKeys)
                }
                f += sub
                // A new link may reuse a handle: forget what the previous one had discovered.
                if collector != nil { countLE(meta.subevent, p) }
                switch meta.subevent {
                case let c as LEConnectionComplete where c.status == .success: forgetConnection(c.connectionHandle)
                case let c as LEEnhancedConnectionComplete: forgetConnection(c.connectionHandle)
                case let c as LEEnhancedConnectionCompleteV2: forgetConnection(c.base.connectionHandle)
                default: break
                }
            } else if let unknown = ev as? UnknownEvent, let d = HCIEvents.catalogFields(code: unknown.code, parameters: unknown.parameters) {
                // An event the stack does not handle: the catalog's layout (hci-catalog.pdl).
                if let problem = d.problem { p.malformed = "\(name): \(problem)" }
                f += d.fields
            } else {
                if let cc = ev as? CommandComplete {
                    // Its own `fields` reads the return parameters, from its copy of them, which
                    // sits at 6 (H4, event header, Num_HCI_Command_Packets, Command_Opcode; Vol 4
                    // Part E 7.7.14).
                    let (fields, r) = parsing(cc.returnParameters, at: 6) { cc.fields }
                    f += fields
                    returnReads = r
                } else {
                    f += ev.fields
                }
                if let cc = ev as? CommandComplete { p.summary = summaries.commandEvent(code: e.code, summary, cc.opcode) }
                if let cs = ev as? CommandStatus { p.summary = summaries.commandEvent(code: e.code, summary, cs.opcode) }
                if let d = ev as? DisconnectionComplete, d.status == .success { forgetConnection(d.connectionHandle) }
                if let c = ev as? ConnectionComplete, c.status == .success { forgetConnection(c.connectionHandle) }
                if collector != nil { count(ev, p) }
            }
        } catch {
            p.malformed = "\(name): \(error)"
            f.append(.bytes("parameters", e.parameters))
        }
        p.layers.append(DecodedLayer("hci", f))
    }

    /// `dump --stats`: connections made and ended, commands that failed.
    private func count(_ ev: any HCIEventParameters, _ p: DecodedPacket) {
        switch ev {
        case let c as ConnectionComplete where c.status == .success:
            collector?.connected(handle: c.connectionHandle, transport: "BR/EDR", address: c.bdAddr, addressType: nil,
                                 index: p.index, time: p.time)
        case let d as DisconnectionComplete where d.status == .success:
            collector?.disconnected(handle: d.connectionHandle, reason: d.reason, index: p.index, time: p.time)
        case let s as CommandStatus where s.status != .success:
            collector?.commandFailure(opcode: s.opcode, event: 0x0F, status: s.status, index: p.index)
        case let c as CommandComplete:
            // Every command's return parameters begin with its Status (Vol 4 Part E 7.1–7.8);
            // the No-Op opcode 0x0000 has none, and vendor commands (OGF 0x3F) are their own.
            if c.opcode.rawValue != 0, c.opcode.ogf != 0x3F, let status = c.returnParameters.first, status != 0 {
                collector?.commandFailure(opcode: c.opcode, event: 0x0E, status: HCIStatus(status), index: p.index)
            }
        default: break
        }
    }

    private func countLE(_ sub: any LEMetaEventParameters, _ p: DecodedPacket) {
        let c: LEEnhancedConnectionComplete?
        switch sub {
        case let l as LEConnectionComplete:
            guard l.status == .success else { return }
            collector?.connected(handle: l.connectionHandle, transport: "LE", address: l.peerAddress,
                                 addressType: l.peerAddressType, index: p.index, time: p.time)
            return
        case let e as LEEnhancedConnectionComplete: c = e
        case let e as LEEnhancedConnectionCompleteV2: c = e.base
        default: c = nil
        }
        guard let c, c.status == .success else { return }
        collector?.connected(handle: c.connectionHandle, transport: "LE", address: c.peerAddress,
                             addressType: c.peerAddressType, index: p.index, time: p.time)
    }

    /// Whether a bytes field named in `keys` is among `fields`, at any depth.
    private static func hasBytesField(_ fields: [Field], named keys: Set<String>) -> Bool {
        for i in fields.indices {
            switch fields[i].value {
            case .bytes where keys.contains(fields[i].name): return true
            case .object(let inner): if hasBytesField(inner, named: keys) { return true }
            case .list(let items):
                for item in items {
                    if case .object(let inner) = item, hasBytesField(inner, named: keys) { return true }
                }
            default: break
            }
        }
        return false
    }

    /// The fields naming advertising data, expanded into AD structures.
    private static let commandADKeys: Set<String> = ["advertisingData", "scanResponseData"]
    private static let reportADKeys: Set<String> = ["data"]

    private func forgetConnection(_ handle: UInt16) {
        gatt.reset(connection: handle)
        attributeCollector?.reset(connection: handle)
        reassembly.reset(handle: handle)
        channels.reset(handle: handle)
    }

    /// Adds the AD structures (from the Host layer's AdvertisingData codec) after every field
    /// named in `keys`, at any depth.
    private func expandAdvertisingData(_ fields: [Field], keys: Set<String>) -> [Field] {
        // Most commands carry no advertising data: return their fields as they are (no copy).
        guard Self.hasBytesField(fields, named: keys) else { return fields }
        var out: [Field] = []
        out.reserveCapacity(fields.count + 1)
        for field in fields {
            switch field.value {
            case .bytes(let b) where keys.contains(field.name):
                out.append(field)
                out += AdvertisingData(parsing: b).describe(
                    companyName: { AssignedNumbers.companyName($0) },
                    uuidName: { AssignedNumbers.name(of: $0) },
                    appearanceName: { AssignedNumbers.appearanceName($0) })
            case .list(let items):
                var f = field
                f.value = .list(items.map { item in
                    if case .object(let inner) = item { return .object(expandAdvertisingData(inner, keys: keys)) }
                    return item
                })
                out.append(f)
            case .object(let inner):
                var f = field
                f.value = .object(expandAdvertisingData(inner, keys: keys))
                out.append(f)
            default:
                out.append(field)
            }
        }
        return out
    }

    // MARK: ACL and L2CAP

    private func decodeACL(_ a: HCIACLPacket, direction: Direction?, into p: inout DecodedPacket) {
        var hci = DecodedLayer("hci", [
            .int("handle", a.handle), .text("pb", a.boundary.description), .int("bc", a.broadcast),
            .int("length", a.data.count),
        ])
        if keepsRanges {
            hci.fields.place(headerReads, aliases: ["pb": "handle", "bc": "handle", "length": "dataTotalLength"])
            hci.range = 1..<5
        }
        p.layers.append(hci)
        p.summary = "ACL data"
        collector?.acl(handle: a.handle, direction: direction, octets: a.data.count, time: p.time)
        switch reassembly.add(a, direction: direction, index: p.index) {
        case let .malformed(reason, dropped):
            p.malformed = reason
            if let dropped { p.layers.append(DecodedLayer("l2cap", [.text("droppedIncompleteFrame", dropped)])) }
            p.summary = "Malformed L2CAP"
        case let .fragment(number, firstIndex, received, total, dropped):
            // Octets so far and in all, counting the frame's 4-octet basic header (its `length`
            // field, shown on the completing packet, counts only the payload).
            var f: [Field] = [.int("fragment", number), .int("frameStart", firstIndex), .int("octetsSoFar", received)]
            if let total { f.append(.int("frameOctets", total, note: "4-octet basic header + \(total - 4)-octet payload")) }
            if let dropped { f.append(.text("droppedIncompleteFrame", dropped)) }
            var fragment = DecodedLayer("l2cap", f, octets: keepsOctets ? a.data[...] : nil)
            if keepsRanges { fragment.range = 5..<packetLength }
            p.layers.append(fragment)
            p.summary = "L2CAP fragment \(number) of frame starting at #\(firstIndex)"
        case let .frame(bytes, indexes, dropped):
            decodeFrame(bytes, indexes: indexes, dropped: dropped, handle: a.handle, direction: direction, into: &p)
        }
    }

    private func decodeFrame(_ bytes: [UInt8], indexes: [Int], dropped: String?, handle: UInt16,
                             direction: Direction?, into p: inout DecodedPacket) {
        let frame: L2CAPFrame
        // A frame reassembled from several packets has no place in this one: no ranges.
        let base: Int? = indexes.count > 1 ? nil : 5
        let (decoded, reads) = parsing(bytes, at: base) { Result { () throws(DecodeError) in try L2CAPFrame.decode(bytes) } }
        do {
            frame = try decoded.get()
        } catch {
            p.malformed = "L2CAP: \(error)"
            p.summary = "Malformed L2CAP"
            return
        }
        if collector != nil { countFrame(frame, handle: handle, direction: direction, time: p.time) }
        let frameOctets: ArraySlice<UInt8>? = keepsOctets ? bytes[...] : nil
        var l2: [Field] = frame.fields
        l2.place(reads, aliases: ["cid": "channelId", "channel": "channelId"])
        let payloadBase = base.map { $0 + 4 }
        if indexes.count > 1 {
            l2.append(Field("fragments", .list(indexes.map { .int($0) }), note: "packets that made this frame"))
        }
        if let dropped { l2.append(.text("droppedIncompleteFrame", dropped)) }
        switch frame.cid {
        case .att:
            p.layers.append(l2capLayer(l2, frameOctets, base))
            decodeATT(frame.payload, at: payloadBase, handle: handle, direction: direction, bearer: 0, into: &p)
        case .leSignaling:
            p.layers.append(l2capLayer(l2, frameOctets, base))
            let index = p.index
            appendLayer("signaling", malformed: "L2CAP signaling", octets: frame.payload, at: payloadBase, into: &p) { () throws(DecodeError) in
                let cmd = try SignalingCommand.decode(frame.payload)
                channels.observe(cmd.body, identifier: cmd.identifier, handle: handle, direction: direction, index: index)
                return (cmd.fields, "L2CAP \(cmd.code.name ?? "Unknown signaling command (\(hexCode(cmd.code.rawValue)))")")
            }
        case .signaling:
            p.layers.append(l2capLayer(l2, frameOctets, base))
            decodeACLUSignaling(frame.payload, at: payloadBase, handle: handle, direction: direction, into: &p)
        case .smp, .bredrSMP:
            p.layers.append(l2capLayer(l2, frameOctets, base))
            appendLayer("smp", malformed: "SMP", octets: frame.payload, at: payloadBase, into: &p) { () throws(DecodeError) in
                let pdu = try SMPPDU.decode(frame.payload)
                collector?.smp(pdu, direction: direction)
                return (pdu.fields, "SMP \(pdu.name)")
            }
        default:
            let key = ChannelTracker.Key(handle: handle, direction: direction, cid: frame.cid.rawValue)
            guard let ch = channels.channel(handle: handle, direction: direction, cid: frame.cid.rawValue) else {
                l2.append(Field("payload", .bytes(frame.payload), range: payloadBase.map { $0..<packetLength }))
                p.layers.append(l2capLayer(l2, frameOctets, base, whole: true))
                p.summary = "L2CAP \(frame.cid.description)"
                return
            }
            decodeChannel(frame.payload, channel: ch, key: key, l2: l2, frameOctets: frameOctets, base: base, into: &p)
        }
    }

    /// The L2CAP layer of a frame at `base` in the packet: its range is the basic header
    /// (Vol 3 Part A 3.1), plus `extra` header octets, or the whole frame when it is the top layer.
    private func l2capLayer(_ fields: [Field], _ octets: ArraySlice<UInt8>?, _ base: Int?, extra: Int = 0,
                            whole: Bool = false) -> DecodedLayer {
        var layer = DecodedLayer("l2cap", fields, octets: octets)
        if keepsRanges, let base { layer.range = base..<(whole ? packetLength : base + 4 + extra) }
        return layer
    }

    /// `dump --stats`: the frame's channel as the channel tracking knows it.
    private func countFrame(_ frame: L2CAPFrame, handle: UInt16, direction: Direction?, time: CaptureTime) {
        let cid = frame.cid.rawValue
        let ch: StatisticsCollector.FrameChannel
        if cid < 0x0040 {
            ch = .fixed(cid: cid, name: frame.cid.name ?? "CID \(hexCode(cid))")
        } else if let c = channels.channel(handle: handle, direction: direction, cid: cid) {
            ch = .followed(serial: c.serial, psm: c.psm, mode: c.mode.name, cid: cid,
                           name: PSM(c.psm).name ?? "PSM \(hexCode(c.psm, digits: 4))", openedIn: c.openedIn)
        } else {
            ch = .unfollowed(cid: cid)
        }
        collector?.frame(handle: handle, direction: direction, channel: ch, octets: frame.payload.count, time: time)
    }

    /// A frame on a followed dynamic channel: its PSM and mode in the L2CAP layer, then the SDU
    /// decoded by the PSM's protocol (ATT on 0x001F and 0x0027), else shown as octets.
    private func decodeChannel(_ payload: [UInt8], channel ch: ChannelTracker.Channel, key: ChannelTracker.Key,
                               l2 fields: [Field], frameOctets: ArraySlice<UInt8>?, base: Int?, into p: inout DecodedPacket) {
        let psm = PSM(ch.psm)
        let protocolName = psm.name ?? "PSM \(hexCode(ch.psm, digits: 4))"
        var l2 = fields.filter { $0.name != "channel" }
        l2.append(.text("channel", protocolName))
        l2.append(.code("psm", ch.psm, note: psm.name))
        l2.append(.text("mode", ch.mode.name))
        l2.append(.int("openedIn", ch.openedIn))
        let sdu: [UInt8]
        // Where the SDU starts in this packet: after the basic header, and the 2-octet SDU
        // Length of a K-frame that carries a whole SDU (Vol 3 Part A 3.4.3); nil when the SDU
        // came in several frames.
        var sduBase = base.map { $0 + 4 }
        var sduHeader = 0
        switch ch.mode {
        case .framed:
            l2.append(Field("payload", .bytes(payload), note: "I-/S-frames of this mode are not decoded",
                            range: base.map { $0 + 4..<packetLength }))
            p.layers.append(l2capLayer(l2, frameOctets, base, whole: true))
            p.summary = "L2CAP \(protocolName) (\(ch.mode.name))"
            return
        case .basic:
            sdu = payload
        case .leCreditBased, .enhancedCreditBased:
            switch channels.kFrame(payload, key: key, index: p.index) {
            case let .malformed(reason):
                l2.append(.bytes("payload", payload))
                p.layers.append(l2capLayer(l2, frameOctets, base, whole: true))
                p.malformed = "L2CAP K-frame: \(reason)"
                p.summary = "Malformed L2CAP K-frame"
                return
            case let .partial(number, firstIndex, received, length):
                if number == 1 { l2.append(.int("sduLength", length)) }
                l2 += [.int("sduFragment", number), .int("sduStart", firstIndex), .int("sduOctetsSoFar", received)]
                p.layers.append(l2capLayer(l2, frameOctets, base, whole: true))
                p.summary = "L2CAP \(protocolName) K-frame \(number) of SDU starting at #\(firstIndex)"
                return
            case let .sdu(bytes, length, frames):
                if frames.isEmpty {
                    l2.append(Field("sduLength", .int(length), range: sduBase.map { $0..<$0 + 2 }))
                    sduBase = sduBase.map { $0 + 2 }
                    sduHeader = 2
                } else {
                    l2.append(Field("sduFrames", .list(frames.map { .int($0) }), note: "packets that made this SDU"))
                    sduBase = nil
                }
                sdu = bytes
            }
        }
        switch psm {
        case .att, .eatt:
            p.layers.append(l2capLayer(l2, frameOctets, base, extra: sduHeader))
            decodeATT(sdu, at: sduBase, handle: key.handle, direction: key.direction, bearer: ch.serial, into: &p)
        default:
            l2.append(Field("sdu", .bytes(sdu), range: sduBase.map { $0..<packetLength }))
            p.layers.append(l2capLayer(l2, frameOctets, base, whole: true))
            p.summary = "L2CAP \(protocolName)"
        }
    }

    /// An ATT PDU on the fixed channel (`bearer` 0) or a followed channel (its serial).
    private func decodeATT(_ payload: [UInt8], at base: Int?, handle: UInt16, direction: Direction?, bearer: Int,
                           into p: inout DecodedPacket) {
        let (decoded, reads) = parsing(payload, at: base) { Result { () throws(DecodeError) in try ATTPDU.decode(payload) } }
        do {
            let pdu = try decoded.get()
            var att = DecodedLayer("att", pdu.fields, octets: keepsOctets ? payload[...] : nil)
            if keepsRanges, let base {
                att.fields.place(reads, aliases: ["name": "opcode", "type": "uuid"])
                att.range = base..<base + payload.count
            }
            p.layers.append(att)
            p.summary = summaries.att(pdu.opcode)
            let (g, answered) = gatt.process(pdu, connection: handle, direction: direction, bearer: bearer, time: p.time)
            collector?.att(pdu, direction: direction, answered: answered, time: p.time)
            attributeCollector?.att(pdu, connection: handle, direction: direction, request: answered?.pdu)
            if let g, !g.isEmpty {
                p.layers.append(DecodedLayer("gatt", g))
            }
        } catch {
            var f: [Field] = []
            var name = "ATT PDU"
            if let first = payload.first {
                let op = ATTOpcode(first)
                name = op.name ?? "ATT opcode \(hexCode(first))"
                f = [.code("opcode", first), .text("name", op.name ?? "Unknown")]
            }
            p.layers.append(DecodedLayer("att", f, octets: keepsOctets ? payload[...] : nil))
            p.malformed = "ATT \(name): \(error)"
            p.summary = "Malformed ATT \(name)"
        }
    }

    /// The BR/EDR signaling channel: every command of the C-frame (one layer; several commands
    /// are listed under `commands`), each followed for the channels it opens or closes.
    private func decodeACLUSignaling(_ payload: [UInt8], at base: Int?, handle: UInt16, direction: Direction?,
                                     into p: inout DecodedPacket) {
        let ((commands, error), reads) = parsing(payload, at: base) { ACLUSignalingCommand.decodeAll(payload) }
        for c in commands {
            switch c.body {
            case .shared(let b): channels.observe(b, identifier: c.identifier, handle: handle, direction: direction, index: p.index)
            case .aclu(let b): channels.observe(b, identifier: c.identifier, handle: handle, direction: direction, index: p.index)
            }
        }
        let names = commands.map { $0.code.name ?? "Unknown signaling command (\(hexCode($0.code.rawValue)))" }
        if !commands.isEmpty {
            var layer = DecodedLayer("signaling", commands.count == 1 ? commands[0].fields : [Field("commands", .list(commands.map { .object($0.fields) }))],
                                     octets: keepsOctets ? payload[...] : nil)
            if keepsRanges, let base {
                layer.fields.place(reads)
                layer.range = base..<base + payload.count
            }
            p.layers.append(layer)
        }
        p.summary = "L2CAP " + (names.isEmpty ? "signaling" : names.joined(separator: ", "))
        if let error {
            p.malformed = "L2CAP signaling: \(error)"
            p.summary = "Malformed L2CAP signaling" + (names.isEmpty ? "" : " after " + names.joined(separator: ", "))
        }
    }

    /// A payload that makes one layer: its fields and the packet's summary, or, when it does not
    /// decode, the packet marked malformed with the cause (`what` names the protocol).
    private func appendLayer(_ layer: String, malformed what: String, octets: [UInt8], at base: Int?, into p: inout DecodedPacket,
                             _ decode: () throws(DecodeError) -> (fields: [Field], summary: String)) {
        let (decoded, reads) = parsing(octets, at: base) { Result(catching: decode) }
        do {
            let (fields, summary) = try decoded.get()
            var l = DecodedLayer(layer, fields, octets: keepsOctets ? octets[...] : nil)
            if keepsRanges, let base {
                l.fields.place(reads, aliases: ["name": "code"])
                l.range = base..<base + octets.count
            }
            p.layers.append(l)
            p.summary = summary
        } catch {
            p.malformed = "\(what): \(error)"
            p.summary = "Malformed \(what)"
        }
    }
}

// MARK: - Summaries

/// Packet summaries by opcode, built once each: formatting "ATT Read Request" or "HCI Event
/// Command Complete (LE Set Scan Enable)" for every packet was a measurable part of `dump`
/// (issue 14). Bounded: at most 256 ATT opcodes, 256 event codes, 65536 command opcodes and
/// 2 × 65536 command events (Command Complete, Command Status).
struct Summaries {
    private var attSummaries: [String?] = Array(repeating: nil, count: 256)
    private var eventNames: [(name: String, summary: String)?] = Array(repeating: nil, count: 256)
    private var commands: [UInt16: (name: String, summary: String)] = [:]
    private var commandEvents: [UInt32: String] = [:]
    private var leMetaSummaries: [String?] = Array(repeating: nil, count: 256)

    mutating func att(_ opcode: ATTOpcode) -> String {
        if let s = attSummaries[Int(opcode.rawValue)] { return s }
        let s = "ATT \(opcode.name ?? "Unknown (\(hexCode(opcode.rawValue)))")"
        attSummaries[Int(opcode.rawValue)] = s
        return s
    }

    mutating func command(_ opcode: HCIOpcode) -> (name: String, summary: String) {
        if let c = commands[opcode.rawValue] { return c }
        let name = opcode.name
        let c = (name, "HCI Command \(name)")
        commands[opcode.rawValue] = c
        return c
    }

    mutating func event(_ code: UInt8) -> (name: String, summary: String) {
        if let e = eventNames[Int(code)] { return e }
        let name = HCIEvents.name(code: code)
        let e = (name, "HCI Event \(name)")
        eventNames[Int(code)] = e
        return e
    }

    /// LE Meta's `summary` followed by ": subevent name".
    mutating func leMeta(code: UInt8, _ summary: String, _ name: String) -> String {
        if let s = leMetaSummaries[Int(code)] { return s }
        let s = summary + ": \(name)"
        leMetaSummaries[Int(code)] = s
        return s
    }

    /// Event `code`'s `summary` (Command Complete's or Command Status's) followed by
    /// " (command name)".
    mutating func commandEvent(code: UInt8, _ summary: String, _ opcode: HCIOpcode) -> String {
        let key = UInt32(opcode.rawValue) | UInt32(code) << 16
        if let s = commandEvents[key] { return s }
        let s = summary + " (\(opcode.name))"
        commandEvents[key] = s
        return s
    }
}

// MARK: - Reassembly

/// ACL fragments → L2CAP frames, per (connection handle, direction), bounded: the host's own
/// `L2CAPReassembler` per key, plus the packet indexes each frame came from.
struct Reassembly {
    struct Key: Hashable {
        var handle: UInt16
        var direction: Direction?
    }

    struct Pending {
        var reassembler = L2CAPReassembler()
        var indexes: [Int] = []
    }

    enum Outcome {
        /// A whole frame (header + payload) and the packet indexes it came from (empty when it
        /// came whole in the current packet: no array per packet for the common case).
        case frame([UInt8], indexes: [Int], dropped: String?)
        case fragment(number: Int, firstIndex: Int, received: Int, total: Int?, dropped: String?)
        case malformed(String, dropped: String?)
    }

    private var pending: [Key: Pending] = [:]

    mutating func reset(handle: UInt16) {
        pending = pending.filter { $0.key.handle != handle }
    }

    mutating func add(_ a: HCIACLPacket, direction: Direction?, index: Int) -> Outcome {
        let key = Key(handle: a.handle, direction: direction)
        if a.boundary.isStart {
            var dropped: String? = nil
            if let old = pending.removeValue(forKey: key) {
                let r = old.reassembler
                dropped = "frame from packet(s) \(old.indexes.map(String.init).joined(separator: ",")) was incomplete (\(r.pendingCount) of \(r.expectedLength.map(String.init) ?? "?") octets)"
            }
            var p = Pending()
            switch p.reassembler.push(a.data, start: true) {
            case .frame(let f): return .frame(f, indexes: [], dropped: dropped)
            case .dropped(let reason), .replaced(let reason, _): return .malformed(reason, dropped: dropped)
            case .pending: p.indexes = [index]
            }
            if pending.count >= PacketDecoder.maxPendingFrames,
               let oldest = pending.min(by: { $0.value.indexes[0] < $1.value.indexes[0] }) {
                pending.removeValue(forKey: oldest.key)
            }
            pending[key] = p
            return .fragment(number: 1, firstIndex: index, received: a.data.count, total: p.reassembler.expectedLength, dropped: dropped)
        }
        guard var p = pending.removeValue(forKey: key) else {
            return .malformed("continuing ACL fragment without the start of an L2CAP frame on handle \(a.handle)", dropped: nil)
        }
        p.indexes.append(index)
        switch p.reassembler.push(a.data, start: false) {
        case .frame(let f): return .frame(f, indexes: p.indexes, dropped: nil)
        case .dropped(let reason), .replaced(let reason, _):
            return .malformed("ACL fragments from packets \(p.indexes.map(String.init).joined(separator: ",")): \(reason)", dropped: nil)
        case .pending: break
        }
        pending[key] = p
        return .fragment(number: p.indexes.count, firstIndex: p.indexes[0], received: p.reassembler.pendingCount,
                         total: p.reassembler.expectedLength, dropped: nil)
    }
}
