import Foundation
import HCI
import Transport
import VirtualController

/// `ble-hci controllers --listen SPEC... [--airtime on|off] [--air FILE]`: virtual LE controllers on one
/// shared link, served as H4 on TCP/UNIX sockets (or attached to the kernel with `vhci`), until
/// SIGINT/SIGTERM. With airtime (the default) the link simulates time on the air (issue 29);
/// --air FILE writes its link layer to a pcap (issue 28).
func runControllers(_ c: CommandContext) async throws -> Int32 {
    let specs = c.args.all("listen")
    guard !specs.isEmpty else {
        throw UsageError("at least one --listen SPEC is needed (tcp:HOST:PORT, unix:PATH or vhci)", command: c.command)
    }
    guard c.args.positionals.isEmpty else {
        throw UsageError("controllers takes only --listen options, got: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let airtime: Bool
    switch c.args.last("airtime") ?? "on" {
    case "on": airtime = true
    case "off": airtime = false
    case let other: throw UsageError("--airtime is on or off, got \(other)", command: c.command)
    }
    SignalWatcher.install()
    let link = VirtualLink(mode: .live, airtime: airtime ? Airtime.Configuration() : nil)
    let air = try startAirCapture(c, link: link)
    defer { stopAirCapture(air, link: link) }
    // Host connections, refusals and disconnections (and the controllers' own notes) on stderr,
    // so stdout keeps only the `listening` lines.
    link.logHandler = { line in FileHandle.standardError.write(Data("\(timestamp()) \(line)\n".utf8)) }
    let socketSpecs = specs.filter { $0 != "vhci" }
    let server = try H4Server(link: link, listen: socketSpecs)
    var vhcis: [VHCIController] = []
    defer {
        server.stop()
        for v in vhcis { v.close() }
    }
    var socketIndex = 0
    for spec in specs {
        if spec == "vhci" {
            let v = try VHCIController(link: link)
            vhcis.append(v)
            report(c.out, spec: "vhci", bound: "hci\(v.index)", address: v.controller.publicAddress)
        } else {
            let l = server.listeners[socketIndex]
            socketIndex += 1
            report(c.out, spec: l.boundSpec, bound: l.boundSpec, address: l.controller.publicAddress)
        }
    }
    server.start()
    _ = await waitForStop(duration: nil)
    c.out.note("stopping")
    return ExitCode.success
}

private func report(_ out: Output, spec: String, bound: String, address: BDAddress) {
    out.event([.text("event", "listening"), .text("spec", spec), .text("address", "\(address)")]
              + (bound == spec ? [] : [.text("device", bound)]))
    out.line("listening on \(bound): controller \(address)")
}
