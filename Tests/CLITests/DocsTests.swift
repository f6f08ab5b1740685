import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 16 "Add": ble-hci(1) and the completions come from the same source as --help.
    @Suite(.serialized) struct ManPageAndCompletions {
        /// Every `--option` a help text mentions.
        static func options(in text: String) -> Set<String> {
            let regex = try! NSRegularExpression(pattern: "(?<![A-Za-z0-9-])--[a-z][a-z-]*[a-z]")
            let range = NSRange(text.startIndex..., in: text)
            return Set(regex.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } })
        }

        /// The commands the main help lists (its "Commands:" block).
        static func commands(inMainHelp lines: [String]) -> [String] {
            guard let start = lines.firstIndex(of: "Commands:") else { return [] }
            return lines[(start + 1)...].prefix { $0.hasPrefix("  ") }.compactMap { $0.split(separator: " ").first.map(String.init) }
        }

        @Test func manPageRendersWithEveryCommandAndOptionOfHelp() async throws {
            let dir = try TempDir()
            let page = dir.path("ble-hci.1")
            let man = try await BleHCI.run(["--man"])
            expectStatus(man, 0, "ble-hci --man")
            try (man.stdout.joined(separator: "\n") + "\n").write(toFile: page, atomically: true, encoding: .utf8)
            // groff's own check of the roff: no warnings at all (-ww), nothing printed (-z).
            let lint = try await runTool("/usr/bin/groff", ["-man", "-ww", "-z", page])
            #expect(lint.status == 0 && lint.stderr.isEmpty, "groff warnings: \(lint.stderr)")
            let rendered = try await runTool("/bin/sh", ["-c", "MANWIDTH=200 man -l '\(page)' | col -b"])
            #expect(rendered.status == 0, "man -l: \(rendered.stderr)")
            let text = rendered.stdout.joined(separator: "\n")

            let main = try await BleHCI.run(["--help"])
            let commands = Self.commands(inMainHelp: main.stdout)
            #expect(commands.count >= 7, "commands in --help: \(commands)")
            var helpOptions = Self.options(in: main.stdout.joined(separator: "\n"))
            for command in commands {
                // Each command is a subsection (rendered as an indented header line of its own).
                #expect(rendered.stdout.contains("   \(command)"), "man page has no section for \(command)")
                let help = try await BleHCI.run([command, "--help"])
                expectStatus(help, 0, "\(command) --help")
                helpOptions.formUnion(Self.options(in: help.stdout.joined(separator: "\n")))
            }
            let manOptions = Self.options(in: text)
            #expect(helpOptions.subtracting(manOptions).isEmpty, "options in --help but not in the man page: \(helpOptions.subtracting(manOptions).sorted())")
            #expect(manOptions.subtracting(helpOptions).isEmpty, "options in the man page but not in --help: \(manOptions.subtracting(helpOptions).sorted())")
            #expect(text.contains("NAME") && text.contains("SYNOPSIS") && text.contains("BLE-HCI(1)"))
        }

        /// bash: the generated function completes commands, each command's options and values.
        @Test func bashCompletionCompletesCommandsOptionsAndValues() async throws {
            let exe = try BleHCI.executable().path
            func complete(_ words: [String]) async throws -> [String] {
                let quoted = words.map { "'\($0)'" }.joined(separator: " ")
                let script = "source <('\(exe)' --completions bash) && COMP_WORDS=(\(quoted)) && COMP_CWORD=\(words.count - 1) && _ble_hci && printf '%s\\n' \"${COMPREPLY[@]}\""
                let r = try await runTool("/bin/bash", ["-c", script])
                #expect(r.status == 0, "bash: \(r.stderr)")
                return r.stdout.filter { !$0.isEmpty }
            }
            #expect(try await complete(["ble-hci", "sc"]) == ["scan"])
            #expect(Set(try await complete(["ble-hci", "central", "--wr"])) == ["--write", "--write-without-response"])
            #expect(try await complete(["ble-hci", "-t", "tcp:1", "central", "name:x", "--profile", "ba"]) == ["band"])
            #expect(try await complete(["ble-hci", "dump", "x", "--lay"]) == ["--layers"])
            #expect(try await complete(["ble-hci", "--ver"]) == ["--version"])
        }

        @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/zsh") || ProcessInfo.processInfo.environment["CI"] == "true",
                       "zsh is not installed (Tools/setup.sh installs it)"))
        func zshCompletionIsValidZsh() async throws {
            let dir = try TempDir()
            let file = dir.path("_ble-hci")
            let r = try await BleHCI.run(["--completions", "zsh"])
            expectStatus(r, 0, "--completions zsh")
            try (r.stdout.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
            #expect(r.stdout.first == "#compdef ble-hci")
            let check = try await runTool("/usr/bin/zsh", ["-n", file])
            #expect(check.status == 0, "zsh -n: \(check.stderr)")
        }
    }
}
