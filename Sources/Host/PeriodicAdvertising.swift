import HCI
import Transport

/// A periodic advertising train on an extended advertising set (Core v5.4 Vol 6 Part B 4.4.2.12;
/// Vol 4 Part E 7.8.61-7.8.63): AUX_SYNC_IND PDUs at a fixed interval, found by scanners through
/// the SyncInfo of the set's AUX_ADV_IND.
public struct PeriodicAdvertisingParameters: Sendable, Equatable {
    /// Periodic advertising interval range, 1.25 ms units (0x0006...0xFFFF).
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    /// The train's data (AD structures), at most 1650 octets (Vol 4 Part E 7.8.57, 7.8.62).
    public var data: [UInt8]

    public init(intervalMin: UInt16 = 0x0050, intervalMax: UInt16 = 0x0050, data: [UInt8]) {
        self.intervalMin = intervalMin
        self.intervalMax = Swift.max(intervalMin, intervalMax)
        self.data = data
    }
}

/// A synchronisation to an advertiser's periodic train (LE Periodic Advertising Sync
/// Established, Core v5.4 Vol 4 Part E 7.7.65.14).
public struct PeriodicSync: Sendable, Equatable {
    public var handle: UInt16
    public var advertiser: DeviceAddress
    public var sid: UInt8
    /// Advertiser_PHY: 0x01 LE 1M, 0x02 LE 2M, 0x03 LE Coded.
    public var phy: UInt8
    /// Periodic advertising interval, 1.25 ms units.
    public var interval: UInt16

    public init(handle: UInt16, advertiser: DeviceAddress, sid: UInt8, phy: UInt8, interval: UInt16) {
        self.handle = handle
        self.advertiser = advertiser
        self.sid = sid
        self.phy = phy
        self.interval = interval
    }
}

/// One periodic advertisement, its LE Periodic Advertising Reports joined (Core v5.4 Vol 4
/// Part E 7.7.65.15).
public struct PeriodicReport: Sendable, Equatable {
    public var syncHandle: UInt16
    /// dBm; nil when not available (127).
    public var txPower: Int8?
    public var rssi: Int8?
    public var data: [UInt8]
    /// 0 complete, 2 truncated (the controller said so, or the data exceeded 1650 octets).
    public var dataStatus: UInt8

    public init(syncHandle: UInt16, txPower: Int8?, rssi: Int8?, data: [UInt8], dataStatus: UInt8 = 0) {
        self.syncHandle = syncHandle
        self.txPower = txPower
        self.rssi = rssi
        self.data = data
        self.dataStatus = dataStatus
    }
}

extension Host {
    /// Largest periodic advertising data fragment in one LE Set Periodic Advertising Data (Core
    /// v5.4 Vol 4 Part E 7.8.62: Advertising_Data_Length 0-252).
    static let periodicDataFragmentSize = 252

    /// Whether the controller has the periodic advertising command `opcode`: listed in its
    /// Supported_Commands, or the LE Periodic Advertising feature bit (Core v5.4 Vol 6 Part B
    /// 4.6.13) set, which needs the commands (Vol 4 Part E 3.1.1 table). Bumble's controller
    /// sets the bit and answers the commands without listing them.
    func supportsPeriodic(_ opcode: HCIOpcode, _ info: ControllerInfo) -> Bool {
        info.supports(opcode) || LEFeatures(rawValue: info.leFeatures).contains(.lePeriodicAdvertising)
    }

