import Synchronization
import HCI
import Transport
import Host
import ATT
import GATT
import L2CAP

/// What a `Peripheral` reports to the application. `connection` is the connection handle of
/// the central's link (`handle` is only ever an attribute's).
public enum PeripheralEvent: Sendable, Equatable {
    case connected(connection: UInt16, central: DeviceAddress)
    case disconnected(connection: UInt16, reason: HCIStatus)
    case subscribed(connection: UInt16, characteristic: BluetoothUUID, indications: Bool)
    case unsubscribed(connection: UInt16, characteristic: BluetoothUUID)
    case wrote(connection: UInt16, characteristic: BluetoothUUID, value: [UInt8])
    case read(connection: UInt16, characteristic: BluetoothUUID)
    /// The link's parameters changed (LE Connection Update Complete, Core v5.4 Vol 4 Part E
    /// 7.7.65.3): after `requestConnectionParameters`, or the central's own choice.
    case parametersUpdated(connection: UInt16, parameters: ConnectionParameters)
    /// `updateValue` refused a value because its queue was full, and the queue has drained to
    /// half since (CoreBluetooth's `peripheralManagerIsReady(toUpdateSubscribers:)`): offer again.
    case readyToUpdateSubscribers
    /// A request the server answered (`response`: its answer, an Error Response when refused).
    case answered(connection: UInt16, request: ATTPDU, response: ATTPDU)
    /// Advertising could not be restarted after a disconnection, or the transport was lost.
    case failure(String)
}

/// What to advertise.
public struct AdvertisingOptions: Sendable {
    public var name: String
    public var serviceUUIDs: [BluetoothUUID]
    public var manufacturerData: [(company: UInt16, data: [UInt8])]
    /// Advertise again each time a central disconnects.
    public var restartAfterDisconnection: Bool
    /// Advertising interval in 0.625 ms units (default 100 ms).
    public var interval: UInt16
    /// Directed advertising to this central only (ADV_DIRECT_IND, low duty cycle: Core v5.4
    /// Vol 4 Part E 7.8.5), its identity address: a bonded central, whose RPA the controller
    /// puts in TargetA when it is in the resolving list and we use privacy. No data is sent.
    public var directedTo: DeviceAddress?

    public init(name: String, serviceUUIDs: [BluetoothUUID] = [], manufacturerData: [(company: UInt16, data: [UInt8])] = [],
                restartAfterDisconnection: Bool = true, interval: UInt16 = 0x00A0, directedTo: DeviceAddress? = nil) {
        self.directedTo = directedTo
        self.name = name
        self.serviceUUIDs = serviceUUIDs
        self.manufacturerData = manufacturerData
        self.restartAfterDisconnection = restartAfterDisconnection
        self.interval = interval
    }

    /// Flags, service UUID lists, manufacturer data and the local name, built to fit the
    /// advertising set they will be sent on (Core v5.4 Vol 3 Part C 11; Supplement Part A 1.2):
    /// - When flags, UUIDs and manufacturer data fit the 31 octets of a legacy PDU (Vol 6 Part B
    ///   2.3.1.1), a legacy connectable scannable set (ADV_IND): the complete name in the
    ///   advertising data if it fits, else a Shortened Local Name (0x08) there and, in the
    ///   31-octet scan response, the complete name or the longest shortened one that fits.
    /// - Otherwise an extended connectable set, which is never scannable (Vol 4 Part E 7.8.53:
    ///   connectable and scannable together need legacy PDUs), so no scan response: everything in
    ///   the advertising data, up to `AdvertisingParameters.extendedConnectableDataLimit`, with
    ///   the name shortened to fit.
    func advertisingData() -> (data: AdvertisingData, scanResponse: AdvertisingData?) {
        var data = AdvertisingData()
        data.addFlags(0x06)  // LE General Discoverable, BR/EDR Not Supported
        if !serviceUUIDs.isEmpty { data.addServiceUUIDs(serviceUUIDs, complete: true) }
        for m in manufacturerData { data.addManufacturerData(company: m.company, data: m.data) }
        let legacyLimit = AdvertisingParameters.legacyDataLimit
        guard data.encodedLength <= legacyLimit else {
            data.addLocalName(name, fittingIn: AdvertisingParameters.extendedConnectableDataLimit)
            return (data, nil)
        }
        var withName = data
        withName.addLocalName(name)
        if withName.encodedLength <= legacyLimit { return (withName, nil) }
        var short = data
        short.addLocalName(name, fittingIn: legacyLimit)
        var response = AdvertisingData()
        response.addLocalName(name, fittingIn: legacyLimit)
        return (short, response)
    }
}

