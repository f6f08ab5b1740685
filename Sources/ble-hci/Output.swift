import Foundation
import HCI

/// Where results go: human lines (colour only on a terminal) or exactly one JSON object per
/// line on stdout. Errors always go to stderr, in one sentence.
final class Output: Sendable {
    let json: Bool
    let colour: Bool
    /// The target a line is about, when one run has several (`central A B`): human lines,
    /// progress and errors start with it, and JSON events carry it as "target".
    let target: String?
    private let lock = NSLock()

    init(json: Bool) {
        self.json = json
        self.colour = !json && isatty(STDOUT_FILENO) == 1 && ProcessInfo.processInfo.environment["NO_COLOR"] == nil
        target = nil
    }

    private init(json: Bool, colour: Bool, target: String) {
        self.json = json
        self.colour = colour
        self.target = target
    }

    /// The same output, with every line about `target`.
    func labelled(_ target: String) -> Output { Output(json: json, colour: colour, target: target) }

    private var prefix: String { target.map { "[\($0)] " } ?? "" }

    /// One JSON line (in --json mode) or nothing.
    func event(_ fields: [Field]) {
        guard json else { return }
        write(jsonObject(target.map { fields + [.text("target", $0)] } ?? fields) + "\n")
    }

    /// A human line (not in --json mode, where the text is not even built).
    func line(_ text: @autoclosure () -> String) {
        guard !json else { return }
        write(prefix + text() + "\n")
    }

    func error(_ message: String) {
        lock.lock(); defer { lock.unlock() }
        FileHandle.standardError.write(Data("ble-hci: \(prefix)\(message)\n".utf8))
    }

    /// Informational text for humans that must not pollute --json stdout.
    func note(_ message: String) {
        if json {
            lock.lock(); defer { lock.unlock() }
            FileHandle.standardError.write(Data("\(prefix)\(message)\n".utf8))
        } else {
            write(prefix + message + "\n")
        }
    }

    /// Progress for humans (opening, scanning, connecting): always on stderr, so stdout keeps
    /// only results in both modes.
    func progress(_ message: String) {
        lock.lock(); defer { lock.unlock() }
        FileHandle.standardError.write(Data("\(prefix)\(message)\n".utf8))
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
        lock.lock(); defer { lock.unlock() }
        FileHandle.standardOutput.write(Data(s.utf8))
    }
}
