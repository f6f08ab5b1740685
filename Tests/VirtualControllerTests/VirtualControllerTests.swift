import Foundation
import Synchronization
import Testing
import HCI
import Transport
import TestSupport
@testable import VirtualController

/// What one host received from its controller.
final class RecordingHost: @unchecked Sendable {
    let controller: VirtualController
    private let lock = NSLock()
    private var received: [HCIPacket] = []
    init(_ c: VirtualController) {
        controller = c
        c.attachHost { [self] p in
            lock.lock(); received.append(p); lock.unlock()
            Self.arrivals.note()
        }
    }
    /// Every packet any recording host receives (live links deliver on their threads), for
    /// tests that wait for packets: they wake on an arrival instead of polling.
    static let arrivals = Arrivals()
    func send(_ c: some HCICommand) { controller.receive(fromHost: .command(c.packet)) }
    /// Everything received since the last take.
    func take() -> [HCIPacket] { lock.lock(); defer { received = []; lock.unlock() }; return received }
    func events() -> [any HCIEventParameters] {
        take().compactMap { if case .event(let e) = $0 { return try? HCIEvents.decode(e) }; return nil }
    }
    func le<T: LEMetaEventParameters>(_ events: [any HCIEventParameters], _ t: T.Type) -> [T] {
        events.compactMap { ($0 as? LEMetaEvent)?.subevent as? T }
    }
}

/// A count of arrivals and a condition signalled on each.
final class Arrivals: Sendable {
    private let condition = NSCondition()
    private let count = Mutex(0)

    func note() {
        condition.lock()
        count.withLock { $0 += 1 }
        condition.broadcast()
        condition.unlock()
    }

    /// Waits (blocking) until `condition` holds, checking it again after each arrival; false
    /// when it still does not at `deadline`.
    func wait(until deadline: Date, for holds: () -> Bool) -> Bool {
        while true {
            let seen = count.withLock { $0 }
            if holds() { return true }
            condition.lock()
            defer { condition.unlock() }
            while count.withLock({ $0 }) == seen {
                if !condition.wait(until: deadline) { return false }
            }
        }
    }
}

struct Pair {
    let link = VirtualLink(mode: .manual)
    let a: RecordingHost
    let b: RecordingHost
    init(aclBuffers: Int = 8) {
        a = RecordingHost(link.addController(aclBuffers: aclBuffers))
        b = RecordingHost(link.addController(aclBuffers: aclBuffers))
        // The power-on Event Mask leaves LE Meta off (Core Vol 4 Part E 7.3.1): hosts turn it on.
        for h in [a, b] { h.send(SetEventMask(.leHost)) }
        link.runUntilIdle()
        _ = a.take(); _ = b.take()
    }
    /// Returns the single Command Complete for `C` (asserting success when `ok`).
    @discardableResult
    func run<C: HCICommand>(_ h: RecordingHost, _ c: C) -> CommandComplete? {
        h.send(c)
        link.runUntilIdle()
        return h.events().compactMap { $0 as? CommandComplete }.first { $0.opcode == C.opcode }
    }
    /// A connects to B (legacy advertising on B); returns (central handle, peripheral handle).
    func connect() -> (UInt16, UInt16) {
        run(b, LESetAdvertisingParameters())
        run(b, LESetAdvertisingData(advertisingData: [2, 1, 6]))
        run(b, LESetAdvertisingEnable(advertisingEnable: true))
        a.send(LECreateConnection(peerAddressType: .public, peerAddress: b.controller.publicAddress))
        link.runUntilIdle()
        let ea = a.events(), eb = b.events()
        guard let ca = a.le(ea, LEConnectionComplete.self).first, let cb = b.le(eb, LEConnectionComplete.self).first else {
            Issue.record("no connection: central \(ea.map(\.name)), peripheral \(eb.map(\.name))")
            return (0, 0)
        }
        return (ca.connectionHandle, cb.connectionHandle)
    }
}

