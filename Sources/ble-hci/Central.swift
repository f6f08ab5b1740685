import Foundation
import Decoder
import HCI
import Transport
import Host
import ATT
import GATT
import BLE

/// `ble-hci central TARGET... [ACTIONS] [--mtu N] [--timeout S] [--profile band [--date D]]` (CLI.md).
/// Several targets are found, connected and served at once, each link with the same actions;
/// every JSON event carries its `connection`, and human lines start with the target.
func runCentral(_ c: CommandContext) async throws -> Int32 {
    let cmd = c.command
    guard !c.args.positionals.isEmpty else {
        throw UsageError("central needs a TARGET (AA:BB:CC:DD:EE:FF[/public|/random] or name:TEXT)", command: cmd)
    }
    if let twice = c.args.positionals.first(where: { t in c.args.positionals.filter { $0 == t }.count > 1 }) {
        throw UsageError("TARGET \(twice) is given twice", command: cmd)
    }
    let targets = try c.args.positionals.map { try Target(parsing: $0, command: cmd) }
    let mtu = try c.args.int("mtu", command: cmd, range: 23...517) ?? 517
    let timeout = try c.args.double("timeout", command: cmd) ?? 10
    let eatt = try c.args.int("eatt", command: cmd, range: 1...5)
    // The bearers open with MTU 517, which a reconfiguration may not lower (Core v5.4 Vol 3 Part A 4.27).
    let eattMTU = try c.args.int("eatt-mtu", command: cmd, range: 517...65535)
    if eattMTU != nil && eatt == nil { throw UsageError("--eatt-mtu raises the MTU of the bearers --eatt N opens: give --eatt N too", command: cmd) }
    let actions = try parseActions(c.args, command: cmd)
    let profile = c.args.last("profile")
    if let profile, profile != "band" { throw UsageError("central speaks only --profile band, got '\(profile)'", command: cmd) }
    let bandDate = try c.args.last("date").map { text -> BandProtocol.Day in
        guard let d = BandProtocol.Day(text) else { throw UsageError("--date needs a real date as YYYY-MM-DD, got '\(text)'", command: cmd) }
        return d
    }
    if bandDate != nil && profile == nil { throw UsageError("--date goes with --profile band", command: cmd) }
    if profile != nil && !actions.isEmpty {
        throw UsageError("--profile band runs the band's own exchange: leave out --read, --write, --subscribe and --discover, or run them without --profile", command: cmd)
    }
    let security = try securityConfiguration(c)
    SignalWatcher.install()
    let out = c.out

    let opened = try openTransport(c)
    defer { opened.close() }
    let transport = opened.transport
    out.progress(out.text(.opening(transport: transport.name)))
    var options = StackOptions()
    options.mtuOnConnect = nil  // the command line exchanges `--mtu` itself, after connecting
    options.security = security
    options.privacy = privacyOptions(c)
    options.host.randomStaticAddress = security.bondDirectory.flatMap(bondedRandomStaticAddress)
    let pairing = TerminalPairing(out: out, passkey: security.smp.fixedPasskey, yes: c.args.has("yes"), holdUntilReleased: true,
                                  bondDirectory: security.bondDirectory)
    options.pairingDelegate = pairing
    defer { pairing.release() }  // whatever happens, nothing held is lost
    // Every phase is interruptible: SIGINT/SIGTERM end it at once (exit 130/143).
    let central = try await interruptible { [options] in try await Central.open(transport, options: options) }
    out.progress(out.text(.localController(address: central.controller.address.description, transport: transport.name)))
    let link = CentralLink(c: c, central: central, mtu: mtu, timeout: timeout, eatt: eatt, eattMTU: eattMTU, actions: actions, profile: profile,
                           bandDate: bandDate, bondDirectory: security.bondDirectory, pairing: pairing)
    // Whatever happens from here (a signal while scanning for the target too), the scans are
    // stopped and the links disconnected before the transport closes.
    return try await closing({ await central.close() }) {
        guard targets.count > 1 else { return try await link.serve(targets[0], out: out) }
        return try await withThrowingTaskGroup(of: Int32.self) { group in
            for (target, text) in zip(targets, c.args.positionals) {
                let labelled = out.labelled(text)
                group.addTask {
                    // One target not found or not connected fails the run, not the other links.
                    do { return try await link.serve(target, out: labelled) } catch let e as CLIFailure where e.exitCode == ExitCode.failure {
                        labelled.error(e.message)
                        return e.exitCode
                    }
                }
            }
            // The worst outcome: interrupted (130/143) above transport lost (3) above failure (1).
            var worst = ExitCode.success
            for try await code in group { worst = max(worst, code) }
            return worst
        }
    }
}

