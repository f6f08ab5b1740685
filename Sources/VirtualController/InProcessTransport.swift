import Foundation
import HCI
import Synchronization
import Transport

/// The host side of one virtual controller, in-process: `send` feeds the controller,
/// `inbox` gets what the controller sends (queued on the link's context, no
/// extra hops; the host has it handed over in batches as jobs on `executor`, the link's, which
/// every host on the link shares).
public final class InProcessTransport: HCITransport {
    public let controller: VirtualController
    public let name: String
    private let packets = PacketInbox()
    public var inbox: PacketInbox { packets }
    public var executor: SerialThreadExecutor? { controller.link.executor }
    /// Set once by `close` (read on every send).
    private let closed = Atomic<Bool>(false)

    /// Attaches to `controller` (replacing any previous host) from its power-on state.
    public init(controller: VirtualController, name: String? = nil) {
        self.controller = controller
        self.name = name ?? "virtual controller \(controller.index) (\(controller.publicAddress))"
        controller.powerCycle()
        let inbox = packets
        controller.attachHost { packet in inbox.deliver(packet) }
    }

    public func send(_ packet: HCIPacket) throws(TransportError) {
        if closed.load(ordering: .acquiring) { throw TransportError(.closed, "\(name): transport is closed") }
        controller.receive(fromHost: packet)
    }

    public func close() {
        guard !closed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        controller.attachHost(nil)
        controller.powerCycle()
        packets.finish()
    }

    deinit { packets.finish() }
}

extension VirtualLink {
    /// A live link with `count` controllers, each with an in-process transport for its host.
    /// `airtime`: the airtime model (nil: instant mode, packets through at once).
    public static func inProcess(count: Int = 2, aclBuffers: Int = 8, aclDataLength: Int = 27,
                                 airtime: Airtime.Configuration? = nil) -> (VirtualLink, [InProcessTransport]) {
        let link = VirtualLink(mode: .live, airtime: airtime)
        let transports = (0..<count).map { _ in
            InProcessTransport(controller: link.addController(aclBuffers: aclBuffers, aclDataLength: aclDataLength))
        }
        return (link, transports)
    }
}
