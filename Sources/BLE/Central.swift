import HCI
import Transport
import Host
import ATT
import GATT
import L2CAP
import SMP

/// The central role, as CoreBluetooth's `CBCentralManager`: scan, then connect.
///
/// ```swift
/// let central = try await Central.open(try TransportSpec(parsing: "tcp:127.0.0.1:9001").open())
/// for try await adv in try await central.scan(ScanFilter(nameContains: "ble-hci")) {
///     let peripheral = try await central.connect(to: adv.address)
///     let services = try await peripheral.discoverServices()
///     break
/// }
/// ```
public final class Central: Sendable {
    let stack: Stack
    /// The central's links coming and going and their parameters changing, in order, for every
    /// consumer (CoreBluetooth's `didConnect` / `didDisconnectPeripheral` as a sequence; each
    /// `for await` loop gets them all from when it starts, the first also those before it).
    public let events: CentralEvents
    private let sink = EventQueues<CentralEvent>(limit: 1024)

    private init(stack: Stack) {
        self.stack = stack
        events = CentralEvents(storage: sink)
    }

    /// Brings up the controller behind `transport` (Reset, features, buffers, event masks).
    public static func open(_ transport: any HCITransport, options: StackOptions = .init()) async throws -> Central {
        let central = Central(stack: try await boundary { try await Stack.open(transport, options: options) })
        let sink = central.sink
        await central.stack.observeLinks { event in
            switch event {
            case .connected(let link):
                guard link.connection.role == .central else { return }
                let handle = link.connection.handle
                link.writesReady.set { sink.yield(.readyToSendWriteWithoutResponse(connection: handle)) }
                sink.yield(.connected(connection: handle, peripheral: link.connection.peer))
            case .disconnected(let link, let reason):
                guard link.connection.role == .central else { return }
                sink.yield(.disconnected(connection: link.connection.handle, reason: reason))
            case .parametersUpdated(let link, let parameters):
                guard link.connection.role == .central else { return }
                sink.yield(.parametersUpdated(connection: link.connection.handle, parameters: parameters))
            case .transportLost(let reason):
                sink.yield(.failure(reason))
                sink.finish()
            }
        }
        return central
    }

    /// The controller's identity, version and buffers.
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

    /// Runs `body` in the stack's own isolation, as one of its layers runs: the way an
    /// application's code shares Bumble's one asyncio loop. The calls `body` makes into this
    /// stack (`RemotePeripheral.read`, `write`, a notification stream's next value, ...) enter it
    /// with no hop and no pass through the executor's queue; only an answer's resumption is
    /// queued. Hops out of it (another stack, even on the same executor, or a plain `async`
    /// function) come back to the stack's thread. The fastest way to drive many operations in a
    /// row; the same rule as `executor`'s: code that never blocks and does little work between
    /// its awaits, since the stack waits while it runs.
    public nonisolated(nonsending) func withStackIsolation<R: Sendable>(_ body: nonisolated(nonsending) @Sendable () async throws -> R) async throws -> R {
        try await inIsolation(of: stack.host, body)
    }

    /// Our identity address (with privacy, links are made from resolvable private addresses instead).
    public var identityAddress: DeviceAddress { stack.localIdentity }

    /// Starts scanning; advertisers arrive when first seen and whenever their data changes
    /// (every report with `everyReport`). Scanning stops when the stream is dropped or cancelled.
    public func scan(_ filter: ScanFilter = .init(), active: Bool = true, everyReport: Bool = false) async throws -> AsyncThrowingStream<Advertisement, any Error> {
        try await boundary { try await stack.scan(filter: filter, active: active, everyReport: everyReport) }
    }