    /// Configures and enables the periodic train of set 0 (its parameters, its data in
    /// fragments, then Periodic Advertising Enable), before the set itself is enabled: a scanner
    /// finds the train through the set's AUX_ADV_IND (7.8.63).
    func startPeriodicAdvertising(_ periodic: PeriodicAdvertisingParameters, info: ControllerInfo) async throws {
        for opcode in [LESetPeriodicAdvertisingParameters.opcode, LESetPeriodicAdvertisingData.opcode, LESetPeriodicAdvertisingEnable.opcode]
        where !supportsPeriodic(opcode, info) {
            throw HostError.unsupported("periodic advertising (\(opcode.name) is not among the controller's supported commands, nor is the LE Periodic Advertising feature)")
        }
        _ = try await executeRecovering(LESetPeriodicAdvertisingParameters(
            advertisingHandle: 0, periodicAdvertisingIntervalMin: periodic.intervalMin,
            periodicAdvertisingIntervalMax: periodic.intervalMax), still: "periodic advertising") {
            _ = try await self.execute(LESetPeriodicAdvertisingEnable(enable: 0, advertisingHandle: 0))
        }
        for (operation, part) in Self.extendedDataFragments(periodic.data, size: Self.periodicDataFragmentSize) {
            _ = try await execute(LESetPeriodicAdvertisingData(advertisingHandle: 0, operation: operation, advertisingData: part))
        }
        _ = try await execute(LESetPeriodicAdvertisingEnable(enable: 1, advertisingHandle: 0))
        periodicAdvertising = true
    }

    /// Disables the periodic train of set 0 if it is on.
    func stopPeriodicAdvertising(timeout: Duration? = nil) async throws {
        guard periodicAdvertising else { return }
        _ = try await execute(LESetPeriodicAdvertisingEnable(enable: 0, advertisingHandle: 0), timeout: timeout)
        periodicAdvertising = false
    }

    /// Whether set 0 has a periodic train on.
    public var isPeriodicAdvertising: Bool { periodicAdvertising }

    /// Synchronises to the periodic train of `advertiser`'s set `sid` (the Advertising SID of its
    /// extended advertising reports): LE Periodic Advertising Create Sync (Core v5.4 Vol 4 Part E
    /// 7.8.67), waiting for LE Periodic Advertising Sync Established. The controller finds the
    /// train while scanning, so scan meanwhile. `syncTimeout` (10 ms units) is how long the
    /// controller keeps the sync without receiving the train before it reports it lost. After
    /// `timeout`, or when the task is cancelled, the attempt is cancelled (LE Periodic Advertising
    /// Create Sync Cancel, 7.8.68) and `HostError.procedureTimeout` or `CancellationError` thrown.
    /// The reports arrive as `HostEvent.periodicReport`, reassembled.
    public func createPeriodicSync(to advertiser: DeviceAddress, sid: UInt8, skip: UInt16 = 0, syncTimeout: UInt16 = 0x0064,
                                   timeout: Duration = .seconds(10)) async throws -> PeriodicSync {
        let info = try self.info
        guard supportsPeriodic(LEPeriodicAdvertisingCreateSync.opcode, info) else {
            throw HostError.unsupported("periodic advertising synchronisation (LE Periodic Advertising Create Sync is not among the controller's supported commands, nor is the LE Periodic Advertising feature)")
        }
        guard sid <= 0x0F else {
            throw HostError.invalidArgument("Advertising SID \(hexCode(sid)) of \(advertiser): the advertiser has no periodic train to synchronise to (an SID is 0x00-0x0F; 0xFF means none)")
        }
        let name = "synchronising to the periodic advertising of \(advertiser) (SID \(sid))"
        let waiter = try registerWaiter(.periodicSync, handle: nil)
        do {
            // Advertiser_Address_Type: 0x00 public (or public identity), 0x01 random (or random identity).
            _ = try await execute(LEPeriodicAdvertisingCreateSync(
                advertisingSID: sid, advertiserAddressType: advertiser.type.rawValue & 0x01,
                advertiserAddress: advertiser.address, skip: skip, syncTimeout: syncTimeout))
        } catch {
            cancelWaiter(waiter)
            throw error
        }
        let result: WaiterResult
        do {
            result = try await awaitWaiter(waiter, timeout: timeout, name: name, cancellable: true)
        } catch let stopped where stopped is CancellationError || stopped as? HostError == .procedureTimeout(name) {
            // The controller answers the cancel with Sync Established, Operation Cancelled by
            // Host (0x44), or with the sync that won the race, which nobody wants now (7.8.68).
            let cancelWaiterID = try registerWaiter(.periodicSync, handle: nil)
            do { _ = try await execute(LEPeriodicAdvertisingCreateSyncCancel()) } catch {
                cancelWaiter(cancelWaiterID)
                throw stopped
            }
            if case .periodicSync(let s)? = try? await awaitWaiter(cancelWaiterID, timeout: .seconds(2), name: "periodic sync cancel") {
                try? await terminatePeriodicSync(s.handle)
            }
            throw stopped
        }
        switch result {
        case .periodicSync(let s): return s
        case .periodicSyncFailed(let status): throw HCIError(status, opcode: LEPeriodicAdvertisingCreateSync.opcode)
        default: throw HostError.malformed("unexpected periodic sync result")
        }
    }

