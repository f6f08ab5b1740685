import HCI

/// Where HCI packets go to and come from: a user-channel socket, an H4 byte stream (TCP,
/// UNIX, UART) or an in-process virtual controller. The host never knows which it has.
public protocol HCITransport: AnyObject, Sendable {
    /// Sends one packet to the controller. Throws `TransportError` once the transport is closed or lost.
    func send(_ packet: HCIPacket) throws(TransportError)

    /// Human description ("tcp:127.0.0.1:9000", "hci0 (user channel)").
    var name: String { get }

    /// Closes the transport; `inbox` ends. Idempotent.
    func close()

    /// Packets from the controller, in arrival order, in batches: the one receive path (the
    /// `Host` has them handed to its executor); it ends with the transport's loss (reported
    /// once), or normally after `close()`. One reader.
    var inbox: PacketInbox { get }

    /// The executor the host of this transport should run on, when the transport has one to
    /// share (every host on one in-process `VirtualLink` gets the link's, so a packet sent by
    /// one host is received by the other on the same thread). Nil: the host makes its own.
    var executor: SerialThreadExecutor? { get }
}

extension HCITransport {
    public var executor: SerialThreadExecutor? { nil }

    /// The inbox as an `AsyncThrowingStream`, for a reader other than the host (tests, tools).
    public var incoming: AsyncThrowingStream<HCIPacket, any Error> { inbox.stream }
}

/// Why a transport could not be opened or was lost. The description says what to do.
public struct TransportError: Error, Sendable, CustomStringConvertible, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Opening failed (socket/bind/connect/open).
        case open
        /// The peer closed the stream or a read/write failed.
        case lost
        /// The byte stream did not frame as H4 (unknown indicator, lying length).
        case framing
        /// Used after close().
        case closed
        /// A transport SPEC that doesn't parse.
        case badSpec
    }

    public var kind: Kind
    public var message: String
    /// errno when a syscall failed.
    public var errno: Int32?

    public init(_ kind: Kind, _ message: String, errno: Int32? = nil) {
        self.kind = kind
        self.message = message
        self.errno = errno
    }

    public var description: String { message }
}
