import Foundation
import Decoder
import HCI
import SMP
import BLE
import Synchronization

/// The security options of `central` and `peripheral` (CLI.md "Security (SMP) options").
let securityFlags: Set<String> = ["yes", "mitm", "legacy", "sc-only", "no-bond", "privacy"]
let securityValued: Set<String> = ["io", "passkey", "min-key-size", "bonds", "oob-out", "oob-in"]

let securityHelp = """
Security (SMP):
  --io CAP           IO capability: none (default), display, yesno, keyboard, keyboard-display
  --passkey N        the 6-digit passkey this side displays or enters (instead of random / asking)
  --yes              accept a numeric comparison without asking (with no terminal and no
                     --yes, it is refused)
  --mitm             require MITM protection (authenticated pairing)
  --legacy           offer LE legacy pairing only
  --sc-only          Secure Connections only: refuse legacy pairing
  --min-key-size N   smallest encryption key size accepted, 7-16 (default 16)
  --no-bond          pair without storing keys
  --bonds DIR        where bonds live (default $XDG_STATE_HOME/ble-hci, else ~/.local/state/ble-hci)
  --privacy          advertise, scan and connect from a resolvable private address made from
                     our IRK (kept in the bonds directory), changed every 15 minutes; peers
                     that bond get the IRK and identity address to recognise us. Bonded
                     peers' IRKs, with ours, go into the controller's resolving list at start
                     and as they bond; the controller then makes and rotates our RPA itself
                     (Own_Address_Type 0x03). A line on stderr when it cannot: the host then
                     resolves peers and makes our RPA
  --oob-out FILE     write our out-of-band data to FILE before anything else (JSON:
                     "confirm" and "random" for Secure Connections, C = f4(PKx, PKx, r, 0) of
                     the key pair this run pairs with; "tk" for legacy pairing), for the peer's
                     --oob-in; written whole (temp file, fsync, rename), mode 0600
  --oob-in FILE      read the peer's out-of-band data from FILE (its --oob-out): pairing then
                     uses the OOB method (authenticated: MITM-protected, Core v5.4 Vol 3 Part H
                     2.3.5.6.4 and 2.3.5.4). Secure Connections needs one side to have the
                     other's data; legacy pairing needs both to hold the same "tk": give
                     --oob-out to one side and --oob-in to the other
Bonded peers advertising from resolvable private addresses are recognised with their IRKs:
TARGET may be their identity address.
"""

/// `--bonds DIR`, or the default of CLI.md.
func bondDirectory(_ c: CommandContext) -> String {
    if let dir = c.args.last("bonds") { return dir }
    let env = ProcessInfo.processInfo.environment
    if let state = env["XDG_STATE_HOME"], !state.isEmpty { return state + "/ble-hci" }
    return (env["HOME"] ?? NSHomeDirectory()) + "/.local/state/ble-hci"
}

/// Builds the security configuration from the options (usage errors name the option).
func securityConfiguration(_ c: CommandContext) throws -> SecurityConfiguration {
    let cmd = c.command
    var s = SecurityConfiguration()
    if let io = c.args.last("io") {
        switch io {
        case "none": s.smp.ioCapability = .noInputNoOutput
        case "display": s.smp.ioCapability = .displayOnly
        case "yesno": s.smp.ioCapability = .displayYesNo
        case "keyboard": s.smp.ioCapability = .keyboardOnly
        case "keyboard-display": s.smp.ioCapability = .keyboardDisplay
        default: throw UsageError("--io must be none, display, yesno, keyboard or keyboard-display, got '\(io)'", command: cmd)
        }
    }
    if let text = c.args.last("passkey") {
        guard text.count <= 6, text.allSatisfy(\.isASCIIDigit), let n = UInt32(text) else {
            throw UsageError("--passkey needs a 6-digit number (000000-999999), got '\(text)'", command: cmd)
        }
        s.smp.fixedPasskey = n
    }
    s.smp.mitm = c.args.has("mitm")
    if c.args.has("legacy") && c.args.has("sc-only") {
        throw UsageError("--legacy and --sc-only exclude each other", command: cmd)
    }
    s.smp.secureConnections = !c.args.has("legacy")
    s.smp.secureConnectionsOnly = c.args.has("sc-only")
    if let n = try c.args.int("min-key-size", command: cmd, range: 7...16) { s.smp.minimumKeySize = n }
    s.smp.bonding = !c.args.has("no-bond")
    try configureOOB(&s, c)
    let directory = bondDirectory(c)
    s.bondDirectory = directory
    s.bondStoreProblem = bondStoreReporter(out: c.out, directory: directory)
    return s
}

