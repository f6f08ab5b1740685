import Foundation
import HCI
import Transport

/// The host side of one virtual controller, in-process: `send` feeds the controller,
/// `inbox` gets what the controller sends (queued on the link's context, no
/// extra hops; the host has it handed over in batches as jobs on `executor`, the link's, which
/// every host on the link shares).
public final class InProcessTransport: HCITransport, @unchecked Sendable {
    public let controller: VirtualController
    public let name: String
    private let packets = PacketInbox()
    public var inbox: PacketInbox { packets }
    public var executor: SerialThreadExecutor? { controller.link.executor }
    private let lock = NSLock()
    private var closed = false

    /// Attaches to `controller` (replacing any previous host) from its power-on state.
    public init(controller: VirtualController, name: String? = nil) {
        self.controller = controller
        self.name = name ?? "virtual controller \(controller.index) (\(controller.publicAddress))"
        controller.powerCycle()
        let inbox = packets
        controller.attachHost { packet in inbox.deliver(packet) }
    }

    public func send(_ packet: HCIPacket) throws(TransportError) {
        lock.lock()
        let isClosed = closed
        lock.unlock()
        if isClosed { throw TransportError(.closed, "\(name): transport is closed") }
        controller.receive(fromHost: packet)
    }

    public func close() {
        lock.lock()
        let was = closed
        closed = true
        lock.unlock()
        guard !was else { return }
        controller.attachHost(nil)
        controller.powerCycle()
        packets.finish()
    }

    deinit { packets.finish() }
}

extension VirtualLink {
    /// A live link with `count` controllers, each with an in-process transport for its host.
    public static func inProcess(count: Int = 2, aclBuffers: Int = 8, aclDataLength: Int = 27) -> (VirtualLink, [InProcessTransport]) {
        let link = VirtualLink(mode: .live)
        let transports = (0..<count).map { _ in
            InProcessTransport(controller: link.addController(aclBuffers: aclBuffers, aclDataLength: aclDataLength))
        }
        return (link, transports)
    }
}
