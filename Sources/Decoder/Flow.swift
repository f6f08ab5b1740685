// The flow model behind `dump --flow` / `--svg`: decoded packets → steps → arrows. It never
// looks at bytes: it reads the fields each layer's codec produced (DecodedPacket.layers) and
// decides who sent the packet to whom, which layer's words label it, and which
// CoreBluetooth-style step (scan, connect, discover, read, ...) it belongs to. Rendering (text,
// SVG) lives in FlowText.swift and FlowSVG.swift.
import HCI
import Capture
import ATT

/// A column of the diagram.
public enum FlowParty: Hashable, Sendable {
    /// The host whose capture this is.
    case host
    /// Its controller (HCI commands go there, HCI events come from there).
    case controller
    /// The n-th remote device (index into `FlowDiagram.peers`): L2CAP traffic on its
    /// connection, and advertising reports of its advertisements.
    case peer(Int)
}

/// What a step does, with the CoreBluetooth call that causes it.
public enum FlowStepKind: String, Sendable, CaseIterable {
    case powerOn = "power on"
    case advertise
    case stopAdvertising = "stop advertising"
    case scan
    case stopScan = "stop scan"
    case connect
    case connectionParameters = "update connection parameters"
    case exchangeMTU = "exchange MTU"
    case discoverServices = "discover services"
    case discoverIncludedServices = "discover included services"
    case discoverCharacteristics = "discover characteristics"
    case discoverDescriptors = "discover descriptors"
    case read
    case write
    case subscribe
    case unsubscribe
    case notify
    case indicate
    case l2capChannel = "L2CAP channel"
    /// Enhanced credit-based channels to PSM 0x0027 (Core v5.4 Vol 3 Part G 5.3.2).
    case enhancedATT = "EATT bearers"
    /// Credit Based Reconfigure Request/Response (Core v5.4 Vol 3 Part A 4.27, 4.28).
    case reconfigureChannels = "reconfigure L2CAP channels"
    case pair
    case encrypt
    case disconnect

    /// The CoreBluetooth call (or delegate callback) of this step: `asServer` when this host is
    /// the GATT server (CBPeripheralManager side) for the ATT steps.
    public func coreBluetooth(asServer: Bool) -> String {
        switch self {
        case .powerOn: return asServer ? "CBPeripheralManager(delegate:queue:) → peripheralManagerDidUpdateState(.poweredOn)"
                                       : "CBCentralManager(delegate:queue:) → centralManagerDidUpdateState(.poweredOn)"
        case .advertise: return "peripheralManager.startAdvertising(_:)"
        case .scan: return "centralManager.scanForPeripherals(withServices:) → centralManager(_:didDiscover:advertisementData:rssi:)"
        case .stopScan: return "centralManager.stopScan()"
        case .stopAdvertising: return "peripheralManager.stopAdvertising()"
        case .connect: return asServer ? "(a central connected: no CBPeripheralManager callback)" : "centralManager.connect(_:) → centralManager(_:didConnect:)"
        case .connectionParameters: return "(none: CoreBluetooth negotiates connection parameters itself)"
        case .exchangeMTU: return asServer ? "(automatic) central.maximumUpdateValueLength" : "(automatic) peripheral.maximumWriteValueLength(for:)"
        case .discoverServices: return asServer ? "(answered by CBPeripheralManager from add(_:))" : "peripheral.discoverServices(_:) → peripheral(_:didDiscoverServices:)"
        case .discoverIncludedServices: return asServer ? "(answered by CBPeripheralManager from add(_:))" : "peripheral.discoverIncludedServices(_:for:)"
        case .discoverCharacteristics: return asServer ? "(answered by CBPeripheralManager from add(_:))" : "peripheral.discoverCharacteristics(_:for:) → peripheral(_:didDiscoverCharacteristicsFor:error:)"
        case .discoverDescriptors: return asServer ? "(answered by CBPeripheralManager from add(_:))" : "peripheral.discoverDescriptors(for:) → peripheral(_:didDiscoverDescriptorsFor:error:)"
        case .read: return asServer ? "peripheralManager(_:didReceiveRead:) → respond(to:withResult:)" : "peripheral.readValue(for:) → peripheral(_:didUpdateValueFor:error:)"
        case .write: return asServer ? "peripheralManager(_:didReceiveWrite:) → respond(to:withResult:)" : "peripheral.writeValue(_:for:type:) → peripheral(_:didWriteValueFor:error:)"
        case .subscribe: return asServer ? "peripheralManager(_:central:didSubscribeTo:)" : "peripheral.setNotifyValue(true, for:) → peripheral(_:didUpdateNotificationStateFor:error:)"
        case .unsubscribe: return asServer ? "peripheralManager(_:central:didUnsubscribeFrom:)" : "peripheral.setNotifyValue(false, for:)"
        case .notify: return asServer ? "peripheralManager.updateValue(_:for:onSubscribedCentrals:)" : "peripheral(_:didUpdateValueFor:error:)"
        case .indicate: return asServer ? "peripheralManager.updateValue(_:for:onSubscribedCentrals:) (indicate)" : "peripheral(_:didUpdateValueFor:error:) (indication)"
        case .l2capChannel: return asServer ? "peripheralManager.publishL2CAPChannel(withEncryption:)" : "peripheral.openL2CAPChannel(_:)"
        case .enhancedATT: return "(system: the OS opens Enhanced ATT bearers itself; no CoreBluetooth call)"
        case .reconfigureChannels: return "(system: the stack raises its channels' MTU itself; no CoreBluetooth call)"
        case .pair: return "(system pairing, started by an Insufficient Authentication/Encryption answer or a Security Request)"
        case .encrypt: return "(system: the link is encrypted with the paired keys)"
        case .disconnect: return asServer ? "(the central disconnected: no CBPeripheralManager callback)" : "centralManager.cancelPeripheralConnection(_:) → centralManager(_:didDisconnectPeripheral:error:)"
        }
    }
}

