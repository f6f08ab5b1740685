import Dispatch
import HCI

// The airtime model of a `VirtualLink` (issue 29): with `VirtualLink.airtime` set, ACL data
// goes over connection events at the connection interval from the link's anchor, as many
// PDUs per event as the PHY's time per PDU, the data length and the event length allow;
// advertisers have advertising events at their interval plus advDelay; each controller has
// one radio, shared by its links and advertising sets; a link whose peer is silent ends at
// its supervision timeout. Without it (instant mode) packets go through at once.
//
// Simplifications, each on the side of the limits computed in `Airtime`: an idle link's
// events (empty PDUs both ways) are not simulated, so they neither take radio time nor cost
// CPU; a packet reaches the peer's host at the end of the event that carried its last PDU;
// the peripheral listens at every anchor (no peripheral latency); scanning takes no radio
// time (a scanner sees an advertising event unless its radio is busy in another event).

/// A controller's radio: link context only.
struct Radio {
    /// The end of the event (connection or advertising) the radio is in, in link time.
    var busyUntil = 0.0
    /// False while the controller is silent (`VirtualController.setRadioOn(false)`).
    var on = true
    /// ACL packets of this controller's host waiting in connection queues: they hold buffers.
    var inFlight = 0
    /// Advertising schedule generation per advertiser (-1 legacy, else the set's handle): an
    /// enable starts a new one, and a pending event of an older one does nothing.
    var advertisingGeneration: [Int: UInt64] = [:]
}

/// One ACL packet on its way over the air.
struct AirPacket {
    /// As the peer's host gets it (the peer's handle).
    let out: HCIACLPacket
    /// The sender's handle (Number Of Completed Packets).
    let sourceHandle: UInt16
    /// Octets not yet sent.
    var remaining: Int
}

/// A FIFO of packets (array and head: no shifting per packet).
struct AirQueue {
    private var items: [AirPacket] = []
    private var head = 0
    var isEmpty: Bool { head == items.count }
    var count: Int { items.count - head }
    var first: AirPacket {
        get { items[head] }
        set { items[head] = newValue }
    }
    mutating func append(_ p: AirPacket) { items.append(p) }
    mutating func removeFirst() {
        head += 1
        if head == items.count { items.removeAll(keepingCapacity: true); head = 0 }
        else if head >= 64 && head * 2 >= items.count { items.removeFirst(head); head = 0 }
    }
    mutating func removeAll() { items.removeAll(); head = 0 }
}

/// A connection's airtime state: link context only.
struct ConnectionAir {
    /// The first anchor point no event has used yet (link time).
    var nextAnchor = 0.0
    /// Whether an event is scheduled at `nextAnchor`.
    var eventScheduled = false
    /// When a packet was last received on the link (supervision, Vol 6 Part B 4.5.2).
    var lastReceived = 0.0
    /// Events lost to another event on a radio since this link's last one: the scheduler
    /// keeps room for the link with more (so links with anchors close together take turns).
    var skipped = 0
    /// Central → peripheral and peripheral → central.
    var toPeripheral = AirQueue()
    var toCentral = AirQueue()
    /// A side reset by its host (it forgot the link without a word on the air): the other side
    /// learns of it at the supervision timeout.
    var centralGone = false
    var peripheralGone = false
    var supervisionArmed = false
    var isIdle: Bool { toPeripheral.isEmpty && toCentral.isEmpty }
}

extension LinkContext {
    // MARK: Time

    /// Link time: the virtual clock in manual mode, monotonic seconds since the link was made
    /// in live mode.
    func currentTime() -> Double {
        switch mode {
        case .manual: return link.now
        case .live: return Double(DispatchTime.now().uptimeNanoseconds &- link.startNanoseconds) / 1e9
        }
    }

    /// Runs `work` on the link's context at link time `time` (at once if it has passed).
    func schedule(at time: Double, _ work: @escaping () -> Void) {
        schedule(after: time - currentTime(), work)
    }

    /// A draw of advDelay, 0–10 ms (Vol 6 Part B 4.4.2.2.1). Link context.
    func drawAdvDelay() -> Double {
        Double.random(in: 0...Airtime.maxAdvDelay, using: &advDelayGenerator)
    }

