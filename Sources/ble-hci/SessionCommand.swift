import Foundation
import Synchronization
import HCI
import BLE
import Decoder

// The session's commands (shared by `shell` and `session --json`): their words, options and
// help, and `ble-hci session`, the JSON-lines front end.

struct SessionCommandInfo: Sendable {
    var name: String
    var usage: String
    var summary: String
    /// The summary and detail in zh-Hans (issue #28); the usage line is syntax, the same in
    /// every language. No default: a command without a translation does not compile.
    var summaryChinese: String
    var detail: String = ""
    var detailChinese: String = ""
    var spec: OptionSpec = OptionSpec(flags: [], valued: [])

    /// `help COMMAND`.
    func help(_ language: Language) -> String {
        let (label, summary, detail) = switch language {
        case .english: ("Usage: ", self.summary, self.detail)
        case .simplifiedChinese: ("用法：", summaryChinese, detailChinese)
        }
        return "\(label)\(usage)\n\n\(summary)" + (detail.isEmpty ? "" : "\n\n" + detail)
    }

    /// The summary's first sentence, for the list `help` prints.
    func firstSentence(_ language: Language) -> String {
        let (text, end) = switch language {
        case .english: (summary, ". ")
        case .simplifiedChinese: (summaryChinese, "。")
        }
        let first = text.range(of: end).map { String(text[..<$0.lowerBound]) } ?? text
        return first.hasSuffix(".") || first.hasSuffix("。") ? String(first.dropLast()) : first
    }
}

