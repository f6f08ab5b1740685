import Foundation
import Testing
import HCI
import Capture
import TestSupport
@testable import Decoder

// The HCI catalog (Tools/pdl/hci-catalog.pdl) against tshark: one sample packet per entry (a
// command, its Command Complete when it has return parameters, an event, an LE subevent), built
// here from the entry's layout, written to a btsnoop file and decoded by both. Per sample, the
// name must be tshark's (modulo the renames below) and every parameter must start and end where
// one of tshark's fields does (tshark may group neighbours into one field: X and Y of a P-256 key);
// integers, addresses and status codes must have tshark's values. What tshark 4.0 does not
// decode is compared with the specification's parameter tables instead (`specOnly`).

/// tshark 4.0's names that are older names of the same command or event: Core v5.3 renamed
/// Master/Slave (Vol 1 Part A 2.x inclusive language: "Link Key Selection" was "Master Link Key",
/// "Peripheral" was "Slave", "Implementation Under Test" was "Device Under Test"); the others are
/// names the specification used before Core 1.2 / 4.0, which tshark keeps.
private let tsharkNames: [String: String] = [
    "Link Key Selection": "Master Link Key",
    "Link Key Type Changed": "Master Link Key Complete",
    "Write Local Name": "Change Local Name",
    "Read Transmit Power Level": "Read Tx Power Level",
    "Read Synchronous Flow Control Enable": "Read SCO Flow Control Enable",
    "Write Synchronous Flow Control Enable": "Write SCO Flow Control Enable",
    "Set Controller To Host Flow Control": "Set Host Controller To Host Flow Control",
    "Read Inquiry Response Transmit Power Level": "Read Inquiry Response Tx Power Level",
    "Write Inquiry Transmit Power Level": "Write Inquiry Tx Power Level",
    "Read LE Host Support": "Read LE Host Supported",
    "Enable Implementation Under Test Mode": "Enable Device Under Test Mode",
    "Connection Request": "Connect Request",
    "Read Remote Supported Features Complete": "Read Remote Supported Features",
    // hci.pdl's (the stack's own) that tshark 4.0 names by older names: Core v5.3 "Connection
    // Complete" / "Disconnection Complete" are tshark's "Connect Complete" / "Disconnect Complete".
    "Connection Complete": "Connect Complete",
    "Disconnection Complete": "Disconnect Complete",
]

/// Samples where tshark 4.0 disagrees with the specification; our layout follows the section.
/// Key: "cmd"/"ret"/"evt"/"sub" and the code.
private let tsharkDisagrees: [String: String] = [
    // Core v5.4 Vol 4 Part E 7.1.47: BD_ADDR, Page_Scan_Repetition_Mode, Clock_Offset (9 octets);
    // tshark reads past them and reports the packet malformed.
    "cmd 0x043F": "Truncated Page",
    // 7.5.6: the return parameters end with Accuracy (2 octets); tshark 4.0 stops after Clock and
    // reports the 2 octets as malformed.
    "ret 0x1407": "Read Clock",
    // 7.3.82: the return parameters begin with Status, then Bluetooth_Rx_Priority_Assert_Offset...;
    // tshark 4.0 reads the first offset from the Status octet, one octet early.
    "ret 0x0C70": "Set MWS Signaling",
    // 7.5.11: Num_Transports, Transport_Layer[i] and Num_Baud_Rates[i], then To_MWS_Baud_Rate[k] and
    // From_MWS_Baud_Rate[k] for the k = sum of Num_Baud_Rates[i] baud rates after all transports;
    // tshark 4.0 reads the baud rates inside each transport's item (its own sub-buffer), so its
    // positions are not the packet's. Compared with 7.5.11 in `specOnly`.
    "ret 0x140C": "Get MWS Transport Layer Configuration",
]

