import HCI
import ATT

// GATTCharacteristicProperties (Core Vol 3 Part G 3.3.1.1) is generated from Tools/pdl/gatt-codes.pdl.

/// Attribute permissions (Core Vol 3 Part F 3.2.5): access plus the security each access needs.
public struct GATTPermissions: OptionSet, Sendable, Hashable {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let readable = GATTPermissions(rawValue: 1 << 0)
    public static let writable = GATTPermissions(rawValue: 1 << 1)
    public static let readEncryptionRequired = GATTPermissions(rawValue: 1 << 2)
    public static let readAuthenticationRequired = GATTPermissions(rawValue: 1 << 3)
    public static let readAuthorizationRequired = GATTPermissions(rawValue: 1 << 4)
    public static let writeEncryptionRequired = GATTPermissions(rawValue: 1 << 5)
    public static let writeAuthenticationRequired = GATTPermissions(rawValue: 1 << 6)
    public static let writeAuthorizationRequired = GATTPermissions(rawValue: 1 << 7)

    public static let readWrite: GATTPermissions = [.readable, .writable]

    /// The names of CLI.md's `--gatt FILE` `"permissions"` lists; each encrypted / authenticated
    /// name implies the plain access.
    public static let namedPermissions: [(name: String, permissions: GATTPermissions)] = [
        ("read", .readable), ("write", .writable),
        ("readEncrypted", [.readable, .readEncryptionRequired]), ("writeEncrypted", [.writable, .writeEncryptionRequired]),
        ("readAuthenticated", [.readable, .readAuthenticationRequired]),
        ("writeAuthenticated", [.writable, .writeAuthenticationRequired]),
    ]

    /// Permissions from those names; throws the first unknown name.
    public init(names: [String]) throws(UnknownPermissionName) {
        self = []
        for n in names {
            guard let p = Self.namedPermissions.first(where: { $0.name == n })?.permissions else {
                throw UnknownPermissionName(name: n)
            }
            formUnion(p)
        }
    }

    public struct UnknownPermissionName: Error, Equatable, CustomStringConvertible {
        public var name: String
        public var description: String {
            "unknown permission '\(name)' (use \(GATTPermissions.namedPermissions.map(\.name).joined(separator: ", ")))"
        }
    }

    /// What `properties` imply: readable with `.read`, writable with `.write` / `.writeWithoutResponse`.
    public init(for properties: GATTCharacteristicProperties) {
        self = []
        if properties.contains(.read) { insert(.readable) }
        if !properties.isDisjoint(with: [.write, .writeWithoutResponse, .authenticatedSignedWrites]) { insert(.writable) }
    }
}

/// Who is asking, for read and write handlers.
public struct GATTRequestContext: Sendable {
    public var peer: ATTPeer
    public var security: ATTSecurity
    /// Offset of a Read Blob / prepared write (informative: read handlers return the whole value).
    public var offset: Int
}

/// Returns the attribute's whole current value; the server slices it for Read Blob and the MTU.
/// Throw `ATTError` (e.g. `ATTError.rejecting(.readNotPermitted)`) to answer with its code.
public typealias GATTReadHandler = @Sendable (_ context: GATTRequestContext) throws -> [UInt8]
/// Accepts a written value (for a long write: the assembled value at `context.offset`).
public typealias GATTWriteHandler = @Sendable (_ context: GATTRequestContext, _ value: [UInt8]) throws -> Void

/// A read handler that may wait (for a database, another device, a person): it runs off the
/// host's loop, so every other link is served meanwhile, and the bearer holds this peer's later
/// PDUs until it answers. It must answer within `ATTBearerConfiguration.asyncHandlerTimeout`
/// (25 s), else the client gets Unlikely Error; it is then cancelled. CoreBluetooth's
/// `peripheralManager(_:didReceiveRead:)` with a later `respond(to:withResult:)`.
public typealias GATTAsyncReadHandler = @Sendable (_ context: GATTRequestContext) async throws -> [UInt8]
/// A write handler that may wait; as `GATTAsyncReadHandler`. A Write Request is answered when it
/// returns (an Error Response with its `ATTError`'s code when it throws).
public typealias GATTAsyncWriteHandler = @Sendable (_ context: GATTRequestContext, _ value: [UInt8]) async throws -> Void

