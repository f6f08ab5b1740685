import Testing
import HCI
@testable import VirtualController

/// The airtime model (issue 29) on a manual clock: every expected time comes from the PHY
/// timings of the Core Specification v5.4 (Vol 6 Part A 3.1, Vol 6 Part B 2.1, 2.2, 4.1.1,
/// 4.4.2.2.1, 4.5.2, 4.5.6, 4.5.10), worked out by hand in the comments.
@Suite struct AirtimeTests {
    // MARK: PHY timings

    @Test func packetTimesMatchTheLimitsOfTheSpec() {
        // Vol 6 Part B 4.5.10: connMaxTxTime for 27 octets (with MIC) is 328 µs on LE 1M and
        // 2704 µs on LE Coded; for 251 octets 2120 µs uncoded (1M) and 17040 µs coded (S=8).
        #expect(abs(Airtime.packetTime(payload: 27, phy: .le1M, encrypted: true) - 328e-6) < 1e-9)
        #expect(abs(Airtime.packetTime(payload: 251, phy: .le1M, encrypted: true) - 2120e-6) < 1e-9)
        #expect(abs(Airtime.packetTime(payload: 27, phy: .codedS8, encrypted: true) - 2704e-6) < 1e-9)
        #expect(abs(Airtime.packetTime(payload: 251, phy: .codedS8, encrypted: true) - 17040e-6) < 1e-9)
        // LE 2M (Vol 6 Part B 2.1: 2-octet preamble; Vol 6 Part A 3.1: 2 Msym/s): 251 octets,
        // no MIC: (2 + 4 + 2 + 251 + 3) octets × 4 µs = 1048 µs; an empty PDU (2 + 4 + 2 + 3) × 4 = 44 µs.
        #expect(abs(Airtime.packetTime(payload: 251, phy: .le2M) - 1048e-6) < 1e-9)
        #expect(abs(Airtime.packetTime(payload: 0, phy: .le2M) - 44e-6) < 1e-9)
        // An empty PDU has no MIC even on an encrypted link (Vol 6 Part B 2.4): 1M, 10 octets × 8 µs.
        #expect(abs(Airtime.packetTime(payload: 0, phy: .le1M, encrypted: true) - 80e-6) < 1e-9)
        // Coded S=2 (Vol 6 Part B 2.2): 80 µs preamble + 296 µs FEC block 1 + (8 × (2 + 27 + 3) + 3)
        // bits × 2 µs = 376 + 518 = 894 µs.
        #expect(abs(Airtime.packetTime(payload: 27, phy: .codedS2) - 894e-6) < 1e-9)
    }

    @Test func pdusPerEventFollowTheExchangeTime() {
        // One exchange = data PDU + T_IFS + empty PDU + T_IFS (Vol 6 Part B 4.1.1: T_IFS 150 µs).
        // 2M/251: 1048 + 150 + 44 + 150 = 1392 µs: 5 in a 7.5 ms event (6 × 1392 = 8352 µs);
        // 1 / 1392 µs = 718 per second, the figure.
        #expect(Airtime.pdusPerEvent(octets: 251, phy: .le2M, eventLength: 7.5e-3) == 5)
        #expect(abs(Airtime.throughputLimit(octets: 251, phy: .le2M, interval: 7.5e-3) - 5 / 7.5e-3) < 1e-6)
        // 1M/27: 296 + 150 + 80 + 150 = 676 µs: 11 in 7.5 ms (11 × 676 = 7436); 1M/251: 2088 +
        // 380 = 2468 µs: 3; 2M/27: 152 + 150 + 44 + 150 = 496 µs: 15 (15 × 496 = 7440).
        #expect(Airtime.pdusPerEvent(octets: 27, phy: .le1M, eventLength: 7.5e-3) == 11)
        #expect(Airtime.pdusPerEvent(octets: 251, phy: .le1M, eventLength: 7.5e-3) == 3)
        #expect(Airtime.pdusPerEvent(octets: 27, phy: .le2M, eventLength: 7.5e-3) == 15)
        // An event too short for one exchange still has the one at its anchor point.
        #expect(Airtime.pdusPerEvent(octets: 251, phy: .codedS8, eventLength: 7.5e-3) == 1)
    }

    // MARK: Connection events

