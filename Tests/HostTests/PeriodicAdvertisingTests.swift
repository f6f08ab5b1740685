import StackTestSupport
import Testing
import TestSupport
import HCI
@testable import Host
import VirtualController

/// Issue 30: periodic advertising (Core v5.4 Vol 4 Part E 7.8.61-7.8.63) and synchronisation
/// (7.8.67-7.8.69, 7.7.65.14-7.7.65.16), between two of our hosts on the virtual link, and the
/// host's reassembly of LE Periodic Advertising Reports by Data_Status (7.7.65.15).
@Suite(.timeLimit(.minutes(1))) struct PeriodicAdvertisingTests {
    /// AD structures (Manufacturer Specific Data, 0xFF) making `count` octets in all.
    static func manufacturerData(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        var seed: UInt8 = 0
        while out.count < count {
            let length = min(254, count - out.count - 1)  // the length octet counts type and value
            out += [UInt8(length), 0xFF] + (0..<(length - 1)).map { _ in seed &+= 7; return seed }
        }
        return out
    }

    /// A train of 600 octets: the scanner finds the set's SID and periodic interval in its
    /// extended advertising report (7.7.65.13), synchronises (Sync Established with that SID,
    /// address and interval, 7.7.65.14), and gets each periodic advertisement whole, from the
    /// three reports 247 + 247 + 106 octets (Data_Status 0b01, 0b01, 0b00) the controller splits
    /// it into. Terminate Sync (7.8.69) ends it; a second Terminate of the handle is refused with
    /// Unknown Advertising Identifier (0x42).
    @Test func scannerSynchronisesAndGetsTheTrainWhole() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let advertiser = Host(transport: transports[0])
        let scanner = Host(transport: transports[1])
        _ = try await advertiser.start()
        _ = try await scanner.start()
        let train = Self.manufacturerData(600)
        var ad = AdvertisingData()
        ad.addLocalName("beacon")
        try await advertiser.startAdvertising(AdvertisingParameters(
            kind: .nonConnectable, data: ad.bytes, ownAddress: .randomStatic,
            periodic: PeriodicAdvertisingParameters(intervalMin: 0x0010, intervalMax: 0x0010, data: train)))
        #expect(await advertiser.isPeriodicAdvertising)

        try await scanner.startScanning()
        var found: AdvertisingReportValue?
        for await e in scanner.events {
            if case .advertisement(let r) = e, AdvertisingData(parsing: r.data).name == "beacon" { found = r; break }
        }
        let report = try #require(found)
        // Extended PDUs (not legacy), non-connectable, with an SID and the train's interval.
        #expect(!report.kind.contains(.legacy) && !report.isConnectable)
        #expect(report.sid <= 0x0F && report.periodicInterval == 0x0010)

        let sync = try await scanner.createPeriodicSync(to: report.address, sid: report.sid)
        #expect(sync.advertiser == report.address && sync.sid == report.sid && sync.interval == 0x0010)
        var periodic: [PeriodicReport] = []
        for await e in scanner.events {
            if case .periodicReport(let p) = e { periodic.append(p) }
            if periodic.count == 2 { break }
        }
        #expect(periodic.allSatisfy { $0.syncHandle == sync.handle && $0.data == train && $0.dataStatus == 0 })
        try await scanner.terminatePeriodicSync(sync.handle)
        #expect(await scanner.activePeriodicSyncs.isEmpty)
        await #expect(throws: HostError.self) { try await scanner.terminatePeriodicSync(sync.handle) }
        await #expect { _ = try await scanner.execute(LEPeriodicAdvertisingTerminateSync(syncHandle: sync.handle)) } throws: { e in
            (e as? HCIError)?.status == .unknownAdvertisingIdentifier
        }
        await scanner.close()
        await advertiser.close()
    }

    /// A train that stops is lost by its scanner once the sync timeout passes without it
    /// (LE Periodic Advertising Sync Lost, 7.7.65.16; Sync_Timeout in 10 ms units, 7.8.67).
    @Test func syncIsLostWhenTheTrainStops() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let advertiser = Host(transport: transports[0])
        let scanner = Host(transport: transports[1])
        _ = try await advertiser.start()
        _ = try await scanner.start()
        try await advertiser.startAdvertising(AdvertisingParameters(
            kind: .nonConnectable, data: [2, 1, 4], ownAddress: .randomStatic,
            periodic: PeriodicAdvertisingParameters(intervalMin: 0x0008, data: [4, 0xFF, 0x01, 0x02, 0x03])))
        try await scanner.startScanning()
        var found: AdvertisingReportValue?
        for await e in scanner.events {
            if case .advertisement(let r) = e, r.periodicInterval != 0 { found = r; break }
        }
        let report = try #require(found)
        let sync = try await scanner.createPeriodicSync(to: report.address, sid: report.sid, syncTimeout: 0x000A)
        try await advertiser.stopAdvertising()
        #expect(await !advertiser.isPeriodicAdvertising)
        var lost: UInt16?
        for await e in scanner.events {
            if case .periodicSyncLost(let h) = e { lost = h; break }
        }
        #expect(lost == sync.handle)
        #expect(await scanner.activePeriodicSyncs.isEmpty)
        await scanner.close()
        await advertiser.close()
    }

    /// A Create Sync that finds no train times out, and is cancelled in the controller (LE
    /// Periodic Advertising Create Sync Cancel, 7.8.68): the next Create Sync is accepted, where
    /// one sent while another is pending is Command Disallowed (0x0C, 7.8.67).
    @Test func createSyncThatTimesOutIsCancelled() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let scanner = Host(transport: transports[1])
        _ = try await scanner.start()
        try await scanner.startScanning()
        let nobody = DeviceAddress(BDAddress([0xC5, 1, 2, 3, 4, 5]), type: .random)
        for _ in 0..<2 {
            await #expect { _ = try await scanner.createPeriodicSync(to: nobody, sid: 3, timeout: .milliseconds(100)) } throws: { e in
                if case .procedureTimeout = e as? HostError { return true }
                return false
            }
        }
        // Without a pending sync, a cancel is Command Disallowed (7.8.68).
        await #expect { _ = try await scanner.execute(LEPeriodicAdvertisingCreateSyncCancel()) } throws: { e in
            (e as? HCIError)?.status == .commandDisallowed
        }
        await scanner.close()
    }

    /// The host joins fragments by Data_Status (7.7.65.15): 0b01 more to come, 0b00 complete,
    /// 0b10 truncated; reports of a handle that is no sync of ours are dropped with a warning.
    @Test func reportsAreJoinedByDataStatus() async throws {
        let t = FakeTransport.controller()
        let host = Host(transport: t)
        _ = try await host.start()
        let addr = BDAddress([0xC3, 1, 2, 3, 4, 5])
        t.inject(le: LEPeriodicAdvertisingSyncEstablished(syncHandle: 0x0001, advertisingSID: 2, advertiserAddressType: 1,
                                                          advertiserAddress: addr, periodicAdvertisingInterval: 0x50))
        t.inject(le: LEPeriodicAdvertisingReport(syncHandle: 0x0001, rssi: -40, dataStatus: 1, data: [3, 0xFF, 1]))
        t.inject(le: LEPeriodicAdvertisingReport(syncHandle: 0x0002, rssi: -40, dataStatus: 0, data: [9]))
        t.inject(le: LEPeriodicAdvertisingReport(syncHandle: 0x0001, rssi: -41, dataStatus: 0, data: [2]))
        t.inject(le: LEPeriodicAdvertisingReport(syncHandle: 0x0001, rssi: -42, dataStatus: 1, data: [5, 0xFF]))
        t.inject(le: LEPeriodicAdvertisingReport(syncHandle: 0x0001, rssi: -43, dataStatus: 2, data: [7]))
        t.inject(le: LEPeriodicAdvertisingSyncLost(syncHandle: 0x0001))
        var established: PeriodicSync?
        var reports: [PeriodicReport] = []
        var warnings: [String] = []
        for await e in host.events {
            switch e {
            case .periodicSyncEstablished(let s): established = s
            case .periodicReport(let r): reports.append(r)
            case .warning(let w): warnings.append(w)
            case .periodicSyncLost: break
            default: continue
            }
            if case .periodicSyncLost = e { break }
        }
        #expect(established == PeriodicSync(handle: 1, advertiser: DeviceAddress(addr, type: .random), sid: 2, phy: 1, interval: 0x50))
        #expect(reports == [PeriodicReport(syncHandle: 1, txPower: nil, rssi: -41, data: [3, 0xFF, 1, 2], dataStatus: 0),
                            PeriodicReport(syncHandle: 1, txPower: nil, rssi: -43, data: [5, 0xFF, 7], dataStatus: 2)])
        #expect(warnings.contains { $0.contains("0x0002") && $0.contains("no sync of ours") })
        #expect(await host.activePeriodicSyncs.isEmpty)
        await host.close()
    }
}