/// Why a step is the stack's or the controller's own, with no application call causing it.
public enum FlowSystemStep: Sendable, Equatable {
    /// Advertising turned off right after a connection: the connection ended it.
    case endedByConnection
    /// A server's reads and writes of the attributes its stack holds (`FlowBuilder.stackAttributes`).
    case stackAttribute
    /// A client's Database Hash read and Client Supported Features write (GATT caching).
    case gattCaching
    /// A request the server refused for security, sent again once pairing or encryption is done.
    case retryAfterSecurity

    /// The step's label in place of the CoreBluetooth call.
    public func label(_ kind: FlowStepKind, asServer: Bool) -> String {
        switch self {
        // Core v5.4 Vol 4 Part E 7.7.65.18: the controller ends an advertising set when a
        // connection is created from it; the stack then turns advertising off.
        case .endedByConnection:
            return "(the controller and the stack: advertising ends when a central connects; no app call)"
        case .stackAttribute:
            return kind == .write ? "(answered by the stack from its own attributes: no peripheralManager(_:didReceiveWrite:))"
                                  : "(answered by the stack from its own attributes: no peripheralManager(_:didReceiveRead:))"
        case .gattCaching:
            return "(the stack: Database Hash and Client Supported Features for GATT caching, Vol 3 Part G 2.5.2.1; CoreBluetooth does it itself)"
        case .retryAfterSecurity:
            return "(the stack sends the refused request again on the secured link; the app's call is the one before, its callback comes now)"
        }
    }
}

/// One packet as an arrow: from whom to whom, labelled in its own layer's words.
public struct FlowArrow: Sendable, Equatable {
    /// The packet's 1-based position in the capture.
    public var index: Int
    public var time: CaptureTime
    public var from: FlowParty
    public var to: FlowParty
    /// Whose words label it: "hci", "l2cap", "signaling", "att", "smp", "monitor".
    public var layer: String
    public var label: String
    public var malformed: Bool
    /// What repeats: the label without values (e.g. "ATT Handle Value Notification 0x0010"),
    /// used to collapse runs of the same exchange.
    public var shape: String
}

/// Consecutive packets of one step.
public struct FlowStep: Sendable {
    public var kind: FlowStepKind
    /// Whether this host is the GATT server (CBPeripheralManager) in this step.
    public var asServer: Bool
    /// Why the stack or the controller took this step by itself; nil for an application's call.
    public var system: FlowSystemStep?
    public var arrows: [FlowArrow]
    public var bySystem: Bool { system != nil }
    public var coreBluetooth: String { system?.label(kind, asServer: asServer) ?? kind.coreBluetooth(asServer: asServer) }

    public init(kind: FlowStepKind, asServer: Bool, system: FlowSystemStep? = nil, arrows: [FlowArrow]) {
        self.kind = kind
        self.asServer = asServer
        self.system = system
        self.arrows = arrows
    }

