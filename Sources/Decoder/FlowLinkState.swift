// The link-layer state of the capture's controller (Core v5.4 Vol 6 Part B 1.1: standby,
// advertising, scanning, initiating, connection), derived from the HCI traffic alone: what the
// host enabled and the controller confirmed, and the events that end a state. Shown by
// `dump --flow` as a line under the packet that changed it, and kept in `FlowDiagram` for the
// other renderers.
import HCI
import Capture

/// The states the controller is in at once (a controller may advertise, scan and be connected
/// together, Vol 6 Part B 1.1.1); empty is standby.
public struct LinkLayerState: Sendable, Equatable, CustomStringConvertible {
    public var advertising = false
    public var scanning = false
    public var initiating = false
    /// Connection handles of the links in the connection state.
    public var connections: Set<UInt16> = []

    public init() {}

    /// "standby", else the states joined: "advertising + connected (1 link)".
    public var description: String {
        var parts: [String] = []
        if advertising { parts.append("advertising") }
        if scanning { parts.append("scanning") }
        if initiating { parts.append("initiating") }
        if !connections.isEmpty { parts.append("connected (\(connections.count) link\(connections.count == 1 ? "" : "s"))") }
        return parts.isEmpty ? "standby" : parts.joined(separator: " + ")
    }
}

/// A change of the controller's link-layer state: after packet `index`.
public struct LinkLayerStateChange: Sendable, Equatable {
    /// The packet (1-based, as `FlowArrow.index`) whose effect this is.
    public var index: Int
    public var time: CaptureTime
    public var from: LinkLayerState
    public var to: LinkLayerState
}

/// Follows the link-layer state through a capture's HCI packets, in order. A command's effect
/// counts once the controller has accepted it (Command Complete or Command Status with
/// Success); the events that change the state on their own count as they come.
struct LinkLayerStateTracker {
    private(set) var state = LinkLayerState()
    /// Enabled extended advertising sets (advertising while any is).
    private var sets: Set<Int> = []
    private var legacyAdvertising = false
    /// What each command awaiting its answer will do, by opcode.
    private var pending: [Int: (inout LinkLayerStateTracker) -> Void] = [:]

    /// The change `p` makes, if any.
    mutating func add(_ p: DecodedPacket) -> LinkLayerStateChange? {
        guard let hci = p.layer("hci") else { return nil }
        let before = state
        let name = hci.text("name") ?? ""
        switch p.type {
        case "command":
            guard let op = hci.code("opcode"), let effect = Self.effect(of: name, hci) else { break }
            if pending.count < 64 || pending[op] != nil { pending[op] = effect }
        case "event":
            if name == "Command Complete" || name == "Command Status" {
                guard let op = hci.code("commandOpcode"), let effect = pending.removeValue(forKey: op) else { break }
                if hci.code("status") ?? 0 == 0 { effect(&self) }
            } else if name == "Disconnection Complete", let h = hci.int("connectionHandle") {
                if hci.code("status") ?? 0 == 0 { state.connections.remove(UInt16(truncatingIfNeeded: h)) }
            } else if let sub = hci.text("subevent") {
                event(sub, hci)
            }
        default: break
        }
        guard state != before else { return nil }
        return LinkLayerStateChange(index: p.index, time: p.time, from: before, to: state)
    }

    /// What an accepted command does to the state (Core v5.4 Vol 4 Part E 7.3.2, 7.8.9, 7.8.11,
    /// 7.8.12, 7.8.13, 7.8.56, 7.8.65, 7.8.66).
    private static func effect(of name: String, _ hci: [Field]) -> ((inout LinkLayerStateTracker) -> Void)? {
        let on = (hci.code("enable") ?? hci.code("advertisingEnable") ?? hci.code("leScanEnable")).map { $0 != 0 }
        switch name {
        case "Reset":
            return { t in t = LinkLayerStateTracker() }
        case "LE Set Advertising Enable":
            guard let on else { return nil }
            return { t in t.legacyAdvertising = on; t.updateAdvertising() }
        case "LE Set Extended Advertising Enable":
            guard let on else { return nil }
            let handles = hci.list("sets").compactMap { v -> Int? in
                if case .object(let s) = v { return s.int("advertisingHandle") } else { return nil }
            }
            return { t in
                if on { t.sets.formUnion(handles) } else if handles.isEmpty { t.sets = [] } else { t.sets.subtract(handles) }
                t.updateAdvertising()
            }
        case "LE Set Scan Enable", "LE Set Extended Scan Enable":
            guard let on else { return nil }
            return { t in t.state.scanning = on }
        case _ where name == "LE Create Connection" || name.hasPrefix("LE Extended Create Connection"):
            return { t in t.state.initiating = true }
        default:
            return nil
        }
    }

    private mutating func updateAdvertising() { state.advertising = legacyAdvertising || !sets.isEmpty }

    /// LE subevents that end or begin a state (Core v5.4 Vol 4 Part E 7.7.65.1, 7.7.65.10, 7.7.65.18).
    private mutating func event(_ sub: String, _ hci: [Field]) {
        let success = hci.code("status") ?? 0 == 0
        if sub.contains("Connection Complete") {
            let central = hci.code("role") ?? 0 == 0
            if central {
                // The initiator leaves the initiating state either way (cancelled: status 0x02).
                state.initiating = false
            } else {
                // The advertiser stops when the connection is made (Vol 6 Part B 4.4.2), and
                // when high duty cycle directed advertising times out (status 0x3C): legacy
                // advertising, or the one extended set (with several, LE Advertising Set
                // Terminated, which follows, says which).
                if legacyAdvertising { legacyAdvertising = false } else if sets.count == 1 { sets = [] }
                updateAdvertising()
            }
            if success, let h = hci.int("connectionHandle") { state.connections.insert(UInt16(truncatingIfNeeded: h)) }
        } else if sub.contains("Advertising Set Terminated"), let h = hci.int("advertisingHandle") {
            sets.remove(h)
            updateAdvertising()
        }
    }
}

/// The decoder's fields by name (as Flow.swift reads them).
private extension [Field] {
    func value(_ name: String) -> FieldValue? { first { $0.name == name }?.value }
    func int(_ name: String) -> Int? { if case .int(let i)? = value(name) { i } else { nil } }
    func text(_ name: String) -> String? { if case .text(let s)? = value(name) { s } else { nil } }
    func list(_ name: String) -> [FieldValue] { if case .list(let l)? = value(name) { l } else { [] } }
    /// A `.code("0x..")` field's number.
    func code(_ name: String) -> Int? {
        guard case .code(let s)? = value(name) else { return nil }
        return Int(s.hasPrefix("0x") ? String(s.dropFirst(2)) : s, radix: 16)
    }
}