/// tshark 4.0 has no dissector for these (it names them "Unknown" or, for 0x207B, names it but
/// does not decode its parameters), nor for Android's vendor commands (AOSP HCI Requirements):
/// their parameters' sizes from the specification's tables, in wire order, for the samples built
/// here (a count octet of 1, a length octet of 3, a pattern length of 2).
private let specOnly: [String: [Int]] = [
    // Core v5.4 Vol 4 Part E 7.3.100 Set Ecosystem Base Interval: Interval.
    "cmd 0x0C82": [2],
    // 7.3.101 Configure Data Path: Data_Path_Direction, Data_Path_ID, Vendor_Specific_Config_Length, _Config.
    "cmd 0x0C83": [1, 1, 1, 3],
    // 7.3.102 Set Min Encryption Key Size: Min_Encryption_Key_Size.
    "cmd 0x0C84": [1],
    // 7.4.8 Read Local Supported Codecs [v2]: Num_Supported_Standard_Codecs, Standard_Codec_ID[i],
    // Standard_Codec_Transport[i], Num_Supported_Vendor_Specific_Codecs, Vendor_Specific_Codec_ID[i] (4),
    // Vendor_Specific_Codec_Transport[i].
    "cmd 0x100D": [],
    "ret 0x100D": [1, 1, 1, 1, 4, 1],
    // 7.4.10 Read Local Supported Codec Capabilities: Codec_ID (5), Logical_Transport_Type, Direction;
    // returns Num_Codec_Capabilities, then per capability its length and octets.
    "cmd 0x100E": [5, 1, 1],
    "ret 0x100E": [1, 1, 3],
    // 7.4.11 Read Local Supported Controller Delay: Codec_ID, Logical_Transport_Type, Direction,
    // Codec_Configuration_Length, Codec_Configuration; returns Min_/Max_Controller_Delay (3 each).
    "cmd 0x100F": [5, 1, 1, 1, 3],
    "ret 0x100F": [3, 3],
    // 7.5.11 Get MWS Transport Layer Configuration (returns): Num_Transports, Transport_Layer[0],
    // Num_Baud_Rates[0], then To_MWS_Baud_Rate[k] and From_MWS_Baud_Rate[k] (4 each; two here).
    "ret 0x140C": [1, 1, 1, 4, 4, 4, 4],
    // 7.8.29 LE Transmitter Test [v4]: TX_Channel, Test_Data_Length, Packet_Payload, PHY, CTE_Length,
    // CTE_Type, Switching_Pattern_Length, Antenna_IDs[i], TX_Power_Level.
    "cmd 0x207B": [1, 1, 1, 1, 1, 1, 1, 2, 1],
    // Core v6.0 Vol 4 Part E 7.8.53 LE Set Extended Advertising Parameters [v2]: the [v1] parameters
    // (1, 2, 3, 3, 1, 1, 1, 6, 1, 1, 1, 1, 1, 1, 1), Primary_Advertising_PHY_Options,
    // Secondary_Advertising_PHY_Options; returns Selected_TX_Power.
    "cmd 0x207F": [1, 2, 3, 3, 1, 1, 1, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1],
    "ret 0x207F": [1],
    // Core v5.4 7.8.125 LE Set Periodic Advertising Subevent Data: Advertising_Handle, Num_Subevents,
    // Subevent[i], Response_Slot_Start[i], Response_Slot_Count[i], Subevent_Data_Length[i], Subevent_Data[i].
    "cmd 0x2082": [1, 1, 1, 1, 1, 1, 3],
    "ret 0x2082": [1],
    // 7.8.126 LE Set Periodic Advertising Response Data: Sync_Handle, Request_Event, Request_Subevent,
    // Response_Subevent, Response_Slot, Response_Data_Length, Response_Data.
    "cmd 0x2083": [2, 2, 1, 1, 1, 1, 3],
    "ret 0x2083": [2],
    // 7.8.127 LE Set Periodic Sync Subevent: Sync_Handle, Periodic_Advertising_Properties,
    // Num_Subevents_To_Sync (2 here), Subevent[i].
    "cmd 0x2084": [2, 2, 1, 2],
    "ret 0x2084": [2],
    // 7.8.66 LE Extended Create Connection [v2]: Advertising_Handle, Subevent, Initiator_Filter_Policy,
    // Own_Address_Type, Peer_Address_Type, Peer_Address, Initiating_PHYs, then 8 × 2 octets per PHY
    // (two PHYs: Initiating_PHYs 0x05 here).
    "cmd 0x2085": [1, 1, 1, 1, 1, 6, 1] + Array(repeating: 2, count: 16),
    // 7.8.61 LE Set Periodic Advertising Parameters [v2]: Advertising_Handle, Interval_Min, Interval_Max,
    // Properties, Num_Subevents, Subevent_Interval, Response_Slot_Delay, Response_Slot_Spacing,
    // Num_Response_Slots; returns Advertising_Handle.
    "cmd 0x2086": [1, 2, 2, 2, 1, 1, 1, 1, 1],
    "ret 0x2086": [1],
    // 7.7.65.14 LE Periodic Advertising Sync Established [v2]: Status, Sync_Handle, Advertising_SID,
    // Advertiser_Address_Type, Advertiser_Address, Advertiser_PHY, Periodic_Advertising_Interval,
    // Advertiser_Clock_Accuracy, Num_Subevents, Subevent_Interval, Response_Slot_Delay, Response_Slot_Spacing.
    "sub 0x0024": [1, 2, 1, 1, 6, 1, 2, 1, 1, 1, 1, 1],
    // 7.7.65.15 LE Periodic Advertising Report [v2]: Sync_Handle, TX_Power, RSSI, CTE_Type,
    // Periodic_Event_Counter, Subevent, Data_Status, Data_Length, Data.
    "sub 0x0025": [2, 1, 1, 1, 2, 1, 1, 1, 3],
    // 7.7.65.24 LE Periodic Advertising Sync Transfer Received [v2]: Status, Connection_Handle,
    // Service_Data, Sync_Handle, Advertising_SID, Advertiser_Address_Type, Advertiser_Address,
    // Advertiser_PHY, Periodic_Advertising_Interval, Advertiser_Clock_Accuracy, Num_Subevents,
    // Subevent_Interval, Response_Slot_Delay, Response_Slot_Spacing.
    "sub 0x0026": [1, 2, 2, 2, 1, 1, 6, 1, 2, 1, 1, 1, 1, 1],
    // 7.7.65.36 LE Periodic Advertising Subevent Data Request: Advertising_Handle, Subevent_Start,
    // Subevent_Data_Count.
    "sub 0x0027": [1, 1, 1],
    // 7.7.65.37 LE Periodic Advertising Response Report: Sync_Handle, Subevent, Tx_Status, Num_Responses,
    // then per response TX_Power, RSSI, CTE_Type, Response_Slot, Data_Status, Data_Length, Data.
    "sub 0x0028": [2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3],
    // AOSP HCI Requirements, LE_Get_Vendor_Capabilities_Command: no parameters; returns
    // max_advt_instances, offloaded_resolution_of_private-address, total_scan_results_storage (2),
    // max_irk_list_sz, filtering_support, max_filter, activity_energy_info_support, then the fields
    // later versions add (4 here).
    "cmd 0xFD53": [],
    "ret 0xFD53": [1, 1, 2, 1, 1, 1, 1, 4],
    // LE_Multi_Advt_Command, LE_Batch_Scan_Command, LE_APCF_Command: the sub-command opcode, then its
    // parameters; the return: Status, the sub-command opcode (and its results).
    "cmd 0xFD54": [1, 4], "ret 0xFD54": [1],
    "cmd 0xFD56": [1, 4], "ret 0xFD56": [1, 4],
    "cmd 0xFD57": [1, 4], "ret 0xFD57": [1, 4],
    // LE_Get_Controller_Activity_Energy_Info: returns total_tx_time_ms, total_rx_time_ms,
    // total_idle_time_ms, total_energy_used (4 each).
    "cmd 0xFD59": [], "ret 0xFD59": [4, 4, 4, 4],
    // LE_Extended_Scan_Params: LE_Ex_Scan_Type, LE_Ex_Scan_Interval (4), LE_Ex_Scan_Window (4),
    // Own_Address_Type, LE_Ex_Scan_Filter_Policy.
    "cmd 0xFD5A": [1, 4, 4, 1, 1],
    // Controller_Debug_Info: no parameters.
    "cmd 0xFD5B": [],
]