    /// Scans until the first advertiser matching `filter`, or throws `BLEError.notFound` after `timeout`.
    public func find(_ filter: ScanFilter, timeout: Duration = .seconds(10), describe: String = "the filter") async throws -> Advertisement {
        let stream = try await scan(filter)
        return try await withThrowingTaskGroup(of: Advertisement?.self) { group in
            group.addTask {
                for try await adv in stream { return adv }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let adv = first else { throw BLEError.notFound(describe) }
            return adv
        }
    }

    /// Whether the bonded peer with this identity address may be advertising from another
    /// address, so that it has to be found by scanning (`Advertisement.identity`) rather than
    /// connected to directly: its bond holds an IRK (it may use resolvable private addresses),
    /// or it distributed this identity while pairing from another address of its own.
    public func bondedPeerMayUseAnotherAddress(_ identity: DeviceAddress) async -> Bool {
        guard let bond = try? await stack.bondStore(for: stack.localIdentity)?.bond(for: identity) else { return false }
        return bond.peerIRK != nil || !bond.peer.isSameIdentity(as: identity)
    }

    /// Connects (LE Create Connection; cancelled after `timeout`), sets up L2CAP, ATT and GATT,
    /// and exchanges the ATT MTU (`StackOptions.mtuOnConnect`, 517 by default): a peer that
    /// refuses it stays at 23 (Core v5.4 Vol 3 Part F 3.4.2.1), which is not an error.
    public func connect(to address: DeviceAddress, timeout: Duration = .seconds(10)) async throws -> RemotePeripheral {
        let connection = try await boundary {
            try await stack.host.connect(to: address, parameters: ConnectParameters(ownAddress: await stack.ownAddressForConnecting()), timeout: timeout)
        }
        let link = await stack.link(for: connection)
        let remote = RemotePeripheral(stack: stack, link: link)
        if let mtu = stack.options.mtuOnConnect {
            do {
                try await remote.exchangeMTU(Int(mtu))
            } catch BLEError.att {
                // Refused (Request Not Supported): ATT_MTU stays 23.
            } catch {
                if Task.isCancelled { _ = try? await remote.disconnect() }
                throw error
            }
        }
        return remote
    }

    /// The peripherals connected now (CoreBluetooth's `retrieveConnectedPeripherals`), by
    /// connection handle: also those a `connect` returned to a task that has since let go.
    public var connections: [RemotePeripheral] {
        get async { await stack.currentLinks().filter { $0.connection.role == .central }.map { RemotePeripheral(stack: stack, link: $0) } }
    }

    /// Whether the controller is scanning (CoreBluetooth's `isScanning`): while a `scan` stream
    /// is consumed.
    public var isScanning: Bool { get async { await stack.host.isScanning } }

    /// Stops scanning, disconnects every link and closes the transport: the controller is left
    /// as found (not scanning, no links), whatever the next host's HCI_Reset does.
    public func close() async {
        await stack.host.stopScanningAndAdvertising()
        await stack.close()
        sink.finish()
    }

    /// Why the transport to the controller was lost (closed, hardware error), once it was.
    /// Links are then marked down without any Disconnection Complete event: callers must not
    /// report that as a disconnection the controller announced.
    public var transportLost: String? { get async { await stack.lostReason } }
}

/// What `Central.events` reports. `connection` is the connection handle of the link.
public enum CentralEvent: Sendable, Equatable {
    case connected(connection: UInt16, peripheral: DeviceAddress)
    case disconnected(connection: UInt16, reason: HCIStatus)
    /// The link's parameters changed (LE Connection Update Complete, Core v5.4 Vol 4 Part E
    /// 7.7.65.3): after `RemotePeripheral.updateConnectionParameters`, or a peripheral's request
    /// that `StackOptions.connectionParameterPolicy` accepted.
    case parametersUpdated(connection: UInt16, parameters: ConnectionParameters)
    /// `sendWriteWithoutResponse` refused a command on `connection` because its queue was full,
    /// and the queue has drained to half since (CoreBluetooth's
    /// `peripheralIsReady(toSendWriteWithoutResponse:)`): send again.
    case readyToSendWriteWithoutResponse(connection: UInt16)
    /// The transport to the controller was lost; no event follows.
    case failure(String)
}

/// How to write a characteristic value.
public enum WriteType: Sendable {
    case withResponse
    case withoutResponse
}

/// A connected peripheral, as CoreBluetooth's `CBPeripheral`: discover, read, write, subscribe.
public final class RemotePeripheral: Sendable {
    let stack: Stack
    let link: Link

