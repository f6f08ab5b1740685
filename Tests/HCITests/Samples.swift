@testable import HCI

// One sample value of every registered command, return parameter and event type, used by
// the generic round-trip and truncation tests. RegistryTests checks none is missing.

let addrA = BDAddress([0xF0, 0xF1, 0xF2, 0xF3, 0xF4, 0xF5])
let addrB = BDAddress([0xC0, 0x11, 0x22, 0x33, 0x44, 0x55])
let key16: [UInt8] = Array(0x00..<0x10)

let commandSamples: [any HCICommand] = [
    LEPeriodicAdvertisingSyncTransfer(connectionHandle: 0x40, serviceData: 0x1234, syncHandle: 1),
    LEPeriodicAdvertisingSetInfoTransfer(connectionHandle: 0x40, serviceData: 0x1234, advertisingHandle: 0),
    LESetPeriodicAdvertisingSyncTransferParameters(connectionHandle: 0x40), LESetDefaultPeriodicAdvertisingSyncTransferParameters(),
    LEAddDeviceToResolvingList(peerIdentityAddressType: 0, peerIdentityAddress: addrA, peerIRK: key16, localIRK: key16.reversed()),
    LERemoveDeviceFromResolvingList(peerIdentityAddressType: 1, peerIdentityAddress: addrB), LEClearResolvingList(),
    LEReadResolvingListSize(), LESetAddressResolutionEnable(addressResolutionEnable: true),
    LEReadLocalResolvableAddress(peerIdentityAddressType: 0, peerIdentityAddress: addrA),
    LESetResolvablePrivateAddressTimeout(rpaTimeout: 900), LESetPrivacyMode(peerIdentityAddressType: 0, peerIdentityAddress: addrA, privacyMode: 1),
    LESetPeriodicAdvertisingParameters(advertisingHandle: 0, periodicAdvertisingIntervalMin: 0x50, periodicAdvertisingIntervalMax: 0x60),
    LESetPeriodicAdvertisingData(advertisingHandle: 0, advertisingData: [0x03, 0xFF, 0x01, 0x02]),
    LESetPeriodicAdvertisingEnable(enable: 1, advertisingHandle: 0),
    LEPeriodicAdvertisingCreateSync(advertisingSID: 3, advertiserAddressType: 1, advertiserAddress: addrB),
    LEPeriodicAdvertisingCreateSyncCancel(), LEPeriodicAdvertisingTerminateSync(syncHandle: 1),
    Disconnect(connectionHandle: 0x0040, reason: .remoteUserTerminated),
    SetEventMask(.leHost), Reset(), WriteLEHostSupport(),
    ReadLocalVersionInformation(), ReadLocalSupportedCommands(), ReadLocalSupportedFeatures(),
    ReadBufferSize(), ReadBDADDR(), ReadRSSI(connectionHandle: 0x0041), ReadEncryptionKeySize(connectionHandle: 0x0041),
    LESetEventMask(.host), LEReadBufferSize(), LEReadBufferSizeV2(), LEReadLocalSupportedFeatures(), LEReadSupportedStates(),
    LESetRandomAddress(randomAddress: addrB),
    LECreateConnection(peerAddressType: .random, peerAddress: addrA),
    LECreateConnectionCancel(), LEReadFilterAcceptListSize(), LEClearFilterAcceptList(),
    LEAddDeviceToFilterAcceptList(addressType: 0x01, address: addrB),
    LERemoveDeviceFromFilterAcceptList(addressType: 0x00, address: addrA),
    ReadLocalName(), SetEventMaskPage2(eventMaskPage2: 1 << 23),
    LEConnectionUpdate(connectionHandle: 0x40, connectionIntervalMin: 6, connectionIntervalMax: 12, maxLatency: 0, supervisionTimeout: 200),
    LEReadRemoteFeatures(connectionHandle: 0x40),
    LEEncrypt(key: key16, plaintextData: key16.reversed()), LERand(),
    LEEnableEncryption(connectionHandle: 0x40, randomNumber: 0x0102030405060708, encryptedDiversifier: 0x1234, longTermKey: key16),
    LELongTermKeyRequestReply(connectionHandle: 0x40, longTermKey: key16),
    LELongTermKeyRequestNegativeReply(connectionHandle: 0x40),
    LESetDataLength(connectionHandle: 0x40), LEReadSuggestedDefaultDataLength(),
    LEWriteSuggestedDefaultDataLength(suggestedMaxTxOctets: 251, suggestedMaxTxTime: 2120),
    LEReadMaximumDataLength(), LEReadPHY(connectionHandle: 0x40),
    LESetDefaultPHY(txPHYs: 0x03, rxPHYs: 0x03), LESetPHY(connectionHandle: 0x40, txPHYs: 0x02, rxPHYs: 0x02, phyOptions: 0),
    LESetAdvertisingParameters(advertisingIntervalMin: 0x30, advertisingIntervalMax: 0x40, ownAddressType: .random),
    LEReadAdvertisingPhysicalChannelTxPower(),
    LESetAdvertisingData(advertisingData: [0x02, 0x01, 0x06, 0x03, 0x09, 0x41, 0x42]),
    LESetScanResponseData(scanResponseData: [0x03, 0x09, 0x41, 0x42]),
    LESetAdvertisingEnable(advertisingEnable: true),
    LESetScanParameters(leScanType: 1, leScanInterval: 0x60, leScanWindow: 0x30, ownAddressType: .random),
    LESetScanEnable(leScanEnable: true, filterDuplicates: true),
    LESetAdvertisingSetRandomAddress(advertisingHandle: 1, randomAddress: addrB),
    LESetExtendedAdvertisingParameters(advertisingHandle: 1, primaryAdvertisingIntervalMin: 0x30, primaryAdvertisingIntervalMax: 0x40),
    LESetExtendedAdvertisingData(advertisingHandle: 1, advertisingData: [0x02, 0x01, 0x06]),
    LESetExtendedScanResponseData(advertisingHandle: 1, scanResponseData: [0x03, 0x09, 0x41, 0x42]),
    LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 1), .init(advertisingHandle: 2, duration: 100, maxExtendedAdvertisingEvents: 5)]),
    LEReadMaximumAdvertisingDataLength(), LEReadNumberOfSupportedAdvertisingSets(),
    LERemoveAdvertisingSet(advertisingHandle: 1), LEClearAdvertisingSets(),
    LESetExtendedScanParameters(scanningPHYs: 0x05, phyParameters: [.init(scanType: 1), .init(scanType: 0, scanInterval: 0x20, scanWindow: 0x10)]),
    LESetExtendedScanEnable(enable: true, filterDuplicates: 1, duration: 100, period: 0),
    LEExtendedCreateConnection(peerAddressType: .random, peerAddress: addrA, initiatingPHYs: 0x05,
                               phyParameters: [.init(), .init(scanInterval: 0x61)]),
]