/// tshark's expert messages about a sample's values rather than its layout.
private let valueExperts = [
    // Connection Packet Type Changed (7.7.29): tshark checks the packet type against the link type of
    // an earlier Connection Complete, which the sample has none of.
    "Bad Link type, should be ACL or SCO",
]

/// One parameter of a sample: where it is in the parameters and how many octets it has.
struct SampleLeaf: Equatable {
    var name: String
    var offset: Int
    var size: Int
    var isRest: Bool
}

/// A sample of a catalog layout: octets the specification allows, and where each parameter is.
/// Counts are 1 (a list's count octet, any Num_ parameter: the specification makes some of them
/// exactly 1, Extended Inquiry Result's Num_Responses for one), the octets a count or length
/// parameter governs 2, a PHY bitmask 0x05 (two PHYs); a length-prefixed datum is an AD structure
/// (Flags, Core Specification Supplement Part A 1.3: 02 01 06); octet strings are zeros.
struct Sample {
    var bytes: [UInt8] = []
    var leaves: [SampleLeaf] = []
    private var next: UInt8 = 0x11
    private var elements = 1

    /// `elements`: how many elements a list has (its count octet or count parameter).
    static func make(_ layout: [CatalogParameter], elements: Int = 1) -> Sample {
        var s = Sample()
        s.elements = elements
        var values: [String: Int] = [:]
        s.add(layout, &values)
        return s
    }

    private mutating func value(_ n: Int) -> [UInt8] {
        // Odd octets below 0x80: never a zero count, never negative.
        var out: [UInt8] = []
        for _ in 0..<n {
            out.append((next & 0x7F) | 1)
            next = next &+ 2
        }
        return out
    }

    private mutating func leaf(_ name: String, _ octets: [UInt8], rest: Bool = false) {
        leaves.append(SampleLeaf(name: name, offset: bytes.count, size: octets.count, isRest: rest))
        bytes += octets
    }

    private static func governed(_ layout: [CatalogParameter], elements: Int) -> [String: Int] {
        var out: [String: Int] = [:]
        for p in layout {
            switch p.type {
            case .counted(let f, _): out[f] = 2
            case .list(.field(let f), _): out[f] = elements
            case .list(.phys(let f), _): out[f] = 0x05
            default: break
            }
        }
        return out
    }

