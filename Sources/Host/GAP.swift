import HCI
import Transport

#if canImport(Glibc)
import Glibc
#endif

/// Which own address advertising, scanning and connecting use.
public enum OwnAddress: Sendable, Equatable {
    /// The controller's public BD_ADDR.
    case `public`
    /// A random static address generated once per Host (or `HostConfiguration.randomStaticAddress`).
    case randomStatic
}

/// What `Host.startAdvertising` sends.
public struct AdvertisingParameters: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// ADV_IND: connectable and scannable.
        case connectable
        /// ADV_SCAN_IND: scannable, not connectable.
        case scannable
        /// ADV_NONCONN_IND.
        case nonConnectable
    }

    public var kind: Kind
    /// Advertising interval range, 0.625 ms units (0x0020...0x4000).
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    /// Advertising data (AD structures) bytes.
    public var data: [UInt8]
    /// Scan response data bytes (ignored for non-connectable advertising).
    public var scanResponse: [UInt8]
    public var ownAddress: OwnAddress

    /// Advertising or scan response data in a legacy PDU: 31 octets (Core v5.4 Vol 6 Part B
    /// 2.3.1.1-2.3.1.4, Vol 4 Part E 7.8.7).
    public static let legacyDataLimit = 31
    /// Advertising data of an extended connectable set. Connectable extended advertising is
    /// not chained (AUX_CHAIN_IND follows only non-connectable non-scannable advertising and scan
    /// responses, Vol 6 Part B 2.3.4), so its data must fit one AUX_ADV_IND: 255 octets of
    /// payload less the Extended Header Length/AdvMode octet and an extended header of up to 63
    /// octets (a 6-bit length, Vol 6 Part B 2.3.4) = 191, what fits whatever fields the
    /// controller puts in the header (Zephyr's controller, for one, accepts no more). A
    /// controller that cannot send it answers Packet Too Long (0x45) (Vol 4 Part E 7.8.54).
    public static let extendedConnectableDataLimit = 255 - (1 + 63)

    public init(kind: Kind = .connectable, intervalMin: UInt16 = 0x00A0, intervalMax: UInt16 = 0x00F0,
                data: [UInt8] = [], scanResponse: [UInt8] = [], ownAddress: OwnAddress = .public) {
        self.kind = kind
        self.intervalMin = intervalMin
        self.intervalMax = Swift.max(intervalMin, intervalMax)
        self.data = data
        self.scanResponse = scanResponse
        self.ownAddress = ownAddress
    }

    public init(kind: Kind = .connectable, intervalMin: UInt16 = 0x00A0, intervalMax: UInt16 = 0x00F0,
                data: AdvertisingData, scanResponse: AdvertisingData? = nil, ownAddress: OwnAddress = .public) {
        self.init(kind: kind, intervalMin: intervalMin, intervalMax: intervalMax, data: data.bytes,
                  scanResponse: scanResponse?.bytes ?? [], ownAddress: ownAddress)
    }
}

/// What `Host.startScanning` sends.
public struct ScanParameters: Sendable, Equatable {
    /// Active scanning sends scan requests (and gets scan responses); passive only listens.
    public var active: Bool
    /// 0.625 ms units.
    public var interval: UInt16
    public var window: UInt16
    /// Let the controller drop duplicate reports.
    public var filterDuplicates: Bool
    public var ownAddress: OwnAddress

    public init(active: Bool = true, interval: UInt16 = 0x0060, window: UInt16 = 0x0030,
                filterDuplicates: Bool = false, ownAddress: OwnAddress = .public) {
        self.active = active
        self.interval = interval
        self.window = Swift.min(window, interval)
        self.filterDuplicates = filterDuplicates
        self.ownAddress = ownAddress
    }
}

/// Connection request parameters (controller units).
public struct ConnectParameters: Sendable, Equatable {
    /// 1.25 ms units.
    public var intervalMin: UInt16
    public var intervalMax: UInt16
    public var latency: UInt16
    /// 10 ms units.
    public var supervisionTimeout: UInt16
    /// 0.625 ms units.
    public var scanInterval: UInt16
    public var scanWindow: UInt16
    public var ownAddress: OwnAddress

