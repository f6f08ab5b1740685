import Synchronization
import Testing
import TestSupport
import HCI
import GATT
import Capture
import Transport
import VirtualController
@testable import BLE

/// Issue 30: Enhanced ATT bearers (Core v5.4 Vol 3 Part G 5.3.2) between our central and our
/// peripheral on the in-process virtual link (27-octet ACL buffers: K-frames are fragmented).
@Suite(.timeLimit(.minutes(1))) struct EnhancedATTStackTests {
    static let long = BluetoothUUID(string: "6e400010-b5a3-f393-e0a9-e50e24dcca9e")!
    static let longValue = (0..<600).map { UInt8(truncatingIfNeeded: $0 &* 3) }
    static let services = [GATTService(uuid: 0xFFA0, characteristics: [
        GATTCharacteristic(uuid: long, properties: [.read, .write], value: longValue),
        GATTCharacteristic(uuid: 0xFFA2, properties: [.read], value: [0x42]),
        GATTCharacteristic(uuid: 0xFFA3, properties: [.read, .notify], value: [7]),
    ])]

    func connected(eatt: Bool) async throws -> (Central, Peripheral, RemotePeripheral) {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        var options = StackOptions()
        options.enhancedATT = eatt
        let peripheral = try await Peripheral.open(transports[0], services: Self.services, name: "eatt", options: options)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "eatt"))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: "eatt"), timeout: .seconds(5))
        return (central, peripheral, try await central.connect(to: adv.address))
    }

    @Test func bearersCarryConcurrentRequestsAndTheServerAnswersOnEach() async throws {
        let (central, peripheral, remote) = try await connected(eatt: true)
        // Three bearers in one request (Part A 4.25); the link is paired first (Part G 5.3.2).
        let opened = try await remote.openEnhancedATT(count: 3)
        #expect(opened.bearers == 3 && opened.mtu == 517)
        let tree = try await remote.discoverAll()
        let chars = tree.flatMap(\.characteristics).map(\.characteristic)
        // Server Supported Features, bit 0: EATT supported (Part G 7.4).
        let features = try #require(chars.first { $0.uuid == GATTUUID.serverSupportedFeatures })
        #expect(try await remote.read(features) == [0x01])
        // The central set Client Supported Features bits 1 (EATT) and 2 (Multiple Handle Value
        // Notifications) when it opened the bearers (Part G 7.2): this client's value reads so.
        let clientFeatures = try #require(chars.first { $0.uuid == GATTUUID.clientSupportedFeatures })
        #expect(try await remote.read(clientFeatures) == [0x06])
        let long = try #require(chars.first { $0.uuid == Self.long })
        try await withThrowingTaskGroup(of: [UInt8].self) { group in
            for _ in 0..<6 { group.addTask { try await remote.read(long) } }
            for try await value in group { #expect(value == Self.longValue) }
        }
        let small = try #require(chars.first { $0.uuid == BluetoothUUID(0xFFA2 as UInt16) })
        let notifying = try #require(chars.first { $0.uuid == BluetoothUUID(0xFFA3 as UInt16) })
        // Read Multiple Variable Length (Part G 4.8.5): whole values, the long one completed.
        #expect(try await remote.readValues(of: [small, long, notifying]) == [[0x42], Self.longValue, [7]])
        // A write and a notification while the bearers are open.
        try await remote.write([1, 2, 3], to: long)
        #expect(try await remote.read(long) == [1, 2, 3])
        let values = try await remote.notifications(for: notifying)
        try await peripheral.executor.until("a subscriber") { peripheral.subscribers(of: 0xFFA3).count == 1 }
        try await peripheral.notify([9], for: notifying.uuid)
        var it = values.makeAsyncIterator()
        #expect(try await it.next() == [9])
        await central.close()
        await peripheral.close()
    }

    /// A peripheral without EATT has no listener on PSM 0x0027: the request is refused with
    /// "SPSM not supported" (0x0002, Part A 4.26), and the unenhanced bearer goes on alone.
    @Test func withoutEATTTheRequestIsRefusedAndCID4GoesOn() async throws {
        let (central, peripheral, remote) = try await connected(eatt: false)
        do {
            _ = try await remote.openEnhancedATT(count: 2)
            Issue.record("opened Enhanced ATT bearers to a peripheral without EATT")
        } catch BLEError.refused(let why) {
            #expect(why.contains("SPSM not supported"), "\(why)")
        }
        let chars = try await remote.discoverAll().flatMap(\.characteristics).map(\.characteristic)
        #expect(!chars.contains { $0.uuid == GATTUUID.serverSupportedFeatures })
        let small = try #require(chars.first { $0.uuid == BluetoothUUID(0xFFA2 as UInt16) })
        #expect(try await remote.read(small) == [0x42])
        await central.close()
        await peripheral.close()
    }

    /// Hostile SDUs on an Enhanced ATT bearer, sent on a raw enhanced credit-based channel to
    /// PSM 0x0027, are answered as on CID 0x0004 (Core v5.4 Vol 3 Part F 3.4.1.1): a truncated
    /// request gets Invalid PDU (0x04), an unknown request Request Not Supported (0x06), an
    /// Exchange MTU Request (not used on an Enhanced ATT bearer, 3.4.2.1) Request Not Supported;
    /// commands and notifications that are malformed get nothing; a request the server knows
    /// is answered after all of them.
    @Test func hostileSDUsOnAnEnhancedBearerAreAnsweredPerSpec() async throws {
        let (central, peripheral, remote) = try await connected(eatt: true)
        _ = try await remote.pair()
        let raw = try #require(try await remote.openL2CAPChannels(psm: 0x0027, count: 1).first)
        func exchange(_ sdu: [UInt8]) async throws -> [UInt8]? {
            try await raw.send(sdu)
            return try await raw.receive()
        }
        func errorResponse(_ opcode: UInt8, _ handle: UInt16, _ code: UInt8) -> [UInt8] {
            [0x01, opcode, UInt8(handle & 0xFF), UInt8(handle >> 8), code]
        }
        #expect(try await exchange([0x0A]) == errorResponse(0x0A, 0, 0x04))
        #expect(try await exchange([0x3F, 1, 2]) == errorResponse(0x3F, 0, 0x06))
        #expect(try await exchange([0x02, 0x05, 0x02]) == errorResponse(0x02, 0, 0x06))
        // No answer to a malformed Write Command or an empty SDU (3.3: commands are not answered).
        try await raw.send([0x52, 0x01])
        try await raw.send([])
        var rng = SeededGenerator(seed: 0xEA77)
        for _ in 0..<200 {
            // Commands (bit 6 set) other than Write Command (0x52, which would write), Signed
            // Write Commands without a key to sign them, and notifications: nothing is owed an answer.
            var opcode = [UInt8(0xD2), 0x1B, 0x23, 0x40 | UInt8.random(in: 0...0x3F, using: &rng)].randomElement(using: &rng)!
            if opcode == 0x52 { opcode = 0x72 }
            try await raw.send([opcode] + (0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
        }
        // Read Request (0x0A) for Device Name (handle 3): Read Response (0x0B) with "eatt".
        #expect(try await exchange([0x0A, 0x03, 0x00]) == [0x0B] + Array("eatt".utf8))
        #expect(peripheral.server.value(of: Self.long) == Self.longValue)
        await central.close()
        await peripheral.close()
    }

    /// An asynchronous read handler answers over an Enhanced ATT bearer; one that never
    /// answers is cancelled after `asyncHandlerTimeout` and the central gets Unlikely Error
    /// (0x0E, Core v5.4 Vol 3 Part F 3.4.1.1) with the handle, on the same bearer, which stays
    /// usable (the PDUs held meanwhile are served after it).
    @Test func asynchronousHandlersAnswerOnTheBearerWithinTheirTimeout() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        var options = StackOptions()
        options.enhancedATT = true
        options.asyncHandlerTimeout = .milliseconds(300)
        let cancelled = AsyncHandlerStackTests.Signal()
        let services = [GATTService(uuid: 0xFFC0, characteristics: [
            GATTCharacteristic(uuid: 0xFFC1, properties: [.read], asyncRead: { _ in [0x5A] }),
            GATTCharacteristic(uuid: 0xFFC2, properties: [.read], asyncRead: { _ in
                let (never, held) = AsyncStream<Void>.makeStream()
                for await _ in never {}  // until the handler's task is cancelled
                withExtendedLifetime(held) {}
                if Task.isCancelled { cancelled.signal() }
                return [0x01]
            }),
        ])]
        let peripheral = try await Peripheral.open(transports[0], services: services, name: "eatt-async", options: options)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "eatt-async"))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: "eatt-async"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        #expect(try await remote.openEnhancedATT(count: 1).bearers == 1)
        let chars = try await remote.discoverAll().flatMap(\.characteristics).map(\.characteristic)
        let quick = try #require(chars.first { $0.uuid == BluetoothUUID(0xFFC1 as UInt16) })
        let never = try #require(chars.first { $0.uuid == BluetoothUUID(0xFFC2 as UInt16) })
        #expect(try await remote.read(quick) == [0x5A])
        await #expect(throws: BLEError.att(ATTError(.unlikelyError, requestOpcode: .readRequest, handle: never.valueHandle))) {
            _ = try await remote.read(never)
        }
        await cancelled.wait()
        #expect(try await remote.read(quick) == [0x5A])
        await central.close()
        await peripheral.close()
    }

    /// A central that set bit 2 of Client Supported Features (ours does when it opens Enhanced
    /// ATT bearers, Part G 7.2) gets values of several characteristics in one Multiple Handle
    /// Value Notification (opcode 0x23, Part F 3.4.7.4: handle, length, value each), seen in
    /// the frames its controller delivered, and each value reaches its stream.
    @Test func multipleHandleValueNotificationsGoToAClientThatTakesThem() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        var options = StackOptions()
        options.enhancedATT = true
        let services = [GATTService(uuid: 0xFFD0, characteristics: [
            GATTCharacteristic(uuid: 0xFFD1, properties: [.notify]),
            GATTCharacteristic(uuid: 0xFFD2, properties: [.notify]),
        ])]
        let peripheral = try await Peripheral.open(transports[0], services: services, name: "mhvn", options: options)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "mhvn"))
        let received = Mutex<[[UInt8]]>([])
        let capturing = CapturingTransport(transports[1], observer: { direction, packet, _ in
            if direction == .received, case .acl(let acl) = packet { received.withLock { $0.append(acl.data) } }
        })
        let central = try await Central.open(capturing)
        let adv = try await central.find(ScanFilter(nameContains: "mhvn"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        _ = try await remote.openEnhancedATT(count: 1)
        let chars = try await remote.discoverAll().flatMap(\.characteristics).map(\.characteristic)
        let a = try #require(chars.first { $0.uuid == BluetoothUUID(0xFFD1 as UInt16) })
        let b = try #require(chars.first { $0.uuid == BluetoothUUID(0xFFD2 as UInt16) })
        let aValues = try await remote.notifications(for: a), bValues = try await remote.notifications(for: b)
        try await peripheral.executor.until("two subscriptions") {
            peripheral.subscribers(of: 0xFFD1).count == 1 && peripheral.subscribers(of: 0xFFD2).count == 1
        }
        #expect(await peripheral.notifyMultiple([(a.uuid, [0x11]), (b.uuid, [0x22, 0x23])]) == [remote.connectionHandle])
        var ia = aValues.makeAsyncIterator(), ib = bValues.makeAsyncIterator()
        #expect(try await ia.next() == [0x11])
        #expect(try await ib.next() == [0x22, 0x23])
        // L2CAP length 12 (1 + 5 + 6), CID 0x0004, opcode 0x23, then (handle, length 1, 11), (handle, length 2, 22 23).
        let le = { (h: UInt16) in [UInt8(h & 0xFF), UInt8(h >> 8)] }
        let expected: [UInt8] = [12, 0, 0x04, 0x00, 0x23] + le(a.valueHandle) + [1, 0, 0x11] + le(b.valueHandle) + [2, 0, 0x22, 0x23]
        #expect(received.withLock { $0.contains(expected) }, "no Multiple Handle Value Notification received: \(received.withLock { $0.filter { $0.count > 4 && $0[2] == 4 } })")
        await central.close()
        await peripheral.close()
    }
}