extension ATTError {
    /// An error for an application handler to throw: the server fills in opcode and handle.
    public static func rejecting(_ code: ATTErrorCode) -> ATTError { ATTError(code, requestOpcode: ATTOpcode(0)) }
}

/// Where an attribute's value comes from.
public enum GATTValueSource: Sendable {
    /// Kept by the server; a permitted write replaces it (shared by all peers).
    case stored([UInt8])
    /// Produced/consumed by the application. A nil handler answers Read/Write Not Permitted.
    case handlers(read: GATTReadHandler?, write: GATTWriteHandler?)
    /// Produced/consumed by application code that may wait (`GATTAsyncReadHandler`).
    case asyncHandlers(read: GATTAsyncReadHandler?, write: GATTAsyncWriteHandler?)
}

/// A characteristic descriptor (Core Vol 3 Part G 3.3.3).
public struct GATTDescriptor: Sendable {
    public var uuid: BluetoothUUID
    public var permissions: GATTPermissions
    public var value: GATTValueSource
    public var maximumLength: Int
    public var minimumKeySize: Int
    /// Where to serve it; nil: assigned (see `GATTService.startHandle`).
    public var handle: UInt16? = nil

    public init(uuid: BluetoothUUID, permissions: GATTPermissions = .readable, value: [UInt8],
                maximumLength: Int = 512, minimumKeySize: Int = 7) {
        self.uuid = uuid; self.permissions = permissions; self.value = .stored(value)
        self.maximumLength = maximumLength; self.minimumKeySize = minimumKeySize
    }

    public init(uuid: BluetoothUUID, permissions: GATTPermissions, read: GATTReadHandler?, write: GATTWriteHandler? = nil,
                maximumLength: Int = 512, minimumKeySize: Int = 7) {
        self.uuid = uuid; self.permissions = permissions; self.value = .handlers(read: read, write: write)
        self.maximumLength = maximumLength; self.minimumKeySize = minimumKeySize
    }

    /// A descriptor whose value application code produces and consumes asynchronously.
    public init(uuid: BluetoothUUID, permissions: GATTPermissions, asyncRead: GATTAsyncReadHandler?,
                asyncWrite: GATTAsyncWriteHandler? = nil, maximumLength: Int = 512, minimumKeySize: Int = 7) {
        self.uuid = uuid; self.permissions = permissions; self.value = .asyncHandlers(read: asyncRead, write: asyncWrite)
        self.maximumLength = maximumLength; self.minimumKeySize = minimumKeySize
    }

    /// Characteristic User Description (0x2901): UTF-8 text, read-only unless `writable`.
    public static func userDescription(_ text: String, writable: Bool = false) -> GATTDescriptor {
        GATTDescriptor(uuid: GATTUUID.characteristicUserDescription,
                       permissions: writable ? .readWrite : .readable, value: Array(text.utf8))
    }

    /// Characteristic Extended Properties (0x2900): bit 0 Reliable Write, bit 1 Writable Auxiliaries.
    public static func extendedProperties(reliableWrite: Bool, writableAuxiliaries: Bool = false) -> GATTDescriptor {
        let bits: UInt16 = (reliableWrite ? 1 : 0) | (writableAuxiliaries ? 2 : 0)
        return GATTDescriptor(uuid: GATTUUID.characteristicExtendedProperties, value: [UInt8(bits & 0xFF), UInt8(bits >> 8)])
    }
}

