// Two of our hosts on the in-process virtual link (our controller: 8 ACL buffers of 27 octets,
// so frames are fragmented and flow controlled), both on one manual deadline clock: the L2CAP
// and ATT runtime tests need no process, and a timeout is a clock advance, not a wait (the
// swift-nio `EmbeddedChannel` idea for a link). Interop with another stack is the Interop
// suites' (Bumble).
import Testing
import HCI
import Host
import L2CAP
import TestSupport
import Transport
import VirtualController

public final class LinkPair: Sendable {
    public let link: VirtualLink
    /// Every deadline of both hosts (commands, procedures, ATT, signaling, credits): moves only
    /// when the test advances it.
    public let clock: ManualDeadlineClock
    public let centralHost: Host
    public let peripheralHost: Host
    public let central: LEConnection
    public let peripheral: LEConnection

    public static func make() async throws -> LinkPair {
        let (link, transports) = VirtualLink.inProcess(count: 2)
        let clock = ManualDeadlineClock()
        var configuration = HostConfiguration()
        configuration.clock = clock
        let a = Host(transport: transports[0], configuration: configuration)
        let b = Host(transport: transports[1], configuration: configuration)
        _ = try await a.start()
        _ = try await b.start()
        let connected = Task { () -> LEConnection? in
            for await e in b.events { if case .connected(let c) = e { return c } }
            return nil
        }
        try await b.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06], ownAddress: .randomStatic))
        let c = try await a.connect(to: DeviceAddress(await b.staticRandomAddress, type: .random), timeout: .seconds(10))
        // (Its LE Connection Complete may come after the central's: an await, bounded by the
        // suites' time limit.)
        guard let p = await connected.value else { throw HarnessError("peripheral host events ended before a connection") }
        return LinkPair(link: link, clock: clock, a: a, b: b, central: c, peripheral: p)
    }

    private init(link: VirtualLink, clock: ManualDeadlineClock, a: Host, b: Host, central: LEConnection, peripheral: LEConnection) {
        self.link = link
        self.clock = clock
        self.centralHost = a
        self.peripheralHost = b
        self.central = central
        self.peripheral = peripheral
    }

    /// Moves both hosts' time forward by `d` once `host` has armed `deadlines` deadlines (the
    /// procedure whose timeout the test wants is waiting); the due ones have fired when it returns.
    public func advance(by d: Duration, once host: Host, hasArmed deadlines: Int = 1) async throws {
        try await host.armed(deadlines)
        await StackTestSupport.advance(clock, by: d, firing: centralHost, peripheralHost)
    }

    public func close() async {
        await centralHost.close()
        await peripheralHost.close()
    }
}

public struct TimedOut: Error, CustomStringConvertible {
    public init(what: String) { self.what = what }
    public let what: String
    public var description: String { "timed out waiting for \(what)" }
}


/// One end's L2CAP layer, attached to its link; the calls enter its host (the layer lives
/// in the host's isolation).
public struct L2CAPEnd: Sendable {
    public let host: Host
    public let handle: UInt16

    public init(host: Host, handle: UInt16) {
        self.host = host
        self.handle = handle
    }

    /// Makes an `L2CAPConnection` for `connection` and attaches it to the link.
    @discardableResult
    public static func start(on host: Host, _ connection: LEConnection,
                             configuration: L2CAPConfiguration = .init()) async -> L2CAPEnd {
        await host.run { host in
            _ = host.attach(L2CAPConnection(connection: connection, configuration: configuration), to: connection)
        }
        return L2CAPEnd(host: host, handle: connection.handle)
    }

    /// Runs `body` with the layer in its host's isolation; throws `disconnected` once it is gone.
    public func run<R: Sendable>(_ body: @Sendable (L2CAPConnection, isolated Host) async throws -> R) async throws -> R {
        let handle = handle
        return try await host.run { host in try await body(L2CAPConnection.of(handle, on: host), host) }
    }

    public func signalingRequest(_ body: SignalingCommand.Body) async throws -> SignalingCommand {
        try await run { l2cap, host in try await l2cap.signalingRequest(body, host: host) }
    }

    public func connectChannel(psm: UInt16, mtu: UInt16 = 2048, mps: UInt16 = 247, credits: UInt16 = 16) async throws -> L2CAPChannel {
        try await run { l2cap, host in try await l2cap.connectChannel(psm: psm, mtu: mtu, mps: mps, credits: credits, host: host) }
    }

    public func listen(psm: UInt16, mtu: UInt16? = nil, mps: UInt16? = nil, credits: UInt16? = nil, enhanced: Bool = false,
                       accept: @escaping @Sendable (L2CAPChannel) -> Void) async throws {
        try await run { l2cap, _ in l2cap.listen(psm: psm, mtu: mtu, mps: mps, credits: credits, enhanced: enhanced, accept: accept) }
    }

    public func connectEnhancedChannels(psm: UInt16, count: Int, mtu: UInt16 = 2048, mps: UInt16 = 247,
                                        credits: UInt16 = 16) async throws -> [L2CAPChannel] {
        try await run { l2cap, host in
            try await l2cap.connectEnhancedChannels(psm: psm, count: count, mtu: mtu, mps: mps, credits: credits, host: host)
        }
    }

    public func reconfigure(_ cids: [UInt16], mtu: UInt16, mps: UInt16) async throws {
        try await run { l2cap, host in try await l2cap.reconfigure(cids, mtu: mtu, mps: mps, host: host) }
    }

    public func setConnectionParameterPolicy(_ policy: (@Sendable (ConnectionParameterUpdateRequest) async -> Bool)?) async throws {
        try await run { l2cap, _ in l2cap.setConnectionParameterPolicy(policy) }
    }

    public func requestConnectionParameterUpdate(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16,
                                                 timeout: UInt16) async throws -> Bool {
        try await run { l2cap, host in
            try await l2cap.requestConnectionParameterUpdate(intervalMin: intervalMin, intervalMax: intervalMax,
                                                             latency: latency, timeout: timeout, host: host)
        }
    }

    /// Whether the link's layer is gone (the host detaches it at the disconnection).
    public var isDisconnected: Bool {
        get async {
            let handle = handle
            return await host.run { host in host.layer(for: handle) == nil }
        }
    }
}

/// Both ends' L2CAP started.
public struct L2CAPPair: Sendable {
    public let pair: LinkPair
    public let central: L2CAPEnd
    public let peripheral: L2CAPEnd

    public static func make(timeout: Duration = .seconds(30)) async throws -> L2CAPPair {
        let pair = try await LinkPair.make()
        var config = L2CAPConfiguration()
        config.signalingTimeout = timeout
        let c = await L2CAPEnd.start(on: pair.centralHost, pair.central, configuration: config)
        let p = await L2CAPEnd.start(on: pair.peripheralHost, pair.peripheral, configuration: config)
        return L2CAPPair(pair: pair, central: c, peripheral: p)
    }
}

/// Collects accepted channels.
public final class Accepted: @unchecked Sendable {
    public let stream: AsyncStream<L2CAPChannel>
    public let continuation: AsyncStream<L2CAPChannel>.Continuation
    public init() { (stream, continuation) = AsyncStream.makeStream() }
    public func next() async throws -> L2CAPChannel {
        var it = stream.makeAsyncIterator()
        guard let c = await it.next() else { throw TimedOut(what: "accepted channel (stream ended)") }
        return c
    }
}