    // MARK: Connection events

    /// The anchor point of a new link's first event: the transmit window delay after the
    /// CONNECT_IND, plus the offset the central chooses (Vol 6 Part B 4.5.3: transmitWindowOffset)
    /// so that the anchor lies in the middle of the widest gap between the anchors of the
    /// links the two controllers already have.
    func firstAnchor(for conn: VirtualConnection, connectIndEnd: Double) -> Double {
        let base = connectIndEnd + Airtime.transmitWindowDelay
        let interval = conn.intervalSeconds
        var phases: [Double] = []
        for c in [conn.central, conn.peripheral] {
            for other in c.connections.values where other !== conn && other.alive {
                let a = other.anchor(atOrAfter: base)
                phases.append((a - base).truncatingRemainder(dividingBy: interval))
            }
        }
        guard !phases.isEmpty else { return base }
        phases.sort()
        var bestStart = phases[phases.count - 1], bestGap = phases[0] + interval - phases[phases.count - 1]
        for i in 1..<phases.count where phases[i] - phases[i - 1] > bestGap {
            bestGap = phases[i] - phases[i - 1]
            bestStart = phases[i - 1]
        }
        return base + (bestStart + bestGap / 2).truncatingRemainder(dividingBy: interval)
    }

    /// Makes sure `conn` has an event at its next anchor point when it has data to send.
    func wake(_ conn: VirtualConnection) {
        guard conn.alive, !conn.air.eventScheduled, !conn.air.isIdle, !conn.isSilent else { return }
        let anchor = conn.anchor(atOrAfter: currentTime())
        conn.air.nextAnchor = anchor
        conn.air.eventScheduled = true
        schedule(at: anchor) { [self] in connectionEvent(conn, at: anchor) }
    }

    /// One connection event of `conn` at anchor point `anchor` (Vol 6 Part B 4.5.1, 4.5.6):
    /// the central and the peripheral take turns, one PDU each (data, or empty when a side has
    /// none), T_IFS apart; the event goes on while either side has more data (the MD bit) and
    /// the next exchange ends within the event length and before the next event on either
    /// controller's radio.
    func connectionEvent(_ conn: VirtualConnection, at anchor: Double) {
        conn.air.eventScheduled = false
        guard conn.alive else { return }
        let interval = conn.intervalSeconds
        conn.air.nextAnchor = anchor + interval
        if conn.isSilent { armSupervision(conn); return }
        let central = conn.central, peripheral = conn.peripheral
        let phy = conn.phy
        let encrypted = conn.encrypted
        let first = Airtime.exchangeTime(central: conn.nextPDUOctets(toPeripheral: true),
                                         peripheral: conn.nextPDUOctets(toPeripheral: false), phy: phy, encrypted: encrypted)
        // The radios are in another event: this one is lost (the link has priority next time).
        guard central.radio.busyUntil <= anchor + 1e-9, peripheral.radio.busyUntil <= anchor + 1e-9 else {
            return skip(conn)
        }
        let eventEnd = anchor + min(interval, airtime?.maxEventLength ?? interval)
        var end = min(eventEnd, nextOtherAnchor(conn, after: anchor, priorityOver: nil))
        if anchor + first > end + 1e-9 {
            end = min(eventEnd, nextOtherAnchor(conn, after: anchor, priorityOver: conn.air.skipped))
            if anchor + first > end + 1e-9 { return skip(conn) }
        }
        conn.air.skipped = 0
        airConnectionEvent(conn, at: anchor)
        var t = anchor
        var exchanges = 0
        var toPeripheral: [HCIACLPacket] = []
        var toCentral: [HCIACLPacket] = []
        var completedByCentral: [UInt16] = []
        var completedByPeripheral: [UInt16] = []
        repeat {
            let c = conn.nextPDUOctets(toPeripheral: true), p = conn.nextPDUOctets(toPeripheral: false)
            let x = Airtime.exchangeTime(central: c, peripheral: p, phy: phy, encrypted: encrypted)
            if exchanges > 0 && t + x > end + 1e-9 { break }
            airExchangePDU(conn, toPeripheral: true, at: t)
            airExchangePDU(conn, toPeripheral: false, at: t + Airtime.packetTime(payload: c, phy: phy, encrypted: encrypted) + Airtime.tIFS)
            t += x
            exchanges += 1
            if let done = conn.sendPDU(toPeripheral: true) { toPeripheral.append(done.out); completedByCentral.append(done.sourceHandle) }
            if let done = conn.sendPDU(toPeripheral: false) { toCentral.append(done.out); completedByPeripheral.append(done.sourceHandle) }
        } while !conn.air.isIdle
        central.radio.busyUntil = t
        peripheral.radio.busyUntil = t
        conn.air.lastReceived = t
        // What the event carried reaches the hosts at its end.
        schedule(at: t) { [toPeripheral, toCentral, completedByCentral, completedByPeripheral] in
            guard conn.alive else { return }
            central.completed(completedByCentral)
            peripheral.completed(completedByPeripheral)
            for out in toPeripheral { peripheral.receiveFromAir(out, on: conn) }
            for out in toCentral { central.receiveFromAir(out, on: conn) }
        }
        if !conn.air.isIdle {
            conn.air.eventScheduled = true
            let next = conn.air.nextAnchor
            schedule(at: next) { [self] in connectionEvent(conn, at: next) }
        }
    }

