import Foundation

// The ble-hci command line: parse, dispatch, map errors to CLI.md's exit codes.
let exitCode = await runCLI(Array(CommandLine.arguments.dropFirst()))
exit(exitCode)
