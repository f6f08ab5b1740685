import HCI

/// One LE connection between two controllers of a link (A = central, B = peripheral).
/// Lives on the link's context.
final class VirtualConnection {
    let central: ControllerState
    let peripheral: ControllerState
    let centralHandle: UInt16
    let peripheralHandle: UInt16
    var interval: UInt16
    var latency: UInt16
    var timeout: UInt16
    var encrypted = false
    /// Key the central started encryption with, waiting for the peripheral host's LTK reply.
    var pendingKey: [UInt8]?
    var centralTxOctets: UInt16 = 27
    var peripheralTxOctets: UInt16 = 27
    var txPHY: UInt8 = 1
    var rxPHY: UInt8 = 1
    /// Periodic Advertising Sync Transfer parameters each side set for this link (7.8.91), by
    /// the controller's index; else the side's defaults (7.8.92).
    var pastParameters: [Int: ControllerState.PASTParameters] = [:]
    /// Read for every ACL packet (link context only).
    var alive = true
    /// Airtime mode: the link's schedule and queues (VirtualLink+Airtime.swift).
    var air = ConnectionAir()
    /// The air view's link-layer state (VirtualLink+Air.swift).
    var ll: ConnectionLinkLayer

    init(central: ControllerState, peripheral: ControllerState, interval: UInt16, latency: UInt16, timeout: UInt16) {
        self.central = central
        self.peripheral = peripheral
        centralHandle = central.allocateHandle()
        peripheralHandle = peripheral.allocateHandle()
        self.interval = interval
        self.latency = latency
        self.timeout = timeout
        ll = central.link.drawConnectionLinkLayer()
    }

    func handle(of c: ControllerState) -> UInt16 { c === central ? centralHandle : peripheralHandle }
    func peer(of c: ControllerState) -> ControllerState { c === central ? peripheral : central }
    func isCentral(_ c: ControllerState) -> Bool { c === central }

    /// Connects `central` (initiating) to `peripheral` (advertising `adv`).
    @discardableResult
    static func establish(central: ControllerState, peripheral: ControllerState, via adv: ControllerState.Advertisement) -> VirtualConnection? {
        guard let initiating = central.initiating else { return nil }
        central.initiating = nil
        peripheral.stopAdvertising(adv)
        let conn = VirtualConnection(central: central, peripheral: peripheral, interval: initiating.interval,
                                     latency: initiating.latency, timeout: initiating.timeout)
        central.connections[conn.centralHandle] = conn
        peripheral.connections[conn.peripheralHandle] = conn
        central.link.note("controller \(central.index) connected to controller \(peripheral.index): handles \(conn.centralHandle)/\(conn.peripheralHandle)")
        central.sendConnectionComplete(status: .success, handle: conn.centralHandle, role: 0x00,
                                       peer: DeviceAddress(adv.address, type: adv.addressType), localRPA: initiating.localRPA,
                                       interval: conn.interval, latency: conn.latency, timeout: conn.timeout,
                                       extended: initiating.extended)
        peripheral.sendConnectionComplete(status: .success, handle: conn.peripheralHandle, role: 0x01,
                                          peer: initiating.ownAddress, localRPA: adv.localRPA,
                                          interval: conn.interval, latency: conn.latency, timeout: conn.timeout,
                                          extended: adv.setHandle != nil)
        if let set = adv.setHandle {
            peripheral.sendLE(LEAdvertisingSetTerminated(status: .success, advertisingHandle: set,
                                                         connectionHandle: conn.peripheralHandle))
        }
        return conn
    }

    /// Forgets the connection on both controllers and drops what they still had to send on it;
    /// false when it had already ended.
    private func close() -> Bool {
        guard alive else { return false }
        alive = false
        central.connections[centralHandle] = nil
        peripheral.connections[peripheralHandle] = nil
        central.dropQueuedACL(handle: centralHandle)
        peripheral.dropQueuedACL(handle: peripheralHandle)
        dropAir(of: nil)
        return true
    }

    /// `close` in airtime mode, where a side reset earlier has forgotten the link already (and
    /// may have given its handle to a new one).
    func closeAirtime() -> Bool {
        guard alive else { return false }
        alive = false
        dropAir(of: nil)
        if !air.centralGone {
            if central.connections[centralHandle] === self { central.connections[centralHandle] = nil }
            central.dropQueuedACL(handle: centralHandle)
        }
        if !air.peripheralGone {
            if peripheral.connections[peripheralHandle] === self { peripheral.connections[peripheralHandle] = nil }
            peripheral.dropQueuedACL(handle: peripheralHandle)
        }
        return true
    }

    /// Ends the connection: each side's host gets Disconnection Complete with its reason.
    func terminate(reasonForA: HCIStatus, reasonForB: HCIStatus) {
        // (A side reset in airtime mode has forgotten the link: it is not told.)
        let tellA = !air.centralGone, tellB = !air.peripheralGone
        guard central.link.airtime == nil ? close() : closeAirtime() else { return }
        if tellA { central.send(DisconnectionComplete(connectionHandle: centralHandle, reason: reasonForA)) }
        if tellB { peripheral.send(DisconnectionComplete(connectionHandle: peripheralHandle, reason: reasonForB)) }
    }

    /// Ends the connection from `c`'s side: `c`'s host gets `local`, the peer's host `remote`.
    func terminate(from c: ControllerState, local: HCIStatus, remote: HCIStatus) {
        if c === central { terminate(reasonForA: local, reasonForB: remote) } else { terminate(reasonForA: remote, reasonForB: local) }
    }

    /// Ends the connection without telling `c`'s host (it was reset); the peer gets `reason`.
    /// In airtime mode nothing goes on the air to say so: the peer learns of it at its
    /// supervision timeout (Vol 6 Part B 4.5.2).
    func drop(silentlyFor c: ControllerState, reason: HCIStatus) {
        if c.link.airtime != nil {
            guard alive else { return }
            dropAir(of: c)
            if c === central { air.centralGone = true } else { air.peripheralGone = true }
            c.dropQueuedACL(handle: handle(of: c))
            if air.centralGone && air.peripheralGone { _ = closeAirtime(); return }
            c.link.armSupervision(self)
            return
        }
        guard close() else { return }
        let other = peer(of: c)
        other.send(DisconnectionComplete(connectionHandle: handle(of: other), reason: reason))
    }
}