    init(stack: Stack, link: Link) {
        self.stack = stack
        self.link = link
    }

    public var address: DeviceAddress { link.connection.peer }
    /// The connection handle of the link (`handle` is only ever an attribute's in this API).
    public var connectionHandle: UInt16 { link.connection.handle }
    @available(*, deprecated, renamed: "connectionHandle")
    public var handle: UInt16 { link.connection.handle }
    public var connection: LEConnection { link.connection }
    /// Runs `body` with the link's GATT client, for procedures this API doesn't wrap (read
    /// multiple, reliable write, ...), inside the host's isolation where the client lives.
    public nonisolated(nonsending) func withGATT<R: Sendable>(_ body: @Sendable (GATTClient, isolated Host) async throws -> R) async throws -> R {
        try await exchange(on: link.host, link: link) { try await link.run { layers, host in try await body(layers.client, host) } }
    }

    /// The current ATT_MTU.
    public var mtu: Int { link.att.mtu }

    /// Exchanges MTU (ATT Exchange MTU Request); returns the effective ATT_MTU.
    @discardableResult
    public nonisolated(nonsending) func exchangeMTU(_ mtu: Int = 517) async throws -> Int {
        try await link.exchange { layers in try await layers.bearer.exchangeMTU(UInt16(clamping: max(23, min(mtu, 517)))) }
    }

    public nonisolated(nonsending) func discoverServices(_ uuid: BluetoothUUID? = nil) async throws -> [GATTRemoteService] {
        try await link.exchange { layers in try await layers.client.discoverServices(uuid: uuid) }
    }

    public nonisolated(nonsending) func discoverCharacteristics(of service: GATTRemoteService, uuid: BluetoothUUID? = nil) async throws -> [GATTRemoteCharacteristic] {
        try await link.exchange { layers in try await layers.client.discoverCharacteristics(of: service, uuid: uuid) }
    }

    public nonisolated(nonsending) func discoverDescriptors(of characteristic: GATTRemoteCharacteristic) async throws -> [GATTRemoteDescriptor] {
        try await link.exchange { layers in try await layers.client.discoverDescriptors(of: characteristic) }
    }

    /// Services, characteristics and descriptors, all at once (cached until Service Changed).
    public nonisolated(nonsending) func discoverAll() async throws -> [GATTRemoteServiceTree] {
        try await link.exchange { layers in try await layers.client.discoverDatabase() }
    }

    /// Reads a characteristic value in full (Read Blob for long values).
    public nonisolated(nonsending) func read(_ characteristic: GATTRemoteCharacteristic) async throws -> [UInt8] {
        guard characteristic.properties.contains(.read) else {
            throw BLEError.notPermitted("characteristic \(characteristic.uuid) is not readable (properties: \(characteristic.properties))")
        }
        return try await read(handle: characteristic.valueHandle)
    }

    /// Reads several characteristic values in one request: Read Multiple Variable Length
    /// Characteristic Values (Core v5.4 Vol 3 Part G 4.8.5; long values completed with Read
    /// Blob). On an Enhanced ATT bearer as on CID 0x0004; a server that lacks the request
    /// answers Request Not Supported (`BLEError.att`).
    public nonisolated(nonsending) func readValues(of characteristics: [GATTRemoteCharacteristic]) async throws -> [[UInt8]] {
        guard (2...).contains(characteristics.count) else {
            throw BLEError.invalidArgument("Read Multiple Variable Length takes two handles or more (Core v5.4 Vol 3 Part F 3.4.4.11)")
        }
        if let c = characteristics.first(where: { !$0.properties.contains(.read) }) {
            throw BLEError.notPermitted("characteristic \(c.uuid) is not readable (properties: \(c.properties))")
        }
        let handles = characteristics.map(\.valueHandle)
        return try await link.exchange { layers in try await layers.client.readMultipleVariable(handles: handles) }
    }

