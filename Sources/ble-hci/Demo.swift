import Foundation
import HCI
import Host
import Capture
import ATT
import GATT
import BLE
import VirtualController

/// `ble-hci demo`: a central and a `demo` peripheral on an in-process virtual link, walking the
/// CoreBluetooth flow with both hosts' HCI traffic traced layer by layer (and captured with -w:
/// one file per host).
func runDemo(_ c: CommandContext) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("demo takes no arguments, got: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    guard c.transportSpec == "virtual" || !c.args.has("transport") else {
        throw UsageError("demo brings its own in-process virtual link: drop -t \(c.transportSpec) (scan, central and peripheral take -t)", command: c.command)
    }
    var context = c
    if !context.args.has("trace") { context.args.options.append(("trace", nil)) }  // traced by default
    let out = c.out
    // Both hosts are recorded and traced: the central's capture is FILE, the peripheral's
    // FILE with "-peripheral" before its extension (so its advertising shows too).
    let writer = try openCaptureWriter(c)
    defer { writer.map(closeCapture) }
    let peripheralPath = c.capturePath.map(peripheralCapturePath)
    let peripheralWriter = try peripheralPath.map { path in
        do { return try CaptureWriter.open(path: path) } catch {
            throw CLIFailure("cannot write the capture file \(path): \(error)", exitCode: ExitCode.failure)
        }
    }
    defer { peripheralWriter.map(closeCapture) }
    // --airtime: connection events, PDUs per event and advertising events as on the air (issue 29).
    let (link, transports) = VirtualLink.inProcess(count: 2, airtime: c.args.has("airtime") ? Airtime.Configuration() : nil)
    // --air FILE: both controllers' link layer, as Wireshark decodes it (issue 28).
    let air = try startAirCapture(c, link: link)
    defer { stopAirCapture(air, link: link) }
    let centralTransport = wrapForCaptureAndTrace(transports[1], context: context, writer: writer, label: "central")
    let peripheralTransport = wrapForCaptureAndTrace(transports[0], context: context, writer: peripheralWriter, label: "peripheral")

    var stepNumber = 0
    // JSON carries the English title and CoreBluetooth text whatever the language; API names
    // need no translation, an explanation (`shown`) does.
    func step(_ title: Message, _ coreBluetooth: String, shown: String? = nil) {
        stepNumber += 1
        out.event([.text("event", "step"), .int("step", stepNumber), .text("title", title.text(.english)), .text("coreBluetooth", coreBluetooth)])
        out.line("\n" + out.bold(out.cyan("── \(stepNumber). \(out.text(title))")) + "\n" + out.dim("   CoreBluetooth: \(shown ?? coreBluetooth)"))
    }
    func say(_ text: Message, json: [Field]) {
        out.event(json)
        out.line(out.green("   ▸ ") + out.text(text))
    }

    step(.demoAdvertiseStep, "peripheralManager.add(service); peripheralManager.startAdvertising([CBAdvertisementDataLocalNameKey: \"ble-hci\", ...])")
    let peripheral = try await Peripheral.open(peripheralTransport, services: DemoProfile.services, name: "ble-hci")
    let ticker = DemoProfile.startTicker(on: peripheral)
    defer { ticker.cancel() }
    let peripheralLog = Task {
        for await e in peripheral.events {
            switch e {
            case .subscribed(_, let uuid, _): out.line(out.dim("   " + out.text(.demoPeripheralSubscribed(uuid: uuid.description))))
            case .wrote(_, let uuid, let value): out.line(out.dim("   " + out.text(.demoPeripheralWrote(value: valueLabel(value), uuid: uuid.description))))
            default: break
            }
        }
    }
    defer { peripheralLog.cancel() }
    try await peripheral.startAdvertising(AdvertisingOptions(name: "ble-hci", serviceUUIDs: DemoProfile.advertisedServices))
    say(.demoAdvertising, json: [.text("event", "advertising"), .text("name", "ble-hci")])

    step(.demoScanStep, "CBCentralManager(delegate:queue:); centralManager.scanForPeripherals(withServices: nil)")
    var centralOptions = StackOptions()
    centralOptions.mtuOnConnect = nil  // the demo shows the exchange as its own step
    let central = try await Central.open(centralTransport, options: centralOptions)
    defer { Task { await central.close(); await peripheral.close() } }
    let adv = try await central.find(ScanFilter(nameContains: "ble-hci"), timeout: .seconds(10), describe: "name ble-hci")
    out.event(adv.jsonFields)
    out.line(out.green("   ▸ ") + out.text(.demoFound(name: adv.name ?? "?", address: adv.address.description, rssi: adv.rssi.map(Int.init))))

    step(.demoConnectStep, "centralManager.connect(peripheral)")
    let remote = try await central.connect(to: adv.address)
    // As a CoreBluetooth peripheral app would (peripheralManager.stopAdvertising()): no new
    // advertising after the demo's disconnection, so the trace ends with the demo.
    try await peripheral.stopAdvertising()

    step(.demoMTUStep, Message.demoMTUCoreBluetooth.text(.english), shown: out.text(.demoMTUCoreBluetooth))
    let mtu = try await remote.exchangeMTU(517)
    out.event([.text("event", "connected"), .text("address", remote.address.address.description),
               .text("addressType", remote.address.type.simple), .int("handle", remote.connectionHandle), .int("mtu", mtu)])
    out.line(out.green("   ▸ ") + out.text(.demoConnected(handle: remote.connectionHandle, mtu: Int(mtu))))

    step(.demoDiscoverStep,
         "peripheral.discoverServices(nil); discoverCharacteristics(nil, for:); discoverDescriptors(for:); readValue(for:)")
    let snapshot = try await readEverything(remote)
    out.event(snapshot.jsonFields)
    for l in snapshot.humanLines(out) { out.line("   " + l) }

    guard let fff2 = characteristic(snapshot, 0xFFF2), let fff1 = characteristic(snapshot, 0xFFF1),
          let ffe1 = characteristic(snapshot, 0xFFE1) else {
        throw CLIFailure(out.text(.demoUnexpectedDatabase), exitCode: ExitCode.failure)
    }

    step(.demoWriteStep, "peripheral.writeValue(data, for: characteristic, type: .withResponse)")
    try await remote.write(Array("hello from the demo".utf8), to: fff2)
    out.event([.text("event", "write"), .text("uuid", "fff2"), .int("handle", fff2.valueHandle)])
    let back = try await remote.read(fff2)
    out.event([.text("event", "read"), .text("uuid", "fff2"), .int("handle", fff2.valueHandle), .bytes("value", back)])
    out.line(out.green("   ▸ ") + out.text(.demoNowReads(uuid: "fff2", value: valueLabel(back))))

    step(.demoRefusedWriteStep, "peripheral.writeValue(data, for: ffe1, type: .withResponse) → didWriteValueFor error")
    do {
        try await remote.write([0x01], handle: ffe1.valueHandle)
    } catch BLEError.att(let e) {
        reportATTError(e, op: "write", uuid: ffe1.uuid, handle: ffe1.valueHandle, out: out)
    }
    step(.demoRefusedReadStep, "peripheral.readValue(for: fff1) → didUpdateValueFor error")
    do {
        _ = try await remote.read(handle: fff1.valueHandle)
    } catch BLEError.att(let e) {
        reportATTError(e, op: "read", uuid: fff1.uuid, handle: fff1.valueHandle, out: out)
    }

    step(.demoSubscribeStep, "peripheral.setNotifyValue(true, for: fff1) → didUpdateValueFor")
    let values = try await remote.notifications(for: fff1)
    try await withTimeout(.seconds(10), "the demo peripheral sent fewer than 3 notifications in 10 s") {
        var count = 0
        for try await v in values {
            out.event([.text("event", "notification"), .text("uuid", "fff1"), .int("handle", fff1.valueHandle), .bytes("value", v)])
            out.line(out.green("   ▸ ") + out.text(.demoNotification(value: valueLabel(v))))
            count += 1
            if count == 3 { break }
        }
    }

    step(.demoDisconnectStep, "peripheral.setNotifyValue(false, for: fff1); centralManager.cancelPeripheralConnection(peripheral)")
    try await remote.stopNotifications(for: fff1)
    let reason = try await remote.disconnect()
    reportDisconnected(reason, out: out, prefix: out.green("   ▸ "))
    if let air {
        out.note("\nThe link layer of both controllers written to \(air.path): open it in Wireshark, or run 'tshark -r \(air.path)'.")
    }
    if let path = c.capturePath, let peripheralPath {
        out.note(out.text(.demoCaptures(central: path, peripheral: peripheralPath)))
    }
    return ExitCode.success
}

