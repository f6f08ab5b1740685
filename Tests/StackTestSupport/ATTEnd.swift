// One end of a link with an ATT bearer (or a raw ATT peer) on CID 0x0004, for the ATT and
// stack tests: the layers live in the host's isolation, so every call enters the host.
import HCI
import Host
import L2CAP
import ATT
import TestSupport

/// Collects what a handler receives.
public final class Inbox<T: Sendable>: Sendable {
    public let stream: AsyncStream<T>
    public let continuation: AsyncStream<T>.Continuation
    public init() { (stream, continuation) = AsyncStream.makeStream() }
    /// The next value handed over (the suites' time limit bounds the wait: the stack tests
    /// run on the manual clock, where nothing takes real time).
    public func next(_ what: String) async throws -> T {
        var it = stream.makeAsyncIterator()
        guard let v = await it.next() else { throw TimedOut(what: "\(what) (ended)") }
        return v
    }
}

/// Hands the raw ATT payloads a link receives to `handler` (a peer speaking raw ATT).
final class RawATT: L2CAPFixedChannel {
    let handler: @Sendable ([UInt8]) -> Void
    init(_ handler: @escaping @Sendable ([UInt8]) -> Void) { self.handler = handler }
    func received(_ payload: ByteReader, host: isolated Host) {
        var r = payload
        handler(r.rest())
    }
}

/// One end's L2CAP layer (attached to its link) with, on CID 0x0004, an ATT bearer, or a raw
/// receiver when `raw` is given.
public struct ATTEnd: Sendable {
    public let host: Host
    public let handle: UInt16
    /// The bearer's ATT_MTU and counters (nil without a bearer).
    public let link: ATTLink?

    /// `configure` runs on the bearer before the link's frames reach it (handlers to set).
    @discardableResult
    public static func start(on host: Host, _ connection: LEConnection, configuration: ATTBearerConfiguration = .init(),
                             delegate: (any ATTServerDelegate)? = nil,
                             configure: (@Sendable (ATTBearer) -> Void)? = nil,
                             raw: (@Sendable ([UInt8]) -> Void)? = nil) async -> ATTEnd {
        let link = await host.run { host -> ATTLink? in
            let l2cap = L2CAPConnection(connection: connection)
            var link: ATTLink?
            if let raw {
                l2cap.setFixedChannel(.att, RawATT(raw), host: host)
            } else {
                let b = ATTBearer(connection: connection, host: host, configuration: configuration)
                configure?(b)
                b.start(host: host)
                l2cap.setFixedChannel(.att, b, host: host)
                if let delegate { await b.setServerDelegate(delegate, host: host) }
                link = b.link
            }
            host.attach(l2cap, to: connection)
            return link
        }
        return ATTEnd(host: host, handle: connection.handle, link: link)
    }

    /// The end's L2CAP layer.
    public var l2cap: L2CAPEnd { L2CAPEnd(host: host, handle: handle) }

    public func run<R: Sendable>(_ body: @Sendable (ATTBearer, isolated Host) async throws -> R) async throws -> R {
        let handle = handle
        return try await host.run { host in try await body(ATTBearer.of(handle, on: host), host) }
    }

    /// Returns once `predicate` holds for the bearer (checked in its host's isolation each time
    /// the host has run: `Host.until`).
    public func until(_ what: String, _ predicate: @escaping @Sendable (ATTBearer) -> Bool) async throws {
        let handle = handle
        try await host.until(what) { host in (try? ATTBearer.of(handle, on: host)).map(predicate) ?? false }
    }

    public var mtu: Int { link?.mtu ?? 23 }
    public func request(_ pdu: ATTPDU) async throws -> ATTPDU { try await run { b, _ in try await b.request(pdu) } }
    public func command(_ pdu: ATTPDU) async throws { try await run { b, _ in try await b.command(pdu) } }
    public func notify(handle: UInt16, value: [UInt8]) async throws {
        try await run { b, _ in try await b.notify(handle: handle, value: value) }
    }
    @discardableResult
    public func exchangeMTU(_ mtu: UInt16) async throws -> Int { try await run { b, _ in try await b.exchangeMTU(mtu) } }
    public func setNotificationHandler(_ h: @escaping @Sendable (ATTPDU) async -> Void) async throws {
        try await run { b, _ in b.setNotificationHandler(h) }
    }
    public var closedReason: ATTBearerError? { get async throws { try await run { b, _ in b.closedReason } } }
    public var hasOutstandingRequest: Bool { get async throws { try await run { b, _ in b.hasOutstandingRequest } } }
    public var queuedRequestCount: Int { get async throws { try await run { b, _ in b.queuedRequestCount } } }
    /// Sends `payload` on CID 0x0004 as a raw peer would.
    public func sendRaw(_ payload: [UInt8]) async throws {
        try await host.sendL2CAP(L2CAPFrame(cid: .att, payload: payload).bytes, on: handle)
    }
}