/// A characteristic: declaration, value, then descriptors (a CCCD is added for notify/indicate;
/// an Extended Properties descriptor for `.extendedProperties` when none is given).
public struct GATTCharacteristic: Sendable {
    public var uuid: BluetoothUUID
    public var properties: GATTCharacteristicProperties
    public var permissions: GATTPermissions
    public var value: GATTValueSource
    public var descriptors: [GATTDescriptor]
    /// Longest value a write may leave (Invalid Attribute Value Length beyond it).
    public var maximumLength: Int
    /// Key size (octets) needed when encryption is required (Encryption Key Size Too Short below it).
    public var minimumKeySize: Int
    /// Where to serve its declaration (the value follows at the next handle); nil: assigned
    /// (see `GATTService.startHandle`).
    public var declarationHandle: UInt16? = nil

    /// A characteristic whose value the server keeps. `permissions` default to what `properties` imply.
    public init(uuid: BluetoothUUID, properties: GATTCharacteristicProperties, permissions: GATTPermissions? = nil,
                value: [UInt8] = [], maximumLength: Int = 512, minimumKeySize: Int = 7,
                descriptors: [GATTDescriptor] = []) {
        self.uuid = uuid; self.properties = properties
        self.permissions = permissions ?? GATTPermissions(for: properties)
        self.value = .stored(value); self.descriptors = descriptors
        self.maximumLength = maximumLength; self.minimumKeySize = minimumKeySize
    }

    /// A characteristic whose value the application produces and consumes.
    public init(uuid: BluetoothUUID, properties: GATTCharacteristicProperties, permissions: GATTPermissions? = nil,
                read: GATTReadHandler?, write: GATTWriteHandler? = nil, maximumLength: Int = 512,
                minimumKeySize: Int = 7, descriptors: [GATTDescriptor] = []) {
        self.uuid = uuid; self.properties = properties
        self.permissions = permissions ?? GATTPermissions(for: properties)
        self.value = .handlers(read: read, write: write); self.descriptors = descriptors
        self.maximumLength = maximumLength; self.minimumKeySize = minimumKeySize
    }

    /// A characteristic whose value application code produces and consumes asynchronously
    /// (`GATTAsyncReadHandler`): the handlers may wait without holding up other links.
    ///
    /// ```swift
    /// GATTCharacteristic(uuid: 0xFFF4, properties: [.read, .write],
    ///                    asyncRead: { _ in try await sensor.sample() },
    ///                    asyncWrite: { _, value in try await door.set(value) })
    /// ```
    public init(uuid: BluetoothUUID, properties: GATTCharacteristicProperties, permissions: GATTPermissions? = nil,
                asyncRead: GATTAsyncReadHandler?, asyncWrite: GATTAsyncWriteHandler? = nil, maximumLength: Int = 512,
                minimumKeySize: Int = 7, descriptors: [GATTDescriptor] = []) {
        self.uuid = uuid; self.properties = properties
        self.permissions = permissions ?? GATTPermissions(for: properties)
        self.value = .asyncHandlers(read: asyncRead, write: asyncWrite); self.descriptors = descriptors
        self.maximumLength = maximumLength; self.minimumKeySize = minimumKeySize
    }
}

/// A service. `includes` name other services of the same server by UUID (the first with that UUID).
public struct GATTService: Sendable {
    public var uuid: BluetoothUUID
    public var primary: Bool
    public var includes: [BluetoothUUID]
    public var characteristics: [GATTCharacteristic]
    /// Explicit handles: the service's group (its include declarations follow `startHandle`).
    /// When every service, characteristic and descriptor of a server has one and they are
    /// consistent (`GATTServer.explicitHandleProblem`), they are served as given; otherwise
    /// (and when none has one) handles are assigned in order from 1.
    public var startHandle: UInt16? = nil
    public var endHandle: UInt16? = nil

    public init(uuid: BluetoothUUID, primary: Bool = true, includes: [BluetoothUUID] = [],
                characteristics: [GATTCharacteristic]) {
        self.uuid = uuid; self.primary = primary; self.includes = includes; self.characteristics = characteristics
    }
}

