import HCI

extension VirtualController {
    /// Every command this controller implements: the dispatcher answers exactly these, and
    /// Read Local Supported Commands reports exactly these. Everything else gets Unknown HCI
    /// Command. It is every command described in Tools/pdl/hci.pdl: `HCICommandHandler` has one
    /// `handle` per description, so a new one without its behaviour here does not compile.
    public static let implementedCommands: [any HCICommand.Type] = registeredCommandTypes

    public static let supportedCommands = ReadLocalSupportedCommands.ReturnParameters(
        supporting: implementedCommands.map { $0.opcode })
}

extension ControllerState: HCICommandHandler {
    /// The legacy and the extended advertising commands (advertising, scanning and initiating) of
    /// Core v5.4 Vol 4 Part E 3.1.1, by opcode: once the host has issued one kind, the other is
    /// refused with Command Disallowed until Reset.
    static let advertisingCommandKinds: [UInt16: AdvertisingCommandKind] = {
        let legacy: [any HCICommand.Type] = [
            LESetAdvertisingParameters.self, LEReadAdvertisingPhysicalChannelTxPower.self, LESetAdvertisingData.self,
            LESetScanResponseData.self, LESetAdvertisingEnable.self, LESetScanParameters.self, LESetScanEnable.self,
            LECreateConnection.self]
        let extended: [any HCICommand.Type] = [
            LESetAdvertisingSetRandomAddress.self, LESetExtendedAdvertisingParameters.self, LESetExtendedAdvertisingData.self,
            LESetExtendedScanResponseData.self, LESetExtendedAdvertisingEnable.self, LEReadMaximumAdvertisingDataLength.self,
            LEReadNumberOfSupportedAdvertisingSets.self, LERemoveAdvertisingSet.self, LEClearAdvertisingSets.self,
            LESetExtendedScanParameters.self, LESetExtendedScanEnable.self, LEExtendedCreateConnection.self,
            LESetPeriodicAdvertisingParameters.self, LESetPeriodicAdvertisingData.self, LESetPeriodicAdvertisingEnable.self,
            LEPeriodicAdvertisingCreateSync.self, LEPeriodicAdvertisingCreateSyncCancel.self, LEPeriodicAdvertisingTerminateSync.self]
        return Dictionary(uniqueKeysWithValues: legacy.map { ($0.opcode.rawValue, .legacy) }
                          + extended.map { ($0.opcode.rawValue, .extended) })
    }()

    // MARK: - Answers

    func complete<C: HCICommand>(_ c: C.Type, _ ret: C.ReturnParameters) {
        deliver(.event(CommandComplete(C.self, ret).packet))
    }

    func complete<C: HCICommand>(_ c: C.Type) where C.ReturnParameters == NoReturnParameters {
        complete(C.self, NoReturnParameters())
    }

    /// Command Status (success) for a command that completes later.
    func accepted<C: HCICommand>(_ c: C.Type) {
        deliver(.event(CommandStatus(status: .success, opcode: C.opcode).packet))
    }

    /// Refuses `opcode` with `status`: Command Status for commands that complete with status,
    /// Command Complete otherwise (with the connection handle where the return parameters have one).
    func reject(_ opcode: HCIOpcode, _ status: HCIStatus, handle: UInt16? = nil) {
        if let t = HCICommands.type(for: opcode), t.completesWithStatus {
            deliver(.event(CommandStatus(status: status, opcode: opcode).packet))
        } else {
            var ret: [UInt8] = [status.rawValue]
            if let handle { ret += [UInt8(handle & 0xff), UInt8(handle >> 8)] }
            deliver(.event(CommandComplete(opcode: opcode, returnParameters: ret).packet))
        }
    }

    func reject<C: HCICommand>(_ c: C.Type, _ status: HCIStatus, handle: UInt16? = nil) {
        reject(C.opcode, status, handle: handle)
    }

    // MARK: - Dispatch

    func handleCommand(_ packet: HCICommandPacket) {
        if silent {
            link.note("controller \(index): not answering \(packet.opcode) (fault injected)")
            return
        }
        if let kind = ControllerState.advertisingCommandKinds[packet.opcode.rawValue] {
            if let used = advertisingCommands, used != kind {
                link.note("controller \(index): \(packet.opcode): \(kind) advertising command after \(used) ones without Reset")
                return reject(packet.opcode, .commandDisallowed)
            }
            advertisingCommands = kind
        }
        do {
            // Decodes by opcode and calls the handler below (the table is generated from the
            // descriptions in Tools/pdl/hci.pdl; a described command without a handler won't compile).
            guard try dispatch(packet) else {
                link.note("controller \(index): Unknown HCI Command \(packet.opcode)")
                return reject(packet.opcode, .unknownCommand)
            }
        } catch {
            link.note("controller \(index): \(packet.opcode): bad parameters: \(error)")
            reject(packet.opcode, .invalidParameters)
        }
    }

    // MARK: - Handlers

    // MARK: Controller set-up

    package func handle(_ _: Reset) {
        resetState()
        complete(Reset.self)
    }

    package func handle(_ c: SetEventMask) {
        eventMask = c.eventMask
        complete(SetEventMask.self)
    }

    package func handle(_ c: LESetEventMask) {
        leEventMask = c.leEventMask
        complete(LESetEventMask.self)
    }