    public init(intervalMin: UInt16 = 0x0018, intervalMax: UInt16 = 0x0028, latency: UInt16 = 0,
                supervisionTimeout: UInt16 = 0x01F4, scanInterval: UInt16 = 0x0060, scanWindow: UInt16 = 0x0060,
                ownAddress: OwnAddress = .public) {
        self.intervalMin = intervalMin
        self.intervalMax = Swift.max(intervalMin, intervalMax)
        self.latency = latency
        self.supervisionTimeout = supervisionTimeout
        self.scanInterval = scanInterval
        self.scanWindow = Swift.min(scanWindow, scanInterval)
        self.ownAddress = ownAddress
    }
}

/// A fresh random static address (Core Vol 6 Part B 1.3.2.1): two top bits set, the rest
/// random and neither all zeros nor all ones.
public func makeRandomStaticAddress() -> BDAddress {
    var g = SystemRandomNumberGenerator()
    while true {
        var b = (0..<6).map { _ in UInt8.random(in: 0...255, using: &g) }
        b[0] |= 0xC0
        let rest = [b[0] & 0x3F] + b[1...]
        if rest.allSatisfy({ $0 == 0 }) || (b[0] & 0x3F == 0x3F && b[1...].allSatisfy { $0 == 0xFF }) { continue }
        return BDAddress(b)
    }
}

extension Host {
    var info: ControllerInfo {
        get throws {
            try checkAlive()
            guard let controller else { throw HostError.notStarted }
            return controller
        }
    }

    /// The random static address of this Host (generated on first use, kept for its lifetime).
    public var staticRandomAddress: BDAddress {
        if let randomAddress { return randomAddress }
        let a = configuration.randomStaticAddress ?? makeRandomStaticAddress()
        randomAddress = a
        return a
    }

    /// `own`, except that a controller without a public address (00:00:00:00:00:00, as Bumble's
    /// virtual controllers) uses the random static address: peers (and SMP, whose confirm and
    /// check values include both addresses) must see one valid identity address.
    func effectiveOwnAddress(_ own: OwnAddress) -> OwnAddress {
        own == .public && controller?.address == .zero ? .randomStatic : own
    }

    /// Sets the controller's random address when `own` asks for it; returns the Own_Address_Type.
    private func prepareOwnAddress(_ own: OwnAddress, extendedHandle: UInt8? = nil) async throws -> AddressType {
        guard own == .randomStatic else { return .public }
        let address = staticRandomAddress
        if let extendedHandle {
            _ = try await execute(LESetAdvertisingSetRandomAddress(advertisingHandle: extendedHandle, randomAddress: address))
        } else {
            _ = try await execute(LESetRandomAddress(randomAddress: address))
        }
        return .random
    }

    // MARK: Advertising