/// 16-bit UUIDs GATT itself uses (Assigned Numbers 3.4–3.8); the constants are generated with
/// their names from Tools/pdl/gatt-codes.pdl.
public enum GATTUUID {}

// MARK: - The attribute table

/// One attribute of the server's table.
struct Attribute: Sendable {
    enum Kind: Sendable {
        /// Declarations and fixed values: never written.
        case constant
        case stored
        case handlers(read: GATTReadHandler?, write: GATTWriteHandler?)
        case asyncHandlers(read: GATTAsyncReadHandler?, write: GATTAsyncWriteHandler?)
        /// A CCCD: per-peer value.
        case cccd(valueHandle: UInt16, properties: GATTCharacteristicProperties)
        /// Client Supported Features: per-peer value.
        case clientFeatures
    }
    let handle: UInt16
    let type: BluetoothUUID
    var kind: Kind
    /// Current value for `.constant` / `.stored`.
    var value: [UInt8]
    let permissions: GATTPermissions
    let maximumLength: Int
    let minimumKeySize: Int
    /// Service declarations: last handle of the group. Others: their own handle.
    var groupEnd: UInt16
    /// The characteristic a value or descriptor belongs to (its UUID), for application events.
    let characteristicUUID: BluetoothUUID?
    let isCharacteristicValue: Bool
}

/// Where to push for one characteristic.
struct CharacteristicEntry: Sendable {
    let uuid: BluetoothUUID
    let valueHandle: UInt16
    let cccdHandle: UInt16?
    let properties: GATTCharacteristicProperties
}

/// The built table, in handle order (attribute `h` at index `h - 1` unless handles are explicit
/// and have gaps: see `index(_:)`).
struct AttributeTable: Sendable {
    var attributes: [Attribute] = []
    var characteristics: [CharacteristicEntry] = []
    var serviceChangedHandle: UInt16 = 0
    /// The Database Hash (Core v5.4 Vol 3 Part G 7.3), empty until `computeHashIfNeeded()`.
    private(set) var hash: [UInt8] = []
    /// Some attribute's value comes from asynchronous handlers (`GATTValueSource.asyncHandlers`).
    private(set) var hasAsyncHandlers = false

