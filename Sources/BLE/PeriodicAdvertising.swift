import HCI
import Host

/// What `Peripheral.startBroadcasting` advertises: the broadcaster role (Core v5.4 Vol 3 Part C
/// 2.2.2.1), a non-connectable, non-scannable extended advertising set, optionally with a
/// periodic train (Vol 6 Part B 4.4.2.12).
public struct BroadcastOptions: Sendable, Equatable {
    /// Complete Local Name, first in the set's data (left out when empty).
    public var name: String
    /// More AD structures (length, type, value) after the name, as given.
    public var data: [UInt8]
    /// The periodic train's AD structures; nil: no train.
    public var periodicData: [UInt8]?
    /// Advertising interval, 0.625 ms units (default 100 ms).
    public var interval: UInt16
    /// Periodic advertising interval, 1.25 ms units (default 100 ms).
    public var periodicInterval: UInt16

    public init(name: String, data: [UInt8] = [], periodicData: [UInt8]? = nil, interval: UInt16 = 0x00A0,
                periodicInterval: UInt16 = 0x0050) {
        self.name = name
        self.data = data
        self.periodicData = periodicData
        self.interval = interval
        self.periodicInterval = periodicInterval
    }

    /// The set's data: the name, then `data`.
    public var advertisingData: [UInt8] {
        var ad = AdvertisingData()
        if !name.isEmpty { ad.addLocalName(name) }
        return ad.bytes + data
    }
}

/// A periodic sync of a `Central` (`syncPeriodicAdvertising`): each periodic advertisement of
/// the train, its reports joined, as it comes. The sync is terminated (LE Periodic Advertising
/// Terminate Sync, Core v5.4 Vol 4 Part E 7.8.69) when the stream is dropped or its consuming
/// task is cancelled; the stream ends with `BLEError.timeout` when the controller loses the
/// train (7.7.65.16).
public struct PeriodicAdvertisingSync: Sendable {
    public let sync: PeriodicSync
    public let reports: AsyncThrowingStream<PeriodicReport, any Error>
}

extension Peripheral {
    /// Starts broadcasting (restarting with the new options if already advertising): no
    /// connections, no scan responses. Needs a controller with extended advertising, and with
    /// periodic advertising for `periodicData`.
    public func startBroadcasting(_ options: BroadcastOptions) async throws {
        let data = options.advertisingData
        try await boundary {
            try await stack.host.startAdvertising(AdvertisingParameters(
                kind: .nonConnectable, intervalMin: options.interval, intervalMax: options.interval, data: data,
                ownAddress: stack.ownAddress, extendedPDUs: true,
                periodic: options.periodicData.map {
                    PeriodicAdvertisingParameters(intervalMin: options.periodicInterval, intervalMax: options.periodicInterval, data: $0)
                }))
        }
    }
}

extension Central {
    /// Synchronises to the periodic train of `advertisement`'s set (its Advertising SID, from an
    /// extended advertising report), scanning while it waits (the controller finds the train
    /// through the set's AUX_ADV_IND, Core v5.4 Vol 6 Part B 4.4.5.1). Throws
    /// `BLEError.invalidArgument` for an advertiser without an SID (legacy advertising), and
    /// `BLEError.timeout` when no train is found within `timeout`.
    public func syncPeriodicAdvertising(of advertisement: Advertisement, timeout: Duration = .seconds(10)) async throws -> PeriodicAdvertisingSync {
        guard advertisement.sid <= 0x0F else {
            throw BLEError.invalidArgument("\(advertisement.address) advertises without an Advertising SID (legacy advertising), so it has no periodic train")
        }
        // Scanning while the sync is created; the scan stops when this stream goes.
        var only = ScanFilter()
        only.address = advertisement.address.address
        let scan = try await scan(only)
        let sync = try await boundary { try await stack.syncPeriodic(to: advertisement.address, sid: advertisement.sid, timeout: timeout) }
        withExtendedLifetime(scan) {}
        return sync
    }
}

extension Central {
    /// Ends `sync` now (LE Periodic Advertising Terminate Sync, Core v5.4 Vol 4 Part E 7.8.69),
    /// rather than when its stream goes; its stream finishes.
    public func terminate(_ sync: PeriodicAdvertisingSync) async throws {
        try await boundary { try await stack.terminatePeriodic(sync.sync.handle) }
    }
}

extension Stack {
    func terminatePeriodic(_ handle: UInt16) async throws {
        let stream = periodicStreams.removeValue(forKey: handle)
        defer { stream?.finish() }  // after: its termination handler then finds the sync ended
        guard await host.activePeriodicSyncs.contains(handle) else { return }
        try await host.terminatePeriodicSync(handle)
    }

    func syncPeriodic(to advertiser: DeviceAddress, sid: UInt8, timeout: Duration) async throws -> PeriodicAdvertisingSync {
        if let lostReason { throw BLEError.transport(TransportError(.lost, lostReason)) }
        let (stream, continuation) = AsyncThrowingStream.makeStream(of: PeriodicReport.self, bufferingPolicy: .bufferingNewest(256))
        // Reports follow Sync Established in the host's events: the stream is in place before.
        syncStreamAwaitingEstablishment = (advertiser, sid, continuation)
        let sync: PeriodicSync
        do {
            sync = try await host.createPeriodicSync(to: advertiser, sid: sid, timeout: timeout)
        } catch {
            syncStreamAwaitingEstablishment = nil
            continuation.finish()
            throw error
        }
        if syncStreamAwaitingEstablishment != nil {
            // The event loop has not handled Sync Established yet: the stream is this sync's now.
            syncStreamAwaitingEstablishment = nil
            periodicStreams[sync.handle] = continuation
        }
        let host = self.host
        continuation.onTermination = { _ in
            Task { try? await host.terminatePeriodicSync(sync.handle) }
        }
        return PeriodicAdvertisingSync(sync: sync, reports: stream)
    }

    func periodicEvent(_ event: HostEvent) {
        switch event {
        case .periodicSyncEstablished(let s):
            if let awaiting = syncStreamAwaitingEstablishment, awaiting.advertiser.address == s.advertiser.address, awaiting.sid == s.sid {
                syncStreamAwaitingEstablishment = nil
                periodicStreams[s.handle] = awaiting.continuation
            }
        case .periodicReport(let r):
            periodicStreams[r.syncHandle]?.yield(r)
        case .periodicSyncLost(let handle):
            periodicStreams.removeValue(forKey: handle)?.finish(
                throwing: BLEError.timeout("the periodic sync \(hexCode(handle, digits: 4)) was lost: no periodic advertising received for its sync timeout (Core Vol 4 Part E 7.7.65.16)"))
        default:
            break
        }
    }
}