@Suite struct CommandTests {
    @Test func informationalCommands() throws {
        let p = Pair()
        #expect(p.run(p.a, Reset())?.status == .success)
        let addr = try #require(p.run(p.a, ReadBDADDR())).result(ReadBDADDR.self)
        #expect(addr.address == BDAddress([0xF0, 0xF1, 0xF2, 0xF3, 0xF4, 0x01]))
        #expect(try p.run(p.b, ReadBDADDR())!.result(ReadBDADDR.self).address != addr.address)
        let v = try p.run(p.a, ReadLocalVersionInformation())!.result(ReadLocalVersionInformation.self)
        #expect(v.hciVersion == 0x0D)
        let cmds = try p.run(p.a, ReadLocalSupportedCommands())!.result(ReadLocalSupportedCommands.self)
        for t in VirtualController.implementedCommands { #expect(cmds.supports(t.opcode), "\(t.name)") }
        // Supported_Commands must not claim a command the controller answers with Unknown HCI
        // Command (Core Vol 4 Part E 6.27): Write Local Name (0x0C13) is one the virtual controller lacks.
        #expect(!cmds.supports(HCIOpcode(ogf: 0x03, ocf: 0x0013)))
        let f = try p.run(p.a, LEReadLocalSupportedFeatures())!.result(LEReadLocalSupportedFeatures.self)
        #expect(f.leFeatures.isSuperset(of: [.leEncryption, .dataPacketLengthExtension, .le2MPHY, .leExtendedAdvertising]))
        let lmp = try p.run(p.a, ReadLocalSupportedFeatures())!.result(ReadLocalSupportedFeatures.self)
        #expect(lmp.leSupportedController && lmp.brEDRNotSupported)
        let buf = try p.run(p.a, LEReadBufferSize())!.result(LEReadBufferSize.self)
        #expect(buf.leACLDataPacketLength == 27 && buf.totalNumLEACLDataPackets == 8)
        let buf2 = try p.run(p.a, LEReadBufferSizeV2())!.result(LEReadBufferSizeV2.self)
        #expect(buf2.leACLDataPacketLength == 27 && buf2.totalNumLEACLDataPackets == 8)
        let bs = try p.run(p.a, ReadBufferSize())!.result(ReadBufferSize.self)
        #expect(bs.aclDataPacketLength == 27 && bs.totalNumACLDataPackets == 8)
        #expect(try p.run(p.a, LEReadNumberOfSupportedAdvertisingSets())!.result(LEReadNumberOfSupportedAdvertisingSets.self).numSupportedAdvertisingSets == 4)
        #expect(try p.run(p.a, LEReadMaximumAdvertisingDataLength())!.result(LEReadMaximumAdvertisingDataLength.self).maxAdvertisingDataLength == 1650)
        #expect(try p.run(p.a, LEReadMaximumDataLength())!.result(LEReadMaximumDataLength.self).supportedMaxTxOctets == 251)
    }

    @Test func everyImplementedCommandIsAnswered() {
        // Each implemented opcode, with empty parameters, gets an answer that is not Unknown Command.
        let p = Pair()
        for t in VirtualController.implementedCommands where t != Reset.self {
            p.a.controller.receive(fromHost: .command(HCICommandPacket(opcode: t.opcode, parameters: [])))
            p.link.runUntilIdle()
            let answers = p.a.events().filter { ($0 as? CommandComplete)?.opcode == t.opcode || ($0 as? CommandStatus)?.opcode == t.opcode }
            #expect(answers.count == 1, "\(t.name)")
            let status = (answers.first as? CommandComplete)?.status ?? (answers.first as? CommandStatus)?.status
            #expect(status != .unknownCommand, "\(t.name)")
        }
    }

    @Test func errorStatuses() {
        let p = Pair()
        // Unknown opcode → Command Complete with Unknown HCI Command.
        p.a.controller.receive(fromHost: .command(HCICommandPacket(opcode: HCIOpcode(ogf: 0x03, ocf: 0x0013))))
        p.link.runUntilIdle()
        let unknown = p.a.events().first as? CommandComplete
        #expect(unknown?.opcode.rawValue == 0x0C13 && unknown?.status == .unknownCommand)
        // Truncated parameters → Invalid HCI Command Parameters.
        p.a.controller.receive(fromHost: .command(HCICommandPacket(opcode: SetEventMask.opcode, parameters: [1, 2])))
        p.link.runUntilIdle()
        #expect((p.a.events().first as? CommandComplete)?.status == .invalidParameters)
        // Out of range.
        // An advertising interval outside the range the controller supports: Unsupported Feature
        // or Parameter Value (Core v5.4 Vol 4 Part E 7.8.5; Rootcanal answers the same).
        #expect(p.run(p.a, LESetAdvertisingParameters(advertisingIntervalMin: 0x10, advertisingIntervalMax: 0x10))?.status == .unsupportedParameterValue)
        #expect(p.run(p.a, LESetScanParameters(leScanType: 2))?.status == .invalidParameters)
        #expect(p.run(p.a, LEWriteSuggestedDefaultDataLength(suggestedMaxTxOctets: 300, suggestedMaxTxTime: 328))?.status == .invalidParameters)
        // Wrong state.
        #expect(p.run(p.a, LECreateConnectionCancel())?.status == .commandDisallowed)
        p.run(p.a, LESetAdvertisingEnable(advertisingEnable: true))
        #expect(p.run(p.a, LESetAdvertisingParameters())?.status == .commandDisallowed)
        #expect(p.run(p.a, LESetRandomAddress(randomAddress: BDAddress([0xC0, 1, 2, 3, 4, 5])))?.status == .commandDisallowed)
        // An extended advertising command on B: A has used legacy ones (Core v5.4 Vol 4 Part E 3.1.1).
        #expect(p.run(p.b, LERemoveAdvertisingSet(advertisingHandle: 3))?.status == .unknownAdvertisingIdentifier)
        // Commands completing with status: Command Status carries the error.
        p.a.send(Disconnect(connectionHandle: 0x99))
        p.link.runUntilIdle()
        let st = p.a.events().first as? CommandStatus
        #expect(st?.opcode == Disconnect.opcode && st?.status == .unknownConnectionIdentifier)
        p.a.send(ReadRSSI(connectionHandle: 0x99))
        p.link.runUntilIdle()
        let rssi = p.a.events().first as? CommandComplete
        #expect(rssi?.status == .unknownConnectionIdentifier && rssi?.returnParameters == [0x02, 0x99, 0x00])
    }

    @Test func leEncryptMatchesCoreSpecVector() throws {
        // Core Vol 3 Part H D.1 (security function e): MSB-first values, reversed for HCI.
        let key = DataHex("4c68384139f574d836bcf34e9dfb01bf").reversed()
        let plain = DataHex("0213243546576879acbdcedfe0f10213").reversed()
        let p = Pair()
        let out = try p.run(p.a, LEEncrypt(key: Array(key), plaintextData: Array(plain)))!.result(LEEncrypt.self)
        #expect(out.encryptedData == Array(DataHex("99ad1b5226a37e3e058e3b8e27c2c666").reversed()))
        let r1 = try p.run(p.a, LERand())!.result(LERand.self).randomNumber
        let r2 = try p.run(p.a, LERand())!.result(LERand.self).randomNumber
        #expect(r1 != r2)
    }

    @Test func defaultEventMaskHidesLEMeta() {
        let p = Pair()
        p.run(p.a, Reset())
        p.run(p.b, LESetAdvertisingEnable(advertisingEnable: true))
        p.run(p.a, LESetScanEnable(leScanEnable: true))
        p.link.advance(by: 0.1)
        #expect(p.a.take().isEmpty)
        p.run(p.a, SetEventMask(.leHost))
        p.link.advance(by: 0.1)
        #expect(!p.a.le(p.a.events(), LEAdvertisingReport.self).isEmpty)
    }

    @Test func stopAnsweringCommands() {
        let p = Pair()
        p.a.controller.setAnsweringCommands(false)
        p.run(p.a, Reset())
        #expect(p.a.take().isEmpty)
        p.a.controller.setAnsweringCommands(true)
        #expect(p.run(p.a, ReadBDADDR())?.status == .success)
    }
}

func DataHex(_ s: String) -> [UInt8] {
    var out: [UInt8] = []
    var i = s.startIndex
    while i < s.endIndex { let j = s.index(i, offsetBy: 2); out.append(UInt8(s[i..<j], radix: 16)!); i = j }
    return out
}

@Suite struct AdvertisingTests {
    @Test func legacyActiveScanGetsScanResponseAndFiltersDuplicates() {
        let p = Pair()
        p.run(p.b, LESetAdvertisingParameters())
        p.run(p.b, LESetAdvertisingData(advertisingData: [2, 1, 6, 4, 9, 0x61, 0x62, 0x63]))
        p.run(p.b, LESetScanResponseData(scanResponseData: [3, 0x19, 0x40, 0x00]))
        p.run(p.b, LESetAdvertisingEnable(advertisingEnable: true))
        p.run(p.a, LESetScanParameters(leScanType: 1))
        p.run(p.a, LESetScanEnable(leScanEnable: true, filterDuplicates: true))
        p.link.advance(by: 0.1)
        let reports = p.a.le(p.a.events(), LEAdvertisingReport.self).flatMap(\.reports)
        #expect(reports.count == 2)  // duplicates filtered over 5 advertising events
        #expect(reports.first { $0.eventType == 0x00 }?.data == [2, 1, 6, 4, 9, 0x61, 0x62, 0x63])
        #expect(reports.first { $0.eventType == 0x04 }?.data == [3, 0x19, 0x40, 0x00])
        #expect(reports.allSatisfy { $0.rssi == -50 && $0.address == p.b.controller.publicAddress })
        // Passive: no scan responses; no duplicate filter: every event.
        p.run(p.a, LESetScanEnable(leScanEnable: false))
        p.run(p.a, LESetScanParameters(leScanType: 0))
        p.run(p.a, LESetScanEnable(leScanEnable: true, filterDuplicates: false))
        p.link.advance(by: 0.1)
        let passive = p.a.le(p.a.events(), LEAdvertisingReport.self).flatMap(\.reports)
        #expect(passive.count >= 4 && passive.allSatisfy { $0.eventType == 0x00 })
        // Masking the LE Advertising Report subevent silences reports.
        p.run(p.a, LESetEventMask(leEventMask: 0))
        p.link.advance(by: 0.1)
        #expect(p.a.le(p.a.events(), LEAdvertisingReport.self).isEmpty)
    }

