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
public final class VirtualLink: Sendable {
    public enum Mode: Sendable { case live, manual }

    public let mode: Mode
    /// The airtime model, or nil for instant mode.
    public let airtime: Airtime.Configuration?
    /// Live mode: the monotonic clock when the link was made (link time 0).
    let startNanoseconds = DispatchTime.now().uptimeNanoseconds
    /// The wall-clock time of link time 0 (the air view's timestamps).
    let startDate = Date()
    /// The air view's sink (VirtualLink+Air.swift), and whether one is set (read per packet
    /// without the lock).
    let airSink = Mutex<AirSink?>(nil)
    let airRecording = Atomic<Bool>(false)
    /// Time between advertising events the link delivers to scanners (real seconds in live
    /// mode, virtual seconds in manual mode). Kept short so scans are quick.
    public let advertisingInterval: Double

    let queue = DispatchQueue(label: "ble-hci.virtual-link")
    /// The executor of every host attached through `InProcessTransport`: one thread for all
    /// the stacks of the link, as Bumble's one asyncio loop. A host sending runs the link's
    /// work inline on that thread, and the packets the link delivers to the other hosts are
    /// jobs queued on it (no wake): a request and its answer never leave the thread.
    public let executor = SerialThreadExecutor(name: "ble-hci vlink")

    /// Every controller's, every connection's and the link's own mutable state, reachable only
    /// through this mutex: link work is `@Sendable (LinkContext) -> Void`, handed the context
    /// by the one thread that runs it, so the compiler sees that nothing else touches it.
    /// Held for a whole batch of work (one acquisition per batch, not per access), by the
    /// thread that took `running` (live mode) or by the caller of `runUntilIdle` (manual mode).
    /// Never re-entered: the work it runs reaches other threads only through `perform`/
    /// `schedule` (queues with their own locks) and through host sinks, which queue the packet
    /// for the host (`InProcessTransport`: a job on the host's executor); a sink that sends
    /// back at once finds the context taken (`running`, or manual mode's queue) and queues its
    /// packet. Lock order: `context` before `manual`, `registry` and `live`, never the reverse.
    let context: Mutex<LinkContext>

    // Manual mode: queued work ordered by (due, seq), and the virtual clock.
    private struct Manual {
        var pending: [Pending] = []
        var sequence: UInt64 = 0
        var clock: Double = 0
    }
    private let manual = Mutex(Manual())
    private struct Pending {
        var due: Double
        var seq: UInt64
        var work: @Sendable (LinkContext) -> Void
    }

    /// The controllers' handles and the log (controller misbehaviour seen from hosts, faults
    /// applied; bounded).
    private struct Registry {
        var controllers: [VirtualController] = []
        var log: [String] = []
        var logHandler: (@Sendable (String) -> Void)?
    }
    private let registry = Mutex(Registry())

    // Live mode: work waiting for the running thread, and whether a thread is running it.
    /// (Closures in a struct: an array of bare closures re-wraps each one appended, an allocation.)
    private struct Work { let run: @Sendable (LinkContext) -> Void }
    private struct LiveQueue {
        var work: [Work] = []
        /// The running thread's spare buffer: it and `work` swap, so a batch allocates nothing.
        var spare: [Work] = []
    }
    /// Its own lock (not `context`): taken twice per packet a host sends.
    private let live = Mutex(LiveQueue())
    /// Whether a thread is running link work. Taken by a compare-exchange, after the taker's
    /// work (if any) is queued; given back under `live`'s lock, only with the queue empty. So
    /// queued work always has a thread to run it: a thread that queued work and failed to take
    /// the flag leaves it to the holder, who looks at the queue again before giving the flag
    /// back (and a holder that already gave it back did so before the work was queued, so the
    /// compare-exchange succeeds). Only its holder locks `context` in live mode, so that lock
    /// is never contended but by `addController`.
    private let running = Atomic<Bool>(false)

    /// Counted on the link context, read from any thread (`aclPacketCount`).
    private let aclPackets = Atomic<Int>(0)

    /// Called with each log line, on the thread that logs it. Set from any thread.
    public var logHandler: (@Sendable (String) -> Void)? {
        get { registry.withLock { $0.logHandler } }
        set { registry.withLock { $0.logHandler = newValue } }
    }

    /// `advertisingInterval` is instant mode's; in airtime mode each advertiser has its own.
    public init(mode: Mode = .live, advertisingInterval: Double = 0.02, airtime: Airtime.Configuration? = nil) {
        self.mode = mode
        self.advertisingInterval = advertisingInterval
        self.airtime = airtime
        context = Mutex(LinkContext(mode: mode, airtime: airtime, advertisingInterval: advertisingInterval))
        context.withLock { $0.link = self }
    }

