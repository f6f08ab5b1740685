// `ble-hci-bench airtime`: the airtime model of the virtual link (issue 29) on a manual clock,
// against the limits computed from the PHY timings (Airtime, Core v5.4 Vol 6 Part B 2.1, 4.1.1,
// 4.5.6). Hosts are HCI-level drivers (no stack: the figures are the model's own): they keep
// every buffer the controller gives them full, and the peripheral's answers a request at once.
import Foundation
import Synchronization
import HCI
import Capture
import VirtualController

/// A host that keeps its controller's ACL buffers full on one handle (refilled as Number Of
/// Completed Packets returns them), or answers each packet it gets with one of `answer` octets.
final class BenchHost: Sendable {
    let controller: VirtualController
    private struct State {
        var handle: UInt16?
        var streamLength = 0
        var answerLength: Int?
        var received = 0
        var receivedAt: [Double] = []
        var recordTimes = false
        var events: [any HCIEventParameters] = []
    }
    private let state = Mutex(State())

    init(_ c: VirtualController) {
        controller = c
        let link = c.link
        c.attachHost { [weak self, c] p in
            guard let self else { return }
            switch p {
            case .event(let e):
                guard let d = try? HCIEvents.decode(e) else { return }
                if let n = d as? NumberOfCompletedPackets {
                    let (handle, length) = self.state.withLock { ($0.handle, $0.streamLength) }
                    guard let handle, length > 0 else { return }
                    let count = n.entries.reduce(0) { $0 + Int($1.numCompletedPackets) }
                    for _ in 0..<count { BenchHost.sendACL(c, handle: handle, length: length) }
                } else {
                    self.state.withLock { $0.events.append(d) }
                }
            case .acl:
                let t = link.now
                let answer = self.state.withLock { s -> (UInt16, Int)? in
                    s.received += 1
                    if s.recordTimes { s.receivedAt.append(t) }
                    guard let h = s.handle, let a = s.answerLength else { return nil }
                    return (h, a)
                }
                if let (h, a) = answer { BenchHost.sendACL(c, handle: h, length: a) }
            default: break
            }
        }
    }

    static func sendACL(_ c: VirtualController, handle: UInt16, length: Int) {
        c.receive(fromHost: .acl(HCIACLPacket(handle: handle, boundary: .first, data: [UInt8](repeating: 0x5A, count: length))))
    }

    func send(_ c: some HCICommand) { controller.receive(fromHost: .command(c.packet)) }
    func takeEvents() -> [any HCIEventParameters] { state.withLock { s in defer { s.events = [] }; return s.events } }
    var received: Int { state.withLock { $0.received } }
    func takeArrivals() -> [Double] { state.withLock { s in defer { s.receivedAt = [] }; return s.receivedAt } }

    /// Streams `length`-octet packets on `handle`: fills every buffer now, refills on completion.
    func stream(handle: UInt16, length: Int) {
        state.withLock { $0.handle = handle; $0.streamLength = length }
        for _ in 0..<controller.aclBuffers { BenchHost.sendACL(controller, handle: handle, length: length) }
    }

    /// Answers every packet it gets on `handle` with one of `length` octets (and records arrival times).
    func answer(handle: UInt16, length: Int?) {
        state.withLock { $0.handle = handle; $0.answerLength = length; $0.recordTimes = true }
    }
}

/// `pairs` central/peripheral pairs on one manual-clock airtime link, connected at `interval`
/// (1.25 ms units), on `phy` (1 or 2) with `octets`-octet PDUs.
func airtimePairs(_ pairs: Int, interval: UInt16, phy: UInt8, octets: UInt16) throws -> (VirtualLink, [(BenchHost, BenchHost, UInt16, UInt16)]) {
    let link = VirtualLink(mode: .manual, airtime: Airtime.Configuration())
    var out: [(BenchHost, BenchHost, UInt16, UInt16)] = []
    for _ in 0..<pairs {
        let c = BenchHost(link.addController(aclBuffers: 64, aclDataLength: 251))
        let p = BenchHost(link.addController(aclBuffers: 64, aclDataLength: 251))
        for h in [c, p] { h.send(SetEventMask(.leHost)) }
        p.send(LESetAdvertisingParameters(advertisingIntervalMin: 0x20, advertisingIntervalMax: 0x20))
        p.send(LESetAdvertisingEnable(advertisingEnable: true))
        c.send(LECreateConnection(peerAddressType: .public, peerAddress: p.controller.publicAddress,
                                  connectionIntervalMin: interval, connectionIntervalMax: interval, supervisionTimeout: 0x0100))
        var ch: UInt16?, ph: UInt16?
        for _ in 0..<100 where ch == nil || ph == nil {
            link.advance(by: 0.001)
            for e in c.takeEvents() { if let cc = (e as? LEMetaEvent)?.subevent as? LEConnectionComplete { ch = cc.connectionHandle } }
            for e in p.takeEvents() { if let cc = (e as? LEMetaEvent)?.subevent as? LEConnectionComplete { ph = cc.connectionHandle } }
        }
        guard let ch, let ph else { throw CaptureError("airtime: pair \(out.count) did not connect") }
        if octets != 27 { c.send(LESetDataLength(connectionHandle: ch, txOctets: octets)) }
        if phy != 1 { c.send(LESetPHY(connectionHandle: ch, txPHYs: phy, rxPHYs: phy)) }
        link.runUntilIdle()
        out.append((c, p, ch, ph))
    }
    return (link, out)
}