/// One target's link of `central`: find, connect, exchange the MTU, run the actions, disconnect.
struct CentralLink: Sendable {
    let c: CommandContext
    let central: Central
    let mtu: Int
    let timeout: Double
    /// Enhanced ATT bearers to open (`--eatt N`).
    let eatt: Int?
    /// The MTU to raise them to once open (`--eatt-mtu M`).
    let eattMTU: Int?
    let actions: [CentralAction]
    let profile: String?
    let bandDate: BandProtocol.Day?
    let bondDirectory: String?
    let pairing: TerminalPairing

    /// `--eatt-mtu`: a Credit Based Reconfigure Request for the bearers (Core v5.4 Vol 3 Part A
    /// 4.27); a refusal (a result code, a Command Reject) is reported and the run goes on.
    func reconfigureBearers(_ remote: RemotePeripheral, to mtu: Int, out: Output) async throws {
        do {
            let attMTU = try await interruptible { try await remote.reconfigureEnhancedATT(mtu: UInt16(mtu)) }
            out.event([.text("event", "eattMTU"), .int("mtu", mtu), .int("attMTU", attMTU), .int("connection", remote.connectionHandle)])
            out.line("Enhanced ATT: receive MTU raised to \(mtu) (Credit Based Reconfigure), ATT MTU \(attMTU)")
        } catch let error as BLEError {
            out.event([.text("event", "eattMTU"), .int("mtu", mtu), .text("message", "\(error)"), .int("connection", remote.connectionHandle)])
            out.progress("Enhanced ATT: the peripheral did not take MTU \(mtu) (\(error)): the bearers go on as they were")
        }
    }