let sessionCommands: [SessionCommandInfo] = [
    SessionCommandInfo(name: "scan", usage: "scan [--duration S] [--passive] [--duplicates] [--service UUID]... [--name TEXT] [--rssi DBM] [--phy 1m|2m|coded] [--manufacturer ID]... [--service-data UUID]...",
                       summary: "List advertisers, as `ble-hci scan` does, until --duration or Ctrl-C (`cancel ID` in a JSON session).",
                       summaryChinese: "列出广播者，与 `ble-hci scan` 相同，直到 --duration 结束或 Ctrl-C（JSON 会话中为 `cancel ID`）。",
                       spec: OptionSpec(flags: ["passive", "duplicates"], valued: ["duration", "service", "name", "rssi", "rssi-min", "phy", "manufacturer", "service-data"])),
    SessionCommandInfo(name: "connect", usage: "connect TARGET [--timeout S] [--mtu N]",
                       summary: "Connect to TARGET (AA:BB:CC:DD:EE:FF[/public|/random] or name:TEXT, as `central` takes it) and select the link. Several links may be up at once; each is named by the peer's name, else its address.",
                       summaryChinese: "连接 TARGET（AA:BB:CC:DD:EE:FF[/public|/random] 或 name:TEXT，与 `central` 的写法相同）并选中这条链路。可以同时有多条链路；每条以对端的名称命名，没有名称时用它的地址。",
                       detail: "  --timeout S   seconds to find and connect (default 10)\n  --mtu N       ATT MTU to request (23-517, default 517)",
                       detailChinese: "  --timeout S   寻找并连接的秒数（默认 10）\n  --mtu N       请求的 ATT MTU（23-517，默认 517）",
                       spec: OptionSpec(flags: [], valued: ["timeout", "mtu"])),
    SessionCommandInfo(name: "links", usage: "links", summary: "List the links up: name, address, connection handle, ATT MTU, subscriptions; * marks the selected one.",
                       summaryChinese: "列出已建立的链路：名称、地址、连接句柄、ATT MTU、订阅；* 标出选中的那条。"),
    SessionCommandInfo(name: "select", usage: "select LINK", summary: "Make LINK (a name, an address or a connection handle) the one the link commands use.",
                       summaryChinese: "让 LINK（名称、地址或连接句柄）成为链路命令所用的那条链路。"),
    SessionCommandInfo(name: "discover", usage: "discover [--link LINK]", summary: "Discover the link's services, characteristics and descriptors and print the GATT tree.",
                       summaryChinese: "发现链路上的服务、特征和描述符，并打印 GATT 树。",
                       spec: OptionSpec(flags: [], valued: ["link"])),
    SessionCommandInfo(name: "read", usage: "read CHAR [--link LINK]", summary: "Read a value: CHAR is a UUID (2a19, 32-bit or 128-bit) or a handle (0x0010).",
                       summaryChinese: "读一个值：CHAR 是一个 UUID（2a19、32 位或 128 位）或一个句柄（0x0010）。",
                       spec: OptionSpec(flags: [], valued: ["link"])),
    SessionCommandInfo(name: "write", usage: "write CHAR=HEX [--without-response] [--link LINK]", summary: "Write a value with response (a Write Command with --without-response).",
                       summaryChinese: "带响应地写一个值（带 --without-response 时用 Write Command）。",
                       spec: OptionSpec(flags: ["without-response"], valued: ["link"])),
    SessionCommandInfo(name: "write-without-response", usage: "write-without-response CHAR=HEX [--link LINK]", summary: "Write a value with a Write Command (no response).",
                       summaryChinese: "用 Write Command 写一个值（无响应）。",
                       spec: OptionSpec(flags: [], valued: ["link"])),
    SessionCommandInfo(name: "subscribe", usage: "subscribe CHAR [--link LINK]",
                       summary: "Subscribe to notifications or indications (whichever CHAR has); they print as they come, until `unsubscribe CHAR` or the link goes down.",
                       summaryChinese: "订阅通知或指示（看 CHAR 支持哪一种）；它们一到就打印，直到 `unsubscribe CHAR` 或链路断开。",
                       spec: OptionSpec(flags: [], valued: ["link"])),
    SessionCommandInfo(name: "unsubscribe", usage: "unsubscribe CHAR [--link LINK]", summary: "Stop a subscription (writes 0x0000 to the CCCD).",
                       summaryChinese: "取消订阅（向 CCCD 写 0x0000）。",
                       spec: OptionSpec(flags: [], valued: ["link"])),
    SessionCommandInfo(name: "pair", usage: "pair [--mitm] [--force] [--link LINK]",
                       summary: "Pair with the link's peer, or only encrypt when a bond exists (--force: pair afresh).",
                       summaryChinese: "与链路的对端配对，已有绑定时只加密（--force：重新配对）。",
                       detail: "Just Works (the default, --io none); with --io CAP, passkey entry and numeric comparison: the session's\n--passkey N and --yes answer them, else a `pairingQuestion` asks (the shell prompts while a command runs)\nand `passkey N` / `confirm yes|no` answer. OOB with the session's --oob-in/--oob-out.",
                       detailChinese: "Just Works（默认，--io none）；带 --io CAP 时可用口令输入和数字比较：由会话的\n--passkey N 和 --yes 回答，否则发出 `pairingQuestion` 提问（shell 在命令运行时提示），\n由 `passkey N` / `confirm yes|no` 回答。OOB 用会话的 --oob-in/--oob-out。",
                       spec: OptionSpec(flags: ["mitm", "force"], valued: ["link"])),
    SessionCommandInfo(name: "passkey", usage: "passkey NNNNNN|no [--link LINK]",
                       summary: "Answer a pairing that asks for the passkey the peer shows (a `pairingQuestion`; the session has no --passkey), or refuse it.",
                       summaryChinese: "回答一次要求输入对端所显示口令的配对（一个 `pairingQuestion`；会话没有 --passkey 时），或拒绝它。",
                       spec: OptionSpec(flags: [], valued: ["link"])),
    SessionCommandInfo(name: "confirm", usage: "confirm yes|no [--link LINK]",
                       summary: "Answer a numeric comparison (a `pairingQuestion`: do both devices show the same number?).",
                       summaryChinese: "回答一次数字比较（一个 `pairingQuestion`：两台设备显示的数字相同吗？）。",
                       spec: OptionSpec(flags: [], valued: ["link"])),
    SessionCommandInfo(name: "bonds", usage: "bonds [list | remove ADDRESS | clear]", summary: "List or remove the stored bonds, as `ble-hci bonds` (in the session's --bonds DIR).",
                       summaryChinese: "列出或删除保存的绑定，与 `ble-hci bonds` 相同（在会话的 --bonds DIR 中）。",
                       spec: OptionSpec(flags: [], valued: ["bonds"])),
    SessionCommandInfo(name: "serve", usage: "serve [--profile demo|secure | --gatt FILE] [--name NAME]",
                       summary: "Serve a profile (default demo) or the GATT table of a --gatt FILE, as `peripheral` does, and advertise it; centrals' connections, reads, writes and subscriptions print as they come. Serving another table replaces it for the links made from then on.",
                       summaryChinese: "提供一个配置文件（默认 demo）或 --gatt FILE 中的 GATT 表，与 `peripheral` 相同，并广播它；中心设备的连接、读、写和订阅一到就打印。提供另一张表会替换它，对此后建立的链路生效。",
                       spec: OptionSpec(flags: [], valued: ["profile", "gatt", "name"])),
    SessionCommandInfo(name: "advertise", usage: "advertise [--name NAME] | advertise off",
                       summary: "Advertise (connectable) what is served (Generic Access and Generic Attribute only when nothing is), or stop advertising.",
                       summaryChinese: "广播（可连接）所提供的内容（什么都没提供时只有 Generic Access 和 Generic Attribute），或停止广播。",
                       spec: OptionSpec(flags: [], valued: ["name"])),
    SessionCommandInfo(name: "disconnect", usage: "disconnect [LINK]", summary: "Disconnect LINK (default: the selected link).",
                       summaryChinese: "断开 LINK（默认：选中的链路）。"),
    SessionCommandInfo(name: "trace", usage: "trace on [--layers LAYERS] | trace off", summary: "Print every HCI packet live, decoded layer by layer (LAYERS: a comma list of hci,l2cap,att,gatt,smp), or stop.",
                       summaryChinese: "实时打印每个 HCI 包，逐层解码（LAYERS：hci,l2cap,att,gatt,smp 的逗号列表），或停止。",
                       spec: OptionSpec(flags: [], valued: ["layers"])),
    SessionCommandInfo(name: "capture", usage: "capture FILE | capture off", summary: "Record every HCI packet from now on to FILE (*.pcap: pcap, *.pcapng: pcapng, else btsnoop), or close the capture.",
                       summaryChinese: "从现在起把每个 HCI 包记录到 FILE（*.pcap：pcap，*.pcapng：pcapng，其他：btsnoop），或关闭抓包文件。"),
    SessionCommandInfo(name: "cancel", usage: "cancel ID", summary: "JSON session: stop the request with this id (a scan without --duration ends this way; others end with an error \"cancelled\"). In the shell, Ctrl-C stops the running command.",
                       summaryChinese: "JSON 会话：停止带此 id 的请求（不带 --duration 的扫描就这样结束；其他请求以错误 \"cancelled\" 结束）。在 shell 中，Ctrl-C 停止正在运行的命令。"),
    SessionCommandInfo(name: "help", usage: "help [COMMAND]", summary: "List the commands, or say what one does.",
                       summaryChinese: "列出命令，或说明一个命令做什么。"),
    SessionCommandInfo(name: "quit", usage: "quit", summary: "Disconnect every link, stop scanning and advertising, close the capture and end the session (Ctrl-D in the shell).",
                       summaryChinese: "断开所有链路，停止扫描和广播，关闭抓包文件，结束会话（shell 中为 Ctrl-D）。"),
]