    /// Streams packets of `length` octets one way for `seconds` and returns the packets the
    /// peripheral's host got per event (grouped by arrival time), after the first event.
    func stream(phy: UInt8, octets: UInt16, length: Int, interval: UInt16 = 6, seconds: Double = 1) throws -> [Int] {
        let rig = AirtimeRig(aclBuffers: 64)
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p, interval: interval)
        if octets != 27 { #expect(rig.run(c, LESetDataLength(connectionHandle: h.central, txOctets: octets)) == .success) }
        if phy != 1 { #expect(rig.run(c, LESetPHY(connectionHandle: h.central, txPHYs: phy, rxPHYs: phy)) == .success) }
        _ = rig.acl(p)
        var arrivals: [Double] = []
        var t = 0.0
        while t < seconds {
            c.fill(handle: h.central, length: length)
            rig.link.advance(by: 0.0005)
            t += 0.0005
            arrivals += rig.acl(p).map(\.time)
        }
        var perEvent: [Double: Int] = [:]
        for a in arrivals { perEvent[a, default: 0] += 1 }
        return perEvent.keys.sorted().dropFirst().map { perEvent[$0]! }
    }

    @Test(arguments: [(UInt8(1), UInt16(27), 11), (1, 251, 3), (2, 27, 15), (2, 251, 5)])
    func aFullLinkCarriesThePDUsPerEventOfItsPHYAndDataLength(phy: UInt8, octets: UInt16, expected: Int) throws {
        // Expected per 7.5 ms event, from the exchange times above (pdusPerEventFollowTheExchangeTime).
        let perEvent = try stream(phy: phy, octets: octets, length: Int(octets))
        #expect(perEvent.count > 100, "\(perEvent.count) events in 1 s at 7.5 ms")
        #expect(perEvent.dropLast().allSatisfy { $0 == expected }, "\(perEvent.prefix(20))")
    }

    @Test func eventsFollowTheIntervalFromTheAnchor() throws {
        // One packet now and then: each arrives at anchor + one exchange (296 + 150 + 80 + 150
        // = 676 µs on 1M/27), on the grid of 30 ms intervals (24 × 1.25 ms) from the first anchor.
        let rig = AirtimeRig()
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p, interval: 24)
        var times: [Double] = []
        for _ in 0..<5 {
            c.fill(handle: h.central, length: 27, limit: 1)
            rig.link.advance(by: 0.047)
            times += rig.acl(p).map(\.time)
        }
        #expect(times.count == 5)
        let exchange = 676e-6
        let anchor0 = times[0] - exchange
        for t in times {
            let k = ((t - exchange - anchor0) / 0.030).rounded()
            #expect(abs(t - exchange - anchor0 - k * 0.030) < 1e-9, "\(t) off the 30 ms grid from \(anchor0)")
        }
        // No arrival before the first anchor can be: the transmit window delay (1.25 ms,
        // Vol 6 Part B 4.5.3) after the connection.
        #expect(anchor0 >= h.time + 1.25e-3 - 1e-9)
    }