    /// Ends a periodic sync (LE Periodic Advertising Terminate Sync, Core v5.4 Vol 4 Part E 7.8.69).
    public func terminatePeriodicSync(_ handle: UInt16, timeout: Duration = .seconds(10)) async throws {
        guard periodicSyncs.contains(handle) else {
            throw HostError.invalidArgument("no periodic sync with handle \(hexCode(handle, digits: 4))")
        }
        // Ended here first: its reports are dropped from now on, and a second terminate meanwhile is refused.
        endPeriodicSync(handle)
        _ = try await execute(LEPeriodicAdvertisingTerminateSync(syncHandle: handle), timeout: timeout)
    }

    /// The periodic syncs established and not yet ended or lost.
    public var activePeriodicSyncs: Set<UInt16> { periodicSyncs }

    func endPeriodicSync(_ handle: UInt16) {
        periodicSyncs.remove(handle)
        periodicFragments.reset(handle)
    }

    // MARK: Events

    package func handle(_ e: LEPeriodicAdvertisingSyncEstablished) {
        guard e.status.isSuccess else {
            if !complete(.periodicSync, handle: nil, with: .success(.periodicSyncFailed(e.status))) {
                warn("LE Periodic Advertising Sync Established with status \(e.status) and nobody synchronising")
            }
            return
        }
        // Bounded by the controller's sync handles (0x0000-0x0EFF, 7.7.65.14).
        guard e.syncHandle <= 0x0EFF else {
            return warn("LE Periodic Advertising Sync Established with Sync_Handle \(hexCode(e.syncHandle, digits: 4)), outside 0x0000-0x0EFF: ignored")
        }
        let sync = PeriodicSync(handle: e.syncHandle,
                                advertiser: DeviceAddress(e.advertiserAddress, type: AddressType(rawValue: e.advertiserAddressType) ?? .random),
                                sid: e.advertisingSID, phy: e.advertiserPHY, interval: e.periodicAdvertisingInterval)
        periodicSyncs.insert(e.syncHandle)
        emit(.periodicSyncEstablished(sync))
        complete(.periodicSync, handle: nil, with: .success(.periodicSync(sync)))
    }

    package func handle(_ e: LEPeriodicAdvertisingReport) {
        guard periodicSyncs.contains(e.syncHandle) else {
            return warn("LE Periodic Advertising Report for Sync_Handle \(hexCode(e.syncHandle, digits: 4)), which is no sync of ours: dropped")
        }
        var evicted: UInt16?
        let outcome = periodicFragments.add(e.syncHandle, fragment: e.data, dataStatus: e.dataStatus, evicted: &evicted)
        if let evicted {
            warn("LE Periodic Advertising Report: more than \(ReportReassembler<UInt16>.maxAdvertisers) syncs with data still to come; the partial data of sync \(hexCode(evicted, digits: 4)) dropped")
        }
        guard case let .complete(data, dataStatus) = outcome else { return }
        emit(.periodicReport(PeriodicReport(syncHandle: e.syncHandle, txPower: e.txPower == 127 ? nil : e.txPower,
                                            rssi: e.rssi == 127 ? nil : e.rssi, data: data, dataStatus: dataStatus)))
    }

    package func handle(_ e: LEPeriodicAdvertisingSyncLost) {
        guard periodicSyncs.contains(e.syncHandle) else { return }
        endPeriodicSync(e.syncHandle)
        emit(.periodicSyncLost(handle: e.syncHandle))
    }

    // MARK: Periodic Advertising Sync Transfer (7.8.89-7.8.92)