    init(deviceName: String, appearance: UInt16, services: [GATTService], serverFeatures: [UInt8] = []) {
        let all = Self.ownServices(deviceName: deviceName, appearance: appearance, serverFeatures: serverFeatures) + services
        // Where each service's attributes go, in the order pass 2 adds them.
        let layout = Self.explicitLayout(services, serverFeatures: serverFeatures).layout ?? Self.sequentialLayout(all)
        let starts = layout.map { $0.handles[0] }
        let ends = layout.map(\.end)
        // Pass 2: the attributes.
        var planned: [UInt16] = []  // the current service's handles, consumed by add()
        func add(_ type: BluetoothUUID, _ kind: Attribute.Kind, _ value: [UInt8], _ perms: GATTPermissions,
                 maxLength: Int = 512, keySize: Int = 7, characteristic: BluetoothUUID? = nil, isValue: Bool = false) {
            let handle = planned.removeFirst()
            attributes.append(Attribute(handle: handle, type: type, kind: kind, value: value, permissions: perms,
                                        maximumLength: maxLength, minimumKeySize: keySize, groupEnd: handle,
                                        characteristicUUID: characteristic, isCharacteristicValue: isValue))
        }
        for (i, s) in all.enumerated() {
            planned = layout[i].handles
            add(s.primary ? GATTUUID.primaryService : GATTUUID.secondaryService, .constant,
                s.uuid.littleEndianFor16Or128, .readable)
            attributes[attributes.count - 1].groupEnd = ends[i]
            for inc in s.includes {
                var v = ByteWriter(capacity: 6)
                if let j = all.firstIndex(where: { $0.uuid == inc }) {
                    v.u16(starts[j]); v.u16(ends[j])
                    if all[j].uuid.is16Bit { v.append(all[j].uuid.littleEndian) }
                }
                add(GATTUUID.include, .constant, v.bytes, .readable)
            }
            for c in s.characteristics {
                let declHandle = planned[0]
                let decl = GATTCharacteristicDeclaration(properties: c.properties, valueHandle: declHandle + 1, uuid: c.uuid)
                add(GATTUUID.characteristic, .constant, decl.value, .readable)
                let valueHandle = planned[0]
                switch c.value {
                case .stored(let v):
                    add(c.uuid, .stored, v, c.permissions, maxLength: c.maximumLength, keySize: c.minimumKeySize,
                        characteristic: c.uuid, isValue: true)
                case .handlers(let r, let w):
                    add(c.uuid, .handlers(read: r, write: w), [], c.permissions, maxLength: c.maximumLength,
                        keySize: c.minimumKeySize, characteristic: c.uuid, isValue: true)
                case .asyncHandlers(let r, let w):
                    add(c.uuid, .asyncHandlers(read: r, write: w), [], c.permissions, maxLength: c.maximumLength,
                        keySize: c.minimumKeySize, characteristic: c.uuid, isValue: true)
                }
                if c.uuid == GATTUUID.clientSupportedFeatures { attributes[attributes.count - 1].kind = .clientFeatures }
                if c.uuid == GATTUUID.serviceChanged && s.uuid == GATTUUID.genericAttribute { serviceChangedHandle = valueHandle }
                var cccd: UInt16? = nil
                for d in Self.descriptors(of: c) {
                    if d.uuid == GATTUUID.clientCharacteristicConfiguration {
                        cccd = planned[0]
                        // The given permissions (e.g. writable only when encrypted); the default one is .readWrite.
                        add(d.uuid, .cccd(valueHandle: valueHandle, properties: c.properties), [0, 0], d.permissions,
                            maxLength: 2, characteristic: c.uuid)
                        continue
                    }
                    switch d.value {
                    case .stored(let v):
                        add(d.uuid, .stored, v, d.permissions, maxLength: d.maximumLength, keySize: d.minimumKeySize,
                            characteristic: c.uuid)
                    case .handlers(let r, let w):
                        add(d.uuid, .handlers(read: r, write: w), [], d.permissions, maxLength: d.maximumLength,
                            keySize: d.minimumKeySize, characteristic: c.uuid)
                    case .asyncHandlers(let r, let w):
                        add(d.uuid, .asyncHandlers(read: r, write: w), [], d.permissions, maxLength: d.maximumLength,
                            keySize: d.minimumKeySize, characteristic: c.uuid)
                    }
                }
                characteristics.append(CharacteristicEntry(uuid: c.uuid, valueHandle: valueHandle, cccdHandle: cccd,
                                                           properties: c.properties))
            }
        }
        // The server's own services may sit after the application's (explicit handles).
        attributes.sort { $0.handle < $1.handle }
        hasAsyncHandlers = attributes.contains { if case .asyncHandlers = $0.kind { true } else { false } }
    }

    /// Computes the Database Hash and writes it into its characteristic value, once. Not done
    /// when the table is built: the AES-CMAC starts OpenSSL (about 1.8 MB of resident code), which
    /// an idle server never needs (docs/performance.md, idle RSS). The hash covers declarations
    /// and descriptors' handles and types only, which never change after the table is built
    /// (Vol 3 Part G 7.3.1), so computing it later gives the same octets.
    mutating func computeHashIfNeeded() {
        guard hash.isEmpty else { return }
        hash = GATTDatabaseHash.compute(attributes.map { ($0.handle, $0.type, $0.value) })
        if let i = attributes.firstIndex(where: { $0.type == GATTUUID.databaseHash && $0.isCharacteristicValue }) {
            attributes[i].value = hash
        }
    }