    /// Adds a controller with the next index; its public address is F0:F1:F2:F3:F4:(index+1).
    /// (Not from inside a host sink: it takes the link context.)
    @discardableResult
    public func addController(aclBuffers: Int = 8, aclDataLength: Int = 27) -> VirtualController {
        context.withLock { ctx in
            let c = registry.withLock { r in
                let c = VirtualController(link: self, index: r.controllers.count, aclBuffers: aclBuffers, aclDataLength: aclDataLength)
                r.controllers.append(c)
                return c
            }
            ctx.controllers.append(ControllerState(controller: c, link: ctx))
            return c
        }
    }

    public var controllers: [VirtualController] { registry.withLock { $0.controllers } }

    /// Virtual time in manual mode (seconds since creation); 0 in live mode.
    public var now: Double { manual.withLock { $0.clock } }

    /// Recent log lines (at most 200).
    public var log: [String] { registry.withLock { $0.log } }

    func note(_ line: String) {
        let handler = registry.withLock { r in
            if r.log.count >= 200 { r.log.removeFirst(r.log.count - 199) }
            r.log.append(line)
            return r.logHandler
        }
        handler?(line)
    }

    // MARK: - Scheduling

    /// Runs `work` on the link's context as soon as possible, after work already queued.
    func perform(_ work: @escaping @Sendable (LinkContext) -> Void) {
        switch mode {
        case .live: runLive(work)
        case .manual: enqueue(after: 0, work)
        }
    }

    /// Live mode: runs `work` on this thread if no thread is running link work (then also
    /// whatever is queued meanwhile, in order), else queues it for that thread.
    private func runLive(_ work: @escaping @Sendable (LinkContext) -> Void) {
        live.withLock { $0.work.append(Work(run: work)) }
        if takeRunning() { runQueued() }
    }

    /// Live mode: if no thread is running link work (so nothing is queued either: the running
    /// thread runs the queue empty before it lets go), runs `body` on this thread, inline with
    /// no closure queued, then what was queued meanwhile; true then. False in manual mode, or
    /// when another thread is running link work (the caller queues its work instead).
    func withContextIfIdle(_ body: @Sendable (LinkContext) -> Void) -> Bool {
        guard mode == .live, takeRunning() else { return false }
        context.withLock { ctx in
            body(ctx)
            runQueued(ctx)
        }
        return true
    }

    private func takeRunning() -> Bool {
        running.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
    }

    /// Live mode, holding `running`: runs the queued work with the context.
    private func runQueued() { context.withLock { runQueued($0) } }

