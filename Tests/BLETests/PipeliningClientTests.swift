import Synchronization
import Testing
import TestSupport
import StackTestSupport
import HCI
import Host
import L2CAP
import ATT
import VirtualController
@testable import BLE

/// Issue 13 defect 8: an ATT client that pipelines requests (a client may have one outstanding,
/// Core v5.4 Vol 3 Part F 3.3.2) while the peripheral's controller returns no ACL buffers
/// cannot grow the peripheral's send queue: requests arriving while
/// `HostConfiguration.maxEnqueuedFramesPerLink` (64) answers wait are ignored, neither acted on
/// nor answered. Before the fix all 200 were queued and answered.
@Suite(.timeLimit(.minutes(1))) struct PipeliningClientTests {
    @Test func pipelinedRequestsBeyondTheQueueBoundAreIgnored() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)  // 8 ACL buffers of 27 octets each
        let peripheral = try await Peripheral.open(transports[0], services: DemoProfile.services, name: "ble-hci")
        try await peripheral.startAdvertising(AdvertisingOptions(name: "pipeline", restartAfterDisconnection: false))
        let client = Host(transport: transports[1])
        _ = try await client.start()
        try await client.startScanning()
        var found: AdvertisingReportValue?
        for await e in client.events {
            if case .advertisement(let r) = e, AdvertisingData(parsing: r.data).name == "pipeline" { found = r; break }
        }
        try await client.stopScanning()
        let link = try await client.connect(to: try #require(found).address)
        let answers = await ATTFrameCounter.attach(to: link, of: client)
        let nameHandle = try #require(peripheral.server.valueHandle(of: DemoProfile.name))
        let read = L2CAPFrame(cid: .att, payload: ATTPDU.readRequest(handle: nameHandle).bytes).bytes
        // One request answered normally first.
        try await client.sendL2CAP(read, on: link.handle)
        try await answers.until("the first answer") { $0 == 1 }

        // The peripheral's controller stops returning buffers; the client sends 200 requests
        // without waiting. Each Read Response is one ACL packet: 8 fill the controller's
        // buffers (Read Buffer Size), 64 wait in the host, the other 128 are ignored.
        transports[0].controller.setCompletingPackets(false)
        for _ in 0..<200 { try await client.sendL2CAP(read, on: link.handle) }
        let peripheralHost = await peripheral.stack.host
        let handle = try #require(await peripheralHost.connections.first?.handle)
        try await answers.until("8 answers, in the controller's buffers") { $0 == 1 + 8 }
        try await peripheralHost.until("64 answers waiting") { $0.queuedFrameCount(handle) == 64 }
        try await peripheralHost.settled()  // every request handled (one executor for the link)
        #expect(await peripheralHost.queuedFrameCount(handle) == 64)
        #expect(answers.value == 1 + 8)

        transports[0].controller.setCompletingPackets(true)
        try await answers.until("the 64 waiting answers") { $0 == 1 + 8 + 64 }
        try await peripheralHost.settled()  // and no more
        #expect(answers.value == 1 + 8 + 64)
        // Served again once the answers drained.
        try await client.sendL2CAP(read, on: link.handle)
        try await answers.until("the next answer") { $0 == 1 + 8 + 64 + 1 }
        await client.close()
        await peripheral.close()
    }

    /// Issue 14 regression: SMP answers shared the 64-answer bound with ATT, so a client that
    /// filled it with pipelined requests left the peripheral no room for its Pairing Response
    /// (dropped and logged) and pairing died at the SMP timeout. SMP has one PDU outstanding
    /// per exchange (Core v5.4 Vol 3 Part H 3.3) and now has its own bound: pairing completes.
    @Test func pairingCompletesWhilePipelinedATTAnswersFillTheQueue() async throws {
        var security = SecurityTests.config(bonds: nil)
        security.smp.timeout = .seconds(5)  // a dropped SMP PDU fails in 5 s instead of 30
        var options = StackOptions()
        options.security = security
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: DemoProfile.services, name: "ble-hci", options: options)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "flooded", restartAfterDisconnection: false))
        let central = try await Central.open(transports[1], options: options)
        let adv = try await central.find(ScanFilter(nameContains: "flooded"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        let nameHandle = try #require(peripheral.server.valueHandle(of: DemoProfile.name))
        let read = L2CAPFrame(cid: .att, payload: ATTPDU.readRequest(handle: nameHandle).bytes).bytes

        // The peripheral's controller stops returning buffers; 200 pipelined Read Requests
        // (sent below the central's ATT bearer) fill the peripheral's 64 answer slots.
        transports[0].controller.setCompletingPackets(false)
        let centralHost = await central.stack.host
        for _ in 0..<200 { try await centralHost.sendL2CAP(read, on: remote.connectionHandle) }
        let peripheralHost = await peripheral.stack.host
        let handle = try #require(await peripheralHost.connections.first?.handle)
        try await peripheralHost.until("64 answers waiting") { $0.queuedFrameCount(handle) == 64 }

        // Pairing starts while the answer slots are full; the Pairing Response is queued
        // behind them, and goes out once the controller returns buffers.
        let pairing = Task { try await remote.pair() }
        try await peripheralHost.until("the Pairing Response queued behind them") { $0.queuedFrameCount(handle) == 65 }
        transports[0].controller.setCompletingPackets(true)
        let result = try await pairing.value
        #expect(result.encrypted)
        #expect(await remote.lastPairing?.method == .justWorks)
        try await remote.disconnect()
        await central.close()
        await peripheral.close()
    }
}
