import HCI
import Testing
import StackTestSupport
import TestSupport
import Transport
@testable import Host

/// Two of our hosts on Bumble's virtual controllers (a fresh controllers process per test), and
/// on Rootcanal's (`OverRootcanal`, `make rootcanal-test`).
@Suite(.serialized) struct HostBumbleTests {
    func makeHosts(on kind: ControllerKind = .bumble) async throws -> (any TestControllers, Host, Host, ControllerInfo, ControllerInfo) {
        let controllers = try await startTestControllers(kind)
        let a = Host(transport: try TransportSpec(parsing: controllers.transport(0)).open())
        let b = Host(transport: try TransportSpec(parsing: controllers.transport(1)).open())
        let ia = try await a.start()
        let ib = try await b.start()
        return (controllers, a, b, ia, ib)
    }

    /// Next event matching `match` within `timeout`.
    func next<T: Sendable>(_ host: Host, _ what: String, timeout: Duration = .seconds(10),
                           _ match: @escaping @Sendable (HostEvent) -> T?) async throws -> T {
        try await withTimeout(timeout, "\(what)") {
            for await e in host.events { if let v = match(e) { return v } }
            throw TestFailure("no \(what): the host's events ended")
        }
    }

    @Test func bringUpAgainstBumble() async throws {
        let controllers = try await BumbleControllers.start()
        defer { controllers.stop() }
        let host = Host(transport: try TCPTransport.connect(host: "127.0.0.1", port: controllers.port1, timeout: 5))
        let info = try await host.start()
        #expect(info.aclDataLength == 27)  // Bumble's LE ACL buffers: 64 × 27
        #expect(info.aclBufferCount == 64)
        #expect(info.hciVersion >= 9)
        #expect(info.supportedCommands.count == 64)
        #expect(info.supports(LECreateConnection.opcode))
        #expect(!info.supports(LESetExtendedAdvertisingParameters.opcode))
        await host.close()
    }

    @Test func advertiseScanConnectExchangeDisconnect() async throws { try await advertiseScanConnectExchangeDisconnect(on: .bumble) }
    func advertiseScanConnectExchangeDisconnect(on kind: ControllerKind) async throws {
        let (controllers, a, b, _, info) = try await makeHosts(on: kind)
        defer { controllers.stop() }
        // A advertises with a random static address, B scans.
        let ad: [UInt8] = [0x02, 0x01, 0x06, 0x09, 0x09] + Array("ble-hci".utf8) + [0x05, 0xFF, 0x34, 0x12, 0xAA, 0xBB]
        try await a.startAdvertising(AdvertisingParameters(kind: .connectable, intervalMin: 0x20, intervalMax: 0x20,
                                                           data: ad, ownAddress: .randomStatic))
        let aAddress = await a.staticRandomAddress
        #expect(aAddress.isRandomStatic)
        try await b.startScanning(ScanParameters(active: false))
        let report = try await next(b, "advertisement from A") { e -> AdvertisingReportValue? in
            if case .advertisement(let r) = e, r.address.address == aAddress, !r.isScanResponse { return r }
            return nil
        }
        #expect(report.address == DeviceAddress(aAddress, type: .random))
        #expect(report.data == ad)
        #expect(report.isConnectable)
        try await b.stopScanning()

        // B connects to A: both sides get .connected.
        let aConnected = Task { try await next(a, "A connected") { e -> LEConnection? in
            if case .connected(let c) = e { return c }; return nil } }
        let linkB = try await b.connect(to: report.address, timeout: .seconds(10))
        let linkA = try await aConnected.value
        #expect(linkB.role == .central)
        #expect(linkA.role == .peripheral)
        #expect(linkB.peer == DeviceAddress(aAddress, type: .random))

        // Frames larger than the 27-octet ACL length, both ways: fragmented and reassembled whole.
        let fromB = l2capFrame(200, seed: 3)
        let fromA = l2capFrame(500, seed: 9)
        try await b.sendL2CAP(fromB, on: linkB.handle)
        try await a.sendL2CAP(fromA, on: linkA.handle)
        var itA = linkA.frames.makeAsyncIterator()
        var itB = linkB.frames.makeAsyncIterator()
        #expect(await itA.next() == fromB)
        #expect(await itB.next() == fromA)
        // Many frames in a row (more fragments than buffers): all arrive, in order.
        for i in 0..<40 { try await b.sendL2CAP(l2capFrame(100, seed: UInt8(i)), on: linkB.handle) }
        for i in 0..<40 { #expect(await itA.next() == l2capFrame(100, seed: UInt8(i))) }
        // Every buffer the controller reported (LE Read Buffer Size, Core v5.4 Vol 4 Part E 7.8.2)
        // is free again once its Number Of Completed Packets came (4.1.1).
        try await b.until("B's credits back") { $0.aclStatus.free == info.aclBufferCount }

        // Disconnect from B: both sides see it with the reason; frames finish.
        let aDisconnected = Task { try await next(a, "A disconnected") { e -> HCIStatus? in
            if case .disconnected(linkA.handle, let r) = e { return r }; return nil } }
        let reason = try await b.disconnect(handle: linkB.handle, reason: .remoteUserTerminated)
        #expect(reason == .localHostTerminated || reason == .remoteUserTerminated)
        #expect(try await aDisconnected.value == .remoteUserTerminated)
        #expect(await itA.next() == nil)
        await #expect(throws: HostError.unknownConnection(linkB.handle)) { try await b.sendL2CAP(fromB, on: linkB.handle) }
        await a.close()
        await b.close()
    }

    @Test func connectTimeoutCancels() async throws {
        let (controllers, _, b, _, _) = try await makeHosts()
        defer { controllers.stop() }
        let nobody = DeviceAddress(BDAddress([0xC5, 0, 0, 0, 0, 0x01]), type: .random)
        await #expect(throws: HostError.connectTimeout(nobody)) {
            _ = try await b.connect(to: nobody, timeout: .milliseconds(300))
        }
        #expect(await !b.connectBusy)
        await b.close()
    }
}

extension HostBumbleTests {
    /// Two of our hosts on two controllers of Rootcanal's radio (`make rootcanal-test`).
    @Suite(.serialized, .rootcanal) struct OverRootcanal {
        @Test func bringUpAgainstRootcanal() async throws {
            let rootcanal = try await RootcanalControllers.start()
            defer { rootcanal.stop() }
            let host = Host(transport: try TransportSpec(parsing: rootcanal.transport()).open())
            let info = try await host.start()
            // Rootcanal 1.10.0's own answers (measured with raw H4): LE Read Buffer Size 20 × 27,
            // HCI version 0x0C (Core 5.3), company 0x00E0 (Google), a public BD_ADDR of its own,
            // and the extended advertising commands (LE feature bit 12, Core v5.4 Vol 6 Part B 4.6).
            #expect(info.aclDataLength == 27)
            #expect(info.aclBufferCount == 20)
            #expect(info.hciVersion == 0x0C)
            #expect(info.companyIdentifier == 0x00E0)
            #expect(info.address != .zero)
            #expect(info.leFeatures & (1 << 12) != 0)
            #expect(info.supports(LECreateConnection.opcode))
            #expect(info.supports(LESetExtendedAdvertisingParameters.opcode))
            await host.close()
        }

        @Test func advertiseScanConnectExchangeDisconnect() async throws {
            try await HostBumbleTests().advertiseScanConnectExchangeDisconnect(on: .rootcanal)
        }
    }
}