    private mutating func add(_ layout: [CatalogParameter], _ values: inout [String: Int]) {
        let governed = Self.governed(layout, elements: elements)
        for p in layout {
            let n = p.name
            func int(_ size: Int) {
                var v: [UInt8]
                if let g = governed[n] {
                    v = (0..<size).map { UInt8(truncatingIfNeeded: g >> (8 * $0)) }
                } else if size == 1, n.lowercased().hasPrefix("num") {
                    v = [1]
                } else if n == "filterType" {
                    v = [0x01]  // Set Event Filter (7.3.3): Inquiry Result filter, condition below
                } else {
                    v = value(size)
                }
                values[n] = v.enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
                leaf(n, v)
            }
            switch p.type {
            case .u8, .i8: int(1)
            case .u16, .i16: int(2)
            case .u24: int(3)
            case .u32: int(4)
            case .u64: int(8)
            case .status: leaf(n, [0x00])
            case .handle: leaf(n, [0x01, 0x00])
            case .address: leaf(n, value(6))
            case .bytes(let k): leaf(n, Array(repeating: 0, count: k))
            case .text(let k): leaf(n, Array("abc".utf8) + Array(repeating: 0, count: k - 3))
            case .data:
                leaf(n + "Length", [3])
                leaf(n, [0x02, 0x01, 0x06])
            case .rest:
                switch n {
                // Loopback Command (7.7.25): the looped-back command packet, here Reset (0x0C03, 7.3.2).
                case "hciCommandPacket": leaf(n, [0x03, 0x0C, 0x00], rest: true)
                // Set Event Filter (7.3.3): Filter_Condition_Type 0x00, a new device responded.
                case "filterCondition": leaf(n, [0x00], rest: true)
                default: leaf(n, value(4), rest: true)
                }
            case let .counted(f, times): leaf(n, Array(repeating: 0, count: (values[f] ?? 0) * times))
            case let .list(count, items):
                let elements: Int
                switch count {
                case .inline(let c):
                    leaf(c, [UInt8(self.elements)])
                    values[c] = self.elements
                    elements = self.elements
                case .field(let f): elements = values[f] ?? 0
                case .phys(let f): elements = (values[f] ?? 0).nonzeroBitCount
                case .remaining: elements = 2
                }
                for _ in 0..<elements {
                    var inner = values
                    add(items, &inner)
                }
            }
        }
    }
}

/// One sample packet: which entry, what kind, and where its parameters begin in the H4 frame.
private struct SamplePacket {
    var key: String
    var name: String
    var sample: Sample
    var packet: HCIPacket
    var direction: Direction
    /// Offset of the parameters in tshark's frame (after the H4 indicator and headers).
    var base: Int
    var layout: [CatalogParameter]
}

private func samplePackets(elements: Int) -> [SamplePacket] {
    var out: [SamplePacket] = []
    func key(_ kind: String, _ code: UInt16) -> String { "\(kind) 0x\(String(format: "%04X", code))" }
    for e in HCICatalog.allCommands {
        let s = Sample.make(e.parameters, elements: elements)
        out.append(SamplePacket(key: key("cmd", e.code), name: e.name, sample: s,
                                packet: .command(HCICommandPacket(opcode: HCIOpcode(rawValue: e.code), parameters: s.bytes)),
                                direction: .sent, base: 4, layout: e.parameters))
        if !e.returnParameters.isEmpty {
            let r = Sample.make(e.returnParameters, elements: elements)
            let params = [1, UInt8(e.code & 0xFF), UInt8(e.code >> 8), 0x00] + r.bytes
            out.append(SamplePacket(key: key("ret", e.code), name: e.name, sample: r,
                                    packet: .event(HCIEventPacket(code: 0x0E, parameters: params)),
                                    direction: .received, base: 7, layout: e.returnParameters))
        }
    }
    for e in HCICatalog.allEvents {
        let s = Sample.make(e.parameters, elements: elements)
        out.append(SamplePacket(key: key("evt", e.code), name: e.name, sample: s,
                                packet: .event(HCIEventPacket(code: UInt8(e.code), parameters: s.bytes)),
                                direction: .received, base: 3, layout: e.parameters))
    }
    for e in HCICatalog.allLESubevents {
        let s = Sample.make(e.parameters, elements: elements)
        out.append(SamplePacket(key: key("sub", e.code), name: e.name, sample: s,
                                packet: .event(HCIEventPacket(code: 0x3E, parameters: [UInt8(e.code)] + s.bytes)),
                                direction: .received, base: 4, layout: e.parameters))
    }
    return out
}

/// A field of tshark's PDML: its name, shown text, position in the frame, size and raw value.
private struct PDMLField {
    var name: String
    var showname: String
    var show: String
    var pos: Int
    var size: Int
    /// The field's octets in wire order (PDML's `unmaskedvalue` for a bit field, else `value`).
    var value: String
}

private func attribute(_ line: Substring, _ name: String) -> String? {
    guard let r = line.range(of: " \(name)=\"") else { return nil }
    let rest = line[r.upperBound...]
    guard let end = rest.firstIndex(of: "\"") else { return nil }
    return String(rest[..<end])
}

