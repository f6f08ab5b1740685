import Foundation
import Testing
import TestSupport
import BLE
import GATT
import ATT
import HCI

/// Issue 6, Bumble's GATT client (Tools/bumble/gatt_client_check.py) against our GATT server
/// (`Peripheral`) over Bumble's controllers, and two centrals subscribed at once.
@Suite(.serialized, .timeLimit(.minutes(2))) struct GATTServerInteropTests {
    static func u(_ n: Int) -> String { String(format: "0000aa%02x-0000-1000-8000-00805f9b34fb", n) }
    static let serviceUUID = "a0b0c0d0-0000-4000-8000-000000000001"
    static let long = "a0b0c0d0-0000-4000-8000-000000000002"
    static let writable = "aa01"
    static let noRead = "aa02"
    static let noWrite = "aa03"
    static let encrypted = "aa04"
    static let notify = "aa05"
    static let indicate = "aa06"
    static let longValue: [UInt8] = (0..<600).map { UInt8(($0 * 7) % 251) }

    static var services: [GATTService] {
        [GATTService(uuid: BluetoothUUID(string: serviceUUID)!, characteristics: [
            GATTCharacteristic(uuid: BluetoothUUID(string: long)!, properties: [.read, .write], value: longValue,
                               maximumLength: 1024),
            GATTCharacteristic(uuid: 0xAA01, properties: [.read, .write, .writeWithoutResponse], value: Array("hello".utf8),
                               descriptors: [.userDescription("writable")]),
            GATTCharacteristic(uuid: 0xAA02, properties: [.write], value: [0x01]),
            GATTCharacteristic(uuid: 0xAA03, properties: [.read], value: Array("fixed".utf8)),
            GATTCharacteristic(uuid: 0xAA04, properties: [.read, .write],
                               permissions: [.readable, .writable, .readEncryptionRequired, .writeEncryptionRequired],
                               value: Array("secret".utf8)),
            GATTCharacteristic(uuid: 0xAA05, properties: [.notify]),
            GATTCharacteristic(uuid: 0xAA06, properties: [.indicate]),
        ])]
    }

    func errors(_ p: ChildProcess, _ uuid: String) -> [String] {
        p.all("error").filter { $0["uuid"] as? String == uuid }.compactMap { $0["att"] as? String }
    }

    @Test func bumbleClientAgainstOurServer() async throws {
        try await interop { scope in
            let (peripheral, events) = try await scope.peripheral(on: 0, services: Self.services, name: "interop-srv")
            try await peripheral.startAdvertising(AdvertisingOptions(name: "interop-srv"))
            let longWrite: [UInt8] = (0..<700).map { UInt8($0 % 256) }
            let bumble = try scope.script("gatt_client_check.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "interop-srv", "--read-all",
                "--write", "aa01=0102030405", "--read", "aa01",
                "--write-without-response", "aa01=a1a2", "--sleep", "0.3", "--read", "aa01",
                "--write", "\(Self.long)=\(hex(longWrite))", "--read", Self.long,
                "--write", "aa03=00", "--read", "aa02", "--write", "aa04=00",
                "--subscribe", "aa05", "--wait", "aa05=3",
                "--subscribe", "aa06", "--wait", "aa06=2",
                "--unsubscribe", "aa05", "--unsubscribe", "aa06", "--sleep", "0.5",
                "--duration", "15", "--timeout", "60"])

            // The tree, with everything readable read at MTU 23 (the 600-byte value: long read).
            let tree = JSONTree(try await bumble.event("gatt", timeout: .seconds(20)))
            #expect(tree.serviceUUIDs == ["1800", "1801", Self.serviceUUID])
            #expect(tree.characteristics(of: Self.serviceUUID).compactMap { $0["uuid"] as? String }
                    == [Self.long, "aa01", "aa02", "aa03", "aa04", "aa05", "aa06"])
            #expect(tree.characteristic(Self.long)?["value"] as? String == hex(Self.longValue))
            #expect(tree.characteristic("aa03")?["value"] as? String == hex(Array("fixed".utf8)))
            #expect(tree.characteristic("aa01")?["properties"] as? [String] == ["read", "writeWithoutResponse", "write"])
            let aa01Descriptors = tree.characteristic("aa01")?["descriptors"] as? [[String: Any]] ?? []
            #expect(aa01Descriptors.first?["value"] as? String == hex(Array("writable".utf8)))
            let cccds = (tree.characteristic("aa05")?["descriptors"] as? [[String: Any]] ?? []).compactMap { $0["uuid"] as? String }
            #expect(cccds == ["2902"])
            // Encryption required on a plain link with no bond: Insufficient Authentication, so the
            // client pairs (Core Vol 3 Part C 10.3.1; 0x0F only when the server holds a key for it).
            #expect(errors(bumble, "aa04").first == "0x05", "reading aa04 (encryption required) on a plain link")

            // Subscriptions: our side sends, and sees the indication confirmed by Bumble.
            let notifyHandle = try await subscriber(peripheral, 0xAA05)
            var reached: [[UInt16]] = []
            for i in 0..<3 { reached.append(try await peripheral.notify([0x10, UInt8(i)], for: 0xAA05)) }
            #expect(reached == [[notifyHandle], [notifyHandle], [notifyHandle]])
            // (The server's view: Peripheral.subscribers(of:) only counts notification
            // subscribers, checked separately below.)
            try await peripheral.until("Bumble enabling indications on aa06") { p in
                p.server.subscribers(of: 0xAA06, indications: true).count == 1
            }
            let indicateHandle = peripheral.server.subscribers(of: 0xAA06, indications: true)[0].id
            #expect(indicateHandle == notifyHandle)
            // Peripheral.subscribers(of:) is documented as "connection handles currently
            // subscribed": an indication subscriber is one.
            #expect(peripheral.subscribers(of: 0xAA06) == [indicateHandle],
                    "Peripheral.subscribers(of:) leaves out indication subscribers")
            #expect(try await peripheral.indicate([0x20, 0x01], for: 0xAA06) == [indicateHandle])
            #expect(try await peripheral.indicate([0x20, 0x02], for: 0xAA06) == [indicateHandle])

            let disconnected = try await bumble.event("disconnected", timeout: .seconds(20))
            #expect(disconnected["reason"] as? String == "0x16" || disconnected["reason"] as? String == "0x13",
                    "Bumble's controller reports the reason it was asked to send (0x13) to the initiator")
            // Exit code 1: the refused operations count as failures; never a timeout.
            #expect(try await bumble.exited() == 1, "gatt_client_check.py: \(bumble.output.suffix(10))")

            // Short write + read back; write without response + read back.
            let aa01Reads = bumble.all("read").filter { $0["uuid"] as? String == "aa01" }.compactMap { $0["value"] as? String }
            #expect(aa01Reads == ["0102030405", "a1a2"])
            // Long write (700 bytes > MTU) + long read back.
            #expect(bumble.all("read").first { $0["uuid"] as? String == Self.long }?["value"] as? String == hex(longWrite))
            #expect(peripheral.server.value(of: BluetoothUUID(string: Self.long)!) == longWrite)
            // The error codes.
            #expect(errors(bumble, "aa03") == ["0x03"])
            #expect(errors(bumble, "aa02") == ["0x02"])
            #expect(errors(bumble, "aa04") == ["0x05", "0x05"])
            #expect(bumble.all("error").count == 4, "errors: \(bumble.all("error"))")
            // Values received, in order.
            #expect(bumble.all("notification").compactMap { $0["value"] as? String } == ["1000", "1001", "1002"])
            #expect(bumble.all("indication").compactMap { $0["value"] as? String } == ["2001", "2002"])
            #expect(bumble.all("unsubscribed").count == 2)

            // Our Peripheral's events: writes (the long one assembled), subscribe and unsubscribe.
            let all = events.all
            #expect(all.contains(.wrote(connection: notifyHandle, characteristic: BluetoothUUID(string: Self.long)!, value: longWrite)))
            #expect(all.contains(.wrote(connection: notifyHandle, characteristic: 0xAA01, value: [0xA1, 0xA2])))
            #expect(all.contains(.subscribed(connection: notifyHandle, characteristic: 0xAA05, indications: false)))
            #expect(all.contains(.subscribed(connection: notifyHandle, characteristic: 0xAA06, indications: true)))
            #expect(all.contains(.unsubscribed(connection: notifyHandle, characteristic: 0xAA05)))
            #expect(peripheral.subscribers(of: 0xAA05).isEmpty)
        }
    }

    /// The value behind the asynchronous characteristic: handlers that await it, as an app's
    /// handler awaits its sensor or store.
    actor Store {
        var value = Array("async".utf8)
        func get() -> [UInt8] { value }
        func set(_ v: [UInt8]) { value = v }
    }

    /// Issue 25: Bumble's client reads, writes and reads back a characteristic whose handlers are
    /// asynchronous (`asyncRead` / `asyncWrite`): each request is answered when its handler
    /// returns (Read Response with the value, Write Response; Core v5.4 Vol 3 Part F 3.4.4.4,
    /// 3.4.5.2), within Bumble's ATT timeout, with no error.
    @Test func bumbleClientReadsAndWritesAnAsynchronousCharacteristic() async throws {
        let store = Store()
        let services = [GATTService(uuid: 0xAB00, characteristics: [
            GATTCharacteristic(uuid: 0xAB01, properties: [.read, .write],
                               asyncRead: { _ in await store.get() },
                               asyncWrite: { _, value in await store.set(value) }),
        ])]
        try await interop { scope in
            let (peripheral, _) = try await scope.peripheral(on: 0, services: services, name: "interop-async")
            try await peripheral.startAdvertising(AdvertisingOptions(name: "interop-async"))
            let bumble = try scope.script("gatt_client_check.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "interop-async",
                "--read", "ab01", "--write", "ab01=0a0b0c", "--read", "ab01",
                "--duration", "10", "--timeout", "60"])
            #expect(try await bumble.exited() == 0, "gatt_client_check.py: \(bumble.output.suffix(10))")
            #expect(bumble.all("read").compactMap { $0["value"] as? String } == [hex(Array("async".utf8)), "0a0b0c"])
            #expect(bumble.all("error").isEmpty, "errors: \(bumble.all("error"))")
            #expect(await store.get() == [0x0A, 0x0B, 0x0C])
        }
    }

    /// Waits for exactly one subscriber of `uuid` and returns its connection handle.
    func subscriber(_ peripheral: Peripheral, _ uuid: BluetoothUUID, count: Int = 1) async throws -> UInt16 {
        try await peripheral.until("\(uuid): \(count) subscribers") { p in p.subscribers(of: uuid).count == count }
        return peripheral.subscribers(of: uuid)[0]
    }

    @Test func twoCentralsSubscribedAtOnceWithPerPeerCCCDs() async throws { try await twoCentralsSubscribedAtOnceWithPerPeerCCCDs(on: .bumble) }
    func twoCentralsSubscribedAtOnceWithPerPeerCCCDs(on kind: ControllerKind) async throws {
        try await interop(on: kind, controllers: 3) { scope in
            let (peripheral, events) = try await scope.peripheral(on: 0, services: Self.services, name: "interop-two")
            let options = AdvertisingOptions(name: "interop-two")
            try await peripheral.startAdvertising(options)
            // A: one value, unsubscribes, stays connected a while. B: stays subscribed.
            let a = try scope.script("gatt_client_check.py", [
                "--transport", scope.controllers.bumbleTransport(1), "--name", "interop-two", "--no-discover",
                "--subscribe", "aa05", "--wait", "aa05=1", "--unsubscribe", "aa05", "--sleep", "4",
                "--duration", "20", "--timeout", "60"])
            _ = try await a.event("connected", timeout: .seconds(20))
            // Advertising stops with the connection: start it again for the second central.
            try await peripheral.startAdvertising(options)
            let b = try scope.script("gatt_client_check.py", [
                "--transport", scope.controllers.bumbleTransport(2), "--name", "interop-two", "--no-discover",
                "--subscribe", "aa05", "--wait", "aa05=3", "--duration", "20", "--timeout", "60"])
            _ = try await b.event("subscribed", timeout: .seconds(20))
            _ = try await a.event("subscribed", timeout: .seconds(5))
            try await peripheral.until("two subscribers", timeout: .seconds(10)) { p in p.subscribers(of: 0xAA05).count == 2 }
            let handles = Set(peripheral.subscribers(of: 0xAA05))

            // One notification reaches both.
            #expect(Set(try await peripheral.notify([0x01], for: 0xAA05)) == handles)
            let aGot = try await a.event("notification")
            let bGot = try await b.event("notification")
            #expect(aGot["value"] as? String == "01" && bGot["value"] as? String == "01")

            // A unsubscribes; B still gets the next ones, A doesn't.
            _ = try await a.event("unsubscribed")
            try await peripheral.until("one subscriber left", timeout: .seconds(5)) { p in p.subscribers(of: 0xAA05).count == 1 }
            let remaining = peripheral.subscribers(of: 0xAA05)
            #expect(remaining.count == 1 && handles.contains(remaining[0]))
            #expect(try await peripheral.notify([0x02], for: 0xAA05) == remaining)
            #expect(try await peripheral.notify([0x03], for: 0xAA05) == remaining)
            _ = try await b.event("waited", timeout: .seconds(10))
            #expect(b.all("notification").compactMap { $0["value"] as? String } == ["01", "02", "03"])
            try await Task.sleep(for: .milliseconds(300))
            #expect(a.all("notification").compactMap { $0["value"] as? String } == ["01"], "A: \(a.output)")
            #expect(a.isRunning, "A should still be connected (sleeping)")
            #expect(events.all.filter { if case .connected = $0 { return true }; return false }.count == 2)
            #expect(try await b.exited() == 0, "B: \(b.output.suffix(10))")
            #expect(try await a.exited() == 0, "A: \(a.output.suffix(10))")
        }
    }
}

extension GATTServerInteropTests {
    /// Over Rootcanal (`make rootcanal-test`): two Bumble centrals on two more controllers of its
    /// radio, linked to our server at once.
    @Suite(.rootcanal) struct OverRootcanal {
        @Test func twoCentralsSubscribedAtOnceWithPerPeerCCCDs() async throws {
            try await GATTServerInteropTests().twoCentralsSubscribedAtOnceWithPerPeerCCCDs(on: .rootcanal)
        }
    }
}
