import Testing
import TestSupport
import HCI
import GATT
import VirtualController
@testable import BLE

/// Issue 27: `Peripheral.open(sharing:)`, both roles on one host and one controller (what
/// `ble-hci shell` and `session` run on). On the in-process virtual link.
@Suite(.timeLimit(.minutes(1))) struct SharedStackTests {
    /// Host 0 is a central connected to host 1's peripheral and, on the same controller, serves
    /// the demo profile to host 2's central. Each side reads what the other serves: fff2's
    /// starting value "ble-hci" and ffe1's "read only" (the demo profile of the CLI contract).
    /// Closing the shared peripheral stops only its advertising: the central's link stays up.
    @Test func aCentralAlsoServesAndAdvertises() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 3)
        let both = try await Central.open(transports[0])
        let other = try await Peripheral.open(transports[1], services: DemoProfile.services, name: "other")
        let visitor = try await Central.open(transports[2])
        try await other.startAdvertising(AdvertisingOptions(name: "other", serviceUUIDs: DemoProfile.advertisedServices))
        let toOther = try await both.connect(to: try await both.find(ScanFilter(nameContains: "other"), timeout: .seconds(5)).address)

        let served = await Peripheral.open(sharing: both, services: DemoProfile.services, name: "both")
        var events = served.events.makeAsyncIterator()
        try await served.startAdvertising(AdvertisingOptions(name: "both", serviceUUIDs: DemoProfile.advertisedServices))
        let adv = try await visitor.find(ScanFilter(nameContains: "both"), timeout: .seconds(5))
        // The shared peripheral advertises from the central's controller.
        #expect(adv.address == (await served.address))
        let toBoth = try await visitor.connect(to: adv.address)
        guard case .connected(let connection, _)? = await events.next() else {
            Issue.record("the shared peripheral heard no connection")
            return
        }
        #expect(try await toBoth.read(handle: try #require(await valueHandle(0xFFF2, on: toBoth))) == Array("ble-hci".utf8))
        // The central's own link, meanwhile, on the same controller.
        #expect(try await toOther.read(handle: try #require(await valueHandle(0xFFE1, on: toOther))) == Array("read only".utf8))
        // Central events are the central's links only (the visitor's link is the peripheral's).
        #expect(await both.connections.map(\.connectionHandle) == [toOther.connectionHandle])
        #expect(connection != toOther.connectionHandle)

        await served.close()
        #expect(await served.isAdvertising == false)
        #expect(toOther.disconnectReason == nil)
        #expect(try await toOther.read(handle: try #require(await valueHandle(0xFFF2, on: toOther))) == Array("ble-hci".utf8))
        await visitor.close()
        await both.close()
        await other.close()
    }

    private func valueHandle(_ uuid: BluetoothUUID, on remote: RemotePeripheral) async -> UInt16? {
        try? await remote.discoverAll().flatMap(\.characteristics).first { $0.characteristic.uuid == uuid }?.characteristic.valueHandle
    }
}
