import Foundation
import Synchronization
import HCI
import Decoder

/// Where results go: human lines (colour only on a terminal) or exactly one JSON object per
/// line on stdout. Errors always go to stderr, in one sentence.
final class Output: Sendable {
    let json: Bool
    let colour: Bool
    /// The language of human lines, progress and errors (never of JSON).
    let language: Language
    private let lock = NSLock()
    /// Where the text goes instead of stdout and stderr (the session's front ends: the shell
    /// redraws its prompt around it, `session --json` tags it with the request's id).
    let sink: (@Sendable (Destination, String) -> Void)?
    /// Fields appended to every JSON event (`session --json`: the request's `id`).
    let tag: [Field]
    /// The last message `error` printed (the session's final answer of a failed request).
    private let lastErrorText: LastError
    /// What human lines, progress and errors start with: "[TARGET] " when one run has several
    /// targets (`central A B`), else nothing.
    private let prefix: String

    final class LastError: Sendable {
        let text = Mutex<String?>(nil)
    }

    enum Destination: Sendable { case stdout, stderr }

    init(json: Bool, colour: Bool? = nil, tag: [Field] = [], sink: (@Sendable (Destination, String) -> Void)? = nil,
         lastError: LastError = LastError(), prefix: String = "", language: Language = .english) {
        self.language = language
        self.lastErrorText = lastError
        self.prefix = prefix
        self.json = json
        self.colour = colour ?? (!json && isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil)
        self.tag = tag
        self.sink = sink
    }

    /// One JSON line (in --json mode) or nothing.
    func event(_ fields: [Field]) {
        guard json else { return }
        write(jsonObject(fields + tag) + "\n")
    }

    /// The same output with `fields` added to every event (a link's name, a request's id).
    /// It shares `lastError` with this one, unless `ownError` (a new request's output).
    func adding(_ fields: [Field], ownError: Bool = false) -> Output {
        Output(json: json, colour: colour, tag: fields + tag, sink: sink, lastError: ownError ? LastError() : lastErrorText, prefix: prefix, language: language)
    }

    /// The same output for one of several targets: its events carry `"target"`, its lines start with `[target]`.
    func labelled(_ target: String) -> Output {
        Output(json: json, colour: colour, tag: tag + [.text("target", target)], sink: sink, lastError: LastError(), prefix: "[\(target)] ", language: language)
    }

    var lastError: String? { lastErrorText.text.withLock { $0 } }

    /// `message` in this output's language.
    func text(_ message: Message) -> String { message.text(language) }

    /// A human line (not in --json mode, where the text is not even built).
    func line(_ text: @autoclosure () -> String) {
        guard !json else { return }
        write(prefix + text() + "\n")
    }

    func error(_ message: String) {
        lastErrorText.text.withLock { $0 = message }
        writeError("ble-hci: \(prefix)\(message)\n")
    }

    private func writeError(_ s: String) {
        if let sink { sink(.stderr, s); return }
        lock.lock(); defer { lock.unlock() }
        FileHandle.standardError.write(Data(s.utf8))
    }

    /// Informational text for humans that must not pollute --json stdout.
    func note(_ message: String) {
        if json {
            writeError("\(prefix)\(message)\n")
        } else {
            write(prefix + message + "\n")
        }
    }

    /// Progress for humans (opening, scanning, connecting): always on stderr, so stdout keeps
    /// only results in both modes.
    func progress(_ message: String) {
        writeError("\(prefix)\(message)\n")
    }

    /// A live trace block (human mode), dimmed so application lines stand out.
    func trace(_ text: String) {
        write(colour ? "\u{1B}[2m" + text + "\u{1B}[0m" : text)
    }

    func styled(_ text: String, _ code: String) -> String { colour ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text }
    func bold(_ s: String) -> String { styled(s, "1") }
    func dim(_ s: String) -> String { styled(s, "2") }
    func green(_ s: String) -> String { styled(s, "32") }
    func red(_ s: String) -> String { styled(s, "31") }
    func cyan(_ s: String) -> String { styled(s, "36") }

    func write(_ s: String) {
        if let sink { sink(.stdout, s); return }
        lock.lock(); defer { lock.unlock() }
        FileHandle.standardOutput.write(Data(s.utf8))
    }
}
