import Dispatch
import Testing
import TestSupport
import HCI
import ATT
import GATT
import VirtualController
@testable import BLE

/// Issue 25: a peripheral's asynchronous handler that waits holds up neither the host's loop nor
/// another central's link; one that never answers gets the central an Error Response in time.
/// One peripheral, two centrals, on the in-process virtual link.
@Suite(.timeLimit(.minutes(1))) struct AsyncHandlerStackTests {
    static let slow: BluetoothUUID = 0xFFB1, stored: BluetoothUUID = 0xFFB2

    /// A one-shot signal: `wait` returns once `signal` was called (before or after).
    struct Signal: Sendable {
        let stream: AsyncStream<Void>
        let continuation: AsyncStream<Void>.Continuation
        init() { (stream, continuation) = AsyncStream<Void>.makeStream() }
        func signal() { continuation.finish() }
        func wait() async { for await _ in stream {} }
    }

    /// The peripheral serving `slow` (asynchronous) and `stored`, and two connected centrals with
    /// the handle of each characteristic.
    func setUp(slowRead: @escaping GATTAsyncReadHandler, options: StackOptions = StackOptions())
        async throws -> (peripheral: Peripheral, centrals: [Central], links: [RemotePeripheral], slow: UInt16, stored: UInt16) {
        let (_, transports) = VirtualLink.inProcess(count: 3)
        let services = [GATTService(uuid: 0xFFB0, characteristics: [
            GATTCharacteristic(uuid: Self.slow, properties: [.read], asyncRead: slowRead),
            GATTCharacteristic(uuid: Self.stored, properties: [.read], value: [0x24]),
        ])]
        let peripheral = try await Peripheral.open(transports[0], services: services, name: "async", options: options)
        var centrals: [Central] = [], links: [RemotePeripheral] = []
        for t in transports[1...] {
            // One connection per advertising run: the set stops when a central connects.
            try await peripheral.startAdvertising(AdvertisingOptions(name: "async", restartAfterDisconnection: false))
            let central = try await Central.open(t, options: options)
            let adv = try await central.find(ScanFilter(nameContains: "async"), timeout: .seconds(5))
            links.append(try await central.connect(to: adv.address))
            centrals.append(central)
        }
        let characteristics = try #require(try await links[0].discoverAll().first { $0.service.uuid == 0xFFB0 }?.characteristics)
        let slow = try #require(characteristics.first { $0.characteristic.uuid == Self.slow }?.characteristic.valueHandle)
        let stored = try #require(characteristics.first { $0.characteristic.uuid == Self.stored }?.characteristic.valueHandle)
        return (peripheral, centrals, links, slow, stored)
    }

    func tearDown(_ peripheral: Peripheral, _ centrals: [Central]) async {
        for c in centrals { await c.close() }
        await peripheral.close()
    }

    /// While the first central's read is in a handler that blocks its thread, the second
    /// central's read on the same peripheral is answered (the three hosts share the virtual
    /// link's one thread: a handler run there would stop them all until its wait gave up,
    /// and it would then answer 0xEE); then the first gets the handler's value.
    @Test func aBlockingHandlerHoldsUpNoOtherLink() async throws {
        let entered = Signal()
        let release = DispatchSemaphore(value: 0)
        let (peripheral, centrals, links, slow, stored) = try await setUp(slowRead: { _ in
            entered.signal()
            return release.wait(timeout: .now() + 10) == .success ? [0x42] : [0xEE]
        })
        let first = links[0]
        let pending = Task { try await first.read(handle: slow) }
        await entered.wait()
        #expect(try await links[1].read(handle: stored) == [0x24])
        release.signal()
        #expect(try await pending.value == [0x42])
        await tearDown(peripheral, centrals)
    }

    /// A handler that does not answer within `asyncHandlerTimeout` is cancelled and the central is
    /// answered Unlikely Error (0x0E, Core v5.4 Vol 3 Part F 3.4.1.1) with the attribute's handle,
    /// before its 30 s transaction timeout (3.3.3) would close the bearer: the link stays usable.
    @Test func aHandlerPastItsTimeoutIsCancelledAndAnsweredUnlikelyError() async throws {
        var options = StackOptions()
        options.asyncHandlerTimeout = .milliseconds(300)
        let cancelled = Signal()
        let (peripheral, centrals, links, slow, stored) = try await setUp(slowRead: { _ in
            let (never, held) = AsyncStream<Void>.makeStream()  // nothing is ever yielded
            for await _ in never {}  // until the handler's task is cancelled
            withExtendedLifetime(held) {}
            if Task.isCancelled { cancelled.signal() }
            return [0x01]
        }, options: options)
        await #expect(throws: BLEError.att(ATTError(.unlikelyError, requestOpcode: .readRequest, handle: slow))) {
            _ = try await links[0].read(handle: slow)
        }
        await cancelled.wait()
        #expect(try await links[0].read(handle: stored) == [0x24])
        await tearDown(peripheral, centrals)
    }
}