    private func skip(_ conn: VirtualConnection) {
        conn.air.skipped += 1
        conn.air.eventScheduled = true
        let next = conn.air.nextAnchor
        schedule(at: next) { [self] in connectionEvent(conn, at: next) }
    }

    /// The earliest scheduled event, at or after `time`, of another link of `conn`'s
    /// controllers (only of links that have lost more events than `priorityOver`, if given).
    private func nextOtherAnchor(_ conn: VirtualConnection, after time: Double, priorityOver: Int?) -> Double {
        var earliest = Double.infinity
        for c in [conn.central, conn.peripheral] {
            for other in c.connections.values where other !== conn && other.air.eventScheduled {
                if let p = priorityOver, other.air.skipped <= p { continue }
                if other.air.nextAnchor >= time - 1e-9 { earliest = min(earliest, other.air.nextAnchor) }
            }
        }
        return earliest
    }

    // MARK: Supervision

    /// A silent link ends when nothing has been received for connSupervisionTimeout (Vol 6
    /// Part B 4.5.2): both hosts (those still attached) get Disconnection Complete with
    /// Connection Timeout, unless the link has come back by then.
    func armSupervision(_ conn: VirtualConnection) {
        guard conn.alive, !conn.air.supervisionArmed else { return }
        conn.air.supervisionArmed = true
        let now = currentTime()
        // An idle link exchanges empty PDUs at every anchor until now: it was last heard at the
        // last one.
        if conn.air.isIdle {
            conn.air.lastReceived = max(conn.air.lastReceived, conn.anchor(atOrAfter: now) - conn.intervalSeconds)
        }
        let deadline = conn.air.lastReceived + Double(conn.timeout) * 0.01
        schedule(at: deadline) { [self] in
            conn.air.supervisionArmed = false
            guard conn.alive else { return }
            guard conn.isSilent else { wake(conn); return }
            note("controllers \(conn.central.index)/\(conn.peripheral.index): nothing received for the supervision timeout (\(conn.timeout * 10) ms): link lost")
            conn.superviseTimeout()
        }
    }

    // MARK: Advertising events

    /// Advertiser `key` of `c` (-1 legacy, else a set's handle) has been enabled: its
    /// advertising events start within advDelay.
    func advertisingEnabled(_ c: ControllerState, key: Int) {
        let generation = (c.radio.advertisingGeneration[key] ?? 0) &+ 1
        c.radio.advertisingGeneration[key] = generation
        let first = currentTime() + drawAdvDelay()
        schedule(at: first) { [self] in advertisingEvent(c, key: key, generation: generation, at: first) }
    }

