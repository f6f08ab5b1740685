import HCI
import Capture
import ATT
import GATT

/// Learns each connection's GATT database from the discovery the capture shows (Read By Group
/// Type responses → services, Read By Type 0x2803 responses → characteristic declarations and
/// value handles, Find Information responses → descriptors) and describes what a later PDU's
/// handle is, as Wireshark does. Per connection handle; cleared by (dis)connection events.
/// Every step is O(1) in what has been learnt (a crafted capture must decode in linear time).
struct GATTTracker {
    struct Attribute {
        /// What the attribute is about: the service's UUID for a service declaration (as
        /// Wireshark shows it), the characteristic's for its value, the descriptor's own.
        var uuid: BluetoothUUID
        /// The fields describing it after its handle (uuid, name, characteristic, declaration),
        /// built once when it is learnt: later PDUs naming the handle reuse them (formatting
        /// UUIDs per packet was a third of `dump`'s time, issue 14).
        var described: [Field]

        init(uuid: BluetoothUUID, characteristic: BluetoothUUID? = nil, declaration: BluetoothUUID? = nil) {
            self.uuid = uuid
            var f: [Field] = [GATTTracker.uuidField("uuid", uuid)]
            if let n = AssignedNumbers.name(of: uuid) { f.append(.text("name", n)) }
            if let ch = characteristic { f.append(GATTTracker.uuidField("characteristic", ch)) }
            if let d = declaration { f.append(GATTTracker.uuidField("declaration", d)) }
            described = f
        }
    }

    struct Connection {
        var attributes: [UInt16: Attribute] = [:]
        /// Characteristic UUIDs by value handle, for finding a descriptor's characteristic (keyed
        /// by handle so a capture repeating discovery can't grow it past the handle space).
        var valueHandles: [UInt16: BluetoothUUID] = [:]
        /// The same value handles, for finding the last one before a descriptor in O(1).
        var valueHandleSet = HandleSet()
        /// The last request sent in each direction on each bearer (a response goes the other
        /// way on the same bearer: the fixed channel 0x0004, 0, or a followed dynamic channel,
        /// by its serial number; one transaction per bearer, Core v5.4 Vol 3 Part F 3.3.2).
        /// At most `maxPendingRequests`.
        var pending: [PendingKey: PendingRequest] = [:]
    }

    /// A request waiting for its answer, and when it was seen (for `dump --stats`' latency).
    struct PendingRequest {
        var pdu: ATTPDU
        var time: CaptureTime
    }

    /// Bounded: a hostile capture can't grow this without limit (handles are 12-bit, and each
    /// connection holds at most 65535 attributes).
    static let maxConnections = 64
    static let maxPendingRequests = 64

    struct PendingKey: Hashable {
        var direction: Direction?
        var bearer: Int
    }

    private var connections: [UInt16: Connection] = [:]

    mutating func reset(connection: UInt16) { connections.removeValue(forKey: connection) }

    /// The GATT layer's fields for `pdu`, or nil when there is nothing to say.
    /// `bearer`: 0 for the fixed ATT channel, a followed dynamic channel's serial number.
    mutating func process(_ pdu: ATTPDU, connection handle: UInt16, direction: Direction?, bearer: Int = 0) -> [Field]? {
        process(pdu, connection: handle, direction: direction, bearer: bearer, time: CaptureTime(seconds: 0, nanoseconds: 0)).fields
    }

    /// As `process(_:connection:direction:bearer:)`, and, for a response or an Error Response,
    /// the request it answers (the last one the other side sent on the bearer) with its time.
    mutating func process(_ pdu: ATTPDU, connection handle: UInt16, direction: Direction?, bearer: Int,
                          time: CaptureTime) -> (fields: [Field]?, answered: PendingRequest?) {
        if connections.count >= Self.maxConnections, connections[handle] == nil { connections.removeAll() }
        // Changed in place through the dictionary's modify accessor (one look-up, no copy of
        // the connection's tables, which would make every packet O(n)).
        return Self.process(pdu, direction: direction, bearer: bearer, time: time, in: &connections[handle, default: Connection()])
    }