    func serve(_ target: Target, out: Output) async throws -> Int32 {
        let central = self.central, timeout = self.timeout, mtu = self.mtu, actions = self.actions, profile = self.profile

        // Find the target (for an address without a type, the type seen while scanning).
        let (address, _) = try await targetAddress(target, central: central) {
            try await findTarget(target, central: central, timeout: timeout, language: out.language) {
                out.progress(out.text(.scanningFor(target: target.text(out.language), timeout: formatSeconds(timeout))))
            }
        }
        out.progress(out.text(.connectingTo(address: "\(address)", timeout: formatSeconds(timeout))))
        let remote = try await interruptible { try await connectTarget(address, for: target, central: central, timeout: timeout, language: out.language) }
        let effectiveMTU: Int
        do {
            effectiveMTU = try await interruptible { try await remote.exchangeMTU(mtu) }
        } catch let e as Interrupted {
            _ = try? await remote.disconnect()
            throw e
        }
        out.event([.text("event", "connected"), .text("address", address.address.description), .text("addressType", address.type.simple),
                   .int("handle", remote.connectionHandle), .int("connection", remote.connectionHandle), .int("mtu", effectiveMTU)])
        out.line(out.text(.connectedTo(address: out.bold(address.description), handle: remote.connectionHandle, mtu: Int(effectiveMTU))))
        pairing.release(connection: remote.connectionHandle)

        var exitCode = ExitCode.success
        var interrupted: Interrupted? = nil
        var pairedAgain = false
        do {
            if c.args.has("pair") || c.args.has("pair-again") {
                // The outcome (paired / encrypted / failed) is printed by TerminalPairing.
                do {
                    _ = try await interruptible { try await remote.pair() }
                } catch BLEError.encryptionFailed(let status) where status == .pinOrKeyMissing && c.args.has("pair-again") {
                    // Only when asked: a peer that claims to have lost the key may not be the one we bonded with.
                    out.progress("\(address) has lost our bond: pairing again (--pair-again)…")
                    _ = try await interruptible { try await remote.pair(force: true) }
                    pairedAgain = true
                }
            }
            if let eatt {
                do {
                    let opened = try await interruptible { try await remote.openEnhancedATT(count: eatt) }
                    out.event([.text("event", "eatt"), .int("bearers", opened.bearers), .int("mtu", opened.mtu), .int("connection", remote.connectionHandle)])
                    out.line("Enhanced ATT: \(opened.bearers) of \(eatt) bearers open (PSM 0x0027), ATT MTU \(opened.mtu)")
                    if let eattMTU, opened.bearers > 0 { try await reconfigureBearers(remote, to: eattMTU, out: out) }
                } catch BLEError.refused(let why) {
                    // As a phone does: a peripheral without EATT is served over CID 0x0004.
                    out.event([.text("event", "eatt"), .int("bearers", 0), .text("message", why), .int("connection", remote.connectionHandle)])
                    out.progress("Enhanced ATT refused (\(why)): going on over the unenhanced bearer")
                }
            }
            if profile == "band" {
                let day = bandDate ?? BandProtocol.Day(today: Date())
                try await interruptible { try await runBand(remote, day: day, out: out) }
            } else if actions.isEmpty {
                let snapshot = try await interruptible { try await readEverything(remote) }
                out.event(snapshot.jsonFields + [.int("connection", remote.connectionHandle)])
                for l in snapshot.humanLines(out) { out.line(l) }
            } else {
                for action in actions {
                    let ok: Bool
                    if case .subscribe = action {
                        // Watches for signals itself: it unsubscribes, then the link is closed below.
                        ok = try await run(action, remote: remote, out: out)
                    } else {
                        ok = try await interruptible { try await run(action, remote: remote, out: out) }
                    }
                    // A subscription without --count or --duration runs until Ctrl-C: that signal
                    // is its requested end. A signal during anything else interrupts the run.
                    if let s = SignalWatcher.shared.received {
                        if case .subscribe(_, nil, nil) = action {} else { interrupted = Interrupted(signal: s) }
                        break
                    }
                    guard ok else {
                        exitCode = ExitCode.failure
                        break
                    }
                }
            }
        } catch let e as Interrupted {
            interrupted = e
        } catch BLEError.transport(let e) {
            throw e  // exit 3, without a disconnection to wait for
        } catch BLEError.att(let e) {
            out.error("the peripheral refused: \(e)")
            exitCode = ExitCode.failure
        } catch {
            out.error("\(error)")
            exitCode = ExitCode.failure
        }
        // Links the stack marked down because the transport went away had no Disconnection
        // Complete: say what happened instead of inventing a disconnection reason.
        if let lost = await central.transportLost {
            throw CLIFailure("\(lost); check the controller (is `ble-hci controllers` still running?) and start again", exitCode: ExitCode.transport)
        }
        // A bond the peripheral lost makes what needed it fail: never without saying why.
        func sayIfBondLost() {
            guard pairing.peerLostBond, !pairedAgain else { return }
            let dir = bondDirectory.map { " --bonds \($0)" } ?? ""
            out.error("\(address) has lost its bond with us (encryption from our bond failed: PIN or Key Missing, 0x06): "
                      + "pair again with `ble-hci central \(address.address) --pair-again\(dir)`, "
                      + "or remove our bond with `ble-hci bonds remove \(address.address)\(dir)` and connect again")
        }
        if let reason = remote.disconnectReason {
            reportDisconnected(reason, out: out, connection: remote.connectionHandle)
            sayIfBondLost()
            return ExitCode.failure
        }
        await remote.securitySettled()  // bounded by the SMP timeout
        sayIfBondLost()
        let reason = try await remote.disconnect()
        reportDisconnected(reason, out: out, connection: remote.connectionHandle)
        if let interrupted {
            out.error("\(interrupted): disconnected, capture closed")
            return interrupted.exitCode
        }
        return exitCode
    }
}

/// TARGET: an address (optionally /public or /random) or name:TEXT.
enum Target: CustomStringConvertible {
    case address(BDAddress, AddressType?)
    case name(String)