/// tshark's PDML of `path`: per frame, its fields and the proto lines' shownames.
private func pdml(_ path: String) throws -> [(fields: [PDMLField], protos: [String])] {
    let data = try Tshark.output(["-r", path, "-T", "pdml"])
    var frames: [(fields: [PDMLField], protos: [String])] = []
    for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
        let l = line.drop { $0 == " " }
        if l.hasPrefix("<packet>") { frames.append(([], [])) }
        guard !frames.isEmpty else { continue }
        if l.hasPrefix("<proto ") { frames[frames.count - 1].protos.append(attribute(l, "showname") ?? "") }
        guard l.hasPrefix("<field ") else { continue }
        frames[frames.count - 1].fields.append(PDMLField(
            name: attribute(l, "name") ?? "", showname: attribute(l, "showname") ?? "", show: attribute(l, "show") ?? "",
            pos: Int(attribute(l, "pos") ?? "") ?? -1, size: Int(attribute(l, "size") ?? "") ?? 0,
            value: attribute(l, "unmaskedvalue") ?? attribute(l, "value") ?? ""))
    }
    return frames
}

/// A name without case, punctuation, spaces and "[v1]".
private func normalized(_ s: String) -> String {
    String(s.lowercased().replacingOccurrences(of: "[v1]", with: "").unicodeScalars
        .filter { CharacterSet.alphanumerics.contains($0) }.map(Character.init))
}

/// `fields` flattened in order (a list's elements' fields in place of the list).
private func leaves(_ fields: [Field]) -> [Field] {
    fields.flatMap { f -> [Field] in
        if case .list(let items) = f.value {
            return items.flatMap { item -> [Field] in
                if case .object(let inner) = item { return leaves(inner) }
                return []
            }
        }
        return [f]
    }
}

/// The name tshark gives the sample's command, event or subevent.
private func tsharkName(_ s: SamplePacket, _ frame: (fields: [PDMLField], protos: [String])) -> String? {
    func shown(_ field: String, after prefix: String) -> String? {
        guard let f = frame.fields.first(where: { $0.name == field }), f.showname.hasPrefix(prefix) else { return nil }
        let rest = f.showname.dropFirst(prefix.count)
        return rest.range(of: " (0x").map { String(rest[..<$0.lowerBound]) } ?? String(rest)
    }
    switch s.key.prefix(3) {
    case "cmd":
        let prefix = "Bluetooth HCI Command - "
        return frame.protos.first { $0.hasPrefix(prefix) }.map { String($0.dropFirst(prefix.count)) }
    case "ret": return shown("bthci_evt.opcode", after: "Command Opcode: ")
    case "evt": return shown("bthci_evt.code", after: "Event Code: ")
    default: return shown("bthci_evt.le_meta_subevent", after: "Sub Event: ")
    }
}

