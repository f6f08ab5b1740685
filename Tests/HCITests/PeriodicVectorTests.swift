import Testing
@testable import HCI

/// Periodic advertising and sync (Core v5.4 Vol 4 Part E 7.8.61-7.8.63, 7.8.67-7.8.69,
/// 7.7.65.14-7.7.65.16): H4 bytes as Bumble's encoder writes them (bumble 0.0.236,
/// `bytes(HCI_LE_..._Command(...))` / `bytes(HCI_LE_..._Event(...))`), laid out as the
/// specification's parameter tables give them.
@Suite struct PeriodicVectorTests {
    let address = BDAddress([0xC1, 0x02, 0x03, 0x04, 0x05, 0x06])

    func roundTrips<C: HCICommand & Equatable>(_ command: C, _ h4: [UInt8]) throws {
        #expect(HCIPacket.command(command.packet).h4 == h4, "\(C.name)")
        #expect(try C.decode(Array(h4.dropFirst(4))) == command, "\(C.name)")
    }

    @Test func commandsMatchBumble() throws {
        try roundTrips(LESetPeriodicAdvertisingParameters(advertisingHandle: 0, periodicAdvertisingIntervalMin: 0x50,
                                                          periodicAdvertisingIntervalMax: 0x60, periodicAdvertisingProperties: 0x40),
                       [0x01, 0x3E, 0x20, 0x07, 0x00, 0x50, 0x00, 0x60, 0x00, 0x40, 0x00])
        try roundTrips(LESetPeriodicAdvertisingData(advertisingHandle: 0, operation: 3, advertisingData: [0x03, 0xFF, 0x01, 0x02]),
                       [0x01, 0x3F, 0x20, 0x07, 0x00, 0x03, 0x04, 0x03, 0xFF, 0x01, 0x02])
        try roundTrips(LESetPeriodicAdvertisingEnable(enable: 1, advertisingHandle: 0), [0x01, 0x40, 0x20, 0x02, 0x01, 0x00])
        try roundTrips(LEPeriodicAdvertisingCreateSync(options: 0, advertisingSID: 3, advertiserAddressType: 1, advertiserAddress: address,
                                                       skip: 0, syncTimeout: 0x64, syncCTEType: 0),
                       [0x01, 0x44, 0x20, 0x0E, 0x00, 0x03, 0x01, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1, 0x00, 0x00, 0x64, 0x00, 0x00])
        try roundTrips(LEPeriodicAdvertisingCreateSyncCancel(), [0x01, 0x45, 0x20, 0x00])
        try roundTrips(LEPeriodicAdvertisingTerminateSync(syncHandle: 1), [0x01, 0x46, 0x20, 0x02, 0x01, 0x00])
    }

    @Test func eventsMatchBumble() throws {
        let established: [UInt8] = [0x04, 0x3E, 0x10, 0x0E, 0x00, 0x01, 0x00, 0x03, 0x01, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1,
                                    0x01, 0x50, 0x00, 0x00]
        let e = LEPeriodicAdvertisingSyncEstablished(syncHandle: 1, advertisingSID: 3, advertiserAddressType: 1, advertiserAddress: address,
                                                     periodicAdvertisingInterval: 0x50)
        #expect(HCIPacket.event(e.packet).h4 == established)
        let report: [UInt8] = [0x04, 0x3E, 0x0C, 0x0F, 0x01, 0x00, 0x7F, 0xCE, 0xFF, 0x01, 0x04, 0x03, 0xFF, 0x01, 0x02]
        let r = LEPeriodicAdvertisingReport(syncHandle: 1, txPower: 127, rssi: -50, cteType: 0xFF, dataStatus: 1, data: [0x03, 0xFF, 0x01, 0x02])
        #expect(HCIPacket.event(r.packet).h4 == report)
        var reader = ByteReader(Array(report.dropFirst(4)))
        #expect(try LEPeriodicAdvertisingReport(parameters: &reader) == r)
        #expect(HCIPacket.event(LEPeriodicAdvertisingSyncLost(syncHandle: 1).packet).h4 == [0x04, 0x3E, 0x03, 0x10, 0x01, 0x00])
    }

