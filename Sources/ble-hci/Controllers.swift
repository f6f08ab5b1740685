import Foundation
import HCI
import Transport
import VirtualController

/// `ble-hci controllers --listen SPEC...`: virtual LE controllers on one shared link, served
/// as H4 on TCP/UNIX sockets (or attached to the kernel with `vhci`), until SIGINT/SIGTERM.
func runControllers(_ c: CommandContext) async throws -> Int32 {
    let specs = c.args.all("listen")
    guard !specs.isEmpty else {
        throw UsageError("at least one --listen SPEC is needed (tcp:HOST:PORT, unix:PATH or vhci)")
    }
    let link = VirtualLink(mode: .live)
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
    await waitForTerminationSignal()
    c.out.note("stopping")
    return 0
}

private func report(_ out: Output, spec: String, bound: String, address: BDAddress) {
    out.event([.text("event", "listening"), .text("spec", spec), .text("address", "\(address)")]
              + (bound == spec ? [] : [.text("device", bound)]))
    out.line("listening on \(bound): controller \(address)")
}

/// Waits for SIGINT or SIGTERM (the default actions are replaced, so the process exits cleanly).
private func waitForTerminationSignal() async {
    let box = SignalSources()
    await withCheckedContinuation { (cont: CheckedContinuation<Void, Never>) in
        box.install { cont.resume() }
    }
}

private final class SignalSources: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []
    private let lock = NSLock()
    private var fired = false

    func install(_ done: @escaping @Sendable () -> Void) {
        for sig in [SIGINT, SIGTERM] {
            signal(sig, SIG_IGN)
            let s = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            s.setEventHandler { [self] in
                lock.lock()
                let first = !fired
                fired = true
                lock.unlock()
                if first { done() }
            }
            s.resume()
            sources.append(s)
        }
    }
}
