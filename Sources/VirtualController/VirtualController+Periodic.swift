import HCI

// Periodic advertising and synchronisation (Core v5.4 Vol 4 Part E 7.8.61-7.8.63, 7.8.67-7.8.69;
// Vol 6 Part B 4.4.2.12, 4.4.5). An advertiser's train is an event every periodic advertising
// interval on the link's clock; a scanner with a pending Create Sync that is scanning while the
// set's extended advertising is on (where the SyncInfo is) synchronises at the next event, and
// every event gives each synchronised controller its reports (the data in fragments of at most
// 247 octets, Data_Status 0b01 on all but the last). A train that stops is lost by its scanners
// after their sync timeout. Periodic Advertising Sync Transfer (7.8.89-7.8.92): a sync, or the
// train of one of our sets, handed to the peer on a link, which synchronises when its
// parameters for the link (or its defaults) say so. Not modelled: the periodic advertiser list
// (Options bit 0), skip, CTE, duplicate filtering (PAST mode 3 as 2), and the train's radio
// time in airtime mode.

extension ControllerState {
    /// The periodic train of an extended advertising set.
    struct PeriodicTrain {
        var params: LESetPeriodicAdvertisingParameters
        var data: [UInt8] = []
        /// False between a first fragment and the last (Enable is then Command Disallowed, 7.8.63).
        var dataComplete = true
        var enabled = false
        /// Counts enables: an event of an older schedule ends it.
        var generation: UInt64 = 0
    }

    /// A Create Sync waiting for its train (7.8.67).
    struct PendingSync {
        var sid: UInt8
        var address: BDAddress
        /// 0x00 public, 0x01 random.
        var addressType: UInt8
        var syncTimeout: UInt16
        var reportsEnabled: Bool
    }

    /// A synchronised train: whose, and how it is reported.
    struct SyncState {
        var advertiser: Int
        var setHandle: UInt8
        var syncTimeout: UInt16
        var reportsEnabled: Bool
    }

    /// Periodic Advertising Sync Transfer parameters (7.8.91, 7.8.92).
    struct PASTParameters {
        /// 0 ignore transfers, 1 synchronise with reports disabled, 2 with reports, 3 with duplicate filtering.
        var mode: UInt8 = 0
        var syncTimeout: UInt16 = 0x0064
    }

    /// Largest Data in one LE Periodic Advertising Report: 255 − subevent code − 7 octets (7.7.65.15).
    static let periodicReportDataLimit = 247
    /// Periodic syncs at once (LE Periodic Advertising Create Sync beyond: Memory Capacity Exceeded, 7.8.67).
    static let maxPeriodicSyncs = 4

    // MARK: Advertiser

    package func handle(_ c: LESetPeriodicAdvertisingParameters) {
        guard let set = sets[c.advertisingHandle] else {
            return reject(LESetPeriodicAdvertisingParameters.self, .unknownAdvertisingIdentifier)
        }
        if set.periodic?.enabled == true { return reject(LESetPeriodicAdvertisingParameters.self, .commandDisallowed) }
        // Only on a non-connectable, non-scannable, non-anonymous extended set, with min <= max (7.8.61).
        let p = set.params.advertisingEventProperties
        guard !p.contains(.legacy), !p.contains(.connectable), !p.contains(.scannable), !p.contains(.anonymous),
              c.periodicAdvertisingIntervalMin <= c.periodicAdvertisingIntervalMax else {
            return reject(LESetPeriodicAdvertisingParameters.self, .invalidParameters)
        }
        var train = set.periodic ?? PeriodicTrain(params: c)
        train.params = c
        sets[c.advertisingHandle]?.periodic = train
        complete(LESetPeriodicAdvertisingParameters.self)
    }

