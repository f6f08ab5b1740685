import HCI
import Transport

/// The events the host acts on, one method each: `dispatch` (generated from Tools/pdl/hci.pdl,
/// which marks them `host` and so names the ignored ones in one place) decodes each by its
/// code and checks its length first.
extension Host: HCIEventHandler {
    package func handle(_ c: CommandComplete) {
        commandAnswered(opcode: c.opcode, credits: c.numHCICommandPackets, result: .complete(c))
    }

    package func handle(_ s: CommandStatus) {
        commandAnswered(opcode: s.opcode, credits: s.numHCICommandPackets, result: .status(s))
    }

    package func handle(_ e: NumberOfCompletedPackets) { numberOfCompletedPackets(e) }

    package func handle(_ d: DisconnectionComplete) {
        guard d.status.isSuccess else {
            warn("Disconnection Complete for \(hexCode(d.connectionHandle, digits: 4)) with status \(d.status)")
            return
        }
        linkDisconnected(d.connectionHandle, reason: d.reason)
    }

    package func handle(_ e: HardwareError) { hardwareFailure(e.hardwareCode) }

    package func handle(_ e: EncryptionChange) {
        encryptionEvent(handle: e.connectionHandle, status: e.status, enabled: e.status.isSuccess && e.encryptionEnabled != 0)
    }

    package func handle(_ e: EncryptionChangeV2) {
        encryptionEvent(handle: e.connectionHandle, status: e.status, enabled: e.status.isSuccess && e.encryptionEnabled != 0)
    }

    package func handle(_ e: EncryptionKeyRefreshComplete) {
        encryptionEvent(handle: e.connectionHandle, status: e.status, enabled: e.status.isSuccess)
    }

    package func handle(_ e: DataBufferOverflow) {
        warn("controller reports Data Buffer Overflow (link type \(e.linkType))")
    }

    // MARK: LE Meta subevents

    package func handle(_ e: LEAdvertisingReport) {
        for rep in e.reports {
            emit(.advertisement(AdvertisingReportValue(
                address: DeviceAddress(rep.address, type: rep.addressType),
                kind: AdvertisingEventKind(legacyEventType: rep.eventType),
                rssi: rep.rssi == 127 ? nil : rep.rssi, txPower: nil, data: rep.data)))
        }
    }

    package func handle(_ e: LEExtendedAdvertisingReport) {
        for rep in e.reports {
            // Data split over several reports is joined before anyone parses it.
            let key = AdvertisingReportReassembler.Key(address: rep.address, addressType: rep.addressType,
                                                       sid: rep.advertisingSID, scanResponse: rep.eventType.isScanResponse)
            var evicted: AdvertisingReportReassembler.Key?
            let outcome = reportFragments.add(key, fragment: rep.data, dataStatus: rep.eventType.dataStatus, evicted: &evicted)
            if let evicted {
                emit(.warning("LE Extended Advertising Report: more than \(AdvertisingReportReassembler.maxAdvertisers) advertisers with data still to come; the partial data of \(evicted.address) dropped"))
            }
            guard case let .complete(data, dataStatus) = outcome else { continue }
            // Anonymous advertisers (0xFF) have no address: reported as random 00:00:...
            let type = rep.deviceAddressType ?? .random
            emit(.advertisement(AdvertisingReportValue(
                address: DeviceAddress(rep.address, type: type),
                kind: AdvertisingEventKind(rawValue: rep.eventType.rawValue & 0x1F),
                rssi: rep.rssi == 127 ? nil : rep.rssi, txPower: rep.txPower == 127 ? nil : rep.txPower,
                data: data, dataStatus: dataStatus, sid: rep.advertisingSID,
                primaryPHY: rep.primaryPHY, secondaryPHY: rep.secondaryPHY,
                periodicInterval: rep.periodicAdvertisingInterval)))
        }
    }

    package func handle(_ c: LEConnectionComplete) {
        connectionCompleted(status: c.status, handle: c.connectionHandle, role: c.role,
                            peer: DeviceAddress(c.peerAddress, type: c.peerAddressType),
                            parameters: ConnectionParameters(interval: c.connectionInterval, latency: c.peripheralLatency,
                                                             supervisionTimeout: c.supervisionTimeout))
    }