    func sameStep(as other: FlowStep) -> Bool { kind == other.kind && asServer == other.asServer && system == other.system }
}

/// Where a packet goes: the step's kind, whether this host is the GATT server, and why the
/// stack took it by itself (nil: the application did).
struct FlowPlacement: Equatable {
    var kind: FlowStepKind
    var asServer: Bool
    var system: FlowSystemStep?
}

/// The whole diagram: the columns (host, controller, peers) and the steps in capture order.
public struct FlowDiagram: Sendable {
    /// Peer column titles: "F0:F1:F2:F3:F4:01 (public)", or "other advertisers".
    public var peers: [String]
    public var steps: [FlowStep]
    /// Time of the first packet (arrows show their time relative to it).
    public var start: CaptureTime?
    /// The controller's link-layer state changes, in capture order (FlowLinkState.swift).
    public var linkStates: [LinkLayerStateChange] = []
    public var packetCount: Int { steps.reduce(0) { $0 + $1.arrows.count } }
}

/// Builds a `FlowDiagram` from decoded packets given in capture order. Linear in the packets:
/// constant work per packet (a few field look-ups in the packet's own short field lists).
public struct FlowBuilder {
    private let layers: LayerSelection
    private var steps: [FlowStep] = []
    private var peerTitles: [String] = []
    private var peerByAddress: [String: Int] = [:]
    /// Peers that took part in a connection (the others are advertisers only).
    private var connected: Set<Int> = []
    private var peerByHandle: [UInt16: Int] = [:]
    /// The step of the ATT request awaiting its response, per (connection, request direction):
    /// ATT allows one outstanding request per direction (Core v5.4 Vol 3 Part F 3.3.2).
    private var pendingRequest: [PendingKey: FlowPlacement] = [:]
    /// The last ATT request per (connection, direction), and the one refused for security
    /// (Insufficient Authentication, Encryption, Encryption Key Size) awaiting its retry.
    private var lastRequest: [PendingKey: [Field]] = [:]
    private var refused: [PendingKey: [Field]] = [:]
    /// Whether this host acts as GATT server on a connection (it received an ATT request).
    private var serverOn: [UInt16: Bool] = [:]
    private var start: CaptureTime?
    /// The step of each HCI command awaiting its Command Complete / Command Status, by opcode.
    private var pendingCommand: [Int: FlowPlacement?] = [:]
    /// Identifiers (with the link's handle) of Credit Based Connection Requests to EATT's PSM
    /// awaiting their response.
    private var eattRequests: Set<Int> = []
    private var linkState = LinkLayerStateTracker()
    private var linkStates: [LinkLayerStateChange] = []

    private struct PendingKey: Hashable {
        var handle: UInt16
        var sent: Bool
    }

    /// `layers`: the `--layers` selection; a packet with none of them is left out of the diagram.
    public init(layers: Set<String> = allDecoderLayers) {
        self.layers = LayerSelection(layers)
    }

    public mutating func add(_ p: DecodedPacket) {
        if start == nil { start = p.time }
        // The controller's state is followed always, shown with the HCI layer (it is HCI's account).
        if let change = linkState.add(p), layers.hci { linkStates.append(change) }
        // Who and which step are worked out for every packet (they keep the state later
        // packets need: peers by connection, pending requests), drawn or not.
        let (from, to) = parties(p)
        let placement = classify(p)
        guard let label = Self.label(p, layers) else { return }
        let arrow = FlowArrow(index: p.index, time: p.time, from: from, to: to, layer: label.layer, label: label.text,
                              malformed: p.malformed != nil, shape: label.shape)
        if let placement {
            let step = FlowStep(kind: placement.kind, asServer: placement.asServer, system: placement.system, arrows: [arrow])
            // Not `if let last = steps.last`: that copy would share the arrows' buffer, and the
            // append would copy it whole, for every packet (quadratic: 50 000 packets took minutes).
            if let n = steps.indices.last, steps[n].sameStep(as: step) {
                steps[n].arrows.append(arrow)
            } else {
                steps.append(step)
            }
        } else if steps.isEmpty {
            steps.append(FlowStep(kind: .powerOn, asServer: false, arrows: [arrow]))
        } else {
            steps[steps.count - 1].arrows.append(arrow)  // bookkeeping (credits, fragments) joins the step it serves
        }
    }

    /// At most this many peer columns: the rest share the last one.
    public static let maxPeerColumns = 8