    package func handle(_ c: WriteLEHostSupport) {
        guard c.leSupportedHost <= 1 else { return reject(WriteLEHostSupport.self, .invalidParameters) }
        complete(WriteLEHostSupport.self)
    }

    package func handle(_ _: ReadLocalVersionInformation) {
        complete(ReadLocalVersionInformation.self, .init(hciVersion: 0x0D, hciSubversion: 0, lmpVersion: 0x0D,
                                                         companyIdentifier: 0xFFFF, lmpSubversion: 0))
    }

    package func handle(_ _: ReadLocalSupportedCommands) {
        complete(ReadLocalSupportedCommands.self, VirtualController.supportedCommands)
    }

    package func handle(_ _: ReadLocalSupportedFeatures) {
        complete(ReadLocalSupportedFeatures.self, .init(lmpFeatures: 1 << 38 | 1 << 37))
    }

    package func handle(_ _: LEReadLocalSupportedFeatures) {
        complete(LEReadLocalSupportedFeatures.self, .init(leFeatures: VirtualController.features))
    }

    package func handle(_ _: LEReadSupportedStates) {
        // Every combination of states the Core 5.x table defines (bits 0-41): the link
        // simulation puts no limit on roles.
        complete(LEReadSupportedStates.self, .init(leStates: 0x3FF_FFFF_FFFF))
    }

    package func handle(_ _: ReadBDADDR) {
        complete(ReadBDADDR.self, .init(address: publicAddress))
    }

    package func handle(_ _: ReadBufferSize) {
        complete(ReadBufferSize.self, .init(aclDataPacketLength: UInt16(aclDataLength), totalNumACLDataPackets: UInt16(aclBuffers)))
    }

    package func handle(_ _: LEReadBufferSize) {
        complete(LEReadBufferSize.self, .init(leACLDataPacketLength: UInt16(aclDataLength),
                                              totalNumLEACLDataPackets: UInt8(clamping: aclBuffers)))
    }

    package func handle(_ _: LEReadBufferSizeV2) {
        complete(LEReadBufferSizeV2.self, .init(leACLDataPacketLength: UInt16(aclDataLength),
                                                totalNumLEACLDataPackets: UInt8(clamping: aclBuffers),
                                                isoDataPacketLength: 0, totalNumISODataPackets: 0))
    }

    package func handle(_ c: LESetRandomAddress) {
        // Not while legacy advertising, scanning or initiating is enabled (Core v5.4 Vol 4 Part E 7.8.4).
        guard !advEnabled && !scanEnabled && initiating == nil else { return reject(LESetRandomAddress.self, .commandDisallowed) }
        randomAddress = c.randomAddress
        complete(LESetRandomAddress.self)
    }

    package func handle(_ _: LEReadFilterAcceptListSize) {
        complete(LEReadFilterAcceptListSize.self, .init(filterAcceptListSize: UInt8(ControllerState.filterAcceptListCapacity)))
    }

    package func handle(_ _: LEClearFilterAcceptList) {
        changeFilterAcceptList(LEClearFilterAcceptList.self, add: nil, remove: nil)
    }

    package func handle(_ c: LEAddDeviceToFilterAcceptList) {
        changeFilterAcceptList(LEAddDeviceToFilterAcceptList.self,
                               add: FilterAcceptListEntry(addressType: c.addressType, address: c.address), remove: nil)
    }

    package func handle(_ c: LERemoveDeviceFromFilterAcceptList) {
        changeFilterAcceptList(LERemoveDeviceFromFilterAcceptList.self, add: nil,
                               remove: FilterAcceptListEntry(addressType: c.addressType, address: c.address))
    }

    package func handle(_ _: ReadLocalName) {
        complete(ReadLocalName.self, .init(name: "ble-hci virtual controller \(index)"))
    }

    package func handle(_ c: SetEventMaskPage2) {
        eventMaskPage2 = c.eventMaskPage2
        complete(SetEventMaskPage2.self)
    }

    package func handle(_ _: LERand) {
        complete(LERand.self, .init(randomNumber: UInt64.random(in: .min ... .max)))
    }

    package func handle(_ c: LEEncrypt) {
        guard let out = aes128LittleEndian(key: c.key, block: c.plaintextData) else {
            return reject(LEEncrypt.self, .hardwareFailure)
        }
        complete(LEEncrypt.self, .init(encryptedData: out))
    }