/// Command Complete return parameters (after Status) for each command that has more than Status.
let returnSamples: [(any HCICommand.Type, any HCIReturnParameters)] = [
    (ReadLocalVersionInformation.self, ReadLocalVersionInformation.ReturnParameters(hciVersion: 13, hciSubversion: 1, lmpVersion: 13, companyIdentifier: 0x05F1, lmpSubversion: 2)),
    (ReadLocalSupportedCommands.self, ReadLocalSupportedCommands.ReturnParameters(supporting: [Reset.opcode, LESetScanEnable.opcode])),
    (ReadLocalSupportedFeatures.self, ReadLocalSupportedFeatures.ReturnParameters(lmpFeatures: 1 << 38)),
    (ReadBufferSize.self, ReadBufferSize.ReturnParameters(aclDataPacketLength: 1021, synchronousDataPacketLength: 96, totalNumACLDataPackets: 6, totalNumSynchronousDataPackets: 1)),
    (ReadBDADDR.self, ReadBDADDR.ReturnParameters(address: addrA)),
    (ReadLocalName.self, ReadLocalName.ReturnParameters(name: "ble-hci")),
    (ReadRSSI.self, ReadRSSI.ReturnParameters(connectionHandle: 0x40, rssi: -60)),
    (ReadEncryptionKeySize.self, ReadEncryptionKeySize.ReturnParameters(connectionHandle: 0x40, keySize: 16)),
    (LEReadBufferSize.self, LEReadBufferSize.ReturnParameters(leACLDataPacketLength: 251, totalNumLEACLDataPackets: 15)),
    (LEReadBufferSizeV2.self, LEReadBufferSizeV2.ReturnParameters(leACLDataPacketLength: 251, totalNumLEACLDataPackets: 15, isoDataPacketLength: 100, totalNumISODataPackets: 4)),
    (LEReadLocalSupportedFeatures.self, LEReadLocalSupportedFeatures.ReturnParameters(leFeatures: [.leEncryption, .le2MPHY])),
    (LEReadSupportedStates.self, LEReadSupportedStates.ReturnParameters(leStates: 0x3FF_FFFF_FFFF)),
    (LEReadFilterAcceptListSize.self, LEReadFilterAcceptListSize.ReturnParameters(filterAcceptListSize: 8)),
    (LEEncrypt.self, LEEncrypt.ReturnParameters(encryptedData: key16)),
    (LERand.self, LERand.ReturnParameters(randomNumber: 0xDEADBEEF_01020304)),
    (LELongTermKeyRequestReply.self, ConnectionHandleReturn(connectionHandle: 0x40)),
    (LELongTermKeyRequestNegativeReply.self, ConnectionHandleReturn(connectionHandle: 0x40)),
    (LESetDataLength.self, ConnectionHandleReturn(connectionHandle: 0x40)),
    (LEReadSuggestedDefaultDataLength.self, LEReadSuggestedDefaultDataLength.ReturnParameters(suggestedMaxTxOctets: 27, suggestedMaxTxTime: 328)),
    (LEReadMaximumDataLength.self, LEReadMaximumDataLength.ReturnParameters(supportedMaxTxOctets: 251, supportedMaxTxTime: 17040, supportedMaxRxOctets: 251, supportedMaxRxTime: 17040)),
    (LEReadPHY.self, LEReadPHY.ReturnParameters(connectionHandle: 0x40, txPHY: 2, rxPHY: 2)),
    (LEReadAdvertisingPhysicalChannelTxPower.self, LEReadAdvertisingPhysicalChannelTxPower.ReturnParameters(txPowerLevel: -4)),
    (LESetExtendedAdvertisingParameters.self, LESetExtendedAdvertisingParameters.ReturnParameters(selectedTxPower: 0)),
    (LEReadMaximumAdvertisingDataLength.self, LEReadMaximumAdvertisingDataLength.ReturnParameters(maxAdvertisingDataLength: 1650)),
    (LEPeriodicAdvertisingSyncTransfer.self, ConnectionHandleReturn(connectionHandle: 0x40)),
    (LEPeriodicAdvertisingSetInfoTransfer.self, ConnectionHandleReturn(connectionHandle: 0x40)),
    (LESetPeriodicAdvertisingSyncTransferParameters.self, ConnectionHandleReturn(connectionHandle: 0x40)),
    (LEReadResolvingListSize.self, LEReadResolvingListSize.ReturnParameters(resolvingListSize: 8)),
    (LEReadLocalResolvableAddress.self, LEReadLocalResolvableAddress.ReturnParameters(localResolvableAddress: addrB)),
    (LEReadNumberOfSupportedAdvertisingSets.self, LEReadNumberOfSupportedAdvertisingSets.ReturnParameters(numSupportedAdvertisingSets: 4)),
]

