// Commands whose layers are still being built; each moves to its own file when it lands.
struct NotYetAvailable: Error, CustomStringConvertible {
    var command: String
    var description: String { "'\(command)' is not available in this build yet" }
}
func runScan(_ c: CommandContext) async throws -> Int32 { throw NotYetAvailable(command: c.command) }
func runCentral(_ c: CommandContext) async throws -> Int32 { throw NotYetAvailable(command: c.command) }
func runPeripheral(_ c: CommandContext) async throws -> Int32 { throw NotYetAvailable(command: c.command) }
