// Two of our hosts linked over Bumble's virtual controllers (27-octet ACL buffers), shared by
// the L2CAP and ATT runtime tests.
import Testing
import HCI
import Host
import L2CAP
import TestSupport
import Transport

public final class LinkPair: @unchecked Sendable {
    public let controllers: BumbleControllers
    public let centralHost: Host
    public let peripheralHost: Host
    public let central: LEConnection
    public let peripheral: LEConnection

    public static func make() async throws -> LinkPair {
        let controllers = try await BumbleControllers.start()
        let a = Host(transport: try TCPTransport.connect(host: "127.0.0.1", port: controllers.port1))
        let b = Host(transport: try TCPTransport.connect(host: "127.0.0.1", port: controllers.port2))
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
        return LinkPair(controllers: controllers, a: a, b: b, central: c, peripheral: p)
    }

    private init(controllers: BumbleControllers, a: Host, b: Host, central: LEConnection, peripheral: LEConnection) {
        self.controllers = controllers
        self.centralHost = a
        self.peripheralHost = b
        self.central = central
        self.peripheral = peripheral
    }

    public func close() async {
        await centralHost.close()
        await peripheralHost.close()
        controllers.stop()
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
