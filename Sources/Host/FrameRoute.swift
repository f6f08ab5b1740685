import Synchronization

/// Where the `Host` hands one link's reassembled L2CAP frames: by default into
/// `LEConnection.frames`; a consumer (the link's `L2CAPConnection`) may install a synchronous
/// sink that the host calls on its own executor, without a task hop per frame.
///
/// Order is kept across both paths: the host counts frames put in the stream (the backlog)
/// and calls the sink only while the backlog is empty; the stream's consumer calls
/// `streamedFrameProcessed()` after handling each frame it read. A frame the sink declines
/// (returns false) goes into the stream, and so do the frames after it until the consumer
/// has caught up. So the sink and the stream consumer never run at the same time, and a
/// link's frames are handled in arrival order.
///
/// Thread safety: the state is a `Mutex`; the sink runs outside the lock.
public final class FrameRoute: Sendable {
    /// Handles one frame on the host's executor; returns false to have it go through `frames`.
    public typealias Sink = @Sendable (isolated Host, [UInt8]) -> Bool

    private struct State {
        var sink: Sink?
        var backlog = 0
    }
    private let state = Mutex(State())

    public init() {}

    /// Installs (or with nil removes) the synchronous sink.
    public func install(_ sink: Sink?) {
        state.withLock { $0.sink = sink }
    }

    /// The consumer of `frames` handled one frame read from it.
    public func streamedFrameProcessed() {
        state.withLock { $0.backlog = Swift.max(0, $0.backlog - 1) }
    }

    /// Host: offers `frame` to the sink; false when it must go into the stream (counted).
    func offer(_ frame: [UInt8], host: isolated Host) -> Bool {
        let sink: Sink? = state.withLock { s in
            if s.backlog == 0, let sink = s.sink { return sink }
            s.backlog += 1
            return nil
        }
        guard let sink else { return false }
        if sink(host, frame) { return true }
        state.withLock { $0.backlog += 1 }
        return false
    }

    /// Host: a frame counted by `offer` was dropped by the stream (full).
    func uncount() {
        state.withLock { $0.backlog = Swift.max(0, $0.backlog - 1) }
    }
}
