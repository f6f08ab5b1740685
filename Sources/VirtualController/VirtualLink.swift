import Foundation
import HCI
import Synchronization
import Transport

/// A simulated LE radio joining any number of `VirtualController`s.
///
/// Every controller state change and every delivery to a host happens on the link's one
/// serial context, in order, so a run is deterministic:
/// - `.live`: work runs at once on the thread that asks for it when the link is idle (else
///   the thread already running link work runs it next, in order): a serial context with no
///   thread hand-off per packet. Timers (advertising events, delayed packets) run at real
///   time from a DispatchQueue, through the same context. Used by the CLI,
///   `InProcessTransport` and stack tests.
/// - `.manual`: nothing runs until the test calls `runUntilIdle()` or `advance(by:)`, which
///   execute queued work on the caller's thread against a virtual clock. No sleeps.
///
/// With `airtime` the link simulates time on the air (connection events, PDUs per event,
/// advertising events, one radio per controller, supervision timeout:
/// VirtualLink+Airtime.swift); without it (instant mode) every packet goes through at once.
public final class VirtualLink: @unchecked Sendable {
    public enum Mode: Sendable { case live, manual }

    public let mode: Mode
    /// The airtime model, or nil for instant mode.
    public let airtime: Airtime.Configuration?
    /// Live mode: the monotonic clock when the link was made (link time 0).
    let startNanoseconds = DispatchTime.now().uptimeNanoseconds
    /// The wall-clock time of link time 0 (the air view's timestamps).
    let startDate = Date()
    /// Link context: the advDelay draws.
    var advDelayGenerator: SplitMix64
    /// The air view (VirtualLink+Air.swift): its sink, whether one is set (read per packet
    /// without the lock), and link-context state: the last packet's time, the draws of
    /// access addresses, CRCInits and secondary channels (apart from advDelay's, so recording
    /// changes no timing).
    let airSink = Mutex<AirSink?>(nil)
    let airRecording = Atomic<Bool>(false)
    var lastAirTime = -1.0
    var airGenerator: SplitMix64
    /// Time between advertising events the link delivers to scanners (real seconds in live
    /// mode, virtual seconds in manual mode). Kept short so scans are quick.
    public let advertisingInterval: Double

    let queue = DispatchQueue(label: "ble-hci.virtual-link")
    /// The executor of every host attached through `InProcessTransport`: one thread for all
    /// the stacks of the link, as Bumble's one asyncio loop. A host sending runs the link's
    /// work inline on that thread, and the packets the link delivers to the other hosts are
    /// jobs queued on it (no wake): a request and its answer never leave the thread.
    public let executor = SerialThreadExecutor(name: "ble-hci vlink")
    private let lock = NSLock()
    // Manual mode: queued work ordered by (due, seq).
    private var pending: [Pending] = []
    private var sequence: UInt64 = 0
    private var clock: Double = 0
    private var _controllers: [VirtualController] = []
    // Live mode: work waiting for the running thread, and whether a thread is running it.
    /// (Closures in a struct: an array of bare closures re-wraps each one appended, an allocation.)
    private struct Work { let run: @Sendable () -> Void }
    private struct LiveQueue {
        var work: [Work] = []
        /// The running thread's spare buffer: it and `work` swap, so a batch allocates nothing.
        var spare: [Work] = []
    }
    /// Its own lock (not `lock`): taken twice per packet a host sends.
    private let live = Mutex(LiveQueue())
    /// Whether a thread is running link work. Taken by a compare-exchange, after the taker's
    /// work (if any) is queued; given back under `live`'s lock, only with the queue empty. So
    /// queued work always has a thread to run it: a thread that queued work and failed to take
    /// the flag leaves it to the holder, who looks at the queue again before giving the flag
    /// back (and a holder that already gave it back did so before the work was queued, so the
    /// compare-exchange succeeds). The exchange also orders one holder's link-context accesses
    /// before the next holder's.
    private let running = Atomic<Bool>(false)

    private struct Pending {
        var due: Double
        var seq: UInt64
        var work: @Sendable () -> Void
    }

    // Link-context state: read and written only by work running on the link's context.
    var tickScheduled = false
    /// One report tick for every controller's completed packets not yet reported (one timer
    /// per interval for the link, not one per controller: 32 links bursting would otherwise
    /// wake a thread per controller per burst).
    private var completionReportScheduled = false
    /// Faults (link context; read for every ACL packet).
    var dropACL: Set<Int> = []
    var delayACL: [Int: Double] = [:]
    /// Counted on the link context, read from any thread (`aclPacketCount`).
    private let aclPackets = Atomic<Int>(0)
    /// Log lines (controller misbehaviour seen from hosts, faults applied). Bounded. Under `lock`.
    private var _log: [String] = []
    private var _logHandler: (@Sendable (String) -> Void)?