    @Test func emptyPDUsAndTheMDBitCloseTheEvent() throws {
        // 1M/27. Event 1: one packet from the central; the peripheral answers with an empty PDU
        // and neither sets MD: one exchange, 296 + 150 + 80 + 150 = 676 µs. Event 2: four
        // packets each way: MD set until the last, four exchanges of 296 + 150 + 296 + 150 =
        // 892 µs each (Vol 6 Part B 4.5.6). Both arrive at their event's end.
        let rig = AirtimeRig()
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p, interval: 24)
        c.fill(handle: h.central, length: 27, limit: 1)
        rig.link.advance(by: 0.031)
        let first = try #require(rig.acl(p).first).time
        c.fill(handle: h.central, length: 27, limit: 4)
        p.fill(handle: h.peripheral, length: 27, limit: 4)
        rig.link.advance(by: 0.031)
        let atP = rig.acl(p), atC = rig.acl(c)
        #expect(atP.count == 4 && atC.count == 4)
        let second = try #require(atP.first).time
        #expect(Set(atP.map(\.time) + atC.map(\.time)).count == 1, "one event carried all eight")
        let anchor1 = first - 676e-6, anchor2 = second - 4 * 892e-6
        let k = ((anchor2 - anchor1) / 0.030).rounded()
        #expect(k >= 1 && abs(anchor2 - anchor1 - k * 0.030) < 1e-9, "second event at \(anchor2), first at \(anchor1)")
    }

    @Test func buffersComeBackWhenThePeerHasThePackets() throws {
        // A buffer is the host's again once the packet is sent (Vol 4 Part E 4.1.1, 7.7.19):
        // over the air, at the end of the event that carried it, not when it was queued.
        let rig = AirtimeRig(aclBuffers: 4)
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p, interval: 24)
        _ = c.take()
        #expect(c.fill(handle: h.central, length: 10) == 4)
        rig.link.runUntilIdle()
        #expect(!c.events().contains { $0.event is NumberOfCompletedPackets }, "completed before any connection event")
        rig.link.advance(by: 0.031)
        let nocp = c.events().compactMap { $0.event as? NumberOfCompletedPackets }
        #expect(nocp.flatMap(\.entries).reduce(0) { $0 + Int($1.numCompletedPackets) } == 4)
        #expect(rig.acl(p).count == 4)
    }

    @Test func aLongPacketTakesOnePDUPerDataLength() throws {
        // A 251-octet ACL packet with the default data length of 27 octets goes as 10 PDUs
        // (9 × 27 + 8; Vol 6 Part B 4.5.10). One per 30 ms event, it arrives at anchor + 9
        // exchanges of 676 µs and one of 144 + 150 + 80 + 150 = 524 µs = 6608 µs.
        let rig = AirtimeRig()
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p, interval: 24)
        c.fill(handle: h.central, length: 27, limit: 1)
        rig.link.advance(by: 0.031)
        let reference = try #require(rig.acl(p).first).time - 676e-6
        c.fill(handle: h.central, length: 251, limit: 1)
        rig.link.advance(by: 0.031)
        let long = try #require(rig.acl(p).first)
        #expect(long.length == 251)
        let anchor = long.time - 6608e-6
        let k = ((anchor - reference) / 0.030).rounded()
        #expect(k >= 1 && abs(anchor - reference - k * 0.030) < 1e-9, "arrived at \(long.time)")
    }

    @Test func theEventLengthLimitsThePDUs() throws {
        // A controller that schedules 2.5 ms events: 3 exchanges of 676 µs on 1M/27 (4 × 676 =
        // 2704 µs is over), at any connection interval.
        let rig = AirtimeRig(aclBuffers: 64, configuration: .init(maxEventLength: 2.5e-3))
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p, interval: 24)
        var counts: [Double: Int] = [:]
        for _ in 0..<40 {
            c.fill(handle: h.central, length: 27)
            rig.link.advance(by: 0.005)
            for a in rig.acl(p) { counts[a.time, default: 0] += 1 }
        }
        #expect(counts.count > 4)
        #expect(counts.values.allSatisfy { $0 == 3 }, "\(counts.values.sorted())")
    }

    // MARK: One radio per controller

    @Test func linksOfAControllerShareItsRadio() throws {
        // A central with two peripherals, both links full at 7.5 ms on 1M/27: events of the two
        // cannot overlap on the central's one radio, so together they carry at most what one
        // link can (11 per 7.5 ms, 1466.7 per second), and each gets a share.
        let rig = AirtimeRig(controllers: 3, aclBuffers: 64)
        let c = rig.hosts[0]
        let h1 = try rig.connect(c, rig.hosts[1])
        let h2 = try rig.connect(c, rig.hosts[2])
        _ = rig.acl(rig.hosts[1]); _ = rig.acl(rig.hosts[2])
        var n1 = 0, n2 = 0
        for _ in 0..<2000 {
            c.fill(handle: h1.central, length: 27, limit: max(0, c.credits / 2))
            c.fill(handle: h2.central, length: 27)
            rig.link.advance(by: 0.0005)
            n1 += rig.acl(rig.hosts[1]).count
            n2 += rig.acl(rig.hosts[2]).count
        }
        let limit = Airtime.throughputLimit(octets: 27, phy: .le1M, interval: 7.5e-3)
        #expect(Double(n1 + n2) <= limit * 1.0 + 11, "\(n1) + \(n2) in 1 s, one radio's limit \(limit)")
        #expect(n1 > 100 && n2 > 100, "\(n1), \(n2)")
    }

    @Test func anAdvertisingEventTakesTheRadio() throws {
        // A peripheral connected at 7.5 ms and streaming to its central while it advertises
        // (100 ms + advDelay): its link loses events to advertising events, so it carries less
        // than the link's limit (1466.7 per second on 1M/27).
        let rig = AirtimeRig(controllers: 2, aclBuffers: 64)
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p)
        rig.run(p, LESetAdvertisingParameters(advertisingIntervalMin: 0xA0, advertisingIntervalMax: 0xA0, advertisingType: 2))
        rig.run(p, LESetAdvertisingEnable(advertisingEnable: true))
        var n = 0
        for _ in 0..<2000 {
            p.fill(handle: h.peripheral, length: 27)
            rig.link.advance(by: 0.0005)
            n += rig.acl(c).count
        }
        #expect(n > 1000 && Double(n) < Airtime.throughputLimit(octets: 27, phy: .le1M, interval: 7.5e-3) - 11, "\(n) in 1 s")
    }

    // MARK: Advertising events

    @Test func advertisingEventsComeAtTheIntervalPlusAdvDelay() throws {
        // T_advEvent = advInterval + advDelay, advDelay 0-10 ms pseudo-random (Vol 6 Part B
        // 4.4.2.2.1): a 100 ms interval (0x00A0 × 0.625 ms) gives gaps of 100-110 ms, not all equal.
        let rig = AirtimeRig()
        let (s, a) = (rig.hosts[0], rig.hosts[1])
        rig.run(a, LESetAdvertisingParameters(advertisingIntervalMin: 0xA0, advertisingIntervalMax: 0xA0, advertisingType: 3))
        rig.run(a, LESetAdvertisingData(advertisingData: [2, 1, 6]))
        rig.run(a, LESetAdvertisingEnable(advertisingEnable: true))
        rig.run(s, LESetScanParameters(leScanType: 0))
        rig.run(s, LESetScanEnable(leScanEnable: true, filterDuplicates: false))
        rig.link.advance(by: 3)
        let reports = s.events().filter { ($0.event as? LEMetaEvent)?.subevent is LEAdvertisingReport }.map(\.time)
        #expect(reports.count >= 27 && reports.count <= 30, "\(reports.count) events in 3 s")
        let gaps = zip(reports.dropFirst(), reports).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= 0.100 - 1e-9 && $0 <= 0.110 + 1e-9 }, "\(gaps)")
        #expect(Set(gaps.map { ($0 * 1e6).rounded() }).count > 5, "advDelay varies")
    }

    // MARK: Supervision timeout

    @Test func aSilentPeerEndsTheLinkAtTheSupervisionTimeout() throws {
        // Vol 6 Part B 4.5.2: nothing received for connSupervisionTimeout (0x002A × 10 ms = 420
        // ms) and the link is lost: Disconnection Complete with Connection Timeout (0x08).
        let rig = AirtimeRig()
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        _ = try rig.connect(c, p, interval: 24)
        rig.link.advance(by: 0.1)
        _ = c.take(); _ = p.take()
        let silentAt = rig.link.now
        p.controller.setRadioOn(false)
        // Last heard at the last anchor before it went silent, at most one interval (30 ms) earlier.
        rig.link.advance(by: 0.420 - 0.031)
        #expect(!c.events().contains { $0.event is DisconnectionComplete }, "lost before the timeout")
        rig.link.advance(by: 0.032)
        for h in [c, p] {
            let d = h.events().compactMap { e in (e.event as? DisconnectionComplete).map { (e.time, $0) } }
            #expect(d.count == 1 && d.first?.1.reason == .connectionTimeout)
            if let t = d.first?.0 { #expect(t - silentAt > 0.420 - 0.030 - 1e-9 && t - silentAt <= 0.420 + 1e-9) }
        }
    }

    @Test func aResetPeerIsLostAtTheSupervisionTimeoutNotAtOnce() throws {
        // A peer reset by its host says nothing on the air: the central learns of it only when
        // the supervision timer runs out (Vol 6 Part B 4.5.2).
        let rig = AirtimeRig()
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p, interval: 24, timeout: 100)
        rig.link.advance(by: 0.1)
        _ = c.take()
        let resetAt = rig.link.now
        p.controller.powerCycle()
        rig.link.advance(by: 0.5)
        #expect(!c.events().contains { $0.event is DisconnectionComplete })
        // What the central sends meanwhile is not acknowledged: its buffers stay in use.
        c.fill(handle: h.central, length: 10, limit: 2)
        rig.link.advance(by: 0.6)
        let events = c.events()
        #expect(!events.contains { $0.event is NumberOfCompletedPackets })
        let d = events.compactMap { e in (e.event as? DisconnectionComplete).map { (e.time, $0) } }
        #expect(d.count == 1 && d.first?.1.connectionHandle == h.central && d.first?.1.reason == .connectionTimeout)
        // Last heard at the last anchor before the reset (30 ms interval): 1 s (100 × 10 ms) after it.
        if let t = d.first?.0 { #expect(t - resetAt > 1.0 - 0.030 - 1e-9 && t - resetAt <= 1.0 + 1e-9, "lost \(t - resetAt) s after the reset") }
    }

    @Test func aPeerBackBeforeTheTimeoutKeepsTheLink() throws {
        let rig = AirtimeRig()
        let (c, p) = (rig.hosts[0], rig.hosts[1])
        let h = try rig.connect(c, p, interval: 24)
        p.controller.setRadioOn(false)
        c.fill(handle: h.central, length: 10, limit: 1)
        rig.link.advance(by: 0.2)
        #expect(rig.acl(p).isEmpty, "delivered while silent")
        p.controller.setRadioOn(true)
        rig.link.advance(by: 0.5)
        #expect(rig.acl(p).count == 1)
        #expect(!c.events().contains { $0.event is DisconnectionComplete })
    }

    @Test func instantModeIsUnchanged() {
        // Without the model a packet is there at once, with no time passing.
        let pair = Pair()
        let (ha, _) = pair.connect()
        pair.a.controller.receive(fromHost: .acl(HCIACLPacket(handle: ha, boundary: .first, data: [1, 2, 3])))
        pair.link.runUntilIdle()
        #expect(pair.b.take().contains { if case .acl(let a) = $0 { return a.data == [1, 2, 3] }; return false })
        #expect(pair.link.now == 0)
    }
}