    package func handle(_ c: LEEnhancedConnectionComplete) {
        connectionCompleted(status: c.status, handle: c.connectionHandle, role: c.role,
                            peer: DeviceAddress(c.peerAddress, type: c.peerAddressType),
                            localRPA: c.localResolvablePrivateAddress == .zero ? nil : c.localResolvablePrivateAddress,
                            parameters: ConnectionParameters(interval: c.connectionInterval, latency: c.peripheralLatency,
                                                             supervisionTimeout: c.supervisionTimeout))
    }

    package func handle(_ c: LEEnhancedConnectionCompleteV2) { handle(c.base) }

    package func handle(_ c: LEConnectionUpdateComplete) {
        let p = ConnectionParameters(interval: c.connectionInterval, latency: c.peripheralLatency,
                                     supervisionTimeout: c.supervisionTimeout)
        if c.status.isSuccess, let link = links[c.connectionHandle] {
            let old = link.connection
            link.connection = LEConnection(handle: old.handle, role: old.role, peer: old.peer, local: old.local,
                                           parameters: p, route: old.route)
        }
        complete(.connectionUpdate, handle: c.connectionHandle,
                 with: c.status.isSuccess ? .success(.connectionUpdate(p)) : .failure(HCIError(c.status, opcode: LEConnectionUpdate.opcode)))
        emit(.connectionUpdated(handle: c.connectionHandle, status: c.status, parameters: p))
    }

    package func handle(_ c: LEDataLengthChange) {
        emit(.dataLengthChanged(handle: c.connectionHandle, maxTxOctets: c.maxTxOctets, maxTxTime: c.maxTxTime,
                                maxRxOctets: c.maxRxOctets, maxRxTime: c.maxRxTime))
    }

    package func handle(_ c: LEPHYUpdateComplete) {
        complete(.phyUpdate, handle: c.connectionHandle,
                 with: c.status.isSuccess ? .success(.phy(tx: c.txPHY, rx: c.rxPHY)) : .failure(HCIError(c.status, opcode: LESetPHY.opcode)))
        emit(.phyUpdated(handle: c.connectionHandle, status: c.status, txPHY: c.txPHY, rxPHY: c.rxPHY))
    }

    package func handle(_ c: LELongTermKeyRequest) {
        signal(.longTermKeyRequest(random: c.randomNumber, ediv: c.encryptedDiversifier), on: c.connectionHandle)
        emit(.longTermKeyRequest(handle: c.connectionHandle, random: c.randomNumber, ediv: c.encryptedDiversifier))
    }

    package func handle(_ e: LEScanTimeout) {
        scanning = false
        emit(.scanTimeout)
    }

    package func handle(_ c: LEAdvertisingSetTerminated) {
        if c.advertisingHandle == 0 { advertising = false }
        emit(.advertisingSetTerminated(handle: c.advertisingHandle, status: c.status, connectionHandle: c.connectionHandle,
                                       completedEvents: c.numCompletedExtendedAdvertisingEvents))
    }

    /// `localRPA`: the RPA the controller made for us on this link (Own_Address_Type 0x03), the
    /// link's local address (SMP's confirm and check values use the addresses on air).
    func connectionCompleted(status: HCIStatus, handle: UInt16, role: UInt8, peer: DeviceAddress, localRPA: BDAddress? = nil,
                             parameters: ConnectionParameters) {
        guard status.isSuccess else {
            // A failed or cancelled LE Create Connection (or a directed advertising timeout).
            if !complete(.connection, handle: nil, with: .success(.connectionFailed(status))) {
                warn("LE Connection Complete with status \(status)")
            }
            return
        }
        let r: LERole = role == 0 ? .central : .peripheral
        // Advertising stops on a connection: legacy advertising, and the extended set 0 (the only
        // set the host advertises, so the one connected to), whose LE Advertising Set Terminated
        // comes after this event (Vol 4 Part E 7.7.65.18): `isAdvertising` is right at `.connected`.
        if r == .peripheral { advertising = false }
        let conn = addLink(handle: handle, role: r, peer: peer, local: localRPA.map { DeviceAddress($0, type: .random) }, parameters: parameters)
        emit(.connected(conn))
        if r == .central { complete(.connection, handle: nil, with: .success(.connection(conn))) }
    }
}
