import Foundation
import Synchronization
import HCI
import Decoder

// `ble-hci shell`: the session's commands typed at a prompt, with a small line editor of our
// own over termios (no libedit/readline: nothing the machine lacks): editing keys, history kept
// across runs, Tab completion, output of running subscriptions printed above the prompt. When
// stdin is not a terminal it reads plain lines (as `session` without --json does).

/// A key the editor acts on.
enum Key: Sendable, Equatable {
    case text(String)
    case enter, tab, backspace, delete, left, right, home, end, up, down
    case interrupt      // Ctrl-C
    case endOfInput     // Ctrl-D
    case killToEnd      // Ctrl-K
    case killToStart    // Ctrl-U
    case deleteWord     // Ctrl-W
    case clearScreen    // Ctrl-L
    case wordLeft, wordRight  // Alt-B / Alt-F, Ctrl-Left / Ctrl-Right
    case wake           // not a key: the foreground command has news (a question, its end)
}

/// Turns the bytes a terminal sends into keys: UTF-8 text, control characters and the usual
/// escape sequences (CSI and SS3: arrows, Home, End, Delete). Unknown sequences are dropped;
/// nothing here can grow without bound (a sequence is at most 16 octets).
struct KeyDecoder {
    private var pending: [UInt8] = []

    mutating func feed(_ bytes: some Sequence<UInt8>) -> [Key] {
        pending.append(contentsOf: bytes)
        var keys: [Key] = []
        while let (key, used) = next() {
            pending.removeFirst(used)
            if let key { keys.append(key) }
        }
        if pending.count > 16 { pending.removeAll() }
        return keys
    }

    /// The next key and the octets it took (nil key: dropped); nil when more octets are needed.
    private func next() -> (Key?, Int)? {
        guard let b = pending.first else { return nil }
        switch b {
        case 0x01: return (.home, 1)
        case 0x02: return (.left, 1)
        case 0x03: return (.interrupt, 1)
        case 0x04: return (.endOfInput, 1)
        case 0x05: return (.end, 1)
        case 0x06: return (.right, 1)
        case 0x08, 0x7F: return (.backspace, 1)
        case 0x09: return (.tab, 1)
        case 0x0A, 0x0D: return (.enter, 1)
        case 0x0B: return (.killToEnd, 1)
        case 0x0C: return (.clearScreen, 1)
        case 0x0E: return (.down, 1)
        case 0x10: return (.up, 1)
        case 0x15: return (.killToStart, 1)
        case 0x17: return (.deleteWord, 1)
        case 0x1B: return escape()
        case 0x00..<0x20: return (nil, 1)
        default:
            // UTF-8: the length from the lead octet (a bad lead or continuation is dropped).
            let length = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0
            guard length > 0 else { return (nil, 1) }
            guard pending.count >= length else { return nil }
            guard let s = String(validating: pending[0..<length], as: UTF8.self) else { return (nil, 1) }
            return (.text(s), length)
        }
    }

    private func escape() -> (Key?, Int)? {
        guard pending.count >= 2 else { return nil }
        switch pending[1] {
        case UInt8(ascii: "["):
            // CSI: parameters (digits, ';') then one final octet.
            var i = 2
            while i < pending.count, (0x30...0x3F).contains(pending[i]) { i += 1 }
            guard i < pending.count else { return nil }
            let params = String(decoding: pending[2..<i], as: UTF8.self)
            let used = i + 1
            switch pending[i] {
            case UInt8(ascii: "A"): return (.up, used)
            case UInt8(ascii: "B"): return (.down, used)
            case UInt8(ascii: "C"): return (params.hasSuffix(";5") ? .wordRight : .right, used)
            case UInt8(ascii: "D"): return (params.hasSuffix(";5") ? .wordLeft : .left, used)
            case UInt8(ascii: "H"): return (.home, used)
            case UInt8(ascii: "F"): return (.end, used)
            case UInt8(ascii: "~"):
                switch params {
                case "1", "7": return (.home, used)
                case "4", "8": return (.end, used)
                case "3": return (.delete, used)
                default: return (nil, used)
                }
            default: return (nil, used)
            }
        case UInt8(ascii: "O"):
            guard pending.count >= 3 else { return nil }
            switch pending[2] {
            case UInt8(ascii: "A"): return (.up, 3)
            case UInt8(ascii: "B"): return (.down, 3)
            case UInt8(ascii: "C"): return (.right, 3)
            case UInt8(ascii: "D"): return (.left, 3)
            case UInt8(ascii: "H"): return (.home, 3)
            case UInt8(ascii: "F"): return (.end, 3)
            default: return (nil, 3)
            }
        case UInt8(ascii: "b"): return (.wordLeft, 2)
        case UInt8(ascii: "f"): return (.wordRight, 2)
        default: return (nil, 1)
        }
    }
}

