import Testing
import HCI
import Host
import VirtualController

/// The host's encryption procedures on the Swift virtual link (Core Vol 6 Part B 5.1.3;
/// HCI Vol 4 Part E 7.8.24-26, 7.7.8, 7.7.39, 7.5.7).
@Suite(.timeLimit(.minutes(1))) struct HostEncryptionTests {
    struct Linked {
        let central: Host, peripheral: Host
        let toPeripheral: LEConnection
        var events: AsyncStream<HostEvent>.Iterator
    }

    func link() async throws -> Linked {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = Host(transport: transports[0])
        let central = Host(transport: transports[1])
        let info = try await peripheral.start()
        _ = try await central.start()
        try await peripheral.startAdvertising(AdvertisingParameters(data: [0x02, 0x01, 0x06]))
        let connection = try await central.connect(to: DeviceAddress(info.address, type: .public))
        var events = peripheral.events.makeAsyncIterator()
        while let e = await events.next() { if case .connected = e { break } }
        return Linked(central: central, peripheral: peripheral, toPeripheral: connection, events: events)
    }

    static let ltk: [UInt8] = Array(1...16)

    /// LE Enable Encryption → the peripheral host's LTK request (EDIV/Rand as sent) → reply with
    /// the same key → Encryption Change on both; a second start is a Key Refresh.
    @Test func encryptAnswerAndReadKeySize() async throws {
        var l = try await link()
        let central = l.central, handle = l.toPeripheral.handle
        async let started: Void = central.startEncryption(handle: handle, ltk: Self.ltk, ediv: 0x1234, rand: 0x0102030405060708)
        var request: (UInt16, UInt64, UInt16)? = nil
        while let e = await l.events.next() { if case let .longTermKeyRequest(h, r, ed) = e { request = (h, r, ed); break } }
        let (pHandle, rand, ediv) = try #require(request)
        #expect(ediv == 0x1234 && rand == 0x0102030405060708)
        try await l.peripheral.replyLongTermKey(handle: pHandle, ltk: Self.ltk)
        try await started
        while let e = await l.events.next() { if case let .encryptionChanged(_, enabled, status) = e { #expect(enabled && status == .success); break } }
        #expect(try await central.readEncryptionKeySize(handle: handle) == 16)

        // Already encrypted: the same procedure refreshes the key (Encryption Key Refresh Complete).
        let refreshed = Task { try await central.startEncryption(handle: handle, ltk: Self.ltk, ediv: 0x1234, rand: 0x0102030405060708) }
        while let e = await l.events.next() { if case .longTermKeyRequest = e { break } }
        try await l.peripheral.replyLongTermKey(handle: pHandle, ltk: Self.ltk)
        try await refreshed.value
        await central.close()
        await l.peripheral.close()
    }

    /// The peripheral has no key: negative reply; the central's controller reports PIN or Key
    /// Missing (0x06) and `startEncryption` throws it by name, the link stays up.
    @Test func negativeReplyIsKeyMissing() async throws {
        var l = try await link()
        let central = l.central, handle = l.toPeripheral.handle
        let started = Task { try await central.startEncryption(handle: handle, ltk: Self.ltk, ediv: 1, rand: 2) }
        var pHandle: UInt16? = nil
        while let e = await l.events.next() { if case let .longTermKeyRequest(h, _, _) = e { pHandle = h; break } }
        try await l.peripheral.replyLongTermKey(handle: try #require(pHandle), ltk: nil)
        await #expect(throws: HostError.encryptionFailed(handle: handle, status: .pinOrKeyMissing)) { try await started.value }
        #expect(await central.connection(handle) != nil)
        // Not encrypted: Read Encryption Key Size is refused with the controller's status.
        await #expect(throws: HCIError.self) { _ = try await central.readEncryptionKeySize(handle: handle) }
        await central.close()
        await l.peripheral.close()
    }
}