    package func handle(_ c: ReadRSSI) {
        guard connections[c.connectionHandle] != nil else {
            return reject(ReadRSSI.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        complete(ReadRSSI.self, .init(connectionHandle: c.connectionHandle, rssi: VirtualController.rssi))
    }

    package func handle(_ c: ReadEncryptionKeySize) {
        guard let conn = connections[c.connectionHandle] else {
            return reject(ReadEncryptionKeySize.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        guard conn.encrypted else {
            return reject(ReadEncryptionKeySize.self, .insufficientSecurity, handle: c.connectionHandle)
        }
        // The link layer always encrypts with a 128-bit key; a smaller SMP key size is the
        // host masking its LTK (Core Vol 3 Part H 2.3.4), which the controller can't see.
        complete(ReadEncryptionKeySize.self, .init(connectionHandle: c.connectionHandle, keySize: 16))
    }

    // MARK: Data length and PHY
    package func handle(_ _: LEReadSuggestedDefaultDataLength) {
        complete(LEReadSuggestedDefaultDataLength.self, .init(suggestedMaxTxOctets: suggestedTxOctets, suggestedMaxTxTime: suggestedTxTime))
    }

    package func handle(_ c: LEWriteSuggestedDefaultDataLength) {
        guard (27...251).contains(c.suggestedMaxTxOctets), (328...17040).contains(c.suggestedMaxTxTime) else {
            return reject(LEWriteSuggestedDefaultDataLength.self, .invalidParameters)
        }
        suggestedTxOctets = c.suggestedMaxTxOctets
        suggestedTxTime = c.suggestedMaxTxTime
        complete(LEWriteSuggestedDefaultDataLength.self)
    }

    package func handle(_ _: LEReadMaximumDataLength) {
        complete(LEReadMaximumDataLength.self, .init(supportedMaxTxOctets: 251, supportedMaxTxTime: 17040,
                                                     supportedMaxRxOctets: 251, supportedMaxRxTime: 17040))
    }

    package func handle(_ c: LESetDataLength) {
        guard let conn = connections[c.connectionHandle] else {
            return reject(LESetDataLength.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        guard (27...251).contains(c.txOctets), (328...17040).contains(c.txTime) else {
            return reject(LESetDataLength.self, .invalidParameters, handle: c.connectionHandle)
        }
        complete(LESetDataLength.self, .init(connectionHandle: c.connectionHandle))
        if conn.isCentral(self) { conn.centralTxOctets = c.txOctets } else { conn.peripheralTxOctets = c.txOctets }
        let mine = c.txOctets
        let theirs = conn.isCentral(self) ? conn.peripheralTxOctets : conn.centralTxOctets
        let peer = conn.peer(of: self)
        // LL_LENGTH_REQ / LL_LENGTH_RSP: MaxRxOctets, MaxRxTime, MaxTxOctets, MaxTxTime (Vol 6 Part B 2.4.2.21).
        link.airControl(conn, [(self, .lengthReq, le16(251) + le16(17040) + le16(mine) + le16(octetTime(mine)), nil),
                               (peer, .lengthRsp, le16(251) + le16(17040) + le16(theirs) + le16(octetTime(theirs)), nil)])
        sendLE(LEDataLengthChange(connectionHandle: c.connectionHandle, maxTxOctets: mine, maxTxTime: octetTime(mine),
                                  maxRxOctets: theirs, maxRxTime: octetTime(theirs)))
        peer.sendLE(LEDataLengthChange(connectionHandle: conn.handle(of: peer), maxTxOctets: theirs, maxTxTime: octetTime(theirs),
                                       maxRxOctets: mine, maxRxTime: octetTime(mine)))
    }

    package func handle(_ c: LESetDefaultPHY) {
        guard c.allPHYs & ~0x03 == 0, c.txPHYs & ~0x07 == 0, c.rxPHYs & ~0x07 == 0 else {
            return reject(LESetDefaultPHY.self, .invalidParameters)
        }
        defaultPHYs = (c.txPHYs, c.rxPHYs)
        complete(LESetDefaultPHY.self)
    }

    package func handle(_ c: LEReadPHY) {
        guard let conn = connections[c.connectionHandle] else {
            return reject(LEReadPHY.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        complete(LEReadPHY.self, .init(connectionHandle: c.connectionHandle, txPHY: conn.txPHY, rxPHY: conn.rxPHY))
    }

    package func handle(_ c: LESetPHY) {
        guard let conn = connections[c.connectionHandle] else { return reject(LESetPHY.self, .unknownConnectionIdentifier) }
        guard c.allPHYs & ~0x03 == 0, c.txPHYs & ~0x07 == 0, c.rxPHYs & ~0x07 == 0 else {
            return reject(LESetPHY.self, .invalidParameters)
        }
        accepted(LESetPHY.self)
        let tx: UInt8 = (c.allPHYs & 0x01 == 0 && c.txPHYs & 0x02 != 0) ? 2 : 1
        let rx: UInt8 = (c.allPHYs & 0x02 == 0 && c.rxPHYs & 0x02 != 0) ? 2 : 1
        let phy: UInt8 = tx == 2 && rx == 2 ? 2 : 1
        // LL_PHY_REQ (TX_PHYS, RX_PHYS), LL_PHY_RSP when the central asked, LL_PHY_UPDATE_IND from
        // the central (PHY_C_TO_P, PHY_P_TO_C: 0 when unchanged; Instant), Vol 6 Part B 2.4.2.22-24, 5.1.10.
        let changed: UInt8 = phy == conn.txPHY ? 0 : 1 << (phy - 1)
        let wanted = { (all: Bool, phys: UInt8) -> UInt8 in all ? 0x03 : (phys & 0x03 == 0 ? 0x01 : phys & 0x03) }
        var exchange: [AirControlPDU] =
            [(self, .phyReq, [wanted(c.allPHYs & 0x01 != 0, c.txPHYs), wanted(c.allPHYs & 0x02 != 0, c.rxPHYs)], nil)]
        if conn.isCentral(self) { exchange.append((conn.peripheral, .phyRsp, [0x03, 0x03], nil)) }
        exchange.append((conn.central, .phyUpdateInd, [changed, changed] + link.airInstant(conn), nil))
        link.airControl(conn, exchange)
        conn.txPHY = phy; conn.rxPHY = phy
        let peer = conn.peer(of: self)
        sendLE(LEPHYUpdateComplete(connectionHandle: c.connectionHandle, txPHY: phy, rxPHY: phy))
        peer.sendLE(LEPHYUpdateComplete(connectionHandle: conn.handle(of: peer), txPHY: phy, rxPHY: phy))
    }

    // MARK: Legacy advertising
    package func handle(_ c: LESetAdvertisingParameters) {
        guard !advEnabled else { return reject(LESetAdvertisingParameters.self, .commandDisallowed) }
        let directedHigh = c.advertisingType == 1
        guard c.advertisingType <= 4, c.advertisingChannelMap & 0x07 != 0, c.advertisingChannelMap & ~0x07 == 0,
              c.advertisingFilterPolicy <= 3,
              directedHigh || c.advertisingIntervalMin <= c.advertisingIntervalMax else {
            return reject(LESetAdvertisingParameters.self, .invalidParameters)
        }
        // Core v5.4 Vol 4 Part E 7.8.5: an advertising interval range outside the one the
        // Controller supports (here all of 0x0020-0x4000, so any value outside it) gets
        // Unsupported Feature or Parameter Value (0x11), not Invalid HCI Command Parameters (the
        // difference to Rootcanal that RootcanalDifferentialTests found). Ignored for high duty
        // cycle directed advertising.
        guard directedHigh || ((0x20...0x4000).contains(c.advertisingIntervalMin)
                               && (0x20...0x4000).contains(c.advertisingIntervalMax)) else {
            return reject(LESetAdvertisingParameters.self, .unsupportedParameterValue)
        }
        advParams = c
        complete(LESetAdvertisingParameters.self)
    }

    package func handle(_ _: LEReadAdvertisingPhysicalChannelTxPower) {
        complete(LEReadAdvertisingPhysicalChannelTxPower.self, .init(txPowerLevel: 0))
    }

    package func handle(_ c: LESetAdvertisingData) {
        advData = c.advertisingData
        complete(LESetAdvertisingData.self)
    }

    package func handle(_ c: LESetScanResponseData) {
        scanRspData = c.scanResponseData
        complete(LESetScanResponseData.self)
    }

    package func handle(_ c: LESetAdvertisingEnable) {
        if c.advertisingEnable {
            if advParams.ownAddressType == .random && randomAddress == nil {
                return reject(LESetAdvertisingEnable.self, .invalidParameters)
            }
            advEnabled = true
            link.note("controller \(index): legacy advertising on")
        } else {
            advEnabled = false
        }
        complete(LESetAdvertisingEnable.self)
        if c.advertisingEnable {
            if link.airtime != nil { link.advertisingEnabled(self, key: -1) }
            notifyInitiators()
        }
    }

    // MARK: Legacy scanning
    package func handle(_ c: LESetScanParameters) {
        let valid = c.leScanType <= 1 && (4...0x4000).contains(c.leScanInterval) && (4...0x4000).contains(c.leScanWindow)
            && c.leScanWindow <= c.leScanInterval && c.scanningFilterPolicy <= 3
        setScanParameters(LESetScanParameters.self, valid: valid, active: c.leScanType == 1,
                          filterPolicy: c.scanningFilterPolicy, ownAddressType: c.ownAddressType)
    }

    package func handle(_ c: LESetScanEnable) {
        startScan(c.leScanEnable, filterDuplicates: c.filterDuplicates, extended: false)
        complete(LESetScanEnable.self)
    }

    // MARK: Extended advertising
    package func handle(_ c: LESetExtendedAdvertisingParameters) {
        guard c.advertisingHandle <= 0xEF else { return reject(LESetExtendedAdvertisingParameters.self, .invalidParameters) }
        if let s = sets[c.advertisingHandle], s.enabled {
            return reject(LESetExtendedAdvertisingParameters.self, .commandDisallowed)
        }
        guard sets[c.advertisingHandle] != nil || sets.count < VirtualController.maxAdvertisingSets else {
            return reject(LESetExtendedAdvertisingParameters.self, .memoryCapacityExceeded)
        }
        let p = c.advertisingEventProperties
        let legacyOK = !p.contains(.legacy) || !(p.contains(.connectable) && !p.contains(.scannable) && !p.contains(.directed))
        let extOK = p.contains(.legacy) || !(p.contains(.connectable) && p.contains(.scannable))
        guard c.primaryAdvertisingIntervalMin <= c.primaryAdvertisingIntervalMax || p.contains(.highDutyCycleDirected),
              legacyOK, extOK,
              c.primaryAdvertisingChannelMap & 0x07 != 0, c.primaryAdvertisingChannelMap & ~0x07 == 0,
              c.advertisingSID <= 0x0F, c.primaryAdvertisingPHY == 1 || c.primaryAdvertisingPHY == 3 else {
            return reject(LESetExtendedAdvertisingParameters.self, .invalidParameters)
        }
        // Core v5.4 Vol 4 Part E 7.8.53: a primary advertising interval range outside the one the
        // Controller supports (0x000020-0xFFFFFF here) gets Unsupported Feature or Parameter Value
        // (0x11), as 7.8.5 for legacy advertising; not checked for high duty cycle directed.
        guard p.contains(.highDutyCycleDirected)
                || ((0x20...0xFF_FFFF).contains(c.primaryAdvertisingIntervalMin)
                    && (0x20...0xFF_FFFF).contains(c.primaryAdvertisingIntervalMax)) else {
            return reject(LESetExtendedAdvertisingParameters.self, .unsupportedParameterValue)
        }
        var set = sets[c.advertisingHandle] ?? AdvertisingSet(params: c)
        set.params = c
        sets[c.advertisingHandle] = set
        complete(LESetExtendedAdvertisingParameters.self, .init(selectedTxPower: c.advertisingTxPower == 127 ? 0 : c.advertisingTxPower))
    }

    package func handle(_ c: LESetAdvertisingSetRandomAddress) {
        guard sets[c.advertisingHandle] != nil else { return reject(LESetAdvertisingSetRandomAddress.self, .unknownAdvertisingIdentifier) }
        sets[c.advertisingHandle]?.randomAddress = c.randomAddress
        complete(LESetAdvertisingSetRandomAddress.self)
    }

    package func handle(_ c: LESetExtendedAdvertisingData) {
        guard let status = setData(handle: c.advertisingHandle, operation: c.operation, fragment: c.advertisingData,
                                   scanResponse: false) else { return complete(LESetExtendedAdvertisingData.self) }
        reject(LESetExtendedAdvertisingData.self, status)
    }

    package func handle(_ c: LESetExtendedScanResponseData) {
        guard let status = setData(handle: c.advertisingHandle, operation: c.operation, fragment: c.scanResponseData,
                                   scanResponse: true) else { return complete(LESetExtendedScanResponseData.self) }
        reject(LESetExtendedScanResponseData.self, status)
    }

    package func handle(_ c: LESetExtendedAdvertisingEnable) {
        if c.enable {
            guard !c.sets.isEmpty else { return reject(LESetExtendedAdvertisingEnable.self, .invalidParameters) }
            for s in c.sets {
                guard let set = sets[s.advertisingHandle] else {
                    return reject(LESetExtendedAdvertisingEnable.self, .unknownAdvertisingIdentifier)
                }
                if set.params.ownAddressType == .random && set.randomAddress == nil && randomAddress == nil {
                    return reject(LESetExtendedAdvertisingEnable.self, .invalidParameters)
                }
            }
            for s in c.sets { sets[s.advertisingHandle]?.enabled = true }
            link.note("controller \(index): extended advertising on, sets \(c.sets.map(\.advertisingHandle))")
        } else if c.sets.isEmpty {
            for h in sets.keys { sets[h]?.enabled = false }
        } else {
            for s in c.sets where sets[s.advertisingHandle] == nil {
                return reject(LESetExtendedAdvertisingEnable.self, .unknownAdvertisingIdentifier)
            }
            for s in c.sets { sets[s.advertisingHandle]?.enabled = false }
        }
        complete(LESetExtendedAdvertisingEnable.self)
        if c.enable {
            if link.airtime != nil { for s in c.sets { link.advertisingEnabled(self, key: Int(s.advertisingHandle)) } }
            notifyInitiators()
        }
    }

    package func handle(_ _: LEReadMaximumAdvertisingDataLength) {
        complete(LEReadMaximumAdvertisingDataLength.self, .init(maxAdvertisingDataLength: 1650))
    }

    package func handle(_ _: LEReadNumberOfSupportedAdvertisingSets) {
        complete(LEReadNumberOfSupportedAdvertisingSets.self, .init(numSupportedAdvertisingSets: UInt8(VirtualController.maxAdvertisingSets)))
    }

    package func handle(_ c: LERemoveAdvertisingSet) {
        guard let set = sets[c.advertisingHandle] else { return reject(LERemoveAdvertisingSet.self, .unknownAdvertisingIdentifier) }
        // Not while the set or its periodic train is on (7.8.59).
        guard !set.enabled, set.periodic?.enabled != true else { return reject(LERemoveAdvertisingSet.self, .commandDisallowed) }
        sets[c.advertisingHandle] = nil
        complete(LERemoveAdvertisingSet.self)
    }

    package func handle(_ _: LEClearAdvertisingSets) {
        guard !sets.values.contains(where: { $0.enabled || $0.periodic?.enabled == true }) else {
            return reject(LEClearAdvertisingSets.self, .commandDisallowed)
        }
        sets = [:]
        complete(LEClearAdvertisingSets.self)
    }

    // MARK: Extended scanning
    package func handle(_ c: LESetExtendedScanParameters) {
        // Scans as the first PHY's block says (LE 1M, or LE Coded alone).
        let valid = c.scanningPHYs != 0 && c.scanningPHYs & ~0x05 == 0 && c.scanningFilterPolicy <= 3
            && !c.phyParameters.isEmpty
            && c.phyParameters.allSatisfy { $0.scanType <= 1 && $0.scanInterval >= 4 && $0.scanWindow >= 4 && $0.scanWindow <= $0.scanInterval }
        setScanParameters(LESetExtendedScanParameters.self, valid: valid, active: c.phyParameters.first?.scanType == 1,
                          filterPolicy: c.scanningFilterPolicy, ownAddressType: c.ownAddressType)
    }

    package func handle(_ c: LESetExtendedScanEnable) {
        guard c.filterDuplicates <= 2 else { return reject(LESetExtendedScanEnable.self, .invalidParameters) }
        startScan(c.enable, filterDuplicates: c.filterDuplicates != 0, extended: true)
        complete(LESetExtendedScanEnable.self)
    }

    // MARK: Connections
    package func handle(_ c: LECreateConnection) {
        createConnection(LECreateConnection.self, to: c.peerAddress, type: c.peerAddressType, own: c.ownAddressType,
                         filterPolicy: c.initiatorFilterPolicy, scanInterval: c.leScanInterval, scanWindow: c.leScanWindow,
                         intervalMin: c.connectionIntervalMin,
                         intervalMax: c.connectionIntervalMax, latency: c.maxLatency, timeout: c.supervisionTimeout,
                         extended: false)
    }

    package func handle(_ c: LEExtendedCreateConnection) {
        // Initiates on LE 1M (bit 0, required here; LE 2M and Coded may be set too) with its
        // block of parameters, the first.
        guard let p = c.phyParameters.first, c.initiatingPHYs & ~0x07 == 0, c.initiatingPHYs & 0x01 != 0 else {
            return reject(LEExtendedCreateConnection.self, initiating == nil ? .invalidParameters : .commandDisallowed)
        }
        createConnection(LEExtendedCreateConnection.self, to: c.peerAddress, type: c.peerAddressType, own: c.ownAddressType,
                         filterPolicy: c.initiatorFilterPolicy, scanInterval: p.scanInterval, scanWindow: p.scanWindow,
                         intervalMin: p.connectionIntervalMin,
                         intervalMax: p.connectionIntervalMax, latency: p.maxLatency, timeout: p.supervisionTimeout,
                         extended: true)
    }

    package func handle(_ _: LECreateConnectionCancel) {
        guard let i = initiating else { return reject(LECreateConnectionCancel.self, .commandDisallowed) }
        initiating = nil
        complete(LECreateConnectionCancel.self)
        sendConnectionComplete(status: .unknownConnectionIdentifier, handle: 0, role: 0,
                               peer: DeviceAddress(i.address, type: i.type), interval: 0, latency: 0, timeout: 0,
                               extended: i.extended)
    }

    package func handle(_ c: Disconnect) {
        guard let conn = connections[c.connectionHandle] else { return reject(Disconnect.self, .unknownConnectionIdentifier) }
        let allowed: Set<UInt8> = [0x05, 0x13, 0x14, 0x15, 0x1A, 0x29, 0x3B]
        guard allowed.contains(c.reason.rawValue) else { return reject(Disconnect.self, .invalidParameters) }
        accepted(Disconnect.self)
        link.airControl(conn, [(self, .terminateInd, [c.reason.rawValue], nil)])  // ErrorCode: the reason (Vol 6 Part B 2.4.2.2)
        conn.terminate(from: self, local: .localHostTerminated, remote: c.reason)
    }

    package func handle(_ c: LEConnectionUpdate) {
        guard let conn = connections[c.connectionHandle] else { return reject(LEConnectionUpdate.self, .unknownConnectionIdentifier) }
        guard connectionParametersValid(min: c.connectionIntervalMin, max: c.connectionIntervalMax,
                                        latency: c.maxLatency, timeout: c.supervisionTimeout) else {
            return reject(LEConnectionUpdate.self, .invalidParameters)
        }
        accepted(LEConnectionUpdate.self)
        // A peripheral asks with LL_CONNECTION_PARAM_REQ; the central sends LL_CONNECTION_UPDATE_IND
        // (WinSize, WinOffset, Interval, Latency, Timeout, Instant), Vol 6 Part B 2.4.2.1, 2.4.2.16, 5.1.1, 5.1.7.
        var update: [AirControlPDU] = []
        if !conn.isCentral(self) {
            update.append((self, .connectionParamReq, le16(c.connectionIntervalMin) + le16(c.connectionIntervalMax) + le16(c.maxLatency)
                           + le16(c.supervisionTimeout) + [0] + le16(conn.ll.eventCounter) + Array(repeating: 0xFF, count: 12), nil))
        }
        update.append((conn.central, .connectionUpdateInd, [1] + le16(0) + le16(c.connectionIntervalMax) + le16(c.maxLatency)
                       + le16(c.supervisionTimeout) + link.airInstant(conn), nil))
        link.airControl(conn, update)
        conn.interval = c.connectionIntervalMax
        conn.latency = c.maxLatency
        conn.timeout = c.supervisionTimeout
        let peer = conn.peer(of: self)
        for side in [self, peer] {
            side.sendLE(LEConnectionUpdateComplete(connectionHandle: conn.handle(of: side), connectionInterval: conn.interval,
                                                   peripheralLatency: conn.latency, supervisionTimeout: conn.timeout))
        }
    }

    package func handle(_ c: LEReadRemoteFeatures) {
        guard let conn = connections[c.connectionHandle] else { return reject(LEReadRemoteFeatures.self, .unknownConnectionIdentifier) }
        accepted(LEReadRemoteFeatures.self)
        // LL_FEATURE_REQ (LL_PERIPHERAL_FEATURE_REQ from a peripheral) and LL_FEATURE_RSP: FeatureSet (Vol 6 Part B 2.4.2.9-10, 2.4.2.15).
        let features = le64(VirtualController.features.rawValue)
        link.airControl(conn, [(self, conn.isCentral(self) ? .featureReq : .peripheralFeatureReq, features, nil),
                               (conn.peer(of: self), .featureRsp, features, nil)])
        sendLE(LEReadRemoteFeaturesComplete(connectionHandle: c.connectionHandle, leFeatures: VirtualController.features))
    }

    // MARK: Encryption
    package func handle(_ c: LEEnableEncryption) {
        guard let conn = connections[c.connectionHandle] else { return reject(LEEnableEncryption.self, .unknownConnectionIdentifier) }
        guard conn.isCentral(self), conn.pendingKey == nil else { return reject(LEEnableEncryption.self, .commandDisallowed) }
        accepted(LEEnableEncryption.self)
        conn.pendingKey = c.longTermKey
        let peer = conn.peripheral
        // An encrypted link pauses first (LL_PAUSE_ENC_REQ, LL_PAUSE_ENC_RSP both ways, the last
        // unencrypted), then LL_ENC_REQ (Rand, EDIV, SKDm, IVm) and LL_ENC_RSP (SKDs, IVs),
        // Vol 6 Part B 2.4.2.4-5, 5.1.3.
        var start: [AirControlPDU] = []
        if conn.encrypted {
            start = [(self, .pauseEncReq, [], true), (peer, .pauseEncRsp, [], true), (self, .pauseEncRsp, [], false)]
        }
        start += [(self, .encReq, le64(c.randomNumber) + le16(c.encryptedDiversifier) + link.airRandom(12), false),
                  (peer, .encRsp, link.airRandom(12), false)]
        if !peer.isEnabled(subevent: LELongTermKeyRequest.subeventCode) {
            start.append((peer, .rejectExtInd, [LinkLayer.ControlOpcode.encReq.rawValue, HCIStatus.pinOrKeyMissing.rawValue], false))
        }
        link.airControl(conn, start)
        if peer.isEnabled(subevent: LELongTermKeyRequest.subeventCode) {
            peer.sendLE(LELongTermKeyRequest(connectionHandle: conn.peripheralHandle, randomNumber: c.randomNumber,
                                             encryptedDiversifier: c.encryptedDiversifier))
        } else {
            // The peripheral's host can't be asked: its controller answers "no key" itself.
            conn.pendingKey = nil
            send(EncryptionChange(status: .pinOrKeyMissing, connectionHandle: c.connectionHandle, encryptionEnabled: 0))
        }
    }

    package func handle(_ c: LELongTermKeyRequestReply) {
        guard let conn = connections[c.connectionHandle] else {
            return reject(LELongTermKeyRequestReply.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        guard !conn.isCentral(self), let key = conn.pendingKey else {
            return reject(LELongTermKeyRequestReply.self, .commandDisallowed, handle: c.connectionHandle)
        }
        complete(LELongTermKeyRequestReply.self, .init(connectionHandle: c.connectionHandle))
        conn.pendingKey = nil
        // LL_START_ENC_REQ (unencrypted), then LL_START_ENC_RSP each way, encrypted (Vol 6 Part B
        // 5.1.3.1); with the wrong key the central's MIC check of the first fails and the link is lost.
        link.airControl(conn, key == c.longTermKey
                        ? [(self, .startEncReq, [], false), (conn.central, .startEncRsp, [], true), (self, .startEncRsp, [], true)]
                        : [(self, .startEncReq, [], false)])
        if key == c.longTermKey {
            let refresh = conn.encrypted
            conn.encrypted = true
            for side in [conn.central, conn.peripheral] {
                if refresh {
                    side.send(EncryptionKeyRefreshComplete(connectionHandle: conn.handle(of: side)))
                } else {
                    side.send(EncryptionChange(connectionHandle: conn.handle(of: side), encryptionEnabled: 1))
                }
            }
        } else {
            link.note("controller \(index): LTK mismatch on handle \(c.connectionHandle): MIC failure, link lost")
            conn.terminate(reasonForA: .connectionTerminatedMICFailure, reasonForB: .connectionTerminatedMICFailure)
        }
    }

    package func handle(_ c: LELongTermKeyRequestNegativeReply) {
        guard let conn = connections[c.connectionHandle] else {
            return reject(LELongTermKeyRequestNegativeReply.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        guard !conn.isCentral(self), conn.pendingKey != nil else {
            return reject(LELongTermKeyRequestNegativeReply.self, .commandDisallowed, handle: c.connectionHandle)
        }
        complete(LELongTermKeyRequestNegativeReply.self, .init(connectionHandle: c.connectionHandle))
        conn.pendingKey = nil
        // LL_REJECT_EXT_IND: the rejected opcode and PIN or Key Missing (Vol 6 Part B 5.1.3.1).
        link.airControl(conn, [(self, .rejectExtInd, [LinkLayer.ControlOpcode.encReq.rawValue, HCIStatus.pinOrKeyMissing.rawValue], false)])
        conn.central.send(EncryptionChange(status: .pinOrKeyMissing, connectionHandle: conn.centralHandle,
                                           encryptionEnabled: conn.encrypted ? 1 : 0))
    }

    // MARK: - Helpers

    private func octetTime(_ octets: UInt16) -> UInt16 { (octets + 14) * 8 }

    /// How the connection parameters of LE Create Connection, LE Connection Update and LE Extended
    /// Create Connection relate (Core v5.4 Vol 4 Part E 7.8.12, 7.8.18, 7.8.66); the range of each
    /// is declared in Tools/pdl/hci.pdl (`valid`) and checked when the command is decoded.
    /// Connection_Interval_Min at most Connection_Interval_Max; Supervision_Timeout (10 ms units)
    /// larger than (1 + Max_Latency) × Connection_Interval_Max (1.25 ms units) × 2 in milliseconds:
    /// timeout × 10 > (1 + latency) × max × 1.25 × 2, that is timeout × 4 > (1 + latency) × max.
    private func connectionParametersValid(min: UInt16, max: UInt16, latency: UInt16, timeout: UInt16) -> Bool {
        min <= max && UInt32(timeout) * 4 > (1 + UInt32(latency)) * UInt32(max)
    }

    /// Applies an extended (scan response) data fragment (LE Set Extended Advertising Data and
    /// LE Set Extended Scan Response Data have the same parameters; Fragment_Preference is only
    /// a hint); nil on success, else the error status.
    private func setData(handle: UInt8, operation: UInt8, fragment: [UInt8], scanResponse: Bool) -> HCIStatus? {
        guard var set = sets[handle] else { return .unknownAdvertisingIdentifier }
        guard operation <= 4 else { return .invalidParameters }
        let props = set.params.advertisingEventProperties
        if props.contains(.legacy) && (operation != 3 || fragment.count > 31) { return .invalidParameters }
        if scanResponse && !props.contains(.scannable) && !fragment.isEmpty { return .invalidParameters }
        var current = scanResponse ? set.scanResponse : set.data
        switch operation {
        case 0x00, 0x02: current += fragment  // intermediate, last
        case 0x01, 0x03: current = fragment   // first, complete
        default: break                         // unchanged data
        }
        guard current.count <= 1650 else { return .memoryCapacityExceeded }
        if scanResponse { set.scanResponse = current } else { set.data = current }
        sets[handle] = set
        return nil
    }

    /// LE Set Scan Parameters and LE Set Extended Scan Parameters: refused while scanning
    /// (Command Disallowed, Core Vol 4 Part E 7.8.10, 7.8.64) or out of range (Invalid HCI
    /// Command Parameters); else kept for the next scan.
    private func setScanParameters<C: HCICommand>(_ command: C.Type, valid: Bool, active: Bool, filterPolicy: UInt8,
                                                  ownAddressType: AddressType) where C.ReturnParameters == NoReturnParameters {
        guard !scanEnabled else { return reject(C.self, .commandDisallowed) }
        guard valid else { return reject(C.self, .invalidParameters) }
        scanActive = active
        scanFilterPolicy = filterPolicy
        scanOwnAddressType = ownAddressType
        complete(C.self)
    }

    private func startScan(_ enable: Bool, filterDuplicates: Bool, extended: Bool) {
        if enable {
            if !scanEnabled { scanSeen = [] }
            scanEnabled = true
            scanExtended = extended
            scanFilterDuplicates = filterDuplicates
            link.ensureTicking()
        } else {
            scanEnabled = false
        }
    }

    /// LE Create Connection and LE Extended Create Connection (after its PHY checks): one
    /// initiator at a time (Command Disallowed), filter policy 0 or 1, a scan window within the
    /// scan interval (Core v5.4 Vol 4 Part E 7.8.12, 7.8.66) and valid connection parameters
    /// (Invalid HCI Command Parameters), then Command Status and initiating at
    /// Connection_Interval_Min.
    private func createConnection<C: HCICommand>(_ command: C.Type, to peer: BDAddress, type: AddressType, own: AddressType,
                                                 filterPolicy: UInt8, scanInterval: UInt16, scanWindow: UInt16,
                                                 intervalMin: UInt16, intervalMax: UInt16,
                                                 latency: UInt16, timeout: UInt16, extended: Bool) {
        guard initiating == nil else { return reject(C.self, .commandDisallowed) }
        guard filterPolicy <= 1, scanWindow <= scanInterval,
              connectionParametersValid(min: intervalMin, max: intervalMax, latency: latency, timeout: timeout) else {
            return reject(C.self, .invalidParameters)
        }
        accepted(C.self)
        let (address, generated) = ownAddress(own, peer: (type.rawValue & 1, peer))
        initiating = Initiating(address: peer, type: type, ownAddress: address, localRPA: generated ? address.address : nil, interval: intervalMin,
                                latency: latency, timeout: timeout, extended: extended, useFilterAcceptList: filterPolicy == 1)
        link.perform { [self] in link.tryConnect(self) }
    }

    /// An advertiser started: initiators waiting for it connect now.
    private func notifyInitiators() {
        link.perform { [self] in
            for c in link.controllers where c !== self && c.initiating != nil { link.tryConnect(c) }
        }
    }
}