/// The peripheral role, as CoreBluetooth's `CBPeripheralManager`: serve a GATT database,
/// advertise, answer reads and writes, notify subscribers.
///
/// ```swift
/// let peripheral = try await Peripheral.open(transport, services: DemoProfile.services, name: "ble-hci")
/// try await peripheral.startAdvertising(AdvertisingOptions(name: "ble-hci", serviceUUIDs: [0xFFF0]))
/// for await event in peripheral.events { print(event) }
/// ```
public final class Peripheral: Sendable {
    let stack: Stack
    /// The attribute database and its server.
    public let server: GATTServer
    /// Connections, subscriptions, reads and writes, in order, for every consumer
    /// (CoreBluetooth's delegate callbacks as a sequence; each `for await` loop gets them all).
    public let events: PeripheralEvents
    private let sink: PeripheralEvents.Storage
    private let advertising = AdvertisingState()
    /// Moves advertising to a new RPA when the current one has lived its time (privacy only).
    private let rotation = Mutex<Task<Void, Never>?>(nil)
    /// The values `updateValue` took and has not sent yet.
    private let updates: UpdateQueue<Update>
    private struct Update: Sendable {
        let value: [UInt8]
        let characteristic: BluetoothUUID
        let connections: [UInt16]?
    }

    /// Values `updateValue` holds at most before it refuses one.
    public static let updateQueueLimit = 64

    /// Whether `close` closes the stack (false for a peripheral on a central's stack, which the
    /// central closes).
    private let ownsStack: Bool

    private init(stack: Stack, server: GATTServer, ownsStack: Bool = true) {
        self.stack = stack
        self.ownsStack = ownsStack
        self.server = server
        let sink = PeripheralEvents.Storage(limit: 4096)
        self.sink = sink
        events = PeripheralEvents(storage: sink)
        updates = UpdateQueue(limit: Self.updateQueueLimit, executor: stack.host.executor, send: { updates in
            // The values for one characteristic and set of connections in a row go out together
            // (one entry into each subscriber's host). A subscriber gone meanwhile is left out,
            // as `notify` leaves it out.
            var i = 0
            while i < updates.count {
                let (uuid, connections) = (updates[i].characteristic, updates[i].connections)
                var j = i + 1
                while j < updates.count, updates[j].characteristic == uuid, updates[j].connections == connections { j += 1 }
                await server.notify(characteristic: uuid, values: updates[i..<j].map(\.value), toHandles: connections)
                i = j
            }
        }, ready: { sink.yield(.readyToUpdateSubscribers) })
    }

    /// Brings up the controller and installs `services` (plus Generic Access and Generic Attribute).
    public static func open(_ transport: any HCITransport, services: [GATTService], name: String = "ble-hci",
                            appearance: UInt16 = 0, options: StackOptions = .init()) async throws -> Peripheral {
        let stack = try await boundary { try await Stack.open(transport, options: options) }
        let server = GATTServer(services: services, configuration: serverConfiguration(name, appearance, stack.options))
        await stack.setServer(server)
        let p = Peripheral(stack: stack, server: server)
        await p.start()
        return p
    }

    /// The peripheral role on the controller `central` already drives: both roles at once on
    /// one host and one controller (a controller may advertise, scan and hold links in both
    /// roles together, Core v5.4 Vol 6 Part B 1.1.1), as CoreBluetooth's central and peripheral
    /// managers share one radio. `services` (plus Generic Access and Generic Attribute) are
    /// served on the links made from now on, in both roles; links already up keep the server
    /// they had. `close()` stops advertising and leaves the stack to the central's `close()`.
    public static func open(sharing central: Central, services: [GATTService], name: String = "ble-hci",
                            appearance: UInt16 = 0) async -> Peripheral {
        let stack = central.stack
        let server = GATTServer(services: services, configuration: serverConfiguration(name, appearance, stack.options))
        await stack.setServer(server)
        let p = Peripheral(stack: stack, server: server, ownsStack: false)
        await p.start()
        return p
    }

    /// Server Supported Features bit 0 when the stack serves EATT (Core v5.4 Vol 3 Part G 7.4).
    static func serverConfiguration(_ name: String, _ appearance: UInt16, _ options: StackOptions) -> GATTServer.Configuration {
        .init(deviceName: name, appearance: appearance, reportsAnswers: true, serverFeatures: options.enhancedATT ? [0x01] : [])
    }

    public var controller: ControllerInfo { stack.controller }

