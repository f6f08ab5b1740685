import HCI
import Host
import ATT
import GATT
import BLE

/// "fff2 (Device Name)" style label with the assigned-number name when there is one.
func uuidLabel(_ uuid: BluetoothUUID) -> String {
    if let name = AssignedNumbers.name(of: uuid) { return "\(uuid) \(name)" }
    return uuid.description
}

/// A value for humans: quoted text when it is printable UTF-8, then the hex.
func valueLabel(_ value: [UInt8]) -> String {
    if value.isEmpty { return "(empty)" }
    if let text = String(validating: value, as: UTF8.self),
       text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) {
        return "\"\(text)\" (\(value.hex))"
    }
    return value.hex
}

/// The discovered database and the values read from it (by attribute handle).
struct GATTSnapshot {
    var tree: [GATTRemoteServiceTree]
    var values: [UInt16: [UInt8]] = [:]
    var errors: [UInt16: ATTError] = [:]
    /// `permissions` (`peripheral --gatt` names) to write for an attribute, by handle
    /// (`dump --attributes`: what the server's refusals revealed).
    var permissions: [UInt16: [String]] = [:]

    /// CLI.md's `{"event":"gatt","services":[...]}`.
    var jsonFields: [Field] {
        let services: [FieldValue] = tree.map { s in
            .object([
                .text("uuid", s.service.uuid.description),
                .int("start", s.service.startHandle),
                .int("end", s.service.endHandle),
            ] + (s.service.primary ? [] : [.bool("primary", false)]) + (s.includedServices.isEmpty ? [] : [
                Field("includes", .list(s.includedServices.map { .text($0.uuid.description) })),
            ]) + [
                Field("characteristics", .list(s.characteristics.map { c in
                    var f: [Field] = [
                        .text("uuid", c.characteristic.uuid.description),
                        .int("handle", c.characteristic.declarationHandle),
                        .int("valueHandle", c.characteristic.valueHandle),
                        Field("properties", .list(c.characteristic.properties.names.map { .text($0) })),
                    ]
                    if let v = values[c.characteristic.valueHandle] { f.append(.bytes("value", v)) }
                    if let p = permissions[c.characteristic.valueHandle] { f.append(Field("permissions", .list(p.map { .text($0) }))) }
                    f.append(Field("descriptors", .list(c.descriptors.map { d in
                        var df: [Field] = [.text("uuid", d.uuid.description), .int("handle", d.handle)]
                        if let v = values[d.handle] { df.append(.bytes("value", v)) }
                        if let p = permissions[d.handle] { df.append(Field("permissions", .list(p.map { .text($0) }))) }
                        return .object(df)
                    })))
                    return .object(f)
                })),
            ])
        }
        return [.text("event", "gatt"), Field("services", .list(services))]
    }

    /// An indented tree with assigned-number names, handles, properties and values.
    func humanLines(_ out: Output) -> [String] {
        var lines: [String] = []
        for s in tree {
            lines.append(out.bold(out.text(.treeService(uuidLabel(s.service.uuid))))
                         + out.dim("  " + out.text(.treeHandles(s.service.startHandle, s.service.endHandle))))
            for (ci, c) in s.characteristics.enumerated() {
                let lastC = ci == s.characteristics.count - 1
                let ch = c.characteristic
                var line = (lastC ? "  └─ " : "  ├─ ") + out.text(.treeCharacteristic(uuidLabel(ch.uuid)))
                line += out.dim("  " + out.text(.treeCharacteristicHandles(declaration: ch.declarationHandle, value: ch.valueHandle))
                                + "  [\(ch.properties.names.joined(separator: ", "))]")
                lines.append(line)
                let pad = lastC ? "      " : "  │   "
                if let v = values[ch.valueHandle] { lines.append(pad + out.text(.treeValue) + out.green(valueLabel(v))) }
                if let e = errors[ch.valueHandle] { lines.append(pad + out.text(.treeValue) + out.red(out.text(.treeNotReadable("\(e)")))) }
                for (di, d) in c.descriptors.enumerated() {
                    let lastD = di == c.descriptors.count - 1
                    var dl = pad + (lastD ? "└─ " : "├─ ") + out.text(.treeDescriptor(uuidLabel(d.uuid))) + out.dim("  " + out.text(.treeHandle(d.handle)))
                    if let v = values[d.handle] { dl += " = " + out.green(valueLabel(v)) }
                    if let e = errors[d.handle] { dl += " " + out.red("(" + out.text(.treeNotReadable("\(e)")) + ")") }
                    lines.append(dl)
                }
            }
        }
        return lines
    }
}

/// Discovers everything and reads every readable characteristic and every descriptor.
func readEverything(_ remote: RemotePeripheral) async throws -> GATTSnapshot {
    var snapshot = GATTSnapshot(tree: try await remote.discoverAll())
    for s in snapshot.tree {
        for c in s.characteristics {
            if c.characteristic.properties.contains(.read) {
                do { snapshot.values[c.characteristic.valueHandle] = try await remote.read(c.characteristic) } catch BLEError.att(let e) {
                    snapshot.errors[c.characteristic.valueHandle] = e
                }
            }
            for d in c.descriptors {
                do { snapshot.values[d.handle] = try await remote.read(handle: d.handle) } catch BLEError.att(let e) {
                    snapshot.errors[d.handle] = e
                }
            }
        }
    }
    return snapshot
}

/// `{"event":"disconnected","reason":"0x16","message":"..."}` / a human line.
func reportDisconnected(_ reason: HCIStatus, out: Output, prefix: String = "", connection: UInt16? = nil) {
    out.event([.text("event", "disconnected"), .code("reason", reason.rawValue), .text("message", reason.name)]
              + (connection.map { [.int("connection", $0)] } ?? []))
    out.line(prefix + out.text(.disconnected(reason: reason.name, code: hexCode(reason.rawValue))))
}