    package func handle(_ c: LESetPeriodicAdvertisingData) {
        guard sets[c.advertisingHandle] != nil else { return reject(LESetPeriodicAdvertisingData.self, .unknownAdvertisingIdentifier) }
        guard var train = sets[c.advertisingHandle]?.periodic else {
            return reject(LESetPeriodicAdvertisingData.self, .commandDisallowed)  // not configured for periodic advertising
        }
        // While the train is on, only complete data (or unchanged) may be set (7.8.62).
        if train.enabled && c.operation != 0x03 && c.operation != 0x04 { return reject(LESetPeriodicAdvertisingData.self, .commandDisallowed) }
        if c.operation == 0x04 && !c.advertisingData.isEmpty { return reject(LESetPeriodicAdvertisingData.self, .invalidParameters) }
        if (c.operation == 0x00 || c.operation == 0x02) && train.dataComplete {
            return reject(LESetPeriodicAdvertisingData.self, .invalidParameters)  // a fragment with no first one before it
        }
        var data = train.data
        switch c.operation {
        case 0x00, 0x02: data += c.advertisingData
        case 0x01, 0x03: data = c.advertisingData
        default: break
        }
        guard data.count <= 1650 else { return reject(LESetPeriodicAdvertisingData.self, .memoryCapacityExceeded) }
        train.data = data
        if c.operation != 0x04 { train.dataComplete = c.operation == 0x02 || c.operation == 0x03 }
        sets[c.advertisingHandle]?.periodic = train
        complete(LESetPeriodicAdvertisingData.self)
    }

    package func handle(_ c: LESetPeriodicAdvertisingEnable) {
        guard let set = sets[c.advertisingHandle] else { return reject(LESetPeriodicAdvertisingEnable.self, .unknownAdvertisingIdentifier) }
        let enable = c.enable & 0x01 != 0
        guard var train = set.periodic else {
            if !enable { return complete(LESetPeriodicAdvertisingEnable.self) }
            return reject(LESetPeriodicAdvertisingEnable.self, .commandDisallowed)  // no parameters set (7.8.63)
        }
        if enable {
            guard train.dataComplete else { return reject(LESetPeriodicAdvertisingEnable.self, .commandDisallowed) }
            if set.params.ownAddressType == .random && set.randomAddress == nil && randomAddress == nil {
                return reject(LESetPeriodicAdvertisingEnable.self, .invalidParameters)
            }
            if !train.enabled {
                train.enabled = true
                train.generation &+= 1
                sets[c.advertisingHandle]?.periodic = train
                link.note("controller \(index): periodic advertising on, set \(c.advertisingHandle)")
                schedulePeriodicEvent(set: c.advertisingHandle, generation: train.generation)
            }
        } else if train.enabled {
            train.enabled = false
            sets[c.advertisingHandle]?.periodic = train
            trainStopped(set: c.advertisingHandle)
        }
        complete(LESetPeriodicAdvertisingEnable.self)
    }

    /// The periodic advertising interval of set `handle` in 1.25 ms units, 0 when its train is off
    /// (what extended advertising reports carry, 7.7.65.13).
    func periodicInterval(ofSet handle: UInt8) -> UInt16 {
        guard let t = sets[handle]?.periodic, t.enabled else { return 0 }
        return t.params.periodicAdvertisingIntervalMin
    }

    private func schedulePeriodicEvent(set handle: UInt8, generation: UInt64) {
        guard let train = sets[handle]?.periodic else { return }
        link.schedule(after: Double(train.params.periodicAdvertisingIntervalMin) * 1.25e-3) { [self] in
            periodicEvent(set: handle, generation: generation)
        }
    }

    /// One periodic advertising event of set `handle`: scanners waiting for it synchronise, the
    /// synchronised ones get its data.
    private func periodicEvent(set handle: UInt8, generation: UInt64) {
        guard let set = sets[handle], let train = set.periodic, train.enabled, train.generation == generation else { return }
        let address = ownAddress(set.params.ownAddressType, setRandom: set.randomAddress).address
        for scanner in link.controllers where scanner !== self {
            if let pending = scanner.pendingSync, set.enabled, scanner.isScanning, pending.sid == set.params.advertisingSID,
               pending.address == address.address, pending.addressType == address.type.rawValue & 0x01 {
                scanner.synchronise(pending, to: self, set: handle, sid: set.params.advertisingSID, address: address,
                                    interval: train.params.periodicAdvertisingIntervalMin)
            }
            for (syncHandle, sync) in scanner.periodicSyncs.sorted(by: { $0.key < $1.key })
            where sync.advertiser == index && sync.setHandle == handle && sync.reportsEnabled {
                scanner.reportPeriodic(train.data, sync: syncHandle)
            }
        }
        schedulePeriodicEvent(set: handle, generation: generation)
    }