    /// Live mode, on the link's context: runs the work queued meanwhile (in order, what it
    /// queues included), then lets the context go. A thread runs a few rounds of others' work
    /// at most, then hands the context on to the link's queue (issue 31): a host's reader thread
    /// that happens to hold it must not be kept from reading its own host by another's flood.
    private func runQueued(_ ctx: LinkContext) {
        var batch: [Work] = []
        var rounds = 0
        while true {
            if rounds == Self.roundsPerThread {
                // Still running: the queue's thread takes over the loop, with the context.
                queue.async { [self] in runQueued() }
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
            for w in batch { w.run(ctx) }
            batch.removeAll(keepingCapacity: true)
        }
    }

    /// Rounds of queued work one thread runs before it hands the context on.
    static let roundsPerThread = 4

    /// Runs `work` on the link's context after `seconds`.
    func schedule(after seconds: Double, _ work: @escaping @Sendable (LinkContext) -> Void) {
        switch mode {
        case .live: queue.asyncAfter(deadline: .now() + max(0, seconds)) { [self] in runLive(work) }
        case .manual: enqueue(after: max(0, seconds), work)
        }
    }

    private func enqueue(after seconds: Double, _ work: @escaping @Sendable (LinkContext) -> Void) {
        manual.withLock { m in
            m.sequence &+= 1
            let item = Pending(due: m.clock + seconds, seq: m.sequence, work: work)
            // Insert keeping (due, seq) order; most inserts land at the end.
            var i = m.pending.count
            while i > 0 && m.pending[i - 1].due > item.due { i -= 1 }
            m.pending.insert(item, at: i)
        }
    }

    /// Manual mode: runs every queued item due now (including what they queue for now).
    /// Returns the number of items run. Stops after `limit` items (a runaway loop is a bug).
    @discardableResult
    public func runUntilIdle(limit: Int = 1_000_000) -> Int {
        precondition(mode == .manual, "runUntilIdle() is for manual-mode links")
        return context.withLock { ctx in
            var ran = 0
            while ran < limit {
                let next = manual.withLock { m -> (@Sendable (LinkContext) -> Void)? in
                    guard let first = m.pending.first, first.due <= m.clock else { return nil }
                    m.pending.removeFirst()
                    return first.work
                }
                guard let work = next else { break }
                work(ctx)
                ran += 1
            }
            return ran
        }
    }

    /// Manual mode: moves the virtual clock forward by `seconds`, running timers in order.
    public func advance(by seconds: Double) {
        precondition(mode == .manual, "advance(by:) is for manual-mode links")
        let target = manual.withLock { $0.clock + seconds }
        while true {
            runUntilIdle()
            let more = manual.withLock { m -> Bool in
                guard let next = m.pending.first, next.due <= target else {
                    m.clock = target
                    return false
                }
                m.clock = max(m.clock, next.due)
                return true
            }
            if !more { break }
        }
        runUntilIdle()
    }

    /// Live mode: waits until work queued so far has run (for tests and shutdown).
    public func sync() {
        if mode == .live {
            let done = DispatchSemaphore(value: 0)
            runLive { _ in done.signal() }
            done.wait()
        } else {
            runUntilIdle()
        }
    }

    // MARK: - Fault injection

    /// Drops the `n`th ACL packet (1-based, counted over every host → link packet from now on
    /// since the link was created). The sender still gets Number Of Completed Packets.
    public func dropACLPacket(number n: Int) {
        perform { $0.dropACL.insert(n) }
    }

    /// Delays delivery of the `n`th ACL packet by `seconds`.
    public func delayACLPacket(number n: Int, by seconds: Double) {
        perform { $0.delayACL[n] = seconds }
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
        let index = controller.index
        perform { ctx in
            guard let conn = ctx.controllers[index].connections[handle] else { return }
            conn.terminate(reasonForA: reason, reasonForB: reason)
        }
    }
}

/// The link's mutable state: its own, and each controller's (`controllers`, by index), which
/// holds its connections. Not Sendable: it lives in `VirtualLink.context` and is reached only
/// by link work, which the link hands it to. Work it schedules for later stays in it
/// (`deferred`), so that work may capture controllers and connections: what the link queues is
/// a `@Sendable` ticket naming it.
final class LinkContext {
    /// The link (set once, as the link is made). Strong, as the controllers' references to
    /// it: a link and its controllers live as long as each other, and an unowned reference
    /// would cost an atomic check per use on the packet path.
    var link: VirtualLink!
    let mode: VirtualLink.Mode
    let airtime: Airtime.Configuration?
    let advertisingInterval: Double
    var controllers: [ControllerState] = []
    /// The advDelay draws.
    var advDelayGenerator: SplitMix64
    /// The air view's draws of access addresses, CRCInits and secondary channels (apart from
    /// advDelay's, so recording changes no timing), and the last packet's time.
    var airGenerator: SplitMix64
    var lastAirTime = -1.0
    var tickScheduled = false
    /// One report tick for every controller's completed packets not yet reported (one timer
    /// per interval for the link, not one per controller: 32 links bursting would otherwise
    /// wake a thread per controller per burst).
    private var completionReportScheduled = false
    /// Faults (read for every ACL packet).
    var dropACL: Set<Int> = []
    var delayACL: [Int: Double] = [:]
    /// Work queued by link work for later, by ticket (`perform`, `schedule`).
    private var deferred: [UInt64: () -> Void] = [:]
    private var lastTicket: UInt64 = 0

    init(mode: VirtualLink.Mode, airtime: Airtime.Configuration?, advertisingInterval: Double) {
        self.mode = mode
        self.airtime = airtime
        self.advertisingInterval = advertisingInterval
        advDelayGenerator = SplitMix64(state: airtime?.seed ?? 0)
        airGenerator = SplitMix64(state: (airtime?.seed ?? 0) ^ 0xA1A1)
    }

    func note(_ line: String) { link.note(line) }
    var isRecordingAir: Bool { link.isRecordingAir }
    func countACLPacket() -> Int { link.countACLPacket() }

    /// Runs `work` on the link's context as soon as possible, after work already queued.
    func perform(_ work: @escaping () -> Void) { link.perform(ticket(for: work)) }

    /// Runs `work` on the link's context after `seconds`.
    func schedule(after seconds: Double, _ work: @escaping () -> Void) { link.schedule(after: seconds, ticket(for: work)) }

    /// Keeps `work` here; the ticket the link queues runs it once.
    private func ticket(for work: @escaping () -> Void) -> @Sendable (LinkContext) -> Void {
        lastTicket &+= 1
        let ticket = lastTicket
        deferred[ticket] = work
        return { ctx in ctx.deferred.removeValue(forKey: ticket)?() }
    }

    /// Makes sure every controller reports its completed packets within
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
    func tryConnect(_ initiator: ControllerState) {
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
