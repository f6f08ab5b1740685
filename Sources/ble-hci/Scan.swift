import Foundation
import HCI
import Host
import GATT
import BLE

/// `ble-hci scan [--duration S] [--passive] [--duplicates] [--service UUID]... [--name TEXT]`.
func runScan(_ c: CommandContext) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("scan takes no positional arguments, got: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let duration = try c.args.double("duration", command: c.command)
    let services = try c.args.all("service").map { text -> BluetoothUUID in
        guard let u = BluetoothUUID(string: text) else { throw UsageError("--service needs a UUID (180d, 32-bit or 128-bit), got '\(text)'", command: c.command) }
        return u
    }
    let filter = ScanFilter(services: services, nameContains: c.args.last("name"))
    SignalWatcher.install()
    let out = c.out
    let opened = try openTransport(c)
    defer { opened.close() }
    let transport = opened.transport
    // Bonded peers behind resolvable private addresses are shown with their identity address.
    var options = StackOptions()
    options.security.bondDirectory = bondDirectory(c)
    options.host.randomStaticAddress = options.security.bondDirectory.flatMap(bondedRandomStaticAddress)
    let central = try await interruptible { [options] in try await Central.open(transport, options: options) }
    out.progress("Local controller \(central.controller.address) (public) on \(transport.name)")
    let stream = try await interruptible { try await central.scan(filter, active: !c.args.has("passive"), everyReport: c.args.has("duplicates")) }
    out.progress("Scanning (\(c.args.has("passive") ? "passive" : "active"))\(duration.map { " for \(formatSeconds($0))" } ?? ", Ctrl-C to stop")…")

    let seen = SeenAdvertisers()
    let failure = await consumeUntilStop(duration: duration) {
        for try await adv in stream {
            seen.add(adv)
            out.event(adv.jsonFields)
            out.line(humanLine(adv, out: out))
        }
    }
    await central.close()
    if let failure {
        out.error("\(failure)")
        return ExitCode.transport
    }
    out.progress("Scan ended: \(seen.count) advertiser\(seen.count == 1 ? "" : "s") seen")
    // Without --duration a signal is the requested end; with it, the scan was cut short.
    if duration != nil, let s = SignalWatcher.shared.received { return Interrupted(signal: s).exitCode }
    return ExitCode.success
}

/// One readable line per advertiser, with assigned-number names.
func humanLine(_ a: Advertisement, out: Output) -> String {
    var parts: [String] = [out.bold(a.address.address.description) + out.dim("/\(a.address.type.simple)")]
    if let id = a.identity { parts.append("bonded " + out.bold(id.address.description) + out.dim("/\(id.type.simple)")) }
    if let rssi = a.rssi { parts.append("\(rssi) dBm") }
    parts.append(a.connectable ? "connectable" : "non-connectable")
    if let name = a.name { parts.append(out.green("\"\(name)\"")) }
    if !a.services.isEmpty { parts.append("services: " + a.services.map(uuidLabel).joined(separator: ", ")) }
    for (company, data) in a.manufacturerData.sorted(by: { $0.key < $1.key }) {
        parts.append("manufacturer \(AssignedNumbers.companyName(company) ?? hexCode(company, digits: 4)): \(data.hex)")
    }
    for (uuid, data) in a.serviceData.sorted(by: { $0.key < $1.key }) { parts.append("service data \(uuidLabel(uuid)): \(data.hex)") }
    if let tx = a.txPower { parts.append("tx \(tx) dBm") }
    if let app = a.appearance { parts.append("appearance: \(AssignedNumbers.appearanceName(app) ?? hexCode(app, digits: 4))") }
    return parts.joined(separator: "  ")
}