    /// The diagram. Advertisers that never connected share one "other advertisers" column when
    /// there are more than two of them (a busy capture would otherwise have dozens of columns),
    /// and there are at most `maxPeerColumns` peer columns.
    public func finish() -> FlowDiagram {
        // Link-level steps are named from the side this host plays: a host that advertised and
        // never scanned is the peripheral (CBPeripheralManager) of its connections.
        let peripheralHost = steps.contains { $0.kind == .advertise } && !steps.contains { $0.kind == .scan }
        var steps = steps
        for i in steps.indices where [.powerOn, .connect, .disconnect, .connectionParameters, .pair, .encrypt].contains(steps[i].kind) {
            steps[i].asServer = peripheralHost
        }
        // Neighbouring steps that became the same (e.g. connect events of both roles) merge.
        var merged: [FlowStep] = []
        for s in steps {
            if let last = merged.last, last.sameStep(as: s) {
                merged[merged.count - 1].arrows += s.arrows
            } else {
                merged.append(s)
            }
        }
        steps = merged
        let advertisersOnly = (0..<peerTitles.count).filter { !connected.contains($0) }
        guard advertisersOnly.count > 2 || peerTitles.count > Self.maxPeerColumns else {
            return FlowDiagram(peers: peerTitles, steps: steps, start: start, linkStates: linkStates)
        }
        // Columns for the first connected peers; everyone else shares the last column (a
        // hostile or busy capture must not make thousands of columns).
        var map: [Int: Int] = [:]
        var titles: [String] = []
        for i in 0..<peerTitles.count where connected.contains(i) && titles.count < Self.maxPeerColumns - 1 {
            map[i] = titles.count
            titles.append(peerTitles[i])
        }
        let others = titles.count
        titles.append(map.count == connected.count ? "other advertisers" : "other devices")
        func remap(_ p: FlowParty) -> FlowParty { if case .peer(let i) = p { return .peer(map[i] ?? others) } else { return p } }  // unmapped → others
        var out = steps
        for s in out.indices {
            for a in out[s].arrows.indices {
                out[s].arrows[a].from = remap(out[s].arrows[a].from)
                out[s].arrows[a].to = remap(out[s].arrows[a].to)
            }
        }
        return FlowDiagram(peers: titles, steps: out, start: start, linkStates: linkStates)
    }

    // MARK: Who talks to whom

    private mutating func peer(address: String, type: String?) -> Int {
        if let i = peerByAddress[address] { return i }
        let i = peerTitles.count
        peerTitles.append(type.map { "\(address) (\($0))" } ?? address)
        peerByAddress[address] = i
        return i
    }

    private mutating func parties(_ p: DecodedPacket) -> (FlowParty, FlowParty) {
        let hci = p.layer("hci") ?? []
        switch p.type {
        case "command": return (.host, .controller)
        case "event":
            // An advertising report relays what a peer sent over the air: drawn from that peer.
            if let reports = listValue(field("reports", hci)), case .object(let r)? = reports.first,
               let address = textValue(field("address", r)) {
                return (.peer(peer(address: address, type: addressTypeName(field("addressType", r)))), .host)
            }
            if let address = textValue(field("peerAddress", hci)), let handle = intValue(field("connectionHandle", hci)),
               codeValue(field("status", hci)) == 0 {
                let i = peer(address: address, type: addressTypeName(field("peerAddressType", hci)))
                connected.insert(i)
                peerByHandle[UInt16(truncatingIfNeeded: handle)] = i
            }
            return (.controller, .host)
        case "acl", "sco", "iso":
            let party: FlowParty
            if let h = intValue(field("handle", hci)), let i = peerByHandle[UInt16(truncatingIfNeeded: h)] {
                party = .peer(i)
            } else {
                // A capture that starts mid-connection: the link's handle names the peer.
                let h = intValue(field("handle", hci)) ?? 0
                let i = peer(address: "handle 0x" + hex4(h), type: nil)
                connected.insert(i)
                peerByHandle[UInt16(truncatingIfNeeded: h)] = i
                party = .peer(i)
            }
            return p.direction == .received ? (party, .host) : (.host, party)
        case "monitor", "note": return (.host, .host)
        default: return p.direction == .received ? (.controller, .host) : (.host, .controller)
        }
    }

    // MARK: Steps

