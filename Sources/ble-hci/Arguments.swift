import Decoder
/// A small command-line parser for CLI.md's grammar: global options anywhere, one command,
/// options in order (central's actions run in the order given, so order is kept).
struct ParsedArguments {
    /// Options in command-line order: (name without dashes, value or nil for flags).
    var options: [(name: String, value: String?)] = []
    var positionals: [String] = []

    func has(_ name: String) -> Bool { options.contains { $0.name == name } }
    func last(_ name: String) -> String? { options.last { $0.name == name }?.value }
    func all(_ name: String) -> [String] { options.filter { $0.name == name }.compactMap(\.value) }
}

/// A usage error: exit code 2, message plus a pointer to --help.
struct UsageError: Error, CustomStringConvertible {
    /// In English (the one language of `session --json`'s answers).
    var message: String
    var command: String?
    /// The message in every language, for the commonest errors (Messages.swift).
    var localized: Message?
    init(_ message: String, command: String? = nil) { self.message = message; self.command = command }
    init(_ message: Message, command: String? = nil) {
        self.init(message.text(.english), command: command)
        localized = message
    }
    func text(_ language: Language) -> String { localized?.text(language) ?? message }
    var description: String { message }
}

/// Declares which options a command takes: flags take no value; valued options take one.
struct OptionSpec {
    var flags: Set<String>
    var valued: Set<String>
    /// Options whose value is optional and only given with `=` (e.g. `--trace[=LAYERS]`).
    var optionalValue: Set<String> = []
    /// Short aliases: "t" → "transport".
    var short: [Character: String] = [:]
}

let globalOptions = OptionSpec(
    flags: ["json", "help", "version", "man"],
    valued: ["transport", "capture", "completions", "lang"],
    optionalValue: ["trace"],
    short: ["t": "transport", "w": "capture", "h": "help"])

/// Parses `args` (without the program name). The first positional that names a known command
/// is the command; options before and after it may be global ones or the command's own.
func parseArguments(_ args: [String], commandSpecs: [String: OptionSpec]) throws -> (command: String?, args: ParsedArguments) {
    var parsed = ParsedArguments()
    var command: String? = nil
    var i = 0
    func spec() -> OptionSpec? { command.flatMap { commandSpecs[$0] } }
    while i < args.count {
        let arg = args[i]
        i += 1
        if arg == "--" {
            parsed.positionals.append(contentsOf: args[i...])
            break
        }
        if arg.hasPrefix("--") {
            var name = String(arg.dropFirst(2))
            var inlineValue: String? = nil
            if let eq = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            let cmd = spec()
            if globalOptions.flags.contains(name) || cmd?.flags.contains(name) == true {
                if inlineValue != nil { throw UsageError("option --\(name) takes no value", command: command) }
                parsed.options.append((name, nil))
            } else if globalOptions.optionalValue.contains(name) || cmd?.optionalValue.contains(name) == true {
                parsed.options.append((name, inlineValue))
            } else if globalOptions.valued.contains(name) || cmd?.valued.contains(name) == true {
                if let v = inlineValue {
                    parsed.options.append((name, v))
                } else {
                    guard i < args.count else { throw UsageError(.optionNeedsValue("--\(name)"), command: command) }
                    parsed.options.append((name, args[i]))
                    i += 1
                }
            } else {
                throw UsageError(.unknownOption("--\(name)"), command: command)
            }
        } else if arg.hasPrefix("-") && arg.count >= 2 && !isNegativeNumber(arg) {
            let letter = arg[arg.index(after: arg.startIndex)]
            guard let name = globalOptions.short[letter] ?? spec()?.short[letter] else {
                throw UsageError(.unknownOption(arg), command: command)
            }
            let attached = arg.count > 2 ? String(arg.dropFirst(2)) : nil
            if globalOptions.flags.contains(name) || spec()?.flags.contains(name) == true {
                parsed.options.append((name, nil))
            } else if let v = attached {
                parsed.options.append((name, v))
            } else {
                guard i < args.count else { throw UsageError(.optionNeedsValue(arg), command: command) }
                parsed.options.append((name, args[i]))
                i += 1
            }
        } else if command == nil, commandSpecs[arg] != nil {
            command = arg
        } else if command == nil {
            throw UsageError(.unknownCommand(arg))
        } else {
            parsed.positionals.append(arg)
        }
    }
    return (command, parsed)
}

private func isNegativeNumber(_ s: String) -> Bool { Double(s) != nil }

extension ParsedArguments {
    func double(_ name: String, command: String) throws -> Double? {
        guard let v = last(name) else { return nil }
        guard let d = Double(v), d >= 0, d.isFinite else { throw UsageError("--\(name) needs a non-negative number, got '\(v)'", command: command) }
        return d
    }

    func int(_ name: String, command: String, range: ClosedRange<Int>) throws -> Int? {
        guard let v = last(name) else { return nil }
        guard let n = Int(v), range.contains(n) else {
            throw UsageError("--\(name) needs a whole number from \(range.lowerBound) to \(range.upperBound), got '\(v)'", command: command)
        }
        return n
    }
}