    init(parsing text: String, command: String) throws {
        if text.hasPrefix("name:") {
            let name = String(text.dropFirst(5))
            guard !name.isEmpty else { throw UsageError("name: needs some text to look for", command: command) }
            self = .name(name)
            return
        }
        var addressText = text
        var type: AddressType? = nil
        if let slash = text.firstIndex(of: "/") {
            addressText = String(text[..<slash])
            switch text[text.index(after: slash)...].lowercased() {
            case "public": type = .public
            case "random": type = .random
            default: throw UsageError("address type must be /public or /random in '\(text)'", command: command)
            }
        }
        guard let a = BDAddress(string: addressText) else {
            throw UsageError("TARGET '\(text)' is neither an address like F0:F1:F2:F3:F4:F5[/random] nor name:TEXT", command: command)
        }
        self = .address(a, type)
    }

    var filter: ScanFilter {
        switch self {
        case .address(let a, _): ScanFilter(address: a)
        case .name(let n): ScanFilter(nameContains: n)
        }
    }

    var description: String {
        switch self {
        case .address(let a, let t): t.map { "\(a)/\($0.simple)" } ?? a.description
        case .name(let n): Message.nameContaining(n).text(.english)
        }
    }

    /// `description` in `language`.
    func text(_ language: Language) -> String {
        if case .name(let n) = self { return Message.nameContaining(n).text(language) }
        return description
    }
}

/// One of central's ordered actions.
enum CentralAction {
    case read(CharacteristicRef)
    case write(CharacteristicRef, [UInt8], withResponse: Bool)
    case subscribe(CharacteristicRef, count: Int?, duration: Double?)
    case discover
}

/// CHAR: a UUID or a handle ("0x0010").
enum CharacteristicRef: CustomStringConvertible {
    case uuid(BluetoothUUID)
    case handle(UInt16)

    init(parsing text: String, command: String) throws {
        if text.lowercased().hasPrefix("0x"), text.count == 6, let h = UInt16(text.dropFirst(2), radix: 16) {
            self = .handle(h)
        } else if let u = BluetoothUUID(string: text) {
            self = .uuid(u)
        } else {
            throw UsageError("'\(text)' is not a characteristic: use a UUID (2a37, 32-bit or 128-bit) or a handle (0x0010)", command: command)
        }
    }

    var description: String {
        switch self {
        case .uuid(let u): u.description
        case .handle(let h): hexCode(h, digits: 4)
        }
    }
}

/// Actions in command-line order; --count/--duration belong to the --subscribe before them.
func parseActions(_ args: ParsedArguments, command: String) throws -> [CentralAction] {
    var actions: [CentralAction] = []
    for (name, value) in args.options {
        switch name {
        case "read":
            actions.append(.read(try CharacteristicRef(parsing: value ?? "", command: command)))
        case "write", "write-without-response":
            guard let value, let eq = value.firstIndex(of: "=") else {
                throw UsageError("--\(name) needs CHAR=HEX, e.g. fff2=68656c6c6f", command: command)
            }
            let ref = try CharacteristicRef(parsing: String(value[..<eq]), command: command)
            guard let bytes = [UInt8](hex: String(value[value.index(after: eq)...])) else {
                throw UsageError("--\(name) value must be hex octets, e.g. fff2=68656c6c6f", command: command)
            }
            actions.append(.write(ref, bytes, withResponse: name == "write"))
        case "subscribe":
            actions.append(.subscribe(try CharacteristicRef(parsing: value ?? "", command: command), count: nil, duration: nil))
        case "count", "duration":
            guard case .subscribe(let ref, var count, var duration)? = actions.last else {
                throw UsageError("--\(name) goes after the --subscribe it limits", command: command)
            }
            if name == "count" {
                guard let v = value, let n = Int(v), n > 0 else { throw UsageError("--count needs a positive whole number", command: command) }
                count = n
            } else {
                guard let v = value, let d = Double(v), d >= 0, d.isFinite else { throw UsageError("--duration needs a non-negative number of seconds", command: command) }
                duration = d
            }
            actions[actions.count - 1] = .subscribe(ref, count: count, duration: duration)
        case "discover":
            actions.append(.discover)
        default:
            break
        }
    }
    return actions
}

extension RemotePeripheral {
    /// The characteristic CHAR names (a UUID, or a value or declaration handle), from the
    /// discovered table: discovered at the first call, then the GATT client's cache, which the
    /// peer's Service Changed updates (Core v5.4 Vol 3 Part G 7.1).
    func characteristic(_ ref: CharacteristicRef) async throws -> GATTRemoteCharacteristic? {
        let all = try await discoverAll().flatMap(\.characteristics).map(\.characteristic)
        switch ref {
        case .uuid(let u): return all.first { $0.uuid == u }
        case .handle(let h): return all.first { $0.valueHandle == h || $0.declarationHandle == h }
        }
    }
}