/// `--oob-out FILE` (our OOB data, written now) and `--oob-in FILE` (the peer's).
func configureOOB(_ s: inout SecurityConfiguration, _ c: CommandContext) throws {
    let cmd = c.command
    var oob = SMPOOBData()
    if let path = c.args.last("oob-out") {
        let keyPair = SMPKeyPair.generate()
        let (confirm, random) = SMPOOBData.local(keyPair: keyPair)
        let tk = SMPCrypto.randomBytes(16)
        s.oobKeyPair = keyPair
        oob.localRandom = random
        oob.legacyTK = tk
        let text = jsonObject([.bytes("confirm", confirm), .bytes("random", random), .bytes("tk", tk)]) + "\n"
        let directory = (path as NSString).deletingLastPathComponent
        if let failure = AtomicFile.write(Data(text.utf8), to: path, directory: directory.isEmpty ? "." : directory) {
            throw UsageError("--oob-out \(path): cannot write \(failure.path): \(String(cString: strerror(failure.errno)))", command: cmd)
        }
    }
    if let path = c.args.last("oob-in") {
        func bad(_ what: String) -> UsageError { UsageError("--oob-in \(path): \(what)", command: cmd) }
        guard let data = FileManager.default.contents(atPath: path) else { throw bad("cannot read it") }
        guard let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
            throw bad("not a JSON object (write it with the peer's --oob-out)")
        }
        func octets(_ key: String) throws -> [UInt8]? {
            guard let value = object[key] else { return nil }
            guard let text = value as? String, let b = [UInt8](hex: text), b.count == 16 else { throw bad("\"\(key)\" must be 16 octets in hex") }
            return b
        }
        let confirm = try octets("confirm"), random = try octets("random"), tk = try octets("tk")
        guard (confirm == nil) == (random == nil) else { throw bad("\"confirm\" and \"random\" go together (Secure Connections OOB data)") }
        guard confirm != nil || tk != nil else { throw bad("has neither \"confirm\"/\"random\" nor \"tk\"") }
        oob.peerConfirm = confirm
        oob.peerRandom = random
        // Legacy OOB: both sides hold the same TK, the one the peer wrote.
        if let tk { oob.legacyTK = tk }
    }
    if c.args.last("oob-out") != nil || c.args.last("oob-in") != nil { s.smp.oob = oob }
}

/// Reports bond-store errors on stderr and as `bondStoreError` events (docs/cli.md), naming the
/// file and what to do; each once, as a damaged file fails every look-up.
func bondStoreReporter(out: Output, directory: String) -> @Sendable (SMPBondStoreError) -> Void {
    let said = Mutex<Set<String>>([])
    return { error in
        let file: String?, advice: String
        switch error {
        case .corruptFile(let path, _):
            file = path
            advice = "no bond is read from it or stored in it: remove or repair \(path); `ble-hci bonds clear --bonds \(directory)` starts afresh"
        case .io(let path, _):
            file = path
            advice = "no bond is read or stored: check \(path) (permissions, free space) or choose another --bonds DIR"
        case .downgradeRefused(let peer, _, _):
            file = nil
            advice = "the new keys were not stored: `ble-hci bonds remove \(peer.address) --bonds \(directory)` first to bond at this level"
        }
        let message = "\(error): \(advice)"
        guard said.withLock({ $0.insert(message).inserted }) else { return }
        out.event([.text("event", "bondStoreError")] + (file.map { [.text("file", $0)] } ?? []) + [.text("message", message)])
        out.error("warning: \(message)")
    }
}

