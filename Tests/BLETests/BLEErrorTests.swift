import Testing
import TestSupport
import VirtualController
import Host
@testable import BLE

/// Issue 25: one public error type at the `BLE` boundary, the cause as its case. The same
/// disconnection is `.disconnected(reason)` from a read in flight, a stream and a later call;
/// what the layers below fail with arrives mapped, in their words.
@Suite(.timeLimit(.minutes(1))) struct BLEErrorTests {
    static let hold: BluetoothUUID = 0xFFC1, notifying: BluetoothUUID = 0xFFC2

    /// A peripheral serving `services` and a central connected to it on the in-process link.
    func connected(_ services: [GATTService], name: String) async throws -> (Peripheral, Central, RemotePeripheral) {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: services, name: name)
        try await peripheral.startAdvertising(AdvertisingOptions(name: name, restartAfterDisconnection: false))
        let central = try await Central.open(transports[1])
        let adv = try await central.find(ScanFilter(nameContains: name), timeout: .seconds(5))
        return (peripheral, central, try await central.connect(to: adv.address))
    }

    /// A read waiting in the peripheral's handler, a notification stream and a later read: the
    /// peripheral disconnects with Remote User Terminated Connection (0x13), which is the reason
    /// the central's controller reports (HCI Disconnect, Core v5.4 Vol 4 Part E 7.1.6: the
    /// remote side is told the reason given), and all three fail with `.disconnected(0x13)`.
    @Test func oneDisconnectionIsOneErrorEverywhere() async throws {
        let entered = AsyncHandlerStackTests.Signal()
        let services = [GATTService(uuid: 0xFFC0, characteristics: [
            GATTCharacteristic(uuid: Self.hold, properties: [.read], asyncRead: { _ in
                entered.signal()
                try await Task.sleep(for: .seconds(20))  // until cancelled by the disconnection
                return [0x00]
            }),
            GATTCharacteristic(uuid: Self.notifying, properties: [.read, .notify], value: [0x01]),
        ])]
        let (peripheral, central, remote) = try await connected(services, name: "errors")
        let tree = try #require(try await remote.discoverAll().first { $0.service.uuid == 0xFFC0 })
        let hold = try #require(tree.characteristics.first { $0.characteristic.uuid == Self.hold }?.characteristic)
        let notifying = try #require(tree.characteristics.first { $0.characteristic.uuid == Self.notifying }?.characteristic)
        let values = try await remote.notifications(for: notifying)
        #expect(await remote.isNotifying(notifying))
        let reading = Task { try await remote.read(hold) }
        await entered.wait()
        let connection = try #require(await peripheral.subscribers(of: Self.notifying).first)
        #expect(HCIStatus.remoteUserTerminated.rawValue == 0x13)
        _ = try await peripheral.disconnect(connection: connection, reason: .remoteUserTerminated)

        await #expect(throws: BLEError.disconnected(.remoteUserTerminated)) { _ = try await reading.value }
        await #expect(throws: BLEError.disconnected(.remoteUserTerminated)) { for try await _ in values {} }
        await #expect(throws: BLEError.disconnected(.remoteUserTerminated)) { _ = try await remote.read(notifying) }
        #expect(await remote.isNotifying(notifying) == false)
        await central.close()
        await peripheral.close()
    }

    /// `isNotifying` follows the subscription: false before, true once `notifications(for:)`
    /// returned (the CCCD written, Core v5.4 Vol 3 Part G 4.10.1), false after `stopNotifications`.
    @Test func isNotifyingFollowsTheSubscription() async throws {
        let services = [GATTService(uuid: 0xFFC0, characteristics: [
            GATTCharacteristic(uuid: Self.notifying, properties: [.read, .notify], value: [0x01]),
        ])]
        let (peripheral, central, remote) = try await connected(services, name: "notifying")
        let tree = try #require(try await remote.discoverAll().first { $0.service.uuid == 0xFFC0 })
        let c = try #require(tree.characteristics.first?.characteristic)
        #expect(await remote.isNotifying(c) == false)
        let values = try await remote.notifications(for: c)
        #expect(await remote.isNotifying(c))
        try await remote.stopNotifications(for: c)
        #expect(await remote.isNotifying(c) == false)
        _ = values
        await central.close()
        await peripheral.close()
    }

    /// A connect nobody answers ends with `.timeout`, after the host cancelled it (LE Create
    /// Connection Cancel, Core v5.4 Vol 4 Part E 7.8.13).
    @Test func aConnectNobodyAnswersIsATimeout() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 1)
        let central = try await Central.open(transports[0])
        let absent = DeviceAddress(BDAddress([0xC6, 0x05, 0x04, 0x03, 0x02, 0x01]), type: .random)
        await #expect {
            _ = try await central.connect(to: absent, timeout: .milliseconds(200))
        } throws: { error in
            guard case BLEError.timeout(let what)? = error as? BLEError else { return false }
            return what.contains("timed out")
        }
        await central.close()
    }

    /// The layers' errors, mapped to their cause and kept in their words.
    @Test func lowerLayerErrorsMapToTheirCause() {
        let att = ATTError(.readNotPermitted, requestOpcode: .readRequest, handle: 0x0003)
        #expect(BLEError(att) == .att(att))
        #expect(BLEError(att).description == att.description)
        #expect(BLEError(HostError.disconnected(handle: 0x0040, reason: .connectionTimeout)) == .disconnected(.connectionTimeout))
        #expect(BLEError(HostError.unknownConnection(0x0040)) == .disconnected(.unknownConnectionIdentifier))
        let lost = TransportError(.lost, "the controller closed the socket")
        #expect(BLEError(HostError.transportLost(lost)) == .transport(lost))
        #expect(BLEError(lost) == .transport(lost))
        let timeout = ATTBearerError.transactionTimeout("Read Request")
        #expect(BLEError(timeout) == .timeout(timeout.description))
        let refused = HCIError(.commandDisallowed, opcode: nil)
        #expect(BLEError(refused) == .hci(refused))
        #expect(BLEError(BLEError.closed) == .closed)
    }
}