    private static func process(_ pdu: ATTPDU, direction: Direction?, bearer: Int, time: CaptureTime,
                                in c: inout Connection) -> (fields: [Field]?, answered: PendingRequest?) {
        let reverse: Direction? = direction.map { $0 == .sent ? .received : .sent }

        if pdu.opcode.isRequest {
            if c.pending.count >= maxPendingRequests { c.pending.removeAll() }
            c.pending[PendingKey(direction: direction, bearer: bearer)] = PendingRequest(pdu: pdu, time: time)
        }
        var answered: PendingRequest? = nil
        if pdu.opcode.isResponse || pdu.opcode == .errorResponse {
            answered = c.pending.removeValue(forKey: PendingKey(direction: reverse, bearer: bearer))
        }
        return (fields(for: pdu, request: answered?.pdu, in: &c), answered)
    }

    private static func fields(for pdu: ATTPDU, request: ATTPDU?, in c: inout Connection) -> [Field]? {

        switch pdu {
        case .readByGroupTypeResponse(let list):
            var f: [Field] = []
            if case .readByGroupTypeRequest(_, _, let type) = request {
                f.append(uuidField("requestType", type))
            }
            var services: [FieldValue] = []
            for g in list {
                guard let u = BluetoothUUID(littleEndian: g.value) else { continue }
                let declType: BluetoothUUID
                if case .readByGroupTypeRequest(_, _, let t) = request { declType = t } else { declType = BluetoothUUID(0x2800) }
                c.attributes[g.handle] = Attribute(uuid: u, declaration: declType)
                var o: [Field] = [.int("handle", g.handle), .int("endGroupHandle", g.endGroupHandle), uuidField("uuid", u)]
                if let n = AssignedNumbers.name(of: u) { o.append(.text("name", n)) }
                services.append(.object(o))
            }
            f.append(Field("services", .list(services)))
            return f

        case .readByTypeResponse(let list):
            guard case .readByTypeRequest(_, _, let type) = request else { return nil }
            var f: [Field] = [uuidField("requestType", type)]
            if type == BluetoothUUID(0x2803) {
                var chars: [FieldValue] = []
                for item in list {
                    guard let d = try? GATTCharacteristicDeclaration(value: item.value) else { continue }
                    let u = d.uuid, valueHandle = d.valueHandle
                    c.attributes[item.handle] = Attribute(uuid: type, characteristic: u)
                    c.attributes[valueHandle] = Attribute(uuid: u, characteristic: nil)
                    c.valueHandles[valueHandle] = u
                    c.valueHandleSet.insert(valueHandle)
                    var o: [Field] = [.int("handle", item.handle),
                                      .code("properties", d.properties.rawValue, note: d.properties.names.joined(separator: ", ")),
                                      .int("valueHandle", valueHandle), uuidField("uuid", u)]
                    if let n = AssignedNumbers.name(of: u) { o.append(.text("name", n)) }
                    chars.append(.object(o))
                }
                f.append(Field("characteristics", .list(chars)))
            } else {
                for item in list where c.attributes[item.handle] == nil {
                    c.attributes[item.handle] = Attribute(uuid: type, characteristic: nil)
                }
            }
            return f

        case .findInformationResponse(_, let info):
            var descriptors: [FieldValue] = []
            for i in info {
                if c.attributes[i.handle] != nil { continue }
                if (0x2800...0x2803).contains(i.uuid.uuid16 ?? 0) {
                    c.attributes[i.handle] = Attribute(uuid: i.uuid, characteristic: nil)
                    continue
                }
                // The characteristic whose value handle comes last before the descriptor.
                let owner = c.valueHandleSet.last(before: i.handle).flatMap { c.valueHandles[$0] }
                c.attributes[i.handle] = Attribute(uuid: i.uuid, characteristic: owner)
                var o: [Field] = [.int("handle", i.handle), uuidField("uuid", i.uuid)]
                if let n = AssignedNumbers.name(of: i.uuid) { o.append(.text("name", n)) }
                if let owner { o.append(uuidField("characteristic", owner)) }
                descriptors.append(.object(o))
            }
            return descriptors.isEmpty ? nil : [Field("descriptors", .list(descriptors))]

        case let .errorResponse(_, attHandle, _):
            var f: [Field] = []
            if attHandle != 0 { f += describe(attHandle, in: c) }
            switch request {
            case .readByTypeRequest(_, _, let t)?, .readByGroupTypeRequest(_, _, let t)?:
                f.append(uuidField("requestType", t))
            default: break
            }
            return f.isEmpty ? nil : f

        case let .readRequest(h), let .readBlobRequest(h, _), let .prepareWriteRequest(h, _, _),
             let .prepareWriteResponse(h, _, _), let .handleValueNotification(h, _), let .handleValueIndication(h, _):
            return describe(h, in: c)

        case let .writeRequest(h, value), let .writeCommand(h, value), let .signedWriteCommand(h, value, _):
            var f = describe(h, in: c)
            if c.attributes[h]?.uuid == BluetoothUUID(0x2902), let m = cccdMeaning(value) {
                f.append(.text("meaning", m))
            }
            return f

        case .readResponse, .readBlobResponse, .writeResponse:
            switch request {
            case let .readRequest(h)?, let .readBlobRequest(h, _)?, let .writeRequest(h, _)?:
                return describe(h, in: c)
            default: return nil
            }

        default:
            return nil
        }
    }

