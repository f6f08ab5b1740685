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
        let p = try await withTimeout(.seconds(10), "peripheral connected event") { await connected.value }
        guard let p else { throw HarnessError("peripheral host events ended before a connection") }
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
    /// procedure whose timeout the test wants is waiting), so the due ones fire.
    public func advance(by d: Duration, once host: Host, hasArmed deadlines: Int = 1) async throws {
        try await eventually("\(deadlines) deadline(s) armed") {
            await host.armedDeadlineCount >= deadlines
        }
        clock.advance(by: d)
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


/// Both ends' L2CAP started.
public struct L2CAPPair: Sendable {
    public let pair: LinkPair
    public let central: L2CAPConnection
    public let peripheral: L2CAPConnection

    public static func make(timeout: Duration = .seconds(30)) async throws -> L2CAPPair {
        let pair = try await LinkPair.make()
        var config = L2CAPConfiguration()
        config.signalingTimeout = timeout
        let c = L2CAPConnection(host: pair.centralHost, connection: pair.central, configuration: config)
        let p = L2CAPConnection(host: pair.peripheralHost, connection: pair.peripheral, configuration: config)
        await c.start()
        await p.start()
        return L2CAPPair(pair: pair, central: c, peripheral: p)
    }
}

/// Collects accepted channels.
public final class Accepted: @unchecked Sendable {
    public let stream: AsyncStream<L2CAPChannel>
    public let continuation: AsyncStream<L2CAPChannel>.Continuation
    public init() { (stream, continuation) = AsyncStream.makeStream() }
    public func next() async throws -> L2CAPChannel {
        let s = stream
        return try await withTimeout(.seconds(10), "an accepted channel") {
            var it = s.makeAsyncIterator()
            guard let c = await it.next() else { throw TimedOut(what: "accepted channel (stream ended)") }
            return c
        }
    }
}