    /// The step a packet starts or belongs to; nil for packets that serve whatever step is
    /// going on (Number Of Completed Packets, L2CAP fragments, vendor or unknown commands).
    private mutating func classify(_ p: DecodedPacket) -> FlowPlacement? {
        if p.layer("smp") != nil { return FlowPlacement(kind: .pair, asServer: false) }
        if let sig = p.layer("signaling") {
            let name = textValue(field("name", sig)) ?? ""
            // Credits serve whatever step is going on.
            if name == "Flow Control Credit Ind" { return nil }
            if name.contains("Connection Parameter Update") { return FlowPlacement(kind: .connectionParameters, asServer: false) }
            if name.hasPrefix("Credit Based Reconfigure") { return FlowPlacement(kind: .reconfigureChannels, asServer: false) }
            // Credit Based Connection Request to PSM 0x0027, and the response with its identifier.
            let id = intValue(field("identifier", sig)).map { ($0 << 16) | (intValue(field("handle", p.layer("hci") ?? [])) ?? 0) }
            if name == "Credit Based Connection Request", codeValue(field("spsm", sig)) == 0x0027, let id { eattRequests.insert(id) }
            if name == "Credit Based Connection Response", let id, eattRequests.remove(id) != nil { return FlowPlacement(kind: .enhancedATT, asServer: false) }
            return FlowPlacement(kind: eattRequests.contains(id ?? -1) ? .enhancedATT : .l2capChannel, asServer: false)
        }
        let hci = p.layer("hci") ?? []
        if let att = p.layer("att") { return classifyATT(att, gatt: p.layer("gatt"), hci: hci, sent: p.direction != .received) }
        switch p.type {
        case "command":
            let kind = Self.commandStep(textValue(field("name", hci)) ?? "")
            // Core v5.4 Vol 4 Part E 7.8.11 / 7.8.65: Enable 0x00 stops scanning.
            var step = kind.map { FlowPlacement(kind: $0, asServer: false) }
            // Core v5.4 Vol 4 Part E 7.8.9 / 7.8.56: Advertising_Enable / Enable 0x00 stops advertising.
            if kind == .advertise, let e = field("enable", hci) ?? field("advertisingEnable", hci), codeValue(e) == 0 { step = FlowPlacement(kind: .stopAdvertising, asServer: false) }
            if kind == .scan, let e = field("enable", hci) ?? field("leScanEnable", hci), codeValue(e) == 0 { step = FlowPlacement(kind: .stopScan, asServer: false) }
            // Advertising off right after a connection: the connection ended it. (Scanning off
            // is the application's: its scan ends, in a race with the connection.)
            if step?.kind == .stopAdvertising, steps.last?.kind == .connect { step?.system = .endedByConnection }
            if let op = codeValue(field("opcode", hci)) { pendingCommand[op] = step }
            return step
        case "event":
            let name = textValue(field("name", hci)) ?? ""
            if name == "Command Complete" || name == "Command Status" {
                // The step of the command it answers (its opcode's name, from the HCI registry).
                return codeValue(field("commandOpcode", hci)).flatMap { pendingCommand.removeValue(forKey: $0) } ?? nil
            }
            if name == "Disconnection Complete" {
                if let h = intValue(field("connectionHandle", hci)) {
                    let handle = UInt16(truncatingIfNeeded: h)
                    for sent in [true, false] {
                        let key = PendingKey(handle: handle, sent: sent)
                        pendingRequest[key] = nil
                        lastRequest[key] = nil
                        refused[key] = nil
                    }
                    serverOn[handle] = nil
                }
                return FlowPlacement(kind: .disconnect, asServer: false)
            }
            if name.hasPrefix("Encryption") { return FlowPlacement(kind: .encrypt, asServer: false) }
            guard let sub = textValue(field("subevent", hci)) else { return nil }
            if sub.contains("Advertising Report") {
                // A report still arriving while the connection is being made belongs to it.
                return steps.last?.kind == .connect ? nil : FlowPlacement(kind: .scan, asServer: false)
            }
            if sub.contains("Advertising Set Terminated") || sub.contains("Connection Complete") {
                // Core v5.4 Vol 4 Part E 7.7.65.1: role 0x01 = this host is the peripheral.
                return FlowPlacement(kind: .connect, asServer: codeValue(field("role", hci)) == 1)
            }
            if sub.contains("Channel Selection") || sub.contains("Data Length") || sub.contains("Remote Features") || sub.contains("PHY Update") {
                return FlowPlacement(kind: .connect, asServer: false)
            }
            if sub.contains("Connection Update") || sub.contains("Connection Parameter") { return FlowPlacement(kind: .connectionParameters, asServer: false) }
            if sub.contains("Long Term Key") { return FlowPlacement(kind: .encrypt, asServer: false) }
            if sub.contains("P-256") || sub.contains("DHKey") { return FlowPlacement(kind: .pair, asServer: false) }
            return nil
        default:
            return nil
        }
    }

