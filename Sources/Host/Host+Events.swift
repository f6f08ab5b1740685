import HCI
import Transport

extension Host {
    /// LE Meta subevents (the reader is positioned after the event code, at Subevent_Code).
    func handleLEMeta(_ r: inout ByteReader) throws {
        let sub = try r.u8("subeventCode")
        switch sub {
        case LEConnectionComplete.subeventCode:
            let c = try LEConnectionComplete(parameters: &r)
            connectionCompleted(status: c.status, handle: c.connectionHandle, role: c.role,
                                peer: DeviceAddress(c.peerAddress, type: c.peerAddressType),
                                parameters: ConnectionParameters(interval: c.connectionInterval, latency: c.peripheralLatency,
                                                                 supervisionTimeout: c.supervisionTimeout))
        default:
            break
        }
    }

    /// Events other than the command-flow, NOCP, Disconnection Complete and LE Meta events.
    func handleOtherEvent(code: UInt8, _ r: inout ByteReader) throws {
        switch code {
        case 0x10:  // Hardware Error
            hardwareFailure(try r.u8("hardwareCode"))
        default:
            break
        }
    }

    func connectionCompleted(status: HCIStatus, handle: UInt16, role: UInt8, peer: DeviceAddress, parameters: ConnectionParameters) {
        guard status.isSuccess else {
            // A failed or cancelled LE Create Connection.
            if !complete(.connection, handle: nil, with: .success(.connectionFailed(status))) {
                warn("LE Connection Complete with status \(status)")
            }
            return
        }
        let r: LERole = role == 0 ? .central : .peripheral
        if r == .peripheral { advertising = advertisingExtended ? advertising : false }
        let conn = addLink(handle: handle, role: r, peer: peer, parameters: parameters)
        emit(.connected(conn))
        if r == .central { complete(.connection, handle: nil, with: .success(.connection(conn))) }
    }
}