/// `--privacy`: our own resolvable private address (CLI.md security options).
func privacyOptions(_ c: CommandContext) -> PrivacyOptions? {
    c.args.has("privacy") ? PrivacyOptions() : nil
}

/// The random static address to use when the controller has no public one: the local identity
/// of the newest random-address bond file in DIR, so bonds made in an earlier run still apply
/// (SMPBondStore names its files AA-BB-CC-DD-EE-FF-TYPE.json). Nil: a fresh one per run.
func bondedRandomStaticAddress(in dir: String) -> BDAddress? {
    let fm = FileManager.default
    let files = ((try? fm.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix("-random.json") }
    let newest = files.max { a, b in
        let da = (try? fm.attributesOfItem(atPath: dir + "/" + a)[.modificationDate] as? Date) ?? .distantPast
        let db = (try? fm.attributesOfItem(atPath: dir + "/" + b)[.modificationDate] as? Date) ?? .distantPast
        return da < db
    }
    guard let newest else { return nil }
    let parts = newest.dropLast("-random.json".count).split(separator: "-").map(String.init)
    guard parts.count == 6, let address = BDAddress(string: parts.joined(separator: ":")), address.isRandomStatic else { return nil }
    return address
}

extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

/// Answers pairing on the terminal (or from --passkey / --yes) and prints the security events.
final class TerminalPairing: PairingDelegate, Sendable {
    let out: Output
    let passkey: UInt32?
    let yes: Bool
    /// Events held back until their link's `connected` is printed, then printed with its handle
    /// as `connection` (CLI.md): a central encrypts from a bond as soon as the link is up, before
    /// its `connected` event (printed after the MTU exchange), a peripheral's security events may
    /// come before the link's `connected` event is printed, and a script reading the JSON lines
    /// must see `connected` first.
    private let links: Mutex<Links>
    private struct Links {
        /// The events not printed yet, with the peer SMP named.
        var held: [(peer: DeviceAddress, fields: [Field], text: String)] = []
        /// The central's one link, from `release(connection:)`: every event is its, whatever
        /// address the peer is named by. Nil: events wait for their peer's link (`connected`).
        var only: UInt16?
        var released = false
        /// A peripheral's links whose `connected` is printed, by peer.
        var handles: [DeviceAddress: UInt16] = [:]
    }
    /// Where our bonds live, for the commands the events suggest.
    let bondDirectory: String?
    /// At most this many events wait for their link's `connected`.
    static let heldLimit = 256
    private let lostBond = Mutex(false)

    init(out: Output, passkey: UInt32?, yes: Bool, holdUntilReleased: Bool = false, bondDirectory: String? = nil) {
        self.out = out
        self.passkey = passkey
        self.yes = yes
        self.bondDirectory = bondDirectory
        links = Mutex(Links(released: !holdUntilReleased))
    }

    /// Whether encrypting from a bond failed with PIN or Key Missing (0x06): the peer has lost
    /// its half of the bond (Core v5.4 Vol 6 Part B 5.1.3.1).
    var peerLostBond: Bool { lostBond.withLock { $0 } }

    /// The central's link is up and its `connected` printed: prints the events held so far, in
    /// order, and every later one as it comes, with `connection` (none when no link came up).
    func release(connection: UInt16? = nil) {
        let pending = links.withLock { l -> [([Field], String)] in
            guard !l.released else { return [] }
            l.released = true
            l.only = connection
            defer { l.held = [] }
            return l.held.map { (Self.with($0.fields, connection: connection), $0.text) }
        }
        for (fields, text) in pending { print(fields, text) }
    }

    /// A peripheral's link with `peer` is up and its `connected` printed: its events held so far
    /// are printed, and every later one as it comes, with `connection`.
    func connected(_ handle: UInt16, peer: DeviceAddress) {
        let pending = links.withLock { l -> [([Field], String)] in
            l.handles[peer] = handle
            let mine = l.held.filter { $0.peer == peer }
            l.held.removeAll { $0.peer == peer }
            return mine.map { (Self.with($0.fields, connection: handle), $0.text) }
        }
        for (fields, text) in pending { print(fields, text) }
    }

    /// A peripheral's link ended: a later event of its peer waits for the next link's `connected`.
    func disconnected(_ handle: UInt16) {
        links.withLock { l in l.handles = l.handles.filter { $0.value != handle } }
    }

    private static func with(_ fields: [Field], connection: UInt16?) -> [Field] {
        fields + (connection.map { [.int("connection", $0)] } ?? [])
    }

    private func print(_ fields: [Field], _ text: String) {
        out.event(fields)
        out.line(text)
    }

    private var interactive: Bool { isatty(STDIN_FILENO) == 1 }

    func enterPasskey(peer: DeviceAddress) async -> UInt32? {
        if let passkey { return passkey }
        guard interactive else {
            out.error("\(peer) asks for a passkey: give it with --passkey N (no terminal to ask on)")
            return nil
        }
        guard let line = await ask("Passkey shown by \(peer) (6 digits): "),
              line.count <= 6, line.allSatisfy(\.isASCIIDigit), let n = UInt32(line) else { return nil }
        return n
    }

    func confirmNumber(_ number: UInt32, peer: DeviceAddress) async -> Bool {
        if yes { return true }
        guard interactive else {
            out.error("numeric comparison with \(peer) refused: no terminal to ask on (use --yes to accept)")
            return false
        }
        let answer = await ask("Does \(peer) show \(sixDigits(number))? [y/N] ")
        return answer?.lowercased().hasPrefix("y") == true
    }

    /// Asks on stderr (stdout may be JSON) and reads one line from stdin off the async executor.
    private func ask(_ prompt: String) async -> String? {
        FileHandle.standardError.write(Data(prompt.utf8))
        return await withCheckedContinuation { c in
            Thread.detachNewThread { c.resume(returning: readLine()?.trimmingCharacters(in: .whitespaces)) }
        }
    }

    func securityEvent(_ event: SecurityEvent, peer: DeviceAddress) {
        if case .encryptionFailed(.pinOrKeyMissing) = event { lostBond.withLock { $0 = true } }
        for (fields, text) in describe(event, peer: peer, bondDirectory: bondDirectory, language: out.language) {
            let line = "\(timestamp()) \(text)"
            let connection = links.withLock { l -> UInt16? in
                guard l.released, let handle = l.only ?? l.handles[peer] else {
                    // Bounded: a link that never comes up leaves its events here; the oldest go.
                    if l.held.count >= Self.heldLimit { l.held.removeFirst() }
                    l.held.append((peer, fields, line))
                    return nil
                }
                return handle
            }
            if let connection { print(Self.with(fields, connection: connection), line) }
        }
    }
}

func sixDigits(_ n: UInt32) -> String {
    let s = String(n % 1_000_000)
    return String(repeating: "0", count: 6 - s.count) + s
}

/// The JSON event and the human line for one security event (CLI.md "Security (SMP) options").
func describe(_ event: SecurityEvent, peer: DeviceAddress, bondDirectory: String? = nil, language: Language = .english) -> [([Field], String)] {
    switch event {
    case let .pairing(method, passkey, number):
        var fields: [Field] = [.text("event", "pairing"), .text("method", method.rawValue)]
        if let passkey { fields.append(.text("passkey", sixDigits(passkey))) }
        if let number { fields.append(.text("number", sixDigits(number))) }
        return [(fields, Message.pairing(peer: "\(peer)", method: method.rawValue, passkey: passkey.map(sixDigits), number: number.map(sixDigits)).text(language))]
    case .paired(let p):
        return [([.text("event", "paired"), .text("method", p.method.rawValue), .bool("secureConnections", p.secureConnections),
                  .bool("mitm", p.authenticated), .bool("bonded", p.bonded), .int("keySize", p.keySize)],
                 Message.paired(peer: "\(peer)", method: p.method.rawValue, secureConnections: p.secureConnections, mitm: p.authenticated,
                                keySize: Int(p.keySize), bonded: p.bonded).text(language))]
    case let .encrypted(keySize, bonded, authenticated):
        return [([.text("event", "encrypted"), .int("keySize", keySize), .bool("bonded", bonded), .bool("mitm", authenticated)],
                 Message.encrypted(keySize: Int(keySize), fromBond: bonded).text(language))]
    case let .pairingFailed(reason, remote):
        return [([.text("event", "pairingFailed"), .code("reason", reason.rawValue), .text("message", reason.description), .bool("remote", remote)],
                 Message.pairingFailed(reason: reason.description, code: hexCode(reason.rawValue), byPeer: remote).text(language))]
    case .encryptionFailed(let status):
        // The directory too: without it the command would look in the default one.
        let remove = "ble-hci bonds remove \(peer.address)" + (bondDirectory.map { " --bonds \($0)" } ?? "")
        let hint = status == .pinOrKeyMissing ? ": the peer has lost the bond (\(remove), then pair again)" : ""
        return [([.text("event", "encryptionFailed"), .code("status", status.rawValue), .text("message", status.name)],
                 "encryption failed: \(status.name) (\(hexCode(status.rawValue)))\(hint)")]
    case .encryptionRefused(let reason):
        return [([.text("event", "encryptionRefused"), .code("status", HCIStatus.pinOrKeyMissing.rawValue), .text("message", reason)],
                 "refused the peer's encryption: \(reason) (it gets PIN or Key Missing, 0x06; it has to pair again)")]
    }
}

/// `ble-hci bonds [--bonds DIR] [list | remove ADDRESS | clear]`.
func runBonds(_ c: CommandContext) async throws -> Int32 {
    let dir = bondDirectory(c)
    let cmd = c.command
    let out = c.out
    let words = c.args.positionals
    let action = words.first ?? "list"
    let files = (try? FileManager.default.contentsOfDirectory(atPath: dir))?.filter { $0.hasSuffix(".json") }.sorted() ?? []
    // One store per local identity address: SMPBondStore names its file AA-BB-CC-DD-EE-FF-TYPE.json.
    var stores: [SMPBondStore] = []
    for f in files {
        let parts = f.dropLast(5).split(separator: "-").map(String.init)
        guard parts.count == 7, let address = BDAddress(string: parts[0..<6].joined(separator: ":")),
              parts[6] == "public" || parts[6] == "random" else { continue }
        let local = DeviceAddress(address, type: parts[6] == "public" ? .public : .random)
        if let store = try? SMPBondStore(directory: dir, localIdentity: local), store.path.hasSuffix("/" + f) {
            stores.append(store)
        }
    }
    switch action {
    case "list":
        guard words.count == 1 || words.isEmpty else { throw UsageError("bonds list takes no argument", command: cmd) }
        var count = 0
        for store in stores {
            let bonds: [SMPBond]
            do { bonds = try store.bonds() } catch {
                out.error("\(error)")
                continue
            }
            for b in bonds {
                count += 1
                var fields: [Field] = [.text("event", "bond"), .text("address", b.peer.address.description), .text("addressType", b.peer.type.simple),
                                       .text("local", store.localIdentity.address.description), .int("keySize", b.keySize),
                                       .bool("secureConnections", b.secureConnections), .bool("mitm", b.authenticated), .bool("irk", b.peerIRK != nil)]
                if let identity = b.distributedIdentity {
                    fields += [.text("identityAddress", identity.address.description), .text("identityAddressType", identity.type.simple)]
                }
                out.event(fields)
                out.line("\(b.peer.address) (\(b.peer.type.simple)): key size \(b.keySize), "
                         + "\(b.secureConnections ? "Secure Connections" : "legacy"), \(b.authenticated ? "MITM" : "no MITM"), "
                         + "\(b.peerIRK != nil ? "IRK held" : "no IRK")"
                         + (b.distributedIdentity.map { ", identity \($0.address)/\($0.type.simple) (paired from this address)" } ?? "")
                         + "  [local \(store.localIdentity.address)]")
            }
        }
        if count == 0 { out.note("No bonds in \(dir).") }
        return ExitCode.success
    case "remove":
        guard words.count == 2, let address = BDAddress(string: words[1].split(separator: "/").first.map(String.init) ?? "") else {
            throw UsageError("bonds remove needs one ADDRESS like F0:F1:F2:F3:F4:F5", command: cmd)
        }
        var removed = 0
        for store in stores {
            for b in (try? store.bonds()) ?? [] where b.peer.address == address {
                try store.remove(b.peer)
                removed += 1
            }
            try store.flush()
        }
        guard removed > 0 else { throw CLIFailure("no bond with \(address) in \(dir)", exitCode: ExitCode.failure) }
        out.event([.text("event", "removed"), .text("address", address.description)])
        out.line("Removed the bond with \(address).")
        return ExitCode.success
    case "clear":
        guard words.count == 1 else { throw UsageError("bonds clear takes no argument", command: cmd) }
        for store in stores {
            try store.removeAll()
            try store.flush()
        }
        out.event([.text("event", "cleared")])
        out.line("Removed every bond in \(dir).")
        return ExitCode.success
    default:
        throw UsageError("bonds takes list, remove ADDRESS or clear, got '\(action)'", command: cmd)
    }
}

/// securityHelp in zh-Hans (HelpTopic): the same options, the prose translated.
let securityHelpChinese = """
安全（SMP）：
  --io CAP           IO 能力（IO capability）：none（默认）、display、yesno、keyboard、
                     keyboard-display
  --passkey N        本端显示或输入的 6 位口令（passkey），代替随机生成 / 询问
  --yes              不询问就接受数字比较（没有终端又没有 --yes 时拒绝）
  --mitm             要求 MITM 保护（经过认证的配对）
  --legacy           只提供 LE 传统配对（LE legacy pairing）
  --sc-only          只用 Secure Connections：拒绝传统配对
  --min-key-size N   接受的最小加密密钥长度，7-16（默认 16）
  --no-bond          配对但不保存密钥（不绑定）
  --bonds DIR        绑定保存在哪里（默认 $XDG_STATE_HOME/ble-hci，否则 ~/.local/state/ble-hci）
  --privacy          用由本端 IRK（保存在绑定目录中）生成的可解析私有地址（resolvable private
                     address，RPA）广播、扫描和连接，每 15 分钟更换一次；与我们绑定的对端
                     得到 IRK 和身份地址，从而认出我们。我们的 RPA 由主机协议栈生成；已绑定
                     对端的 IRK 在启动时写入控制器的解析列表（写不进时 stderr 上有一行说明：
                     改由主机协议栈解析）
  --oob-out FILE     在做任何事之前把本端的带外（out-of-band）数据写到 FILE（JSON：Secure
                     Connections 为 "confirm" 和 "random"，即本次配对所用密钥对的
                     C = f4(PKx, PKx, r, 0)；传统配对为 "tk"），供对端的 --oob-in 使用；
                     整体写入（临时文件、fsync、重命名），权限 0600
  --oob-in FILE      从 FILE（对端的 --oob-out）读取对端的带外数据：配对随后使用 OOB 方法
                     （经过认证：有 MITM 保护，Core v5.4 Vol 3 Part H 2.3.5.6.4 和 2.3.5.4）。
                     Secure Connections 只需一端持有另一端的数据；传统配对需要两端持有同一个
                     "tk"：一端给 --oob-out，另一端给 --oob-in
用可解析私有地址广播的已绑定对端会通过它们的 IRK 被认出：TARGET 可以是它们的身份地址。
"""