func sessionCommand(named name: String) -> SessionCommandInfo? { sessionCommands.first { $0.name == name } }

/// What `help` without a COMMAND prints: the commands and their first sentences.
func sessionHelpSummary(_ language: Language) -> String {
    let heading = switch language {
    case .english: "Commands (`help COMMAND` for one; CHAR is a UUID or a handle such as 0x0010):"
    case .simplifiedChinese: "命令（`help COMMAND` 查看其中一个；CHAR 是一个 UUID 或一个句柄，例如 0x0010）："
    }
    var lines = [heading]
    let width = sessionCommands.map(\.usage.count).filter { $0 < 40 }.max() ?? 20
    for c in sessionCommands {
        let usage = c.usage.count > width ? c.name + " ..." : c.usage
        lines.append("  " + usage.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + c.firstSentence(language))
    }
    return lines.joined(separator: "\n")
}

/// A session command's own options, and --help.
func parseSessionArguments(_ words: [String], command: SessionCommandInfo) throws -> ParsedArguments {
    var parsed = ParsedArguments()
    var i = 0
    while i < words.count {
        let w = words[i]
        i += 1
        if w == "--help" || w == "-h" { parsed.options.append(("help", nil)); continue }
        guard w.hasPrefix("--"), w.count > 2 else {
            parsed.positionals.append(w)
            continue
        }
        var name = String(w.dropFirst(2))
        var inline: String? = nil
        if let eq = name.firstIndex(of: "=") {
            inline = String(name[name.index(after: eq)...])
            name = String(name[..<eq])
        }
        if command.spec.flags.contains(name) {
            guard inline == nil else { throw UsageError("option --\(name) takes no value") }
            parsed.options.append((name, nil))
        } else if command.spec.valued.contains(name) {
            if let inline { parsed.options.append((name, inline)); continue }
            guard i < words.count else { throw UsageError("option --\(name) needs a value") }
            parsed.options.append((name, words[i]))
            i += 1
        } else {
            throw UsageError("\(command.name) has no option --\(name)")
        }
    }
    return parsed
}

