// Every typed command and event the stack knows. A type missing here still works in the
// stack but shows as "Unknown" in `dump`; HCITests checks each list has no duplicate code.

let allCommandTypes: [any HCICommand.Type] = [
    // Link Control, Controller & Baseband, Informational, Status
    Disconnect.self, SetEventMask.self, Reset.self, WriteLEHostSupport.self,
    ReadLocalVersionInformation.self, ReadLocalSupportedCommands.self, ReadLocalSupportedFeatures.self,
    ReadBufferSize.self, ReadBDADDR.self, ReadRSSI.self, ReadEncryptionKeySize.self,
    // LE controller set-up, connections, encryption, data length, PHY
    LESetEventMask.self, LEReadBufferSize.self, LEReadBufferSizeV2.self, LEReadLocalSupportedFeatures.self, LEReadSupportedStates.self,
    LESetRandomAddress.self, LECreateConnection.self, LECreateConnectionCancel.self,
    LEReadFilterAcceptListSize.self, LEClearFilterAcceptList.self, LEConnectionUpdate.self,
    LEReadRemoteFeatures.self, LEEncrypt.self, LERand.self, LEEnableEncryption.self,
    LELongTermKeyRequestReply.self, LELongTermKeyRequestNegativeReply.self,
    LESetDataLength.self, LEReadSuggestedDefaultDataLength.self, LEWriteSuggestedDefaultDataLength.self,
    LEReadMaximumDataLength.self, LEReadPHY.self, LESetDefaultPHY.self, LESetPHY.self,
    // Legacy advertising and scanning
    LESetAdvertisingParameters.self, LEReadAdvertisingPhysicalChannelTxPower.self, LESetAdvertisingData.self,
    LESetScanResponseData.self, LESetAdvertisingEnable.self, LESetScanParameters.self, LESetScanEnable.self,
    // Extended advertising, scanning, connection
    LESetAdvertisingSetRandomAddress.self, LESetExtendedAdvertisingParameters.self, LESetExtendedAdvertisingData.self,
    LESetExtendedScanResponseData.self, LESetExtendedAdvertisingEnable.self, LEReadMaximumAdvertisingDataLength.self,
    LEReadNumberOfSupportedAdvertisingSets.self, LERemoveAdvertisingSet.self, LEClearAdvertisingSets.self,
    LESetExtendedScanParameters.self, LESetExtendedScanEnable.self, LEExtendedCreateConnection.self,
]

let allEventTypes: [any HCIEventParameters.Type] = [
    CommandComplete.self, CommandStatus.self, DisconnectionComplete.self, NumberOfCompletedPackets.self,
    EncryptionChange.self, EncryptionChangeV2.self, EncryptionKeyRefreshComplete.self, HardwareError.self,
    DataBufferOverflow.self, LEMetaEvent.self,
]

let allLESubeventTypes: [any LEMetaEventParameters.Type] = [
    LEConnectionComplete.self, LEAdvertisingReport.self, LEConnectionUpdateComplete.self,
    LEReadRemoteFeaturesComplete.self, LELongTermKeyRequest.self, LEDataLengthChange.self,
    LEEnhancedConnectionComplete.self, LEDirectedAdvertisingReport.self, LEPHYUpdateComplete.self,
    LEExtendedAdvertisingReport.self, LEScanTimeout.self, LEAdvertisingSetTerminated.self,
    LEEnhancedConnectionCompleteV2.self,
]

/// The registered command types (for the virtual controller's supported-commands mask and tests).
public var registeredCommandTypes: [any HCICommand.Type] { allCommandTypes }
public var registeredEventTypes: [any HCIEventParameters.Type] { allEventTypes }
public var registeredLESubeventTypes: [any LEMetaEventParameters.Type] { allLESubeventTypes }