    /// Called with each log line, on the thread that logs it. Set from any thread.
    public var logHandler: (@Sendable (String) -> Void)? {
        get { lock.withLock { _logHandler } }
        set { lock.withLock { _logHandler = newValue } }
    }

    /// `advertisingInterval` is instant mode's; in airtime mode each advertiser has its own.
    public init(mode: Mode = .live, advertisingInterval: Double = 0.02, airtime: Airtime.Configuration? = nil) {
        self.mode = mode
        self.advertisingInterval = advertisingInterval
        self.airtime = airtime
        advDelayGenerator = SplitMix64(state: airtime?.seed ?? 0)
        airGenerator = SplitMix64(state: (airtime?.seed ?? 0) ^ 0xA1A1)
    }

    /// Adds a controller with the next index; its public address is F0:F1:F2:F3:F4:(index+1).
    @discardableResult
    public func addController(aclBuffers: Int = 8, aclDataLength: Int = 27) -> VirtualController {
        lock.lock()
        let c = VirtualController(link: self, index: _controllers.count, aclBuffers: aclBuffers, aclDataLength: aclDataLength)
        _controllers.append(c)
        lock.unlock()
        return c
    }

    public var controllers: [VirtualController] {
        lock.lock(); defer { lock.unlock() }
        return _controllers
    }

    /// Virtual time in manual mode (seconds since creation); 0 in live mode.
    public var now: Double {
        lock.lock(); defer { lock.unlock() }
        return clock
    }

    /// Recent log lines (at most 200).
    public var log: [String] {
        lock.lock(); defer { lock.unlock() }
        return _log
    }

    func note(_ line: String) {
        lock.lock()
        if _log.count >= 200 { _log.removeFirst(_log.count - 199) }
        _log.append(line)
        let handler = _logHandler
        lock.unlock()
        handler?(line)
    }

    // MARK: - Scheduling

    /// Runs `work` on the link's context as soon as possible, after work already queued.
    func perform(_ work: @escaping @Sendable () -> Void) {
        switch mode {
        case .live: runLive(work)
        case .manual: enqueue(after: 0, work)
        }
    }

    /// Live mode: runs `work` on this thread if no thread is running link work (then also
    /// whatever is queued meanwhile, in order), else queues it for that thread.
    private func runLive(_ work: @escaping @Sendable () -> Void) {
        live.withLock { $0.work.append(Work(run: work)) }
        if takeRunning() { leaveContext() }
    }

    /// Live mode: makes the calling thread the one running link work, if none is (so nothing is
    /// queued either: the running thread runs the queue empty before it lets go). The caller
    /// then runs its work inline, with no closure queued, and calls `leaveContext()`.
    /// False in manual mode, or when another thread is running link work.
    func enterContextIfIdle() -> Bool {
        guard mode == .live else { return false }
        return takeRunning()
    }