/// Splits a command line into words: blanks separate, '...' and "..." quote, \ escapes.
func splitWords(_ line: String) throws -> [String] {
    var words: [String] = []
    var current = ""
    var inWord = false
    var quote: Character? = nil
    var escape = false
    for ch in line {
        if escape { current.append(ch); escape = false; inWord = true; continue }
        if let q = quote {
            if ch == q { quote = nil } else if ch == "\\" && q == "\"" { escape = true } else { current.append(ch) }
            continue
        }
        switch ch {
        case "\\": escape = true; inWord = true
        case "'", "\"": quote = ch; inWord = true
        case " ", "\t":
            if inWord { words.append(current); current = ""; inWord = false }
        default:
            current.append(ch); inWord = true
        }
    }
    if quote != nil { throw UsageError("unterminated quote") }
    if inWord { words.append(current) }
    return words
}

// MARK: - ble-hci session

/// The JSON session's bounds: a longer line is refused whole (and never held in memory), a
/// deeper nesting is refused before parsing, and at most this many requests run at once (input
/// is not read further until one ends).
enum SessionLimits {
    static let lineLength = 64 * 1024
    static let nesting = 8
    static let inFlight = 32
}

/// Writes whole lines to stdout, one at a time, from any thread.
final class LineWriter: Sendable {
    private let lock = Mutex(())
    let fd: Int32
    init(fd: Int32 = STDOUT_FILENO) { self.fd = fd }
    func write(_ s: String) {
        lock.withLock { _ in
            let bytes = Array(s.utf8)
            var off = 0
            while off < bytes.count {
                let n = bytes[off...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return }
                off += n
            }
        }
    }
}

/// Lines of a file descriptor, read on a thread of their own. A line longer than `limit`
/// octets is dropped while it is read (`.tooLong`), so no input grows memory beyond it; at most
/// `ahead` lines wait to be taken (the reader stops reading meanwhile).
enum InputLine: Sendable { case line(String), tooLong(Int) }

func readLines(fd: Int32, limit: Int, ahead: Int = 4) -> BoundedLines {
    let (stream, continuation) = AsyncStream.makeStream(of: InputLine.self, bufferingPolicy: .unbounded)
    // The reader waits for room before each line: a line makes room when it is taken.
    let room = DispatchSemaphore(value: ahead)
    let thread = Thread {
        var pending: [UInt8] = []
        var dropping = 0
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        func emit(_ l: InputLine) { room.wait(); continuation.yield(l) }
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            var start = 0
            for i in 0..<n where buffer[i] == 0x0A {
                if dropping > 0 {
                    emit(.tooLong(dropping + i - start))
                    dropping = 0
                } else {
                    pending.append(contentsOf: buffer[start..<i])
                    emit(.line(String(decoding: pending, as: UTF8.self)))
                    pending.removeAll(keepingCapacity: true)
                }
                start = i + 1
            }
            let rest = n - start
            if dropping > 0 { dropping += rest } else if pending.count + rest > limit {
                dropping = pending.count + rest
                pending = []
            } else {
                pending.append(contentsOf: buffer[start..<n])
            }
        }
        if dropping > 0 { emit(.tooLong(dropping)) } else if !pending.isEmpty { emit(.line(String(decoding: pending, as: UTF8.self))) }
        continuation.finish()
    }
    thread.start()
    return BoundedLines(stream: stream, room: room)
}

/// `readLines`' lines: taking one lets the reader read another.
struct BoundedLines: AsyncSequence, Sendable {
    let stream: AsyncStream<InputLine>
    let room: DispatchSemaphore

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<InputLine>.AsyncIterator
        let room: DispatchSemaphore
        mutating func next() async -> InputLine? {
            guard let line = await base.next() else { return nil }
            room.signal()
            return line
        }
    }

    func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator(), room: room) }
}

