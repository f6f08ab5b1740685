import Foundation
import Synchronization
import Testing
import TestSupport
import HCI
import VirtualController
import BLE
import BLETesting

/// Issue 25 "Proof": a test for every row of the table in the DocC article "Coming from
/// CoreBluetooth" (Sources/BLE/BLE.docc/ComingFromCoreBluetooth.md). Each `Row` is a row id of
/// the article; `row(_:)` switches over all of them (the compiler checks that every row has a
/// test), and `everyRowOfTheArticleHasATest` checks that the article names exactly these rows.
/// Every test drives the counterpart the row names, on `BLETesting`'s in-process virtual radio.
/// Expected values are the declared GATT table's and advertising's, or the Core Specification's.
@Suite(.serialized, .timeLimit(.minutes(2))) struct CoreBluetoothTableTests {
    enum Row: String, CaseIterable, Sendable {
        case mAuthorization = "m-authorization"
        case cmInit = "cm-init", cmState = "cm-state", cmScan = "cm-scan", cmAllowDuplicates = "cm-allow-duplicates"
        case cmStopScan = "cm-stop-scan", cmDidDiscover = "cm-did-discover", cmConnect = "cm-connect"
        case cmDidFailToConnect = "cm-did-fail-to-connect", cmCancelPending = "cm-cancel-pending"
        case cmCancelConnection = "cm-cancel-connection", cmRetrieveConnected = "cm-retrieve-connected"
        case cmRetrievePeripherals = "cm-retrieve-peripherals", cmConnectionEvents = "cm-connection-events"
        case cmRestoreState = "cm-restore-state", cmSupports = "cm-supports"
        case pIdentifier = "p-identifier", pName = "p-name", pState = "p-state", pDiscoverServices = "p-discover-services"
        case pDiscoverIncluded = "p-discover-included", pDiscoverCharacteristics = "p-discover-characteristics"
        case pDiscoverDescriptors = "p-discover-descriptors", pServices = "p-services"
        case pDidModifyServices = "p-did-modify-services", pRead = "p-read", pReadDescriptor = "p-read-descriptor"
        case pWrite = "p-write", pWriteWithoutResponse = "p-write-without-response", pWriteDescriptor = "p-write-descriptor"
        case pMaximumWriteLength = "p-maximum-write-length"
        case pCanSendWriteWithoutResponse = "p-can-send-write-without-response"
        case pNotify = "p-notify", pIndicate = "p-indicate", pStopNotify = "p-stop-notify", pIsNotifying = "p-is-notifying"
        case pReadRSSI = "p-read-rssi", pOpenL2CAP = "p-open-l2cap"
        case pmInitAdd = "pm-init-add", pmRestoreState = "pm-restore-state", pmState = "pm-state", pmRemove = "pm-remove", pmMutableService = "pm-mutable-service"
        case pmMutableCharacteristic = "pm-mutable-characteristic", pmMutableDescriptor = "pm-mutable-descriptor"
        case pmPermissions = "pm-permissions", pmEncryptionRequired = "pm-encryption-required"
        case pmStartAdvertising = "pm-start-advertising", pmStopAdvertising = "pm-stop-advertising"
        case pmDidReceiveRead = "pm-did-receive-read", pmRespondError = "pm-respond-error"
        case pmDidReceiveWrite = "pm-did-receive-write", pmDidSubscribe = "pm-did-subscribe"
        case pmDidUnsubscribe = "pm-did-unsubscribe", pmUpdateValue = "pm-update-value", pmReadyToUpdate = "pm-ready-to-update"
        case pmMaximumUpdateLength = "pm-maximum-update-length", pmCentral = "pm-central"
        case pmConnectionLatency = "pm-connection-latency", pmPublishL2CAP = "pm-publish-l2cap"
        case pmUnpublishL2CAP = "pm-unpublish-l2cap"
        case tUUID = "t-uuid", tCharacteristicProperties = "t-characteristic-properties", tATTError = "t-att-error"
        case tError = "t-error"
    }

    // MARK: The table and the tests name the same rows

    /// The row ids of the article's tables: the first cell of each table row, in code voice.
    static func articleRows() throws -> [String] {
        let article = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/BLE/BLE.docc/ComingFromCoreBluetooth.md")
        let text = try String(contentsOf: article, encoding: .utf8)
        return text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `") else { return nil }
            let cell = line.dropFirst(3).prefix { $0 != "`" }
            return String(cell)
        }
    }

    @Test func everyRowOfTheArticleHasATest() throws {
        let rows = try Self.articleRows()
        #expect(rows.count > 40, "the article's tables were not found: \(rows)")
        #expect(rows.count == Set(rows).count, "a row id appears twice: \(rows)")
        let tested = Set(Row.allCases.map(\.rawValue))
        #expect(Set(rows).subtracting(tested).sorted() == [], "rows without a test")
        #expect(tested.subtracting(rows).sorted() == [], "tests of rows the article does not have")
    }

    @Test(arguments: Row.allCases) func row(_ row: Row) async throws {
        switch row {
        case .mAuthorization: try mAuthorization()
        case .cmInit: try await cmInit()
        case .cmState: try await cmState()
        case .cmScan: try await cmScan()
        case .cmAllowDuplicates: try await cmAllowDuplicates()
        case .cmStopScan: try await cmStopScan()
        case .cmDidDiscover: try await cmDidDiscover()
        case .cmConnect: try await cmConnect()
        case .cmDidFailToConnect: try await cmDidFailToConnect()
        case .cmCancelPending: try await cmCancelPending()
        case .cmCancelConnection: try await cmCancelConnection()
        case .cmRetrieveConnected: try await cmRetrieveConnected()
        case .cmRetrievePeripherals: try await cmRetrievePeripherals()
        case .cmConnectionEvents: try await cmConnectionEvents()
        case .cmRestoreState: try await cmRestoreState()
        case .cmSupports: try await cmSupports()
        case .pIdentifier: try await pIdentifier()
        case .pName: try await pName()
        case .pState: try await pState()
        case .pDiscoverServices: try await pDiscoverServices()
        case .pDiscoverIncluded: try await pDiscoverIncluded()
        case .pDiscoverCharacteristics: try await pDiscoverCharacteristics()
        case .pDiscoverDescriptors: try await pDiscoverDescriptors()
        case .pServices: try await pServices()
        case .pDidModifyServices: try await pDidModifyServices()
        case .pRead: try await pRead()
        case .pReadDescriptor: try await pReadDescriptor()
        case .pWrite: try await pWrite()
        case .pWriteWithoutResponse: try await pWriteWithoutResponse()
        case .pWriteDescriptor: try await pWriteDescriptor()
        case .pMaximumWriteLength: try await pMaximumWriteLength()
        case .pCanSendWriteWithoutResponse: try await pCanSendWriteWithoutResponse()
        case .pNotify: try await pNotify()
        case .pIndicate: try await pIndicate()
        case .pStopNotify: try await pStopNotify()
        case .pIsNotifying: try await pIsNotifying()
        case .pReadRSSI: try await pReadRSSI()
        case .pOpenL2CAP: try await pOpenL2CAP()
        case .pmInitAdd: try await pmInitAdd()
        case .pmRestoreState: try await pmRestoreState()
        case .pmState: try await pmState()
        case .pmRemove: try await pmRemove()
        case .pmMutableService: try await pmMutableService()
        case .pmMutableCharacteristic: try await pmMutableCharacteristic()
        case .pmMutableDescriptor: try await pmMutableDescriptor()
        case .pmPermissions: try await pmPermissions()
        case .pmEncryptionRequired: try await pmEncryptionRequired()
        case .pmStartAdvertising: try await pmStartAdvertising()
        case .pmStopAdvertising: try await pmStopAdvertising()
        case .pmDidReceiveRead: try await pmDidReceiveRead()
        case .pmRespondError: try await pmRespondError()
        case .pmDidReceiveWrite: try await pmDidReceiveWrite()
        case .pmDidSubscribe: try await pmDidSubscribe()
        case .pmDidUnsubscribe: try await pmDidUnsubscribe()
        case .pmUpdateValue: try await pmUpdateValue()
        case .pmReadyToUpdate: try await pmReadyToUpdate()
        case .pmMaximumUpdateLength: try await pmMaximumUpdateLength()
        case .pmCentral: try await pmCentral()
        case .pmConnectionLatency: try await pmConnectionLatency()
        case .pmPublishL2CAP: try await pmPublishL2CAP()
        case .pmUnpublishL2CAP: try await pmUnpublishL2CAP()
        case .tUUID: try tUUID()
        case .tCharacteristicProperties: try await tCharacteristicProperties()
        case .tATTError: try await tATTError()
        case .tError: try await tError()
        }
    }

    // MARK: The fake device

    /// What the application's handlers saw (the asynchronous write characteristic's values).
    final class Written: Sendable {
        let values = Mutex<[[UInt8]]>([])
    }

    static let heartRate: BluetoothUUID = 0x180D           // Heart Rate service (Assigned Numbers 3.4.2)
    static let bodySensorLocation: BluetoothUUID = 0x2A38  // Body Sensor Location (GSS 3.28)
    static let measurement: BluetoothUUID = 0x2A37         // Heart Rate Measurement
    static let battery: BluetoothUUID = 0x180F             // Battery service, here secondary and included
    static let batteryLevel: BluetoothUUID = 0x2A19
    static let custom: BluetoothUUID = 0xFFF0
    static let greeting: BluetoothUUID = 0xFFF1            // read, write, write without response; writable 2901
    static let alarm: BluetoothUUID = 0xFFF2               // indicate only
    static let long: BluetoothUUID = 0xFFF3                // a 300-octet value (Read Blob)
    static let writeOnly: BluetoothUUID = 0xFFF4           // write only
    static let readOnlyPermission: BluetoothUUID = 0xFFF5  // write property, read-only permission
    static let secureNotify: BluetoothUUID = 0xFFF6        // notify; its CCCD needs encryption
    static let deferred: BluetoothUUID = 0xFFF7            // asyncRead / asyncWrite
    static let refusing: BluetoothUUID = 0xFFF8            // its handler throws an application error
    static let formatted: BluetoothUUID = 0xFFF9           // with a 2904 descriptor
    static let longValue: [UInt8] = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
    /// Characteristic Presentation Format (Core v5.4 Vol 3 Part G 3.3.3.5): sint16 (0x0E),
    /// exponent −2, unit degree Celsius (0x272F), namespace Bluetooth SIG (1), description 0.
    static let presentationFormat: [UInt8] = [0x0E, 0xFE, 0x2F, 0x27, 0x01, 0x00, 0x00]

    static func services(_ written: Written) -> [GATTService] {
        [
            GATTService(uuid: heartRate, characteristics: [
                // Body Sensor Location 0x01 = Chest (GSS).
                GATTCharacteristic(uuid: bodySensorLocation, properties: [.read], value: [0x01],
                                   descriptors: [.userDescription("location")]),
                GATTCharacteristic(uuid: measurement, properties: [.notify], value: [0x00, 60]),
            ]),
            GATTService(uuid: battery, primary: false, characteristics: [
                GATTCharacteristic(uuid: batteryLevel, properties: [.read], value: [100]),
            ]),
            GATTService(uuid: custom, includes: [battery], characteristics: [
                GATTCharacteristic(uuid: greeting, properties: [.read, .write, .writeWithoutResponse], value: Array("hello".utf8),
                                   descriptors: [.userDescription("greeting", writable: true)]),
                GATTCharacteristic(uuid: alarm, properties: [.indicate], value: [0]),
                GATTCharacteristic(uuid: long, properties: [.read], value: longValue),
                GATTCharacteristic(uuid: writeOnly, properties: [.write], value: [0]),
                GATTCharacteristic(uuid: readOnlyPermission, properties: [.read, .write], permissions: .readable, value: [7]),
                GATTCharacteristic(uuid: secureNotify, properties: [.notify], value: [0], descriptors: [
                    GATTDescriptor(uuid: GATTUUID.clientCharacteristicConfiguration,
                                   permissions: [.readable, .writable, .writeEncryptionRequired], value: [0, 0]),
                ]),
                GATTCharacteristic(uuid: deferred, properties: [.read, .write], asyncRead: { _ in
                    await Task.yield()  // answered later, off the stack's loop
                    return [0x2A]
                }, asyncWrite: { _, value in
                    written.values.withLock { $0.append(value) }
                }),
                GATTCharacteristic(uuid: refusing, properties: [.read], read: { _ in throw ATTError.rejecting(.application(0x01)) }),
                GATTCharacteristic(uuid: formatted, properties: [.read], value: [0x34, 0x09], descriptors: [
                    GATTDescriptor(uuid: 0x2904, value: presentationFormat),
                ]),
            ]),
        ]
    }

    /// The fake device (controller 0 of a virtual radio) and the application's central
    /// (controller 1), as `BLETesting` gives them to an application's tests.
    struct Rig {
        let fake: FakePeripheral
        let central: Central
        let written: Written
        var peripheral: Peripheral { fake.peripheral }

        static func start(name: String = "cb-table", central options: StackOptions = .init(),
                          peripheral peripheralOptions: StackOptions = .init()) async throws -> Rig {
            let written = Written()
            let fake = try await FakePeripheral.start(services: CoreBluetoothTableTests.services(written), name: name,
                                                      options: peripheralOptions)
            let central = try await Central.open(fake.centralTransport(), options: options)
            return Rig(fake: fake, central: central, written: written)
        }

        func find(timeout: Duration = .seconds(5)) async throws -> Advertisement {
            try await central.find(ScanFilter(nameContains: fake.name), timeout: timeout)
        }

        func connect() async throws -> RemotePeripheral {
            try await central.connect(to: try await find().address)
        }

        /// The remote characteristic `uuid` (from the whole table).
        func characteristic(_ remote: RemotePeripheral, _ uuid: BluetoothUUID) async throws -> GATTRemoteCharacteristic {
            let all = try await remote.discoverAll().flatMap(\.characteristics)
            return try #require(all.first { $0.characteristic.uuid == uuid }?.characteristic, "no characteristic \(uuid)")
        }

        func descriptors(_ remote: RemotePeripheral, _ uuid: BluetoothUUID) async throws -> [GATTRemoteDescriptor] {
            let all = try await remote.discoverAll().flatMap(\.characteristics)
            return try #require(all.first { $0.characteristic.uuid == uuid }?.descriptors, "no characteristic \(uuid)")
        }

        func close() async {
            await central.close()
            await fake.close()
        }
    }

    /// The next event `match` picks from `events` (made before what causes it, so that it
    /// misses nothing; bounded by the suite's time limit, as the other iterator waits).
    static func next<T>(_ events: inout PeripheralEvents.Iterator, _ match: (PeripheralEvent) -> T?) async -> T? {
        while let e = await events.next() { if let t = match(e) { return t } }
        return nil
    }

    /// The peripheral's connection handle of its next link (its `connected` event).
    static func connection(_ events: inout PeripheralEvents.Iterator) async throws -> UInt16 {
        try #require(await next(&events) { if case .connected(let c, _) = $0 { return c } else { return nil } })
    }

    // MARK: CBManager

    /// An adapter that is not there (no hci99 here; without Bluetooth in the kernel, no
    /// AF_BLUETOOTH at all): opening its user channel throws a `TransportError` naming it, with
    /// the kernel's errno in words.
    func mAuthorization() throws {
        do {
            _ = try TransportSpec(parsing: "hci99").open()
            Issue.record("hci99 opened")
        } catch {
            #expect(error.description.contains("hci99"), "\(error)")
            #expect(error.description.contains("errno"), "\(error)")
        }
    }

    // MARK: CBCentralManager

    /// `Central.open` brings the controller up: LE Read Buffer Size (Core v5.4 Vol 4 Part E
    /// 7.8.2) reports the virtual radio's 8 buffers of 27 octets (`VirtualRadio(aclBuffers:)`).
    func cmInit() async throws {
        let radio = VirtualRadio(controllers: 1)
        let central = try await Central.open(radio.transport(0))
        #expect(central.controller.aclBufferCount == 8)
        #expect(central.controller.aclDataLength == 27)
        #expect(await central.transportLost == nil)
        // The `queue:` counterparts: a task preferring `executor`, and the stack's own isolation.
        let executor = central.executor
        #expect(await withTaskExecutorPreference(executor.taskExecutor) { executor.isCurrent })
        #expect(try await central.withStackIsolation { executor.isCurrent })
        await central.close()
    }

    /// A controller lost under the central: `events` ends with `failure`, `transportLost` says why.
    func cmState() async throws {
        let radio = VirtualRadio(controllers: 1)
        let central = try await Central.open(radio.transport(0))
        #expect(await central.transportLost == nil)
        radio.transport(0).close()
        let failure = try await { () async throws -> String? in
            for await e in central.events { if case .failure(let why) = e { return why } }
            return nil
        }()
        #expect(failure != nil)
        #expect(await central.transportLost != nil)
        await central.close()
    }

    /// A service filter finds the fake advertising 0x180D and nothing for 0x1810 it does not advertise.
    func cmScan() async throws {
        let rig = try await Rig.start()
        let found = try await rig.central.find(ScanFilter(services: [Self.heartRate]), timeout: .seconds(5))
        #expect(found.address == (await rig.peripheral.address))
        await #expect(throws: BLEError.self) {
            _ = try await rig.central.find(ScanFilter(services: [0x1810]), timeout: .milliseconds(500))
        }
        await rig.close()
    }

    /// With `everyReport`, the same advertiser comes again: it advertises every interval
    /// (Core v5.4 Vol 6 Part B 4.4.2.2), data unchanged.
    func cmAllowDuplicates() async throws {
        let rig = try await Rig.start()
        let stream = try await rig.central.scan(ScanFilter(nameContains: rig.fake.name), everyReport: true)
        let reports = try await { () async throws -> [Advertisement] in
            var got: [Advertisement] = []
            for try await a in stream {
                got.append(a)
                if got.count == 2 { break }
            }
            return got
        }()
        #expect(reports.count == 2 && reports[0].address == reports[1].address)
        await rig.close()
    }

    /// Scanning stops when the loop over the scan stream is left with the stream, and when its
    /// task is cancelled.
    func cmStopScan() async throws {
        let rig = try await Rig.start()
        #expect(await rig.central.isScanning == false)
        let central = rig.central, name = rig.fake.name
        // The loop left, and the stream with it (a stream still referenced keeps scanning).
        try await { () async throws in
            for try await _ in try await central.scan(ScanFilter(nameContains: name)) { break }
        }()
        try await central.untilScanning(false, "scanning stops after the loop")
        // The consuming task cancelled.
        let scanning = Task { for try await _ in try await central.scan(ScanFilter(nameContains: "nobody")) {} }
        try await central.untilScanning(true, "scanning starts")
        scanning.cancel()
        try await central.untilScanning(false, "scanning stops after the cancellation")
        await rig.close()
    }

    /// The advertisement carries what the peripheral put in it: the name, the service UUID
    /// list and manufacturer data keyed by company (Core Supplement Part A 1.2, 1.4).
    func cmDidDiscover() async throws {
        let rig = try await Rig.start()
        try await rig.peripheral.stopAdvertising()
        try await rig.peripheral.startAdvertising(AdvertisingOptions(name: "adv", serviceUUIDs: [Self.heartRate],
                                                                     manufacturerData: [(company: 0xFFFF, data: [1, 2, 3])]))
        let a = try await rig.central.find(ScanFilter(nameContains: "adv"), timeout: .seconds(5))
        #expect(a.name == "adv")
        #expect(a.services == [Self.heartRate])
        #expect(a.manufacturerData == [0xFFFF: [1, 2, 3]])
        #expect(a.connectable)
        await rig.close()
    }

    /// `connect` returns the link and `events` reports it with the same handle and address.
    func cmConnect() async throws {
        let rig = try await Rig.start()
        var events = rig.central.events.makeAsyncIterator()
        let address = try await rig.find().address
        let remote = try await rig.central.connect(to: address)
        #expect(await events.next() == .connected(connection: remote.connectionHandle, peripheral: address))
        #expect(remote.disconnectReason == nil)
        await rig.close()
    }

    /// Nobody advertises from this address: `connect` throws a timeout within its bound.
    func cmDidFailToConnect() async throws {
        let rig = try await Rig.start()
        let absent = DeviceAddress(try #require(BDAddress(string: "C0:DE:00:00:00:01")), type: .random)
        do {
            _ = try await rig.central.connect(to: absent, timeout: .milliseconds(300))
            Issue.record("connected to an absent device")
        } catch let e as BLEError {
            guard case .timeout = e else { Issue.record("not a timeout: \(e)"); await rig.close(); return }
        }
        #expect(await rig.central.connections.isEmpty)
        await rig.close()
    }

    /// Cancelling the task of a pending connect ends it with `CancellationError`, long before its timeout.
    func cmCancelPending() async throws {
        let rig = try await Rig.start()
        let absent = DeviceAddress(try #require(BDAddress(string: "C0:DE:00:00:00:02")), type: .random)
        let central = rig.central
        let armed = await central.armedDeadlineCount
        let task = Pending { try await central.connect(to: absent, timeout: .seconds(30)) }
        try await central.untilArmed(armed + 1)  // the connect started: its timeout is armed
        task.cancel()
        let result = try await task.result(within: .seconds(5), "the cancelled connect")
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(await rig.central.connections.isEmpty)
        await rig.close()
    }

    /// `disconnect` returns this side's reason, Connection Terminated by Local Host (0x16), and
    /// the event and `disconnected()` say the same (Core v5.4 Vol 4 Part E 7.1.6, 7.7.5).
    func cmCancelConnection() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        var events = rig.central.events.makeAsyncIterator()
        _ = await events.next()  // connected
        #expect(try await remote.disconnect() == .localHostTerminated)
        #expect(await events.next() == .disconnected(connection: remote.connectionHandle, reason: .localHostTerminated))
        #expect(await remote.disconnected() == .localHostTerminated)
        await rig.close()
    }

    /// `connections` lists the link although nobody holds its `RemotePeripheral`.
    func cmRetrieveConnected() async throws {
        let rig = try await Rig.start()
        let handle = try await rig.connect().connectionHandle
        let connections = await rig.central.connections
        #expect(connections.map(\.connectionHandle) == [handle])
        #expect(connections.first?.address == (await rig.peripheral.address))
        await rig.close()
    }

    /// A known address connects without scanning.
    func cmRetrievePeripherals() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.central.connect(to: await rig.peripheral.address)
        #expect(try await remote.read(try await rig.characteristic(remote, Self.bodySensorLocation)) == [0x01])
        await rig.close()
    }

    /// Two consumers of `events` both hear the link come up and go down.
    func cmConnectionEvents() async throws {
        let rig = try await Rig.start()
        var first = rig.central.events.makeAsyncIterator()
        var second = rig.central.events.makeAsyncIterator()
        let remote = try await rig.connect()
        let up = CentralEvent.connected(connection: remote.connectionHandle, peripheral: remote.address)
        #expect(await first.next() == up)
        #expect(await second.next() == up)
        _ = try await remote.disconnect()
        let down = CentralEvent.disconnected(connection: remote.connectionHandle, reason: .localHostTerminated)
        #expect(await first.next() == down)
        #expect(await second.next() == down)
        await rig.close()
    }

    /// No restoration: after `close` the peripheral sees its link dropped, and a central opened
    /// afresh (on another controller of the radio) connects again by address.
    func cmRestoreState() async throws {
        let radio = VirtualRadio(controllers: 3)
        let fake = try await FakePeripheral.start(services: Self.services(Written()), name: "restore", radio: radio)
        let before = try await Central.open(fake.centralTransport(1))
        let address = try await before.find(ScanFilter(nameContains: "restore"), timeout: .seconds(5)).address
        var events = fake.peripheral.events.makeAsyncIterator()
        _ = try await before.connect(to: address)
        _ = try await Self.connection(&events)
        await before.close()
        #expect(await Self.next(&events) { if case .disconnected = $0 { return true } else { return nil } } == true)
        let after = try await Central.open(fake.centralTransport(2))
        _ = try await after.find(ScanFilter(nameContains: "restore"), timeout: .seconds(5))  // advertising again
        let remote = try await after.connect(to: address)
        #expect(remote.address == address)
        await after.close()
        await fake.close()
    }

    /// LE Extended Advertising is bit 12 of the LE features (Core v5.4 Vol 6 Part B 4.6, Table
    /// 4.10); the controller reports what the virtual controller declares.
    func cmSupports() async throws {
        let radio = VirtualRadio(controllers: 1)
        let central = try await Central.open(radio.transport(0))
        #expect(LEFeatures.leExtendedAdvertising.rawValue == 1 << 12)
        #expect(central.controller.hasLEFeature(bit: 12) == VirtualController.features.contains(.leExtendedAdvertising))
        #expect(central.controller.leFeatures == VirtualController.features.rawValue)
        await central.close()
    }

    // MARK: CBPeripheral

    func pIdentifier() async throws {
        let rig = try await Rig.start()
        var events = rig.central.events.makeAsyncIterator()
        let remote = try await rig.connect()
        #expect(remote.address == (await rig.peripheral.address))
        #expect(await events.next() == .connected(connection: remote.connectionHandle, peripheral: remote.address))
        await rig.close()
    }

    /// The advertised name, and the Device Name characteristic (0x2A00 in Generic Access, Core
    /// v5.4 Vol 3 Part C 12.1) once connected.
    func pName() async throws {
        let rig = try await Rig.start(name: "named fake")
        let adv = try await rig.find()
        #expect(adv.name == "named fake")
        let remote = try await rig.central.connect(to: adv.address)
        let gap = try #require(try await remote.discoverServices(GATTUUID.genericAccess).first)
        let name = try #require(try await remote.discoverCharacteristics(of: gap, uuid: GATTUUID.deviceName).first)
        #expect(try await remote.read(name) == Array("named fake".utf8))
        await rig.close()
    }

    func pState() async throws {
        let rig = try await Rig.start()
        var events = rig.peripheral.events.makeAsyncIterator()
        let remote = try await rig.connect()
        #expect(remote.disconnectReason == nil)
        let connection = try await Self.connection(&events)
        _ = try await rig.peripheral.disconnect(connection: connection, reason: .remoteUserTerminated)
        // The central is told the reason the peripheral gave (Core v5.4 Vol 4 Part E 7.1.6).
        #expect(await remote.disconnected() == .remoteUserTerminated)
        #expect(remote.disconnectReason == .remoteUserTerminated)
        await rig.close()
    }

    /// Primary services only (Discover All Primary Services, Core v5.4 Vol 3 Part G 4.4.1): the
    /// server's 1800 and 1801, then the table's primary ones; the secondary 0x180F is not among them.
    func pDiscoverServices() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let all = try await remote.discoverServices()
        #expect(all.map(\.uuid) == [GATTUUID.genericAccess, GATTUUID.genericAttribute, Self.heartRate, Self.custom])
        #expect(try await remote.discoverServices(Self.heartRate).map(\.uuid) == [Self.heartRate])
        await rig.close()
    }

    func pDiscoverIncluded() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let tree = try #require(try await remote.discoverAll().first { $0.service.uuid == Self.custom })
        #expect(tree.includedServices.map(\.uuid) == [Self.battery])
        #expect(tree.includedServices.first?.primary == false)
        await rig.close()
    }

    /// The characteristics in declaration order with the declared properties.
    func pDiscoverCharacteristics() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let service = try #require(try await remote.discoverServices(Self.heartRate).first)
        let chars = try await remote.discoverCharacteristics(of: service)
        #expect(chars.map(\.uuid) == [Self.bodySensorLocation, Self.measurement])
        #expect(chars.map(\.properties) == [[.read], [.notify]])
        #expect(chars.allSatisfy { $0.valueHandle == $0.declarationHandle + 1 })  // Core v5.4 Vol 3 Part G 3.3
        await rig.close()
    }

    /// The declared 2901, and the CCCD the server adds for a notify characteristic (Core v5.4
    /// Vol 3 Part G 3.3.1.1, 3.3.3.3).
    func pDiscoverDescriptors() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let service = try #require(try await remote.discoverServices(Self.heartRate).first)
        let chars = try await remote.discoverCharacteristics(of: service)
        #expect(try await remote.discoverDescriptors(of: chars[0]).map(\.uuid) == [GATTUUID.characteristicUserDescription])
        #expect(try await remote.discoverDescriptors(of: chars[1]).map(\.uuid) == [GATTUUID.clientCharacteristicConfiguration])
        await rig.close()
    }

    /// The whole declared table at once.
    func pServices() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let tree = try await remote.discoverAll()
        let declared = Self.services(Written())
        for s in declared where s.primary {
            let t = try #require(tree.first { $0.service.uuid == s.uuid })
            #expect(t.characteristics.map(\.characteristic.uuid) == s.characteristics.map(\.uuid))
            #expect(t.characteristics.map(\.characteristic.properties) == s.characteristics.map(\.properties))
        }
        await rig.close()
    }

    /// The peripheral replaces its table; discovering again finds the new one.
    func pDidModifyServices() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        #expect(try await remote.discoverServices(0x1811).isEmpty)
        await rig.peripheral.server.update(services: [GATTService(uuid: 0x1811, characteristics: [
            GATTCharacteristic(uuid: 0x2A47, properties: [.read], value: [0xFF]),
        ])])
        let added = try #require(try await remote.discoverServices(0x1811).first)
        let c = try #require(try await remote.discoverCharacteristics(of: added).first)
        #expect(try await remote.read(c) == [0xFF])
        #expect(try await remote.discoverServices(Self.heartRate).isEmpty)
        await rig.close()
    }

    /// A short value, and a 300-octet one longer than ATT_MTU − 1 that takes Read Blob (Core
    /// v5.4 Vol 3 Part G 4.8.3), both as declared.
    func pRead() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        #expect(try await remote.read(try await rig.characteristic(remote, Self.bodySensorLocation)) == [0x01])
        #expect(try await remote.read(try await rig.characteristic(remote, Self.long)) == Self.longValue)
        await rig.close()
    }

    func pReadDescriptor() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let d = try #require(try await rig.descriptors(remote, Self.bodySensorLocation).first)
        #expect(try await remote.read(handle: d.handle) == Array("location".utf8))
        await rig.close()
    }

    /// A write the peer confirmed replaces the stored value, as the peripheral reports.
    func pWrite() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.greeting)
        try await remote.write(Array("hi".utf8), to: c, type: .withResponse)
        #expect(rig.peripheral.server.value(of: Self.greeting) == Array("hi".utf8))
        #expect(try await remote.read(c) == Array("hi".utf8))
        await rig.close()
    }

    func pWriteWithoutResponse() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.greeting)
        var events = rig.peripheral.events.makeAsyncIterator()
        try await remote.write([0x01, 0x02], to: c, type: .withoutResponse)
        let value = await Self.next(&events) { e -> [UInt8]? in
            if case .wrote(_, Self.greeting, let v) = e { return v } else { return nil }
        }
        #expect(value == [0x01, 0x02])
        await rig.close()
    }

    func pWriteDescriptor() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let d = try #require(try await rig.descriptors(remote, Self.greeting).first { $0.uuid == GATTUUID.characteristicUserDescription })
        try await remote.write(Array("salut".utf8), handle: d.handle)
        #expect(try await remote.read(handle: d.handle) == Array("salut".utf8))
        await rig.close()
    }

    /// 512 with a response (Core v5.4 Vol 3 Part F 3.2.9); ATT_MTU − 3 without (3.4.5.3), 20
    /// at the default ATT_MTU of 23 (3.2.8) when no MTU was exchanged.
    func pMaximumWriteLength() async throws {
        var noExchange = StackOptions()
        noExchange.mtuOnConnect = nil
        let rig = try await Rig.start(central: noExchange)
        let remote = try await rig.connect()
        #expect(remote.mtu == 23)
        #expect(try await remote.maximumWriteValueLength(for: .withResponse) == 512)
        #expect(try await remote.maximumWriteValueLength(for: .withoutResponse) == 20)
        let mtu = try await remote.exchangeMTU(247)
        #expect(try await remote.maximumWriteValueLength(for: .withoutResponse) == mtu - 3)
        await rig.close()
    }

    /// Offered from the stack's executor (so nothing drains in between), the link's queue takes
    /// commands until it refuses one; `canSendWriteWithoutResponse` is then false, the central's
    /// events report ready once it drained, and the peripheral receives every command taken, in
    /// order. The awaiting form delivers in order too.
    func pCanSendWriteWithoutResponse() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.greeting)
        var peripheralEvents = rig.peripheral.events.makeAsyncIterator()
        var centralEvents = rig.central.events.makeAsyncIterator()
        #expect(remote.canSendWriteWithoutResponse)
        let (taken, full) = try await withTaskExecutorPreference(rig.central.executor.taskExecutor) {
            var taken = 0
            while taken < 10_000, try remote.sendWriteWithoutResponse([UInt8(taken & 0xFF), UInt8(taken >> 8)], to: c) { taken += 1 }
            return (taken, remote.canSendWriteWithoutResponse == false)
        }
        #expect(taken > 0 && taken < 10_000 && full)
        var ready = false
        while !ready, let e = await centralEvents.next() {
            if e == .readyToSendWriteWithoutResponse(connection: remote.connectionHandle) { ready = true }
        }
        #expect(ready && remote.canSendWriteWithoutResponse)
        func received(_ count: Int) async -> [[UInt8]] {
            var got: [[UInt8]] = []
            while got.count < count, let e = await peripheralEvents.next() {
                if case .wrote(_, Self.greeting, let v) = e { got.append(v) }
            }
            return got
        }
        func values(_ range: Range<Int>) -> [[UInt8]] { range.map { (i: Int) -> [UInt8] in [UInt8(i & 0xFF), UInt8(i >> 8)] } }
        #expect(await received(taken) == values(0..<taken))
        // The awaiting form, once the queue is empty.
        for i in taken..<(taken + 50) { try await remote.write([UInt8(i & 0xFF), UInt8(i >> 8)], to: c, type: .withoutResponse) }
        #expect(await received(50) == values(taken..<(taken + 50)))
        await rig.close()
    }

    /// Subscribed when `notifications(for:)` returns (the peripheral saw the CCCD write); the
    /// peripheral's values arrive as the stream's elements.
    func pNotify() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.measurement)
        let values = try await remote.notifications(for: c)
        #expect(rig.peripheral.subscribers(of: Self.measurement).count == 1)
        #expect(try await rig.peripheral.notify([0x00, 72], for: Self.measurement).count == 1)
        #expect(try await rig.peripheral.notify([0x00, 73], for: Self.measurement).count == 1)
        let got = try await { () async throws -> [[UInt8]] in
            var got: [[UInt8]] = []
            for try await v in values {
                got.append(v)
                if got.count == 2 { break }
            }
            return got
        }()
        #expect(got == [[0x00, 72], [0x00, 73]])
        await rig.close()
    }

    /// A characteristic that only indicates is subscribed for indications (CCCD bit 1, Core
    /// v5.4 Vol 3 Part G 3.3.3.3), and each indication is confirmed.
    func pIndicate() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.alarm)
        var events = rig.peripheral.events.makeAsyncIterator()
        let values = try await remote.notifications(for: c)
        let indications = await Self.next(&events) { e -> Bool? in
            if case .subscribed(_, Self.alarm, let indications) = e { return indications } else { return nil }
        }
        #expect(indications == true)
        let consumer = Task { try await { () async throws -> [UInt8]? in
            for try await v in values { return v }
            return nil
        }() }
        let confirmed = try await rig.peripheral.indicate([0x05], for: Self.alarm)
        #expect(confirmed.count == 1)
        #expect(try await consumer.value == [0x05])
        await rig.close()
    }

    func pStopNotify() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.measurement)
        let subscription = try await remote.notifications(for: c)
        #expect(rig.peripheral.subscribers(of: Self.measurement).count == 1)
        try await remote.stopNotifications(for: c)
        #expect(rig.peripheral.subscribers(of: Self.measurement).isEmpty)
        withExtendedLifetime(subscription) {}
        await rig.close()
    }

    func pIsNotifying() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.measurement)
        #expect(await remote.isNotifying(c) == false)
        let subscription = try await remote.notifications(for: c)
        #expect(await remote.isNotifying(c))
        try await remote.stopNotifications(for: c)
        #expect(await remote.isNotifying(c) == false)
        withExtendedLifetime(subscription) {}
        await rig.close()
    }

    /// HCI Read RSSI gives dBm in −127...20 (Core v5.4 Vol 4 Part E 7.5.4).
    func pReadRSSI() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        #expect((-127...20).contains(try await remote.readRSSI()))
        await rig.close()
    }

    /// A channel to a published SPSM carries an SDU each way; each side sees the other's MTU
    /// (LE Credit Based Connection Request/Response, Core v5.4 Vol 3 Part A 4.22, 4.23).
    func pOpenL2CAP() async throws {
        let rig = try await Rig.start()
        let published = try await rig.peripheral.publishL2CAPChannel(mtu: 300)
        let remote = try await rig.connect()
        let ours = try await remote.openL2CAPChannel(psm: published.psm, mtu: 400)
        let theirs = try await { () async throws -> L2CAPChannel? in
            for await ch in published.channels { return ch }
            return nil
        }()
        let channel = try #require(theirs)
        #expect(ours.psm == published.psm && ours.peerMTU == 300 && channel.peerMTU == 400)
        try await ours.send(Array(repeating: 0x5A, count: 300))
        #expect(try await channel.receive() == Array(repeating: 0x5A, count: 300))
        try await channel.send([1, 2, 3])
        #expect(try await ours.receive() == [1, 2, 3])
        await rig.close()
    }

    // MARK: CBPeripheralManager

    /// The table given to `open` is what the central discovers, service by service.
    func pmInitAdd() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let tree = try await remote.discoverAll()
        let own: Set<BluetoothUUID> = [GATTUUID.genericAccess, GATTUUID.genericAttribute]
        #expect(tree.map(\.service.uuid).filter { !own.contains($0) } == Self.services(Written()).filter(\.primary).map(\.uuid))
        let custom = try #require(tree.first { $0.service.uuid == Self.custom })
        #expect(custom.characteristics.map(\.characteristic.uuid)
                == Self.services(Written()).first { $0.uuid == Self.custom }?.characteristics.map(\.uuid))
        await rig.close()
    }

    /// After `close` the central's link is down and nothing advertises any more.
    func pmRestoreState() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        await rig.fake.close()
        // The peripheral's HCI Disconnect reached the central with its reason (Core v5.4 Vol 4
        // Part E 7.1.6), and its advertising is off.
        #expect(await remote.disconnected() == .remoteUserTerminated)
        await #expect(throws: BLEError.self) { _ = try await rig.find(timeout: .milliseconds(500)) }
        await rig.central.close()
    }

    func pmState() async throws {
        let radio = VirtualRadio(controllers: 1)
        let peripheral = try await Peripheral.open(radio.transport(0), services: [], name: "state")
        radio.transport(0).close()
        let failure = try await { () async throws -> String? in
            for await e in peripheral.events { if case .failure(let why) = e { return why } }
            return nil
        }()
        #expect(failure != nil)
        await peripheral.close()
    }

    /// Removing every service but one: the central discovers only what is left.
    func pmRemove() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let declared = Self.services(Written())
        await rig.peripheral.server.update(services: [declared[0]])
        #expect(try await remote.discoverServices().map(\.uuid) == [GATTUUID.genericAccess, GATTUUID.genericAttribute, Self.heartRate])
        await rig.close()
    }

    /// A secondary service is not found by primary service discovery, only as an included one
    /// (Core v5.4 Vol 3 Part G 4.4.1, 4.5.1), and its characteristics are served.
    func pmMutableService() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        #expect(try await remote.discoverServices(Self.battery).isEmpty)
        let tree = try #require(try await remote.discoverAll().first { $0.service.uuid == Self.custom })
        let battery = try #require(tree.includedServices.first)
        let level = try #require(try await remote.discoverCharacteristics(of: battery, uuid: Self.batteryLevel).first)
        #expect(try await remote.read(level) == [100])
        await rig.close()
    }

    /// A stored value is read as declared; an `asyncRead:` value is made on demand.
    func pmMutableCharacteristic() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        #expect(try await remote.read(try await rig.characteristic(remote, Self.greeting)) == Array("hello".utf8))
        #expect(try await remote.read(try await rig.characteristic(remote, Self.deferred)) == [0x2A])
        await rig.close()
    }

    /// A Characteristic Presentation Format descriptor (0x2904, Core v5.4 Vol 3 Part G 3.3.3.5)
    /// read back as declared.
    func pmMutableDescriptor() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let d = try #require(try await rig.descriptors(remote, Self.formatted).first { $0.uuid == 0x2904 })
        #expect(try await remote.read(handle: d.handle) == Self.presentationFormat)
        await rig.close()
    }

    /// A read-only permission refuses a write with Write Not Permitted (0x03, Core v5.4 Vol 3
    /// Part F 3.4.1.1), whatever the properties say.
    func pmPermissions() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.readOnlyPermission)
        do {
            try await remote.write([1], to: c)
            Issue.record("the write was accepted")
        } catch BLEError.att(let e) {
            #expect(e.code == .writeNotPermitted && e.code.rawValue == 0x03)
        }
        #expect(try await remote.read(c) == [7])
        await rig.close()
    }

    /// On the air, the characteristic is plain notify (properties 0x10, Core v5.4 Vol 3 Part G
    /// 3.3.1.1); its CCCD needs encryption, so subscribing on a plain link is refused with
    /// Insufficient Authentication (0x05: no key yet, Vol 3 Part C 10.3.1) when the central does
    /// not secure links by itself, and succeeds on an encrypted link once it does.
    func pmEncryptionRequired() async throws {
        var manual = StackOptions()
        manual.security.automaticSecurity = false
        let rig = try await Rig.start(central: manual)
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.secureNotify)
        #expect(c.properties.rawValue == 0x10)
        do {
            _ = try await remote.notifications(for: c)
            Issue.record("subscribed on an unencrypted link")
        } catch BLEError.att(let e) {
            #expect(e.code == .insufficientAuthentication && e.code.rawValue == 0x05, "\(e)")
        }
        #expect(await remote.security.encrypted == false)
        try await remote.pair()
        #expect(await remote.security.encrypted)
        let subscription = try await remote.notifications(for: c)
        #expect(rig.peripheral.subscribers(of: Self.secureNotify).count == 1)
        withExtendedLifetime(subscription) {}
        await rig.close()
    }

    func pmStartAdvertising() async throws {
        let radio = VirtualRadio(controllers: 2)
        let peripheral = try await Peripheral.open(radio.transport(0), services: [], name: "start")
        #expect(await peripheral.isAdvertising == false)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "start", serviceUUIDs: [Self.heartRate]))
        #expect(await peripheral.isAdvertising)
        let central = try await Central.open(radio.transport(1))
        let a = try await central.find(ScanFilter(nameContains: "start"), timeout: .seconds(5))
        #expect(a.name == "start" && a.services == [Self.heartRate])
        await central.close()
        await peripheral.close()
    }

    func pmStopAdvertising() async throws {
        let rig = try await Rig.start()
        #expect(await rig.peripheral.isAdvertising)
        try await rig.peripheral.stopAdvertising()
        #expect(await rig.peripheral.isAdvertising == false)
        await #expect(throws: BLEError.self) { _ = try await rig.find(timeout: .milliseconds(500)) }
        await rig.close()
    }

    /// The asynchronous handler's value is the answer, and the read is reported.
    func pmDidReceiveRead() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.deferred)
        var events = rig.peripheral.events.makeAsyncIterator()
        #expect(try await remote.read(c) == [0x2A])
        #expect(await Self.next(&events) { e -> Bool? in
            if case .read(_, Self.deferred) = e { return true } else { return nil }
        } == true)
        await rig.close()
    }

    /// A handler that throws an application error (0x80 + 1, Core v5.4 Vol 3 Part F 3.4.1.1):
    /// the central gets that code.
    func pmRespondError() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.refusing)
        do {
            _ = try await remote.read(c)
            Issue.record("the read was answered")
        } catch BLEError.att(let e) {
            #expect(e.code.rawValue == 0x81 && e.code.isApplicationError)
        }
        await rig.close()
    }

    func pmDidReceiveWrite() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        try await remote.write([9, 8, 7], to: try await rig.characteristic(remote, Self.deferred))
        #expect(rig.written.values.withLock { $0 } == [[9, 8, 7]])
        var events = rig.peripheral.events.makeAsyncIterator()
        try await remote.write([0x41], to: try await rig.characteristic(remote, Self.greeting))
        let value = await Self.next(&events) { e -> [UInt8]? in
            if case .wrote(_, Self.greeting, let v) = e { return v } else { return nil }
        }
        #expect(value == [0x41])
        await rig.close()
    }

    func pmDidSubscribe() async throws {
        let rig = try await Rig.start()
        var events = rig.peripheral.events.makeAsyncIterator()
        let remote = try await rig.connect()
        let connection = try await Self.connection(&events)
        let subscription = try await remote.notifications(for: try await rig.characteristic(remote, Self.measurement))
        let subscribed = await Self.next(&events) { e -> PeripheralEvent? in
            if case .subscribed = e { return e } else { return nil }
        }
        #expect(subscribed == .subscribed(connection: connection, characteristic: Self.measurement, indications: false))
        #expect(rig.peripheral.subscribers(of: Self.measurement) == [connection])
        withExtendedLifetime(subscription) {}
        await rig.close()
    }

    func pmDidUnsubscribe() async throws {
        let rig = try await Rig.start()
        var events = rig.peripheral.events.makeAsyncIterator()
        let remote = try await rig.connect()
        let connection = try await Self.connection(&events)
        let c = try await rig.characteristic(remote, Self.measurement)
        let subscription = try await remote.notifications(for: c)
        try await remote.stopNotifications(for: c)
        let unsubscribed = await Self.next(&events) { e -> PeripheralEvent? in
            if case .unsubscribed = e { return e } else { return nil }
        }
        #expect(unsubscribed == .unsubscribed(connection: connection, characteristic: Self.measurement))
        withExtendedLifetime(subscription) {}
        await rig.close()
    }

    func pmUpdateValue() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let values = try await remote.notifications(for: try await rig.characteristic(remote, Self.measurement))
        #expect(try rig.peripheral.updateValue([0x00, 80], for: Self.measurement))
        let got = try await { () async throws -> [UInt8]? in
            for try await v in values { return v }
            return nil
        }()
        #expect(got == [0x00, 80])
        await rig.close()
    }

    /// Offered from the stack's executor (so nothing drains in between), the queue takes
    /// `updateQueueLimit` values, refuses the next, then reports ready.
    func pmReadyToUpdate() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let subscription = try await remote.notifications(for: try await rig.characteristic(remote, Self.measurement), bufferLimit: 4096)
        var events = rig.peripheral.events.makeAsyncIterator()
        let peripheral = rig.peripheral
        let limit = Peripheral.updateQueueLimit
        let taken = try await withTaskExecutorPreference(peripheral.executor.taskExecutor) {
            var taken = 0
            while taken <= limit, try peripheral.updateValue([UInt8(taken & 0xFF)], for: Self.measurement) { taken += 1 }
            return taken
        }
        #expect(taken == limit)
        #expect(await Self.next(&events) { $0 == .readyToUpdateSubscribers ? true : nil } == true)
        #expect(peripheral.canUpdateValue)
        withExtendedLifetime(subscription) {}
        await rig.close()
    }

    /// ATT_MTU − 3 (Core v5.4 Vol 3 Part F 3.4.7.1) of the link both sides agree on.
    func pmMaximumUpdateLength() async throws {
        let rig = try await Rig.start()
        var events = rig.peripheral.events.makeAsyncIterator()
        let remote = try await rig.connect()
        let connection = try await Self.connection(&events)
        #expect(await rig.peripheral.maximumUpdateValueLength(for: connection) == remote.mtu - 3)
        await rig.close()
    }

    /// The central's address in `connected` is its identity address (no privacy here).
    func pmCentral() async throws {
        let rig = try await Rig.start()
        var events = rig.peripheral.events.makeAsyncIterator()
        let remote = try await rig.connect()
        let central = await Self.next(&events) { e -> DeviceAddress? in
            if case .connected(_, let a) = e { return a } else { return nil }
        }
        #expect(central == rig.central.identityAddress)
        _ = remote
        await rig.close()
    }

    /// The request is accepted by the central (the default policy accepts parameters in the
    /// spec's ranges, Core v5.4 Vol 3 Part A 4.20) and the new parameters are reported.
    func pmConnectionLatency() async throws {
        let rig = try await Rig.start()
        var events = rig.peripheral.events.makeAsyncIterator()
        _ = try await rig.connect()
        let connection = try await Self.connection(&events)
        #expect(try await rig.peripheral.requestConnectionParameters(connection: connection, intervalMin: 40, intervalMax: 56,
                                                                     latency: 4, supervisionTimeout: 600))
        let p = try #require(await Self.next(&events) { e -> ConnectionParameters? in
            if case .parametersUpdated(_, let p) = e { return p } else { return nil }
        })
        #expect((40...56).contains(p.interval) && p.latency == 4 && p.supervisionTimeout == 600)
        await rig.close()
    }

    /// A dynamic SPSM is in 0x0080–0x00FF (Core v5.4 Vol 3 Part A 4.22), and a channel the
    /// central opens arrives on `channels`.
    func pmPublishL2CAP() async throws {
        let rig = try await Rig.start()
        let published = try await rig.peripheral.publishL2CAPChannel()
        #expect((0x0080...0x00FF).contains(published.psm))
        let remote = try await rig.connect()
        let ours = try await remote.openL2CAPChannel(psm: published.psm)
        let theirs = try await { () async throws -> L2CAPChannel? in
            for await ch in published.channels { return ch }
            return nil
        }()
        #expect(theirs?.psm == published.psm && theirs?.remoteCID == ours.localCID)
        await rig.close()
    }

    /// After unpublishing, a connection request is refused: LE_PSM not supported (0x0002,
    /// Core v5.4 Vol 3 Part A 4.23).
    func pmUnpublishL2CAP() async throws {
        let rig = try await Rig.start()
        let published = try await rig.peripheral.publishL2CAPChannel()
        await rig.peripheral.unpublishL2CAPChannel(psm: published.psm)
        let remote = try await rig.connect()
        do {
            _ = try await remote.openL2CAPChannel(psm: published.psm)
            Issue.record("a channel opened to an unpublished SPSM")
        } catch let e as BLEError {
            guard case .refused = e else { Issue.record("not refused: \(e)"); await rig.close(); return }
        }
        await rig.close()
    }

    // MARK: Values and errors

    /// A 16-bit UUID is the Bluetooth Base UUID with it in bits 96–111 (Core v5.4 Vol 3 Part B 2.5.1).
    func tUUID() throws {
        let short = try #require(BluetoothUUID(string: "180D"))
        #expect(short == 0x180D && short.uuid16 == 0x180D)
        let full = try #require(BluetoothUUID(string: "0000180D-0000-1000-8000-00805F9B34FB"))
        #expect(full == short)
        #expect(short.uuid128 == [0x00, 0x00, 0x18, 0x0D, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0x80, 0x5F, 0x9B, 0x34, 0xFB])
        #expect(BluetoothUUID(string: "not a uuid") == nil)
    }

    /// The property bits of Core v5.4 Vol 3 Part G 3.3.1.1, Table 3.5, as discovered.
    func tCharacteristicProperties() async throws {
        #expect(GATTCharacteristicProperties.broadcast.rawValue == 0x01)
        #expect(GATTCharacteristicProperties.read.rawValue == 0x02)
        #expect(GATTCharacteristicProperties.writeWithoutResponse.rawValue == 0x04)
        #expect(GATTCharacteristicProperties.write.rawValue == 0x08)
        #expect(GATTCharacteristicProperties.notify.rawValue == 0x10)
        #expect(GATTCharacteristicProperties.indicate.rawValue == 0x20)
        #expect(GATTCharacteristicProperties.authenticatedSignedWrites.rawValue == 0x40)
        #expect(GATTCharacteristicProperties.extendedProperties.rawValue == 0x80)
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        #expect(try await rig.characteristic(remote, Self.greeting).properties.rawValue == 0x02 | 0x08 | 0x04)
        await rig.close()
    }

    /// Reading a write-only characteristic by handle: Read Not Permitted (0x02, Core v5.4 Vol 3
    /// Part F 3.4.1.1), with the request's opcode (Read Request 0x0A) and the handle.
    func tATTError() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.writeOnly)
        do {
            _ = try await remote.read(handle: c.valueHandle)
            Issue.record("a write-only value was read")
        } catch BLEError.att(let e) {
            #expect(e.code == .readNotPermitted && e.code.rawValue == 0x02)
            #expect(e.code.name == "Read Not Permitted")
            #expect(e.requestOpcode.rawValue == 0x0A && e.handle == c.valueHandle)
        }
        await rig.close()
    }

    /// After the link went down, a read throws `disconnected` with the reason of this side's
    /// Disconnection Complete: Connection Terminated by Local Host (0x16, Core v5.4 Vol 4 Part E 7.7.5).
    func tError() async throws {
        let rig = try await Rig.start()
        let remote = try await rig.connect()
        let c = try await rig.characteristic(remote, Self.bodySensorLocation)
        _ = try await remote.disconnect()
        await #expect(throws: BLEError.disconnected(.localHostTerminated)) { _ = try await remote.read(c) }
        await rig.close()
    }
}
