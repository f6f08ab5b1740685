import Foundation
import HCI

/// A GATT table in the `--gatt FILE` format of `ble-hci peripheral` (docs/cli.md, CLI.md), for
/// the CLI and for an application's fake peripheral (`BLETesting.FakePeripheral`) alike: the
/// shape of the central's `gatt` event, services → characteristics → descriptors with `uuid`,
/// `properties`, `value` (hex), and optionally `permissions` per attribute, `includes`
/// (service UUIDs) and `primary` per service. The data may be that object, or the central's
/// JSON lines as they are (the `gatt` line is used).
///
/// Generic Access (1800) and Generic Attribute (1801) are the server's own: taken from the
/// file only for the device name. CCCDs (2902) are per client: the file places them, but their
/// values are the server's (0 for each new client). Handles in the file (the `gatt` event's
/// `start`, `end`, `handle`, `valueHandle`) are kept when they are consistent (see
/// `GATTService.startHandle`; the server's own 1800 and 1801 services then take handles 1-13
/// when the first service starts after 13, else the handles after the last service); otherwise
/// the server assigns them in the file's order and `handleProblem` says why.
///
/// The data is untrusted: every problem is a ``GATTFileError`` naming the JSON path, never a trap.
public struct GATTFile: Sendable {
    /// The file's services, without 1800 and 1801, ready for `GATTServer` / `Peripheral.open`.
    public var services: [GATTService]
    /// The file's Device Name (1800 / 2a00), when it has one.
    public var deviceName: String?
    /// Why the file's handles are not served as given (nil: they are, or it has none).
    public var handleProblem: String?
    /// What is served although it is outside the spec (a value over 512 octets), each with its
    /// JSON path: "$.services[0].characteristics[1].value: 600 octets, over the 512 of ...".
    public var warnings: [String]

    /// Reads and parses the file at `path` (see ``init(data:warning:)``).
    public init(contentsOf path: String, warning: (String) -> Void = { _ in }) throws(GATTFileError) {
        guard let data = FileManager.default.contents(atPath: path) else { throw GATTFileError("(file)", "cannot read it") }
        try self.init(data: data, warning: warning)
    }

