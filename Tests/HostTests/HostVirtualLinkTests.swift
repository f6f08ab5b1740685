import Testing
import HCI
import Host
import VirtualController

/// Two of our hosts on the Swift virtual link (8 buffers of 27 octets each): advertising,
/// scanning, connecting both roles, 251-octet frames fragmented both ways under NOCP flow control.
@Suite(.timeLimit(.minutes(1))) struct HostVirtualLinkTests {
    @Test func fragmentedFramesBothWaysNeverOverrunTheController() async throws {
        let (link, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = Host(transport: transports[0])
        let central = Host(transport: transports[1])
        let pInfo = try await peripheral.start()
        let cInfo = try await central.start()
        #expect(pInfo.aclDataLength == 27 && pInfo.aclBufferCount == 8)
        #expect(cInfo.address != pInfo.address)

        var ad = AdvertisingData()
        ad.addFlags(0x06)
        ad.addLocalName("host-test")
        try await peripheral.startAdvertising(AdvertisingParameters(data: ad))
        try await central.startScanning()
        var seen: AdvertisingReportValue? = nil
        for await e in central.events {
            if case .advertisement(let r) = e, AdvertisingData(parsing: r.data).name == "host-test" { seen = r; break }
        }
        let report = try #require(seen)
        #expect(report.address.address == pInfo.address && report.isConnectable)
        try await central.stopScanning()

        let toPeripheral = try await central.connect(to: report.address)
        var accepted: LEConnection? = nil
        for await e in peripheral.events {
            if case .connected(let c) = e { accepted = c; break }
        }
        let fromCentral = try #require(accepted)
        #expect(toPeripheral.role == .central && fromCentral.role == .peripheral)
        #expect(await !peripheral.isAdvertising)

        // 40 frames of 251 octets each way (10 ACL fragments per frame) sent at once.
        let frames = (0..<40).map { i in [251 & 0xFF, 0, 0x40, 0x00] + [UInt8](repeating: UInt8(i), count: 251) }
        async let sentByCentral: Void = {
            for f in frames { try await central.sendL2CAP(f, on: toPeripheral.handle) }
        }()
        async let sentByPeripheral: Void = {
            for f in frames { try await peripheral.sendL2CAP(f, on: fromCentral.handle) }
        }()
        var atPeripheral: [[UInt8]] = []
        var atCentral: [[UInt8]] = []
        for await f in fromCentral.frames { atPeripheral.append(f); if atPeripheral.count == frames.count { break } }
        for await f in toPeripheral.frames { atCentral.append(f); if atCentral.count == frames.count { break } }
        try await sentByCentral
        try await sentByPeripheral
        #expect(atPeripheral == frames)
        #expect(atCentral == frames)
        // The controller complains (Data Buffer Overflow) if a host ever exceeds its 8 buffers.
        #expect(!link.log.contains { $0.contains("Data Buffer Overflow") })
        // Every buffer comes back (the last Number Of Completed Packets may still be on its way).
        var free = 0
        for _ in 0..<200 {
            free = await central.aclStatus.free
            if free == 8 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(free == 8)

        let status = try await central.disconnect(handle: toPeripheral.handle)
        #expect(status == .localHostTerminated)
        for await e in peripheral.events {
            if case .disconnected(let h, let reason) = e {
                #expect(h == fromCentral.handle && reason == .remoteUserTerminated)
                break
            }
        }
        await central.close()
        await peripheral.close()
    }
}
