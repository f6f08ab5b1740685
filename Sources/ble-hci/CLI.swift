import Foundation
import HCI
import Transport
import BLE
import Host
import Decoder

/// Exit codes from CLI.md.
enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 2
    static let transport: Int32 = 3
}

/// What every command gets: its parsed arguments, the global options and the output.
struct CommandContext {
    var command: String
    var args: ParsedArguments
    var out: Output
    var transportSpec: String { args.last("transport") ?? "hci0" }
    var capturePath: String? { args.last("capture") }
    /// nil: no trace; otherwise the layers to show.
    var traceLayers: Set<String>? {
        guard args.has("trace") else { return nil }
        return try? parseLayers(args.last("trace"))
    }
}

func parseLayers(_ text: String?) throws -> Set<String> {
    let all: Set<String> = ["hci", "l2cap", "att", "gatt", "smp"]
    guard let text, !text.isEmpty else { return all }
    var out = Set<String>()
    for part in text.split(separator: ",") {
        let p = part.trimmingCharacters(in: .whitespaces).lowercased()
        guard all.contains(p) else { throw UsageError("unknown layer '\(p)': use a comma list of hci,l2cap,att,gatt,smp") }
        out.insert(p)
    }
    return out
}

func runCLI(_ argv: [String]) async -> Int32 {
    let environment = ProcessInfo.processInfo.environment
    let parsed: (command: String?, args: ParsedArguments)
    do {
        parsed = try parseArguments(argv, commandSpecs: commandSpecs)
    } catch let e as UsageError {
        return usageFailure(e, language: languageBeforeParsing(argv, environment: environment))
    } catch {
        return usageFailure(UsageError("\(error)"), language: languageBeforeParsing(argv, environment: environment))
    }
    let args = parsed.args
    let language: Language
    do { language = try chosenLanguage(args, environment: environment) } catch let e as UsageError {
        return usageFailure(e, language: Language(environment: environment))
    } catch { return usageFailure(UsageError("\(error)"), language: Language(environment: environment)) }
    if args.has("version") {
        if args.has("json") {
            print(jsonObject([.text("event", "version"), .text("version", toolVersion)]))
        } else {
            print("ble-hci \(toolVersion)")
        }
        return ExitCode.success
    }
    if args.has("man") {
        print(manPage(), terminator: "")
        return ExitCode.success
    }
    if let shell = args.last("completions") {
        switch shell {
        case "bash": print(bashCompletion(), terminator: "")
        case "zsh": print(zshCompletion(), terminator: "")
        default: return usageFailure(UsageError("--completions takes bash or zsh, got '\(shell)'"), language: language)
        }
        return ExitCode.success
    }
    guard let command = parsed.command else {
        if args.has("help") {
            print(HelpTopic.main.text(language))
            return ExitCode.success
        }
        return usageFailure(UsageError(.noCommand), language: language)
    }
    if args.has("help") {
        print((HelpTopic(command: command) ?? .main).text(language))
        return ExitCode.success
    }
    if command == "proxy", args.has("transport") {
        return usageFailure(UsageError("proxy names its controller with --controller SPEC (and where the other host connects with --host SPEC), not -t", command: command), language: language)
    }
    if !hostCommands.contains(command), command != "proxy", let given = ["transport", "capture", "trace"].first(where: args.has) {
        return usageFailure(UsageError("--\(given) is for the commands that drive a controller (scan, central, peripheral, advertise, demo, session, shell), not \(command)", command: command), language: language)
    }
    if args.has("trace") {
        do { _ = try parseLayers(args.last("trace")) } catch var e as UsageError { e.command = command; return usageFailure(e, language: language) } catch {}
    }
    let out = Output(json: args.has("json"), language: language)
    let context = CommandContext(command: command, args: args, out: out)
    do {
        switch command {
        case "dump": return try await runDump(context)
        case "scan": return try await runScan(context)
        case "central": return try await runCentral(context)
        case "peripheral": return try await runPeripheral(context)
        case "advertise": return try await runAdvertise(context)
        case "demo": return try await runDemo(context)
        case "controllers": return try await runControllers(context)
        case "proxy": return try await runProxy(context)
        case "adapters": return try await runAdapters(context)
        case "bonds": return try await runBonds(context)
        case "session": return try await runSession(context)
        case "shell": return try await runShell(context)
        default: return usageFailure(UsageError(.unknownCommand(command)), language: language)
        }
    } catch var e as UsageError {
        e.command = command
        return usageFailure(e, language: language)
    } catch let e as Interrupted {
        out.error("\(e) while \(command) was still starting or working; capture closed")
        return e.exitCode
    } catch let e as CLIFailure {
        out.error(e.message)
        return e.exitCode
    } catch let e as TransportError where e.kind == .badSpec {
        return usageFailure(UsageError(e.message, command: command), language: language)
    } catch BLEError.transport(let e) where e.kind == .badSpec {
        return usageFailure(UsageError(e.message, command: command), language: language)
    } catch let e as TransportError {
        out.error("\(e)\(lostHint(e.kind == .lost, context.transportSpec))")
        return ExitCode.transport
    } catch BLEError.transport(let e) {
        out.error("\(e)\(lostHint(e.kind == .lost, context.transportSpec))")
        return ExitCode.transport
    } catch HostError.transportLost(let e) {
        out.error("\(e)\(lostHint(true, context.transportSpec))")
        return ExitCode.transport
    } catch {
        out.error("\(error)")
        return ExitCode.failure
    }
}

/// What a closed socket to a controller usually means.
func lostHint(_ lost: Bool, _ spec: String) -> String {
    guard lost, spec.hasPrefix("tcp:") || spec.hasPrefix("unix:") else { return "" }
    return "; a `ble-hci controllers` listener serves one host at a time (is another host attached to \(spec)?) and stops when its process ends"
}

/// The commands that open a controller as its host, and so take -t, -w and --trace.
let hostCommands: Set<String> = ["scan", "central", "peripheral", "advertise", "demo", "session", "shell"]

func usageFailure(_ e: UsageError, language: Language) -> Int32 {
    let hint = e.command.map { "ble-hci \($0) --help" } ?? "ble-hci --help"
    FileHandle.standardError.write(Data("ble-hci: \(Message.seeHelp(message: e.text(language), hint: hint).text(language))\n".utf8))
    return ExitCode.usage
}

/// The language of an error in the arguments themselves: a well-formed `--lang X` among them,
/// else the locale's.
func languageBeforeParsing(_ argv: [String], environment: [String: String]) -> Language {
    for (i, a) in argv.enumerated() {
        let value = a.hasPrefix("--lang=") ? String(a.dropFirst(7)) : a == "--lang" && i + 1 < argv.count ? argv[i + 1] : nil
        if let value, let language = Language(option: value) { return language }
    }
    return Language(environment: environment)
}