/// Where `demo -w FILE` records the peripheral: "demo.pcap" → "demo-peripheral.pcap".
func peripheralCapturePath(_ path: String) -> String {
    let url = URL(fileURLWithPath: path)
    let ext = url.pathExtension
    let base = ext.isEmpty ? path : String(path.dropLast(ext.count + 1))
    return base + "-peripheral" + (ext.isEmpty ? "" : "." + ext)
}

func characteristic(_ s: GATTSnapshot, _ uuid: BluetoothUUID) -> GATTRemoteCharacteristic? {
    s.tree.lazy.flatMap(\.characteristics).first { $0.characteristic.uuid == uuid }?.characteristic
}

/// `{"event":"error","op":"write","uuid":"ffe1","handle":20,"att":"0x03","message":"Write Not Permitted"}`.
func reportATTError(_ e: ATTError, op: String, uuid: BluetoothUUID, handle: UInt16, out: Output) {
    out.event([.text("event", "error"), .text("op", op), .text("uuid", uuid.description), .int("handle", handle),
               .code("att", e.code.rawValue), .text("message", e.code.name)])
    out.line(out.red("   ✗ ") + out.text(.attRefused(write: op == "write", uuid: uuid.description, handle: handle, error: e.code.name, code: hexCode(e.code.rawValue))))
}