/// The line being edited and the terminal it is drawn on. Output from other tasks (a
/// notification, a peripheral's event) goes through `print`, which clears the prompt line,
/// writes the text and draws the prompt and the line again where they were.
final class LineEditor: Sendable {
    private struct State {
        var prompt = "ble-hci> "
        var buffer: [Character] = []
        var cursor = 0
        var shown = false
        var history: [String] = []
        /// Where Up/Down are in the history (history.count: the line being typed).
        var position = 0
        var draft: [Character] = []
    }
    private let state = Mutex(State())
    private let out = LineWriter()
    static let historyLimit = 1000

    init(history: [String]) {
        state.withLock { $0.history = history; $0.position = history.count }
    }

    /// Writes `text` above the prompt (which is drawn again after it when it is shown).
    func print(_ text: String) {
        guard !text.isEmpty else { return }
        state.withLock { s in
            // Raw mode keeps OPOST: "\n" still moves to the start of the next line.
            var t = text
            if s.shown {
                t = "\r\u{1B}[K" + t
                if !t.hasSuffix("\n") { t += "\n" }
                t += Self.rendering(s)
            }
            out.write(t)
        }
    }

    /// The prompt and the line; a line wider than the terminal is shown as the window of it
    /// around the cursor (redrawing with "\r" works on one terminal row only). Widths are in
    /// columns: an East Asian wide character takes two (`TextWidth`).
    private static func rendering(_ s: State) -> String {
        let widths = s.buffer.map(TextWidth.columns(of:))
        let room = max(8, terminalWidth() - TextWidth.columns(of: s.prompt) - 1)
        var start = 0, end = s.buffer.count
        if widths.reduce(0, +) > room {
            // Up to half the room before the cursor, then as much after it as fits, then
            // whatever room is left before it again.
            var used = 0
            start = s.cursor
            while start > 0, used + widths[start - 1] <= room / 2 { start -= 1; used += widths[start] }
            end = s.cursor
            while end < widths.count, used + widths[end] <= room { used += widths[end]; end += 1 }
            while start > 0, used + widths[start - 1] <= room { start -= 1; used += widths[start] }
        }
        var t = s.prompt + String(s.buffer[start..<end])
        let back = widths[s.cursor..<end].reduce(0, +)
        if back > 0 { t += "\u{1B}[\(back)D" }
        return t
    }