    /// Generic Access (Device Name, Appearance) and Generic Attribute (Service Changed with its
    /// CCCD, Client Supported Features, Database Hash, and with `serverFeatures` Server Supported
    /// Features, Core v5.4 Vol 3 Part G 7.4): every server's own services.
    static func ownServices(deviceName: String, appearance: UInt16, serverFeatures: [UInt8] = []) -> [GATTService] {
        let features = serverFeatures.isEmpty ? [] : [GATTCharacteristic(uuid: GATTUUID.serverSupportedFeatures, properties: .read, value: serverFeatures)]
        return [
            GATTService(uuid: GATTUUID.genericAccess, characteristics: [
                GATTCharacteristic(uuid: GATTUUID.deviceName, properties: .read, value: Array(deviceName.utf8)),
                GATTCharacteristic(uuid: GATTUUID.appearance, properties: .read,
                                   value: [UInt8(appearance & 0xFF), UInt8(appearance >> 8)]),
            ]),
            GATTService(uuid: GATTUUID.genericAttribute, characteristics: [
                GATTCharacteristic(uuid: GATTUUID.serviceChanged, properties: .indicate, permissions: [],
                                   value: [0, 0, 0, 0]),
                GATTCharacteristic(uuid: GATTUUID.clientSupportedFeatures, properties: [.read, .write], value: [0]),
                GATTCharacteristic(uuid: GATTUUID.databaseHash, properties: .read, value: [UInt8](repeating: 0, count: 16)),
            ] + features),
        ]
    }

    /// One service's attribute handles in the order the table adds them (declaration, include
    /// declarations, then per characteristic: declaration, value, `descriptors(of:)`), and the
    /// end of its group.
    struct ServiceLayout: Sendable {
        var handles: [UInt16]
        var end: UInt16
    }

    static func attributeCount(_ s: GATTService) -> Int {
        s.characteristics.reduce(1 + s.includes.count) { $0 + 2 + descriptors(of: $1).count }
    }

    /// Handles from 1, in order, with no gaps.
    static func sequentialLayout(_ services: [GATTService]) -> [ServiceLayout] {
        var next = 1
        var out: [ServiceLayout] = []
        for s in services {
            let count = attributeCount(s)
            precondition(next + count - 1 <= 0xFFFF, "GATT database larger than 65535 attributes")
            out.append(ServiceLayout(handles: (next..<(next + count)).map { UInt16($0) }, end: UInt16(next + count - 1)))
            next += count
        }
        return out
    }

