import HCI
import Capture
import ATT
import GATT

/// `dump --attributes`: the attribute table of each GATT server the capture shows, as far as
/// its traffic reveals it (Wireshark's "ATT Server Attributes"): services from Read By Group
/// Type and Find By Type Value responses, characteristic declarations from Read By Type
/// (0x2803) responses, descriptors from Find Information responses, values from Read (Blob),
/// Read By Type, Read Multiple Variable responses and notifications, and what Error Responses
/// to reads and writes reveal of the permissions.
public struct ServerAttributes: Sendable {
    /// The connection handle of the link the server was reached on.
    public var connection: UInt16
    /// Which way the server's PDUs went in the capture: `.received` when the capture's peer
    /// served them, `.sent` when the capturing host did (nil: a capture without directions).
    public var serverDirection: Direction?
    public var tree: [GATTRemoteServiceTree]
    /// The value last read of each handle (a value only ever notified or indicated when none
    /// was read), at most `ServerAttributes.maximumValueLength` octets.
    public var values: [UInt16: [UInt8]]
    /// The Error Responses a read (`read`) or a write (`write`) of a handle got.
    public var readRefusals: [UInt16: ATTErrorCode]
    public var writeRefusals: [UInt16: ATTErrorCode]
    /// Handles with a value or a refusal that the tree does not show (no discovered
    /// characteristic value or descriptor: the client had the database cached, or the capture
    /// started after discovery).
    public var unplaced: [UInt16]

    /// The longest value kept: what Read Blob's 16-bit offset reaches. Core v5.4 Vol 3 Part F
    /// 3.2.9 allows 512 octets, but some devices serve more, and a clone serves what the
    /// original did (as `peripheral --gatt` takes it).
    public static let maximumValueLength = 65535
}

/// Collects `ServerAttributes` while the decoder reads the capture. Bounded: at most
/// `maxTables` servers (a connection handle reused after a disconnection is a new server),
/// handles are 16-bit, and values are cut at 65535 octets with at most `maxValueOctets` in all.
struct AttributeCollector {
    static let maxTables = 64
    static let maxValueOctets = 8 << 20

    struct Table {
        var connection: UInt16
        var serverDirection: Direction?
        var services: [UInt16: (end: UInt16, uuid: BluetoothUUID, primary: Bool)] = [:]
        var includes: [UInt16: BluetoothUUID] = [:]
        var declarations: [UInt16: GATTCharacteristicDeclaration] = [:]
        var descriptors: [UInt16: BluetoothUUID] = [:]
        var read: [UInt16: [UInt8]] = [:]
        var notified: [UInt16: [UInt8]] = [:]
        var readRefusals: [UInt16: ATTErrorCode] = [:]
        var writeRefusals: [UInt16: ATTErrorCode] = [:]
    }

    private struct Key: Hashable {
        var connection: UInt16
        var serverDirection: Direction?
    }

    private var open: [Key: Int] = [:]
    private var tables: [Table] = []
    private var valueOctets = 0

    /// The connection ended: its servers' tables are complete; a new link on the same handle
    /// starts new ones.
    mutating func reset(connection: UInt16) {
        open = open.filter { $0.key.connection != connection }
    }

    /// One ATT PDU of `connection` going `direction`, with the request it answers (responses).
    mutating func att(_ pdu: ATTPDU, connection: UInt16, direction: Direction?, request: ATTPDU?) {
        let fromServer = pdu.opcode.isResponse || pdu.opcode == .errorResponse
            || pdu.opcode == .handleValueNotification || pdu.opcode == .handleValueIndication
            || pdu.opcode == .multipleHandleValueNotification
        guard fromServer else { return }
        let key = Key(connection: connection, serverDirection: direction)
        let index: Int
        if let i = open[key] {
            index = i
        } else {
            guard tables.count < Self.maxTables else { return }
            index = tables.count
            tables.append(Table(connection: connection, serverDirection: direction))
            open[key] = index
        }
        Self.learn(pdu, request: request, in: &tables[index], budget: &valueOctets)
    }

    private static func learn(_ pdu: ATTPDU, request: ATTPDU?, in t: inout Table, budget: inout Int) {
        switch pdu {
        case .readByGroupTypeResponse(let groups):
            guard case .readByGroupTypeRequest(_, _, let type)? = request,
                  type == GATTUUID.primaryService || type == GATTUUID.secondaryService else { return }
            for g in groups {
                guard let uuid = BluetoothUUID(littleEndian: g.value) else { continue }
                t.services[g.handle] = (g.endGroupHandle, uuid, type == GATTUUID.primaryService)
            }
        case .findByTypeValueResponse(let found):
            guard case let .findByTypeValueRequest(_, _, type, value)? = request,
                  type == 0x2800 || type == 0x2801, let uuid = BluetoothUUID(littleEndian: value) else { return }
            for f in found { t.services[f.foundAttributeHandle] = (f.groupEndHandle, uuid, type == 0x2800) }
        case .readByTypeResponse(let items):
            guard case .readByTypeRequest(_, _, let type)? = request else { return }
            for item in items {
                if type == GATTUUID.characteristic {
                    if let d = try? GATTCharacteristicDeclaration(value: item.value) { t.declarations[item.handle] = d }
                } else if type == GATTUUID.include {
                    // Included service declaration: start, end, then the 16-bit UUID when it has one
                    // (Core v5.4 Vol 3 Part G 3.2).
                    if item.value.count == 6, let uuid = BluetoothUUID(littleEndian: Array(item.value[4...])) { t.includes[item.handle] = uuid }
                } else {
                    store(item.value, at: item.handle, in: &t.read, budget: &budget)
                }
            }
        case .findInformationResponse(_, let information):
            for i in information where !(0x2800...0x2803).contains(i.uuid.uuid16 ?? 0) { t.descriptors[i.handle] = i.uuid }
        case .readResponse(let value):
            guard case .readRequest(let handle)? = request else { return }
            store(value, at: handle, in: &t.read, budget: &budget)
        case .readBlobResponse(let value):
            guard case let .readBlobRequest(handle, offset)? = request else { return }
            // The parts of a long read, in order (Core v5.4 Vol 3 Part G 4.8.3); a part that does
            // not continue what was read restarts nothing.
            let have = t.read[handle] ?? []
            guard Int(offset) == have.count else { return }
            store(have + value, at: handle, in: &t.read, budget: &budget)
        case .readMultipleVariableResponse(let values):
            guard case .readMultipleVariableRequest(let handles)? = request else { return }
            for (handle, v) in zip(handles, values) where Int(v.length) == v.value.count { store(v.value, at: handle, in: &t.read, budget: &budget) }
        case let .handleValueNotification(handle, value), let .handleValueIndication(handle, value):
            store(value, at: handle, in: &t.notified, budget: &budget)
        case .multipleHandleValueNotification(let items):
            for item in items { store(item.value, at: item.handle, in: &t.notified, budget: &budget) }
        case let .errorResponse(opcode, handle, code):
            guard handle != 0 else { return }
            switch opcode {
            case .readRequest, .readBlobRequest: t.readRefusals[handle] = code
            case .writeRequest, .prepareWriteRequest: t.writeRefusals[handle] = code
            default: break
            }
        default:
            break
        }
    }

