import Foundation
import Synchronization
import HCI
import Transport
import Capture
import Decoder
import Host
import ATT
import GATT
import SMP
import BLE

// The session behind `ble-hci shell` and `ble-hci session --json`: one controller, both roles
// at once (a Central and, once something is served or advertised, a Peripheral on the same
// stack), several links, the one-shot commands' words. The front ends give it one command line
// at a time (the JSON session several at once) with the Output its answers and events go to.

/// How a session request ended.
enum SessionOutcome: Sendable, Equatable {
    case done
    /// The message, and the exit code the one-shot command would have ended with (CLI.md).
    case failed(String, exitCode: Int32)
    /// `quit`: the front end answers, then ends the session.
    case quit
}

/// One link the session made as a central: named by the peer's name, else its address.
struct SessionLink: Sendable {
    let name: String
    let remote: RemotePeripheral
    /// Where its spontaneous events (disconnection) go: the `connect` request's output.
    let out: Output
    /// The peer's Service Changed indications, watched from the first discovery on.
    var serviceChangedWatch: Task<Void, Never>?
    /// Consumers of notification streams, by value handle.
    var subscriptions: [UInt16: Task<Void, Never>] = [:]
    /// Set by `disconnect`: the disconnection is that request's to report.
    var closing = false
}

/// Turns `-w` and `--trace` on and off while the session runs: every packet of the transport
/// passes this tap, which records and prints it only while asked to.
final class SessionTap: Sendable {
    private struct State {
        var writer: CaptureWriter?
        var layers: Set<String>?
        var decoder = PacketDecoder()
        var out: Output?
    }
    private let state = Mutex(State())

    func observe(_ direction: Direction, _ packet: HCIPacket, _ date: Date) {
        // One decode at a time, in order (the observer runs on the reader and on senders).
        let (text, out): (String?, Output?) = state.withLock { s in
            s.writer?.write(packet, direction: direction, time: date)
            guard let layers = s.layers, let out = s.out else { return (nil, nil) }
            return (render(s.decoder.decode(direction: direction, packet: .success(packet), raw: packet.h4, time: CaptureTime(date)),
                           layers: layers, json: out.json), out)
        }
        guard var text, let out, !text.allSatisfy(\.isWhitespace) else { return }
        if out.json {
            // A packet is an event of no request: {"event":"trace", ...the packet's fields}.
            text = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if text.hasPrefix("{") { text = "{\"event\":\"trace\"," + text.dropFirst() }
            out.write(text + "\n")
        } else {
            out.trace(text.hasSuffix("\n") ? text : text + "\n")
        }
    }

    func setTrace(_ layers: Set<String>?, out: Output) {
        state.withLock { s in
            s.layers = layers
            s.out = out
            if layers == nil { s.decoder = PacketDecoder() }
        }
    }

    var tracing: Bool { state.withLock { $0.layers != nil } }

    /// Starts recording to `writer`; returns the writer it replaces (to be closed).
    func setCapture(_ writer: CaptureWriter?) -> CaptureWriter? {
        state.withLock { s in
            let old = s.writer
            s.writer = writer
            return old
        }
    }

    var capturePath: String? { state.withLock { $0.writer?.path } }
}

/// What a pairing asks the user when the session has no `--passkey` or `--yes` for it: the
/// passkey the peer shows (Passkey Entry, Core v5.4 Vol 3 Part H 2.3.5.3) or whether both show
/// the same number (Numeric Comparison, 2.3.5.6.2). The first answer wins; none within
/// `PairingQuestion.patience` refuses, before SMP's own 30 s timeout (3.4) ends the pairing.
final class PairingQuestion: Sendable {
    enum Kind: Sendable, Equatable { case passkey, comparison(UInt32) }
    static let patience: Duration = .seconds(25)
    let kind: Kind
    let peer: DeviceAddress
    let connection: UInt16?
    private let state = Mutex<(answer: UInt32??, waiter: CheckedContinuation<UInt32?, Never>?)>((nil, nil))
    private let expired = Atomic<Bool>(false)

    init(_ kind: Kind, peer: DeviceAddress, connection: UInt16?) {
        self.kind = kind
        self.peer = peer
        self.connection = connection
    }

    var word: String { kind == .passkey ? "passkey" : "confirm" }

    /// What the user is asked, and how to answer at a prompt that takes commands.
    var text: String {
        switch kind {
        case .passkey: "\(peer) asks for the passkey it shows: answer `passkey NNNNNN` (or `passkey no` to refuse)"
        case .comparison(let n): "does \(peer) show \(sixDigits(n))? answer `confirm yes` or `confirm no`"
        }
    }

    /// The passkey, or 1 for "yes" to a comparison; nil refuses. False: answered already.
    @discardableResult
    func answer(_ value: UInt32?) -> Bool {
        let waiter = state.withLock { s -> CheckedContinuation<UInt32?, Never>?? in
            guard s.answer == nil else { return nil }
            s.answer = .some(value)
            defer { s.waiter = nil }
            return .some(s.waiter)
        }
        guard let waiter else { return false }
        waiter?.resume(returning: value)
        return true
    }

    var isAnswered: Bool { state.withLock { $0.answer != nil } }
    /// Whether `wait` gave up for want of an answer.
    var timedOut: Bool { expired.load(ordering: .relaxed) }

