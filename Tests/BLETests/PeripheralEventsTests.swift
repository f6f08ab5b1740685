// `Peripheral.events` (PeripheralEvents): one consumer, events in order, the newest `limit`
// kept when nobody reads (as the `AsyncStream` with `.bufferingNewest` it replaced), the end
// after the queued events, and a cancelled consumer released.
import Testing
import TestSupport
import HCI
@testable import BLE

@Suite(.timeLimit(.minutes(1))) struct PeripheralEventsTests {
    func read(_ handle: UInt16) -> PeripheralEvent { .read(connection: handle, characteristic: BluetoothUUID(UInt16(0xFFF2))) }

    @Test func keepsTheNewestEventsInOrderThenEnds() async {
        let storage = PeripheralEvents.Storage(limit: 4)
        for h in UInt16(1)...6 { storage.yield(read(h)) }   // nobody reads: 1 and 2 are dropped
        storage.finish()
        storage.yield(read(7))                              // after the end: ignored
        var seen: [PeripheralEvent] = []
        for await e in PeripheralEvents(storage: storage) { seen.append(e) }
        #expect(seen == (UInt16(3)...6).map(read))
    }

    @Test func keepsTheNewestInOrderAfterManyDrops() async {
        let storage = PeripheralEvents.Storage(limit: 3)
        for h in UInt16(1)...10 { storage.yield(read(h)) }  // the oldest dropped seven times
        storage.finish()
        var seen: [PeripheralEvent] = []
        for await e in PeripheralEvents(storage: storage) { seen.append(e) }
        #expect(seen == (UInt16(8)...10).map(read))
    }

    @Test func aWaitingConsumerGetsEachEventThenTheEnd() async throws {
        let storage = PeripheralEvents.Storage(limit: 4)
        let got = Watched(0)
        let consumer = Task { () -> [PeripheralEvent] in
            var seen: [PeripheralEvent] = []
            for await e in PeripheralEvents(storage: storage) {
                seen.append(e)
                got.withLock { $0 += 1 }
            }
            return seen
        }
        // Each event once the consumer has the one before (and waits again).
        for h in UInt16(1)...10 {
            storage.yield(read(h))
            try await got.until("event \(h) taken") { $0 == Int(h) }
        }
        storage.finish()
        #expect(await consumer.value == (UInt16(1)...10).map(read))
    }

    @Test func aCancelledConsumerEnds() async {
        let storage = PeripheralEvents.Storage(limit: 4)
        let consumer = Task { () -> Int in
            var n = 0
            for await _ in PeripheralEvents(storage: storage) { n += 1 }
            return n
        }
        consumer.cancel()
        #expect(await consumer.value == 0)
    }
}