    private func takeRunning() -> Bool {
        running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// Live mode, on the link's context: runs the work queued meanwhile (in order, what it
    /// queues included), then lets the context go. A thread runs a few rounds of others' work
    /// at most, then hands the context on to the link's queue (issue 31): a host's reader thread
    /// that happens to hold it must not be kept from reading its own host by another's flood.
    func leaveContext() {
        var batch: [Work] = []
        var rounds = 0
        while true {
            if rounds == Self.roundsPerThread {
                // Still running: the queue's thread takes over the loop, with the context.
                queue.async { [self] in leaveContext() }
                return
            }
            rounds += 1
            let more = live.withLock { q -> Bool in
                if q.work.isEmpty {
                    running.store(false, ordering: .releasing)
                    // The buffer back as the spare (it and `work` swap: no allocation per batch).
                    if batch.capacity > q.spare.capacity { swap(&q.spare, &batch) }
                    return false
                }
                if batch.capacity == 0 { swap(&batch, &q.spare) }
                swap(&batch, &q.work)
                return true
            }
            guard more else { return }
            for w in batch { w.run() }
            batch.removeAll(keepingCapacity: true)
        }
    }

    /// Rounds of queued work one thread runs before it hands the context on.
    static let roundsPerThread = 4

    /// Runs `work` on the link's context after `seconds`.
    func schedule(after seconds: Double, _ work: @escaping @Sendable () -> Void) {
        switch mode {
        case .live: queue.asyncAfter(deadline: .now() + max(0, seconds)) { [self] in runLive(work) }
        case .manual: enqueue(after: max(0, seconds), work)
        }
    }

    private func enqueue(after seconds: Double, _ work: @escaping @Sendable () -> Void) {
        lock.lock()
        sequence &+= 1
        let item = Pending(due: clock + seconds, seq: sequence, work: work)
        // Insert keeping (due, seq) order; most inserts land at the end.
        var i = pending.count
        while i > 0 && pending[i - 1].due > item.due { i -= 1 }
        pending.insert(item, at: i)
        lock.unlock()
    }

    /// Manual mode: runs every queued item due now (including what they queue for now).
    /// Returns the number of items run. Stops after `limit` items (a runaway loop is a bug).
    @discardableResult
    public func runUntilIdle(limit: Int = 1_000_000) -> Int {
        precondition(mode == .manual, "runUntilIdle() is for manual-mode links")
        var ran = 0
        while ran < limit {
            lock.lock()
            guard let first = pending.first, first.due <= clock else { lock.unlock(); break }
            pending.removeFirst()
            lock.unlock()
            first.work()
            ran += 1
        }
        return ran
    }

    /// Manual mode: moves the virtual clock forward by `seconds`, running timers in order.
    public func advance(by seconds: Double) {
        precondition(mode == .manual, "advance(by:) is for manual-mode links")
        lock.lock()
        let target = clock + seconds
        lock.unlock()
        while true {
            runUntilIdle()
            lock.lock()
            guard let next = pending.first, next.due <= target else {
                clock = target
                lock.unlock()
                break
            }
            clock = max(clock, next.due)
            lock.unlock()
        }
        runUntilIdle()
    }

    /// Live mode: waits until work queued so far has run (for tests and shutdown).
    public func sync() {
        if mode == .live {
            let done = DispatchSemaphore(value: 0)
            runLive { done.signal() }
            done.wait()
        } else {
            runUntilIdle()
        }
    }

    // MARK: - Fault injection

    /// Drops the `n`th ACL packet (1-based, counted over every host → link packet from now on
    /// since the link was created). The sender still gets Number Of Completed Packets.
    public func dropACLPacket(number n: Int) {
        perform { [self] in dropACL.insert(n) }
    }

    /// Delays delivery of the `n`th ACL packet by `seconds`.
    public func delayACLPacket(number n: Int, by seconds: Double) {
        perform { [self] in delayACL[n] = seconds }
    }

    /// Number of ACL packets hosts have handed to the link so far. Any thread.
    public var aclPacketCount: Int { aclPackets.load(ordering: .acquiring) }

    /// Link context: counts one more ACL packet from a host; returns its 1-based number.
    func countACLPacket() -> Int {
        aclPackets.add(1, ordering: .acquiringAndReleasing).newValue
    }

    /// Breaks the connection `handle` of `controller` as a radio loss would: both hosts get
    /// Disconnection Complete with `reason` (Connection Timeout, 0x08, by default).
    public func dropConnection(_ controller: VirtualController, handle: UInt16, reason: HCIStatus = .connectionTimeout) {
        perform {
            guard let conn = controller.connections[handle] else { return }
            conn.terminate(reasonForA: reason, reasonForB: reason)
        }
    }

    /// Link context: makes sure every controller reports its completed packets within
    /// `VirtualController.completionReportInterval`.
    func scheduleCompletionReports() {
        guard !completionReportScheduled else { return }
        completionReportScheduled = true
        schedule(after: VirtualController.completionReportInterval) { [self] in
            completionReportScheduled = false
            for c in controllers { c.reportCompletions() }
        }
    }

    // MARK: - Advertising events

    /// Makes sure advertising events are being delivered while anyone scans or initiates.
    func ensureTicking() {
        guard airtime == nil, !tickScheduled else { return }
        tickScheduled = true
        schedule(after: advertisingInterval) { [self] in tick() }
    }

    private func tick() {
        tickScheduled = false
        let all = controllers
        var busy = false
        for c in all where c.isScanning || c.initiating != nil {
            busy = true
            c.advertisingEvent(from: all)
        }
        if busy { ensureTicking() }
    }

    /// Finds a connectable advertiser at `address`; tries to connect `initiator` to it.
    /// (In airtime mode initiators connect at the advertiser's advertising events instead.)
    func tryConnect(_ initiator: VirtualController) {
        guard airtime == nil, let target = initiator.initiating else { return }
        for c in controllers where c !== initiator {
            if let adv = c.currentAdvertisements().first(where: { $0.connectable && initiator.initiatorAccepts($0, target)
                && c.advertiser($0, acceptsConnectionFrom: target.ownAddress) }) {
                let event = airAdvertise(adv, at: nil)
                if let conn = VirtualConnection.establish(central: initiator, peripheral: c, via: adv) {
                    airConnect(event, initiator: target.ownAddress, conn: conn)
                }
                return
            }
        }
        ensureTicking()
    }
}
