// Runtime seams between the ATT bearer (one per link) and GATT (client procedures and the
// server's attribute database). GATT never sees L2CAP; the bearer never sees attributes.

/// A client's view of an ATT bearer: the bearer serialises requests (one outstanding per
/// Core Vol 3 Part F 3.3.2), enforces the 30 s transaction timeout and tracks ATT_MTU. Not
/// `Sendable`: a client uses its requester where it lives (the bearer: its host's isolation).
public protocol ATTRequester: AnyObject {
    /// The current ATT_MTU of the bearer (23 until an Exchange MTU completes). Synchronous:
    /// read per request, and an asynchronous getter costs the caller two executor switches.
    var mtu: Int { get }
    /// Sends a request and returns its response. An Error Response is thrown as `ATTError`;
    /// no response within the transaction timeout throws (the bearer's timeout error). Runs
    /// on the caller's executor (no executor switch per request).
    nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU
    /// `request`'s first step alone, synchronous, in the requester's isolation: the request is
    /// sent (or queued behind the outstanding one) and its transaction returned, whose `wait()`
    /// gives the response from any executor; what `request` does on a failure is then
    /// `recover(_:from:)`. Nil from a requester that has no such step (then use `request`).
    func begin(_ pdu: ATTPDU) throws -> ATTBearer.Transaction?
    /// What `request` does when `pdu`'s transaction failed with `error`: throws it, or (a
    /// requester that secures the link on Insufficient Authentication) answers it another way.
    nonisolated(nonsending) func recover(_ pdu: ATTPDU, from error: any Error) async throws -> ATTPDU
    /// Sends a command (Write Command, Signed Write Command) and returns once it has been
    /// handed to the link: flow controlled, never dropped.
    nonisolated(nonsending) func command(_ pdu: ATTPDU) async throws
}

extension ATTRequester {
    public func begin(_ pdu: ATTPDU) throws -> ATTBearer.Transaction? { nil }
    public nonisolated(nonsending) func recover(_ pdu: ATTPDU, from error: any Error) async throws -> ATTPDU { throw error }
}

/// Identifies one connected client of a server, with what the server needs to know of the link.
public struct ATTPeer: Hashable, Sendable, CustomStringConvertible {
    /// The connection handle of the link.
    public var id: UInt16
    /// The peer's device address in display form ("AA:BB:CC:DD:EE:FF"), when the bearer knows it.
    public var address: String?

    public init(id: UInt16, address: String? = nil) { self.id = id; self.address = address }

    // One peer per connection handle: the address is informative only.
    public static func == (a: ATTPeer, b: ATTPeer) -> Bool { a.id == b.id }
    public func hash(into h: inout Hasher) { h.combine(id) }
    public var description: String { address.map { "\($0) (handle \(id))" } ?? "handle \(id)" }
}

/// The security state of a link at the time of a request (what SMP has established).
public struct ATTSecurity: Sendable, Hashable {
    /// The link is encrypted.
    public var encrypted: Bool
    /// The encryption key was created with MITM protection (authenticated pairing).
    public var authenticated: Bool
    /// The application has authorised this peer (for attributes requiring authorization).
    public var authorized: Bool
    /// Encryption key size in octets (7...16); 0 when not encrypted.
    public var keySize: Int
    /// The server holds a key (bond) for this peer, so an unencrypted link only needs encrypting.
    public var keyAvailable: Bool

    public init(encrypted: Bool = false, authenticated: Bool = false, authorized: Bool = false, keySize: Int = 0,
                keyAvailable: Bool = false) {
        self.encrypted = encrypted
        self.authenticated = authenticated
        self.authorized = authorized
        self.keySize = encrypted ? keySize : 0
        self.keyAvailable = keyAvailable
    }

    /// An unencrypted link (the state of every new connection).
    public static let none = ATTSecurity()
}

/// How a server pushes to one peer (implemented by the bearer).
public protocol ATTServerPush: Sendable {
    /// Sends a Handle Value Notification; returns once handed to the link (flow controlled).
    nonisolated(nonsending) func notify(handle: UInt16, value: [UInt8]) async throws
    /// `notify(handle:value:)` without waiting, where that needs no wait: true when the
    /// notification went out now (the caller is on the link's host's thread and the link has
    /// room); false when nothing was sent, and `notify` is to be awaited instead. Throws what
    /// `notify` would (the link is gone).
    func notifyIfReady(handle: UInt16, value: [UInt8]) throws -> Bool
    /// Sends one Multiple Handle Value Notification of `list`, which fits ATT_MTU (Core v5.4
    /// Vol 3 Part F 3.4.7.4); returns once handed to the link.
    nonisolated(nonsending) func notifyMultiple(_ list: [ATTHandleValue]) async throws
    /// Sends `values` of one attribute as Handle Value Notifications, in order, each as the
    /// link takes it; returns once the last is handed to the link.
    nonisolated(nonsending) func notify(handle: UInt16, values: [[UInt8]]) async throws
    /// Sends a Handle Value Indication and returns after the peer's Handle Value Confirmation;
    /// throws when none arrives within the transaction timeout or the link goes away.
    func indicate(handle: UInt16, value: [UInt8]) async throws
    /// The current ATT_MTU towards this peer (synchronous: read per notification, and an
    /// asynchronous getter costs the caller two executor switches).
    var mtu: Int { get }
    /// The link's current security: a value is pushed only to a peer that could read it.
    var security: ATTSecurity { get }
}

extension ATTServerPush {
    /// A pusher that cannot tell reports an unencrypted link (protected values are not pushed).
    public var security: ATTSecurity { .none }

    /// A pusher without a synchronous path always has the caller await `notify`.
    public func notifyIfReady(handle: UInt16, value: [UInt8]) throws -> Bool { false }

    /// A pusher without Multiple Handle Value Notifications sends each value as a Handle Value
    /// Notification.
    public nonisolated(nonsending) func notifyMultiple(_ list: [ATTHandleValue]) async throws {
        for item in list { try await notify(handle: item.handle, value: item.value) }
    }

    /// One notification after the other.
    public nonisolated(nonsending) func notify(handle: UInt16, values: [[UInt8]]) async throws {
        for value in values { try await notify(handle: handle, value: value) }
    }
}

/// What the bearer calls for every request/command the peer sends (implemented by GATTServer).
/// Exchange MTU is answered by the bearer itself; malformed and unknown PDUs are answered by the
/// bearer with `ATTPDU.serverRejection(for:)`.
public protocol ATTServerDelegate: Sendable {
    /// A new link: the server creates the peer's state (CCCDs, prepare queue).
    func peerConnected(_ peer: ATTPeer, push: any ATTServerPush) async
    /// Answers one decoded request or command. Returns the response (or an Error Response) for
    /// a request, nil for a command. `mtu` is the bearer's current ATT_MTU: responses fit in it.
    func respond(to pdu: ATTPDU, from peer: ATTPeer, mtu: Int, security: ATTSecurity) async -> ATTPDU?
    /// The link is gone: the server drops the peer's state (non-bonded CCCDs, prepare queue).
    func peerDisconnected(_ peer: ATTPeer) async
}

/// What a server's handler (`ATTServerHandler`) knows of the request it answers besides its
/// parameters: who sent it, the bearer's ATT_MTU (responses fit in it) and the link's security.
public struct ATTRequestContext: Sendable {
    public var peer: ATTPeer
    public var mtu: Int
    public var security: ATTSecurity
    public init(peer: ATTPeer, mtu: Int, security: ATTSecurity) {
        self.peer = peer; self.mtu = mtu; self.security = security
    }
}