    /// HCI commands by name (the registry's spec names, Core v5.4 Vol 4 Part E 7).
    static func commandStep(_ name: String) -> FlowStepKind? {
        if name == "Reset" { return .powerOn }
        if name.contains("Advertising") || name.contains("Scan Response") || name.contains("Advertising Set") { return .advertise }
        if name.contains("Scan") { return .scan }
        if name.contains("Create Connection") { return .connect }
        if name == "Disconnect" { return .disconnect }
        if name.contains("Connection Update") || name.contains("Connection Parameter") { return .connectionParameters }
        if name.contains("Encryption") || name.contains("Long Term Key") { return .encrypt }
        if name.contains("P-256") || name.contains("DHKey") { return .pair }
        // Per-connection negotiation, not the controller-wide defaults read or set at power-on.
        if name.contains("Default") || name.contains("Maximum") || name.contains("Suggested") { return nil }
        if name.contains("Data Length") || name.contains("PHY") || name.contains("Remote Features") { return .connect }
        return nil
    }

    private mutating func classifyATT(_ att: [Field], gatt: [Field]?, hci: [Field], sent: Bool) -> FlowPlacement? {
        guard let code = codeValue(field("opcode", att)) else { return nil }
        let op = ATTOpcode(UInt8(truncatingIfNeeded: code))
        let handle = UInt16(truncatingIfNeeded: intValue(field("handle", hci)) ?? 0)
        // Server-initiated PDUs: the server sends notifications and indications, the client
        // confirms (Core v5.4 Vol 3 Part F 3.4.7).
        switch op {
        case .handleValueNotification, .multipleHandleValueNotification: return FlowPlacement(kind: .notify, asServer: serverOn[handle] ?? sent)
        case .handleValueIndication: return FlowPlacement(kind: .indicate, asServer: serverOn[handle] ?? sent)
        case .handleValueConfirmation: return FlowPlacement(kind: .indicate, asServer: serverOn[handle] ?? !sent)
        default: break
        }
        if op == .errorResponse, let code = codeValue(field("errorCode", att)), [0x05, 0x0C, 0x0F].contains(code),
           let request = lastRequest[PendingKey(handle: handle, sent: !sent)] {
            // Insufficient Authentication / Encryption Key Size / Encryption (Core v5.4 Vol 3
            // Part F 3.4.1.1): a client that pairs or encrypts sends the request again.
            refused[PendingKey(handle: handle, sent: !sent)] = request
        }
        if op.isResponse || op == .errorResponse {
            // Answers the request outstanding in the other direction.
            if let step = pendingRequest.removeValue(forKey: PendingKey(handle: handle, sent: !sent)) { return step }
            guard op != .errorResponse, let kind = Self.requestStep(ATTOpcode(op.rawValue - 1), att: att, gatt: gatt) else { return nil }
            return FlowPlacement(kind: kind, asServer: sent)  // a response sent: this host is the server
        }
        guard let kind = Self.requestStep(op, att: att, gatt: gatt) else { return nil }
        let server = !sent  // a request received: this host is the server
        serverOn[handle] = server
        var placement = FlowPlacement(kind: kind, asServer: server, system: Self.byStack(kind, op, att: att, gatt: gatt, asServer: server))
        // The client's stack resends it; on the server it is a request like any other.
        if refused.removeValue(forKey: PendingKey(handle: handle, sent: sent)) == Self.requestShape(att), !server {
            placement.system = .retryAfterSecurity
        }
        if op.isRequest {
            pendingRequest[PendingKey(handle: handle, sent: sent)] = placement
            lastRequest[PendingKey(handle: handle, sent: sent)] = Self.requestShape(att)
        }
        return placement
    }