    private static func describe(_ handle: UInt16, in c: Connection) -> [Field] {
        guard let a = c.attributes[handle] else { return [.int("handle", handle)] }
        var f: [Field] = []
        f.reserveCapacity(1 + a.described.count + 1)
        f.append(.int("handle", handle))
        f += a.described
        return f
    }

    private static func uuidField(_ name: String, _ u: BluetoothUUID) -> Field { .text(name, u.description) }

    private static func cccdMeaning(_ value: [UInt8]) -> String? {
        guard value.count == 2 else { return nil }
        let v = UInt16(value[0]) | UInt16(value[1]) << 8
        switch v {
        case 0x0000: return "disable notifications and indications"
        case 0x0001: return "enable notifications"
        case 0x0002: return "enable indications"
        case 0x0003: return "enable notifications and indications"
        default: return "reserved value \(hexCode(v))"
        }
    }
}

/// A set of 16-bit attribute handles answering "the largest member below h" in constant time:
/// a bitmap of the handle space (1024 words) and a summary bitmap of its non-empty words (16
/// words), so a query looks at one word, at most 16 summary words, and one more word. 8 KiB,
/// allocated at the first insertion.
struct HandleSet {
    private var words: [UInt64] = []
    private var summary: [UInt64] = []

    mutating func insert(_ handle: UInt16) {
        if words.isEmpty {
            words = Array(repeating: 0, count: 1024)
            summary = Array(repeating: 0, count: 16)
        }
        let w = Int(handle) >> 6
        words[w] |= 1 << UInt64(handle & 63)
        summary[w >> 6] |= 1 << UInt64(w & 63)
    }

    /// The largest member smaller than `handle`.
    func last(before handle: UInt16) -> UInt16? {
        guard handle > 0, !words.isEmpty else { return nil }
        let x = Int(handle) - 1
        let w = x >> 6
        if let bit = Self.highestBit(words[w], atOrBelow: x & 63) { return UInt16(w << 6 | bit) }
        // The last non-empty word before w, from the summary.
        guard w > 0 else { return nil }
        var s = (w - 1) >> 6
        var found = Self.highestBit(summary[s], atOrBelow: (w - 1) & 63)
        while found == nil, s > 0 {
            s -= 1
            found = Self.highestBit(summary[s], atOrBelow: 63)
        }
        guard let sb = found else { return nil }
        let word = s << 6 | sb
        return UInt16(word << 6 | Self.highestBit(words[word], atOrBelow: 63)!)
    }

    /// Index of the highest set bit of `v` at or below `bit`, nil when there is none.
    private static func highestBit(_ v: UInt64, atOrBelow bit: Int) -> Int? {
        let masked = bit == 63 ? v : v & ((1 << UInt64(bit + 1)) - 1)
        return masked == 0 ? nil : 63 - masked.leadingZeroBitCount
    }
}
