import Foundation
import Testing
import TestSupport
import BLE
import GATT
import ATT
import HCI

/// Issue 6, our GATT client (RemotePeripheral / GATTClient) against Bumble's GATT server
/// (Tools/bumble/peripheral.py) over Bumble's controllers.
@Suite(.serialized, .timeLimit(.minutes(2))) struct GATTClientInteropTests {
    static let custom = "12345678-1234-5678-1234-56789abcdef0"
    static func u(_ n: Int) -> BluetoothUUID { BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef\(n)")! }

    struct Connected {
        let peer: ChildProcess
        let ready: [String: Any]
        let central: Central
        let remote: RemotePeripheral
        let tree: [GATTRemoteServiceTree]
        func characteristic(_ uuid: BluetoothUUID) throws -> GATTRemoteCharacteristic {
            try #require(tree.flatMap(\.characteristics).first { $0.characteristic.uuid == uuid }?.characteristic,
                         "no \(uuid) in the discovered tree")
        }
    }

    /// peripheral.py on controller 1, our Central on controller 0, connected and discovered.
    func connect(_ scope: Scope, name: String, extra: [String] = [], options: StackOptions = Scope.stackOptions) async throws -> Connected {
        let peer = try scope.script("peripheral.py", [
            "--transport", scope.controllers.bumbleTransport(1), "--name", name, "--timeout", "80"] + extra)
        let ready = try await peer.event("ready")
        let central = try await scope.central(on: 0, options: options)
        let adv = try await central.find(ScanFilter(nameContains: name), timeout: .seconds(10))
        let remote = try await central.connect(to: adv.address, timeout: .seconds(10))
        _ = try await peer.event("connected")
        let tree = try await remote.discoverAll()
        return Connected(peer: peer, ready: ready, central: central, remote: remote, tree: tree)
    }

    @Test func discoveryMatchesBumbleHandleMap() async throws {
        try await interop { scope in
            let c = try await connect(scope, name: "interop-disc")
            let database = c.ready["database"] as? [[String: Any]] ?? []
            #expect(database.count == 5, "peripheral.py printed \(database)")
            #expect(c.tree.count == database.count)
            for (ours, theirs) in zip(c.tree, database) {
                #expect(ours.service.uuid == BluetoothUUID(string: theirs["uuid"] as? String ?? ""))
                #expect(Int(ours.service.startHandle) == theirs["start"] as? Int)
                #expect(Int(ours.service.endHandle) == theirs["end"] as? Int)
                let chars = theirs["characteristics"] as? [[String: Any]] ?? []
                #expect(ours.characteristics.count == chars.count, "\(ours.service.uuid)")
                for (oc, tc) in zip(ours.characteristics, chars) {
                    #expect(oc.characteristic.uuid == BluetoothUUID(string: tc["uuid"] as? String ?? ""))
                    #expect(Int(oc.characteristic.declarationHandle) == tc["handle"] as? Int)
                    #expect(Int(oc.characteristic.valueHandle) == tc["valueHandle"] as? Int)
                    #expect(Int(oc.characteristic.properties.rawValue) == tc["properties"] as? Int)
                    let descriptors = tc["descriptors"] as? [[String: Any]] ?? []
                    #expect(oc.descriptors.map { Int($0.handle) } == descriptors.compactMap { $0["handle"] as? Int },
                            "descriptors of \(oc.characteristic.uuid)")
                    #expect(oc.descriptors.map(\.uuid) == descriptors.compactMap { BluetoothUUID(string: $0["uuid"] as? String ?? "") })
                }
            }
            // Discovery by UUID and step by step agrees with discoverAll.
            let hr = try await c.remote.discoverServices(0x180D)
            #expect(hr.map(\.startHandle) == c.tree.filter { $0.service.uuid == 0x180D }.map(\.service.startHandle))
            let customService = try #require(c.tree.first { $0.service.uuid == BluetoothUUID(string: Self.custom) })
            let chars = try await c.remote.discoverCharacteristics(of: customService.service)
            #expect(chars == customService.characteristics.map(\.characteristic))
            let five = try await c.remote.discoverCharacteristics(of: customService.service, uuid: Self.u(5))
            #expect(five.map(\.uuid) == [Self.u(5)])
            #expect(try await c.remote.discoverDescriptors(of: five[0]).map(\.uuid) == [0x2902])
        }
    }

    @Test func readsLongReadsAtMTU23And517() async throws { try await readsLongReadsAtMTU23And517(on: .bumble) }
    func readsLongReadsAtMTU23And517(on kind: ControllerKind) async throws {
        try await interop(on: kind) { scope in
            let c = try await connect(scope, name: "interop-read")
            #expect(await c.remote.mtu == 23)
            #expect(try await c.remote.read(try c.characteristic(0x2A38)) == [0x01])
            #expect(try await c.remote.read(try c.characteristic(0x2A19)) == [0x64])
            #expect(try await c.remote.read(try c.characteristic(0x2A00)) == Array("interop-read".utf8))
            let long = try c.characteristic(Self.u(1))
            #expect(try await c.remote.read(long) == bumbleLongValue)        // Read + 26 Read Blobs
            // From a task preferring the central's executor the Read Request is sent without a
            // hop into the host (`Link.layersNow`); Bumble's server answers the same value, the
            // Read Blobs (Core v5.4 Vol 3 Part G 4.8.3) finishing it.
            let preferring = try await withTaskExecutorPreference(c.central.executor.taskExecutor) {
                (try await c.remote.read(try c.characteristic(0x2A19)), try await c.remote.read(long))
            }
            #expect(preferring.0 == [0x64] && preferring.1 == bumbleLongValue)
            #expect(try await c.remote.exchangeMTU(517) == 517)
            #expect(await c.remote.mtu == 517)
            #expect(try await c.remote.read(long) == bumbleLongValue)        // Read + 1 Read Blob
            #expect(try await c.remote.read(try c.characteristic(Self.u(2))) == Array("read only".utf8))
            #expect(c.peer.all("read").filter { $0["uuid"] as? String == "12345678-1234-5678-1234-56789abcdef1" }.count >= 2)
        }
    }

    @Test func writesLongWritesAndWriteWithoutResponse() async throws {
        try await interop { scope in
            let c = try await connect(scope, name: "interop-write")
            let long = try c.characteristic(Self.u(1))
            try await c.remote.write([0xAB, 0xCD], to: long)
            #expect(try await c.remote.read(long) == [0xAB, 0xCD])
            // Long write at MTU 23: 300 bytes through Prepare Write / Execute Write.
            let big: [UInt8] = (0..<300).map { UInt8(255 - $0 % 256) }
            try await c.remote.write(big, to: long)
            #expect(try await c.remote.read(long) == big)
            let writes = c.peer.all("write").compactMap { $0["value"] as? String }
            #expect(writes.contains(hex(big)), "Bumble's writes: \(writes)")
            // Write Without Response: Bumble applies it; read back.
            try await c.remote.write([0x42, 0x43, 0x44], to: long, type: .withoutResponse)
            _ = try await c.peer.event("write", timeout: .seconds(5)) { $0["value"] as? String == "424344" }
            #expect(try await c.remote.read(long) == [0x42, 0x43, 0x44])
            // A write on def3 (write-only) is accepted.
            try await c.remote.write([0x07], to: try c.characteristic(Self.u(3)))
            _ = try await c.peer.event("write") { $0["uuid"] as? String == "12345678-1234-5678-1234-56789abcdef3" && $0["value"] as? String == "07" }
        }
    }

    /// ATT errors Bumble's server answers, as our client reports them.
    func attError(_ body: () async throws -> Void) async -> ATTError? {
        do { try await body(); return nil } catch BLEError.att(let e) { return e } catch {
            Issue.record("expected BLEError.att, got \(error)")
            return nil
        }
    }

    /// The errors as they are: automatic security off (it is tested below).
    @Test func permissionErrors() async throws {
        var options = Scope.stackOptions
        options.security.automaticSecurity = false
        try await interop { scope in
            let c = try await connect(scope, name: "interop-perm", options: options)
            let noWrite = try c.characteristic(Self.u(2))
            let noRead = try c.characteristic(Self.u(3))
            let encrypted = try c.characteristic(Self.u(4))
            let authenticated = try c.characteristic(Self.u(6))

            // Bumble's handler refuses: the properties say "read", the attribute is writable.
            let e03 = await attError { try await c.remote.write([0x00], handle: noWrite.valueHandle) }
            #expect(e03?.code == .writeNotPermitted)
            #expect(e03?.handle == noWrite.valueHandle)
            // Our API refuses before sending (not readable by its properties), the server too.
            await #expect(throws: BLEError.self) { _ = try await c.remote.read(noRead) }
            let e02 = await attError { _ = try await c.remote.read(handle: noRead.valueHandle) }
            #expect(e02?.code == .readNotPermitted)
            #expect(e02?.handle == noRead.valueHandle)
            let e0F = await attError { _ = try await c.remote.read(encrypted) }
            // Core v5.4 Vol 3 Part F 3.4.4.3 / Table 3.4: the code, the request, the handle in error.
            #expect(e0F == ATTError(.insufficientEncryption, requestOpcode: .readRequest, handle: encrypted.valueHandle))
            let e05 = await attError { _ = try await c.remote.read(authenticated) }
            #expect(e05 == ATTError(.insufficientAuthentication, requestOpcode: .readRequest, handle: authenticated.valueHandle))
            // Invalid handle (past the end of the database) and attribute not found on discovery.
            let e01 = await attError { _ = try await c.remote.read(handle: 0x0F00) }
            #expect(e01 == ATTError(.invalidHandle, requestOpcode: .readRequest, handle: 0x0F00))
            #expect(c.peer.all("refused").count == 2)
            // The link is still fine after the errors.
            #expect(try await c.remote.read(try c.characteristic(0x2A38)) == [0x01])
        }
    }

    /// Issue 12: our central reads Bumble's encryption-required characteristic; Bumble answers
    /// Insufficient Encryption / Authentication, our central pairs (Just Works: both
    /// NoInputNoOutput, Core Vol 3 Part H 2.3.5.1) and retries once, as CoreBluetooth does.
    @Test func autoPairingOnInsufficientEncryption() async throws {
        try await interop { scope in
            let c = try await connect(scope, name: "interop-pair")
            let encrypted = try c.characteristic(Self.u(4))
            #expect(try await c.remote.read(encrypted) == Array("secret".utf8), "peripheral.py's value of ...def4")
            let security = await c.remote.security
            #expect(security.encrypted && !security.authenticated && security.keySize == 16)
            #expect(await c.remote.lastPairing?.method == .justWorks)
            #expect(await c.remote.lastPairing?.secureConnections == true, "Bumble's PairingConfig defaults to sc=True")
            // (Bumble 0.0.236 marks any paired LE link "authenticated", so its ...def6 check is no
            // evidence of MITM either way; our side says unauthenticated above.)
        }
    }

    @Test func notificationsIndicationsAndUnsubscribe() async throws { try await notificationsIndicationsAndUnsubscribe(on: .bumble) }
    func notificationsIndicationsAndUnsubscribe(on kind: ControllerKind) async throws {
        try await interop(on: kind) { scope in
            let c = try await connect(scope, name: "interop-notify", extra: ["--notify-count", "3", "--notify-interval", "0.05"])
            let heartRate = try c.characteristic(0x2A37)
            let values = try await c.remote.notifications(for: heartRate)
            let got = try await withTimeout(.seconds(10), "3 notifications") {
                var got: [[UInt8]] = []
                for try await v in values {
                    got.append(v)
                    if got.count == 3 { break }
                }
                return got
            }
            #expect(got == [[0x00, 60], [0x00, 61], [0x00, 62]])
            let subscribed = try await c.peer.event("subscribed") { $0["uuid"] as? String == "2a37" }
            #expect(subscribed["notify"] as? Bool == true && subscribed["indicate"] as? Bool == false)
            // Bumble logs "notified" after its send returns, which can be after we have the value.
            _ = try await c.peer.event("notified", index: 2)
            #expect(c.peer.all("notified").count == 3)
            try await c.remote.stopNotifications(for: heartRate)
            _ = try await c.peer.event("unsubscribed") { $0["uuid"] as? String == "2a37" }

            // Indications (def5 can only indicate): Bumble prints "indicated" once confirmed.
            let indicate = try c.characteristic(Self.u(5))
            let indications = try await c.remote.notifications(for: indicate)
            let ind = try await withTimeout(.seconds(10), "3 indications") {
                var got: [[UInt8]] = []
                for try await v in indications {
                    got.append(v)
                    if got.count == 3 { break }
                }
                return got
            }
            #expect(ind == [[1], [2], [3]])
            let sub5 = try await c.peer.event("subscribed") { $0["uuid"] as? String == "12345678-1234-5678-1234-56789abcdef5" }
            #expect(sub5["indicate"] as? Bool == true && sub5["notify"] as? Bool == false)
            let third = try await c.peer.event("indicated", index: 2)
            #expect(third["confirmed"] as? Bool == true)
            #expect(c.peer.all("indicationFailed").isEmpty)
            try await c.remote.stopNotifications(for: indicate)
            _ = try await c.peer.event("unsubscribed") { $0["uuid"] as? String == "12345678-1234-5678-1234-56789abcdef5" }
        }
    }
}

extension GATTClientInteropTests {
    /// Over Rootcanal (`make rootcanal-test`): long reads fragmented over its 27-octet ACL
    /// buffers at MTU 23 and 517, notifications and confirmed indications.
    @Suite(.rootcanal) struct OverRootcanal {
        @Test func readsLongReadsAtMTU23And517() async throws {
            try await GATTClientInteropTests().readsLongReadsAtMTU23And517(on: .rootcanal)
        }
        @Test func notificationsIndicationsAndUnsubscribe() async throws {
            try await GATTClientInteropTests().notificationsIndicationsAndUnsubscribe(on: .rootcanal)
        }
    }
}