    /// Columns of the terminal on stdout (80 when it cannot say).
    private static func terminalWidth() -> Int {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    private func redraw(_ s: State) { out.write("\r\u{1B}[K" + Self.rendering(s)) }

    func show(prompt: String) {
        state.withLock { s in
            s.prompt = prompt
            s.buffer = []
            s.cursor = 0
            s.shown = true
            s.position = s.history.count
            redraw(s)
        }
    }

    /// Ends the line: the prompt stays as typed, the cursor moves to the next line.
    func finish(echo suffix: String = "") -> String {
        state.withLock { s in
            s.shown = false
            let line = String(s.buffer)
            out.write(suffix + "\r\n")
            return line
        }
    }

    func addHistory(_ line: String) {
        state.withLock { s in
            guard !line.isEmpty, s.history.last != line else { return }
            s.history.append(line)
            if s.history.count > Self.historyLimit { s.history.removeFirst(s.history.count - Self.historyLimit) }
        }
    }

    /// The text before the cursor (for completion).
    var beforeCursor: String { state.withLock { String($0.buffer[0..<$0.cursor]) } }
    var isEmpty: Bool { state.withLock { $0.buffer.isEmpty } }

    func insert(_ text: String) {
        state.withLock { s in
            s.buffer.insert(contentsOf: Array(text), at: s.cursor)
            s.cursor += text.count
            redraw(s)
        }
    }

    /// Applies an editing key (not Enter, Tab, Ctrl-C, Ctrl-D on an empty line).
    func edit(_ key: Key) {
        state.withLock { s in
            func wordStart(_ from: Int) -> Int {
                var i = from
                while i > 0, s.buffer[i - 1] == " " { i -= 1 }
                while i > 0, s.buffer[i - 1] != " " { i -= 1 }
                return i
            }
            switch key {
            case .text(let t):
                s.buffer.insert(contentsOf: Array(t), at: s.cursor)
                s.cursor += t.count
            case .backspace:
                guard s.cursor > 0 else { return }
                s.buffer.remove(at: s.cursor - 1)
                s.cursor -= 1
            case .delete, .endOfInput:
                guard s.cursor < s.buffer.count else { return }
                s.buffer.remove(at: s.cursor)
            case .left: s.cursor = max(0, s.cursor - 1)
            case .right: s.cursor = min(s.buffer.count, s.cursor + 1)
            case .home: s.cursor = 0
            case .end: s.cursor = s.buffer.count
            case .wordLeft: s.cursor = wordStart(s.cursor)
            case .wordRight:
                var i = s.cursor
                while i < s.buffer.count, s.buffer[i] == " " { i += 1 }
                while i < s.buffer.count, s.buffer[i] != " " { i += 1 }
                s.cursor = i
            case .killToEnd: s.buffer.removeSubrange(s.cursor...)
            case .killToStart:
                s.buffer.removeSubrange(..<s.cursor)
                s.cursor = 0
            case .deleteWord:
                let start = wordStart(s.cursor)
                s.buffer.removeSubrange(start..<s.cursor)
                s.cursor = start
            case .up, .down:
                if s.position == s.history.count { s.draft = s.buffer }
                let to = key == .up ? s.position - 1 : s.position + 1
                guard (0...s.history.count).contains(to) else { return }
                s.position = to
                s.buffer = to == s.history.count ? s.draft : Array(s.history[to])
                s.cursor = s.buffer.count
            case .clearScreen:
                out.write("\u{1B}[H\u{1B}[2J")
            default:
                return
            }
            redraw(s)
        }
    }
}

/// Where the shell keeps its history: $XDG_STATE_HOME/ble-hci/history, else
/// ~/.local/state/ble-hci/history (next to the bonds).
func shellHistoryPath() -> String {
    let env = ProcessInfo.processInfo.environment
    let base = env["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? ((env["HOME"] ?? NSHomeDirectory()) + "/.local/state")
    return base + "/ble-hci/history"
}

/// The history file's last lines (a missing or unreadable file: none; a huge one: its last 1 MB).
func loadHistory(_ path: String) -> [String] {
    guard let h = FileHandle(forReadingAtPath: path) else { return [] }
    defer { try? h.close() }
    let size = (try? h.seekToEnd()) ?? 0
    let limit: UInt64 = 1 << 20
    try? h.seek(toOffset: size > limit ? size - limit : 0)
    let data = (try? h.readToEnd()) ?? Data()
    let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    return Array(lines.suffix(LineEditor.historyLimit))
}

/// Appends one line to the history file (made 0600 in a 0700 directory), at once: a shell
/// that is killed keeps what was typed. Past twice the limit, the file is rewritten shorter.
func appendHistory(_ line: String, to path: String, all: [String]) {
    let dir = (path as NSString).deletingLastPathComponent
    try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    let fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0o600)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    if let size = try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int, size > 200_000 {
        let text = all.suffix(LineEditor.historyLimit).joined(separator: "\n") + "\n"
        try? text.write(toFile: path, atomically: true, encoding: .utf8)
    }
}

/// The terminal in raw mode (no echo, no line discipline, no signals from keys; output
/// processing kept), restored by `restore`.
final class RawTerminal: Sendable {
    private let original: Mutex<termios?>

