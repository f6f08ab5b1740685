import Testing
import TestSupport
import VirtualController
@testable import BLE

/// Issue 25: back-pressure without waiting, as CoreBluetooth's `updateValue` returning false
/// and `peripheralManagerIsReady(toUpdateSubscribers:)`.
@Suite(.timeLimit(.minutes(1))) struct BackPressureTests {
    static let ticker: BluetoothUUID = 0xFFD1

    /// Offered from the stack's own thread (so the drain cannot run between offers), exactly
    /// `updateQueueLimit` values are taken and the next is refused; the ready event follows once
    /// the queue has drained, and the central receives every value taken, in order, and no other.
    @Test func aFullQueueRefusesThenReportsReadyAndLosesNothing() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let services = [GATTService(uuid: 0xFFD0, characteristics: [
            GATTCharacteristic(uuid: Self.ticker, properties: [.read, .notify], value: [0x00, 0x00]),
        ])]
        let peripheral = try await Peripheral.open(transports[0], services: services, name: "queue")
        try await peripheral.startAdvertising(AdvertisingOptions(name: "queue", restartAfterDisconnection: false))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: "queue"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        let tree = try #require(try await remote.discoverAll().first { $0.service.uuid == 0xFFD0 })
        let c = try #require(tree.characteristics.first?.characteristic)
        let values = try await remote.notifications(for: c, bufferLimit: 4096)
        var events = peripheral.events.makeAsyncIterator()
        while let e = await events.next() {
            if case .subscribed = e { break }
        }

        let limit = Peripheral.updateQueueLimit
        let (taken, refusedNext) = try await withTaskExecutorPreference(peripheral.executor.taskExecutor) {
            var taken = 0
            while taken < limit + 1, try peripheral.updateValue([UInt8(taken & 0xFF), UInt8(taken >> 8)], for: Self.ticker) { taken += 1 }
            return (taken, peripheral.canUpdateValue == false)
        }
        #expect(taken == limit)
        #expect(refusedNext)
        while let e = await events.next(), e != .readyToUpdateSubscribers {}
        #expect(peripheral.canUpdateValue)
        // Longer than ATT_MTU − 3 for the subscriber (Core v5.4 Vol 3 Part F 3.4.7.1): refused, not
        // cut. (Checked while subscribed: leaving the loop below unsubscribes the central.)
        let maximum = try #require(await peripheral.maximumUpdateValueLength(for: peripheral.subscribers(of: Self.ticker)[0]))
        #expect(throws: BLEError.self) { _ = try peripheral.updateValue(Array(repeating: 0, count: maximum + 1), for: Self.ticker) }
        var received: [[UInt8]] = []
        for try await v in values {
            received.append(v)
            if received.count == limit { break }
        }
        #expect(received == (0..<limit).map { [UInt8($0 & 0xFF), UInt8($0 >> 8)] })
        await central.close()
        await peripheral.close()
        #expect(try peripheral.updateValue([0x01], for: Self.ticker) == false)
    }

    /// The same for Write Commands from the central: 64 taken, the next refused, the ready event
    /// in `Central.events`, and the peripheral hears every command taken, in order (Write
    /// Command, Core v5.4 Vol 3 Part F 3.4.5.3: no response, so nothing else tells them apart).
    @Test func aFullWriteQueueRefusesThenReportsReadyAndLosesNothing() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let sink: BluetoothUUID = 0xFFD2
        let services = [GATTService(uuid: 0xFFD0, characteristics: [
            GATTCharacteristic(uuid: sink, properties: [.writeWithoutResponse], value: []),
        ])]
        let peripheral = try await Peripheral.open(transports[0], services: services, name: "writes")
        try await peripheral.startAdvertising(AdvertisingOptions(name: "writes", restartAfterDisconnection: false))
        let central = try await Central.open(transports[1])
        var centralEvents = central.events.makeAsyncIterator()
        let adv = try await central.find(ScanFilter(nameContains: "writes"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        let tree = try #require(try await remote.discoverAll().first { $0.service.uuid == 0xFFD0 })
        let c = try #require(tree.characteristics.first?.characteristic)
        var peripheralEvents = peripheral.events.makeAsyncIterator()

        let limit = 64
        #expect(remote.canSendWriteWithoutResponse)
        let taken = try await withTaskExecutorPreference(central.executor.taskExecutor) {
            var taken = 0
            while taken < limit + 1, try remote.sendWriteWithoutResponse([UInt8(taken)], to: c) { taken += 1 }
            return taken
        }
        #expect(taken == limit)
        while let e = await centralEvents.next(), e != .readyToSendWriteWithoutResponse(connection: remote.connectionHandle) {}
        #expect(remote.canSendWriteWithoutResponse)
        var written: [[UInt8]] = []
        while written.count < limit, let e = await peripheralEvents.next() {
            if case .wrote(_, sink, let value) = e { written.append(value) }
        }
        #expect(written == (0..<limit).map { [UInt8($0)] })
        // ATT_MTU − 3 is the most a Write Command carries (Core v5.4 Vol 3 Part F 3.4.5.3).
        #expect(throws: BLEError.self) { _ = try remote.sendWriteWithoutResponse(Array(repeating: 0, count: remote.mtu - 2), to: c) }
        await central.close()
        await peripheral.close()
        #expect(remote.canSendWriteWithoutResponse == false)
    }
}