    @Test func extendedAdvertisingAndScanning() {
        let p = Pair()
        let random = BDAddress([0xC1, 2, 3, 4, 5, 6])
        let long = [UInt8](repeating: 0x11, count: 300)
        p.run(p.b, LESetExtendedAdvertisingParameters(advertisingHandle: 1, advertisingEventProperties: [.connectable],
                                                      ownAddressType: .random, advertisingSID: 3))
        p.run(p.b, LESetAdvertisingSetRandomAddress(advertisingHandle: 1, randomAddress: random))
        p.run(p.b, LESetExtendedAdvertisingData(advertisingHandle: 1, operation: 0x01, advertisingData: Array(long[0..<200])))
        p.run(p.b, LESetExtendedAdvertisingData(advertisingHandle: 1, operation: 0x02, advertisingData: Array(long[200...])))
        #expect(p.run(p.b, LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 1)]))?.status == .success)
        p.run(p.a, LESetEventMask(.host))
        p.run(p.a, LESetExtendedScanParameters())
        p.run(p.a, LESetExtendedScanEnable(enable: true, filterDuplicates: 1))
        p.link.advance(by: 0.05)
        let reports = p.a.le(p.a.events(), LEExtendedAdvertisingReport.self).flatMap(\.reports)
        #expect(reports.count == 2)  // 300 octets: two fragments
        #expect(reports.first?.eventType.dataStatus == 1 && reports.last?.eventType.dataStatus == 0)
        #expect(reports.flatMap(\.data) == long)
        #expect(reports.allSatisfy { $0.address == random && $0.addressType == 1 && $0.advertisingSID == 3 && $0.eventType.isConnectable })
        // A legacy scanner does not see extended (non-legacy) PDUs (legacy commands after a Reset:
        // Core v5.4 Vol 4 Part E 3.1.1).
        p.run(p.a, LESetExtendedScanEnable(enable: false))
        p.run(p.a, Reset())
        p.run(p.a, SetEventMask(.leHost))
        #expect(p.run(p.a, LESetScanEnable(leScanEnable: true))?.status == .success)
        p.link.advance(by: 0.05)
        #expect(p.a.le(p.a.events(), LEAdvertisingReport.self).isEmpty)
        #expect(p.run(p.b, LEClearAdvertisingSets())?.status == .commandDisallowed)
    }
}

@Suite struct ConnectionTests {
    @Test func connectAndDisconnectWithReasons() {
        let p = Pair()
        let (ha, hb) = p.connect()
        // Advertising stopped on the peripheral: a scanner sees nothing.
        p.run(p.a, LESetScanEnable(leScanEnable: true))
        p.link.advance(by: 0.1)
        #expect(p.a.le(p.a.events(), LEAdvertisingReport.self).isEmpty)
        p.a.send(Disconnect(connectionHandle: ha, reason: .remoteUserTerminated))
        p.link.runUntilIdle()
        let ea = p.a.events()
        #expect((ea.first as? CommandStatus)?.status == .success)
        #expect((ea.last as? DisconnectionComplete) == DisconnectionComplete(connectionHandle: ha, reason: .localHostTerminated))
        #expect((p.b.events().last as? DisconnectionComplete) == DisconnectionComplete(connectionHandle: hb, reason: .remoteUserTerminated))
    }

    @Test func enhancedConnectionCompleteAndCancel() {
        let p = Pair()
        p.run(p.a, LESetEventMask(.host))
        p.a.send(LECreateConnection(peerAddressType: .public, peerAddress: p.b.controller.publicAddress))
        p.link.advance(by: 0.1)
        #expect(p.a.le(p.a.events(), LEEnhancedConnectionComplete.self).isEmpty)  // nobody advertising
        #expect(p.run(p.a, LECreateConnectionCancel())?.status == .success)
        p.link.runUntilIdle()
        // Command Complete came first (taken by run); the cancel's connection complete follows.
        p.a.send(LECreateConnection(peerAddressType: .public, peerAddress: p.b.controller.publicAddress))
        p.link.runUntilIdle()
        #expect(p.run(p.a, LECreateConnectionCancel()) != nil)
        p.a.send(LECreateConnectionCancel())
        p.link.runUntilIdle()
        #expect((p.a.events().first as? CommandComplete)?.status == .commandDisallowed)
    }