    /// Reads any attribute by handle (descriptors included), in full.
    public nonisolated(nonsending) func read(handle: UInt16) async throws -> [UInt8] {
        // On the host's thread the Read Request is sent without a hop into the host, and only
        // its answer is awaited here (`Link.layersNow`): for a task preferring the stack's
        // executor, four executor jobs fewer per read (docs/performance.md, Round 23).
        guard let begun = try link.layersNow({ layers in try layers.client.beginRead(handle: handle) }) else {
            return try await link.exchange { layers in try await layers.client.read(handle: handle) }
        }
        let first: [UInt8]
        do {
            first = try GATTClient.readValue(await begun.transaction.wait())
        } catch let error as ATTError {
            // What the client's own `read` would do with it (pair and ask again, on a central
            // that secures links itself), in the host.
            first = try await link.exchange { layers in
                try GATTClient.readValue(await layers.client.requester.recover(.readRequest(handle: handle), from: error))
            }
        } catch {
            throw boundaryError(error, link)
        }
        guard first.count >= begun.mtu - 1 else { return first }
        return try await link.exchange { layers in try await layers.client.readRest(handle: handle, after: first, length: nil) }
    }

    /// Writes a characteristic value, checking its properties first.
    public nonisolated(nonsending) func write(_ value: [UInt8], to characteristic: GATTRemoteCharacteristic, type: WriteType = .withResponse) async throws {
        switch type {
        case .withResponse:
            guard characteristic.properties.contains(.write) else {
                throw BLEError.notPermitted("characteristic \(characteristic.uuid) does not allow write with response (properties: \(characteristic.properties))")
            }
            try await link.exchange { layers in try await layers.client.write(value, to: characteristic) }
        case .withoutResponse:
            try await link.exchange { layers in try await layers.writeCommand(value, to: characteristic) }
        }
    }

    /// Writes without response and without waiting (CoreBluetooth's `writeValue(_:for:type:
    /// .withoutResponse)` with `canSendWriteWithoutResponse`): queues the Write Command and returns
    /// true, from any thread and without entering the stack; the link sends the queued commands
    /// in order as its ACL buffers free. Returns false, queueing nothing, when `Link.writeQueueLimit`
    /// (64) commands already wait on this link: `Central.events` then reports
    /// `.readyToSendWriteWithoutResponse` once there is room for half as many again. Throws
    /// `BLEError.notPermitted` for a characteristic that takes no Write Command and
    /// `.invalidArgument` for a value longer than `maximumWriteValueLength(for: .withoutResponse)`
    /// (nothing queued). A command still queued when the link goes down is not sent.
    public func sendWriteWithoutResponse(_ value: [UInt8], to characteristic: GATTRemoteCharacteristic) throws -> Bool {
        let p = characteristic.properties
        let signed = p.contains(.authenticatedSignedWrites) && !link.att.security.encrypted
        guard p.contains(.writeWithoutResponse) || signed else {
            throw BLEError.notPermitted("characteristic \(characteristic.uuid) does not allow write without response (properties: \(characteristic.properties))")
        }
        // ATT_MTU − 3, or − 15 with the Authentication Signature (Core v5.4 Vol 3 Part F 3.4.5.3, 3.4.5.4).
        let maximum = link.att.mtu - (signed ? 15 : 3)
        guard value.count <= maximum else {
            throw BLEError.invalidArgument(GATTClientError.valueTooLong(length: value.count, maximum: maximum).description)
        }
        guard link.disconnectReason == nil else { return false }
        return link.writes.offer(Link.WriteCommand(value: value, characteristic: characteristic))
    }

    /// Whether `sendWriteWithoutResponse` would take a command now (CoreBluetooth's
    /// `canSendWriteWithoutResponse`).
    public var canSendWriteWithoutResponse: Bool { link.disconnectReason == nil && link.writes.hasRoom }

