import Foundation
import HCI
import Host
import BLE

/// `ble-hci advertise [--name NAME] [--data HEX] [--periodic-data HEX] [--interval MS]
/// [--periodic-interval MS] [--duration S]`: the broadcaster role (CLI.md).
func runAdvertise(_ c: CommandContext) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("advertise takes no positional arguments, got: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let name = c.args.last("name") ?? "ble-hci"
    guard name.utf8.count <= 248 else { throw UsageError("--name must be at most 248 octets of UTF-8", command: c.command) }
    var broadcast = BroadcastOptions(name: name)
    broadcast.data = try adStructures(c.args.last("data"), option: "data", command: c.command) ?? []
    broadcast.periodicData = try adStructures(c.args.last("periodic-data"), option: "periodic-data", command: c.command)
    // Advertising interval 20 ms to 10.24 s here, in 0.625 ms units (Core v5.4 Vol 4 Part E 7.8.53
    // allows longer; these are what one 16-bit value holds comfortably).
    if let ms = try c.args.double("interval", command: c.command) {
        guard (20...10_240).contains(ms) else { throw UsageError("--interval must be 20 to 10240 ms, got \(ms)", command: c.command) }
        broadcast.interval = UInt16(ms / 0.625)
    }
    // Periodic advertising interval 7.5 ms to 81.91875 s, in 1.25 ms units (7.8.61: 0x0006-0xFFFF).
    if let ms = try c.args.double("periodic-interval", command: c.command) {
        guard broadcast.periodicData != nil else { throw UsageError("--periodic-interval goes with --periodic-data", command: c.command) }
        guard (7.5...81_918.75).contains(ms) else { throw UsageError("--periodic-interval must be 7.5 to 81918.75 ms, got \(ms)", command: c.command) }
        broadcast.periodicInterval = UInt16(ms / 1.25)
    }
    // A controller holds at most 1650 octets for a set's data and for its train's (7.8.57, 7.8.62).
    let limit = maxSetDataOctets
    guard broadcast.advertisingData.count <= limit else {
        throw UsageError("the name and --data make \(broadcast.advertisingData.count) octets; an advertising set holds at most \(limit)", command: c.command)
    }
    if let p = broadcast.periodicData, p.count > limit {
        throw UsageError("--periodic-data is \(p.count) octets; a periodic train holds at most \(limit)", command: c.command)
    }
    let duration = try c.args.double("duration", command: c.command)
    SignalWatcher.install()
    let out = c.out
    let opened = try openTransport(c)
    defer { opened.close() }
    let options = StackOptions()
    // A broadcaster serves nothing: the GATT server it gets holds only GAP and GATT.
    let peripheral = try await interruptible { [transport = opened.transport, options] in
        try await Peripheral.open(transport, services: [], name: name, options: options)
    }
    return try await closing({ await peripheral.close() }) {
        try await interruptible { [broadcast] in try await peripheral.startBroadcasting(broadcast) }
        let address = await peripheral.address
        var fields: [Field] = [.text("event", "advertising"), .text("name", name), .text("address", address.address.description),
                               .text("addressType", address.type.simple), .bytes("data", broadcast.advertisingData)]
        if let p = broadcast.periodicData {
            fields += [.bytes("periodicData", p), .int("periodicInterval", Int(broadcast.periodicInterval))]
        }
        out.event(fields)
        let train = broadcast.periodicData.map {
            ", with a periodic train of \($0.count) octets every \(formatMilliseconds(Double(broadcast.periodicInterval) * 1.25))"
        } ?? ""
        out.line("Broadcasting as \(out.bold(name)) (\(address.address), \(address.type.simple)): a non-connectable extended advertising set\(train), on \(opened.transport.name). \(duration.map { "For \(formatSeconds($0))." } ?? "Ctrl-C to stop.")")
        _ = await waitForStop(duration: duration)
        // Without --duration a signal is the requested end; with it, the run was cut short.
        if duration != nil, let s = SignalWatcher.shared.received { return Interrupted(signal: s).exitCode }
        return ExitCode.success
    }
}

/// The most a controller holds of a set's advertising data or of its periodic train's
/// (Max_Advertising_Data_Length up to 0x0672, Core v5.4 Vol 4 Part E 7.8.57).
let maxSetDataOctets = 1650

/// HEX as AD structures (Core v5.4 Vol 3 Part C 11): each a length octet (1-255: the type and
/// value), a type octet and the value, nothing left over. nil when the option is absent.
func adStructures(_ hex: String?, option: String, command: String) throws -> [UInt8]? {
    guard let hex else { return nil }
    guard let bytes = [UInt8](hex: hex) else {
        throw UsageError("--\(option) must be hex octets (AD structures: length, type, value), e.g. 0aff4c000215aabbccdd, got '\(hex)'", command: command)
    }
    var i = 0
    while i < bytes.count {
        let length = Int(bytes[i])
        guard length > 0 else {
            throw UsageError("--\(option): the AD structure at octet \(i) has length 0 (each is a length 1-255, a type, then length-1 octets of value)", command: command)
        }
        guard i + 1 + length <= bytes.count else {
            throw UsageError("--\(option): the AD structure at octet \(i) says \(length) octets follow, but only \(bytes.count - i - 1) do", command: command)
        }
        i += 1 + length
    }
    return bytes
}