/// The deepest nesting of arrays and objects in `text` (outside strings), counted without
/// parsing, so that a hostile line is refused before the JSON parser sees it.
func jsonNesting(_ text: String) -> Int {
    var depth = 0, deepest = 0
    var inString = false, escape = false
    for b in text.utf8 {
        if inString {
            if escape { escape = false } else if b == UInt8(ascii: "\\") { escape = true } else if b == UInt8(ascii: "\"") { inString = false }
            continue
        }
        switch b {
        case UInt8(ascii: "\""): inString = true
        case UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1; deepest = max(deepest, depth)
        case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
        default: break
        }
    }
    return deepest
}

/// One request of the JSON session, checked.
struct SessionRequest: Sendable {
    var id: FieldValue
    var idKey: String
    var words: [String]
    var link: String?
}

/// Parses one input line of the JSON session: the request, or why it is refused (with the id
/// when the line had a usable one).
func parseSessionRequest(_ line: String) -> Result<SessionRequest, SessionRequestError> {
    if line.utf8.count > SessionLimits.lineLength { return .failure(.init(id: nil, message: "line longer than \(SessionLimits.lineLength) octets")) }
    let depth = jsonNesting(line)
    guard depth <= SessionLimits.nesting else {
        return .failure(.init(id: nil, message: "JSON nested \(depth) deep: a request nests at most \(SessionLimits.nesting) deep"))
    }
    let object: JSONValue
    do { object = try JSONDecoder().decode(JSONValue.self, from: Data(line.utf8)) } catch {
        return .failure(.init(id: nil, message: "not JSON: \(jsonProblem(error))"))
    }
    guard case .object(let dict) = object else { return .failure(.init(id: nil, message: "a request is a JSON object, got \(object.kind)")) }
    var id: FieldValue? = nil
    var idKey = ""
    switch dict["id"] {
    case .string(let s)?: id = .text(s); idKey = "s:" + s
    case .int(let i)?: id = .int(i); idKey = "n:\(i)"
    case let other?: return .failure(.init(id: nil, message: "\"id\" must be a string or an integer, got \(other.kind)"))
    case nil: return .failure(.init(id: nil, message: "a request needs an \"id\" (a string or an integer)"))
    }
    guard let id else { return .failure(.init(id: nil, message: "a request needs an \"id\"")) }
    let known: Set<String> = ["id", "command", "args", "link", "line"]
    if let unknown = dict.keys.filter({ !known.contains($0) }).sorted().first {
        return .failure(.init(id: id, message: "unknown key \"\(unknown)\" (a request has id, command, args, link, or id, line, link)"))
    }
    var link: String? = nil
    if let raw = dict["link"] {
        guard case .string(let s) = raw else { return .failure(.init(id: id, message: "\"link\" must be a string, got \(raw.kind)")) }
        link = s
    }
    if let raw = dict["line"] {
        guard dict["command"] == nil, dict["args"] == nil else { return .failure(.init(id: id, message: "give either \"line\" or \"command\" (with \"args\"), not both")) }
        guard case .string(let text) = raw else { return .failure(.init(id: id, message: "\"line\" must be a string, got \(raw.kind)")) }
        do { return .success(SessionRequest(id: id, idKey: idKey, words: try splitWords(text), link: link)) } catch {
            return .failure(.init(id: id, message: "\"line\": \(error)"))
        }
    }
    guard let raw = dict["command"] else { return .failure(.init(id: id, message: "a request needs \"command\" (with \"args\") or \"line\"")) }
    guard case .string(let command) = raw, !command.isEmpty else { return .failure(.init(id: id, message: raw == .string("") ? "\"command\" is empty" : "\"command\" must be a string, got \(raw.kind)")) }
    var words = [command]
    if let rawArgs = dict["args"] {
        guard case .array(let list) = rawArgs else { return .failure(.init(id: id, message: "\"args\" must be an array of strings, got \(rawArgs.kind)")) }
        for (i, a) in list.enumerated() {
            switch a {
            case .string(let s): words.append(s)
            case .int(let n): words.append(String(n))
            case .number(let d): words.append(String(d))
            default: return .failure(.init(id: id, message: "\"args\"[\(i)] must be a string or a number, got \(a.kind)"))
            }
        }
    }
    return .success(SessionRequest(id: id, idKey: idKey, words: words, link: link))
}