    /// The longest value `write(_:to:type:)` takes now (CoreBluetooth's
    /// `maximumWriteValueLength(for:)`): with a response, 512, the longest attribute value
    /// (Core v5.4 Vol 3 Part F 3.2.9; one that does not fit a Write Request goes by Prepare and
    /// Execute Write); without, ATT_MTU − 3 (a Write Command's opcode and handle, 3.4.5.3), or
    /// ATT_MTU − 15 when the write to `characteristic` would be signed (the 12-octet
    /// Authentication Signature, 3.4.5.4). ATT_MTU is 23 until an MTU exchange (3.2.8).
    public func maximumWriteValueLength(for type: WriteType, of characteristic: GATTRemoteCharacteristic? = nil) async throws -> Int {
        guard type == .withoutResponse else { return Self.maximumAttributeValueLength }
        let signed = characteristic?.properties.contains(.authenticatedSignedWrites) ?? false
        return try await boundary(link) { try await link.run { layers, _ in
            let mtu = layers.bearers.mtu  // the Enhanced ATT bearers' when open: commands go there
            return signed && !layers.security.state.encrypted && layers.security.canSign ? mtu - 15 : mtu - 3
        } }
    }

    /// The longest attribute value (Core v5.4 Vol 3 Part F 3.2.9).
    public static let maximumAttributeValueLength = 512

    /// Writes any attribute by handle with a Write Request (descriptors included).
    public nonisolated(nonsending) func write(_ value: [UInt8], handle: UInt16) async throws {
        try await link.exchange { layers in try await layers.client.write(value, handle: handle) }
    }

    /// Subscribes (notifications, or indications when that's all it has) and streams the
    /// values; cancelling or dropping the stream unsubscribes. Up to `bufferLimit` (1024) values
    /// wait for the application; beyond that the oldest are dropped and counted (`droppedCount`
    /// of the stream). An indication is confirmed once the application has taken it from the stream.
    public nonisolated(nonsending) func notifications(for characteristic: GATTRemoteCharacteristic,
                                                     bufferLimit: Int = GATTNotificationStream.defaultBufferLimit) async throws -> GATTNotificationStream {
        let link = self.link
        // The subscription feeds this stream directly (no pump task): values are yielded by
        // the GATT client's subscriber, in the host's isolation for notifications.
        let (stream, continuation) = GATTNotificationStream.makeStream(bufferLimit: bufferLimit)
        let timeout = stack.options.attTimeout
        try await link.exchange { layers in
            try await layers.client.subscribe(characteristic, onValue: { continuation.yield($0) },
                                              onIndication: { await continuation.deliverIndication($0, timeout: timeout) }, onEnd: {
                if let reason = link.disconnectReason {
                    continuation.finish(throwing: BLEError.disconnected(reason))
                } else {
                    continuation.finish()
                }
            })
        }
        let watcher = link.onDisconnection { reason in continuation.finish(throwing: BLEError.disconnected(reason)) }
        continuation.onTermination { cancelled in
            link.stopObserving(watcher)
            // Dropped or cancelled by the application: unsubscribe for it. (Finished means
            // stopNotifications already did, or the link is gone.)
            guard cancelled, link.disconnectReason == nil else { return }
            Task { try? await link.run { layers, _ in try await layers.client.unsubscribe(characteristic) } }
        }
        return stream
    }

    /// Whether values of `characteristic` are being delivered to a `notifications(for:)` stream
    /// (CoreBluetooth's `CBCharacteristic.isNotifying`): true once `notifications(for:)` has
    /// returned, false after `stopNotifications`, once the stream's consumer let go of it (its
    /// unsubscription under way or done) and once the link is down.
    public func isNotifying(_ characteristic: GATTRemoteCharacteristic) async -> Bool {
        (try? await link.run { layers, _ in layers.client.isSubscribed(characteristic) }) ?? false
    }

    /// Notifications and indications the link dropped before any subscription saw them,
    /// because 1024 were already waiting to be processed (a peer flooding faster than they
    /// are handled). Values a subscription's stream dropped are in its own `droppedCount`.
    public var droppedNotifications: Int { link.att.droppedNotifications }

    /// Unsubscribes (writes 0x0000 to the CCCD) and ends the stream `notifications(for:)` returned.
    public nonisolated(nonsending) func stopNotifications(for characteristic: GATTRemoteCharacteristic) async throws {
        try await link.exchange { layers in try await layers.client.unsubscribe(characteristic) }
    }