    /// Keeps `value` (cut at `maximumValueLength`) for `handle` while the octets kept stay within the budget.
    private static func store(_ value: [UInt8], at handle: UInt16, in values: inout [UInt16: [UInt8]], budget: inout Int) {
        let cut = value.count > ServerAttributes.maximumValueLength ? Array(value.prefix(ServerAttributes.maximumValueLength)) : value
        let previous = values[handle]?.count ?? 0
        guard budget - previous + cut.count <= maxValueOctets else { return }
        budget += cut.count - previous
        values[handle] = cut
    }

    /// Every server seen, in the order their first PDU came, with what is known placed in its
    /// services. Linear in what was learnt after sorting (a crafted capture may carry every
    /// handle): services, declarations and descriptors are swept in handle order together.
    func finished() -> [ServerAttributes] {
        tables.map { t in
            let starts = t.services.keys.sorted()
            let declarations = t.declarations.keys.sorted()
            let descriptors = t.descriptors.keys.sorted()
            let includes = t.includes.keys.sorted()
            var serviceByUUID: [BluetoothUUID: UInt16] = [:]
            for start in starts where serviceByUUID[t.services[start]!.uuid] == nil { serviceByUUID[t.services[start]!.uuid] = start }
            var di = 0, dsi = 0, ii = 0
            var trees: [GATTRemoteServiceTree] = []
            var placed = Set<UInt16>()
            for (i, start) in starts.enumerated() {
                let s = t.services[start]!
                // A group's end as the server gave it, but not past the next service's start.
                let next = i + 1 < starts.count ? starts[i + 1] - 1 : 0xFFFF
                let end = max(start, min(s.end, next))
                placed.insert(start)
                var included: [GATTRemoteService] = []
                while ii < includes.count, includes[ii] <= end {
                    let h = includes[ii]
                    ii += 1
                    guard h > start, let uuid = t.includes[h] else { continue }
                    placed.insert(h)
                    // Its range when the capture discovered it as a service too.
                    let found = serviceByUUID[uuid].flatMap { at in t.services[at].map { (at, $0) } }
                    included.append(GATTRemoteService(uuid: uuid, primary: found?.1.primary ?? false,
                                                      startHandle: found?.0 ?? 0, endHandle: found?.1.end ?? 0))
                }
                var characteristics: [GATTRemoteServiceTree.Characteristic] = []
                while di < declarations.count, declarations[di] <= end {
                    let handle = declarations[di]
                    di += 1
                    guard handle > start, let d = t.declarations[handle] else { continue }
                    let last = di < declarations.count && declarations[di] <= end ? declarations[di] - 1 : end
                    var owned: [GATTRemoteDescriptor] = []
                    while dsi < descriptors.count, descriptors[dsi] <= last {
                        let h = descriptors[dsi]
                        dsi += 1
                        guard h > d.valueHandle, let uuid = t.descriptors[h] else { continue }
                        owned.append(GATTRemoteDescriptor(uuid: uuid, handle: h))
                        placed.insert(h)
                    }
                    placed.insert(handle)
                    placed.insert(d.valueHandle)
                    characteristics.append(.init(characteristic: GATTRemoteCharacteristic(
                        uuid: d.uuid, declarationHandle: handle, valueHandle: d.valueHandle, properties: d.properties, endHandle: last),
                                                 descriptors: owned))
                }
                // Descriptors before the service's first characteristic belong to none.
                while dsi < descriptors.count, descriptors[dsi] <= end { dsi += 1 }
                trees.append(GATTRemoteServiceTree(service: GATTRemoteService(uuid: s.uuid, primary: s.primary, startHandle: start, endHandle: end),
                                                   includedServices: included, characteristics: characteristics))
            }
            var values = t.notified
            values.merge(t.read) { _, read in read }
            let known = Set(values.keys).union(t.readRefusals.keys).union(t.writeRefusals.keys)
            return ServerAttributes(connection: t.connection, serverDirection: t.serverDirection, tree: trees, values: values,
                                    readRefusals: t.readRefusals, writeRefusals: t.writeRefusals,
                                    unplaced: known.subtracting(placed).sorted())
        }
    }
}