/// Any JSON value (a request's), decoded strictly: true is not 1, 1.5 is not an integer.
enum JSONValue: Decodable, Equatable {
    case null, bool(Bool), int(Int), number(Double), string(String), array([JSONValue]), object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null } else if let b = try? c.decode(Bool.self) { self = .bool(b) } else if let i = try? c.decode(Int.self) {
            self = .int(i)
        } else if let d = try? c.decode(Double.self) { self = .number(d) } else if let s = try? c.decode(String.self) { self = .string(s) } else if let a = try? c.decode([JSONValue].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: JSONValue].self))
        }
    }

    var kind: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

private func jsonProblem(_ error: any Error) -> String {
    if case DecodingError.dataCorrupted(let context) = error {
        let underlying = (context.underlyingError as? NSError)?.userInfo[NSDebugDescriptionErrorKey] as? String
        return underlying ?? context.debugDescription
    }
    return "malformed"
}

struct SessionRequestError: Error, Sendable {
    var id: FieldValue?
    var message: String
}

/// Requests running, by id, to cancel them (`cancel ID`) and to refuse a second one with the same id.
final class RunningRequests: Sendable {
    private let tasks = Mutex<[String: Task<Void, Never>]>([:])
    func add(_ key: String, _ task: Task<Void, Never>) -> Bool {
        tasks.withLock { t in
            guard t[key] == nil else { return false }
            t[key] = task
            return true
        }
    }
    func remove(_ key: String) { _ = tasks.withLock { $0.removeValue(forKey: key) } }
    func cancel(_ key: String) -> Bool { tasks.withLock { $0[key] }.map { $0.cancel(); return true } ?? false }
    func cancelAll() { for t in tasks.withLock({ Array($0.values) }) { t.cancel() } }
    var count: Int { tasks.withLock { $0.count } }
}

/// `ble-hci session --json`: one request per stdin line, answers and events as JSON lines.
/// Without --json, the shell's plain mode (one command per line, human output).
func runSession(_ c: CommandContext) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("session takes its commands on stdin, not as arguments: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    guard c.out.json else { return try await runShell(c, plain: true) }
    let writer = LineWriter()
    let sink: @Sendable (Output.Destination, String) -> Void = { destination, text in
        switch destination {
        case .stdout: writer.write(text)
        case .stderr: FileHandle.standardError.write(Data(text.utf8))
        }
    }
    let base = Output(json: true, colour: false, sink: sink)
    let engine: SessionEngine
    do { engine = try await SessionEngine.open(c, base: base) } catch let e as UsageError { throw UsageError(e.message, command: c.command) }
    let controller = engine.central.controller
    base.event([.text("event", "ready"), .text("address", controller.address.description), .text("transport", engine.transportName),
                .int("maxInFlight", SessionLimits.inFlight), .int("maxLineLength", SessionLimits.lineLength)])
    let signals = SessionSignals()
    engine.watchTransport { message in
        base.event([.text("event", "transportLost"), .text("message", message)])
        base.error("\(message); check the controller and start again")
        signals.quit(exitCode: ExitCode.transport)
    }
    let running = RunningRequests()
    func answer(_ id: FieldValue?, _ outcome: SessionOutcome) {
        var f: [Field] = id.map { [Field("id", $0)] } ?? []
        switch outcome {
        case .done, .quit: f.append(.bool("done", true))
        case .failed(let message, let code): f += [.text("error", message), .int("exit", Int(code))]
        }
        writer.write(jsonObject(f) + "\n")
    }
    let quit = Mutex<FieldValue?>(nil)
    let main = Task {
        await withTaskGroup(of: Void.self) { group in
            var inFlight = 0
            for await input in readLines(fd: STDIN_FILENO, limit: SessionLimits.lineLength) {
                let text: String
                switch input {
                case .tooLong(let n):
                    answer(nil, .failed("line of \(n) octets refused: a request line is at most \(SessionLimits.lineLength) octets", exitCode: ExitCode.usage))
                    continue
                case .line(let l): text = l
                }
                if text.allSatisfy(\.isWhitespace) { continue }
                let request: SessionRequest
                switch parseSessionRequest(text) {
                case .failure(let e):
                    answer(e.id, .failed(e.message, exitCode: ExitCode.usage))
                    continue
                case .success(let r): request = r
                }
                if request.words.first == "cancel" {
                    guard request.words.count == 2 else {
                        answer(request.id, .failed("cancel needs the ID of a running request", exitCode: ExitCode.usage))
                        continue
                    }
                    let target = request.words[1]
                    let found = running.cancel("s:" + target) || running.cancel("n:" + target)
                    answer(request.id, found ? .done : .failed("no request \(target) is running", exitCode: ExitCode.failure))
                    continue
                }
                if request.words.first == "quit" {
                    // Answered last, once every request has ended and the controller is left as found.
                    quit.withLock { $0 = request.id }
                    running.cancelAll()
                    break
                }
                // At most `inFlight` at once: the next line is read when one has ended.
                if inFlight >= SessionLimits.inFlight {
                    await group.next()
                    inFlight -= 1
                }
                let out = base.adding([Field("id", request.id)], ownError: true)
                let gate = FirstOutcome<Bool>()
                let task = Task {
                    guard await gate.value else { return }
                    let outcome = await engine.run(request.words, link: request.link, out: out)
                    running.remove(request.idKey)
                    answer(request.id, outcome)
                    if outcome == .quit { signals.quit() }
                }
                guard running.add(request.idKey, task) else {
                    gate.resolve(false)
                    answer(request.id, .failed("a request with this id is still running", exitCode: ExitCode.usage))
                    continue
                }
                gate.resolve(true)
                inFlight += 1
                group.addTask { await task.value }
            }
            // End of input (or quit): the requests still running get 30 s (a scan without
            // --duration, which runs until cancelled, is stopped then).
            let limit = Task { try? await Task.sleep(for: .seconds(30)); running.cancelAll() }
            await group.waitForAll()
            limit.cancel()
        }
    }
    let stop = Task {
        await signals.wait()
        running.cancelAll()
        main.cancel()
    }
    await main.value
    stop.cancel()
    await engine.close()
    if let id = quit.withLock({ $0 }) { answer(id, .done) }
    return signals.exitCode ?? ExitCode.success
}