    @Test func cancelReportsUnknownConnectionIdentifier() {
        let p = Pair()
        p.run(p.a, LESetEventMask(.host))
        p.a.send(LECreateConnection(peerAddressType: .public, peerAddress: p.b.controller.publicAddress))
        p.a.send(LECreateConnectionCancel())
        p.link.runUntilIdle()
        let e = p.a.events()
        #expect(p.a.le(e, LEEnhancedConnectionComplete.self).first?.status == .unknownConnectionIdentifier)
    }

    // Core v5.4 Vol 4 Part E 7.8.12 and 7.8.66: Connection_Interval_Min above Connection_Interval_Max,
    // or Initiating_PHYs with no PHY the primary advertising channel is scanned on, is refused with
    // Invalid HCI Command Parameters (0x12); either command while a create connection is pending
    // with Command Disallowed (0x0C). Both commands answer with Command Status.
    // Core v5.4 Vol 4 Part E 7.8.10 and 7.8.64: a scan window longer than the scan interval is
    // refused with Invalid HCI Command Parameters (0x12); either command while scanning is enabled
    // with Command Disallowed (0x0C). Both answer with Command Complete.
    @Test func scanParametersChecks() {
        let p = Pair()
        // Legacy commands on A, extended ones on B (never both kinds on one controller: 3.1.1).
        #expect(p.run(p.a, LESetScanParameters(leScanInterval: 0x10, leScanWindow: 0x20))?.status == .invalidParameters)
        #expect(p.run(p.b, LESetExtendedScanParameters(phyParameters: [.init(scanInterval: 0x10, scanWindow: 0x20)]))?.status
                == .invalidParameters)
        #expect(p.run(p.a, LESetScanParameters())?.status == .success)
        #expect(p.run(p.a, LESetScanEnable(leScanEnable: true))?.status == .success)
        #expect(p.run(p.a, LESetScanParameters())?.status == .commandDisallowed)
        #expect(p.run(p.b, LESetExtendedScanParameters())?.status == .success)
        #expect(p.run(p.b, LESetExtendedScanEnable(enable: true))?.status == .success)
        #expect(p.run(p.b, LESetExtendedScanParameters())?.status == .commandDisallowed)
    }

    @Test func createConnectionChecks() {
        let p = Pair()
        let peer = p.b.controller.publicAddress
        // Legacy on A, extended on B (never both kinds on one controller: 3.1.1).
        func status<C: HCICommand>(_ c: C, on h: RecordingHost? = nil) -> HCIStatus? {
            let h = h ?? p.a
            h.send(c)
            p.link.runUntilIdle()
            return (h.events().first as? CommandStatus)?.status
        }
        #expect(status(LECreateConnection(peerAddressType: .public, peerAddress: peer,
                                          connectionIntervalMin: 0x30, connectionIntervalMax: 0x20)) == .invalidParameters)
        #expect(status(LEExtendedCreateConnection(peerAddressType: .public, peerAddress: peer, initiatingPHYs: 0x00,
                                                  phyParameters: []), on: p.b) == .invalidParameters)
        #expect(status(LEExtendedCreateConnection(peerAddressType: .public, peerAddress: peer, phyParameters: [
            .init(connectionIntervalMin: 0x30, connectionIntervalMax: 0x20)]), on: p.b) == .invalidParameters)
        #expect(status(LECreateConnection(peerAddressType: .public, peerAddress: peer)) == .success)
        #expect(status(LECreateConnection(peerAddressType: .public, peerAddress: peer)) == .commandDisallowed)
        #expect(status(LEExtendedCreateConnection(peerAddressType: .public, peerAddress: p.a.controller.publicAddress), on: p.b)
                == .success)
        #expect(status(LEExtendedCreateConnection(peerAddressType: .public, peerAddress: peer), on: p.b) == .commandDisallowed)
    }

    @Test func updateDataLengthPHYFeaturesRSSI() throws {
        let p = Pair()
        let (ha, hb) = p.connect()
        p.run(p.a, LESetEventMask(.host)); p.run(p.b, LESetEventMask(.host))
        p.a.send(LEConnectionUpdate(connectionHandle: ha, connectionIntervalMin: 6, connectionIntervalMax: 12, maxLatency: 0,
                                    supervisionTimeout: 100, minCELength: 0, maxCELength: 0))
        p.link.runUntilIdle()
        #expect(p.a.le(p.a.events(), LEConnectionUpdateComplete.self).first?.connectionInterval == 12)
        #expect(p.b.le(p.b.events(), LEConnectionUpdateComplete.self).first?.connectionHandle == hb)
        #expect(p.run(p.a, LESetDataLength(connectionHandle: ha, txOctets: 251, txTime: 2120))?.status == .success)
        #expect(p.a.le(p.a.events(), LEDataLengthChange.self).isEmpty)  // taken by run; check peer
        let dl = p.b.le(p.b.events(), LEDataLengthChange.self).first
        #expect(dl?.maxRxOctets == 251 && dl?.maxTxOctets == 27)
        p.a.send(LESetPHY(connectionHandle: ha, txPHYs: 2, rxPHYs: 2))
        p.link.runUntilIdle()
        #expect(p.a.le(p.a.events(), LEPHYUpdateComplete.self).first?.txPHY == 2)
        #expect(p.b.le(p.b.events(), LEPHYUpdateComplete.self).first?.rxPHY == 2)
        #expect(try p.run(p.b, LEReadPHY(connectionHandle: hb))!.result(LEReadPHY.self).txPHY == 2)
        p.a.send(LEReadRemoteFeatures(connectionHandle: ha))
        p.link.runUntilIdle()
        #expect(p.a.le(p.a.events(), LEReadRemoteFeaturesComplete.self).first?.leFeatures.contains(.leEncryption) == true)
        #expect(try p.run(p.a, ReadRSSI(connectionHandle: ha))!.result(ReadRSSI.self).rssi == -50)
    }

    @Test func resetDropsConnectionsAndPeerIsTold() {
        let p = Pair()
        let (_, hb) = p.connect()
        #expect(p.run(p.a, Reset())?.status == .success)
        #expect((p.b.events().last as? DisconnectionComplete) == DisconnectionComplete(connectionHandle: hb, reason: .connectionTimeout))
    }

    @Test func encryptionMatchMismatchAndMissingKey() {
        let key = [UInt8](repeating: 7, count: 16)
        do {
            let p = Pair()
            let (ha, hb) = p.connect()
            p.a.send(LEEnableEncryption(connectionHandle: ha, randomNumber: 5, encryptedDiversifier: 9, longTermKey: key))
            p.link.runUntilIdle()
            #expect((p.a.events().first as? CommandStatus)?.status == .success)
            let req = p.b.le(p.b.events(), LELongTermKeyRequest.self).first
            #expect(req?.randomNumber == 5 && req?.encryptedDiversifier == 9)
            #expect(p.run(p.b, LELongTermKeyRequestReply(connectionHandle: hb, longTermKey: key))?.status == .success)
            #expect((p.a.events().first as? EncryptionChange) == EncryptionChange(connectionHandle: ha, encryptionEnabled: 1))
            p.link.runUntilIdle()
        }
        do {
            let p = Pair()
            let (ha, hb) = p.connect()
            p.a.send(LEEnableEncryption(connectionHandle: ha, longTermKey: key))
            p.link.runUntilIdle(); _ = p.a.events(); _ = p.b.events()
            p.b.send(LELongTermKeyRequestReply(connectionHandle: hb, longTermKey: [UInt8](repeating: 8, count: 16)))
            p.link.runUntilIdle()
            #expect((p.a.events().last as? DisconnectionComplete)?.reason == .connectionTerminatedMICFailure)
            #expect((p.b.events().last as? DisconnectionComplete)?.reason == .connectionTerminatedMICFailure)
        }
        do {
            let p = Pair()
            let (ha, hb) = p.connect()
            p.a.send(LEEnableEncryption(connectionHandle: ha, longTermKey: key))
            p.link.runUntilIdle(); _ = p.a.events(); _ = p.b.events()
            #expect(p.run(p.b, LELongTermKeyRequestNegativeReply(connectionHandle: hb))?.status == .success)
            #expect((p.a.events().last as? EncryptionChange)?.status == .pinOrKeyMissing)
            // The peripheral may not start encryption.
            p.b.send(LEEnableEncryption(connectionHandle: hb, longTermKey: key))
            p.link.runUntilIdle()
            #expect((p.b.events().first as? CommandStatus)?.status == .commandDisallowed)
        }
    }
}

