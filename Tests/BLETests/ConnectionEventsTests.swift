import Testing
import TestSupport
import HCI
import VirtualController
@testable import BLE

/// Issue 25 item 10: `Central.events` (connections coming and going, parameter updates),
/// connection parameter requests in both roles, `Peripheral.disconnect(connection:)`,
/// `isScanning` and `isAdvertising`. On the in-process virtual link.
@Suite(.timeLimit(.minutes(1))) struct ConnectionEventsTests {
    /// A connected pair; the central's event iterator is made before connecting.
    func connected(_ centralOptions: StackOptions = StackOptions())
        async throws -> (Central, Peripheral, RemotePeripheral, CentralEvents.Iterator, DeviceAddress) {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: DemoProfile.services, name: "events")
        let central = try await Central.open(transports[1], options: centralOptions)
        let events = central.events.makeAsyncIterator()
        #expect(await peripheral.isAdvertising == false)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "events", restartAfterDisconnection: false))
        #expect(await peripheral.isAdvertising)
        let adv = try await central.find(ScanFilter(nameContains: "events"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        // A legacy connectable set stops when a central connects (Core v5.4 Vol 6 Part B 4.4.2.3).
        #expect(await peripheral.isAdvertising == false)
        return (central, peripheral, remote, events, adv.address)
    }

    /// The central hears its link come up with the peer's address and go down with the reason
    /// the peripheral gave its HCI Disconnect; the peripheral's own Disconnection Complete says
    /// Connection Terminated by Local Host, 0x16 (Core v5.4 Vol 4 Part E 7.1.6, 7.7.5).
    @Test func centralEventsFollowTheLinkAndAPeripheralDisconnectsOneCentral() async throws {
        var (central, peripheral, remote, events, address) = try await connected()
        let handle = remote.connectionHandle
        #expect(await events.next() == .connected(connection: handle, peripheral: address))
        let here = try #require(await central.connections.first?.connectionHandle)
        #expect(here == handle)
        let peripheralSide = try #require(await peripheralConnection(peripheral))
        #expect(try await peripheral.disconnect(connection: peripheralSide, reason: .remoteUserTerminated) == .localHostTerminated)
        #expect(await events.next() == .disconnected(connection: handle, reason: .remoteUserTerminated))
        #expect(await central.connections.isEmpty)
        await central.close()
        await peripheral.close()
    }

    /// The central's own LE Connection Update (Vol 4 Part E 7.8.18) reports the controller's
    /// chosen parameters, within what was asked, and the same in `events`.
    @Test func centralUpdatesTheParameters() async throws {
        var (central, peripheral, remote, events, _) = try await connected()
        _ = await events.next()  // connected
        let p = try await remote.updateConnectionParameters(intervalMin: 24, intervalMax: 40, latency: 2, supervisionTimeout: 400)
        #expect((24...40).contains(p.interval))
        #expect(p.latency == 2 && p.supervisionTimeout == 400)
        #expect(await events.next() == .parametersUpdated(connection: remote.connectionHandle, parameters: p))
        await central.close()
        await peripheral.close()
    }

    /// The peripheral's Connection Parameter Update Request (Vol 3 Part A 4.20) goes to the
    /// central's policy: accepted (result 0x0000), the central applies it with LE Connection
    /// Update and reports the new parameters; refused (0x0001), the peripheral hears false.
    /// Parameters out of the spec's ranges are refused before anything is sent.
    @Test func peripheralRequestsGoThroughTheCentralsPolicy() async throws {
        var options = StackOptions()
        options.connectionParameterPolicy = { request in request.latency == 0 }
        var (central, peripheral, remote, events, _) = try await connected(options)
        _ = await events.next()  // connected
        let connection = try #require(await peripheralConnection(peripheral))
        var peripheralEvents = peripheral.events.makeAsyncIterator()
        #expect(try await peripheral.requestConnectionParameters(connection: connection, intervalMin: 40, intervalMax: 56,
                                                                 supervisionTimeout: 500))
        guard case .parametersUpdated(let handle, let p)? = await events.next() else {
            Issue.record("no parametersUpdated event")
            return
        }
        #expect(handle == remote.connectionHandle)
        #expect((40...56).contains(p.interval) && p.latency == 0 && p.supervisionTimeout == 500)
        // The peripheral's controller reports the same LE Connection Update Complete (both
        // sides get it, Core v5.4 Vol 4 Part E 7.7.65.3) in the peripheral's events.
        var heard: ConnectionParameters?
        while heard == nil, let e = await peripheralEvents.next() {
            if case .parametersUpdated(connection, let q) = e { heard = q }
        }
        #expect(heard == p)
        #expect(try await peripheral.requestConnectionParameters(connection: connection, intervalMin: 40, intervalMax: 56,
                                                                 latency: 2, supervisionTimeout: 500) == false)
        // Supervision timeout 100 ms is not above (1 + 0) × 70 ms × 2 (Vol 3 Part A 4.20).
        await #expect(throws: BLEError.self) {
            _ = try await peripheral.requestConnectionParameters(connection: connection, intervalMin: 56, intervalMax: 56,
                                                                 supervisionTimeout: 10)
        }
        await central.close()
        await peripheral.close()
    }

    /// `isScanning` holds while a scan stream is consumed and not after it ends.
    @Test func isScanningFollowsTheScan() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 1)
        let central = try await Central.open(transports[0])
        #expect(await central.isScanning == false)
        let stream = try await central.scan()
        #expect(await central.isScanning)
        _ = stream
        await central.close()
        #expect(await central.isScanning == false)
    }

    /// The peripheral's connection handle of its one link (from its `connected` event).
    func peripheralConnection(_ peripheral: Peripheral) async -> UInt16? {
        for await e in peripheral.events {
            if case .connected(let connection, _) = e { return connection }
        }
        return nil
    }
}