/// SIGINT / SIGTERM / SIGHUP for the session front ends, which end cleanly on them (the shell
/// sends its Ctrl-C to the running command instead: its terminal does not make a signal of it).
final class SessionSignals: Sendable {
    private let state = Mutex<(signal: Int32?, quit: Bool, exitCode: Int32?, waiters: [CheckedContinuation<Void, Never>])>((nil, false, nil, []))
    private let sources: Mutex<[any DispatchSourceSignal]>
    /// Called for SIGINT instead of ending the session (the shell: stop the running command).
    let onInterrupt: (@Sendable () -> Bool)?

    init(onInterrupt: (@Sendable () -> Bool)? = nil) {
        self.onInterrupt = onInterrupt
        var made: [any DispatchSourceSignal] = []
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            made.append(DispatchSource.makeSignalSource(signal: sig, queue: .global()))
        }
        sources = Mutex(made)
        sources.withLock { sources in
            for (s, sig) in zip(sources, [SIGINT, SIGTERM, SIGHUP]) {
                s.setEventHandler { [weak self] in self?.fire(sig) }
                s.resume()
            }
        }
    }

    private func fire(_ sig: Int32) {
        if sig == SIGINT, let onInterrupt, onInterrupt() { return }
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            if s.signal == nil { s.signal = sig }
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Ends the session (quit, or `exitCode`: the transport was lost, 3).
    func quit(exitCode: Int32? = nil) {
        let waiters = state.withLock { s -> [CheckedContinuation<Void, Never>] in
            s.quit = true
            if s.exitCode == nil { s.exitCode = exitCode }
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    var fired: Bool { state.withLock { $0.signal != nil || $0.quit } }
    /// 128 + the signal that ended the session, if one did.
    var exitCode: Int32? { state.withLock { $0.exitCode ?? $0.signal.map { 128 + $0 } } }

    func wait() async {
        await withCheckedContinuation { c in
            let now = state.withLock { s -> Bool in
                if s.signal != nil || s.quit { return true }
                s.waiters.append(c)
                return false
            }
            if now { c.resume() }
        }
    }
}