    /// One advertising event (Vol 6 Part B 4.4.2): scanners whose radios are free see it, an
    /// initiator looking for it connects; the next follows advInterval + advDelay later
    /// (4.4.2.2.1; high duty cycle directed advertising has no advDelay, 4.4.2.4.3).
    func advertisingEvent(_ c: ControllerState, key: Int, generation: UInt64, at time: Double) {
        guard c.radio.advertisingGeneration[key] == generation, let advertiser = c.advertiser(key: key) else { return }
        let adv = advertiser.advertisement
        if c.radio.busyUntil > time + 1e-9 {
            // In another event: the advertising event waits for the radio.
            let later = c.radio.busyUntil
            schedule(at: later) { [self] in advertisingEvent(c, key: key, generation: generation, at: later) }
            return
        }
        if c.radio.on {
            var end = time + Airtime.advertisingEventTime(dataOctets: adv.data.count, scanResponseOctets: nil,
                                                          connectable: adv.connectable, channels: advertiser.channels)
            var air = airAdvertise(adv, at: time)
            for other in controllers where other !== c && other.radio.on && other.radio.busyUntil <= time + 1e-9 {
                if let target = other.initiating, adv.connectable, other.initiatorAccepts(adv, target),
                   c.advertiser(adv, acceptsConnectionFrom: target.ownAddress),
                   let conn = VirtualConnection.establish(central: other, peripheral: c, via: adv) {
                    // The CONNECT_IND on the first channel ends the advertising event (Vol 6
                    // Part B 4.4.2.4): ADV_IND, T_IFS, CONNECT_IND (34 octets).
                    end = time + Airtime.packetTime(payload: 6 + min(adv.data.count, 31), phy: .le1M) + Airtime.tIFS
                        + Airtime.packetTime(payload: 34, phy: .le1M)
                    // The model times every event as a legacy one; the air view writes an extended
                    // event's AUX chain, which ends later: the first anchor follows what it wrote.
                    if let air { end = max(end, air.connectionRequestEnd) }
                    other.radio.busyUntil = max(other.radio.busyUntil, end)
                    conn.air.nextAnchor = firstAnchor(for: conn, connectIndEnd: end)
                    conn.air.lastReceived = conn.air.nextAnchor
                    airConnect(air, initiator: target.ownAddress, conn: conn)
                    break
                }
                if other.isScanning {
                    if other.see(adv, from: c) {
                        end += Airtime.packetTime(payload: 6 + min(adv.scanResponse.count, 31), phy: .le1M) + Airtime.tIFS
                        airScan(&air, scanner: other.ownAddress(other.scanOwnAddressType).address)
                    }
                }
            }
            c.radio.busyUntil = max(c.radio.busyUntil, end)
        }
        guard c.advertiser(key: key) != nil else { return }  // connected: advertising stopped
        let next = time + advertiser.interval + (advertiser.highDuty ? 0 : drawAdvDelay())
        schedule(at: next) { [self] in advertisingEvent(c, key: key, generation: generation, at: next) }
    }
}

extension VirtualConnection {
    var intervalSeconds: Double { Double(interval) * 1.25e-3 }
    /// The PHY both directions use (the virtual controller keeps them equal).
    var phy: Airtime.PHY { Airtime.PHY(hci: txPHY) ?? .le1M }
    /// Whether nothing can be exchanged: a side's radio is off or its controller was reset.
    var isSilent: Bool { air.centralGone || air.peripheralGone || !central.radio.on || !peripheral.radio.on }

    /// The first anchor point at or after `time` of this link's schedule.
    func anchor(atOrAfter time: Double) -> Double {
        let base = air.nextAnchor
        guard time > base + 1e-9 else { return base }
        let interval = intervalSeconds
        return base + ((time - base) / interval - 1e-9).rounded(.up) * interval
    }

    /// Octets of the next PDU one way (0: an empty PDU).
    func nextPDUOctets(toPeripheral: Bool) -> Int {
        let q = toPeripheral ? air.toPeripheral : air.toCentral
        guard !q.isEmpty else { return 0 }
        return min(q.first.remaining, Int(toPeripheral ? centralTxOctets : peripheralTxOctets))
    }

    /// Sends the next PDU one way; returns the packet when it was its last.
    func sendPDU(toPeripheral: Bool) -> AirPacket? {
        let octets = Int(toPeripheral ? centralTxOctets : peripheralTxOctets)
        func send(_ q: inout AirQueue) -> AirPacket? {
            guard !q.isEmpty else { return nil }
            q.first.remaining -= min(q.first.remaining, octets)
            guard q.first.remaining == 0 else { return nil }
            let p = q.first
            q.removeFirst()
            return p
        }
        return toPeripheral ? send(&air.toPeripheral) : send(&air.toCentral)
    }