/// Runs one action; false when it failed (an error line was printed).
func run(_ action: CentralAction, remote: RemotePeripheral, out: Output) async throws -> Bool {
    func resolve(_ ref: CharacteristicRef, for op: String) async throws -> (uuid: BluetoothUUID?, handle: UInt16, characteristic: GATTRemoteCharacteristic?)? {
        if let c = try await remote.characteristic(ref) { return (c.uuid, c.valueHandle, c) }
        if case .handle(let h) = ref { return (nil, h, nil) }  // a descriptor or any attribute
        out.event([.text("event", "error"), .text("op", op), .text("uuid", ref.description), .text("message", "no such characteristic"),
                   .int("connection", remote.connectionHandle)])
        out.error(out.text(.noSuchCharacteristic("\(ref)")))
        return nil
    }
    /// An event of the link: `connection` in each (CLI.md).
    func fields(_ event: String, _ uuid: BluetoothUUID?, _ handle: UInt16) -> [Field] {
        var f: [Field] = [.text("event", event)]
        if let uuid { f.append(.text("uuid", uuid.description)) }
        f.append(.int("handle", handle))
        f.append(.int("connection", remote.connectionHandle))
        return f
    }
    func failed(_ op: String, _ uuid: BluetoothUUID?, _ handle: UInt16, _ error: any Error) -> Bool {
        var f = fields("error", uuid, handle)
        f.insert(.text("op", op), at: 1)
        let target = uuid?.description ?? hexCode(handle, digits: 4)
        if case BLEError.att(let e)? = error as? BLEError {
            f.append(.code("att", e.code.rawValue))
            f.append(.text("message", e.code.name))
            out.error(out.text(.peripheralRefused(op: op, target: "\(target)", error: e.code.name, code: hexCode(e.code.rawValue))))
        } else {
            f.append(.text("message", "\(error)"))
            out.error("\(op) \(target) failed: \(error)")
        }
        out.event(f)
        return false
    }

    switch action {
    case .discover:
        let snapshot = GATTSnapshot(tree: try await remote.discoverAll())
        out.event(snapshot.jsonFields + [.int("connection", remote.connectionHandle)])
        for l in snapshot.humanLines(out) { out.line(l) }
        return true
    case .read(let ref):
        guard let r = try await resolve(ref, for: "read") else { return false }
        do {
            let value = try await remote.read(handle: r.handle)
            out.event(fields("read", r.uuid, r.handle) + [.bytes("value", value)])
            out.line(out.text(.readValue(what: r.uuid.map(uuidLabel) ?? hexCode(r.handle, digits: 4), value: out.green(valueLabel(value)))))
            return true
        } catch { return failed("read", r.uuid, r.handle, error) }
    case .write(let ref, let value, let withResponse):
        let op = withResponse ? "write" : "writeWithoutResponse"
        guard let r = try await resolve(ref, for: op) else { return false }
        do {
            // The CLI sends what it is asked to even when the properties say no, so the user
            // sees the peripheral's own answer (e.g. Write Not Permitted) on the wire.
            if withResponse {
                try await remote.write(value, handle: r.handle)
            } else {
                try await remote.withGATT { gatt, _ in try await gatt.writeWithoutResponse(value, handle: r.handle) }
            }
            out.event(fields(op, r.uuid, r.handle))
            out.line(out.text(.wroteValue(value: valueLabel(value), what: r.uuid.map(uuidLabel) ?? hexCode(r.handle, digits: 4), withResponse: withResponse)))
            return true
        } catch { return failed(op, r.uuid, r.handle, error) }
    case .subscribe(let ref, let count, let duration):
        guard let r = try await resolve(ref, for: "subscribe") else { return false }
        guard let c = r.characteristic else {
            out.error("--subscribe \(ref) names no characteristic: give its UUID or its value or declaration handle")
            return false
        }
        let kind = c.properties.contains(.notify) ? "notification" : "indication"
        let values: GATTNotificationStream
        do { values = try await remote.notifications(for: c) } catch { return failed("subscribe", c.uuid, c.valueHandle, error) }
        out.line(out.text(.subscribedTo(uuid: uuidLabel(c.uuid), indications: kind == "indication", count: count, duration: duration.map(formatSeconds))))
        let failure = await consumeUntilStop(duration: duration) {
            // Values lost because too many were waiting (the stream's and the link's), reported
            // as they are noticed: {"event":"dropped",...} with --json, a line on stderr without.
            var reportedDrops = 0
            func reportDrops() {
                let total = values.droppedCount + remote.droppedNotifications
                guard total > reportedDrops else { return }
                out.event(fields("dropped", c.uuid, c.valueHandle) + [.int("count", total - reportedDrops), .int("total", total)])
                if !out.json { out.error("\(total - reportedDrops) \(kind)(s) of \(c.uuid) dropped: more than 1024 were waiting (\(total) in all)") }
                reportedDrops = total
            }
            var n = 0
            defer { reportDrops() }
            for try await v in values {
                n += 1
                reportDrops()
                out.event(fields(kind, c.uuid, c.valueHandle) + [.bytes("value", v)])
                out.line(out.text(.received(time: timestamp(), indication: kind == "indication", uuid: c.uuid.description, value: out.green(valueLabel(v)))))
                if let count, n >= count { break }
            }
        }
        // A disconnection ends the stream too; it is reported (and exits 1) after the actions.
        if let failure, remote.disconnectReason == nil {
            return failed("subscribe", c.uuid, c.valueHandle, failure)
        }
        if remote.disconnectReason == nil { try? await remote.stopNotifications(for: c) }
        return true
    }
}