@Suite struct ACLTests {
    func acl(_ h: UInt16, _ b: PacketBoundary, _ n: Int) -> HCIPacket { .acl(HCIACLPacket(handle: h, boundary: b, data: [UInt8](repeating: UInt8(n), count: 4))) }

    @Test func deliveryAndCompletedPackets() {
        let p = Pair()
        let (ha, hb) = p.connect()
        p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, 1))
        p.a.controller.receive(fromHost: acl(ha, .continuing, 2))
        p.link.runUntilIdle()
        let got = p.b.take()
        #expect(got == [.acl(HCIACLPacket(handle: hb, boundary: .first, data: [1, 1, 1, 1])),
                        .acl(HCIACLPacket(handle: hb, boundary: .continuing, data: [2, 2, 2, 2]))])
        // 2 of 8 buffers: reported at the controller's own rate, not at once (Core v5.4 Vol 4
        // Part E 4.3: the rate is the manufacturer's; 7.7.19: one event for several packets).
        #expect(p.a.events().compactMap { $0 as? NumberOfCompletedPackets }.isEmpty)
        p.link.advance(by: VirtualController.completionReportInterval)
        let nocp = p.a.events().compactMap { $0 as? NumberOfCompletedPackets }
        #expect(nocp == [NumberOfCompletedPackets(entries: [.init(connectionHandle: ha, numCompletedPackets: 2)])])
    }

    /// Half the buffers completed are reported at once, so a host never waits for the report
    /// with fewer than half its buffers free.
    @Test func halfTheBuffersCompletedAreReportedAtOnce() {
        let p = Pair(aclBuffers: 8)
        let (ha, _) = p.connect()
        for i in 0..<3 { p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, i)) }
        p.link.runUntilIdle()
        #expect(p.a.events().compactMap { $0 as? NumberOfCompletedPackets }.isEmpty)
        p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, 3))
        p.link.runUntilIdle()
        #expect(p.a.events().compactMap { $0 as? NumberOfCompletedPackets }
                == [NumberOfCompletedPackets(entries: [.init(connectionHandle: ha, numCompletedPackets: 4)])])
        #expect(p.b.take().count == 4)
        // Nothing left to report: the interval passes with no event.
        p.link.advance(by: VirtualController.completionReportInterval)
        #expect(p.a.events().compactMap { $0 as? NumberOfCompletedPackets }.isEmpty)
        // One buffer: every packet reported at once.
        let q = Pair(aclBuffers: 1)
        let (qa, _) = q.connect()
        q.a.controller.receive(fromHost: acl(qa, .firstNonFlushable, 1))
        q.link.runUntilIdle()
        #expect(q.a.events().compactMap { $0 as? NumberOfCompletedPackets }
                == [NumberOfCompletedPackets(entries: [.init(connectionHandle: qa, numCompletedPackets: 1)])])
    }

    /// Packets not yet reported when the connection ends are not reported: the host counts
    /// them flushed at Disconnection Complete (Core v5.4 Vol 4 Part E 4.3).
    @Test func unreportedPacketsOfAnEndedConnectionAreNotReported() {
        let p = Pair()
        let (ha, _) = p.connect()
        p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, 1))
        p.link.runUntilIdle()
        p.link.dropConnection(p.a.controller, handle: ha)
        p.link.advance(by: VirtualController.completionReportInterval)
        let e = p.a.events()
        #expect(e.contains { $0 is DisconnectionComplete })
        #expect(!e.contains { $0 is NumberOfCompletedPackets })
    }

    @Test func overflowAndOversizedFragmentAreErrors() {
        let p = Pair(aclBuffers: 2)
        let (ha, _) = p.connect()
        for i in 0..<3 { p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, i)) }
        p.a.controller.receive(fromHost: .acl(HCIACLPacket(handle: ha, boundary: .firstNonFlushable, data: [UInt8](repeating: 0, count: 28))))
        p.link.runUntilIdle()
        let e = p.a.events()
        #expect(e.filter { $0 is DataBufferOverflow }.count == 2)
        #expect(p.b.take().count == 2)
        #expect(p.link.log.contains { $0.contains("all 2 buffers in use") })
        #expect(p.link.log.contains { $0.contains("over the LE ACL data length 27") })
    }

    /// A buffer stays in use until Number Of Completed Packets returns it (Core v5.4 Vol 4
    /// Part E 4.1.1: the host may send only as many packets as the controller has buffers,
    /// and reuses one only when 7.7.19 reported it), so a host that ignores flow control and
    /// sends aclBuffers + 1 packets before any report gets Data Buffer Overflow (7.7.26) for
    /// the last one, which is not forwarded, even though the earlier packets already left.
    @Test func hostThatIgnoresCompletedPacketsOverflows() {
        let p = Pair(aclBuffers: 8)
        let (ha, hb) = p.connect()
        // 3 of 8: sent to the peer, below half the buffers, so not reported yet.
        for i in 0..<3 { p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, i)) }
        p.link.runUntilIdle()
        #expect(p.a.events().isEmpty)
        #expect(p.b.take().count == 3)
        for i in 3..<9 { p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, i)) }
        p.link.runUntilIdle()
        #expect(p.a.events().filter { $0 is DataBufferOverflow }.count == 1)
        #expect(p.b.take() == (3..<8).map { acl(hb, .first, $0) })

        // With reports withheld (a stalled controller), every packet delivered keeps its
        // buffer: the ninth, sent one at a time, overflows.
        let q = Pair(aclBuffers: 8)
        let (qa, _) = q.connect()
        q.a.controller.setCompletingPackets(false)
        var overflows = 0
        for i in 0..<9 {
            q.a.controller.receive(fromHost: acl(qa, .firstNonFlushable, i))
            q.link.advance(by: VirtualController.completionReportInterval)
            overflows += q.a.events().filter { $0 is DataBufferOverflow }.count
        }
        #expect(overflows == 1)
        #expect(q.b.take().count == 8)
    }

    /// A host that sends only while it has buffers, counting them back from Number Of
    /// Completed Packets (Core v5.4 Vol 4 Part E 4.1.1, 7.7.19), never sees Data Buffer
    /// Overflow, with reports at the controller's rate and through a stall of the reports.
    @Test func hostThatWaitsForCompletedPacketsNeverOverflows() {
        let p = Pair(aclBuffers: 4)
        let (ha, _) = p.connect()
        var free = 4, sent = 0, overflows = 0, delivered = 0
        func receive() {
            for e in p.a.events() {
                if let r = e as? NumberOfCompletedPackets { free += r.entries.reduce(0) { $0 + Int($1.numCompletedPackets) } }
                if e is DataBufferOverflow { overflows += 1 }
            }
            delivered += p.b.take().count
        }
        for round in 0..<60 {
            if round == 20 { p.a.controller.setCompletingPackets(false) }
            if round == 30 { p.a.controller.setCompletingPackets(true) }
            // Sends what its buffers allow, one or two per step.
            for _ in 0..<min(free, 1 + round % 2) {
                p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, sent))
                free -= 1; sent += 1
            }
            p.link.advance(by: VirtualController.completionReportInterval)
            receive()
        }
        #expect(overflows == 0)
        #expect(sent > 40)
        #expect(delivered == sent)
        #expect(free == 4)
    }

    @Test func faultsDropDelayAndSupervisionTimeout() {
        let p = Pair()
        let (ha, hb) = p.connect()
        p.link.dropACLPacket(number: 1)
        p.link.delayACLPacket(number: 2, by: 0.5)
        for i in 1...3 { p.a.controller.receive(fromHost: acl(ha, .firstNonFlushable, i)) }
        p.link.runUntilIdle()
        #expect(p.b.take() == [acl(hb, .first, 3)])
        p.link.advance(by: VirtualController.completionReportInterval)
        #expect(p.a.events().compactMap { $0 as? NumberOfCompletedPackets }.first?.entries.first?.numCompletedPackets == 3)
        p.link.advance(by: 0.6)
        #expect(p.b.take() == [acl(hb, .first, 2)])
        p.link.dropConnection(p.a.controller, handle: ha)
        p.link.runUntilIdle()
        #expect((p.a.events().last as? DisconnectionComplete)?.reason == .connectionTimeout)
        #expect((p.b.events().last as? DisconnectionComplete)?.reason == .connectionTimeout)
    }
}

