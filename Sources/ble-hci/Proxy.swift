import Synchronization
import Foundation
import HCI
import Transport
import Capture
import VirtualController

/// `ble-hci proxy --host SPEC --controller SPEC [-w FILE] [--trace]`: stands between another
/// host stack and a controller, forwards every H4 packet unchanged both ways, and records
/// (`-w`) and decodes (`--trace`) them as our own host's packets are (the controller's side of
/// the proxy is wrapped exactly as `-t` is for the other commands: commands and ACL from the
/// host are `sent`, events and ACL from the controller `received`).
func runProxy(_ c: CommandContext) async throws -> Int32 {
    let cmd = c.command
    guard c.args.positionals.isEmpty else {
        throw UsageError("proxy takes only options, got: \(c.args.positionals.joined(separator: " "))", command: cmd)
    }
    if c.args.has("transport") {
        throw UsageError("proxy names its controller with --controller SPEC (and the side the other host connects to with --host SPEC), not -t", command: cmd)
    }
    guard let hostText = c.args.last("host") else {
        throw UsageError("proxy needs --host SPEC: where the other host stack connects (tcp:HOST:PORT or unix:PATH, which proxy listens on, or serial:PATH[@BAUD])", command: cmd)
    }
    guard let controllerText = c.args.last("controller") else {
        throw UsageError("proxy needs --controller SPEC: the controller to forward to (\(TransportSpec.validForms))", command: cmd)
    }
    let hostSide = try ProxyHostSide(parsing: hostText, command: cmd)
    let controllerSpec = try TransportSpec(parsing: controllerText)
    SignalWatcher.install()
    let out = c.out

    // The controller first: a proxy with nothing to forward to fails at once (exit 3).
    let inner: any HCITransport
    let virtualLink: VirtualLink? = controllerSpec == .virtual ? VirtualLink(mode: .live) : nil
    if let virtualLink {
        inner = InProcessTransport(controller: virtualLink.addController())
    } else {
        inner = try controllerSpec.open()
    }
    let opened = Result { try openCaptureWriter(c) }
    if case .failure = opened { inner.close() }
    let writer = try opened.get()
    let controller = wrapForCaptureAndTrace(inner, context: c, writer: writer)
    let bridge = ProxyBridge(controller: controller, log: { out.progress("\(timestamp()) \($0)") })
    bridge.start()
    defer {
        bridge.close()
        writer.map(closeCapture)
        withExtendedLifetime(virtualLink) {}
    }
    out.progress("\(timestamp()) controller: \(inner.name)")

    let listener = try hostSide.listener(command: cmd)
    defer { listener?.stop() }
    switch hostSide {
    case .listen:
        guard let listener else { return ExitCode.failure }
        let bound = listener.boundSpec
        out.event([.text("event", "listening"), .text("spec", bound), .text("controller", inner.name)])
        out.line("listening on \(bound) for a host; forwarding to \(inner.name)")
        listener.start(accepted: { transport, peer in bridge.attach(transport, peer: peer) },
                       failed: { error in bridge.fail("the host side stopped accepting: \(error)") })
    case .serial(let spec):
        let transport = try spec.open()
        guard let serial = transport as? FileDescriptorTransport else {
            transport.close()
            throw CLIFailure("\(spec) did not open as a byte stream", exitCode: ExitCode.transport)
        }
        out.event([.text("event", "listening"), .text("spec", spec.description), .text("controller", inner.name)])
        out.line("host on \(spec); forwarding to \(inner.name)")
        bridge.attach(serial, peer: spec.description)
    }

    // Until SIGINT/SIGTERM, or the controller (or the host side) is lost.
    let failure: String? = await withTaskGroup(of: String?.self) { group in
        group.addTask { await bridge.failure.value }
        group.addTask { _ = await waitForStop(duration: nil); return nil }
        let first = await group.next() ?? nil
        group.cancelAll()
        bridge.failure.resolve(nil)  // ends the first child when the stop came first
        return first
    }
    let counts = bridge.counts
    out.progress("\(timestamp()) proxy stopped: \(counts.toController) packet(s) host → controller, \(counts.toHost) controller → host"
                 + (counts.dropped > 0 ? ", \(counts.dropped) from the controller while no host was attached (recorded, not forwarded)" : ""))
    if let failure {
        out.error("\(failure)\(lostHint(true, controllerText))")
        return ExitCode.transport
    }
    return ExitCode.success
}

/// Where the other host stack is: a socket the proxy listens on, or a UART it is wired to.
enum ProxyHostSide {
    case listen(String)
    case serial(TransportSpec)