    /// Secures the link: encrypts from the bond when there is one (unless `force`), otherwise
    /// pairs (Pairing Request), with MITM protection when `mitm`. Returns the link's security;
    /// throws `BLEError.pairingFailed` / `.encryptionFailed` with the cause.
    @discardableResult
    public func pair(force: Bool = false, mitm: Bool = false) async throws -> ATTSecurity {
        try await boundary(link) { try await link.run { layers, host in try await layers.security.secure(force: force, mitm: mitm, host: host) } }
    }

    /// Returns once a pairing or encryption in progress (e.g. answering the peripheral's Security
    /// Request) has ended, so a disconnection doesn't cut it short.
    public func securitySettled() async { _ = try? await link.run { layers, _ in await layers.security.settle() } }

    /// The link's current security (encrypted, authenticated, key size).
    public var security: ATTSecurity { get async { (try? await link.run { layers, _ in layers.security.state }) ?? .none } }

    /// What the last pairing on this link achieved (nil: none, e.g. encrypted from a bond).
    public var lastPairing: PairingSummary? { get async { try? await link.run { layers, _ in layers.security.lastPairing } } }

    /// Opens an LE credit-based channel to the peripheral's `psm` (CoreBluetooth's
    /// `openL2CAPChannel(_:)`; LE Credit Based Connection Request, Core v5.4 Vol 3 Part A 4.22).
    /// `mtu`, `mps` and `credits` are what we receive with. The channel sends SDUs with
    /// back-pressure (it waits for the peer's credits) and receives them as an AsyncSequence
    /// (`sdus`). Throws `BLEError.refused` with the peer's result.
    public func openL2CAPChannel(psm: UInt16, mtu: UInt16 = 2048, mps: UInt16 = 247, credits: UInt16 = 16) async throws -> L2CAPChannel {
        let base = try await boundary(link) { try await link.run { layers, host in
            try await layers.l2cap.connectChannel(psm: psm, mtu: mtu, mps: mps, credits: credits, host: host)
        } }
        return L2CAPChannel(base, link: LinkSlot(link))
    }

    /// Opens `count` (1–5) Enhanced ATT bearers (Core v5.4 Vol 3 Part G 5.3.2: enhanced
    /// credit-based channels on PSM 0x0027, Part A 4.25), encrypting the link first (pairing
    /// if there is no bond), as EATT needs; from then on GATT requests are spread over them
    /// (the unenhanced bearer stays for Exchange MTU and the peer's own requests), and says so in
    /// the server's Client Supported Features (bits 1 and 2, Part G 7.2). Returns how
    /// many the peer accepted, and the ATT_MTU the requests are sized by from then on: the
    /// smallest of the bearers' (each the smaller of its channel's two MTUs, Part F 3.2.8).
    @discardableResult
    public func openEnhancedATT(count: Int, mtu: UInt16 = 517) async throws -> (bearers: Int, mtu: Int) {
        try await boundary(link) { try await link.run { layers, host in
            _ = try await layers.security.secure(host: host)
            let channels = try await layers.l2cap.connectEnhancedChannels(psm: EnhancedATTBearer.psm, count: count, mtu: mtu,
                                                                         mps: 247, credits: 8, host: host)
            layers.bearers.add(try EnhancedATTBearer.attach(channels, fixed: layers.bearer, host: host))
            try await Self.announceClientFeatures(layers.client)
            return (channels.count, layers.bearers.mtu)
        } }
    }

