import HCI
import Synchronization

/// What the host tells the layers of one link about it besides its frames: the HCI events of
/// the link, in controller order with the link's ACL data.
public enum HostLinkEvent: Sendable, Equatable {
    /// Encryption Change / Encryption Key Refresh Complete (Core v5.4 Vol 4 Part E 7.7.8, 7.7.39).
    case encryptionChanged(enabled: Bool, status: HCIStatus)
    /// LE Long Term Key Request (7.7.65.5): the peripheral's host answers it.
    case longTermKeyRequest(random: UInt64, ediv: UInt16)
    /// The link is gone (Disconnection Complete, or the host died: Unspecified Error).
    case disconnected(HCIStatus)
}

/// The layers above the host on one link (the L2CAP layer and what it carries): plain state
/// owned by the host (`Host.attach`), called inside the host's isolation as the link's frames
/// and events arrive, so a frame is handled to completion (Host → L2CAP → ATT/SMP → GATT)
/// before the next is read. Not `Sendable`: it lives and runs where its host does.
public protocol HostLinkLayer: AnyObject {
    /// One reassembled L2CAP frame (basic header included), in arrival order.
    func received(_ frame: [UInt8], host: isolated Host)
    /// An HCI event of the link, in controller order with its frames; `.disconnected` is the
    /// last call the layer gets.
    func linkEvent(_ event: HostLinkEvent, host: isolated Host)
}

/// What a link's frames and events wait in until their consumer is chosen: a layer attached
/// with `Host.attach` (held frames and events are handed to it first), or the `frames` stream
/// of tests and tools (`stream()`). Nothing is lost or reordered between the connection event
/// and the consumer's start; at most `limit` frames and `heldEventLimit` events are held.
///
/// Thread safety: a `Mutex` (`stream()` may be called from any thread); the host feeds it on
/// its executor.
public final class FrameRoute: Sendable {
    private enum Consumer {
        case undecided(frames: [[UInt8]], events: [HostLinkEvent])
        /// A layer took the link (it is in the host's link state).
        case layer
        case stream(AsyncStream<[UInt8]>, AsyncStream<[UInt8]>.Continuation)
    }
    private struct State {
        var consumer = Consumer.undecided(frames: [], events: [])
        /// Why the link went, once it has.
        var closed: HCIStatus?
    }
    /// Link events held for a layer not attached yet, beyond the disconnection.
    static let heldEventLimit = 16
    private let state = Mutex(State())
    let limit: Int

    init(limit: Int) { self.limit = Swift.max(1, limit) }

    /// The frames as an `AsyncStream` (held frames first; finishes at disconnection), for a
    /// consumer that attaches no layer. The same stream on every call; an empty one once a
    /// layer took the link.
    public func stream() -> AsyncStream<[UInt8]> {
        state.withLock { s in
            switch s.consumer {
            case .stream(let stream, _):
                return stream
            case .layer:
                return AsyncStream { $0.finish() }
            case .undecided(let held, _):
                let (stream, c) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingOldest(limit))
                for f in held { c.yield(f) }
                if s.closed != nil { c.finish() }
                s.consumer = .stream(stream, c)
                return stream
            }
        }
    }

    /// Why the link went, once it has.
    public var closedReason: HCIStatus? { state.withLock { $0.closed } }

    /// Host: a layer takes the link. What was held for it, and the link's end if it came
    /// already; nil when the stream was chosen before.
    func takeForLayer() -> (frames: [[UInt8]], events: [HostLinkEvent], closed: HCIStatus?)? {
        state.withLock { s in
            guard case .undecided(let frames, let events) = s.consumer else { return nil }
            s.consumer = .layer
            return (frames, events, s.closed)
        }
    }

    /// Host: holds `frame` for the consumer to come, or streams it. False when it was dropped
    /// (the stream is read too slowly, or `limit` frames are held).
    func deliver(_ frame: [UInt8]) -> Bool {
        let streaming: AsyncStream<[UInt8]>.Continuation? = state.withLock { s in
            switch s.consumer {
            case .stream(_, let c): return c
            case .layer: return nil
            case .undecided(var held, let events):
                guard held.count < limit else { return nil }
                s.consumer = .undecided(frames: [], events: [])
                held.append(frame)
                s.consumer = .undecided(frames: held, events: events)
                return nil
            }
        }
        if let streaming, case .dropped = streaming.yield(frame) { return false }
        return true
    }

    /// Host: holds `event` for a layer to come (a stream consumer reads `Host.events` instead).
    func hold(_ event: HostLinkEvent) {
        state.withLock { s in
            guard case .undecided(let frames, var events) = s.consumer, events.count < Self.heldEventLimit else { return }
            events.append(event)
            s.consumer = .undecided(frames: frames, events: events)
        }
    }

    /// Host: the link is gone; a stream finishes, a layer to come is told at `attach`.
    func close(reason: HCIStatus) {
        let streaming: AsyncStream<[UInt8]>.Continuation? = state.withLock { s in
            guard s.closed == nil else { return nil }
            s.closed = reason
            if case .stream(_, let c) = s.consumer { return c }
            return nil
        }
        streaming?.finish()
    }
}