    init?(fd: Int32 = STDIN_FILENO) {
        var t = termios()
        guard isatty(fd) == 1, tcgetattr(fd, &t) == 0 else { return nil }
        original = Mutex(t)
        var raw = t
        cfmakeraw(&raw)
        raw.c_oflag |= tcflag_t(OPOST | ONLCR)
        guard tcsetattr(fd, TCSAFLUSH, &raw) == 0 else { return nil }
    }

    func restore(fd: Int32 = STDIN_FILENO) {
        guard var t = original.withLock({ o -> termios? in defer { o = nil }; return o }) else { return }
        tcsetattr(fd, TCSAFLUSH, &t)
    }
}

/// The command running in the foreground, which Ctrl-C (or SIGINT) cancels, and the pairing
/// questions it brought up, which the shell asks at a prompt of their own.
final class ForegroundCommand: Sendable {
    private struct State {
        var task: Task<SessionOutcome, Never>?
        var finished = false
        var questions: [PairingQuestion] = []
        var wake: AsyncStream<Key>.Continuation?
    }
    private let state = Mutex(State())

    func set(_ t: Task<SessionOutcome, Never>?) {
        state.withLock { $0.task = t; $0.finished = t == nil; $0.questions = [] }
        guard let t else { return }
        // Its end wakes a prompt waiting for keys.
        Task {
            _ = await t.value
            let wake = state.withLock { s -> AsyncStream<Key>.Continuation? in
                s.finished = true
                return s.wake
            }
            wake?.yield(.wake)
        }
    }
    func setWake(_ c: AsyncStream<Key>.Continuation) { state.withLock { $0.wake = c } }
    var isFinished: Bool { state.withLock { $0.finished } }
    /// Cancels it; false when nothing runs.
    func interrupt() -> Bool { state.withLock { $0.task }.map { $0.cancel(); return true } ?? false }

    /// Takes `q` to ask while a command runs; false when none runs (the user answers with
    /// `passkey` or `confirm` at the prompt).
    func offer(_ q: PairingQuestion) -> Bool {
        let wake = state.withLock { s -> AsyncStream<Key>.Continuation?? in
            guard s.task != nil, !s.finished else { return nil }
            s.questions.append(q)
            return .some(s.wake)
        }
        guard let wake else { return false }
        wake?.yield(.wake)
        return true
    }
    func nextQuestion() -> PairingQuestion? {
        state.withLock { s in s.questions.isEmpty ? nil : s.questions.removeFirst() }
    }
}

/// The terminal's keys for the main loop, with the type-ahead a running command did not use.
final class ShellKeys {
    private var iterator: AsyncStream<Key>.AsyncIterator
    private var typeAhead: [Key] = []
    init(_ stream: AsyncStream<Key>) { iterator = stream.makeAsyncIterator() }

    func next() async -> Key? {
        while true {
            let key = typeAhead.isEmpty ? await iterator.next() : typeAhead.removeFirst()
            if key != .wake { return key }
        }
    }

    /// Waits for the foreground command, asking its pairing questions at a prompt of their own;
    /// other keys typed meanwhile are kept for the next prompt.
    func serve(_ foreground: ForegroundCommand, editor: LineEditor) async {
        while !foreground.isFinished {
            if let q = foreground.nextQuestion() {
                await ask(q, foreground: foreground, editor: editor)
                continue
            }
            guard let key = await iterator.next() else { return }
            if key != .wake { typeAhead.append(key) }
        }
    }