let enhanced = LEEnhancedConnectionComplete(status: .success, connectionHandle: 0x40, role: 1, peerAddressType: .random, peerAddress: addrA,
                                            peerResolvablePrivateAddress: addrB, connectionInterval: 24, peripheralLatency: 0, supervisionTimeout: 72)

let subeventSamples: [any LEMetaEventParameters] = [
    LEConnectionComplete(status: .success, connectionHandle: 0x40, role: 0, peerAddressType: .random, peerAddress: addrA,
                         connectionInterval: 24, peripheralLatency: 0, supervisionTimeout: 72),
    LEAdvertisingReport(reports: [.init(eventType: 0, addressType: .random, address: addrA, data: [0x02, 0x01, 0x06], rssi: -60),
                                  .init(eventType: 4, addressType: .public, address: addrB, data: [], rssi: -70)]),
    LEConnectionUpdateComplete(connectionHandle: 0x40, connectionInterval: 6, peripheralLatency: 0, supervisionTimeout: 200),
    LEReadRemoteFeaturesComplete(connectionHandle: 0x40, leFeatures: [.leEncryption, .dataPacketLengthExtension]),
    LELongTermKeyRequest(connectionHandle: 0x40, randomNumber: 0x1122334455667788, encryptedDiversifier: 0xABCD),
    LEDataLengthChange(connectionHandle: 0x40, maxTxOctets: 251, maxTxTime: 2120, maxRxOctets: 251, maxRxTime: 2120),
    enhanced,
    LEDirectedAdvertisingReport(reports: [.init(addressType: .random, address: addrA, directAddress: addrB, rssi: -40)]),
    LEPHYUpdateComplete(connectionHandle: 0x40, txPHY: 2, rxPHY: 2),
    LEExtendedAdvertisingReport(reports: [.init(eventType: .advInd, addressType: 1, address: addrA, rssi: -50, data: [0x02, 0x01, 0x06]),
                                          .init(eventType: ExtendedAdvertisingEventType(rawValue: 0x0005), addressType: 0xFF, address: .zero,
                                                primaryPHY: 3, secondaryPHY: 2, advertisingSID: 3, txPower: -10, rssi: -80,
                                                periodicAdvertisingInterval: 80, directAddressType: 1, directAddress: addrB, data: Array(repeating: 0xAA, count: 40))]),
    LEScanTimeout(),
    LEAdvertisingSetTerminated(advertisingHandle: 1, connectionHandle: 0x40, numCompletedExtendedAdvertisingEvents: 3),
    LEEnhancedConnectionCompleteV2(enhanced, advertisingHandle: 1, syncHandle: 0xFFFF),
    LEPeriodicAdvertisingSyncEstablished(syncHandle: 1, advertisingSID: 3, advertiserAddressType: 1, advertiserAddress: addrA,
                                         periodicAdvertisingInterval: 0x50),
    LEPeriodicAdvertisingReport(syncHandle: 1, rssi: -50, dataStatus: 1, data: [0x03, 0xFF, 0x01, 0x02]),
    LEPeriodicAdvertisingSyncLost(syncHandle: 1),
    LEPeriodicAdvertisingSyncTransferReceived(connectionHandle: 0x40, serviceData: 0x1234, syncHandle: 1, advertisingSID: 3,
                                              advertiserAddressType: 1, advertiserAddress: addrA, periodicAdvertisingInterval: 0x50),
]

