import HCI

/// Reassembles the ACL fragments of one link into L2CAP frames (basic header included).
///
/// Bad input is dropped and reported, never trusted: a frame longer than `maxFrame`, a
/// continuation without a start, a start while a frame is pending, or fragments that run
/// past the length the basic header announced. Memory held is at most `maxFrame` octets.
public struct L2CAPReassembler: Sendable {
    public enum Output: Sendable, Equatable {
        /// A complete frame.
        case frame([UInt8])
        /// More fragments are needed.
        case pending
        /// Input was dropped; the reason says why.
        case dropped(String)
        /// A start fragment replaced a pending frame (dropped, with the reason), and itself
        /// completed a frame (`frame`) or is pending (nil).
        case replaced(dropped: String, frame: [UInt8]?)
    }

    public let maxFrame: Int
    private var buffer: [UInt8] = []
    /// Total frame length once the basic header has been seen; nil before.
    private var expected: Int? = nil
    private var active = false

    public init(maxFrame: Int = 65535 + 4) {
        self.maxFrame = Swift.max(4, maxFrame)
    }

    /// Octets held for an incomplete frame.
    public var pendingCount: Int { active ? buffer.count : 0 }
    /// The whole frame's length (basic header included) once its header has been seen.
    public var expectedLength: Int? { active ? expected : nil }

    /// The total frame length (4-octet basic header + the Length field, Core Vol 3 Part A 3.1)
    /// announced by the first octets of a frame; nil while fewer than 4 are available. The
    /// one place the Length field is read before a frame is complete.
    public static func totalLength<C: Collection>(header: C) -> Int? where C.Element == UInt8 {
        guard header.count >= 4 else { return nil }
        var it = header.makeIterator()
        guard let lo = it.next(), let hi = it.next() else { return nil }
        return 4 + (Int(lo) | Int(hi) << 8)
    }

    public mutating func push(_ data: [UInt8], start: Bool) -> Output {
        if start {
            var droppedReason: String? = nil
            if active {
                droppedReason = "start fragment while a frame was pending: dropped \(buffer.count) octet(s) of the pending frame"
                reset()
            }
            let out = begin(data)
            guard let droppedReason else { return out }
            switch out {
            case .frame(let f): return .replaced(dropped: droppedReason, frame: f)
            case .pending: return .replaced(dropped: droppedReason, frame: nil)
            case .dropped(let r): return .dropped(droppedReason + "; " + r)
            case .replaced: return .dropped(droppedReason)
            }
        }
        guard active else {
            return .dropped("continuation fragment (\(data.count) octet(s)) without a start: dropped")
        }
        if let expected {
            guard buffer.count + data.count <= expected else {
                let have = buffer.count + data.count
                reset()
                return .dropped("fragments carry \(have) octet(s), the L2CAP header announced \(expected): frame dropped")
            }
            buffer.append(contentsOf: data)
            return finishIfComplete()
        }
        // Header not complete yet: at most 4 octets held here.
        buffer.append(contentsOf: data)
        return afterHeaderKnown()
    }

    private mutating func begin(_ data: [UInt8]) -> Output {
        if let total = Self.totalLength(header: data) {
            if total > maxFrame {
                return .dropped("L2CAP frame of \(total) octet(s) exceeds the limit of \(maxFrame): dropped")
            }
            if data.count == total { return .frame(data) }  // fast path: no copy
            if data.count > total {
                return .dropped("ACL data (\(data.count) octets) is longer than the L2CAP frame it starts (\(total) octets): dropped")
            }
            active = true
            expected = total
            buffer.reserveCapacity(total)
            buffer.append(contentsOf: data)
            return .pending
        }
        active = true
        expected = nil
        buffer.append(contentsOf: data)
        return .pending
    }

    private mutating func afterHeaderKnown() -> Output {
        guard let total = Self.totalLength(header: buffer) else { return .pending }
        if total > maxFrame {
            reset()
            return .dropped("L2CAP frame of \(total) octet(s) exceeds the limit of \(maxFrame): dropped")
        }
        if buffer.count > total {
            let have = buffer.count
            reset()
            return .dropped("fragments carry \(have) octet(s), the L2CAP header announced \(total): frame dropped")
        }
        expected = total
        buffer.reserveCapacity(total)
        return finishIfComplete()
    }

    private mutating func finishIfComplete() -> Output {
        guard let expected, buffer.count == expected else { return .pending }
        let frame = buffer
        buffer = []
        active = false
        self.expected = nil
        return .frame(frame)
    }

