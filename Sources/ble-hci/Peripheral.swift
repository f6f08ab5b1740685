import Foundation
import HCI
import Host
import ATT
import GATT
import BLE
import SMP

/// `ble-hci peripheral [--name NAME] [--profile demo|band|secure] [--duration S] [--security-request] [--eatt] [--directed TARGET] [SECURITY OPTIONS]` (CLI.md).
func runPeripheral(_ c: CommandContext) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("peripheral takes no positional arguments, got: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let gattFile = try c.args.last("gatt").map { path -> GATTFile in
        if c.args.has("profile") { throw UsageError("--gatt serves the file's table: leave out --profile", command: c.command) }
        return try GATTFile(path: path, command: c.command)
    }
    if let gattFile, let path = c.args.last("gatt"), let problem = gattFile.handleProblem {
        c.out.progress("ble-hci: warning: --gatt \(path): handles reassigned in the file's order: \(problem)")
    }
    let profile = gattFile != nil ? "gatt" : c.args.last("profile") ?? "demo"
    guard ["demo", "band", "secure"].contains(profile) || gattFile != nil else {
        throw UsageError("--profile must be demo, band or secure, got '\(profile)'", command: c.command)
    }
    var options = StackOptions()
    options.security = try securityConfiguration(c)
    options.security.requestSecurityOnConnect = c.args.has("security-request")
    options.enhancedATT = c.args.has("eatt")
    options.privacy = privacyOptions(c)
    options.host.randomStaticAddress = options.security.bondDirectory.flatMap(bondedRandomStaticAddress)
    let pairing = TerminalPairing(out: c.out, passkey: options.security.smp.fixedPasskey, yes: c.args.has("yes"))
    options.pairingDelegate = pairing
    let name = c.args.last("name") ?? gattFile?.deviceName ?? "ble-hci"
    guard !name.isEmpty, name.utf8.count <= 248 else { throw UsageError("--name must be 1 to 248 octets of UTF-8", command: c.command) }
    let duration = try c.args.double("duration", command: c.command)
    let directed = try c.args.last("directed").map { try DirectedTarget(parsing: $0, command: c.command) }
    if case .bonded? = directed, options.security.bondDirectory == nil {
        throw UsageError("--directed bonded needs the bonds (leave out --no-bond)", command: c.command)
    }
    SignalWatcher.install()
    let out = c.out

    let opened = try openTransport(c)
    defer { opened.close() }
    let peripheral: Peripheral
    let advertised: [BluetoothUUID]
    var ticker: Task<Void, Never>? = nil
    if let gattFile {
        peripheral = try await interruptible { [transport = opened.transport, options] in try await Peripheral.open(transport, services: gattFile.services, name: name, options: options) }
        advertised = gattFile.advertisedServices
    } else if profile == "band" {
        peripheral = try await interruptible { [transport = opened.transport, options] in try await BandProfile.openPeripheral(transport, name: name, options: options) }
        advertised = BandProfile.advertisedServices
    } else if profile == "secure" {
        peripheral = try await interruptible { [transport = opened.transport, options] in try await Peripheral.open(transport, services: SecureProfile.services, name: name, options: options) }
        advertised = SecureProfile.advertisedServices
        ticker = SecureProfile.startTicker(on: peripheral)
    } else {
        peripheral = try await interruptible { [transport = opened.transport, options] in try await Peripheral.open(transport, services: DemoProfile.services, name: name, options: options) }
        advertised = DemoProfile.advertisedServices
        ticker = DemoProfile.startTicker(on: peripheral)
    }
    defer { ticker?.cancel() }
    // However the run ends, advertising is stopped and links disconnected before the transport closes.
    return try await closing({ await peripheral.close() }) {
        let target = try directed.map { try $0.address(bonds: options.security.bondDirectory, local: peripheral.identityAddress, command: c.command) }
        try await interruptible { try await peripheral.startAdvertising(AdvertisingOptions(name: name, serviceUUIDs: advertised, directedTo: target)) }
        let address = await peripheral.address
        out.event([.text("event", "advertising"), .text("name", name), .text("address", address.address.description),
                   .text("addressType", address.type.simple), .text("profile", profile)])
        out.line(out.text(.advertisingAs(name: out.bold(name), address: address.address.description, type: address.type.simple, profile: profile, transport: opened.transport.name)))
        if options.privacy != nil {
            out.progress(out.text(.privacy(address: address.address.description, identity: "\(peripheral.identityAddress.address)/\(peripheral.identityAddress.type.simple)")))
        }
        if let target {
            out.event([.text("event", "directedAdvertising"), .text("target", target.address.description), .text("targetType", target.type.simple)])
            out.progress("Directed advertising to \(target.address)/\(target.type.simple) only (ADV_DIRECT_IND)")
        }

        let events = Task { () -> String? in
            for await e in peripheral.events {
                switch e {
                case .connected(let handle, let central):
                    out.event([.text("event", "connected"), .text("address", central.address.description),
                               .text("addressType", central.type.simple), .int("handle", handle), .int("connection", handle)])
                    out.line(out.text(.centralConnected(time: timestamp(), central: "\(central)", handle: handle)))
                    pairing.connected(handle, peer: central)
                case .disconnected(let handle, let reason):
                    out.event([.text("event", "disconnected"), .code("reason", reason.rawValue), .text("message", reason.name), .int("connection", handle)])
                    out.line(out.text(.centralDisconnected(time: timestamp(), handle: handle, reason: reason.name, code: hexCode(reason.rawValue))))
                    pairing.disconnected(handle)
                case .subscribed(let handle, let uuid, let indications):
                    out.event([.text("event", "subscribed"), .text("uuid", uuid.description), .int("connection", handle), .bool("indications", indications)])
                    out.line(out.text(.centralSubscribed(time: timestamp(), uuid: uuidLabel(uuid), indications: indications)))
                case .unsubscribed(let handle, let uuid):
                    out.event([.text("event", "unsubscribed"), .text("uuid", uuid.description), .int("connection", handle)])
                    out.line(out.text(.centralUnsubscribed(time: timestamp(), uuid: uuidLabel(uuid))))
                case .wrote(let handle, let uuid, let value):
                    out.event([.text("event", "write"), .text("uuid", uuid.description), .bytes("value", value), .int("connection", handle)])
                    out.line(out.text(.centralWrote(time: timestamp(), uuid: uuidLabel(uuid), value: valueLabel(value))))
                case .read(let handle, let uuid):
                    out.event([.text("event", "read"), .text("uuid", uuid.description), .int("connection", handle)])
                    out.line(out.text(.centralRead(time: timestamp(), uuid: uuidLabel(uuid))))
                case .parametersUpdated(let handle, let parameters):
                    out.event([.text("event", "connectionParameters"), .int("connection", handle), .int("interval", Int(parameters.interval)),
                               .int("latency", Int(parameters.latency)), .int("supervisionTimeout", Int(parameters.supervisionTimeout))])
                    out.line("\(timestamp()) connection parameters (handle \(handle)): \(parameters)")
                case .readyToUpdateSubscribers:
                    break  // the CLI notifies with `notify`, which waits
                case .answered(let handle, let request, let response):
                    reportAnswer(request, response, connection: handle, server: peripheral.server, out: out)
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
        if let failure {
            out.error("\(failure); check the adapter or controller and start again")
            return ExitCode.transport
        }
        // Without --duration a signal is the requested end; with it, the run was cut short.
        if duration != nil, let s = SignalWatcher.shared.received { return Interrupted(signal: s).exitCode }
        return ExitCode.success
    }
}

func timestamp() -> String {
    let f = DateFormatter()
    f.dateFormat = "HH:mm:ss.SSS"
    return f.string(from: Date())
}

/// One request the server answered: refusals as `error` events, descriptor reads with their
/// value as `read` events, and the rest (discovery) as `request` events. Characteristic value
/// reads and writes are already reported by their own events.
func reportAnswer(_ request: ATTPDU, _ response: ATTPDU, connection: UInt16, server: GATTServer, out: Output) {
    let op = request.opcode
    func type(of handle: UInt16) -> BluetoothUUID? { server.attributeTypes.first { $0.handle == handle }?.type }
    let discovery: Set<ATTOpcode> = [.readByGroupTypeRequest, .readByTypeRequest, .findInformationRequest, .findByTypeValueRequest]
    let reads: Set<ATTOpcode> = [.readRequest, .readBlobRequest, .readMultipleRequest, .readMultipleVariableRequest]
    let writes: Set<ATTOpcode> = [.writeRequest, .prepareWriteRequest, .executeWriteRequest]
    let requestName = op.name ?? hexCode(op.rawValue)
    if case let .errorResponse(_, handle, code) = response, !(discovery.contains(op) && code == .attributeNotFound) {
        let uuid = handle == 0 ? nil : type(of: handle)
        let opName = reads.contains(op) ? "read" : writes.contains(op) ? "write" : requestName
        out.event([.text("event", "error"), .text("op", opName)] + (uuid.map { [.text("uuid", $0.description)] } ?? [])
                  + [.int("handle", handle), .code("att", code.rawValue), .text("message", code.name), .int("connection", connection)])
        let target = (uuid.map(uuidLabel).map { $0 + " " } ?? "") + "(\(hexCode(handle, digits: 4)))"
        out.line("\(timestamp()) refused \(requestName) \(target): \(out.red(code.name)) (\(hexCode(code.rawValue)))")
        return
    }
    switch (request, response) {
    case let (.readRequest(handle), .readResponse(value)), let (.readBlobRequest(handle, _), .readBlobResponse(value)):
        // Descriptors (Core v5.4 Vol 3 Part G 3.3.3: types 0x2900-0x29FF); values have their own events.
        guard let uuid = type(of: handle), let short = uuid.uuid16, short >> 8 == 0x29 else { return }
        out.event([.text("event", "read"), .text("uuid", uuid.description), .int("handle", handle), .bytes("value", value),
                   .int("connection", connection)])
        out.line("\(timestamp()) read descriptor \(uuidLabel(uuid)) (\(hexCode(handle, digits: 4))) = \(valueLabel(value))")
    default:
        guard !reads.contains(op), !writes.contains(op) else { return }
        let answerName: String
        if case let .errorResponse(_, _, code) = response { answerName = "\(code.name) (\(hexCode(code.rawValue)))" } else { answerName = response.opcode.name ?? hexCode(response.opcode.rawValue) }
        out.event([.text("event", "request"), .text("op", requestName), .code("opcode", op.rawValue), .text("answer", answerName),
                   .int("connection", connection)])
        out.line(out.dim("\(timestamp()) \(requestName) → \(answerName)"))
    }
}

/// `--directed TARGET`: a central's identity address (AA:BB:CC:DD:EE:FF[/public|/random],
/// public when not said), or `bonded`: the peer of the last bond in our bond file.
enum DirectedTarget {
    case address(DeviceAddress)
    case bonded

    init(parsing text: String, command: String) throws {
        if text == "bonded" { self = .bonded; return }
        guard case .address(let a, let type) = try Target(parsing: text, command: command) else {
            throw UsageError("--directed takes an identity address (AA:BB:CC:DD:EE:FF[/public|/random]) or bonded, not '\(text)'", command: command)
        }
        self = .address(DeviceAddress(a, type: type ?? .public))
    }

    func address(bonds directory: String?, local: DeviceAddress, command: String) throws -> DeviceAddress {
        switch self {
        case .address(let a): return a
        case .bonded:
            guard let directory, let store = try? SMPBondStore(directory: directory, localIdentity: local),
                  let last = try store.bonds().last else {
                throw UsageError("--directed bonded: no bond in \(directory ?? "the bonds directory") for \(local.address)/\(local.type.simple)", command: command)
            }
            return last.peer
        }
    }
}