    /// Raises the MTU we receive with on every open Enhanced ATT bearer to `mtu` (Credit Based
    /// Reconfigure Request, Core v5.4 Vol 3 Part A 4.27, five channels per request; the MPS
    /// stays 247): each bearer's ATT_MTU is then the smaller of its channel's two MTUs (Part G
    /// 5.3.1), and returns the ATT_MTU requests are sized by. Throws `BLEError` when there is no
    /// bearer, when `mtu` is below a bearer's MTU (it may not shrink), or with the peer's refusal
    /// (a result code, or a Command Reject from a peer without the procedure).
    @discardableResult
    public func reconfigureEnhancedATT(mtu: UInt16) async throws -> Int {
        try await boundary(link) { try await link.run { layers, host in
            let cids = layers.bearers.open.map(\.channel.localCID)
            guard !cids.isEmpty else { throw BLEError.notPermitted("no Enhanced ATT bearer is open") }
            for start in stride(from: 0, to: cids.count, by: L2CAPConnection.enhancedMaximumChannels) {
                let some = Array(cids[start..<min(start + L2CAPConnection.enhancedMaximumChannels, cids.count)])
                try await layers.l2cap.reconfigure(some, mtu: mtu, mps: 247, host: host)
            }
            return layers.bearers.mtu
        } }
    }

    /// Sets bits 1 (Enhanced ATT bearer) and 2 (Multiple Handle Value Notifications: the client
    /// takes them) of the server's Client Supported Features (Core v5.4 Vol 3 Part G 7.2), keeping
    /// the bits set before (a client may not clear them). A server without the characteristic
    /// (Attribute Not Found) is left as it is.
    static nonisolated(nonsending) func announceClientFeatures(_ client: GATTClient) async throws {
        let found: [ATTHandleValue]
        do {
            found = try await client.readByUUID(GATTUUID.clientSupportedFeatures)
        } catch let e as ATTError where e.code == .attributeNotFound {
            return
        }
        guard let features = found.first else { return }
        var value = features.value.isEmpty ? [0] : features.value
        guard value[0] & 0x06 != 0x06 else { return }
        value[0] |= 0x06
        try await client.write(value, handle: features.handle)
    }

    /// Opens `count` (1–5) enhanced credit-based channels to `psm` in one request (Core v5.4
    /// Vol 3 Part A 4.25; MTU and MPS at least 64); returns those the peer accepted.
    public func openL2CAPChannels(psm: UInt16, count: Int, mtu: UInt16 = 2048, mps: UInt16 = 247, credits: UInt16 = 16) async throws -> [L2CAPChannel] {
        let opened = try await boundary(link) { try await link.run { layers, host in
            try await layers.l2cap.connectEnhancedChannels(psm: psm, count: count, mtu: mtu, mps: mps, credits: credits, host: host)
        } }
        let slot = LinkSlot(link)
        return opened.map { L2CAPChannel($0, link: slot) }
    }

    /// RSSI of the link in dBm (HCI Read RSSI).
    public func readRSSI() async throws -> Int8 { try await boundary(link) { try await stack.host.readRSSI(handle: connectionHandle) } }

    /// Changes the link's parameters (LE Connection Update, Core v5.4 Vol 4 Part E 7.8.18) and
    /// returns those the controller chose: interval in 1.25 ms units (6...3200), latency in
    /// connection events (0...499), supervision timeout in 10 ms units (10...3200, above
    /// (1 + latency) × interval × 2); the controller refuses others.
    @discardableResult
    public func updateConnectionParameters(intervalMin: UInt16, intervalMax: UInt16, latency: UInt16 = 0,
                                           supervisionTimeout: UInt16, timeout: Duration = .seconds(10)) async throws -> ConnectionParameters {
        try await boundary(link) {
            try await stack.host.updateConnection(handle: connectionHandle, intervalMin: intervalMin, intervalMax: intervalMax,
                                                  latency: latency, supervisionTimeout: supervisionTimeout, timeout: timeout)
        }
    }

    /// Disconnects (Remote User Terminated Connection) and returns the reason the controller
    /// reports for this side (normally Connection Terminated By Local Host).
    @discardableResult
    public func disconnect(reason: HCIStatus = .remoteUserTerminated) async throws -> HCIStatus {
        if let done = link.disconnectReason { return done }
        _ = try await boundary(link) { try await stack.host.disconnect(handle: connectionHandle, reason: reason) }
        return await link.waitForDisconnection()
    }

    /// Waits until the link goes down; returns the reason.
    public func disconnected() async -> HCIStatus { await link.waitForDisconnection() }

    /// The disconnection reason, once disconnected.
    public var disconnectReason: HCIStatus? { link.disconnectReason }
}
