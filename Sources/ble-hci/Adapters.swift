import Foundation
import HCI
import Transport

/// `ble-hci adapters`: the kernel's HCI adapters, who holds each, and how to free one.
func runAdapters(_ c: CommandContext) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("adapters takes no arguments, got: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let adapters = try HCIAdapters.list()  // TransportError: exit 3 with the reason
    let out = c.out
    if adapters.isEmpty {
        out.note("The kernel has Bluetooth but no HCI adapter (plug one in, or attach a virtual one: sudo ble-hci controllers --listen vhci).")
    }
    for a in adapters {
        let state = a.state
        var fields: [Field] = [.text("event", "adapter"), .text("name", a.name), .int("index", Int(a.index)),
                               .text("address", a.address.description), .bool("up", a.up)]
        if let managed = a.managedByKernel { fields.append(.bool("userChannelHeld", !managed)) }
        fields.append(.text("state", state.summary))
        if let free = state.free { fields.append(.text("free", free)) }
        out.event(fields)
        out.line("\(out.bold(a.name))  \(a.address)  \(a.up ? out.green("up") : "down")  \(state.summary)")
        if let free = state.free { out.line("      to use it with ble-hci: \(free)") } else { out.line("      use it: sudo ble-hci -t \(a.name) scan") }
    }
    return ExitCode.success
}