/// The ACL path of a live link, where a packet from a host runs at once on the sending thread
/// when no thread is running link work, and is queued behind that thread's work otherwise:
/// the same delivery, order and completion reports as the queued path (`ACLTests`, manual mode).
@Suite(.timeLimit(.minutes(1))) struct LiveLinkACLTests {
    /// Waits until `condition` holds, checked again on each packet delivered (at most 5 s);
    /// records an issue on timeout.
    @discardableResult
    func waitFor(_ what: String, _ condition: () -> Bool) -> Bool {
        // The live link delivers on its threads: each packet a recording host gets wakes this.
        guard RecordingHost.arrivals.wait(until: Date().addingTimeInterval(5), for: condition) || condition() else {
            Issue.record("timed out waiting for \(what)")
            return false
        }
        return true
    }

    /// One central connected to `count` peripherals on a live link (legacy advertising, LE
    /// Create Connection one at a time): the hosts and each link's (central, peripheral) handles.
    func centralWithPeripherals(_ count: Int, aclBuffers: Int) -> (VirtualLink, RecordingHost, [(host: RecordingHost, central: UInt16, peripheral: UInt16)]) {
        let link = VirtualLink(mode: .live)
        let central = RecordingHost(link.addController(aclBuffers: aclBuffers))
        central.send(SetEventMask(.leHost))
        var links: [(host: RecordingHost, central: UInt16, peripheral: UInt16)] = []
        var centralEvents: [any HCIEventParameters] = []
        for _ in 0..<count {
            let peripheral = RecordingHost(link.addController(aclBuffers: aclBuffers))
            peripheral.send(SetEventMask(.leHost))
            peripheral.send(LESetAdvertisingParameters())
            peripheral.send(LESetAdvertisingData(advertisingData: [2, 1, 6]))
            peripheral.send(LESetAdvertisingEnable(advertisingEnable: true))
            central.send(LECreateConnection(peerAddressType: .public, peerAddress: peripheral.controller.publicAddress))
            var peripheralEvents: [any HCIEventParameters] = []
            var handles: (UInt16, UInt16)?
            waitFor("connection \(links.count + 1)") {
                centralEvents += central.events()
                peripheralEvents += peripheral.events()
                guard let c = central.le(centralEvents, LEConnectionComplete.self).last,
                      let p = peripheral.le(peripheralEvents, LEConnectionComplete.self).first else { return false }
                handles = (c.connectionHandle, p.connectionHandle)
                return true
            }
            guard let (hc, hp) = handles else { break }
            centralEvents.removeAll()
            links.append((peripheral, hc, hp))
        }
        link.sync()
        _ = central.take()
        return (link, central, links)
    }

    func acl(_ handle: UInt16, _ boundary: PacketBoundary, _ data: [UInt8]) -> HCIPacket {
        .acl(HCIACLPacket(handle: handle, boundary: boundary, data: data))
    }

    /// Packets for two connections, sent one at a time: each reaches its peer on the peer's
    /// handle, in order, as a first (automatically flushable) or continuing fragment (Core
    /// v5.4 Vol 4 Part E 5.4.2); half the 8 buffers completed are reported at once, in one
    /// event for both handles (7.7.19); an unknown handle is dropped, an oversized fragment is
    /// a Data Buffer Overflow (7.7.26) and not delivered.
    @Test func packetsReachTheirPeersInOrderWithOneReportForBothHandles() throws {
        let (link, central, peers) = centralWithPeripherals(2, aclBuffers: 8)
        try #require(peers.count == 2)
        let (b, c) = (peers[0], peers[1])
        central.controller.receive(fromHost: acl(b.central, .firstNonFlushable, [1]))
        central.controller.receive(fromHost: acl(c.central, .firstNonFlushable, [2]))
        central.controller.receive(fromHost: acl(b.central, .continuing, [3]))
        central.controller.receive(fromHost: acl(0x0EFE, .firstNonFlushable, [9]))  // no such connection
        central.controller.receive(fromHost: acl(c.central, .firstNonFlushable, [UInt8](repeating: 0, count: 28)))
        central.controller.receive(fromHost: acl(c.central, .firstNonFlushable, [4]))
        var reports: [NumberOfCompletedPackets] = []
        var overflows = 0
        waitFor("the report") {
            for e in central.events() {
                if let r = e as? NumberOfCompletedPackets { reports.append(r) }
                if e is DataBufferOverflow { overflows += 1 }
            }
            return !reports.isEmpty
        }
        #expect(b.host.take() == [acl(b.peripheral, .first, [1]), acl(b.peripheral, .continuing, [3])])
        #expect(c.host.take() == [acl(c.peripheral, .first, [2]), acl(c.peripheral, .first, [4])])
        #expect(reports.count == 1)
        let completed = Dictionary(uniqueKeysWithValues: (reports.first?.entries ?? []).map { ($0.connectionHandle, $0.numCompletedPackets) })
        #expect(completed == [b.central: 2, c.central: 2])
        #expect(overflows == 1)
        #expect(link.log.contains { $0.contains("unknown connection handle") })
        #expect(link.aclPacketCount == 4)
    }

    /// Two threads sending at once (one runs the link's work, the other's packets are queued
    /// for it, or the other way round): every packet arrives, each sender's in its order, and
    /// every one is reported completed.
    @Test func packetsFromTwoThreadsKeepEachSendersOrder() throws {
        // Buffers enough for every packet (these hosts do no flow control).
        let perThread = 400
        let (_, central, peers) = centralWithPeripherals(2, aclBuffers: 2 * perThread)
        try #require(peers.count == 2)
        let done = DispatchSemaphore(value: 0)
        for peer in peers {
            let controller = central.controller, handle = peer.central
            Thread {
                for i in 0..<perThread {
                    controller.receive(fromHost: .acl(HCIACLPacket(handle: handle, boundary: .firstNonFlushable,
                                                                   data: [UInt8(i & 0xFF), UInt8(i >> 8)])))
                }
                done.signal()
            }.start()
        }
        for _ in peers { #expect(done.wait(timeout: .now() + 10) == .success) }
        var completed = 0
        waitFor("every packet reported completed") {
            completed += central.events().compactMap { $0 as? NumberOfCompletedPackets }
                .reduce(0) { $0 + $1.entries.reduce(0) { $0 + Int($1.numCompletedPackets) } }
            return completed >= 2 * perThread
        }
        #expect(completed == 2 * perThread)
        for peer in peers {
            let got = peer.host.take().compactMap { p -> Int? in
                guard case .acl(let a) = p, a.handle == peer.peripheral, a.data.count == 2 else { return nil }
                return Int(a.data[0]) | Int(a.data[1]) << 8
            }
            #expect(got == Array(0..<perThread))
        }
    }

    /// Faults apply to packets on the inline path too: the dropped one never arrives, the
    /// delayed one arrives after the ones sent after it.
    @Test func faultsApplyToInlinePackets() throws {
        let (link, _, peers) = centralWithPeripherals(1, aclBuffers: 8)
        try #require(peers.count == 1)
        let (central, peer) = (link.controllers[0], peers[0])
        let first = link.aclPacketCount + 1
        link.dropACLPacket(number: first)
        link.delayACLPacket(number: first + 1, by: 0.05)
        for i in 1...3 { central.receive(fromHost: acl(peer.central, .firstNonFlushable, [UInt8(i)])) }
        var got: [HCIPacket] = []
        waitFor("the delayed packet") { got += peer.host.take(); return got.count >= 2 }
        #expect(got == [acl(peer.peripheral, .first, [3]), acl(peer.peripheral, .first, [2])])
        #expect(link.log.contains("fault: dropped ACL packet #\(first)"))
    }
}

/// Issue 13 defect 12: `aclPacketCount` and `logHandler` are read and set from test threads
/// while the link context counts packets and logs. Before the fix both were plain stored
/// properties behind `@unchecked Sendable` (a data race: ThreadSanitizer reports it, see
/// `make tsan`); now the count is atomic and the handler is kept under the link's lock.
@Suite struct LinkThreadSafetyTests {
    @Test func packetCountAndLogHandlerFromAnotherThread() {
        let p = Pair()
        let (ha, _) = p.connect()
        let packets = 300
        let lines = Counter()
        let done = DispatchSemaphore(value: 0)
        let link = p.link
        let count: @Sendable (String) -> Void = { if $0.hasPrefix("fault: dropped ACL packet #") { lines.add() } }
        link.logHandler = count
        Thread {
            // Swap the handler and read the count while the link logs and counts.
            var last = 0
            while last < packets {
                link.logHandler = count
                last = link.aclPacketCount
            }
            done.signal()
        }.start()
        for i in 1...packets {
            link.dropACLPacket(number: i)  // each drop is logged ("fault: dropped ACL packet #i")
            p.a.controller.receive(fromHost: .acl(HCIACLPacket(handle: ha, boundary: .firstNonFlushable, data: [UInt8(i & 0xFF)])))
            link.runUntilIdle()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(link.aclPacketCount == packets)
        // Every drop was logged, and the handler in place when a line was logged saw it.
        #expect(link.log.filter { $0.hasPrefix("fault: dropped ACL packet #") }.count == 200)  // the log keeps 200
        #expect(lines.value == packets)
    }
}

final class Counter: Sendable {
    private let n = Mutex(0)
    func add() { n.withLock { $0 += 1 } }
    var value: Int { n.withLock { $0 } }
}

@Suite struct ServingTests {
    @Test func h4ServerOverTCPWithRawSocket() throws {
        let link = VirtualLink(mode: .live)
        let server = try H4Server(link: link, listen: ["tcp:127.0.0.1:0"])
        server.start()
        defer { server.stop() }
        let sock = try RawTCPConnection(port: server.listeners[0].port!)
        try sock.send([0x01, 0x09, 0x10, 0x00])  // Read BD_ADDR
        let answer = try sock.receive(exactly: 13)
        #expect(answer == [0x04, 0x0E, 0x0A, 0x01, 0x09, 0x10, 0x00, 0x01, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0])
        try sock.send([0x01, 0x13, 0x0C, 0x00])  // Write Local Name: unknown here
        #expect(try sock.receive(exactly: 7) == [0x04, 0x0E, 0x04, 0x01, 0x13, 0x0C, 0x01])
    }

    @Test func inProcessTransportRoundTrip() async throws {
        let (link, transports) = VirtualLink.inProcess(count: 2)
        defer { transports.forEach { $0.close() } }
        try transports[1].send(.command(ReadBDADDR().packet))
        var it = transports[1].incoming.makeAsyncIterator()
        guard case .event(let e)? = try await it.next() else { Issue.record("no event"); return }
        let cc = try #require(try HCIEvents.decode(e) as? CommandComplete)
        #expect(try cc.result(ReadBDADDR.self).address == link.controllers[1].publicAddress)
    }

    @Test func vhciOpenFailsWithClearMessage() {
        do {
            _ = try VHCIController(link: VirtualLink(mode: .manual), path: "/nonexistent/vhci")
            Issue.record("expected failure")
        } catch {
            #expect(error.kind == .open)
            #expect(error.message.contains("hci_vhci"))
        }
    }
}

/// Issue 31: a host that sends without reading its socket cannot stall the other hosts of a
/// link nor grow `controllers` without bound. Before, the link's context wrote the flooder's
/// answers itself and waited on its full socket (up to the 5 s send timeout) while every other
/// controller waited; the flooder's commands piled up meanwhile. Now its answers go through its
/// connection's bounded queue and writer, and past the bound it is not read.
@Suite struct FloodingHostTests {
    @Test func aHostThatDoesNotReadStallsNoOtherHost() async throws {
        let link = VirtualLink(mode: .live)
        let server = try H4Server(link: link, listen: ["tcp:127.0.0.1:0", "tcp:127.0.0.1:0"])
        server.start()
        defer { server.stop() }
        // The flooder: Read BD_ADDR (Core v5.4 Vol 4 Part E 7.4.6) as fast as the socket takes
        // it, never reading an answer. Its sends time out (200 ms) once it is not read.
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { Glibc.close(fd) }
        var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: server.listeners[0].port!.bigEndian,
                                  sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        try #require(connected == 0)
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let stop = Atomic<Bool>(false)
        let flooded = Atomic<Int>(0)
        let burst = Array(repeatElement([UInt8]([0x01, 0x09, 0x10, 0x00]), count: 4096).joined())
        let flooder = Thread {
            while !stop.load(ordering: .relaxed) {
                let n = burst.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if n > 0 { flooded.add(n, ordering: .relaxed) } else if errno != EAGAIN && errno != EINTR { break }
            }
        }
        flooder.start()
        // The other host: Read BD_ADDR once every 20 ms, each answered (the controller's
        // address, 7.4.6) within 1 s, for 2 s of flooding and at least 3 exchanges (a loaded
        // machine may run fewer in 2 s: the pool that runs this test is starved too).
        let other = try RawTCPConnection(port: server.listeners[1].port!)
        let clock = ContinuousClock()
        var slowest = Duration.zero
        let end = clock.now + .seconds(2)
        var answered = 0
        while clock.now < end || answered < 3 {
            let start = clock.now
            try other.send([0x01, 0x09, 0x10, 0x00])
            let answer = try other.receive(exactly: 13, timeout: 5)
            // Command Complete: 1 packet, the opcode, Success, BD_ADDR least significant octet first.
            #expect(answer == [0x04, 0x0E, 0x0A, 0x01, 0x09, 0x10, 0x00, 0x02, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0])
            slowest = max(slowest, clock.now - start)
            answered += 1
            try await Task.sleep(for: .milliseconds(20))
        }
        stop.store(true, ordering: .relaxed)
        #expect(slowest < .seconds(1), "the other host waited \(slowest) behind the flooder")
        // The claim is the bound on each answer above, not a rate: on a loaded machine (the
        // suites run in parallel on two cores, in a debug build) an exchange behind a 64 KiB
        // batch of the flooder's commands takes hundreds of milliseconds.
        // The flooder was held back: what it got accepted is bounded by the kernel's socket
        // buffers and the connection's queue, not by how long it tried. Answers queued: the
        // bound, then those of its controller's backlog and of one 64 KiB read at most (4
        // octets a command, 13 a Command Complete).
        let queued = try #require(server.host(0)).queuedOctets
        let bound = H4Connection.maxQueuedOctets + (H4Connection.maxBacklog + 64 * 1024 / 4) * 13
        #expect(queued <= bound, "answers queued for the flooder: \(queued) octets")
        #expect(server.listeners[0].controller.queuedFromHost <= H4Connection.maxBacklog + 64 * 1024 / 4)
        #expect(flooded.load(ordering: .relaxed) > 0)
        flooder.cancel()
    }
}