    /// The train of set `handle` stopped (disabled, or the controller reset): each scanner
    /// synchronised to it loses the sync when its sync timeout passes without the train back.
    func trainStopped(set handle: UInt8) {
        for scanner in link.controllers where scanner !== self {
            for (syncHandle, sync) in scanner.periodicSyncs where sync.advertiser == index && sync.setHandle == handle {
                link.schedule(after: Double(sync.syncTimeout) * 0.01) { [self, scanner] in
                    guard scanner.periodicSyncs[syncHandle]?.advertiser == index, periodicInterval(ofSet: handle) == 0 else { return }
                    scanner.periodicSyncs[syncHandle] = nil
                    scanner.link.note("controller \(scanner.index): periodic sync \(hexCode(syncHandle, digits: 4)) lost")
                    scanner.sendLE(LEPeriodicAdvertisingSyncLost(syncHandle: syncHandle))
                }
            }
        }
    }

    // MARK: Scanner

    private func allocateSyncHandle() -> UInt16 {
        var handle = nextSyncHandle
        while periodicSyncs[handle] != nil { handle = handle >= 0x0EFF ? 0 : handle + 1 }
        nextSyncHandle = handle >= 0x0EFF ? 0 : handle + 1
        return handle
    }

    private func synchronise(_ pending: PendingSync, to advertiser: ControllerState, set: UInt8, sid: UInt8,
                             address: DeviceAddress, interval: UInt16) {
        let handle = allocateSyncHandle()
        pendingSync = nil
        periodicSyncs[handle] = SyncState(advertiser: advertiser.index, setHandle: set, syncTimeout: pending.syncTimeout,
                                          reportsEnabled: pending.reportsEnabled)
        link.note("controller \(index): synchronised to the periodic advertising of \(address) (SID \(sid)), sync \(hexCode(handle, digits: 4))")
        sendLE(LEPeriodicAdvertisingSyncEstablished(syncHandle: handle, advertisingSID: sid, advertiserAddressType: address.type.rawValue & 0x01,
                                                    advertiserAddress: address.address, periodicAdvertisingInterval: interval))
    }

    /// One periodic advertisement to the host, in reports of at most 247 octets of data.
    private func reportPeriodic(_ data: [UInt8], sync: UInt16) {
        let chunk = ControllerState.periodicReportDataLimit
        var offset = 0
        repeat {
            let end = min(data.count, offset + chunk)
            sendLE(LEPeriodicAdvertisingReport(syncHandle: sync, rssi: VirtualController.rssi,
                                               dataStatus: end < data.count ? 0x01 : 0x00, data: Array(data[offset..<end])))
            offset = end
        } while offset < data.count
    }

    package func handle(_ c: LEPeriodicAdvertisingCreateSync) {
        guard pendingSync == nil else { return reject(LEPeriodicAdvertisingCreateSync.self, .commandDisallowed) }
        // Options bit 0 (the Periodic Advertiser List) is not modelled: refused as unsupported.
        guard c.options & 0x01 == 0 else { return reject(LEPeriodicAdvertisingCreateSync.self, .unsupportedParameterValue) }
        guard periodicSyncs.count < ControllerState.maxPeriodicSyncs else {
            return reject(LEPeriodicAdvertisingCreateSync.self, .memoryCapacityExceeded)
        }
        accepted(LEPeriodicAdvertisingCreateSync.self)
        pendingSync = PendingSync(sid: c.advertisingSID, address: c.advertiserAddress, addressType: c.advertiserAddressType,
                                  syncTimeout: c.syncTimeout, reportsEnabled: c.options & 0x02 == 0)
    }

    package func handle(_ _: LEPeriodicAdvertisingCreateSyncCancel) {
        guard let pending = pendingSync else { return reject(LEPeriodicAdvertisingCreateSyncCancel.self, .commandDisallowed) }
        pendingSync = nil
        complete(LEPeriodicAdvertisingCreateSyncCancel.self)
        // Then Sync Established with Operation Cancelled by Host (7.8.68).
        sendLE(LEPeriodicAdvertisingSyncEstablished(status: .operationCancelledByHost, syncHandle: 0, advertisingSID: pending.sid,
                                                    advertiserAddressType: pending.addressType, advertiserAddress: pending.address,
                                                    periodicAdvertisingInterval: 0))
    }

    package func handle(_ c: LEPeriodicAdvertisingTerminateSync) {
        guard periodicSyncs.removeValue(forKey: c.syncHandle) != nil else {
            return reject(LEPeriodicAdvertisingTerminateSync.self, .unknownAdvertisingIdentifier)
        }
        complete(LEPeriodicAdvertisingTerminateSync.self)
    }