    private func requirePAST(_ opcode: HCIOpcode) throws {
        guard try self.info.supports(opcode) else {
            throw HostError.unsupported("Periodic Advertising Sync Transfer (\(opcode.name) is not among the controller's supported commands)")
        }
    }

    /// Gives the peer on `connection` our periodic sync `sync` (LE Periodic Advertising Sync
    /// Transfer, Core v5.4 Vol 4 Part E 7.8.89); its host gets `serviceData` with it.
    public func transferPeriodicSync(_ sync: UInt16, to connection: UInt16, serviceData: UInt16 = 0) async throws {
        guard links[connection] != nil else { throw HostError.unknownConnection(connection) }
        guard periodicSyncs.contains(sync) else { throw HostError.invalidArgument("no periodic sync with handle \(hexCode(sync, digits: 4))") }
        try requirePAST(LEPeriodicAdvertisingSyncTransfer.opcode)
        _ = try await execute(LEPeriodicAdvertisingSyncTransfer(connectionHandle: connection, serviceData: serviceData, syncHandle: sync))
    }

    /// Gives the peer on `connection` the periodic train of our set 0 (LE Periodic Advertising
    /// Set Info Transfer, 7.8.90).
    public func transferPeriodicAdvertising(to connection: UInt16, serviceData: UInt16 = 0) async throws {
        guard links[connection] != nil else { throw HostError.unknownConnection(connection) }
        guard periodicAdvertising else { throw HostError.invalidArgument("no periodic train is on to transfer (start one with AdvertisingParameters.periodic)") }
        try requirePAST(LEPeriodicAdvertisingSetInfoTransfer.opcode)
        _ = try await execute(LEPeriodicAdvertisingSetInfoTransfer(connectionHandle: connection, serviceData: serviceData, advertisingHandle: 0))
    }

    /// Accepts syncs the peer transfers, on `connection` (LE Set Periodic Advertising Sync
    /// Transfer Parameters, 7.8.91) or, when nil, on every later connection (the default
    /// parameters, 7.8.92): Mode 0x02, reports enabled (0x01 with `reports` false). They arrive as
    /// `HostEvent.periodicSyncTransferred`, then their reports as `periodicReport`.
    public func acceptPeriodicSyncTransfers(on connection: UInt16? = nil, reports: Bool = true, syncTimeout: UInt16 = 0x0064) async throws {
        let mode: UInt8 = reports ? 0x02 : 0x01
        if let connection {
            guard links[connection] != nil else { throw HostError.unknownConnection(connection) }
            try requirePAST(LESetPeriodicAdvertisingSyncTransferParameters.opcode)
            _ = try await execute(LESetPeriodicAdvertisingSyncTransferParameters(connectionHandle: connection, mode: mode, syncTimeout: syncTimeout))
        } else {
            try requirePAST(LESetDefaultPeriodicAdvertisingSyncTransferParameters.opcode)
            _ = try await execute(LESetDefaultPeriodicAdvertisingSyncTransferParameters(mode: mode, syncTimeout: syncTimeout))
        }
    }

    package func handle(_ e: LEPeriodicAdvertisingSyncTransferReceived) {
        guard e.status.isSuccess else {
            return warn("LE Periodic Advertising Sync Transfer Received on connection \(hexCode(e.connectionHandle, digits: 4)) with status \(e.status)")
        }
        guard e.syncHandle <= 0x0EFF else {
            return warn("LE Periodic Advertising Sync Transfer Received with Sync_Handle \(hexCode(e.syncHandle, digits: 4)), outside 0x0000-0x0EFF: ignored")
        }
        let sync = PeriodicSync(handle: e.syncHandle,
                                advertiser: DeviceAddress(e.advertiserAddress, type: AddressType(rawValue: e.advertiserAddressType) ?? .random),
                                sid: e.advertisingSID, phy: e.advertiserPHY, interval: e.periodicAdvertisingInterval)
        periodicSyncs.insert(e.syncHandle)
        emit(.periodicSyncTransferred(sync, connection: e.connectionHandle, serviceData: e.serviceData))
    }
}