func benchAirtime() throws {
    let f = { (x: Double, d: Int) in String(format: "%.\(d)f", x) }
    // 1. Throughput of one full link, one way, per PHY and data length, at 7.5 ms.
    for (phy, octets) in [(UInt8(1), UInt16(27)), (1, 251), (2, 27), (2, 251)] {
        let (link, pairs) = try airtimePairs(1, interval: 6, phy: phy, octets: octets)
        let (c, p, ch, _) = pairs[0]
        c.stream(handle: ch, length: Int(octets))
        link.advance(by: 0.5)  // past the first events
        let n0 = p.received, t0 = link.now
        link.advance(by: 10)
        let rate = Double(p.received - n0) / (link.now - t0)
        let limit = Airtime.throughputLimit(octets: Int(octets), phy: phy == 2 ? .le2M : .le1M, interval: 7.5e-3)
        print("metric=airtime-throughput phy=\(phy == 2 ? "2M" : "1M") octets=\(octets) interval_ms=7.5 pdus_per_s=\(f(rate, 1)) "
              + "limit=\(f(limit, 1)) ratio=\(f(rate / limit, 4)) kbit_per_s=\(f(rate * Double(octets) * 8 / 1000, 1)) "
              + "limit_kbit_per_s=\(f(limit * Double(octets) * 8 / 1000, 1))")
    }
    // 2. Latency of a read: a 7-octet request (L2CAP header + ATT Read Request, Vol 3 Part F
    // 3.4.4.3) at a random moment, answered at once by an 11-octet response (a 4-octet value).
    // Computed: half an interval waiting for the next anchor on average, the answer in the
    // next event one interval later, reaching the central at that event's end (one exchange:
    // empty PDU + T_IFS + the response + T_IFS).
    var rng = SystemRandomNumberGenerator()
    for interval in [UInt16(6), 24] {
        let seconds = Double(interval) * 1.25e-3
        let (link, pairs) = try airtimePairs(1, interval: interval, phy: 1, octets: 27)
        let (c, p, ch, ph) = pairs[0]
        p.answer(handle: ph, length: 11)
        c.answer(handle: ch, length: nil)
        link.advance(by: 0.1)
        _ = c.takeArrivals()
        var latencies: [Double] = []
        for _ in 0..<1000 {
            link.advance(by: Double.random(in: 0..<seconds, using: &rng))
            let sent = link.now
            BenchHost.sendACL(c.controller, handle: ch, length: 7)
            var got: Double?
            for _ in 0..<1000 where got == nil {
                link.advance(by: 0.0005)
                got = c.takeArrivals().first
            }
            guard let got else { throw CaptureError("airtime: no answer to a read") }
            latencies.append(got - sent)
        }
        let mean = latencies.reduce(0, +) / Double(latencies.count)
        let computed = 1.5 * seconds + Airtime.exchangeTime(central: 0, peripheral: 11, phy: .le1M)
        print("metric=airtime-read-latency interval_ms=\(f(seconds * 1000, 1)) reads=\(latencies.count) mean_ms=\(f(mean * 1000, 2)) "
              + "min_ms=\(f(latencies.min()! * 1000, 2)) max_ms=\(f(latencies.max()! * 1000, 2)) computed_mean_ms=\(f(computed * 1000, 2))")
    }
    // 3. CPU per simulated second: 1, 8 and 32 links, every one full (2M/251 at 7.5 ms: 5
    // PDUs per event each way's, 667 packets per second per link).
    for n in [1, 8, 32] {
        let (link, pairs) = try airtimePairs(n, interval: 6, phy: 2, octets: 251)
        for (c, _, ch, _) in pairs { c.stream(handle: ch, length: 251) }
        link.advance(by: 0.5)
        let received0 = pairs.reduce(0) { $0 + $1.1.received }
        let cpu0 = cpuSeconds()
        let simulated = 10.0
        link.advance(by: simulated)
        let cpu = cpuSeconds() - cpu0
        let packets = pairs.reduce(0) { $0 + $1.1.received } - received0
        print("metric=airtime-cpu links=\(n) simulated_s=\(f(simulated, 0)) cpu_ms_per_simulated_s=\(f(cpu / simulated * 1000, 2)) "
              + "packets_per_link_per_s=\(f(Double(packets) / simulated / Double(n), 1))")
    }
}