    /// Periodic Advertising Sync Transfer (7.8.89-7.8.92, 7.7.65.24), as Bumble encodes it.
    @Test func syncTransferMatchesBumble() throws {
        try roundTrips(LEPeriodicAdvertisingSyncTransfer(connectionHandle: 0x40, serviceData: 0x1234, syncHandle: 1),
                       [0x01, 0x5A, 0x20, 0x06, 0x40, 0x00, 0x34, 0x12, 0x01, 0x00])
        try roundTrips(LEPeriodicAdvertisingSetInfoTransfer(connectionHandle: 0x40, serviceData: 0x1234, advertisingHandle: 0),
                       [0x01, 0x5B, 0x20, 0x05, 0x40, 0x00, 0x34, 0x12, 0x00])
        try roundTrips(LESetPeriodicAdvertisingSyncTransferParameters(connectionHandle: 0x40, mode: 2, skip: 0, syncTimeout: 0x64, cteType: 0),
                       [0x01, 0x5C, 0x20, 0x08, 0x40, 0x00, 0x02, 0x00, 0x00, 0x64, 0x00, 0x00])
        try roundTrips(LESetDefaultPeriodicAdvertisingSyncTransferParameters(mode: 2, skip: 0, syncTimeout: 0x64, cteType: 0),
                       [0x01, 0x5D, 0x20, 0x06, 0x02, 0x00, 0x00, 0x64, 0x00, 0x00])
        let received = LEPeriodicAdvertisingSyncTransferReceived(connectionHandle: 0x40, serviceData: 0x1234, syncHandle: 1, advertisingSID: 3,
                                                                 advertiserAddressType: 1, advertiserAddress: address,
                                                                 periodicAdvertisingInterval: 0x50)
        #expect(HCIPacket.event(received.packet).h4 == [0x04, 0x3E, 0x14, 0x18, 0x00, 0x40, 0x00, 0x34, 0x12, 0x01, 0x00, 0x03, 0x01,
                                                        0x06, 0x05, 0x04, 0x03, 0x02, 0xC1, 0x01, 0x50, 0x00, 0x00])
    }

    /// Values the specification does not allow are refused by the decoder, naming the field
    /// (so a controller answers Invalid HCI Command Parameters): an SID over 0x0F (7.8.67), a
    /// periodic interval under 0x0006 (7.8.61), an Operation over 0x04 (7.8.62), a Data_Length
    /// over 252 (7.8.62).
    @Test func outOfRangeParametersAreRefused() {
        #expect(throws: DecodeError.self) { try LEPeriodicAdvertisingCreateSync.decode([0x00, 0x10, 0x01, 6, 5, 4, 3, 2, 0xC1, 0, 0, 0x64, 0, 0]) }
        #expect(throws: DecodeError.self) { try LESetPeriodicAdvertisingParameters.decode([0x00, 0x05, 0x00, 0x50, 0x00, 0x00, 0x00]) }
        #expect(throws: DecodeError.self) { try LESetPeriodicAdvertisingData.decode([0x00, 0x05, 0x00]) }
        #expect(throws: DecodeError.self) { try LESetPeriodicAdvertisingData.decode([0x00, 0x03, 253] + [UInt8](repeating: 0, count: 253)) }
    }
}

/// The resolving list commands (Core v5.4 Vol 4 Part E 7.8.38, 7.8.40, 7.8.41, 7.8.44, 7.8.45,
/// 7.8.77) as Bumble's encoder writes them (bumble 0.0.236), and the Supported_Commands bit of
/// each periodic and resolving-list command as Bumble's HCI_SUPPORTED_COMMANDS_MASKS gives it
/// (Vol 4 Part E 6.27).
@Suite struct ResolvingListVectorTests {
    let address = BDAddress([0xC1, 0x02, 0x03, 0x04, 0x05, 0x06])

    @Test func commandsMatchBumble() throws {
        let add = LEAddDeviceToResolvingList(peerIdentityAddressType: 0, peerIdentityAddress: address, peerIRK: Array(0..<16),
                                             localIRK: [UInt8](repeating: 0, count: 16))
        #expect(HCIPacket.command(add.packet).h4 == [0x01, 0x27, 0x20, 0x27, 0x00, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1] + Array(0..<16)
                + [UInt8](repeating: 0, count: 16))
        #expect(try LEAddDeviceToResolvingList.decode(Array(HCIPacket.command(add.packet).h4.dropFirst(4))) == add)
        #expect(HCIPacket.command(LEClearResolvingList().packet).h4 == [0x01, 0x29, 0x20, 0x00])
        #expect(HCIPacket.command(LEReadResolvingListSize().packet).h4 == [0x01, 0x2A, 0x20, 0x00])
        #expect(HCIPacket.command(LESetAddressResolutionEnable(addressResolutionEnable: true).packet).h4 == [0x01, 0x2D, 0x20, 0x01, 0x01])
        #expect(HCIPacket.command(LESetResolvablePrivateAddressTimeout(rpaTimeout: 900).packet).h4 == [0x01, 0x2E, 0x20, 0x02, 0x84, 0x03])
        let mode = LESetPrivacyMode(peerIdentityAddressType: 0, peerIdentityAddress: address, privacyMode: 1)
        #expect(HCIPacket.command(mode.packet).h4 == [0x01, 0x4E, 0x20, 0x08, 0x00, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1, 0x01])
    }

    @Test func supportedCommandsBitsMatchBumble() {
        let bits: [(any HCICommand.Type, Int, Int)] = [
            (LEAddDeviceToResolvingList.self, 34, 3), (LERemoveDeviceFromResolvingList.self, 34, 4), (LEClearResolvingList.self, 34, 5),
            (LEReadResolvingListSize.self, 34, 6), (LESetAddressResolutionEnable.self, 35, 1),
            (LESetResolvablePrivateAddressTimeout.self, 35, 2), (LESetPrivacyMode.self, 39, 2),
            (LESetPeriodicAdvertisingParameters.self, 37, 2), (LESetPeriodicAdvertisingData.self, 37, 3),
            (LESetPeriodicAdvertisingEnable.self, 37, 4), (LEPeriodicAdvertisingCreateSync.self, 38, 0),
            (LEPeriodicAdvertisingCreateSyncCancel.self, 38, 1), (LEPeriodicAdvertisingTerminateSync.self, 38, 2),
            (LEPeriodicAdvertisingSyncTransfer.self, 40, 6), (LEPeriodicAdvertisingSetInfoTransfer.self, 40, 7),
            (LESetPeriodicAdvertisingSyncTransferParameters.self, 41, 0),
            (LESetDefaultPeriodicAdvertisingSyncTransferParameters.self, 41, 1)]
        for (t, octet, bit) in bits {
            #expect(ReadLocalSupportedCommands.bitPosition(t.opcode).map { [$0.octet, $0.bit] } == [octet, bit], "\(t.name)")
        }
    }
}