    /// Starts advertising (restarting it with the new parameters if already on). Uses the
    /// extended advertising commands (set 0, legacy PDUs when the data fit in 31 octets) only
    /// when the controller lists them, else the legacy commands. A connection accepted while
    /// advertising arrives as `HostEvent.connected` with role peripheral; advertising then
    /// stops (call `startAdvertising` again to continue).
    public func startAdvertising(_ parameters: AdvertisingParameters) async throws {
        var p = parameters
        p.ownAddress = effectiveOwnAddress(p.ownAddress)
        let info = try self.info
        if advertising { try await stopAdvertising() }
        let extended = info.supports(LESetExtendedAdvertisingParameters.opcode)
            && info.supports(LESetExtendedAdvertisingData.opcode) && info.supports(LESetExtendedAdvertisingEnable.opcode)
        if extended {
            let limit = AdvertisingParameters.legacyDataLimit
            let legacy = p.data.count <= limit && (p.kind == .nonConnectable || p.scanResponse.count <= limit)
            // An extended connectable set is not scannable (Vol 4 Part E 7.8.53), and scan
            // response data for a non-scannable set is refused with Invalid HCI Command
            // Parameters (0x12) (7.8.55): say so before configuring anything.
            if !legacy, p.kind == .connectable, !p.scanResponse.isEmpty {
                throw HostError.invalidArgument("connectable advertising with \(p.data.count) octets of data needs an extended set, which cannot be scannable (Core Vol 4 Part E 7.8.53): put everything in the advertising data, without a scan response (\(p.scanResponse.count) octets)")
            }
            var props: AdvertisingEventProperties
            switch p.kind {
            case .connectable: props = legacy ? [.connectable, .scannable] : [.connectable]
            case .scannable: props = [.scannable]
            case .nonConnectable: props = []
            }
            if legacy { props.insert(.legacy) }
            let own = p.ownAddress == .randomStatic ? AddressType.random : .public
            _ = try await execute(LESetExtendedAdvertisingParameters(
                advertisingHandle: 0, advertisingEventProperties: props,
                primaryAdvertisingIntervalMin: UInt32(p.intervalMin), primaryAdvertisingIntervalMax: UInt32(p.intervalMax),
                ownAddressType: own))
            _ = try await prepareOwnAddress(p.ownAddress, extendedHandle: 0)
            if !(p.kind == .scannable && !legacy) || !p.data.isEmpty {
                for (operation, part) in Self.extendedDataFragments(p.data) {
                    _ = try await execute(LESetExtendedAdvertisingData(advertisingHandle: 0, operation: operation, advertisingData: part))
                }
            }
            if p.kind != .nonConnectable, !p.scanResponse.isEmpty || legacy {
                for (operation, part) in Self.extendedDataFragments(p.scanResponse) {
                    _ = try await execute(LESetExtendedScanResponseData(advertisingHandle: 0, operation: operation, scanResponseData: part))
                }
            }
            _ = try await execute(LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 0)]))
        } else {
            guard p.data.count <= 31, p.scanResponse.count <= 31 else {
                throw HostError.unsupported("advertising data over 31 octets needs extended advertising (data \(p.data.count), scan response \(p.scanResponse.count) octets)")
            }
            let own = try await prepareOwnAddress(p.ownAddress)
            let type: UInt8 = switch p.kind {
            case .connectable: 0x00
            case .scannable: 0x02
            case .nonConnectable: 0x03
            }
            _ = try await execute(LESetAdvertisingParameters(advertisingIntervalMin: p.intervalMin, advertisingIntervalMax: p.intervalMax,
                                                             advertisingType: type, ownAddressType: own))
            _ = try await execute(LESetAdvertisingData(advertisingData: p.data))
            _ = try await execute(LESetScanResponseData(scanResponseData: p.scanResponse))
            _ = try await execute(LESetAdvertisingEnable(advertisingEnable: true))
        }
        usesRandomAddress = p.ownAddress == .randomStatic
        advertisingExtended = extended
        advertising = true
    }

    /// Splits extended advertising or scan response data over commands: at most 251 octets
    /// each, Operation 0x03 (complete) for one, else 0x01 (first), 0x00 (intermediate), 0x02
    /// (last) (Core v5.4 Vol 4 Part E 7.8.54, 7.8.55).
    static func extendedDataFragments(_ data: [UInt8]) -> [(operation: UInt8, data: [UInt8])] {
        let size = 251
        guard data.count > size else { return [(0x03, data)] }
        var out: [(UInt8, [UInt8])] = []
        var offset = 0
        while offset < data.count {
            let end = Swift.min(data.count, offset + size)
            out.append((offset == 0 ? 0x01 : end == data.count ? 0x02 : 0x00, Array(data[offset..<end])))
            offset = end
        }
        return out
    }

    /// Stops advertising (no-op when not advertising).
    public func stopAdvertising() async throws {
        _ = try self.info
        if advertisingExtended {
            _ = try await execute(LESetExtendedAdvertisingEnable(enable: false, sets: []))
        } else {
            do {
                _ = try await execute(LESetAdvertisingEnable(advertisingEnable: false))
            } catch let e as HCIError where e.status == .commandDisallowed && !advertising {
                // Already stopped by a connection: fine.
            }
        }
        advertising = false
    }

    /// Whether the host believes the controller is advertising.
    public var isAdvertising: Bool { advertising }

    // MARK: Scanning

    /// Starts scanning; reports arrive as `HostEvent.advertisement`. Extended scanning is used
    /// only when the controller lists its commands.
    public func startScanning(_ parameters: ScanParameters = .init()) async throws {
        let info = try self.info
        var p = parameters
        p.ownAddress = effectiveOwnAddress(p.ownAddress)
        if scanning { try await stopScanning() }
        let extended = info.supports(LESetExtendedScanParameters.opcode) && info.supports(LESetExtendedScanEnable.opcode)
        let own = try await prepareOwnAddress(p.ownAddress)
        if extended {
            _ = try await execute(LESetExtendedScanParameters(
                ownAddressType: own, scanningPHYs: 0x01,
                phyParameters: [.init(scanType: p.active ? 1 : 0, scanInterval: p.interval, scanWindow: p.window)]))
            _ = try await execute(LESetExtendedScanEnable(enable: true, filterDuplicates: p.filterDuplicates ? 1 : 0))
        } else {
            _ = try await execute(LESetScanParameters(leScanType: p.active ? 1 : 0, leScanInterval: p.interval,
                                                      leScanWindow: p.window, ownAddressType: own))
            _ = try await execute(LESetScanEnable(leScanEnable: true, filterDuplicates: p.filterDuplicates))
        }
        scanningExtended = extended
        scanning = true
    }

    /// Stops scanning (no-op when not scanning).
    public func stopScanning() async throws {
        _ = try self.info
        guard scanning else { return }
        if scanningExtended {
            _ = try await execute(LESetExtendedScanEnable(enable: false))
        } else {
            _ = try await execute(LESetScanEnable(leScanEnable: false))
        }
        scanning = false
        reportFragments.reset()
    }

    public var isScanning: Bool { scanning }

    // MARK: Connections

    /// Connects to `peer` as central. On timeout sends LE Create Connection Cancel and throws
    /// `HostError.connectTimeout`; a failed attempt throws `HCIError` with the status. The
    /// link is also reported as `HostEvent.connected`.
    public func connect(to peer: DeviceAddress, parameters: ConnectParameters = .init(),
                        timeout: Duration = .seconds(10)) async throws -> LEConnection {
        let info = try self.info
        var p = parameters
        p.ownAddress = effectiveOwnAddress(p.ownAddress)
        if let connecting { throw HostError.busy("already connecting to \(connecting)") }
        connecting = peer
        defer { connecting = nil }
        let own = try await prepareOwnAddress(p.ownAddress)
        localAddressForConnections = own == .random ? DeviceAddress(staticRandomAddress, type: .random)
                                                    : DeviceAddress(info.address, type: .public)
        let extended = info.supports(LEExtendedCreateConnection.opcode)
        let waiter = try registerWaiter(.connection, handle: nil)
        do {
            if extended {
                _ = try await execute(LEExtendedCreateConnection(
                    ownAddressType: own, peerAddressType: peer.type, peerAddress: peer.address, initiatingPHYs: 0x01,
                    phyParameters: [.init(scanInterval: p.scanInterval, scanWindow: p.scanWindow,
                                          connectionIntervalMin: p.intervalMin, connectionIntervalMax: p.intervalMax,
                                          maxLatency: p.latency, supervisionTimeout: p.supervisionTimeout)]))
            } else {
                _ = try await execute(LECreateConnection(
                    leScanInterval: p.scanInterval, leScanWindow: p.scanWindow, peerAddressType: peer.type,
                    peerAddress: peer.address, ownAddressType: own, connectionIntervalMin: p.intervalMin,
                    connectionIntervalMax: p.intervalMax, maxLatency: p.latency, supervisionTimeout: p.supervisionTimeout))
            }
        } catch {
            cancelWaiter(waiter)
            throw error
        }
        let result: WaiterResult
        do {
            result = try await awaitWaiter(waiter, timeout: timeout, name: "connecting to \(peer)")
        } catch HostError.procedureTimeout {
            // Cancel; the controller answers with a Connection Complete (Unknown Connection
            // Identifier), or the connection that just won the race.
            let cancelWaiterID = try registerWaiter(.connection, handle: nil)
            do { _ = try await execute(LECreateConnectionCancel()) } catch {
                cancelWaiter(cancelWaiterID)
                throw HostError.connectTimeout(peer)
            }
            if case .connection(let c)? = try? await awaitWaiter(cancelWaiterID, timeout: .seconds(2), name: "connection cancel") {
                return c
            }
            throw HostError.connectTimeout(peer)
        }
        switch result {
        case .connection(let c): return c
        case .connectionFailed(let status): throw HCIError(status, opcode: extended ? LEExtendedCreateConnection.opcode : LECreateConnection.opcode)
        default: throw HostError.malformed("unexpected connection result")
        }
    }

    /// Disconnects `handle` with `reason` and waits for Disconnection Complete (returns its reason).
    @discardableResult
    public func disconnect(handle: UInt16, reason: HCIStatus = .remoteUserTerminated,
                           timeout: Duration = .seconds(5)) async throws -> HCIStatus {
        guard links[handle] != nil else { throw HostError.unknownConnection(handle) }
        let w = try registerWaiter(.disconnection, handle: handle)
        do { _ = try await execute(Disconnect(connectionHandle: handle, reason: reason)) } catch {
            cancelWaiter(w)
            throw error
        }
        guard case .disconnected(let r) = try await awaitWaiter(w, timeout: timeout, name: "disconnecting \(hexCode(handle, digits: 4))") else {
            throw HostError.malformed("unexpected disconnection result")
        }
        return r
    }

    /// Asks for new connection parameters and waits for LE Connection Update Complete.
    public func updateConnection(handle: UInt16, intervalMin: UInt16, intervalMax: UInt16, latency: UInt16 = 0,
                                 supervisionTimeout: UInt16, timeout: Duration = .seconds(10)) async throws -> ConnectionParameters {
        guard links[handle] != nil else { throw HostError.unknownConnection(handle) }
        let w = try registerWaiter(.connectionUpdate, handle: handle)
        do {
            _ = try await execute(LEConnectionUpdate(connectionHandle: handle, connectionIntervalMin: intervalMin,
                                                     connectionIntervalMax: Swift.max(intervalMin, intervalMax),
                                                     maxLatency: latency, supervisionTimeout: supervisionTimeout))
        } catch {
            cancelWaiter(w)
            throw error
        }
        guard case .connectionUpdate(let p) = try await awaitWaiter(w, timeout: timeout, name: "LE Connection Update") else {
            throw HostError.malformed("unexpected connection update result")
        }
        return p
    }

    /// Suggests the link-layer data length (LE Set Data Length); the outcome, if it changes,
    /// arrives as `HostEvent.dataLengthChanged`.
    public func setDataLength(handle: UInt16, txOctets: UInt16 = 251, txTime: UInt16 = 2120) async throws {
        guard links[handle] != nil else { throw HostError.unknownConnection(handle) }
        _ = try await execute(LESetDataLength(connectionHandle: handle, txOctets: txOctets, txTime: txTime))
    }

    /// Requests PHYs (bit masks: 1 = 1M, 2 = 2M, 4 = Coded) and waits for LE PHY Update Complete.
    public func setPHY(handle: UInt16, tx: UInt8, rx: UInt8, timeout: Duration = .seconds(10)) async throws -> (tx: UInt8, rx: UInt8) {
        guard links[handle] != nil else { throw HostError.unknownConnection(handle) }
        let w = try registerWaiter(.phyUpdate, handle: handle)
        do { _ = try await execute(LESetPHY(connectionHandle: handle, txPHYs: tx, rxPHYs: rx)) } catch {
            cancelWaiter(w)
            throw error
        }
        guard case .phy(let t, let r) = try await awaitWaiter(w, timeout: timeout, name: "LE Set PHY") else {
            throw HostError.malformed("unexpected PHY result")
        }
        return (t, r)
    }

    /// RSSI of a link in dBm (Read RSSI).
    public func readRSSI(handle: UInt16) async throws -> Int8 {
        guard links[handle] != nil else { throw HostError.unknownConnection(handle) }
        return try await execute(ReadRSSI(connectionHandle: handle)).rssi
    }
}
