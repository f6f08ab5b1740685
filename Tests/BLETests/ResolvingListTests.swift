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

/// Issue 30: privacy through the controller. A bonded peer's IRK goes into the controller's
/// resolving list when the stack opens (Core v5.4 Vol 6 Part B 6; Vol 4 Part E 7.8.38-7.8.44,
/// 7.8.77); the controller then reports the peer behind its RPA under its identity address,
/// typed Public Identity Address (0x02, 7.7.65.13). When the controller has no room or refuses,
/// a log line says so and the host resolves the RPA itself; either way the peer is reconnected
/// from the bond, without pairing again.
@Suite(.timeLimit(.minutes(1))) struct ResolvingListTests {
    /// Pairs a central with a privacy peripheral, then opens a second central on the same
    /// controller (so the same identity and bonds) after `prepare` configured that controller, and
    /// returns what it logged and found, having reconnected and read ff01 from the bond.
    func reconnect(prepare: (VirtualController) -> Void) async throws -> (log: [String], found: Advertisement) {
        let (link, transports) = VirtualLink.inProcess(count: 2)
        var po = StackOptions()
        po.security = SecurityTests.config()
        po.privacy = PrivacyOptions()
        let peripheral = try await Peripheral.open(transports[0], services: SecureProfile.services, name: "secure", options: po)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "secure", serviceUUIDs: SecureProfile.advertisedServices))
        var co = StackOptions()
        co.security = SecurityTests.config()
        let first = try await Central.open(transports[1], options: co)
        let adv = try await first.find(ScanFilter(nameContains: "secure"), timeout: .seconds(5))
        #expect(adv.address.type == .random && adv.address.address.bytes[0] & 0xC0 == 0x40, "the peripheral advertises from an RPA")
        try await first.stack.host.until("the scan stopped") { !$0.isScanning }
        let remote = try await first.connect(to: adv.address)
        _ = try await remote.pair()
        try await remote.disconnect()
        await first.close()
        await BondStores.flushAll(log: nil)

        prepare(link.controllers[1])
        let lines = Mutex<[String]>([])
        co.log = { line in lines.withLock { $0.append(line) } }
        let second = try await Central.open(InProcessTransport(controller: link.controllers[1]), options: co)
        let found = try await second.find(ScanFilter(address: peripheral.identityAddress.address), timeout: .seconds(5))
        try await second.stack.host.until("the scan stopped") { !$0.isScanning }
        let again = try await second.connect(to: found.address)
        let ff01 = try await SecurityTests().valueHandle(again, SecureProfile.secret)
        #expect(try await again.read(handle: ff01) == Array("secret".utf8), "read from the bond's encryption")
        try await again.disconnect()
        await second.close()
        await peripheral.close()
        return (lines.withLock { $0 }, found)
    }

    @Test func theControllerResolvesABondedPeer() async throws {
        let (log, found) = try await reconnect { _ in }
        #expect(!log.contains { $0.contains("resolving list") }, "\(log)")
        // Reported under the identity, typed Public Identity Address (the controller resolved it).
        #expect(found.address.type == .publicIdentity)
        #expect(found.identity?.address == found.address.address)
    }

    @Test func aFullResolvingListFallsBackToTheHost() async throws {
        let (log, found) = try await reconnect { $0.setResolvingList(capacity: 0) }
        #expect(log.contains { $0.contains("resolving list not used") && $0.contains("holds 0") }, "\(log)")
        #expect(found.address.type == .random, "the RPA as it was on air")
        #expect(found.identity != nil, "resolved by the host")
    }

    @Test func aRefusingControllerFallsBackToTheHost() async throws {
        let (log, found) = try await reconnect { $0.setResolvingList(capacity: 8, refusing: .unsupportedParameterValue) }
        #expect(log.contains { $0.contains("resolving list not used") && $0.contains("Unsupported Feature or Parameter Value") }, "\(log)")
        #expect(found.address.type == .random && found.identity != nil)
    }

    /// Issue 30: a bond made during the run joins both controllers' resolving lists at once
    /// (Core v5.4 Vol 4 Part E 7.8.38), so the reconnect in the same run is resolved by the
    /// central's controller (reported as Public Identity Address 0x02, 7.7.65.13), and the
    /// privacy peripheral's controller now makes its RPA from our IRK (Own_Address_Type 0x03,
    /// 7.8.5; Vol 6 Part B 1.3.2.2): a third device, with no bonds, hears an RPA that the
    /// peripheral's IRK resolves (SMP's ah) and that is not the one the host made.
    @Test func aBondMadeDuringTheRunJoinsTheListAtOnce() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 3)
        var po = StackOptions()
        po.security = SecurityTests.config()
        po.privacy = PrivacyOptions()
        let lines = Mutex<[String]>([])
        po.log = { line in lines.withLock { $0.append(line) } }
        let peripheral = try await Peripheral.open(transports[0], services: SecureProfile.services, name: "secure", options: po)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "secure", serviceUUIDs: SecureProfile.advertisedServices))
        var co = StackOptions()
        co.security = SecurityTests.config()
        co.privacy = PrivacyOptions()  // so it distributes an IRK, and the peripheral lists it
        let central = try await Central.open(transports[1], options: co)
        let adv = try await central.find(ScanFilter(nameContains: "secure"), timeout: .seconds(5))
        try await central.stack.host.until("the scan stopped") { !$0.isScanning }
        let remote = try await central.connect(to: adv.address)
        _ = try await remote.pair()
        try await remote.disconnect()
        try await central.stack.host.until("the central's list loaded with the new bond") { $0.usesResolvingList }
        try await peripheral.stack.host.until("the peripheral's list loaded") { $0.usesResolvingList }

        let found = try await central.find(ScanFilter(address: peripheral.identityAddress.address), timeout: .seconds(5))
        #expect(found.address.type == .publicIdentity, "resolved by the central's controller: \(found.address)")
        let privacy = try #require(peripheral.stack.privacy)
        let observer = try await Central.open(transports[2], options: StackOptions())
        let heard = try await observer.find(ScanFilter(nameContains: "secure"), timeout: .seconds(5))
        #expect(SMPPrivacy.resolves(heard.address.address, irk: privacy.identity.irk), "\(heard.address) is the peripheral's RPA")
        #expect(heard.address.address != privacy.currentAddress(), "made by the controller, not the host")
        #expect(await peripheral.address == heard.address, "the address the controller names (LE Read Local Resolvable Address, 7.8.43)")
        await observer.close()

        try await central.stack.host.until("the scan stopped") { !$0.isScanning }
        let again = try await central.connect(to: found.address)
        let ff01 = try await SecurityTests().valueHandle(again, SecureProfile.secret)
        #expect(try await again.read(handle: ff01) == Array("secret".utf8), "read from the bond's encryption")
        try await again.disconnect()
        await central.close()
        await peripheral.close()
        #expect(!lines.withLock { $0 }.contains { $0.contains("resolving list") || $0.contains("does not make") }, "\(lines.withLock { $0 })")
    }

    /// Directed advertising to a bonded central (ADV_DIRECT_IND, Advertising_Type 0x04, Core
    /// v5.4 Vol 4 Part E 7.8.5 / a legacy directed set, 7.8.53): the peripheral names the
    /// central's identity with Own_Address_Type 0x03, so its controller puts the central's RPA
    /// (from the IRK in its resolving list) in TargetA. Only the central, whose controller
    /// resolves TargetA with its own IRK, hears and connects to it (Vol 6 Part B 4.4.2, 6); a
    /// third scanner hears nothing of the peripheral.
    @Test func directedAdvertisingReachesTheBondedCentralOnly() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 3)
        var po = StackOptions()
        po.security = SecurityTests.config()
        po.privacy = PrivacyOptions()
        let peripheral = try await Peripheral.open(transports[0], services: SecureProfile.services, name: "secure", options: po)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "secure", restartAfterDisconnection: false))
        var co = StackOptions()
        co.security = SecurityTests.config()
        co.privacy = PrivacyOptions()
        let central = try await Central.open(transports[1], options: co)
        let adv = try await central.find(ScanFilter(nameContains: "secure"), timeout: .seconds(5))
        try await central.stack.host.until("the scan stopped") { !$0.isScanning }
        let remote = try await central.connect(to: adv.address)
        _ = try await remote.pair()
        try await remote.disconnect()
        try await peripheral.stack.host.until("the central in the peripheral's list") { $0.usesResolvingList }

        try await peripheral.startAdvertising(AdvertisingOptions(name: "secure", directedTo: central.identityAddress))
        let other = try await Central.open(transports[2], options: StackOptions())
        do {
            let overheard = try await other.find(ScanFilter(), timeout: .milliseconds(500))
            Issue.record("a directed PDU for another device was reported: \(overheard.address)")
        } catch BLEError.notFound {}
        await other.close()
        let found = try await central.find(ScanFilter(address: peripheral.identityAddress.address), timeout: .seconds(5))
        #expect(found.address.type == .publicIdentity && found.connectable)
        try await central.stack.host.until("the scan stopped") { !$0.isScanning }
        let again = try await central.connect(to: found.address)
        let ff01 = try await SecurityTests().valueHandle(again, SecureProfile.secret)
        #expect(try await again.read(handle: ff01) == Array("secret".utf8), "read from the bond's encryption")
        try await again.disconnect()
        await central.close()
        await peripheral.close()
    }

    /// The virtual controller's list as 7.8.38-7.8.41 and 7.8.77 say: a second entry for the same
    /// identity is Invalid HCI Command Parameters (0x12), one past the size Memory Capacity
    /// Exceeded (0x07), removing or setting the privacy mode of an absent one Unknown Connection
    /// Identifier (0x02), changing it while address resolution is on and scanning Command
    /// Disallowed (0x0C).
    @Test func listRulesOfTheVirtualController() async throws {
        let (link, transports) = VirtualLink.inProcess(count: 1)
        link.controllers[0].setResolvingList(capacity: 1)
        let host = Host(transport: transports[0])
        _ = try await host.start()
        func status(_ c: some HCICommand) async -> HCIStatus? {
            do { _ = try await host.execute(c); return nil } catch let e as HCIError { return e.status } catch { return .unspecifiedError }
        }
        let a = BDAddress([0xF0, 1, 2, 3, 4, 5]), b = BDAddress([0xC0, 1, 2, 3, 4, 5])
        let irk = [UInt8](1...16), zero = [UInt8](repeating: 0, count: 16)
        #expect(try await host.execute(LEReadResolvingListSize()).resolvingListSize == 1)
        #expect(await status(LEAddDeviceToResolvingList(peerIdentityAddressType: 0, peerIdentityAddress: a, peerIRK: irk, localIRK: zero)) == nil)
        #expect(await status(LEAddDeviceToResolvingList(peerIdentityAddressType: 0, peerIdentityAddress: a, peerIRK: irk, localIRK: zero)) == .invalidParameters)
        #expect(await status(LEAddDeviceToResolvingList(peerIdentityAddressType: 1, peerIdentityAddress: b, peerIRK: irk, localIRK: zero)) == .memoryCapacityExceeded)
        #expect(await status(LERemoveDeviceFromResolvingList(peerIdentityAddressType: 1, peerIdentityAddress: b)) == .unknownConnectionIdentifier)
        #expect(await status(LESetPrivacyMode(peerIdentityAddressType: 1, peerIdentityAddress: b, privacyMode: 1)) == .unknownConnectionIdentifier)
        #expect(await status(LESetAddressResolutionEnable(addressResolutionEnable: true)) == nil)
        try await host.startScanning()
        #expect(await status(LEClearResolvingList()) == .commandDisallowed)
        #expect(await status(LESetAddressResolutionEnable(addressResolutionEnable: false)) == .commandDisallowed)
        try await host.stopScanning()
        #expect(await status(LEClearResolvingList()) == nil)
        await host.close()
    }
}