/// `--profile band`: total steps and the day's history (the exchange is `BandClient`'s).
func runBand(_ remote: RemotePeripheral, day: BandProtocol.Day, out: Output) async throws {
    let band = try await BandClient(remote)
    func exchange(_ request: BandProtocol.Frame) async throws -> BandProtocol.Response {
        let (response, frame, chunks) = try await band.exchange(request)
        out.line(out.dim("  (response of \(frame.bytes.count) octets reassembled from \(chunks) notifications, CRC ok)"))
        return response
    }
    if case .totalSteps(let d, let steps) = try await exchange(BandProtocol.totalStepsRequest(day)) {
        out.event([.text("event", "totalSteps"), .text("date", d.description), .int("steps", steps), .int("connection", remote.connectionHandle)])
        out.line("Total steps on \(d): \(out.bold(String(steps)))")
    }
    switch try await exchange(BandProtocol.historyRequest(day)) {
    case .history(let d, let records):
        out.line("History for \(d): \(records.count) records")
        for r in records {
            out.event([.text("event", "record"), .text("date", d.description), .text("kind", r.kind.description), .int("count", r.count),
                       .int("hour", r.hour), .int("minutes", r.minutes), .int("heartRate", r.heartRate), .int("intensity", r.intensity),
                       .int("connection", remote.connectionHandle)])
            let what = r.kind == .steps ? "\(r.count) steps" : "\(r.count) min asleep"
            out.line(String(format: "  %02d:00  %-16@ heart %3d bpm  intensity %d", Int(r.hour), what, Int(r.heartRate), Int(r.intensity)))
        }
    case .refused(let command, let reason):
        throw BLEError.notPermitted("the band refused command \(hexCode(command)) (reason \(hexCode(reason)))")
    default:
        throw BLEError.notPermitted("the band answered the history request with another command")
    }
    try await band.close()
}

extension BandProtocol.Day {
    init(today: Date) {
        let c = Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: today)
        self.init(year: UInt16(c.year ?? 2026), month: UInt8(c.month ?? 1), day: UInt8(c.day ?? 1))
    }
}

/// Runs `body`, failing with `CLIFailure(message)` after `limit` (`body` must end when cancelled).
func withTimeout<T: Sendable>(_ limit: Duration, _ message: String, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask { try await Task.sleep(for: limit); return nil }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else {
            throw CLIFailure(message, exitCode: ExitCode.failure)
        }
        return value
    }
}

func formatSeconds(_ s: Double) -> String { s == s.rounded() ? "\(Int(s)) s" : "\(s) s" }
