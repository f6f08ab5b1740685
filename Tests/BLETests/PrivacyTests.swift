import Foundation
import Synchronization
import Testing
import StackTestSupport
import TestSupport
import HCI
import Host
import SMP
import VirtualController
@testable import BLE

/// Our privacy against our privacy on the in-process virtual link: both sides advertise / connect
/// from resolvable private addresses, bond (distributing IRK + identity address, Core Vol 3 Part
/// H 3.6.4–3.6.5), then recognise each other behind new RPAs after rotation.
@Suite(.timeLimit(.minutes(1))) struct PrivacyTests {
    /// An RPA per Core v5.4 Vol 6 Part B 1.3.2.2: a random address whose two most significant
    /// bits are 0b01, made from `irk` (hash = ah(IRK, prand), Vol 3 Part H 2.2.2).
    static func isRPA(_ a: DeviceAddress, of irk: [UInt8]?) -> Bool {
        guard let irk else { return false }
        return a.type == .random && a.address.bytes[0] & 0xC0 == 0x40 && SMPPrivacy.resolves(a.address, irk: irk)
    }

    @Test func bondedPeersRecogniseEachOtherBehindRotatingAddresses() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        // The peripheral keeps an RPA long enough to be found and connected to, also on a
        // loaded machine (with 2 s the RPA once changed between the scan and LE Create
        // Connection, while the whole suite ran: the connect then timed out, correctly); the
        // central's changes between its two connections.
        func options(_ delegate: RecordingPairingDelegate, rotation: Duration) -> StackOptions {
            var o = StackOptions()
            o.attTimeout = .seconds(5)
            o.security = SecurityTests.config()
            o.privacy = PrivacyOptions(rotation: rotation)
            o.pairingDelegate = delegate
            return o
        }
        let pd = RecordingPairingDelegate(), cd = RecordingPairingDelegate()
        let po = options(pd, rotation: .seconds(6)), co = options(cd, rotation: .milliseconds(200))
        let peripheral = try await Peripheral.open(transports[0], services: SecureProfile.services, name: "secure", options: po)
        let centralsSeen = Watched<[DeviceAddress]>([])
        let watcher = Task { for await e in peripheral.events { if case .connected(_, let c) = e { centralsSeen.withLock { $0.append(c) } } } }
        try await peripheral.startAdvertising(AdvertisingOptions(name: "secure", serviceUUIDs: SecureProfile.advertisedServices))
        let central = try await Central.open(transports[1], options: co)
        let peripheralIdentity = peripheral.identityAddress, centralIdentity = central.identityAddress

        let firstAddress = await peripheral.address
        #expect(firstAddress.type == .random && firstAddress.address.bytes[0] & 0xC0 == 0x40)
        #expect(firstAddress.address != peripheralIdentity.address)
        let adv = try await central.find(ScanFilter(nameContains: "secure"), timeout: .seconds(5))
        #expect(adv.address == firstAddress)
        #expect(adv.identity == nil, "no bond yet: nothing resolves it")
        try await central.stack.host.until("the scan stopped") { !$0.isScanning }
        var remote = try await central.connect(to: adv.address)
        _ = try await remote.pair()
        #expect(cd.paired.count == 1)
        try await pd.until("the peripheral paired") { $0.paired.count == 1 }

        // Each side's bond is filed under the other's identity address and holds the IRK that
        // resolves the RPA the other used on this link.
        let centralBonds = try await bondsOnDisk(try #require(co.security.bondDirectory), centralIdentity)
        let peripheralBonds = try await bondsOnDisk(try #require(po.security.bondDirectory), peripheralIdentity)
        let found = try centralBonds.bond(for: peripheralIdentity)
        let peripheralBond = try #require(found)
        #expect(Self.isRPA(firstAddress, of: peripheralBond.peerIRK))
        let firstCentral = try #require(centralsSeen.withLock { $0.first })
        #expect(firstCentral.address != centralIdentity.address)
        let foundCentral = try peripheralBonds.bond(for: centralIdentity)
        let centralBond = try #require(foundCentral)
        #expect(Self.isRPA(firstCentral, of: centralBond.peerIRK))
        try await remote.disconnect()

        // After rotation the peripheral advertises from a new RPA; the bond joined the central's
        // resolving list during the run, so its controller reports the identity, typed Public
        // Identity Address (Core v5.4 Vol 4 Part E 7.7.65.13), and scanning for it finds it.
        try await peripheral.stack.host.until("the peripheral's address rotated") { $0.advertisingAddress != firstAddress }
        let again = try await central.find(ScanFilter(address: peripheralIdentity.address), timeout: .seconds(5))
        #expect(again.address == DeviceAddress(peripheralIdentity.address, type: .publicIdentity))
        #expect(again.identity == peripheralIdentity)
        #expect(again.jsonFields.contains(.text("identityAddress", peripheralIdentity.address.description)))
        try await central.stack.host.until("the scan stopped") { !$0.isScanning }

        // Reconnected from a new central RPA too (its shorter rotation time has passed): both find
        // their bond (re-encryption, no pairing).
        remote = try await central.connect(to: again.address)
        let ff01 = try await SecurityTests().valueHandle(remote, SecureProfile.secret)
        #expect(try await remote.read(handle: ff01) == Array("secret".utf8))
        #expect(cd.paired.count == 1 && pd.paired.count == 1, "re-encrypted from the bonds, no second pairing")
        #expect(cd.events.contains(.encrypted(keySize: 16, bonded: true, authenticated: false)))
        try await centralsSeen.until("the second connection seen by the peripheral") { $0.count == 2 }
        let secondCentral = try #require(centralsSeen.withLock { $0.last })
        #expect(secondCentral != firstCentral && Self.isRPA(secondCentral, of: centralBond.peerIRK))
        try await remote.disconnect()
        watcher.cancel()
        await central.close()
        await peripheral.close()
    }

    /// Without privacy nothing changes: the identity address is used on air and no IRK is given.
    @Test func withoutPrivacyTheIdentityAddressIsUsed() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        var o = StackOptions()
        o.security = SecurityTests.config()
        let peripheral = try await Peripheral.open(transports[0], services: SecureProfile.services, name: "secure", options: o)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "secure"))
        #expect(await peripheral.address == peripheral.identityAddress)
        let central = try await Central.open(transports[1], options: o)
        let adv = try await central.find(ScanFilter(nameContains: "secure"), timeout: .seconds(5))
        let remote = try await central.connect(to: adv.address)
        _ = try await remote.pair()
        let dir = try #require(o.security.bondDirectory)
        let bonds = try await bondsOnDisk(dir, central.identityAddress)
        #expect(try bonds.bond(for: peripheral.identityAddress)?.peerIRK == nil)
        try await remote.disconnect()
        await central.close()
        await peripheral.close()
    }
}