    /// The attributes every server's stack holds and answers itself: Generic Access (Device
    /// Name, Appearance, Peripheral Preferred Connection Parameters; Core v5.4 Vol 3 Part C 12),
    /// Generic Attribute (Service Changed, Client Supported Features, Database Hash, Server
    /// Supported Features; Part G 7) and descriptors (Part G 3.3.3), as CBPeripheralManager does.
    static let stackAttributes: Set<String> = ["2a00", "2a01", "2a04", "2a05", "2b29", "2b2a", "2b3a",
                                               "2900", "2901", "2902", "2903", "2904", "2905", "2906"]

    /// Whether a read or write is the stack's own: on the server, one of `stackAttributes`; on
    /// the client, the Database Hash read by type and the Client Supported Features written for
    /// GATT caching (Vol 3 Part G 2.5.2.1, 7.2).
    static func byStack(_ kind: FlowStepKind, _ op: ATTOpcode, att: [Field], gatt: [Field]?, asServer: Bool) -> FlowSystemStep? {
        guard kind == .read || kind == .write else { return nil }
        let uuid = gatt.flatMap { textValue(field("uuid", $0)) } ?? (op == .readByTypeRequest ? textValue(field("type", att)) : nil)
        guard let uuid else { return nil }
        if asServer { return stackAttributes.contains(uuid) ? .stackAttribute : nil }
        return (kind == .write && uuid == "2b29") || (op == .readByTypeRequest && uuid == "2b2a") ? .gattCaching : nil
    }

    /// A request's opcode and the fields that name its attribute: a request sent again is the same.
    static func requestShape(_ att: [Field]) -> [Field] {
        att.filter { ["opcode", "handle", "startHandle", "endHandle", "type", "valueOffset"].contains($0.name) }
    }

    /// The step of an ATT request or command, per the GATT procedure it belongs to
    /// (Core v5.4 Vol 3 Part G 4.4–4.12).
    static func requestStep(_ op: ATTOpcode, att: [Field], gatt: [Field]?) -> FlowStepKind? {
        switch op {
        case .exchangeMTURequest: return .exchangeMTU
        case .findInformationRequest: return .discoverDescriptors                              // 4.7.1
        case .findByTypeValueRequest, .readByGroupTypeRequest: return .discoverServices        // 4.4.2 / 4.4.1
        case .readByTypeRequest:
            switch textValue(field("type", att)) {
            case "2802": return .discoverIncludedServices     // 4.5.1 Find Included Services
            case "2803": return .discoverCharacteristics      // 4.6.1 / 4.6.2
            default: return .read                             // 4.8.2 Read Using Characteristic UUID
            }
        case .readRequest, .readBlobRequest, .readMultipleRequest, .readMultipleVariableRequest: return .read
        case .writeRequest, .writeCommand, .signedWriteCommand, .prepareWriteRequest, .executeWriteRequest:
            // A write to a Client Characteristic Configuration descriptor is (un)subscribing
            // (Vol 3 Part G 3.3.3.3): bit 0 notifications, bit 1 indications.
            if op != .executeWriteRequest, let g = gatt, textValue(field("uuid", g)) == "2902",
               case .bytes(let v)? = field("value", att)?.value {
                return v.contains { $0 & 0x03 != 0 } ? .subscribe : .unsubscribe
            }
            return .write
        default: return nil
        }
    }

    // MARK: Labels

    struct Label {
        var layer: String
        var text: String
        var shape: String
    }