let eventSamples: [any HCIEventParameters] = [
    CommandComplete(ReadBDADDR.self, .init(address: addrA)),
    CommandStatus(status: .success, opcode: LECreateConnection.opcode),
    DisconnectionComplete(connectionHandle: 0x40, reason: .localHostTerminated),
    ConnectionComplete(status: .success, connectionHandle: 0x0B, bdAddr: addrA, linkType: 0x01, encryptionEnabled: 0x00),
    NumberOfCompletedPackets(entries: [.init(connectionHandle: 0x40, numCompletedPackets: 1), .init(connectionHandle: 0x41, numCompletedPackets: 2)]),
    EncryptionChange(connectionHandle: 0x40, encryptionEnabled: 1),
    EncryptionChangeV2(connectionHandle: 0x40, encryptionEnabled: 1, encryptionKeySize: 16),
    EncryptionKeyRefreshComplete(connectionHandle: 0x40),
    HardwareError(hardwareCode: 0x12),
    DataBufferOverflow(linkType: 1),
] + subeventSamples.map { LEMetaEvent($0) as any HCIEventParameters }

func encoded(_ c: any HCICommand) -> [UInt8] { c.packet.parameters }
func encoded(_ e: any HCIEventParameters) -> [UInt8] { e.packet.parameters }
func encoded(_ r: any HCIReturnParameters) -> [UInt8] { var w = ByteWriter(); r.encode(into: &w); return w.bytes }

/// True when every field name (recursively) is lowerCamelCase: starts lowercase, letters and digits only.
func allNamesLowerCamel(_ fields: [Field]) -> Bool {
    fields.allSatisfy { f in
        guard let first = f.name.unicodeScalars.first, first.properties.isLowercase,
              f.name.unicodeScalars.allSatisfy({ $0.properties.isAlphabetic || ("0"..."9").contains($0) }) else { return false }
        switch f.value {
        case .object(let inner): return allNamesLowerCamel(inner)
        case .list(let items): return items.allSatisfy { if case .object(let o) = $0 { allNamesLowerCamel(o) } else { true } }
        default: return true
        }
    }
}
