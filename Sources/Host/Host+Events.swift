import HCI
import Transport

extension Host {
    /// LE Meta subevents (the reader is positioned at Subevent_Code). Each subevent is decoded
    /// with its own type, and the parameters must be exactly as long as the spec says.
    func handleLEMeta(_ r: inout ByteReader) throws {
        let sub = try r.u8("subeventCode")
        switch sub {
        case LEAdvertisingReport.subeventCode:
            let e = try LEAdvertisingReport(parameters: &r)
            try r.expectEnd(LEAdvertisingReport.name)
            for rep in e.reports {
                emit(.advertisement(AdvertisingReportValue(
                    address: DeviceAddress(rep.address, type: rep.addressType),
                    kind: AdvertisingEventKind(legacyEventType: rep.eventType),
                    rssi: rep.rssi == 127 ? nil : rep.rssi, txPower: nil, data: rep.data)))
            }
        case LEExtendedAdvertisingReport.subeventCode:
            let e = try LEExtendedAdvertisingReport(parameters: &r)
            try r.expectEnd(LEExtendedAdvertisingReport.name)
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
                    data: data, dataStatus: dataStatus, sid: rep.advertisingSID)))
            }
        case LEConnectionComplete.subeventCode:
            let c = try LEConnectionComplete(parameters: &r)
            try r.expectEnd(LEConnectionComplete.name)
            connectionCompleted(status: c.status, handle: c.connectionHandle, role: c.role,
                                peer: DeviceAddress(c.peerAddress, type: c.peerAddressType),
                                parameters: ConnectionParameters(interval: c.connectionInterval, latency: c.peripheralLatency,
                                                                 supervisionTimeout: c.supervisionTimeout))
        case LEEnhancedConnectionComplete.subeventCode, LEEnhancedConnectionCompleteV2.subeventCode:
            let c: LEEnhancedConnectionComplete
            if sub == LEEnhancedConnectionComplete.subeventCode {
                c = try LEEnhancedConnectionComplete(parameters: &r)
            } else {
                c = try LEEnhancedConnectionCompleteV2(parameters: &r).base
            }
            try r.expectEnd("LE Enhanced Connection Complete")
            connectionCompleted(status: c.status, handle: c.connectionHandle, role: c.role,
                                peer: DeviceAddress(c.peerAddress, type: c.peerAddressType),
                                parameters: ConnectionParameters(interval: c.connectionInterval, latency: c.peripheralLatency,
                                                                 supervisionTimeout: c.supervisionTimeout))
        case LEConnectionUpdateComplete.subeventCode:
            let c = try LEConnectionUpdateComplete(parameters: &r)
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
        case LEDataLengthChange.subeventCode:
            let c = try LEDataLengthChange(parameters: &r)
            emit(.dataLengthChanged(handle: c.connectionHandle, maxTxOctets: c.maxTxOctets, maxTxTime: c.maxTxTime,
                                    maxRxOctets: c.maxRxOctets, maxRxTime: c.maxRxTime))
        case LEPHYUpdateComplete.subeventCode:
            let c = try LEPHYUpdateComplete(parameters: &r)
            complete(.phyUpdate, handle: c.connectionHandle,
                     with: c.status.isSuccess ? .success(.phy(tx: c.txPHY, rx: c.rxPHY)) : .failure(HCIError(c.status, opcode: LESetPHY.opcode)))
            emit(.phyUpdated(handle: c.connectionHandle, status: c.status, txPHY: c.txPHY, rxPHY: c.rxPHY))
        case LELongTermKeyRequest.subeventCode:
            let c = try LELongTermKeyRequest(parameters: &r)
            emit(.longTermKeyRequest(handle: c.connectionHandle, random: c.randomNumber, ediv: c.encryptedDiversifier))
        case LEScanTimeout.subeventCode:
            scanning = false
            emit(.scanTimeout)
        case LEAdvertisingSetTerminated.subeventCode:
            let c = try LEAdvertisingSetTerminated(parameters: &r)
            if c.advertisingHandle == 0 { advertising = false }
            emit(.advertisingSetTerminated(handle: c.advertisingHandle, status: c.status, connectionHandle: c.connectionHandle,
                                           completedEvents: c.numCompletedExtendedAdvertisingEvents))
        default:
            break  // subevents the host doesn't use (masked off normally)
        }
    }

    /// Events other than the command-flow, NOCP, Disconnection Complete and LE Meta events.
    func handleOtherEvent(code: UInt8, _ r: inout ByteReader) throws {
        switch code {
        case HardwareError.eventCode:
            hardwareFailure(try HardwareError(parameters: &r).hardwareCode)
        case EncryptionChange.eventCode:
            let e = try EncryptionChange(parameters: &r)
            encryptionEvent(handle: e.connectionHandle, status: e.status, enabled: e.status.isSuccess && e.encryptionEnabled != 0)
        case EncryptionChangeV2.eventCode:
            let e = try EncryptionChangeV2(parameters: &r)
            encryptionEvent(handle: e.connectionHandle, status: e.status, enabled: e.status.isSuccess && e.encryptionEnabled != 0)
        case EncryptionKeyRefreshComplete.eventCode:
            let e = try EncryptionKeyRefreshComplete(parameters: &r)
            encryptionEvent(handle: e.connectionHandle, status: e.status, enabled: e.status.isSuccess)
        case DataBufferOverflow.eventCode:
            warn("controller reports Data Buffer Overflow (link type \(try DataBufferOverflow(parameters: &r).linkType))")
        default:
            break
        }
    }

    func connectionCompleted(status: HCIStatus, handle: UInt16, role: UInt8, peer: DeviceAddress, parameters: ConnectionParameters) {
        guard status.isSuccess else {
            // A failed or cancelled LE Create Connection (or a directed advertising timeout).
            if !complete(.connection, handle: nil, with: .success(.connectionFailed(status))) {
                warn("LE Connection Complete with status \(status)")
            }
            return
        }
        let r: LERole = role == 0 ? .central : .peripheral
        if r == .peripheral, !advertisingExtended { advertising = false }  // legacy advertising stops on connection
        let conn = addLink(handle: handle, role: r, peer: peer, parameters: parameters)
        emit(.connected(conn))
        if r == .central { complete(.connection, handle: nil, with: .success(.connection(conn))) }
    }
}