@Suite struct CatalogTsharkTests {
    /// With one element per list, then two (the element-by-element order of Vol 4 Part E 5.2).
    @Test(arguments: [1, 2]) func everyCatalogEntryIsNamedAndLaidOutAsTsharkDoes(elements: Int) throws {
        let samples = samplePackets(elements: elements)
        let path = "/tmp/ble-hci-catalog-\(getpid())-\(elements).btsnoop"
        defer { unlink(path) }
        let writer = try CaptureWriter.open(path: path)
        let start = Date(timeIntervalSince1970: 1_790_000_000)
        for (i, s) in samples.enumerated() { writer.write(s.packet, direction: s.direction, time: start.addingTimeInterval(Double(i))) }
        writer.close()
        #expect(writer.failure == nil)
        let frames = try pdml(path)
        try #require(frames.count == samples.count, "tshark read \(frames.count) frames of \(samples.count)")

        var problems: [String] = []
        var comparedWithTshark = 0, comparedWithSpec = 0
        for (s, frame) in zip(samples, frames) {
            // Our decoder: the catalog's layout over the sample gives one field per sample parameter.
            let decoded = CatalogLayout.decode(s.layout, s.sample.bytes)
            if decoded.problem != nil { problems.append("\(s.key) \(s.name): we report \(decoded.problem!)") }
            let ours = leaves(decoded.fields)
            if ours.count != s.sample.leaves.count {
                problems.append("\(s.key) \(s.name): \(ours.count) fields decoded for \(s.sample.leaves.count) parameters")
                continue
            }
            if let sizes = specOnly[s.key] {
                comparedWithSpec += 1
                // The table's sizes are for one element per list.
                if elements != 1 { continue }
                let mine = s.sample.leaves.map(\.size)
                if mine != sizes { problems.append("\(s.key) \(s.name): sizes \(mine), the specification's \(sizes)") }
                continue
            }
            if tsharkDisagrees[s.key] != nil { continue }
            comparedWithTshark += 1
            var issues: [String] = []
            let theirs = tsharkName(s, frame)
            let expected = tsharkNames[s.name] ?? s.name
            // Core v5.3 renamed Slave to Peripheral; tshark 4.0 keeps the old word.
            let renamed = theirs?.replacingOccurrences(of: "Slave", with: "Peripheral")
            if theirs.map(normalized) != normalized(expected) && renamed.map(normalized) != normalized(expected) { issues.append("name: tshark \(theirs ?? "none")") }
            let experts = frame.fields.filter { $0.name == "_ws.expert.message" || $0.name == "_ws.malformed" }
                .filter { f in !valueExperts.contains { f.showname.contains($0) } }
            if !experts.isEmpty { issues.append("tshark: \(experts.map(\.showname))") }
            let params = frame.fields.filter { $0.size > 0 && $0.pos >= s.base && !$0.name.hasPrefix("frame") && !$0.name.hasPrefix("hci_h4") }
            let bounds = Set(s.sample.leaves.map(\.offset) + s.sample.leaves.map { $0.offset + $0.size })
            for (leaf, field) in zip(s.sample.leaves, ours) where !leaf.isRest && !leaf.name.hasPrefix("reserved") && leaf.size > 0 {
                let exact = params.filter { $0.pos - s.base == leaf.offset && $0.size == leaf.size }
                let grouped = params.contains { f in
                    let a = f.pos - s.base, z = a + f.size
                    return a <= leaf.offset && leaf.offset + leaf.size <= z && bounds.contains(a) && bounds.contains(z)
                }
                if exact.isEmpty && !grouped {
                    issues.append("\(leaf.name) at \(leaf.offset), \(leaf.size) octets: no tshark field there")
                    continue
                }
                // Values: integers as tshark reads the octets (little-endian), addresses and codes as it shows them.
                guard let t = exact.first(where: { !$0.value.isEmpty }) else { continue }
                let octets = stride(from: 0, to: t.value.count - 1, by: 2).compactMap { i -> UInt8? in
                    let a = t.value.index(t.value.startIndex, offsetBy: i)
                    return UInt8(t.value[a..<t.value.index(a, offsetBy: 2)], radix: 16)
                }
                let raw = octets.enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
                switch field.value {
                case .int(let v):
                    let signed = raw - (1 << (8 * leaf.size))
                    if leaf.size <= 4, v != raw, v != signed { issues.append("\(leaf.name): ours \(v), tshark octets \(t.value)") }
                case .text(let a) where leaf.size == 6:
                    if a.lowercased() != t.show.lowercased() { issues.append("\(leaf.name): ours \(a), tshark \(t.show)") }
                case .code(let c) where leaf.size <= 4:
                    if Int(c.dropFirst(2), radix: 16) != raw { issues.append("\(leaf.name): ours \(c), tshark octets \(t.value)") }
                default: break
                }
            }
            if !issues.isEmpty { problems.append("\(s.key) \(s.name): " + issues.joined(separator: "; ")) }
        }
        #expect(problems.isEmpty, "\(problems.count) disagreements:\n\(problems.joined(separator: "\n"))")
        // Every entry was compared with one oracle or the other.
        #expect(comparedWithTshark + comparedWithSpec + tsharkDisagrees.count
                    - tsharkDisagrees.keys.filter { specOnly[$0] != nil }.count == samples.count)
        #expect(comparedWithTshark >= 400)  // (401 before LE Read Local Resolvable Address moved to hci.pdl)
        // The spec-only table names only samples that exist.
        let keys = Set(samples.map(\.key))
        #expect(Set(specOnly.keys).subtracting(keys).isEmpty)
        #expect(Set(tsharkDisagrees.keys).subtracting(keys).isEmpty)
    }

    /// The issue's target on the fixtures (captures of Bumble and of ble-hci): every command, event
    /// and LE subevent tshark names, `dump` names the same (modulo the renames above); none is Unknown.
    @Test(arguments: ["bumble-central.btsnoop", "bumble-peripheral.btsnoop", "bumble-channels.btsnoop", "ble-hci-demo.pcap",
                      "bumble-central-notes.pklg", "bumble-channels-le.pklg"])
    func fixturesAreNamedAsTsharkNamesThem(_ fixture: String) throws {
        let path = fixturePath(fixture)
        let ours = try decodeCapture(path)
        let theirs = try pdml(path)
        try #require(ours.count == theirs.count)
        var compared = 0
        var problems: [String] = []
        func same(_ mine: String?, _ tshark: String?) -> Bool {
            guard let mine, let tshark else { return mine == nil && tshark == nil }
            let expected = tsharkNames[mine] ?? mine
            return normalized(expected) == normalized(tshark) || normalized(expected) == normalized(tshark.replacingOccurrences(of: "Slave", with: "Peripheral"))
        }
        func shown(_ frame: (fields: [PDMLField], protos: [String]), _ field: String, after prefix: String) -> String? {
            guard let f = frame.fields.first(where: { $0.name == field }), f.showname.hasPrefix(prefix) else { return nil }
            let rest = f.showname.dropFirst(prefix.count)
            return rest.range(of: " (0x").map { String(rest[..<$0.lowerBound]) } ?? String(rest)
        }
        for (p, frame) in zip(ours, theirs) {
            guard let hci = p.layer("hci") else { continue }
            let name: String? = hci.first { $0.name == "name" }.flatMap { if case .text(let s) = $0.value { return s }; return nil }
            var pairs: [(String?, String?)] = []
            if p.type == "command" {
                pairs.append((name, shown(frame, "bthci_cmd.opcode", after: "Command Opcode: ")))
            } else if p.type == "event" {
                pairs.append((name, shown(frame, "bthci_evt.code", after: "Event Code: ")))
                if let sub = hci.first(where: { $0.name == "subevent" }), case .text(let s) = sub.value {
                    pairs.append((s, shown(frame, "bthci_evt.le_meta_subevent", after: "Sub Event: ")))
                }
                if let op = hci.first(where: { $0.name == "commandOpcode" }) {
                    pairs.append((op.note, shown(frame, "bthci_evt.opcode", after: "Command Opcode: ")))
                }
            }
            for (mine, tshark) in pairs {
                compared += 1
                if !same(mine, tshark) { problems.append("#\(p.index): ours \(mine ?? "none"), tshark \(tshark ?? "none")") }
                if mine?.hasPrefix("Unknown") == true { problems.append("#\(p.index): \(mine!)") }
            }
        }
        #expect(compared > 50)
        #expect(problems.isEmpty, "\(fixture):\n\(problems.joined(separator: "\n"))")
    }

    /// The three samples the earlier catalog got wrong, by their sections.
    @Test func loopbackExtendedInquiryResultAndMWSTransportLayout() throws {
        // 7.7.25 Loopback Command: HCI_Command_Packet, the whole command packet (header included).
        let loopback = try #require(HCICatalog.event(0x19))
        #expect(loopback.name == "Loopback Command")
        let reset: [UInt8] = [0x03, 0x0C, 0x00]
        #expect(CatalogLayout.decode(loopback.parameters, reset) == CatalogDecoding(fields: [.bytes("hciCommandPacket", reset)], problem: nil))
        // 7.7.38 Extended Inquiry Result: Num_Responses (1), BD_ADDR, Page_Scan_Repetition_Mode, Reserved,
        // Class_Of_Device (3), Clock_Offset (2), RSSI, Extended_Inquiry_Response (240): 255 octets.
        let eir = try #require(HCICatalog.event(0x2F))
        let sample = Sample.make(eir.parameters)
        #expect(sample.bytes.count == 255)
        #expect(sample.leaves.map(\.size) == [1, 6, 1, 1, 3, 2, 1, 240])
        // 7.5.11: one transport with two baud rates, then the two (To, From) pairs.
        let mws = try #require(HCICatalog.command(HCIOpcode(rawValue: 0x140C)))
        let ret: [UInt8] = [0x01, 0x01, 0x02] + [0x10, 0, 0, 0, 0x20, 0, 0, 0] + [0x30, 0, 0, 0, 0x40, 0, 0, 0]
        let d = CatalogLayout.decode(mws.returnParameters, ret)
        #expect(d.problem == nil)
        #expect(values(named: "toMWSBaudRate", in: d.fields) == [.int(0x10), .int(0x30)])
        #expect(values(named: "fromMWSBaudRate", in: d.fields) == [.int(0x20), .int(0x40)])
    }

    @Test func namesFallBackToTheCatalogAndVendorCodes() {
        // Core v5.4 Vol 4 Part E 7.3.56 Write Extended Inquiry Response (0x0C52), 7.2.14 Sniff Subrating
        // (0x0811), 7.8.44 LE Set Address Resolution Enable (0x202D), 7.7.38 Extended Inquiry Result (0x2F).
        #expect(HCIOpcode(rawValue: 0x0C52).name == "Write Extended Inquiry Response")
        #expect(HCIOpcode(rawValue: 0x0811).name == "Sniff Subrating")
        #expect(HCIOpcode(rawValue: 0x202D).name == "LE Set Address Resolution Enable")
        #expect(HCIEvents.name(code: 0x2F) == "Extended Inquiry Result")
        #expect(HCIEvents.leSubeventName(code: 0x14) == "LE Channel Selection Algorithm")
        // AOSP HCI Requirements: OCF 0x153 of the vendor group (opcode 0xFD53).
        #expect(HCIOpcode(rawValue: 0xFD53).name == "LE Get Vendor Capabilities")
        // OGF 0x3F is the vendor-specific group (5.4.1); 0xFF the vendor-specific event code (5.4.4).
        #expect(HCIOpcode(rawValue: 0xFC01).name == "Vendor Command 0x0001 (opcode 0xfc01)")
        #expect(HCIEvents.name(code: 0xFF) == "Vendor Event")
        // A code neither the specification nor a vendor's document names.
        #expect(HCIOpcode(rawValue: 0x0C99).name == "Unknown Command (OGF 0x03, OCF 0x0099)")
    }

    @Test func dumpDecodesCatalogCommandsTheirCompletionsAndEvents() throws {
        let decoder = PacketDecoder()
        let t = CaptureTime(seconds: 0, nanoseconds: 0)
        // 7.2.14 Sniff Subrating: Connection_Handle, Max_Latency, Min_Remote_Timeout, Min_Local_Timeout.
        let cmd = decoder.decode(direction: .sent, packet: .success(.command(HCICommandPacket(
            opcode: HCIOpcode(rawValue: 0x0811), parameters: [0x01, 0x00, 0x02, 0x00, 0x03, 0x00, 0x04, 0x00]))), raw: [], time: t)
        #expect(cmd.summary == "HCI Command Sniff Subrating")
        #expect(cmd.malformed == nil)
        let hci = try #require(cmd.layer("hci"))
        #expect(hci.contains(Field.int("connectionHandle", 1)))
        #expect(hci.contains(Field.int("maxLatency", 2)))
        #expect(hci.contains(Field.int("minLocalTimeout", 4)))
        // Its Command Complete (7.7.14): Status, then Connection_Handle.
        let cc = decoder.decode(direction: .received, packet: .success(.event(HCIEventPacket(
            code: 0x0E, parameters: [0x01, 0x11, 0x08, 0x00, 0x01, 0x00]))), raw: [], time: t)
        #expect(cc.summary == "HCI Event Command Complete (Sniff Subrating)")
        #expect(try #require(cc.layer("hci")).contains(Field.int("connectionHandle", 1)))
        // 7.7.37 Sniff Subrating event: Status, Connection_Handle, Max_TX_Latency, Max_RX_Latency,
        // Min_Remote_Timeout, Min_Local_Timeout.
        let ev = decoder.decode(direction: .received, packet: .success(.event(HCIEventPacket(
            code: 0x2E, parameters: [0x00, 0x02, 0x00, 0x10, 0x00, 0x20, 0x00, 0x30, 0x00, 0x40, 0x00]))), raw: [], time: t)
        #expect(ev.summary == "HCI Event Sniff Subrating")
        #expect(try #require(ev.layer("hci")).contains(Field.int("minLocalTimeout", 0x40)))
        // 7.7.65.20 LE Channel Selection Algorithm: Connection_Handle, Channel_Selection_Algorithm.
        let sub = decoder.decode(direction: .received, packet: .success(.event(HCIEventPacket(
            code: 0x3E, parameters: [0x14, 0x40, 0x00, 0x01]))), raw: [], time: t)
        #expect(sub.summary == "HCI Event LE Meta: LE Channel Selection Algorithm")
        #expect(try #require(sub.layer("hci")).contains(Field.int("channelSelectionAlgorithm", 1)))
        // A vendor command no document names: its octets.
        let vendor = decoder.decode(direction: .sent, packet: .success(.command(HCICommandPacket(
            opcode: HCIOpcode(rawValue: 0xFC01), parameters: [0xAA, 0xBB]))), raw: [], time: t)
        #expect(vendor.summary == "HCI Command Vendor Command 0x0001 (opcode 0xfc01)")
        #expect(try #require(vendor.layer("hci")).contains(Field.bytes("parameters", [0xAA, 0xBB])))
        // A truncated catalog command: what parsed, the rest as octets, and why.
        let short = decoder.decode(direction: .sent, packet: .success(.command(HCICommandPacket(
            opcode: HCIOpcode(rawValue: 0x0811), parameters: [0x01, 0x00, 0x02]))), raw: [], time: t)
        #expect(short.malformed != nil)
        let shortFields = try #require(short.layer("hci"))
        #expect(shortFields.contains(Field.int("connectionHandle", 1)))
        #expect(shortFields.contains(Field.bytes("unparsed", [0x02])))
    }

    /// Hostile input: every entry's sample cut at every length and extended by octets; a count octet
    /// of 255 with nothing after it. Decoding never traps, reports a problem for every wrong length,
    /// keeps what parsed and shows the rest as octets, and never makes more elements than octets.
    @Test func truncatedAndOversizedParametersNeverTrap() {
        var checked = 0
        for layout in HCICatalog.allCommands.flatMap({ [$0.parameters, $0.returnParameters] })
            + HCICatalog.allEvents.map(\.parameters) + HCICatalog.allLESubevents.map(\.parameters) {
            let full = Sample.make(layout).bytes
            let hasRest = layout.contains { if case .rest = $0.type { return true }; if case .list(.remaining, _) = $0.type { return true }; return false }
            for n in 0..<full.count {
                let d = CatalogLayout.decode(layout, Array(full.prefix(n)))
                // A layout ending in "the rest" fits some shorter inputs exactly.
                if !hasRest { #expect(d.problem != nil, "\(layout.first?.name ?? "?") cut to \(n)") }
                #expect(leaves(d.fields).count <= full.count + 1)
                checked += 1
            }
            let long = CatalogLayout.decode(layout, full + [0xEE, 0xEE, 0xEE])
            if !hasRest {
                #expect(long.problem != nil)
                #expect(long.fields.last == .bytes("unparsed", [0xEE, 0xEE, 0xEE]))
            }
            #expect(CatalogLayout.decode(layout, full).problem == nil)
        }
        #expect(checked > 4_000)
        // Write Stored Link Key (7.3.9): Num_Keys_To_Write 255, then one octet: at most that octet's worth.
        let write = HCICatalog.command(HCIOpcode(rawValue: 0x0C11))!
        let d = CatalogLayout.decode(write.parameters, [0xFF, 0x01])
        #expect(d.problem != nil)
        #expect(leaves(d.fields).count <= 3)
    }
}