    /// Forgets any pending frame.
    public mutating func reset() {
        buffer = []
        expected = nil
        active = false
    }
}

/// A frame waiting to be fragmented onto the controller.
struct OutgoingFrame {
    let frame: [UInt8]
    var offset: Int
    /// The `sendL2CAP` caller waiting for it; nil for `enqueueL2CAP` (or once its caller was failed).
    var continuation: CheckedContinuation<Void, any Error>?
    /// Queued by `enqueueL2CAP`, and against which bound it counts; nil for `sendL2CAP`.
    var enqueued: EnqueuedFrameKind? = nil
}

/// What an `enqueueL2CAP` frame is, for its per-link bound.
public enum EnqueuedFrameKind: Sendable {
    /// An answer to a request the peer may pipeline (ATT): `HostConfiguration.maxEnqueuedFramesPerLink`.
    case answer
    /// A PDU of a protocol with one outstanding per exchange (SMP, L2CAP signaling):
    /// `HostConfiguration.maxEnqueuedControlFramesPerLink`, never taken by answers.
    case control
    /// A request of ours that the layer sending it keeps to one outstanding per link (the ATT
    /// client, Core v5.4 Vol 3 Part F 3.3.2: the next is sent after the answer): not bounded
    /// here, the layer's own rule bounds it.
    case request
}

/// The host's links by connection handle. A controller holds a few links at a time (tens at
/// most), so a search of them in a row costs less than hashing the handle (SipHash: with a
/// `Dictionary` here, 1.4 % of a GATT read went to finding its link).
struct LinkTable {
    private var states: [LinkState] = []

    subscript(handle: UInt16) -> LinkState? {
        for link in states where link.handle == handle { return link }
        return nil
    }

    /// Adds `link` under its handle, which no link of the table has.
    mutating func insert(_ link: LinkState) {
        precondition(self[link.handle] == nil, "a second link with one handle")
        states.append(link)
    }

    /// Every link, in no particular order.
    var values: [LinkState] { states }

    mutating func removeValue(forKey handle: UInt16) -> LinkState? {
        guard let i = states.firstIndex(where: { $0.handle == handle }) else { return nil }
        states.swapAt(i, states.count - 1)
        return states.removeLast()
    }

    mutating func removeAll() { states.removeAll() }

    func mapValues<T>(_ transform: (LinkState) throws -> T) rethrows -> [UInt16: T] {
        try Dictionary(uniqueKeysWithValues: states.map { ($0.handle, try transform($0)) })
    }
}

/// Per-link state of the ACL path (actor-isolated inside `Host`).
final class LinkState {
    let handle: UInt16
    var connection: LEConnection
    var reassembler: L2CAPReassembler
    /// The layers above (`Host.attach`): the link's frames and events go there once attached.
    var layer: (any HostLinkLayer)?
    /// Frames not fully handed to the controller yet, oldest first (`queueHead` is the next).
    var queue: [OutgoingFrame] = []
    var queueHead = 0
    /// ACL packets sent and not yet completed by Number Of Completed Packets.
    var inFlight = 0
    /// True while this link is in `Host.readyLinks`.
    var scheduled = false
    /// Frames in `queue` put there by `enqueueL2CAP`, per kind.
    var enqueuedAnswerCount = 0
    var enqueuedControlCount = 0

    init(connection: LEConnection, maxFrame: Int) {
        self.handle = connection.handle
        self.connection = connection
        self.reassembler = L2CAPReassembler(maxFrame: maxFrame)
    }

    var hasQueued: Bool { queueHead < queue.count }

    func enqueuedCount(_ kind: EnqueuedFrameKind) -> Int {
        switch kind {
        case .answer: return enqueuedAnswerCount
        case .control: return enqueuedControlCount
        case .request: return 0
        }
    }

    /// Counts `f` out of its `enqueueL2CAP` bound (it left the queue).
    func forget(_ f: OutgoingFrame) {
        switch f.enqueued {
        case .answer?: enqueuedAnswerCount -= 1
        case .control?: enqueuedControlCount -= 1
        case .request?, nil: break
        }
    }

    func popFront() -> OutgoingFrame {
        let f = queue[queueHead]
        forget(f)
        queueHead += 1
        if queueHead == queue.count {
            queue.removeAll(keepingCapacity: true)
            queueHead = 0
        } else if queueHead >= 64, queueHead * 2 >= queue.count {
            queue.removeFirst(queueHead)
            queueHead = 0
        }
        return f
    }
}