    init(parsing text: String, command: String) throws {
        if text.hasPrefix("serial:") {
            do { self = .serial(try TransportSpec(parsing: text)) } catch { throw UsageError(error.message, command: command) }
            return
        }
        guard text.hasPrefix("tcp:") || text.hasPrefix("unix:") else {
            throw UsageError("--host must be tcp:HOST:PORT or unix:PATH (the proxy listens there for the other host stack), or serial:PATH[@BAUD]; got '\(text)'", command: command)
        }
        self = .listen(text)
    }

    /// The listening socket of `.listen` (nil for a UART): a SPEC it cannot listen on is a usage error.
    func listener(command: String) throws -> H4Listener? {
        guard case .listen(let spec) = self else { return nil }
        do {
            return try H4Listener(spec: spec)
        } catch {
            if error.kind == .badSpec { throw UsageError(error.message, command: command) }
            throw error
        }
    }
}

/// The forwarding itself: both directions on one serial executor, in arrival order, each
/// packet sent on as it came (`HCIPacket` re-encodes the exact octets the framer cut).
/// One host at a time: a second connection while one is attached is refused, so two host
/// stacks never drive one controller at once. Without a host, what the controller sends is
/// recorded and counted, not forwarded.
final class ProxyBridge: Sendable {
    let controller: any HCITransport
    let executor = SerialThreadExecutor(name: "ble-hci proxy")
    /// Set once: why the proxy must stop (the controller lost); `runProxy` waits on it.
    let failure = FirstOutcome<String?>()
    private let log: @Sendable (String) -> Void
    private struct State {
        var host: (id: Int, transport: FileDescriptorTransport, peer: String)?
        var nextID = 0
        var closed = false
        var toController = 0, toHost = 0, dropped = 0
    }
    private let state = Mutex(State())

    init(controller: any HCITransport, log: @escaping @Sendable (String) -> Void) {
        self.controller = controller
        self.log = log
    }

    var counts: (toController: Int, toHost: Int, dropped: Int) { state.withLock { ($0.toController, $0.toHost, $0.dropped) } }

    func start() {
        controller.inbox.deliver(on: executor) { [self] delivery in
            switch delivery {
            case .packets(let batch):
                let current = state.withLock { s -> FileDescriptorTransport? in
                    if let h = s.host { s.toHost += batch.count; return h.transport }
                    s.dropped += batch.count
                    return nil
                }
                guard let current else { return }
                for p in batch {
                    // A host that went away ends its own inbox, reported there.
                    do { try current.send(p) } catch { break }
                }
            case .ended(let error):
                fail("the controller \(controller.name) \(error.map { "was lost: \($0)" } ?? "closed")")
            }
        }
    }

    /// Makes `transport` the host, unless one is attached already (then it is closed).
    func attach(_ transport: FileDescriptorTransport, peer: String) {
        let id: Int? = state.withLock { s in
            guard s.host == nil, !s.closed else { return nil }
            s.nextID += 1
            s.host = (s.nextID, transport, peer)
            return s.nextID
        }
        guard let id else {
            transport.close()
            log("refused a second host (\(peer)): one host at a time drives the controller; stop the first one")
            return
        }
        log("host connected: \(peer)")
        transport.inbox.deliver(on: executor) { [self] delivery in
            switch delivery {
            case .packets(let batch):
                state.withLock { $0.toController += batch.count }
                for p in batch {
                    do { try controller.send(p) } catch {
                        fail("could not forward to the controller \(controller.name): \(error)")
                        return
                    }
                }
            case .ended(let error):
                let was = state.withLock { s -> Bool in
                    guard s.host?.id == id else { return false }
                    s.host = nil
                    return true
                }
                transport.close()
                if was {
                    let why: String
                    switch error {
                    case nil: why = "closed"
                    case let e? where e.kind == .framing: why = "it sent bytes that are not H4 (\(e)); its connection was closed"
                    case let e? where e.kind == .lost && e.errno == nil && e.message.hasSuffix("(end of stream)"): why = "it closed the connection"
                    case let e?: why = "\(e)"
                    }
                    log("host disconnected (\(peer)): \(why); waiting for the next host")
                }
            }
        }
    }

    func fail(_ reason: String) { failure.resolve(reason) }

    /// Closes the host connection and the controller. Idempotent.
    func close() {
        let h = state.withLock { s -> FileDescriptorTransport? in
            s.closed = true
            defer { s.host = nil }
            return s.host?.transport
        }
        h?.close()
        controller.close()
        executor.shutdownWhenIdle()
    }
}