    // MARK: Periodic Advertising Sync Transfer

    package func handle(_ c: LEPeriodicAdvertisingSyncTransfer) {
        guard let conn = connections[c.connectionHandle] else {
            return reject(LEPeriodicAdvertisingSyncTransfer.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        guard let sync = periodicSyncs[c.syncHandle], let advertiser = link.controllers.first(where: { $0.index == sync.advertiser }) else {
            return reject(LEPeriodicAdvertisingSyncTransfer.self, .unknownAdvertisingIdentifier, handle: c.connectionHandle)
        }
        complete(LEPeriodicAdvertisingSyncTransfer.self, .init(connectionHandle: c.connectionHandle))
        conn.peer(of: self).receiveSyncTransfer(from: advertiser, set: sync.setHandle, serviceData: c.serviceData, on: conn)
    }

    package func handle(_ c: LEPeriodicAdvertisingSetInfoTransfer) {
        guard let conn = connections[c.connectionHandle] else {
            return reject(LEPeriodicAdvertisingSetInfoTransfer.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        guard sets[c.advertisingHandle] != nil else {
            return reject(LEPeriodicAdvertisingSetInfoTransfer.self, .unknownAdvertisingIdentifier, handle: c.connectionHandle)
        }
        // The set's train must be on (7.8.90).
        guard periodicInterval(ofSet: c.advertisingHandle) != 0 else {
            return reject(LEPeriodicAdvertisingSetInfoTransfer.self, .commandDisallowed, handle: c.connectionHandle)
        }
        complete(LEPeriodicAdvertisingSetInfoTransfer.self, .init(connectionHandle: c.connectionHandle))
        conn.peer(of: self).receiveSyncTransfer(from: self, set: c.advertisingHandle, serviceData: c.serviceData, on: conn)
    }

    package func handle(_ c: LESetPeriodicAdvertisingSyncTransferParameters) {
        guard let conn = connections[c.connectionHandle] else {
            return reject(LESetPeriodicAdvertisingSyncTransferParameters.self, .unknownConnectionIdentifier, handle: c.connectionHandle)
        }
        conn.pastParameters[index] = PASTParameters(mode: c.mode, syncTimeout: c.syncTimeout)
        complete(LESetPeriodicAdvertisingSyncTransferParameters.self, .init(connectionHandle: c.connectionHandle))
    }

    package func handle(_ c: LESetDefaultPeriodicAdvertisingSyncTransferParameters) {
        defaultPASTParameters = PASTParameters(mode: c.mode, syncTimeout: c.syncTimeout)
        complete(LESetDefaultPeriodicAdvertisingSyncTransferParameters.self)
    }

    /// The peer on `conn` transferred the train of `advertiser`'s set `set` (its SyncInfo, Vol 6
    /// Part B 2.4.2.27 LL_PERIODIC_SYNC_IND): synchronise when this side's parameters for the
    /// link say so, unless already synchronised to that train (7.8.91).
    private func receiveSyncTransfer(from advertiser: ControllerState, set: UInt8, serviceData: UInt16, on conn: VirtualConnection) {
        let parameters = conn.pastParameters[index] ?? defaultPASTParameters
        guard parameters.mode != 0, let s = advertiser.sets[set], let train = s.periodic, train.enabled else { return }
        guard !periodicSyncs.values.contains(where: { $0.advertiser == advertiser.index && $0.setHandle == set }) else { return }
        guard periodicSyncs.count < ControllerState.maxPeriodicSyncs else { return }
        let handle = allocateSyncHandle()
        periodicSyncs[handle] = SyncState(advertiser: advertiser.index, setHandle: set, syncTimeout: parameters.syncTimeout,
                                          reportsEnabled: parameters.mode >= 2)
        let address = advertiser.ownAddress(s.params.ownAddressType, setRandom: s.randomAddress).address
        link.note("controller \(index): periodic sync \(hexCode(handle, digits: 4)) transferred over connection \(hexCode(conn.handle(of: self), digits: 4))")
        sendLE(LEPeriodicAdvertisingSyncTransferReceived(connectionHandle: conn.handle(of: self), serviceData: serviceData, syncHandle: handle,
                                                         advertisingSID: s.params.advertisingSID,
                                                         advertiserAddressType: address.type.rawValue & 0x01, advertiserAddress: address.address,
                                                         periodicAdvertisingInterval: train.params.periodicAdvertisingIntervalMin))
    }
}
