import HCI
import Synchronization

/// What the host tells the layers of one link about it besides its frames: the HCI events of
/// the link, handed on by one route (`FrameRoute.observe`), synchronously on the host's
/// executor, in controller order with the link's ACL data.
public enum HostLinkEvent: Sendable, Equatable {
    /// Encryption Change / Encryption Key Refresh Complete (Core v5.4 Vol 4 Part E 7.7.8, 7.7.39).
    case encryptionChanged(enabled: Bool, status: HCIStatus)
    /// LE Long Term Key Request (7.7.65.5): the peripheral's host answers it.
    case longTermKeyRequest(random: UInt64, ediv: UInt16)
    /// The link is gone (Disconnection Complete, or the host died: Unspecified Error).
    case disconnected(HCIStatus)
}

/// Where the `Host` hands one link's reassembled L2CAP frames, synchronously, on its own
/// executor: the one receive path of the stack (Host → L2CAP → ATT/SMP/signaling → GATT runs
/// to completion per frame, with no task hop). The link's events (`HostLinkEvent`) go the
/// same way to the one observer (`observe`): held until it is installed, then handed on.
///
/// A link has one consumer, chosen once: the L2CAP layer installs a sink (`install`), or a
/// test/tool reads `LEConnection.frames` (`stream()`). Frames that arrive before either are
/// held (at most `limit`) and handed to the consumer first, so nothing is lost or reordered
/// between the connection event and the consumer's start.
///
/// Thread safety: the state is a `Mutex` (`stream()` may be called from any thread); the sink
/// is called outside the lock, on the host's executor only (install, deliver and close all run
/// there), so frames reach it in order.
public final class FrameRoute: Sendable {
    /// Handles one frame on the host's executor.
    public typealias Sink = @Sendable ([UInt8]) -> Void
    /// Called once on the host's executor when the link is gone.
    public typealias Closed = @Sendable () -> Void
    /// Hears the link's events on the host's executor.
    public typealias Observer = @Sendable (HostLinkEvent) -> Void

    private enum Consumer {
        case undecided(held: [[UInt8]])
        case sink(Sink, Closed)
        case stream(AsyncStream<[UInt8]>, AsyncStream<[UInt8]>.Continuation)
    }
    private struct State {
        var consumer = Consumer.undecided(held: [])
        var closed = false
        var observer: Observer?
        /// Events that came before the observer (at most `heldEventLimit`, and the disconnection).
        var heldEvents: [HostLinkEvent] = []
    }
    /// Link events held for an observer not installed yet, beyond the disconnection.
    static let heldEventLimit = 16
    private let state = Mutex(State())
    let limit: Int

    init(limit: Int) { self.limit = Swift.max(1, limit) }

    /// Makes `sink` the consumer: frames held so far go to it first, then every frame as it
    /// arrives; `closed` is called when the link goes (at once if it has). Does nothing if the
    /// stream was chosen already. Call it on `host`'s executor (checked), so the held frames
    /// are handed over before any newer one.
    public func install(_ sink: @escaping Sink, closed: @escaping Closed, on host: Host) {
        host.preconditionIsolated("FrameRoute.install runs on the host's executor")
        let taken: (held: [[UInt8]], wasClosed: Bool)? = state.withLock { s in
            guard case .undecided(let held) = s.consumer else { return nil }
            s.consumer = s.closed ? .undecided(held: []) : .sink(sink, closed)
            return (held, s.closed)
        }
        guard let (held, wasClosed) = taken else { return }
        for f in held { sink(f) }
        if wasClosed { closed() }
    }

    /// The frames as an `AsyncStream` (held frames first; finishes at disconnection), for a
    /// consumer that does not install a sink. The same stream on every call.
    public func stream() -> AsyncStream<[UInt8]> {
        state.withLock { s in
            switch s.consumer {
            case .stream(let stream, _):
                return stream
            case .sink:
                return AsyncStream { $0.finish() }
            case .undecided(let held):
                let (stream, c) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingOldest(limit))
                for f in held { c.yield(f) }
                if s.closed { c.finish() }
                s.consumer = .stream(stream, c)
                return stream
            }
        }
    }

    /// Host: hands `frame` to the consumer. False when it was dropped (the consumer is a
    /// stream read too slowly, or none is chosen and `limit` frames are held).
    func deliver(_ frame: [UInt8], host: isolated Host) -> Bool {
        enum Next { case sink(Sink), held(Bool), streamed(AsyncStream<[UInt8]>.Continuation) }
        let next: Next = state.withLock { s in
            switch s.consumer {
            case .sink(let sink, _): return .sink(sink)
            case .stream(_, let c): return .streamed(c)
            case .undecided(var held):
                guard held.count < limit else { return .held(false) }
                s.consumer = .undecided(held: [])
                held.append(frame)
                s.consumer = .undecided(held: held)
                return .held(true)
            }
        }
        switch next {
        case .sink(let sink):
            sink(frame)
            return true
        case .held(let kept):
            return kept
        case .streamed(let c):
            if case .dropped = c.yield(frame) { return false }
            return true
        }
    }

    /// Makes `observer` the link's observer: the events held so far first, then each as it
    /// comes, ending with `.disconnected` (at once when the link is gone already). Call it on
    /// `host`'s executor (checked). A second observer is refused (false).
    @discardableResult
    public func observe(_ observer: @escaping Observer, on host: Host) -> Bool {
        host.preconditionIsolated("FrameRoute.observe runs on the host's executor")
        let held: [HostLinkEvent]? = state.withLock { s in
            guard s.observer == nil else { return nil }
            s.observer = observer
            defer { s.heldEvents = [] }
            return s.heldEvents
        }
        guard let held else { return false }
        for e in held { observer(e) }
        if case .disconnected? = held.last { state.withLock { $0.observer = nil } }
        return true
    }

    /// Host: hands `event` to the observer, or holds it until there is one.
    func signal(_ event: HostLinkEvent, host: isolated Host) {
        let observer: Observer? = state.withLock { s in
            if let o = s.observer {
                if case .disconnected = event { s.observer = nil }  // the last one: let it go
                return o
            }
            if case .disconnected = event { s.heldEvents.append(event) } else if s.heldEvents.count < Self.heldEventLimit {
                s.heldEvents.append(event)
            }
            return nil
        }
        observer?(event)
    }

    /// Host: the link is gone (`reason`); tells the consumer and the observer once.
    func close(reason: HCIStatus, host: isolated Host) {
        if !state.withLock({ $0.closed }) { signal(.disconnected(reason), host: host) }
        closeFrames(host: host)
    }

    private func closeFrames(host: isolated Host) {
        enum Next { case none, sink(Closed), stream(AsyncStream<[UInt8]>.Continuation) }
        let next: Next = state.withLock { s in
            guard !s.closed else { return .none }
            s.closed = true
            switch s.consumer {
            case .sink(_, let closed):
                s.consumer = .undecided(held: [])
                return .sink(closed)
            case .stream(_, let c): return .stream(c)
            case .undecided: return .none
            }
        }
        switch next {
        case .none: break
        case .sink(let closed): closed()
        case .stream(let c): c.finish()
        }
    }
}
