import Foundation
import Synchronization
import Testing
import TestSupport
import HCI
import ATT
import GATT
import SMP
import VirtualController
@testable import BLE

/// ATT Signed Write Command with the CSRK distributed at pairing (Core v5.4 Vol 3 Part C 10.4.2,
/// Part F 3.4.5.4, Part H 2.4.5). `SMPCrypto.signature` itself is checked against BlueZ's vectors
/// in the SMP tests; here: who signs, who verifies, and the SignCounter's replay rule.
@Suite(.timeLimit(.minutes(1))) struct SignedWriteTests {
    static let service: BluetoothUUID = 0xFF70
    static let signed: BluetoothUUID = 0xFF71

    /// A characteristic writable only with Authenticated Signed Writes (or an encrypted link).
    static var services: [GATTService] {
        [GATTService(uuid: service, characteristics: [
            GATTCharacteristic(uuid: signed, properties: [.authenticatedSignedWrites],
                               permissions: [.writable, .writeEncryptionRequired], value: Array("none".utf8)),
        ])]
    }

    @Test func bondedCentralSignsAndPeripheralVerifies() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        var po = StackOptions()
        po.attTimeout = .seconds(5)
        po.security = SecurityTests.config()
        var co = po
        co.security = SecurityTests.config()
        co.security.encryptBondedLinks = false   // the second link stays unencrypted: signing is for those
        let peripheral = try await Peripheral.open(transports[0], services: Self.services, name: "signed", options: po)
        let writes = Watched<[[UInt8]]>([])
        let watcher = Task { for await e in peripheral.events { if case .wrote(_, Self.signed, let v) = e { writes.withLock { $0.append(v) } } } }
        try await peripheral.startAdvertising(AdvertisingOptions(name: "signed"))
        let central = try await Central.open(transports[1], options: co)
        let adv = try await central.find(ScanFilter(nameContains: "signed"), timeout: .seconds(5))

        var remote = try await central.connect(to: adv.address)
        _ = try await remote.pair()
        try await remote.disconnect()

        remote = try await central.connect(to: adv.address)
        let tree = try await remote.discoverAll()
        let match = tree.flatMap(\.characteristics).first { $0.characteristic.uuid == Self.signed }
        let characteristic = try #require(match).characteristic
        #expect(!(await remote.security).encrypted)
        try await remote.write(Array("one".utf8), to: characteristic, type: .withoutResponse)
        try await remote.write(Array("two".utf8), to: characteristic, type: .withoutResponse)
        try await writes.until("both signed writes applied") { $0.count == 2 }
        #expect(writes.value == [Array("one".utf8), Array("two".utf8)])

        // Both counters moved past the two signatures (0 and 1).
        let centralDir = try #require(co.security.bondDirectory), peripheralDir = try #require(po.security.bondDirectory)
        let centralFound = try await bondsOnDisk(centralDir, central.identityAddress).bond(for: peripheral.identityAddress)
        let centralBond = try #require(centralFound)
        #expect(centralBond.localSignCounter == 2)
        let peripheralFound = try await bondsOnDisk(peripheralDir, peripheral.identityAddress).bond(for: central.identityAddress)
        let peripheralBond = try #require(peripheralFound)
        #expect(peripheralBond.signCounter == 2)
        try await remote.disconnect()
        watcher.cancel()
        await central.close()
        await peripheral.close()
    }

    /// Issue 24: a flood of Signed Write Commands from one central does not hold up another
    /// central's reads on the same controller. Each verification moves the bond's SignCounter
    /// (Vol 3 Part H 2.4.5), a bond-store save; the store's writer is held for the whole test,
    /// so a verification that waited for the file (as it once did, twice fsynced, on the loop
    /// every link of the controller shares) would never finish. Let go at the end, the writer
    /// puts the last counter on disk.
    @Test func signedWriteFloodLeavesAnotherLinksReadsAnswered() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 3)
        var po = StackOptions()
        po.attTimeout = .seconds(10)
        po.security = SecurityTests.config()
        var co = po
        co.security = SecurityTests.config()
        co.security.encryptBondedLinks = false
        let readable: BluetoothUUID = 0xFF72
        let services = [GATTService(uuid: Self.service, characteristics: Self.services[0].characteristics + [
            GATTCharacteristic(uuid: readable, properties: [.read], permissions: [.readable], value: [0x2A]),
        ])]
        let peripheral = try await Peripheral.open(transports[0], services: services, name: "signed", options: po)
        let peripheralDir = try #require(po.security.bondDirectory)
        let writer = DispatchQueue(label: "held bond writer")
        writer.suspend()
        let held = try SMPBondStore(directory: peripheralDir, localIdentity: peripheral.identityAddress, writer: writer)
        BondStores.adopt(held, directory: peripheralDir)
        let writes = Watched(0)
        let watcher = Task { for await e in peripheral.events { if case .wrote(_, Self.signed, _) = e { writes.withLock { $0 += 1 } } } }
        try await peripheral.startAdvertising(AdvertisingOptions(name: "signed"))
        let flooder = try await Central.open(transports[1], options: co)
        let adv = try await flooder.find(ScanFilter(nameContains: "signed"), timeout: .seconds(5))
        var signer = try await flooder.connect(to: adv.address)
        _ = try await signer.pair()
        try await signer.disconnect()
        signer = try await flooder.connect(to: adv.address)
        let signedChar = try #require(try await signer.discoverAll().flatMap(\.characteristics).first { $0.characteristic.uuid == Self.signed }).characteristic
        try await peripheral.startAdvertising(AdvertisingOptions(name: "signed"))
        var ro = po
        ro.security = SecurityTests.config()
        let reader = try await Central.open(transports[2], options: ro)
        let other = try await reader.connect(to: try await reader.find(ScanFilter(nameContains: "signed"), timeout: .seconds(5)).address)
        let readChar = try #require(try await other.discoverAll().flatMap(\.characteristics).first { $0.characteristic.uuid == readable }).characteristic

        let count = 500
        let flood = Task {
            for n in 0..<count { try await signer.write([UInt8(n & 0xFF)], to: signedChar, type: .withoutResponse) }
        }
        let clock = ContinuousClock()
        var slowest = Duration.zero
        for _ in 0..<20 {
            let start = clock.now
            #expect(try await other.read(readChar) == [0x2A])
            slowest = max(slowest, clock.now - start)
        }
        try await flood.value
        try await writes.until("\(count) signed writes applied", timeout: .seconds(20)) { $0 == count }
        // A read on the in-process link takes well under a millisecond alone, but the suite's
        // parallel tests once made one take 1.4 s. What this catches is a verification that
        // waits for the held writer: then no read is answered while it is held. The bound is
        // half the 10 s ATT timeout the reads run with.
        #expect(slowest < .seconds(5), "a read waited \(slowest) behind the signed writes")
        #expect(FileManager.default.contents(atPath: held.path).flatMap { String(decoding: $0, as: UTF8.self) }?.contains("signCounter") != true,
                "the held writer wrote")
        writer.resume()
        try held.flush()
        let onDisk = try SMPBondStore(directory: peripheralDir, localIdentity: peripheral.identityAddress).bond(for: flooder.identityAddress)
        #expect(try #require(onDisk).signCounter == UInt32(count))
        try await signer.disconnect()
        try await other.disconnect()
        watcher.cancel()
        await flooder.close()
        await reader.close()
        await peripheral.close()
    }

    /// The verifier alone: a valid signature is accepted once; the same SignCounter again is a
    /// replay (ignored, Vol 3 Part H 2.4.5); a wrong MAC or an unbonded peer is ignored.
    @Test func replayAndForgeryAreIgnored() throws {
        let dir = temporaryDirectory()
        let local = DeviceAddress(BDAddress([0xC0, 0x11, 0x22, 0x33, 0x44, 0x55]), type: .random)
        let peer = DeviceAddress(BDAddress([0x00, 0x1B, 0xDC, 0x07, 0x32, 0xEF]), type: .public)
        let store = try SMPBondStore(directory: dir, localIdentity: local)
        let csrk = [UInt8](repeating: 0x5A, count: 16)
        try store.save(SMPBond(peer: peer, keySize: 16, secureConnections: true, authenticated: false,
                               ltk: [UInt8](repeating: 1, count: 16), peerCSRK: csrk))
        let verifier = BondedSignedWrites(bonds: { store }, log: nil)
        let from = ATTPeer(id: 0x40, address: peer.address.description)
        let message: [UInt8] = [0xD2, 0x03, 0x00] + Array("hi".utf8)
        let first = SMPCrypto.signature(csrk: csrk, message: message, signCounter: 0)
        #expect(verifier.verify(peer: from, message: message, signature: first)
                == ATTSecurity(encrypted: true, authenticated: false, keySize: 16))
        #expect(verifier.verify(peer: from, message: message, signature: first) == nil, "replayed SignCounter 0")
        var forged = SMPCrypto.signature(csrk: csrk, message: message, signCounter: 1)
        forged[11] ^= 1
        #expect(verifier.verify(peer: from, message: message, signature: forged) == nil, "wrong MAC")
        #expect(verifier.verify(peer: from, message: message + [0], signature: SMPCrypto.signature(csrk: csrk, message: message, signCounter: 1)) == nil,
                "signature of another message")
        #expect(verifier.verify(peer: from, message: message, signature: SMPCrypto.signature(csrk: csrk, message: message, signCounter: 5)) != nil,
                "a later counter is fine (counters may skip)")
        #expect(try store.bond(for: peer)?.signCounter == 6)
        let stranger = ATTPeer(id: 0x41, address: "00:11:22:33:44:55")
        #expect(verifier.verify(peer: stranger, message: message, signature: SMPCrypto.signature(csrk: csrk, message: message, signCounter: 9)) == nil)
    }
}
