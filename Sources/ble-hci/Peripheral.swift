import Foundation
import HCI
import Host
import GATT
import BLE

/// `ble-hci peripheral [--name NAME] [--profile demo|band|secure] [--duration S] [--security-request] [SECURITY OPTIONS]` (CLI.md).
func runPeripheral(_ c: CommandContext) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("peripheral takes no positional arguments, got: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let profile = c.args.last("profile") ?? "demo"
    guard ["demo", "band", "secure"].contains(profile) else {
        throw UsageError("--profile must be demo, band or secure, got '\(profile)'", command: c.command)
    }
    var options = StackOptions()
    options.security = try securityConfiguration(c)
    options.security.requestSecurityOnConnect = c.args.has("security-request")
    options.host.randomStaticAddress = options.security.bondDirectory.flatMap(bondedRandomStaticAddress)
    options.pairingDelegate = TerminalPairing(out: c.out, passkey: options.security.smp.fixedPasskey, yes: c.args.has("yes"))
    let name = c.args.last("name") ?? "ble-hci"
    guard !name.isEmpty, name.utf8.count <= 248 else { throw UsageError("--name must be 1 to 248 octets of UTF-8", command: c.command) }
    let duration = try c.args.double("duration", command: c.command)
    SignalWatcher.install()
    let out = c.out

    let opened = try openTransport(c)
    defer { opened.close() }
    let peripheral: Peripheral
    let advertised: [BluetoothUUID]
    var ticker: Task<Void, Never>? = nil
    if profile == "band" {
        peripheral = try await BandProfile.openPeripheral(opened.transport, name: name, options: options)
        advertised = BandProfile.advertisedServices
    } else if profile == "secure" {
        peripheral = try await Peripheral.open(opened.transport, services: SecureProfile.services, name: name, options: options)
        advertised = SecureProfile.advertisedServices
        ticker = SecureProfile.startTicker(on: peripheral)
    } else {
        peripheral = try await Peripheral.open(opened.transport, services: DemoProfile.services, name: name, options: options)
        advertised = DemoProfile.advertisedServices
        ticker = DemoProfile.startTicker(on: peripheral)
    }
    defer { ticker?.cancel() }
    try await peripheral.startAdvertising(AdvertisingOptions(name: name, serviceUUIDs: advertised))
    let address = await peripheral.address
    out.event([.text("event", "advertising"), .text("name", name), .text("address", address.address.description),
               .text("addressType", address.type.simple), .text("profile", profile)])
    out.line("Advertising as \(out.bold(name)) (\(address.address), \(address.type.simple)) with profile \(profile) on \(opened.transport.name). Ctrl-C to stop.")

    let events = Task { () -> String? in
        for await e in peripheral.events {
            switch e {
            case .connected(let handle, let central):
                out.event([.text("event", "connected"), .text("address", central.address.description),
                           .text("addressType", central.type.simple), .int("handle", handle)])
                out.line("\(timestamp()) connected: \(central) (handle \(handle))")
            case .disconnected(let handle, let reason):
                out.event([.text("event", "disconnected"), .code("reason", reason.rawValue), .text("message", reason.name), .int("connection", handle)])
                out.line("\(timestamp()) disconnected (handle \(handle)): \(reason.name) (\(hexCode(reason.rawValue))); advertising again")
            case .subscribed(let handle, let uuid, let indications):
                out.event([.text("event", "subscribed"), .text("uuid", uuid.description), .int("connection", handle), .bool("indications", indications)])
                out.line("\(timestamp()) subscribed to \(uuidLabel(uuid)) (\(indications ? "indications" : "notifications"))")
            case .unsubscribed(let handle, let uuid):
                out.event([.text("event", "unsubscribed"), .text("uuid", uuid.description), .int("connection", handle)])
                out.line("\(timestamp()) unsubscribed from \(uuidLabel(uuid))")
            case .wrote(let handle, let uuid, let value):
                out.event([.text("event", "write"), .text("uuid", uuid.description), .bytes("value", value), .int("connection", handle)])
                out.line("\(timestamp()) write \(uuidLabel(uuid)) = \(valueLabel(value))")
            case .read(let handle, let uuid):
                out.event([.text("event", "read"), .text("uuid", uuid.description), .int("connection", handle)])
                out.line("\(timestamp()) read \(uuidLabel(uuid))")
            case .failure(let message):
                return message
            }
        }
        return nil
    }
    // Whichever ends first: the duration / Ctrl-C, or the transport failing.
    let failure: String? = await withTaskGroup(of: String?.self) { group in
        group.addTask { await events.value }
        group.addTask { _ = await waitForStop(duration: duration); return nil }
        let first = await group.next() ?? nil
        events.cancel()  // ends the first child if the stop came first
        group.cancelAll()
        return first
    }
    await peripheral.close()
    if let failure {
        out.error("\(failure); check the adapter or controller and start again")
        return ExitCode.transport
    }
    return ExitCode.success
}

func timestamp() -> String {
    let f = DateFormatter()
    f.dateFormat = "HH:mm:ss.SSS"
    return f.string(from: Date())
}