    /// The answer; nil after `patience` or when the pairing's task is cancelled.
    func wait() async -> UInt32? {
        let timer = Task { [weak self] in
            guard (try? await Task.sleep(for: Self.patience)) != nil, let self else { return }
            // (Marked first: the answer resumes the waiter, which reads the mark.)
            self.expired.store(true, ordering: .relaxed)
            self.answer(nil)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { c in
                let ready = state.withLock { s -> UInt32?? in
                    if let a = s.answer { return .some(a) }
                    s.waiter = c
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        } onCancel: { answer(nil) }
    }
}

/// Answers pairing from the session's options (`--passkey`, `--yes`), else asks: a
/// `pairingQuestion` event and line, answered by the `passkey` and `confirm` commands or, in the
/// shell, at a prompt of its own (`prompter`). Reports the security events of every link, with
/// its `connection`.
final class SessionPairing: PairingDelegate, Sendable {
    let passkey: UInt32?
    let yes: Bool
    let bondDirectory: String?
    private let outputs = Mutex<(base: Output?, byPeer: [DeviceAddress: (Output, UInt16)])>((nil, [:]))
    /// Questions not answered yet, oldest first (one per pairing in progress, so few).
    private let questions = Mutex<[PairingQuestion]>([])
    /// The shell's: shows the question at its prompt and answers it; false: it cannot now (no
    /// command in the foreground), the user answers with `passkey` or `confirm`.
    let prompter = Mutex<(@Sendable (PairingQuestion) -> Bool)?>(nil)

    init(passkey: UInt32?, yes: Bool, bondDirectory: String?) {
        self.passkey = passkey
        self.yes = yes
        self.bondDirectory = bondDirectory
    }

    func setBase(_ out: Output) { outputs.withLock { $0.base = out } }
    /// Events of `peer` go to `out` (the request securing it, or the one that made the link).
    func route(_ peer: DeviceAddress, to out: Output, connection: UInt16) { outputs.withLock { $0.byPeer[peer] = (out, connection) } }
    func forget(_ peer: DeviceAddress) { _ = outputs.withLock { $0.byPeer.removeValue(forKey: peer) } }

    private func output(for peer: DeviceAddress) -> (Output?, UInt16?) {
        outputs.withLock { o in o.byPeer[peer].map { ($0.0, $0.1) } ?? (o.base, nil) }
    }

    func enterPasskey(peer: DeviceAddress) async -> UInt32? {
        if let passkey { return passkey }
        return await ask(.passkey, peer: peer)
    }

    func confirmNumber(_ number: UInt32, peer: DeviceAddress) async -> Bool {
        if yes { return true }
        return await ask(.comparison(number), peer: peer) == 1
    }

    private func ask(_ kind: PairingQuestion.Kind, peer: DeviceAddress) async -> UInt32? {
        let (out, connection) = output(for: peer)
        let question = PairingQuestion(kind, peer: peer, connection: connection)
        questions.withLock { $0.append(question) }
        defer { questions.withLock { $0.removeAll { $0 === question } } }
        var fields: [Field] = [.text("event", "pairingQuestion"), .text("question", question.word), .text("address", peer.address.description)]
        if case .comparison(let n) = kind { fields.append(.text("number", sixDigits(n))) }
        out?.event(fields + (connection.map { [.int("connection", $0)] } ?? []))
        let prompted = prompter.withLock { $0 }?(question) ?? false
        if !prompted { out?.line("\(timestamp()) \(question.text)") }
        let answer = await question.wait()
        if answer == nil, !Task.isCancelled {
            out?.error("\(question.word) for \(peer): " + (question.timedOut ? "no answer in \(formatSeconds(Double(PairingQuestion.patience.components.seconds))), refused" : "refused"))
        }
        return answer
    }

    /// `passkey N|no` or `confirm yes|no`: answers the oldest open question of that kind (on
    /// `connection`, if given). False: none is open.
    func answer(_ word: String, _ value: UInt32?, connection: UInt16?) -> Bool {
        let open = questions.withLock { list in
            list.first { $0.word == word && !$0.isAnswered && (connection == nil || $0.connection == connection) }
        }
        return open?.answer(value) ?? false
    }

    func securityEvent(_ event: SecurityEvent, peer: DeviceAddress) {
        let (out, connection) = output(for: peer)
        guard let out else { return }
        for (fields, text) in describe(event, peer: peer, bondDirectory: bondDirectory) {
            out.event(fields + (connection.map { [.int("connection", $0)] } ?? []))
            out.line("\(timestamp()) \(text)")
        }
    }
}

/// The session's state: the controller, its links, what it serves. Requests may run at once
/// (the JSON session); each takes the state it needs between its awaits.
actor SessionEngine {
    let central: Central
    let transportName: String
    let tap: SessionTap
    let pairing: SessionPairing
    let bondDirectory: String?
    /// Session-level events (no request caused them).
    let base: Output
    /// The language of `help` (`--lang`, the locale). The session's other lines are English for
    /// now, so its outputs carry none: a line in Chinese among English ones would read worse.
    let helpLanguage: Language
    private var links: [SessionLink] = []
    private var selected: String?
    /// Advertisers heard (scan, connect), for names and completion: bounded.
    private let names = AdvertiserNames()
    private var peripheral: Peripheral?
    /// The served profile's ticker (demo, secure): stopped with the peripheral.
    private var peripheralTasks: [Task<Void, Never>] = []
    /// Tasks that report what happens after a request ended (a link going down, a served
    /// table's events): `close` lets them say it before the session's last line.
    private var reporters: [Int: Task<Void, Never>] = [:]
    private var nextReporter = 0

    /// Keeps `body` as a reporter until it ends (bounded: a finished one is let go).
    private func report(_ body: @escaping @Sendable () async -> Void) {
        let key = nextReporter
        nextReporter += 1
        reporters[key] = Task { [weak self] in
            await body()
            await self?.reported(key)
        }
    }
    private func reported(_ key: Int) { reporters[key] = nil }
    private var serving: (profile: String, name: String, services: [BluetoothUUID])?
    private var closed = false

    init(central: Central, transportName: String, tap: SessionTap, pairing: SessionPairing, bondDirectory: String?, base: Output,
         helpLanguage: Language) {
        self.helpLanguage = helpLanguage
        self.central = central
        self.transportName = transportName
        self.tap = tap
        self.pairing = pairing
        self.bondDirectory = bondDirectory
        self.base = base
    }

    /// Opens the controller of `-t` (and `-w`, `--trace`) with the session's security options.
    static func open(_ c: CommandContext, base: Output) async throws -> SessionEngine {
        let spec = try TransportSpec(parsing: c.transportSpec)
        if case .virtual = spec {
            throw CLIFailure("-t virtual is an in-process controller alone on its link: run `ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002` and give the session -t tcp:127.0.0.1:9002", exitCode: ExitCode.usage)
        }
        let security = try securityConfiguration(c)
        let writer = try openCaptureWriter(c)
        let tap = SessionTap()
        _ = tap.setCapture(writer)
        if let layers = c.traceLayers { tap.setTrace(layers, out: base) }
        let inner: any HCITransport
        do { inner = try spec.open() } catch {
            writer.map(closeCapture)
            throw error
        }
        let transport = CapturingTransport(inner, observer: { direction, packet, date in tap.observe(direction, packet, date) })
        var options = StackOptions()
        options.mtuOnConnect = nil  // `connect` exchanges its --mtu itself
        options.security = security
        options.privacy = privacyOptions(c)
        options.host.randomStaticAddress = security.bondDirectory.flatMap(bondedRandomStaticAddress)
        let pairing = SessionPairing(passkey: security.smp.fixedPasskey, yes: c.args.has("yes"), bondDirectory: security.bondDirectory)
        pairing.setBase(base)
        options.pairingDelegate = pairing
        let central: Central
        do {
            central = try await Central.open(transport, options: options)
        } catch {
            transport.close()
            tap.setCapture(nil).map(closeCapture)
            throw error
        }
        return SessionEngine(central: central, transportName: transport.name, tap: tap, pairing: pairing,
                             bondDirectory: security.bondDirectory, base: base, helpLanguage: c.out.language)
    }

    /// Calls `lost` once if the transport to the controller is lost (the session cannot go on).
    nonisolated func watchTransport(_ lost: @escaping @Sendable (String) -> Void) {
        let events = central.events
        Task { [weak self] in
            for await e in events {
                // (Closing the session ends the host too: not a loss.)
                if case .failure(let message) = e, let self, !(await self.closed) { lost(message); return }
            }
        }
    }

    /// Leaves the controller as found: subscriptions ended, advertising and scans stopped, links
    /// disconnected, the transport and the capture closed.
    func close() async {
        guard !closed else { return }
        closed = true
        for l in links { for (_, t) in l.subscriptions { t.cancel() } }
        for t in peripheralTasks { t.cancel() }
        await peripheral?.close()
        await central.close()
        // The links are down (or the transport is): their disconnections are reported now,
        // bounded in case a controller never answered.
        let pending = Array(reporters.values)
        let all = Task { for t in pending { await t.value } }
        let done = FirstOutcome<Bool>()
        Task { await all.value; done.resolve(true) }
        let limit = Task { try? await Task.sleep(for: .seconds(5)); done.resolve(false) }
        _ = await done.value
        limit.cancel()
        tap.setCapture(nil).map(closeCapture)
    }

    // MARK: Running a request

    /// Runs one command line (`words`, the first the command); `link` names the link for the
    /// commands that use one (the JSON request's "link", or `--link`).
    func run(_ words: [String], link: String?, out: Output) async -> SessionOutcome {
        guard let name = words.first else { return .done }
        guard let command = sessionCommand(named: name) else {
            return .failed("unknown command '\(name)': `help` lists them", exitCode: ExitCode.usage)
        }
        let args: ParsedArguments
        do {
            args = try parseSessionArguments(Array(words.dropFirst()), command: command)
        } catch let e as UsageError {
            return .failed("\(e.message) (see `help \(command.name)`)", exitCode: ExitCode.usage)
        } catch {
            return .failed("\(error)", exitCode: ExitCode.usage)
        }
        if args.has("help") { return help(command.name, out: out) }
        do {
            return try await execute(command.name, args, link: link ?? args.last("link"), out: out)
        } catch let e as UsageError {
            return .failed("\(e.message) (see `help \(command.name)`)", exitCode: ExitCode.usage)
        } catch let e as CLIFailure {
            return .failed(e.message, exitCode: e.exitCode)
        } catch is CancellationError {
            return .failed("cancelled", exitCode: ExitCode.failure)
        } catch BLEError.transport(let e) {
            return .failed("\(e)", exitCode: ExitCode.transport)
        } catch let e as TransportError {
            return .failed("\(e)", exitCode: ExitCode.transport)
        } catch {
            if Task.isCancelled { return .failed("cancelled", exitCode: ExitCode.failure) }
            return .failed("\(error)", exitCode: ExitCode.failure)
        }
    }

    private func execute(_ command: String, _ args: ParsedArguments, link: String?, out: Output) async throws -> SessionOutcome {
        let p = args.positionals
        func noPositionals() throws {
            guard p.isEmpty else { throw UsageError("\(command) takes no arguments, got: \(p.joined(separator: " "))") }
        }
        func one(_ what: String) throws -> String {
            guard p.count == 1 else { throw UsageError(p.isEmpty ? "\(command) needs \(what)" : "\(command) takes one \(what), got: \(p.joined(separator: " "))") }
            return p[0]
        }
        switch command {
        case "help":
            guard p.count <= 1 else { throw UsageError("help takes at most one COMMAND") }
            return help(p.first, out: out)
        case "quit":
            return .quit
        case "cancel":
            // (The JSON session answers it before it reaches here.)
            throw UsageError("cancel ID stops a request of the JSON session; in the shell, Ctrl-C stops the running command")
        case "scan":
            try noPositionals()
            return try await scan(args, out: out)
        case "connect":
            return try await connect(try Target(parsing: try one("a TARGET (AA:BB:CC:DD:EE:FF[/public|/random] or name:TEXT)"), command: command), args, out: out)
        case "links":
            try noPositionals()
            listLinks(out: out)
            return .done
        case "select":
            let l = try resolveLink(try one("a LINK (a name, an address or a connection handle; `links` lists them)"))
            selected = l.name
            out.event([.text("event", "selected"), .text("link", l.name), .int("connection", l.remote.connectionHandle)])
            out.line("selected \(l.name)")
            return .done
        case "discover":
            try noPositionals()
            return try await action(.discover, link: link, out: out)
        case "read":
            return try await action(.read(try CharacteristicRef(parsing: try one("a CHAR (a UUID or a handle such as 0x0010)"), command: command)), link: link, out: out)
        case "write", "write-without-response":
            let text = try one("CHAR=HEX, e.g. fff2=68656c6c6f")
            guard let eq = text.firstIndex(of: "=") else { throw UsageError("\(command) needs CHAR=HEX, e.g. fff2=68656c6c6f") }
            let ref = try CharacteristicRef(parsing: String(text[..<eq]), command: command)
            guard let bytes = [UInt8](hex: String(text[text.index(after: eq)...])) else {
                throw UsageError("\(command)'s value must be hex octets, e.g. fff2=68656c6c6f")
            }
            let withResponse = command == "write" && !args.has("without-response")
            return try await action(.write(ref, bytes, withResponse: withResponse), link: link, out: out)
        case "subscribe":
            return try await subscribe(try CharacteristicRef(parsing: try one("a CHAR"), command: command), link: link, out: out)
        case "unsubscribe":
            return try await unsubscribe(try CharacteristicRef(parsing: try one("a CHAR"), command: command), link: link, out: out)
        case "pair":
            try noPositionals()
            return try await pair(args, link: link, out: out)
        case "passkey", "confirm":
            let w = try one(command == "passkey" ? "the passkey the peer shows (6 digits), or no" : "yes or no")
            let value: UInt32?
            switch (command, w.lowercased()) {
            case (_, "no"), (_, "n"): value = nil
            case ("confirm", "yes"), ("confirm", "y"): value = 1
            case ("passkey", _) where w.count <= 6 && w.allSatisfy(\.isASCIIDigit): value = UInt32(w)
            default: throw UsageError(command == "passkey" ? "passkey takes up to 6 digits (000000-999999) or no, got '\(w)'" : "confirm takes yes or no, got '\(w)'")
            }
            let connection = try link.map { try resolveLink($0).remote.connectionHandle }
            guard pairing.answer(command, value, connection: connection) else {
                throw CLIFailure("no pairing asks for " + (command == "passkey" ? "a passkey" : "a confirmation") + " now", exitCode: ExitCode.failure)
            }
            out.event([.text("event", "answered"), .text("question", command), .bool("accepted", value != nil)] + (connection.map { [.int("connection", $0)] } ?? []))
            out.line(value == nil ? "refused" : "answered")
            return .done
        case "bonds":
            var a = args
            if !a.has("bonds"), let dir = bondDirectory { a.options.append(("bonds", dir)) }
            let code = try await runBonds(CommandContext(command: "bonds", args: a, out: out))
            return code == ExitCode.success ? .done : .failed(out.lastError ?? "bonds failed", exitCode: code)
        case "serve":
            try noPositionals()
            return try await serve(args, out: out)
        case "advertise":
            guard p.count <= 1 else { throw UsageError("advertise takes at most one word: off") }
            if let w = p.first {
                guard w == "off" else { throw UsageError("advertise takes `off` or nothing, got '\(w)'") }
                return try await stopAdvertising(out: out)
            }
            return try await advertise(args, out: out)
        case "disconnect":
            guard p.count <= 1 else { throw UsageError("disconnect takes at most one LINK") }
            return try await disconnect(p.first ?? link, out: out)
        case "trace":
            let w = try one("on [LAYERS] or off")
            if w == "off" {
                tap.setTrace(nil, out: out)
            } else if w == "on" {
                tap.setTrace(try parseLayers(args.last("layers")), out: base)
            } else {
                throw UsageError("trace takes on or off, got '\(w)'")
            }
            out.event([.text("event", "trace"), .bool("on", tap.tracing)])
            out.line("trace \(tap.tracing ? "on" : "off")")
            return .done
        case "capture":
            let w = try one("a FILE, or off")
            if w == "off" {
                let old = tap.setCapture(nil)
                old.map(closeCapture)
                out.event([.text("event", "capture"), .bool("on", false)] + (old.map { [.text("file", $0.path)] } ?? []))
                out.line(old.map { "capture \($0.path) closed" } ?? "no capture was running")
                return .done
            }
            let writer: CaptureWriter
            do { writer = try CaptureWriter.open(path: w) } catch { throw CLIFailure("\(error)", exitCode: ExitCode.failure) }
            tap.setCapture(writer).map(closeCapture)
            out.event([.text("event", "capture"), .bool("on", true), .text("file", w)])
            out.line("capturing every HCI packet to \(w) (`capture off` closes it)")
            return .done
        default:
            throw UsageError("unknown command '\(command)'")
        }
    }

    // MARK: Commands

    private func help(_ command: String?, out: Output) -> SessionOutcome {
        // The JSON event's text is English in every language (JSON never changes); the human
        // line follows the language.
        let text: (Language) -> String
        if let command {
            guard let c = sessionCommand(named: command) else { return .failed("no command '\(command)': `help` lists them", exitCode: ExitCode.usage) }
            text = c.help
        } else {
            text = sessionHelpSummary
        }
        out.event([.text("event", "help"), .text("text", text(.english))])
        out.line(text(helpLanguage))
        return .done
    }

    private func scan(_ args: ParsedArguments, out: Output) async throws -> SessionOutcome {
        let duration = try args.double("duration", command: "scan")
        let filter = try scanFilter(args, command: "scan")
        let stream = try await central.scan(filter, active: !args.has("passive"), everyReport: true)
        let everyReport = args.has("duplicates")
        out.progress("Scanning (\(args.has("passive") ? "passive" : "active"))\(duration.map { " for \(formatSeconds($0))" } ?? "") — Ctrl-C (or `cancel ID`) stops it…")
        let consumer = Task { () -> (any Error)? in
            var printed = PrintedAdvertisers()
            do {
                for try await adv in stream {
                    names.remember(adv)
                    guard everyReport || printed.changed(adv) else { continue }
                    out.event(adv.jsonFields)
                    out.line(humanLine(adv, out: out))
                }
            } catch { return error is CancellationError ? nil : error }
            return nil
        }
        // Ends at the duration, or when the request is cancelled (Ctrl-C, `cancel`): its normal end.
        await withTaskCancellationHandler {
            if let duration { try? await Task.sleep(for: .milliseconds(Int(duration * 1000))) } else {
                while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
            }
        } onCancel: { consumer.cancel() }
        consumer.cancel()
        if let failure = await consumer.value { throw failure }
        return .done
    }

    private func uniqueName(_ wanted: String) -> String {
        guard links.contains(where: { $0.name == wanted }) else { return wanted }
        var n = 2
        while links.contains(where: { $0.name == "\(wanted)#\(n)" }) { n += 1 }
        return "\(wanted)#\(n)"
    }

    private func connect(_ target: Target, _ args: ParsedArguments, out: Output) async throws -> SessionOutcome {
        let timeout = try args.double("timeout", command: "connect") ?? 10
        let mtu = try args.int("mtu", command: "connect", range: 23...517) ?? 517
        let (address, found) = try await targetAddress(target, central: central) {
            try await findTarget(target, central: central, timeout: timeout, onSeen: { [names] in names.remember($0) }, untilSignal: false) {
                out.progress("Scanning for \(target) (up to \(formatSeconds(timeout)))…")
            }
        }
        let name = found.map(\.name) ?? names.name(of: address.address.description)
        if let up = links.first(where: { $0.remote.address == address && $0.remote.disconnectReason == nil }) {
            throw CLIFailure("already connected to \(address) as \(up.name)", exitCode: ExitCode.failure)
        }
        out.progress("Connecting to \(address) (up to \(formatSeconds(timeout)))…")
        let remote = try await connectTarget(address, for: target, central: central, timeout: timeout)
        let effectiveMTU: Int
        do { effectiveMTU = try await remote.exchangeMTU(mtu) } catch BLEError.att { effectiveMTU = remote.mtu }
        let linkName = uniqueName(name ?? address.address.description)
        pairing.route(address, to: out, connection: remote.connectionHandle)
        links.append(SessionLink(name: linkName, remote: remote, out: out))
        selected = linkName
        out.event([.text("event", "connected"), .text("address", address.address.description), .text("addressType", address.type.simple),
                   .int("handle", remote.connectionHandle), .int("connection", remote.connectionHandle), .int("mtu", effectiveMTU),
                   .text("link", linkName)])
        out.line("Connected to \(out.bold(linkName)) (\(address), handle \(remote.connectionHandle)), ATT MTU \(effectiveMTU); selected")
        // A disconnection the session did not ask for is the connect request's event.
        report { [weak self] in
            let reason = await remote.disconnected()
            await self?.linkWentDown(linkName, remote: remote, reason: reason)
        }
        return .done
    }

    private func linkWentDown(_ name: String, remote: RemotePeripheral, reason: HCIStatus) {
        guard let i = links.firstIndex(where: { $0.name == name && $0.remote === remote }) else { return }
        let l = links.remove(at: i)
        for (_, t) in l.subscriptions { t.cancel() }
        if selected == name { selected = links.count == 1 ? links[0].name : nil }
        pairing.forget(remote.address)
        guard !l.closing else { return }
        l.out.event([.text("event", "disconnected"), .code("reason", reason.rawValue), .text("message", reason.name),
                     .int("connection", remote.connectionHandle), .text("link", name)])
        l.out.line("\(timestamp()) \(name) disconnected: \(reason.name) (\(hexCode(reason.rawValue)))")
    }

    /// LINK: a link's name, its peer's address, or its connection handle; nil: the selected one
    /// (or the only one).
    private func resolveLink(_ text: String?) throws -> SessionLink {
        let up = links.filter { $0.remote.disconnectReason == nil }
        guard let text else {
            if let selected, let l = up.first(where: { $0.name == selected }) { return l }
            if up.count == 1 { return up[0] }
            throw CLIFailure(up.isEmpty ? "no link: `connect TARGET` first" : "\(up.count) links are up: `select LINK` one, or name it (`links` lists them)",
                             exitCode: ExitCode.failure)
        }
        if let l = up.first(where: { $0.name == text }) ?? up.first(where: { $0.name.lowercased() == text.lowercased() })
            ?? up.first(where: { $0.remote.address.address.description.lowercased() == text.lowercased() })
            ?? up.first(where: { String($0.remote.connectionHandle) == text }) {
            return l
        }
        throw CLIFailure("no link '\(text)'" + (up.isEmpty ? ": none is up" : "; up: " + up.map(\.name).joined(separator: ", ")), exitCode: ExitCode.failure)
    }

    private func listLinks(out: Output) {
        for l in links where l.remote.disconnectReason == nil {
            let a = l.remote.address
            out.event([.text("event", "link"), .text("link", l.name), .text("address", a.address.description), .text("addressType", a.type.simple),
                       .int("connection", l.remote.connectionHandle), .int("mtu", l.remote.mtu), .bool("selected", l.name == selected),
                       Field("subscriptions", .list(l.subscriptions.keys.sorted().map { .int(Int($0)) }))])
            out.line("\(l.name == selected ? "*" : " ") \(out.bold(l.name))  \(a)  handle \(l.remote.connectionHandle)  ATT MTU \(l.remote.mtu)"
                     + (l.subscriptions.isEmpty ? "" : "  subscribed: " + l.subscriptions.keys.sorted().map { hexCode($0, digits: 4) }.joined(separator: " ")))
        }
        if links.isEmpty { out.line("no links (`connect TARGET` makes one)") }
        if let serving {
            out.line("serving \(serving.profile) as \(serving.name)")
        }
    }

    /// read, write, discover: central's own actions (the same events and lines), on one link.
    private func action(_ a: CentralAction, link: String?, out: Output) async throws -> SessionOutcome {
        let l = try resolveLink(link)
        // The link's name in every event of the request.
        let tagged = out.adding([.text("link", l.name)])
        let ok = try await ble_hci.run(a, remote: l.remote, out: tagged)
        watchServiceChanged(l)
        return ok ? .done : .failed(tagged.lastError ?? "failed", exitCode: ExitCode.failure)
    }

    private func characteristic(_ ref: CharacteristicRef, on l: SessionLink, for op: String) async throws -> GATTRemoteCharacteristic {
        let c = try await l.remote.characteristic(ref)
        watchServiceChanged(l)
        guard let c else {
            throw CLIFailure("\(l.name) has no characteristic \(ref) to \(op): `discover` shows what it has", exitCode: ExitCode.failure)
        }
        return c
    }

    /// From a link's first discovery on, its peer's Service Changed indications are subscribed
    /// to (Core v5.4 Vol 3 Part G 7.1: a client configures them itself) and reported; the GATT
    /// client rediscovers the range in its cache, which every later command resolves from.
    private func watchServiceChanged(_ l: SessionLink) {
        guard let i = links.firstIndex(where: { $0.name == l.name && $0.remote === l.remote }), links[i].serviceChangedWatch == nil else { return }
        let remote = l.remote, name = l.name, out = l.out
        links[i].serviceChangedWatch = Task {
            guard let tree = try? await remote.discoverAll(),
                  let sc = tree.first(where: { $0.service.uuid == GATTUUID.genericAttribute })?.characteristics.map(\.characteristic)
                      .first(where: { $0.uuid == GATTUUID.serviceChanged && $0.properties.contains(.indicate) }),
                  let values = try? await remote.notifications(for: sc) else { return }
            do {
                for try await v in values where v.count == 4 {
                    let start = UInt16(v[0]) | UInt16(v[1]) << 8, end = UInt16(v[2]) | UInt16(v[3]) << 8
                    out.event([.text("event", "servicesChanged"), .int("start", start), .int("end", end),
                               .int("connection", remote.connectionHandle), .text("link", name)])
                    out.line("\(timestamp()) \(name) changed its services in \(hexCode(start, digits: 4))-\(hexCode(end, digits: 4)): commands use them rediscovered")
                }
            } catch {}
        }
    }

    private func subscribe(_ ref: CharacteristicRef, link: String?, out: Output) async throws -> SessionOutcome {
        let l = try resolveLink(link)
        let c = try await characteristic(ref, on: l, for: "subscribe")
        if l.subscriptions[c.valueHandle] != nil { throw CLIFailure("already subscribed to \(c.uuid) on \(l.name)", exitCode: ExitCode.failure) }
        let kind = c.properties.contains(.notify) ? "notification" : "indication"
        let values: GATTNotificationStream
        do { values = try await l.remote.notifications(for: c) } catch BLEError.att(let e) {
            throw CLIFailure("\(l.name) refused the subscription to \(c.uuid): \(e.code.name) (\(hexCode(e.code.rawValue)))", exitCode: ExitCode.failure)
        }
        let name = l.name, connection = l.remote.connectionHandle, remote = l.remote
        let fields: [Field] = [.text("uuid", c.uuid.description), .int("handle", c.valueHandle), .int("connection", connection), .text("link", name)]
        let task = Task {
            var reported = 0
            do {
                for try await v in values {
                    let dropped = values.droppedCount + remote.droppedNotifications
                    if dropped > reported {
                        out.event([.text("event", "dropped")] + fields + [.int("count", dropped - reported), .int("total", dropped)])
                        reported = dropped
                    }
                    out.event([.text("event", kind)] + fields + [.bytes("value", v)])
                    out.line("\(timestamp()) \(name) \(kind) \(c.uuid) = \(out.green(valueLabel(v)))")
                }
            } catch {}
        }
        guard let i = links.firstIndex(where: { $0.name == name && $0.remote === remote }) else {
            task.cancel()
            throw CLIFailure("\(name) went down while subscribing", exitCode: ExitCode.failure)
        }
        links[i].subscriptions[c.valueHandle] = task
        out.event([.text("event", "subscribed")] + fields + [.text("kind", kind)])
        out.line("subscribed to \(uuidLabel(c.uuid)) on \(name) (\(kind)s print as they come; `unsubscribe \(c.uuid)` stops them)")
        return .done
    }

    private func unsubscribe(_ ref: CharacteristicRef, link: String?, out: Output) async throws -> SessionOutcome {
        let l = try resolveLink(link)
        let c = try await characteristic(ref, on: l, for: "unsubscribe")
        guard let i = links.firstIndex(where: { $0.name == l.name }), let task = links[i].subscriptions.removeValue(forKey: c.valueHandle) else {
            throw CLIFailure("not subscribed to \(c.uuid) on \(l.name)", exitCode: ExitCode.failure)
        }
        task.cancel()
        try await l.remote.stopNotifications(for: c)
        out.event([.text("event", "unsubscribed"), .text("uuid", c.uuid.description), .int("handle", c.valueHandle),
                   .int("connection", l.remote.connectionHandle), .text("link", l.name)])
        out.line("unsubscribed from \(uuidLabel(c.uuid)) on \(l.name)")
        return .done
    }

    private func pair(_ args: ParsedArguments, link: String?, out: Output) async throws -> SessionOutcome {
        let l = try resolveLink(link)
        pairing.route(l.remote.address, to: out, connection: l.remote.connectionHandle)
        defer { pairing.route(l.remote.address, to: l.out, connection: l.remote.connectionHandle) }
        do {
            let s = try await l.remote.pair(force: args.has("force"), mitm: args.has("mitm"))
            await l.remote.securitySettled()
            out.line("\(l.name): " + (s.encrypted ? "encrypted, key size \(s.keySize), " + (s.authenticated ? "authenticated (MITM)" : "unauthenticated") : "not encrypted"))
            return .done
        } catch let e as BLEError {
            if case .transport = e { throw e }
            throw CLIFailure("pairing with \(l.name) failed: \(e)", exitCode: ExitCode.failure)
        }
    }

    private func disconnect(_ text: String?, out: Output) async throws -> SessionOutcome {
        let l = try resolveLink(text)
        if let i = links.firstIndex(where: { $0.name == l.name }) { links[i].closing = true }
        let reason = try await l.remote.disconnect()
        reportDisconnected(reason, out: out.adding([.text("link", l.name)]), prefix: "\(l.name): ", connection: l.remote.connectionHandle)
        return .done
    }

    // MARK: The peripheral role

    /// The peripheral on our stack serving `services` (the one before stops advertising).
    private func makePeripheral(services: [GATTService], name: String, profile: String, out: Output) async -> Peripheral {
        if let old = peripheral {
            for t in peripheralTasks { t.cancel() }
            peripheralTasks = []
            await old.close()  // its events end (the reporter below finishes with them)
        }
        let p = await Peripheral.open(sharing: central, services: services, name: name)
        peripheral = p
        if profile == "demo" { peripheralTasks.append(DemoProfile.startTicker(on: p)) }
        if profile == "secure" { peripheralTasks.append(SecureProfile.startTicker(on: p)) }
        let pairing = self.pairing
        report {
            for await e in p.events {
                switch e {
                case .connected(let handle, let central):
                    pairing.route(central, to: out, connection: handle)
                    out.event([.text("event", "centralConnected"), .text("address", central.address.description),
                               .text("addressType", central.type.simple), .int("connection", handle)])
                    out.line("\(timestamp()) a central connected: \(central) (handle \(handle))")
                case .disconnected(let handle, let reason):
                    out.event([.text("event", "centralDisconnected"), .code("reason", reason.rawValue), .text("message", reason.name), .int("connection", handle)])
                    out.line("\(timestamp()) the central on handle \(handle) disconnected: \(reason.name) (\(hexCode(reason.rawValue)))")
                case .subscribed(let handle, let uuid, let indications):
                    out.event([.text("event", "subscribed"), .text("uuid", uuid.description), .int("connection", handle), .bool("indications", indications), .text("role", "peripheral")])
                    out.line("\(timestamp()) handle \(handle) subscribed to \(uuidLabel(uuid))")
                case .unsubscribed(let handle, let uuid):
                    out.event([.text("event", "unsubscribed"), .text("uuid", uuid.description), .int("connection", handle), .text("role", "peripheral")])
                    out.line("\(timestamp()) handle \(handle) unsubscribed from \(uuidLabel(uuid))")
                case .wrote(let handle, let uuid, let value):
                    out.event([.text("event", "written"), .text("uuid", uuid.description), .bytes("value", value), .int("connection", handle)])
                    out.line("\(timestamp()) handle \(handle) wrote \(uuidLabel(uuid)) = \(valueLabel(value))")
                case .read(let handle, let uuid):
                    out.event([.text("event", "readBy"), .text("uuid", uuid.description), .int("connection", handle)])
                    out.line("\(timestamp()) handle \(handle) read \(uuidLabel(uuid))")
                case .failure(let message):
                    out.error(message)
                case .parametersUpdated, .readyToUpdateSubscribers, .answered:
                    break
                }
            }
        }
        return p
    }

    private func serve(_ args: ParsedArguments, out: Output) async throws -> SessionOutcome {
        let gatt = try args.last("gatt").map { path -> GATTFile in
            if args.has("profile") { throw UsageError("--gatt serves the file's table: leave out --profile") }
            return try GATTFile(path: path, command: "serve")
        }
        let profile = gatt != nil ? "gatt" : args.last("profile") ?? "demo"
        let services: [GATTService], advertised: [BluetoothUUID]
        switch profile {
        case "gatt": (services, advertised) = (gatt!.services, gatt!.advertisedServices)
        case "demo": (services, advertised) = (DemoProfile.services, DemoProfile.advertisedServices)
        case "secure": (services, advertised) = (SecureProfile.services, SecureProfile.advertisedServices)
        default: throw UsageError("--profile must be demo or secure (band is served by `ble-hci peripheral --profile band`), got '\(profile)'")
        }
        let name = args.last("name") ?? gatt?.deviceName ?? "ble-hci"
        guard !name.isEmpty, name.utf8.count <= 248 else { throw UsageError("--name must be 1 to 248 octets of UTF-8") }
        if let path = args.last("gatt"), let problem = gatt?.handleProblem {
            out.progress("ble-hci: warning: --gatt \(path): handles reassigned in the file's order: \(problem)")
        }
        let p = await makePeripheral(services: services, name: name, profile: profile, out: out)
        serving = (profile, name, advertised)
        try await p.startAdvertising(AdvertisingOptions(name: name, serviceUUIDs: advertised))
        let address = await p.address
        out.event([.text("event", "advertising"), .text("name", name), .text("address", address.address.description),
                   .text("addressType", address.type.simple), .text("profile", profile)])
        out.line("Serving \(profile) and advertising as \(out.bold(name)) (\(address.address), \(address.type.simple)); `advertise off` stops advertising")
        return .done
    }

    private func advertise(_ args: ParsedArguments, out: Output) async throws -> SessionOutcome {
        let name = args.last("name") ?? serving?.name ?? "ble-hci"
        guard !name.isEmpty, name.utf8.count <= 248 else { throw UsageError("--name must be 1 to 248 octets of UTF-8") }
        let p: Peripheral
        if let existing = peripheral {
            p = existing
        } else {
            // Nothing served yet: Generic Access and Generic Attribute only.
            p = await makePeripheral(services: [], name: name, profile: "none", out: out)
            serving = ("none", name, [])
        }
        try await p.startAdvertising(AdvertisingOptions(name: name, serviceUUIDs: serving?.services ?? []))
        let address = await p.address
        out.event([.text("event", "advertising"), .text("name", name), .text("address", address.address.description),
                   .text("addressType", address.type.simple), .text("profile", serving?.profile ?? "none")])
        out.line("Advertising as \(out.bold(name)) (\(address.address), \(address.type.simple))")
        return .done
    }

    private func stopAdvertising(out: Output) async throws -> SessionOutcome {
        guard let p = peripheral else { throw CLIFailure("not advertising", exitCode: ExitCode.failure) }
        try await p.stopAdvertising()
        out.event([.text("event", "advertising"), .bool("on", false)])
        out.line("advertising stopped")
        return .done
    }

    // MARK: Completion (the shell's Tab)

    /// The selected link's name (the shell's prompt shows it).
    var selectedLink: String? { (try? resolveLink(nil))?.name }

    /// What Tab offers for the word being typed after `words` (the command first).
    func completions(for words: [String]) async -> [String] {
        guard let command = words.first else { return sessionCommands.map(\.name) }
        if words.last == "--link" { return links.map(\.name) }
        let link = try? resolveLink(nil)
        let charCommands: Set<String> = ["read", "write", "write-without-response", "subscribe", "unsubscribe"]
        var chars: [String] = []
        if let l = link, charCommands.contains(command) {
            // Discovered at the first Tab if need be (as the first read would), so that Tab
            // offers what the link has.
            for s in (try? await l.remote.discoverAll()) ?? [] {
                for c in s.characteristics {
                    chars.append(c.characteristic.uuid.description)
                    chars.append(hexCode(c.characteristic.valueHandle, digits: 4))
                    for d in c.descriptors { chars.append(hexCode(d.handle, digits: 4)) }
                }
            }
            watchServiceChanged(l)
        }
        var unique: [String] = []
        for c in chars where !unique.contains(c) { unique.append(c) }
        switch command {
        case "connect":
            return names.targets
        case "read", "subscribe", "unsubscribe": return unique
        case "write", "write-without-response": return unique.map { $0 + "=" }
        case "select", "disconnect": return links.map(\.name)
        case "help": return sessionCommands.map(\.name)
        case "trace": return words.count == 1 ? ["on", "off"] : []
        case "capture": return ["off"]
        case "advertise": return ["off", "--name"]
        case "serve": return ["--profile", "--gatt", "--name", "demo", "secure"]
        case "bonds": return ["list", "remove", "clear"]
        default: return []
        }
    }
}
