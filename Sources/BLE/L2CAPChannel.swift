import Synchronization
import HCI
import Host
import L2CAP

/// One LE credit-based channel (CoreBluetooth's `CBL2CAPChannel`; Core v5.4 Vol 3 Part A 3.4,
/// 10.1): SDUs both ways with credit flow control. `send` waits for the peer's credits
/// (back-pressure); `sdus` yields the reassembled SDUs and returns credits as they are taken,
/// and ends when either side closes the channel. Every failure is a `BLEError`: a channel whose
/// link went down throws `.disconnected` with the link's reason.
public struct L2CAPChannel: Sendable, CustomStringConvertible {
    let base: L2CAP.L2CAPChannel
    /// The link, for its disconnection reason.
    let link: LinkSlot

    init(_ base: L2CAP.L2CAPChannel, link: LinkSlot) {
        self.base = base
        self.link = link
    }

    /// The SPSM the channel was opened to.
    public var psm: UInt16 { base.psm }
    /// The connection handle of its link.
    public var connection: UInt16 { base.handle }
    /// Our CID (the peer sends to it) and the peer's.
    public var localCID: UInt16 { base.localCID }
    public var remoteCID: UInt16 { base.remoteCID }
    /// The largest SDU and PDU payload we receive, and the peer receives.
    public var mtu: Int { base.mtu }
    public var mps: Int { base.mps }
    public var peerMTU: Int { base.peerMTU }
    public var peerMPS: Int { base.peerMPS }

    /// Sends one SDU (at most `peerMTU` octets); returns when its last K-frame went to the
    /// controller, after as many of the peer's credits as it takes.
    public func send(_ sdu: [UInt8]) async throws {
        try await boundary(link.link) { try await base.send(sdu) }
    }

    /// The next received SDU; nil once the channel closed normally.
    public func receive() async throws -> [UInt8]? {
        try await boundary(link.link) { try await base.receive() }
    }

    /// Received SDUs, in order.
    public var sdus: SDUs { SDUs(channel: self) }

    /// Sends a Disconnection Request and waits (signaling timeout) for its response.
    public func close() async throws {
        try await boundary(link.link) { try await base.close() }
    }

    public var description: String { base.description }

    public struct SDUs: AsyncSequence, Sendable {
        public typealias Element = [UInt8]
        let channel: L2CAPChannel
        public struct AsyncIterator: AsyncIteratorProtocol {
            let channel: L2CAPChannel
            public mutating func next() async throws -> [UInt8]? { try await channel.receive() }
        }
        public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(channel: channel) }
    }
}

/// A link as it becomes known: a peripheral's channels are accepted by layers made before their
/// `Link` is (`Stack.link(for:)`), which fills this in.
final class LinkSlot: Sendable {
    private let slot: Mutex<Link?>
    init(_ link: Link? = nil) { slot = Mutex(link) }
    var link: Link? { slot.withLock { $0 } }
    func set(_ link: Link) { slot.withLock { $0 = link } }
}