    /// The executor the stack runs on (the host, L2CAP, ATT and SMP; on an in-process
    /// `VirtualLink`, every stack of the link). A task that awaits the stack in a tight loop
    /// (many reads, a notification consumer) can run on it, so that neither the request nor
    /// the resume switches threads:
    /// `try await withTaskExecutorPreference(central.executor.taskExecutor) { ... }` (or
    /// `Task(executorPreference: central.executor.taskExecutor) { ... }`). Only for code that never blocks
    /// (no sleeps other than `Task.sleep`, no semaphores, no blocking I/O) and does little work
    /// per value: everything on the executor waits while it runs. Other tasks need nothing: the
    /// stack is reached from any executor.
    public var executor: SerialThreadExecutor { stack.host.executor }

    /// Runs `body` in the stack's own isolation (`Central.withStackIsolation`): `notify`,
    /// `indicate` and `updateValue` from inside it enter the stack with no hop and no pass
    /// through the executor's queue.
    public nonisolated(nonsending) func withStackIsolation<R: Sendable>(_ body: nonisolated(nonsending) @Sendable () async throws -> R) async throws -> R {
        try await inIsolation(of: stack.host, body)
    }

    /// The address centrals see while advertising (the random static one when the controller
    /// has no public address; the current resolvable private address with privacy, the
    /// controller's when it makes it).
    public var address: DeviceAddress { get async { await stack.host.currentAdvertisingAddress() } }

    /// Our identity address (what bonded centrals know us by; equal to `address` without privacy).
    public var identityAddress: DeviceAddress { stack.localIdentity }