    /// The layout of the server's own services followed by the application's `services` at
    /// their explicit handles, or why those cannot be served (nil layout and nil problem: the
    /// services have no handles). Consistent means (Core v5.4 Vol 3 Part F 3.2.2: handles are
    /// non-zero and ordered; Part G 3.3: a characteristic's value follows its declaration,
    /// its descriptors follow the value, all within the service's group): every service,
    /// characteristic and descriptor has a handle; groups do not overlap and increase; inside a
    /// group, handles increase. The server's own services (`ownServices`, 13 attributes) take
    /// handles 1… when the first service starts after them, else the handles after the last
    /// group.
    static func explicitLayout(_ services: [GATTService], serverFeatures: [UInt8] = []) -> (layout: [ServiceLayout]?, problem: String?) {
        guard services.contains(where: { $0.startHandle != nil || $0.endHandle != nil }) else { return (nil, nil) }
        var out: [ServiceLayout] = []
        var previousEnd = 0
        for (si, s) in services.enumerated() {
            let name = "service \(si) (\(s.uuid))"
            guard let start = s.startHandle, let end = s.endHandle else { return (nil, "\(name) has no start or end handle") }
            guard start > previousEnd else {
                return (nil, previousEnd == 0 ? "\(name) starts at handle 0" : "\(name) starts at \(start), inside or before the previous service (which ends at \(previousEnd))")
            }
            guard start <= end else { return (nil, "\(name) ends at \(end), before its start \(start)") }
            var handles: [UInt16] = [start]
            var last = Int(start)
            // Include declarations carry no handle of their own in the file: right after the
            // service declaration.
            for _ in s.includes { last += 1; handles.append(UInt16(clamping: last)) }
            func place(_ h: UInt16?, _ what: String) -> String? {
                guard let h else { return "\(what) has no handle" }
                guard Int(h) > last else { return "\(what) is at \(h), not after handle \(last) of the attribute before it" }
                guard h <= end else { return "\(what) is at \(h), after the end \(end) of \(name)" }
                handles.append(h)
                last = Int(h)
                return nil
            }
            for (ci, c) in s.characteristics.enumerated() {
                let what = "characteristic \(ci) (\(c.uuid)) of \(name)"
                if let p = place(c.declarationHandle, what) { return (nil, p) }
                if let p = place(c.declarationHandle.flatMap { $0 == 0xFFFF ? nil : $0 + 1 }, "the value of \(what)") { return (nil, p) }
                for (di, d) in descriptors(of: c).enumerated() {
                    let dname = c.descriptors.contains(where: { $0.uuid == d.uuid }) ? "descriptor \(d.uuid)" : "its \(d.uuid) (which the server adds)"
                    if let p = place(d.handle, "\(dname) #\(di) of \(what)") { return (nil, p) }
                }
            }
            out.append(ServiceLayout(handles: handles, end: end))
            previousEnd = Int(end)
        }
        let own = ownServices(deviceName: "", appearance: 0, serverFeatures: serverFeatures)
        let ownCount = own.reduce(0) { $0 + attributeCount($1) }
        let first = Int(services.first?.startHandle ?? 1)
        let ownStart = first > ownCount ? 1 : previousEnd + 1
        guard ownStart + ownCount - 1 <= 0xFFFF else {
            return (nil, "no room for the server's own 1800 and 1801 services (\(ownCount) handles) before handle \(first) or after \(previousEnd)")
        }
        let ownLayout = sequentialLayout(own).map { l in
            ServiceLayout(handles: l.handles.map { $0 + UInt16(ownStart - 1) }, end: l.end + UInt16(ownStart - 1))
        }
        return (ownLayout + out, nil)
    }

    /// Descriptors in handle order: CCCD first (when notify/indicate), Extended Properties when
    /// flagged and not given, then the application's.
    static func descriptors(of c: GATTCharacteristic) -> [GATTDescriptor] {
        var out: [GATTDescriptor] = []
        let hasCCCD = c.descriptors.contains { $0.uuid == GATTUUID.clientCharacteristicConfiguration }
        if !c.properties.isDisjoint(with: [.notify, .indicate]) && !hasCCCD {
            out.append(GATTDescriptor(uuid: GATTUUID.clientCharacteristicConfiguration, permissions: .readWrite, value: [0, 0]))
        }
        if c.properties.contains(.extendedProperties)
            && !c.descriptors.contains(where: { $0.uuid == GATTUUID.characteristicExtendedProperties }) {
            out.append(.extendedProperties(reliableWrite: false))
        }
        return out + c.descriptors
    }

    /// The index of the attribute at `handle` (handles may have gaps: explicit handles).
    @inline(__always)
    func index(_ handle: UInt16) -> Int? {
        let i = Int(handle) - 1
        if i >= 0 && i < attributes.count && attributes[i].handle == handle { return i }  // no gaps before it
        let j = firstIndex(atOrAfter: Int(handle))
        return j < attributes.count && attributes[j].handle == handle ? j : nil
    }

    /// The index of the first attribute whose handle is `handle` or more (`attributes.count` if none).
    func firstIndex(atOrAfter handle: Int) -> Int {
        var low = 0, high = attributes.count
        while low < high {
            let mid = (low + high) / 2
            if Int(attributes[mid].handle) < handle { low = mid + 1 } else { high = mid }
        }
        return low
    }

    /// The indices of the attributes with handles in `start...end`.
    func indices(_ start: UInt16, _ end: UInt16) -> Range<Int> {
        firstIndex(atOrAfter: Int(start))..<firstIndex(atOrAfter: Int(end) + 1)
    }
}