    /// A packet `from` sends on this link: queued for the next connection event.
    func enqueue(_ p: HCIACLPacket, out: HCIACLPacket, from c: ControllerState) {
        let packet = AirPacket(out: out, sourceHandle: p.handle, remaining: p.data.count)
        if c === central { air.toPeripheral.append(packet) } else { air.toCentral.append(packet) }
        c.radio.inFlight += 1
        c.link.wake(self)
    }

    /// Drops what is still queued on the air (the link ended, or `c` was reset).
    func dropAir(of c: ControllerState?) {
        if c == nil || c === central {
            if !air.centralGone { central.radio.inFlight -= air.toPeripheral.count }
            air.toPeripheral.removeAll()
        }
        if c == nil || c === peripheral {
            if !air.peripheralGone { peripheral.radio.inFlight -= air.toCentral.count }
            air.toCentral.removeAll()
        }
    }
}

extension ControllerState {
    /// Advertiser `key` (-1 legacy, else a set's handle) if enabled: what it advertises, its
    /// advertising interval (the minimum asked for), whether it is high duty cycle directed,
    /// and how many primary channels it uses.
    struct Advertiser {
        var advertisement: Advertisement
        var interval: Double
        var highDuty: Bool
        var channels: Int
    }

    func advertiser(key: Int) -> Advertiser? {
        if key < 0 {
            guard advEnabled, let adv = currentAdvertisements().first(where: { $0.setHandle == nil }) else { return nil }
            let highDuty = advParams.advertisingType == 1
            // High duty cycle directed: an event every 3.75 ms at most (Vol 6 Part B 4.4.2.4.3).
            let interval = highDuty ? 3.75e-3 : Double(advParams.advertisingIntervalMin) * 0.625e-3
            return Advertiser(advertisement: adv, interval: interval, highDuty: highDuty,
                              channels: (advParams.advertisingChannelMap & 0x07).nonzeroBitCount)
        }
        guard let set = sets[UInt8(key)], set.enabled,
              let adv = currentAdvertisements().first(where: { $0.setHandle == UInt8(key) }) else { return nil }
        let highDuty = set.params.advertisingEventProperties.contains(.highDutyCycleDirected)
        let interval = highDuty ? 3.75e-3 : Double(set.params.primaryAdvertisingIntervalMin) * 0.625e-3
        return Advertiser(advertisement: adv, interval: interval, highDuty: highDuty,
                          channels: (set.params.primaryAdvertisingChannelMap & 0x07).nonzeroBitCount)
    }

    /// Airtime mode: packets `handles` were acknowledged by the peer: their buffers are
    /// counted for Number Of Completed Packets.
    func completed(_ handles: [UInt16]) {
        guard !handles.isEmpty else { return }
        radio.inFlight -= handles.count
        for h in handles { countCompleted(handle: h) }
        completedPacketsSent()
    }
}

extension VirtualConnection {
    /// The supervision timeout ended the link: the sides still attached are told.
    func superviseTimeout() {
        let tellCentral = !air.centralGone, tellPeripheral = !air.peripheralGone
        guard closeAirtime() else { return }
        if tellCentral { central.send(DisconnectionComplete(connectionHandle: centralHandle, reason: .connectionTimeout)) }
        if tellPeripheral { peripheral.send(DisconnectionComplete(connectionHandle: peripheralHandle, reason: .connectionTimeout)) }
    }
}

extension VirtualController {
    /// Silences (or restores) the controller's radio, as a device out of range: in airtime mode
    /// its links exchange nothing and end at their supervision timeout, its advertising is not
    /// seen and it sees none. (Instant mode has no air: only the supervision timeout applies.)
    public func setRadioOn(_ on: Bool) {
        runOnLink { state in
            state.radio.on = on
            for conn in state.connections.values {
                if on { state.link.wake(conn) } else { state.link.armSupervision(conn) }
            }
        }
    }
}