    /// The packet in the words of the deepest selected layer it has.
    static func label(_ p: DecodedPacket, _ sel: LayerSelection) -> Label? {
        if p.malformed != nil, sel.hci || sel.l2cap || sel.att || sel.smp {
            return Label(layer: p.layers.last?.name ?? "hci", text: p.summary + " (malformed)", shape: p.summary)
        }
        if sel.smp, p.layer("smp") != nil { return Label(layer: "smp", text: p.summary, shape: p.summary) }
        if let att = p.layer("att"), sel.att {
            var text = p.summary
            var shape = text
            let gatt = sel.gatt ? p.layer("gatt") : nil
            if let s = intValue(field("startHandle", att)), let e = intValue(field("endHandle", att)) {
                text += " 0x" + hex4(s) + "–0x" + hex4(e)
            }
            if let t = textValue(field("type", att)) ?? textValue(field("attributeType", att)) { text += " " + t }
            if let h = intValue(field("handle", att)) { text += " 0x" + hex4(h); shape = text }
            if let u = gatt.flatMap({ textValue(field("uuid", $0)) }) { text += " " + u; shape += " " + u }
            if let mtu = intValue(field("clientRxMtu", att)) ?? intValue(field("serverRxMtu", att)) { text += " MTU \(mtu)" }
            if let err = field("errorCode", att) { text += " " + (err.note ?? "") + " (" + err.value.display + ")" }
            if case .bytes(let v)? = field("value", att)?.value { text += " = " + shortHex(v) }
            if let list = listValue(field("attributeDataList", att) ?? field("informationData", att)) { text += " (\(list.count) entries)" }
            return Label(layer: "att", text: text, shape: shape)
        }
        if sel.l2cap, p.layer("signaling") != nil { return Label(layer: "signaling", text: p.summary, shape: p.summary) }
        if sel.l2cap, let l2 = p.layer("l2cap") {
            if field("fragment", l2) != nil { return Label(layer: "l2cap", text: p.summary, shape: "L2CAP fragment") }
            var text = "L2CAP"
            if let ch = textValue(field("channel", l2)) { text += " " + ch } else if let cid = intValue(field("cid", l2)) { text += " CID 0x" + hex4(cid) }
            if let n = intValue(field("length", l2)) { text += " \(n) octets" }
            return Label(layer: "l2cap", text: text, shape: text)
        }
        guard sel.hci else { return nil }
        // btmon's own records, and the reader's notes on records it skipped.
        if p.type == "monitor" || p.type == "note" { return Label(layer: "monitor", text: p.summary, shape: p.summary) }
        guard let hci = p.layer("hci") else {
            return Label(layer: "hci", text: p.summary.isEmpty ? p.type : p.summary, shape: p.type)  // not an H4 packet
        }
        if p.type == "acl" {
            let text = "ACL handle \(intValue(field("handle", hci)) ?? 0), \(intValue(field("length", hci)) ?? 0) octets"
            return Label(layer: "hci", text: text, shape: "ACL")
        }
        var text = p.summary.hasPrefix("HCI Event LE Meta: ") ? "HCI Event " + p.summary.dropFirst(19) : p.summary
        let shape = text
        if let reports = listValue(field("reports", hci)), case .object(let r)? = reports.first {
            if let t = field("eventType", r) { text += " " + (t.note ?? t.value.display) }
        }
        if let status = field("status", hci), codeValue(status) != 0 { text += " status " + status.value.display + (status.note.map { " " + $0 } ?? "") }
        if let h = intValue(field("connectionHandle", hci)), p.type != "command" || !text.contains("Disconnect") { text += " handle \(h)" }
        if let reason = field("reason", hci) { text += " reason " + reason.value.display + (reason.note.map { " " + $0 } ?? "") }
        if let e = field("enable", hci) ?? field("advertisingEnable", hci) ?? field("leScanEnable", hci) { text += codeValue(e) == 0 ? " off" : " on" }
        return Label(layer: "hci", text: text, shape: shape)
    }
}

// MARK: - Field access (the decoder's own fields, by name)

@inline(__always)
private func field(_ name: String, _ fields: [Field]?) -> Field? { fields?.first { $0.name == name } }

private func intValue(_ f: Field?) -> Int? { if case .int(let i)? = f?.value { return i } else { return nil } }
private func textValue(_ f: Field?) -> String? { if case .text(let s)? = f?.value { return s } else { return nil } }
private func listValue(_ f: Field?) -> [FieldValue]? { if case .list(let l)? = f?.value { return l } else { return nil } }
/// A `.code("0x..")` field's number.
private func codeValue(_ f: Field?) -> Int? {
    guard case .code(let s)? = f?.value else { return nil }
    return Int(s.hasPrefix("0x") ? String(s.dropFirst(2)) : s, radix: 16)
}

private func addressTypeName(_ f: Field?) -> String? {
    guard let f else { return nil }
    if let note = f.note { return note.lowercased().contains("random") ? "random" : (note.lowercased().contains("public") ? "public" : note) }
    switch codeValue(f) { case 0?, 2?: return "public"; case 1?, 3?: return "random"; default: return nil }
}

func hex4(_ v: Int) -> String {
    let s = String(v, radix: 16)
    return s.count >= 4 ? s : String(repeating: "0", count: 4 - s.count) + s
}

/// At most 8 octets of a value in hex, "…" and the length when longer.
func shortHex(_ v: [UInt8]) -> String {
    if v.isEmpty { return "(empty)" }
    if v.count <= 8 { return v.hex }
    return Array(v.prefix(8)).hex + "… (\(v.count) octets)"
}