/// Periodic Advertising Sync Transfer (Core v5.4 Vol 4 Part E 7.8.89-7.8.92, 7.7.65.24) on our
/// virtual link: a scanner synchronised to A's train hands its sync to the host it is connected
/// to (Sync Transfer), and A hands its own train to a host it connects to (Set Info Transfer);
/// the receiving host, having accepted transfers (Set Periodic Advertising Sync Transfer
/// Parameters, Mode 0x02), gets Sync Transfer Received with the service data sent, and then the
/// train's reports. Without accepting (default Mode 0x00, 7.8.92) nothing is transferred.
@Suite(.timeLimit(.minutes(1))) struct PeriodicSyncTransferTests {
    func next<T: Sendable>(_ host: Host, _ what: String, _ match: @escaping @Sendable (HostEvent) -> T?) async throws -> T {
        try await HostBumbleTests().next(host, what, timeout: .seconds(5), match)
    }

    @Test func syncAndSetInfoAreTransferredOverALink() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 3)
        let a = Host(transport: transports[0]), b = Host(transport: transports[1]), c = Host(transport: transports[2])
        _ = try await a.start()
        _ = try await b.start()
        let cInfo = try await c.start()
        let train = PeriodicAdvertisingTests.manufacturerData(40)
        try await a.startAdvertising(AdvertisingParameters(kind: .nonConnectable, data: [2, 1, 4], ownAddress: .randomStatic,
                                                           periodic: PeriodicAdvertisingParameters(intervalMin: 0x0008, intervalMax: 0x0008, data: train)))
        let aAddress = await a.staticRandomAddress
        // B synchronises to A's train.
        try await b.startScanning(ScanParameters(active: false))
        let report = try await next(b, "A's advertising") { e -> AdvertisingReportValue? in
            if case .advertisement(let r) = e, r.address.address == aAddress { return r }
            return nil
        }
        let bSync = try await b.createPeriodicSync(to: report.address, sid: report.sid)
        try await b.stopScanning()

        // C advertises; B connects to it.
        try await c.startAdvertising(AdvertisingParameters(kind: .connectable, data: [2, 1, 6]))
        let bToC = try await b.connect(to: DeviceAddress(cInfo.address, type: .public))
        let cFromB = try await next(c, "B's connection") { e -> LEConnection? in
            if case .connected(let l) = e { return l }
            return nil
        }
        // Not accepted yet: a transfer is ignored (default Mode 0x00).
        try await b.transferPeriodicSync(bSync.handle, to: bToC.handle, serviceData: 0x0001)
        try await c.acceptPeriodicSyncTransfers(on: cFromB.handle)
        try await b.transferPeriodicSync(bSync.handle, to: bToC.handle, serviceData: 0xBEEF)
        let (transferred, connection, serviceData) = try await next(c, "the transferred sync") { e -> (PeriodicSync, UInt16, UInt16)? in
            if case .periodicSyncTransferred(let s, let conn, let data) = e { return (s, conn, data) }
            return nil
        }
        #expect(serviceData == 0xBEEF, "the first transfer, before C accepted, was ignored")
        #expect(connection == cFromB.handle)
        #expect(transferred.advertiser.address == aAddress && transferred.sid == report.sid && transferred.interval == 0x0008)
        let periodic = try await next(c, "a report of the transferred sync") { e -> PeriodicReport? in
            if case .periodicReport(let p) = e, p.syncHandle == transferred.handle { return p }
            return nil
        }
        #expect(periodic.data == train)
        try await c.terminatePeriodicSync(transferred.handle)

        // A connects to C and transfers its own train (Set Info Transfer); C accepts by default now.
        try await c.acceptPeriodicSyncTransfers()
        try await c.startAdvertising(AdvertisingParameters(kind: .connectable, data: [2, 1, 6]))
        let aToC = try await a.connect(to: DeviceAddress(cInfo.address, type: .public))
        try await a.transferPeriodicAdvertising(to: aToC.handle, serviceData: 0x0042)
        let fromA = try await next(c, "A's train, transferred") { e -> (PeriodicSync, UInt16)? in
            if case .periodicSyncTransferred(let s, _, let data) = e { return (s, data) }
            return nil
        }
        #expect(fromA.1 == 0x0042 && fromA.0.advertiser.address == aAddress)
        // A sync that is not ours cannot be transferred.
        await #expect(throws: HostError.self) { try await a.transferPeriodicSync(0x0123, to: aToC.handle) }
        await a.close()
        await b.close()
        await c.close()
    }
}