    /// Parses a table; `warning` hears each of `warnings` as it is found.
    public init(data: Data, warning: (String) -> Void = { _ in }) throws(GATTFileError) {
        typealias E = GATTFileError
        let root: Any
        if let whole = try? JSONSerialization.jsonObject(with: data) {
            root = whole
        } else {
            // JSON lines: the central's output; the `gatt` event is the table.
            let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
            let objects = lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            guard !objects.isEmpty else { throw E("(file)", "is neither JSON nor JSON lines") }
            guard let gatt = objects.first(where: { $0["event"] as? String == "gatt" }) else {
                throw E("(file)", "JSON lines without a {\"event\":\"gatt\",...} line (run the central with no action, or with --discover)")
            }
            root = gatt
        }
        guard let top = root as? [String: Any] else { throw E("$", "must be an object with \"services\"") }
        guard let services = top["services"] as? [Any] else { throw E("$.services", "missing, or not a list") }

        var warnings: [String] = []
        func uuid(_ value: Any?, _ at: String) throws(E) -> BluetoothUUID {
            guard let text = value as? String else { throw E(at, "missing, or not a string") }
            guard let u = BluetoothUUID(string: text) else { throw E(at, "'\(text)' is not a UUID (4 or 8 hex digits, or the dashed 128-bit form)") }
            return u
        }
        func bytes(_ value: Any?, _ at: String) throws(E) -> [UInt8]? {
            guard let value else { return nil }
            guard let text = value as? String, let b = [UInt8](hex: text) else { throw E(at, "must be a hex string like \"626c65\"") }
            // Core v5.4 Vol 3 Part F 3.2.9 allows 512 octets; some devices serve more (Bumble's
            // examples do), and a clone serves what the original did, up to what Read Blob's
            // 16-bit offset reaches.
            guard b.count <= 65535 else { throw E(at, "\(b.count) octets: more than Read Blob's 16-bit offset can reach") }
            if b.count > 512 {
                let w = "\(at): \(b.count) octets, over the 512 of Core v5.4 Vol 3 Part F 3.2.9; served as the original did"
                warnings.append(w)
                warning(w)
            }
            return b
        }
        func handle(_ value: Any?, _ at: String) throws(E) -> Int? {
            guard let value else { return nil }
            // Foundation reads JSON true/false as NSNumbers that also cast to Int (and 1 casts to
            // Bool): tell them apart by their type code ("c" for a boolean).
            guard let number = value as? NSNumber, String(cString: number.objCType) != "c", let n = value as? Int else {
                throw E(at, "must be an integer handle")
            }
            return n
        }
        // A handle outside 1...0xFFFF is not an error: the handles are then reassigned.
        var handleProblem: String? = nil
        func handle16(_ n: Int?, _ at: String) -> UInt16? {
            guard let n else { return nil }
            guard (1...0xFFFF).contains(n) else {
                if handleProblem == nil { handleProblem = "\(at) is \(n), not a handle (1 to 65535, Core v5.4 Vol 3 Part F 3.2.2)" }
                return nil
            }
            return UInt16(n)
        }
        func permissions(_ value: Any?, _ at: String) throws(E) -> GATTPermissions? {
            guard let value else { return nil }
            guard let names = value as? [Any] else { throw E(at, "must be a list of names") }
            var p: GATTPermissions = []
            // The names of the `"permissions"` lists (GATTPermissions.namedPermissions).
            let known = GATTPermissions.namedPermissions
            for (i, n) in names.enumerated() {
                guard let name = n as? String, let bits = known.first(where: { $0.name == name })?.permissions else {
                    throw E("\(at)[\(i)]", "unknown permission \(n) (known: \(known.map(\.name).joined(separator: ", ")))")
                }
                p.formUnion(bits)
            }
            return p
        }

        /// The objects of the (optional) list `value` at `at`, each with its JSON path.
        func objects(_ value: Any?, _ at: String) throws(E) -> [(path: String, object: [String: Any])] {
            guard let list = (value ?? [Any]()) as? [Any] else { throw E(at, "must be a list") }
            var out: [(path: String, object: [String: Any])] = []
            for (i, element) in list.enumerated() {
                guard let object = element as? [String: Any] else { throw E("\(at)[\(i)]", "must be an object") }
                out.append(("\(at)[\(i)]", object))
            }
            return out
        }

        var out: [GATTService] = []
        var fileIndex: [Int] = []  // out[i] is the file's services[fileIndex[i]]
        var deviceName: String? = nil
        for (si, s) in services.enumerated() {
            let sp = "$.services[\(si)]"
            guard let service = s as? [String: Any] else { throw E(sp, "must be an object") }
            let serviceUUID = try uuid(service["uuid"], sp + ".uuid")
            var chars: [GATTCharacteristic] = []
            for (cp, ch) in try objects(service["characteristics"], sp + ".characteristics") {
                let charUUID = try uuid(ch["uuid"], cp + ".uuid")
                guard let propertyNames = ch["properties"] as? [Any] else { throw E(cp + ".properties", "missing, or not a list") }
                var properties: GATTCharacteristicProperties = []
                for (pi, n) in propertyNames.enumerated() {
                    guard let name = n as? String, let bit = GATTCharacteristicProperties.allNames.first(where: { $0.1 == name })?.0 else {
                        throw E("\(cp).properties[\(pi)]", "unknown property \(n) (known: \(GATTCharacteristicProperties.allNames.map(\.1).joined(separator: ", ")))")
                    }
                    properties.insert(bit)
                }
                let value = try bytes(ch["value"], cp + ".value") ?? []
                let declarationHandle = handle16(try handle(ch["handle"], cp + ".handle"), cp + ".handle")
                if let declarationHandle, let valueHandle = try handle(ch["valueHandle"], cp + ".valueHandle"),
                   valueHandle != Int(declarationHandle) + 1, handleProblem == nil {
                    handleProblem = "\(cp).valueHandle is \(valueHandle), not right after its declaration at \(declarationHandle) (Core v5.4 Vol 3 Part G 3.3)"
                }
                if serviceUUID == GATTUUID.genericAccess, charUUID == GATTUUID.deviceName { deviceName = String(decoding: value, as: UTF8.self) }
                var descs: [GATTDescriptor] = []
                for (dp, de) in try objects(ch["descriptors"], cp + ".descriptors") {
                    let descUUID = try uuid(de["uuid"], dp + ".uuid")
                    let descValue = try bytes(de["value"], dp + ".value") ?? []
                    let descHandle = handle16(try handle(de["handle"], dp + ".handle"), dp + ".handle")
                    if descUUID == GATTUUID.clientCharacteristicConfiguration {
                        // Kept for its place and permissions; its value is each client's own.
                        var cccd = GATTDescriptor(uuid: descUUID, permissions: try permissions(de["permissions"], dp + ".permissions") ?? .readWrite, value: [0, 0])
                        cccd.handle = descHandle
                        descs.append(cccd)
                        continue
                    }
                    let descPermissions = try permissions(de["permissions"], dp + ".permissions") ?? .readable
                    var descriptor = GATTDescriptor(uuid: descUUID, permissions: descPermissions, value: descValue)
                    descriptor.handle = descHandle
                    descs.append(descriptor)
                }
                var characteristic = GATTCharacteristic(uuid: charUUID, properties: properties,
                                                        permissions: try permissions(ch["permissions"], cp + ".permissions"),
                                                        value: value, maximumLength: max(512, value.count), descriptors: descs)
                characteristic.declarationHandle = declarationHandle
                chars.append(characteristic)
            }
            if serviceUUID == GATTUUID.genericAccess || serviceUUID == GATTUUID.genericAttribute { continue }
            guard let includeList = (service["includes"] ?? [Any]()) as? [Any] else { throw E(sp + ".includes", "must be a list of service UUIDs") }
            var includes: [BluetoothUUID] = []
            for (ii, element) in includeList.enumerated() { includes.append(try uuid(element, "\(sp).includes[\(ii)]")) }
            guard let primary = (service["primary"] ?? true) as? Bool else { throw E(sp + ".primary", "must be true or false") }
            var gattService = GATTService(uuid: serviceUUID, primary: primary, includes: includes, characteristics: chars)
            gattService.startHandle = handle16(try handle(service["start"], sp + ".start"), sp + ".start")
            gattService.endHandle = handle16(try handle(service["end"], sp + ".end"), sp + ".end")
            out.append(gattService)
            fileIndex.append(si)
        }
        for (si, s) in out.enumerated() {
            for (ii, inc) in s.includes.enumerated() where !out.contains(where: { $0.uuid == inc }) {
                throw E("$.services[\(fileIndex[si])].includes[\(ii)]", "includes \(inc), which the file does not define")
            }
        }
        let hasHandles = out.contains { $0.startHandle != nil || $0.endHandle != nil }
        if hasHandles, handleProblem == nil, let p = GATTServer.explicitHandleProblem(out) {
            // The server's words name services by their index among the file's own services.
            handleProblem = p + " (counting services after leaving out 1800 and 1801)"
        }
        if handleProblem != nil {
            // Served in the file's order from handle 1 instead.
            for si in out.indices {
                out[si].startHandle = nil; out[si].endHandle = nil
                for ci in out[si].characteristics.indices {
                    out[si].characteristics[ci].declarationHandle = nil
                    for di in out[si].characteristics[ci].descriptors.indices { out[si].characteristics[ci].descriptors[di].handle = nil }
                }
            }
        }
        self.services = out
        self.deviceName = deviceName
        self.handleProblem = handleProblem
        self.warnings = warnings
    }

    /// The 16-bit service UUIDs to advertise (as the profiles do; at most 4 so the name fits).
    public var advertisedServices: [BluetoothUUID] {
        Array(services.filter { $0.primary && $0.uuid.uuid16 != nil }.map(\.uuid).prefix(4))
    }
}

/// Why a `--gatt` table was refused: where in it (`location`, a JSON path such as
/// `$.services[0].characteristics[1].uuid`, or `(file)` for the file as a whole) and what is wrong.
public struct GATTFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var location: String
    public var problem: String

    public init(_ location: String, _ problem: String) {
        self.location = location
        self.problem = problem
    }

    public var description: String { "\(location): \(problem)" }
}