    private func ask(_ q: PairingQuestion, foreground: ForegroundCommand, editor: LineEditor) async {
        switch q.kind {
        case .passkey: editor.show(prompt: "Passkey shown by \(q.peer) (6 digits; empty refuses): ")
        case .comparison(let n): editor.show(prompt: "Does \(q.peer) show \(sixDigits(n))? [y/N] ")
        }
        while true {
            guard let key = await iterator.next() else { q.answer(nil); return }
            switch key {
            case .wake where q.isAnswered || foreground.isFinished:
                _ = editor.finish(echo: q.timedOut ? " (no answer in time)" : "")
                return
            case .wake, .tab, .up, .down: continue
            case .enter, .endOfInput:
                let line = editor.finish().trimmingCharacters(in: .whitespaces)
                switch q.kind {
                case .passkey:
                    q.answer(line.count <= 6 && !line.isEmpty && line.allSatisfy(\.isASCIIDigit) ? UInt32(line) : nil)
                case .comparison:
                    q.answer(line.lowercased().hasPrefix("y") ? 1 : nil)
                }
                return
            default:
                editor.edit(key)
            }
        }
    }
}

/// `ble-hci shell` (and `session` without --json, `plain`).
func runShell(_ c: CommandContext, plain: Bool = false) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("\(c.command) takes its commands at its prompt, not as arguments: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let terminal = plain ? nil : RawTerminal()
    defer { terminal?.restore() }
    let historyPath = shellHistoryPath()
    let editor = terminal.map { _ in LineEditor(history: loadHistory(historyPath)) }
    let writer = LineWriter()
    let sink: @Sendable (Output.Destination, String) -> Void = { destination, text in
        if let editor { editor.print(text); return }
        switch destination {
        case .stdout: writer.write(text)
        case .stderr: FileHandle.standardError.write(Data(text.utf8))
        }
    }
    let colour = terminal != nil && isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
    let out = Output(json: false, colour: colour, sink: sink, language: c.out.language)
    let foreground = ForegroundCommand()
    let signals = SessionSignals(onInterrupt: { foreground.interrupt() })
    if terminal != nil { out.progress("Opening \(c.transportSpec)…") }
    let engine: SessionEngine
    do { engine = try await SessionEngine.open(c, base: out) } catch let e as UsageError { throw UsageError(e.message, command: c.command) }
    engine.watchTransport { message in
        out.error("\(message); check the controller and start again")
        signals.quit(exitCode: ExitCode.transport)
    }
    // With a terminal, a pairing question while a command runs is asked at a prompt of its own.
    if terminal != nil { engine.pairing.prompter.withLock { $0 = { foreground.offer($0) } } }
    out.progress("Local controller \(engine.central.controller.address) on \(engine.transportName). `help` lists the commands; Tab completes; Ctrl-C stops a command, Ctrl-D (or quit) ends.")

    /// Runs one line in the foreground; true: go on.
    func execute(_ line: String, keys: ShellKeys? = nil) async -> Bool {
        let words: [String]
        do { words = try splitWords(line) } catch {
            out.error("\(error)")
            return true
        }
        guard !words.isEmpty else { return true }
        let out = out.adding([], ownError: true)
        let task = Task { await engine.run(words, link: nil, out: out) }
        foreground.set(task)
        if let keys, let editor { await keys.serve(foreground, editor: editor) }
        let outcome = await task.value
        foreground.set(nil)
        switch outcome {
        case .done: return true
        case .quit: return false
        case .failed(let message, _):
            if message == "cancelled" { out.progress("(stopped)") } else if out.lastError != message { out.error(message) }
            return true
        }
    }

    let main = Task {
        guard let editor, terminal != nil else {
            // Plain lines: no prompt, no editing.
            for await input in readLines(fd: STDIN_FILENO, limit: SessionLimits.lineLength) {
                guard case .line(let line) = input else {
                    out.error("line longer than \(SessionLimits.lineLength) octets ignored")
                    continue
                }
                if !(await execute(line)) { break }
            }
            return
        }
        let keys = ShellKeys(keyStream(foreground: foreground, editor: editor))
        lines: while true {
            let selected = await engine.selectedLink
            editor.show(prompt: selected.map { "ble-hci [\($0)]> " } ?? "ble-hci> ")
            var lastWasTab = false
            keysLoop: while true {
                guard let key = await keys.next() else { break lines }
                let tab = key == .tab
                defer { lastWasTab = tab }
                switch key {
                case .enter:
                    let line = editor.finish()
                    editor.addHistory(line)
                    if !line.trimmingCharacters(in: .whitespaces).isEmpty {
                        appendHistory(line, to: historyPath, all: [])
                    }
                    if !(await execute(line, keys: keys)) { break lines }
                    break keysLoop
                case .interrupt:
                    _ = editor.finish(echo: "^C")
                    break keysLoop
                case .endOfInput where editor.isEmpty:
                    _ = editor.finish()
                    break lines
                case .tab:
                    await complete(editor: editor, engine: engine, list: lastWasTab)
                default:
                    editor.edit(key)
                }
            }
        }
    }
    let stop = Task {
        await signals.wait()
        _ = foreground.interrupt()
        main.cancel()
    }
    await main.value
    stop.cancel()
    await engine.close()
    return signals.exitCode ?? ExitCode.success
}

/// Keys from the terminal, read on a thread of their own. Ctrl-C while a command runs cancels
/// it at once (it is not queued behind the type-ahead).
private func keyStream(foreground: ForegroundCommand, editor: LineEditor) -> AsyncStream<Key> {
    let (stream, continuation) = AsyncStream.makeStream(of: Key.self, bufferingPolicy: .bufferingNewest(4096))
    foreground.setWake(continuation)
    let thread = Thread {
        var decoder = KeyDecoder()
        var buffer = [UInt8](repeating: 0, count: 256)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(STDIN_FILENO, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            for key in decoder.feed(buffer[0..<n]) {
                if key == .interrupt, foreground.interrupt() {
                    editor.print("^C\n")
                    continue
                }
                continuation.yield(key)
            }
        }
        continuation.finish()
    }
    thread.start()
    return stream
}

/// Tab: completes the word before the cursor from the commands, then what the command takes
/// (addresses and names seen, the selected link's UUIDs and handles, link names, ...). A second
/// Tab with several candidates lists them.
private func complete(editor: LineEditor, engine: SessionEngine, list: Bool) async {
    let before = editor.beforeCursor
    var words = before.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    let current = before.hasSuffix(" ") || before.isEmpty ? "" : (words.popLast() ?? "")
    let offered: [String]
    if current.hasPrefix("-"), let command = words.first.flatMap(sessionCommand(named:)) {
        // The command's options.
        offered = (command.spec.flags.union(command.spec.valued)).sorted().map { "--" + $0 } + ["--help"]
    } else {
        offered = await engine.completions(for: words)
    }
    let candidates = offered.filter { $0.lowercased().hasPrefix(current.lowercased()) }
    guard !candidates.isEmpty else { return }
    if candidates.count == 1 {
        let c = candidates[0]
        editor.insert(String(c.dropFirst(current.count)) + (c.hasSuffix("=") ? "" : " "))
        return
    }
    var common = candidates[0].lowercased()
    for c in candidates.dropFirst() {
        common = String(zip(common, c.lowercased()).prefix { $0 == $1 }.map(\.0))
    }
    if common.count > current.count {
        editor.insert(String(candidates[0].dropFirst(current.count).prefix(common.count - current.count)))
    } else if list {
        editor.print(candidates.joined(separator: "  ") + "\n")
    }
}