    private func start() async {
        let sink = self.sink
        let advertising = self.advertising
        let stack = self.stack
        await stack.observeLinks { event in
            switch event {
            case .connected(let link):
                guard link.connection.role == .peripheral else { return }
                sink.yield(.connected(connection: link.connection.handle, central: link.connection.peer))
            case .disconnected(let link, let reason):
                guard link.connection.role == .peripheral else { return }
                sink.yield(.disconnected(connection: link.connection.handle, reason: reason))
                if let options = advertising.current, options.restartAfterDisconnection {
                    Task {
                        do { try await Peripheral.advertise(options, on: stack) } catch {
                            sink.yield(.failure("could not advertise again after the disconnection: \(error)"))
                        }
                    }
                }
            case .parametersUpdated(let link, let parameters):
                guard link.connection.role == .peripheral else { return }
                sink.yield(.parametersUpdated(connection: link.connection.handle, parameters: parameters))
            case .transportLost(let reason):
                sink.yield(.failure(reason))
                sink.finish()
            }
        }
        if let privacy = stack.privacy {
            let task = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: min(privacy.rotation / 4, .seconds(5)))
                    guard privacy.isDue(), let options = advertising.current, await stack.host.isAdvertising else { continue }
                    do { try await Peripheral.advertise(options, on: stack) } catch {
                        sink.yield(.failure("could not advertise from a new resolvable private address: \(error)"))
                    }
                }
            }
            rotation.withLock { $0 = task }
        }
        // The server's events (two per read answered) go straight into `events`, where they
        // happen (on the stack's executor for those a request causes): no relay task.
        server.setEventHandler { e in
            switch e {
            case .subscribed(let peer, let uuid, let indications): sink.yield(.subscribed(connection: peer.id, characteristic: uuid, indications: indications))
            case .unsubscribed(let peer, let uuid): sink.yield(.unsubscribed(connection: peer.id, characteristic: uuid))
            case .wrote(let peer, let uuid, let value): sink.yield(.wrote(connection: peer.id, characteristic: uuid, value: value))
            case .read(let peer, let uuid): sink.yield(.read(connection: peer.id, characteristic: uuid))
            case .answered(let peer, let request, let response): sink.yield(.answered(connection: peer.id, request: request, response: response))
            case .connected, .disconnected: break  // reported from the link, with the address and reason
            }
        }
    }

    /// Starts connectable advertising (legacy PDUs, or extended when the controller has them).
    public func startAdvertising(_ options: AdvertisingOptions) async throws {
        advertising.current = options
        try await boundary { try await Peripheral.advertise(options, on: stack) }
    }

    private static func advertise(_ options: AdvertisingOptions, on stack: Stack) async throws {
        let (data, response) = options.advertisingData()
        try await stack.host.startAdvertising(AdvertisingParameters(
            kind: options.directedTo.map { .directed($0) } ?? .connectable, intervalMin: options.interval, intervalMax: options.interval,
            data: data, scanResponse: response, ownAddress: stack.ownAddress))
    }

    public func stopAdvertising() async throws {
        advertising.current = nil
        try await boundary { try await stack.host.stopAdvertising() }
    }

    /// Whether the controller is advertising (CoreBluetooth's `isAdvertising`): false once a
    /// central connected to a legacy set, until advertising is started again.
    public var isAdvertising: Bool { get async { await stack.host.isAdvertising } }

    /// Disconnects the central on `connection` (HCI Disconnect, Core v5.4 Vol 4 Part E 7.1.6:
    /// the central is told `reason`) and returns the reason of the Disconnection Complete
    /// event here (Connection Terminated by Local Host, 0x16).
    @discardableResult
    public func disconnect(connection: UInt16, reason: HCIStatus = .remoteUserTerminated) async throws -> HCIStatus {
        try await boundary { try await stack.host.disconnect(handle: connection, reason: reason) }
    }

    /// Asks the central on `connection` for new connection parameters (L2CAP Connection
    /// Parameter Update Request, Core v5.4 Vol 3 Part A 4.20; CoreBluetooth's
    /// `setDesiredConnectionLatency(_:for:)` with the numbers spelt out): interval in 1.25 ms
    /// units (6...3200), latency in connection events (0...499), supervision timeout in 10 ms
    /// units (10...3200, above (1 + latency) × interval × 2). Returns whether the central
    /// accepted; the change itself follows as LE Connection Update Complete. Throws for
    /// parameters out of range, or when the central rejects the command.
    public func requestConnectionParameters(connection: UInt16, intervalMin: UInt16, intervalMax: UInt16,
                                            latency: UInt16 = 0, supervisionTimeout: UInt16) async throws -> Bool {
        guard let link = await stack.existingLink(connection) else {
            throw BLEError.notPermitted("no connection with handle \(hexCode(connection, digits: 4))")
        }
        return try await boundary(link) { try await link.run { layers, host in
            try await layers.l2cap.requestConnectionParameterUpdate(intervalMin: intervalMin, intervalMax: intervalMax,
                                                                     latency: latency, timeout: supervisionTimeout, host: host)
        } }
    }

    /// Notifies subscribers of `characteristic` (all, or only those on `connections`); returns
    /// the connections reached. Waits while the link is busy (back-pressure). A value longer than a
    /// subscriber's `maximumUpdateValueLength` is refused (`BLEError.invalidArgument`, nothing
    /// sent), not cut.
    @discardableResult
    public nonisolated(nonsending) func notify(_ value: [UInt8], for characteristic: BluetoothUUID,
                                               to connections: [UInt16]? = nil) async throws -> [UInt16] {
        try await exchange(on: stack.host) { try await server.notify(characteristic: characteristic, value: value, toHandles: connections) }
    }

    /// Notifies several characteristics at once: a central that said it takes Multiple Handle
    /// Value Notifications (bit 2 of its Client Supported Features, Core v5.4 Vol 3 Part G 7.2;
    /// ours sets it when it opens Enhanced ATT bearers) gets them in one PDU where they fit
    /// (Part F 3.4.7.4), others one by one. Values are cut to a subscriber's ATT_MTU − 3.
    /// Returns the connections that got all of theirs.
    @discardableResult
    public func notifyMultiple(_ values: [(characteristic: BluetoothUUID, value: [UInt8])],
                               to connections: [UInt16]? = nil) async -> [UInt16] {
        await server.notifyMultiple(values, to: connections?.map { ATTPeer(id: $0) }).map(\.id)
    }

    /// Notifies without waiting (CoreBluetooth's `updateValue(_:for:onSubscribedCentrals:)`):
    /// queues the value for the subscribers of `characteristic` (all, or those on `connections`)
    /// and returns true, from any thread and without entering the stack; the values go out in
    /// order as each link takes them. Returns false, queueing nothing, when
    /// `updateQueueLimit` values already wait: `events` then reports `.readyToUpdateSubscribers`
    /// once there is room for half as many again. Throws `BLEError.invalidArgument` for a value
    /// longer than a subscriber's `maximumUpdateValueLength` (nothing queued), as `notify` does.
    /// A subscriber that goes away before its value is sent does not get it.
    public func updateValue(_ value: [UInt8], for characteristic: BluetoothUUID, onSubscribedCentrals connections: [UInt16]? = nil) throws -> Bool {
        if let (peer, maximum) = server.firstTooShort(uuid: characteristic, for: value.count, to: connections?.map { ATTPeer(id: $0) }, bit: 1) {
            throw BLEError.invalidArgument(GATTPushError.valueTooLong(length: value.count, maximum: maximum, peer: peer).description)
        }
        return updates.offer(Update(value: value, characteristic: characteristic, connections: connections))
    }

    /// Whether `updateValue` would take a value now.
    public var canUpdateValue: Bool { updates.hasRoom }

    /// Indicates to subscribers (all, or those on `connections`); returns the connections that confirmed. A value too long for a
    /// subscriber is refused, as by `notify`.
    @discardableResult
    public nonisolated(nonsending) func indicate(_ value: [UInt8], for characteristic: BluetoothUUID, to connections: [UInt16]? = nil) async throws -> [UInt16] {
        try await exchange(on: stack.host) { try await server.indicateChecked(characteristic: characteristic, value: value, to: connections?.map { ATTPeer(id: $0) }).map(\.id) }
    }

    /// The longest value one notification or indication carries to the central on `connection`
    /// (CoreBluetooth's `CBCentral.maximumUpdateValueLength`): ATT_MTU − 3 (Core v5.4 Vol 3
    /// Part F 3.4.7.1); nil when no such link is up.
    public func maximumUpdateValueLength(for connection: UInt16) async -> Int? {
        guard let link = await stack.existingLink(connection), link.disconnectReason == nil else { return nil }
        return link.att.mtu - 3
    }

    /// Asks the central on `connection` to secure the link (SMP Security Request) and waits until it
    /// pairs or encrypts. Returns the link's security.
    @discardableResult
    public func requestSecurity(connection: UInt16) async throws -> ATTSecurity {
        guard let link = await stack.existingLink(connection) else { throw BLEError.notPermitted("no connection with handle \(hexCode(connection, digits: 4))") }
        return try await boundary(link) { try await link.run { layers, host in try await layers.security.secure(host: host) } }
    }

    /// Publishes an LE credit-based channel (CoreBluetooth's `publishL2CAPChannel`): centrals
    /// that open one to the returned SPSM (`psm`, or the first free one of 0x0080–0x00FF) are
    /// accepted on every link, and each accepted channel arrives on `channels`, which ends at
    /// `unpublishL2CAPChannel` or `close`. `mtu`, `mps` and `credits` are what we receive with
    /// (defaults: `L2CAPConfiguration`'s).
    public func publishL2CAPChannel(psm: UInt16? = nil, mtu: UInt16? = nil, mps: UInt16? = nil,
                                    credits: UInt16? = nil) async throws -> PublishedL2CAPChannel {
        let (channels, continuation) = AsyncStream.makeStream(of: L2CAPChannel.self, bufferingPolicy: .bufferingOldest(64))
        let listener = ChannelListener(mtu: mtu, mps: mps, credits: credits, channels: continuation)
        let spsm = try await boundary { try await stack.publish(psm: psm, listener) }
        return PublishedL2CAPChannel(psm: spsm, channels: channels)
    }

    /// Stops accepting channels on `psm`; the channels open stay open.
    public func unpublishL2CAPChannel(psm: UInt16) async {
        await stack.unpublish(psm: psm)
    }

    /// The connections currently subscribed to `characteristic` (notifications or indications).
    public func subscribers(of characteristic: BluetoothUUID) -> [UInt16] {
        let peers = server.subscribers(of: characteristic) + server.subscribers(of: characteristic, indications: true)
        return Array(Set(peers.map(\.id))).sorted()
    }

    /// Stops advertising (not to be restarted by the disconnections that follow), disconnects
    /// every link and closes the transport: the controller is left as found.
    public func close() async {
        rotation.withLock { $0?.cancel() }
        updates.close()
        advertising.current = nil
        sink.finish()
        guard ownsStack else {
            // A central's stack: only our advertising stops; its scans and links are its own.
            try? await stack.host.stopAdvertising()
            return
        }
        await stack.host.stopScanningAndAdvertising()
        await stack.close()
    }
}

/// An LE credit-based channel a peripheral publishes: its SPSM, and the channels centrals open
/// to it, as they are accepted (CoreBluetooth's `peripheralManager(_:didOpen:error:)`).
public struct PublishedL2CAPChannel: Sendable {
    public let psm: UInt16
    public let channels: AsyncStream<L2CAPChannel>
}

/// The advertising the application asked for, kept to restart it after disconnections.
final class AdvertisingState: Sendable {
    private let state = Mutex<AdvertisingOptions?>(nil)
    var current: AdvertisingOptions? {
        get { state.withLock { $0 } }
        set { state.withLock { $0 = newValue } }
    }
}
