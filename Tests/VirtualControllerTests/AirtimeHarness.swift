import Synchronization
import Testing
import HCI
@testable import VirtualController

/// A host of one controller on a manual-clock airtime link: records what it gets with the
/// link time it got it at, and keeps ACL packets flowing as a host does (as many as it has
/// buffers for; Number Of Completed Packets returns them). Plainly Sendable: its state is in
/// a Mutex.
final class AirHost: Sendable {
    let controller: VirtualController
    private struct State {
        var received: [(time: Double, packet: HCIPacket)] = []
        var credits: Int
    }
    private let state: Mutex<State>

    init(_ c: VirtualController) {
        controller = c
        state = Mutex(State(credits: c.aclBuffers))
        let link = c.link
        c.attachHost { [weak self] p in
            guard let self else { return }
            let t = link.now
            self.state.withLock { s in
                if case .event(let e) = p, let n = try? HCIEvents.decode(e) as? NumberOfCompletedPackets {
                    s.credits += n.entries.reduce(0) { $0 + Int($1.numCompletedPackets) }
                }
                s.received.append((t, p))
            }
        }
    }

    func send(_ c: some HCICommand) { controller.receive(fromHost: .command(c.packet)) }

    /// Everything received since the last take.
    func take() -> [(time: Double, packet: HCIPacket)] {
        state.withLock { s in defer { s.received = [] }; return s.received }
    }

    /// The events received since the last take, with their times (ACL packets are dropped).
    func events() -> [(time: Double, event: any HCIEventParameters)] {
        take().compactMap { r in
            guard case .event(let e) = r.packet, let d = try? HCIEvents.decode(e) else { return nil }
            return (r.time, d)
        }
    }

    /// Sends ACL packets of `length` octets on `handle` while it has buffers, at most `limit`.
    @discardableResult
    func fill(handle: UInt16, length: Int, limit: Int = .max) -> Int {
        let n = state.withLock { s -> Int in
            let n = min(s.credits, limit)
            s.credits -= n
            return n
        }
        for i in 0..<n {
            controller.receive(fromHost: .acl(HCIACLPacket(handle: handle, boundary: .first, data: [UInt8](repeating: UInt8(truncatingIfNeeded: i), count: length))))
        }
        return n
    }

    var credits: Int { state.withLock { $0.credits } }
}

/// Two or more controllers on a manual-clock airtime link, with helpers to connect them and
/// move the clock.
struct AirtimeRig {
    let link: VirtualLink
    let hosts: [AirHost]

    init(controllers: Int = 2, aclBuffers: Int = 32, aclDataLength: Int = 251, configuration: Airtime.Configuration = .init()) {
        let link = VirtualLink(mode: .manual, airtime: configuration)
        self.link = link
        hosts = (0..<controllers).map { _ in AirHost(link.addController(aclBuffers: aclBuffers, aclDataLength: aclDataLength)) }
        // The power-on Event Mask leaves LE Meta off (Core Vol 4 Part E 7.3.1): hosts turn it on.
        for h in hosts { h.send(SetEventMask(.leHost)) }
        link.runUntilIdle()
        for h in hosts { _ = h.take() }
    }

    /// Runs `c` on `h` and returns its Command Complete or Command Status status.
    @discardableResult
    func run<C: HCICommand>(_ h: AirHost, _ c: C) -> HCIStatus? {
        h.send(c)
        link.runUntilIdle()
        for (_, e) in h.events() {
            if let cc = e as? CommandComplete, cc.opcode == C.opcode { return cc.status }
            if let cs = e as? CommandStatus, cs.opcode == C.opcode { return cs.status }
        }
        return nil
    }

    /// `central` connects to `peripheral` (legacy advertising at `advInterval` units of 0.625 ms)
    /// with connection interval `interval` (units of 1.25 ms); returns the handles and the link
    /// time the central's host learnt of the connection.
    func connect(_ central: AirHost, _ peripheral: AirHost, interval: UInt16 = 6, advInterval: UInt16 = 0x20,
                 timeout: UInt16 = 0x002A) throws -> (central: UInt16, peripheral: UInt16, time: Double) {
        run(peripheral, LESetAdvertisingParameters(advertisingIntervalMin: advInterval, advertisingIntervalMax: advInterval))
        run(peripheral, LESetAdvertisingData(advertisingData: [2, 1, 6]))
        run(peripheral, LESetAdvertisingEnable(advertisingEnable: true))
        central.send(LECreateConnection(peerAddressType: .public, peerAddress: peripheral.controller.publicAddress,
                                        connectionIntervalMin: interval, connectionIntervalMax: interval, supervisionTimeout: timeout))
        // The connection is made at the advertiser's next advertising event: within its
        // interval plus advDelay (Core v5.4 Vol 6 Part B 4.4.2.2.1).
        var ours: (UInt16, Double)?
        var theirs: UInt16?
        for _ in 0..<200 where ours == nil || theirs == nil {
            link.advance(by: 0.001)
            for (t, e) in central.events() { if let c = (e as? LEMetaEvent)?.subevent as? LEConnectionComplete { ours = (c.connectionHandle, t) } }
            for (_, e) in peripheral.events() { if let c = (e as? LEMetaEvent)?.subevent as? LEConnectionComplete { theirs = c.connectionHandle } }
        }
        let c = try #require(ours, "no LE Connection Complete on the central")
        let p = try #require(theirs, "no LE Connection Complete on the peripheral")
        return (c.0, p, c.1)
    }

    /// ACL packets `h` received (time and length) since the last take.
    func acl(_ h: AirHost) -> [(time: Double, length: Int)] {
        h.take().compactMap { r in if case .acl(let a) = r.packet { return (r.time, a.data.count) }; return nil }
    }
}
