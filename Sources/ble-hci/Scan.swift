import Synchronization
import Foundation
import Decoder
import HCI
import Host
import GATT
import BLE

/// `ble-hci scan [--duration S] [--passive] [--duplicates] [--service UUID]... [--name TEXT]
/// [--rssi DBM] [--phy 1m|2m|coded] [--manufacturer ID]... [--service-data UUID]...`.
func runScan(_ c: CommandContext) async throws -> Int32 {
    guard c.args.positionals.isEmpty else {
        throw UsageError("scan takes no positional arguments, got: \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    if let target = c.args.last("sync") {
        // The sync's reports are one advertiser's: the listing's filters and modes do not apply.
        if let given = ["passive", "duplicates", "service", "name", "rssi", "rssi-min", "phy", "manufacturer", "service-data"].first(where: c.args.has) {
            throw UsageError("--\(given) filters the advertisers scan lists; with --sync TARGET give only --count and --duration", command: c.command)
        }
        return try await runPeriodicSync(c, target: try Target(parsing: target, command: c.command))
    }
    if c.args.has("count") { throw UsageError("--count goes with --sync (the periodic reports to print)", command: c.command) }
    let duration = try c.args.double("duration", command: c.command)
    let filter = try scanFilter(c.args, command: c.command)
    SignalWatcher.install()
    let out = c.out
    let opened = try openTransport(c)
    defer { opened.close() }
    let transport = opened.transport
    // Bonded peers behind resolvable private addresses are shown with their identity address.
    var options = StackOptions()
    options.mtuOnConnect = nil  // the command line exchanges `--mtu` itself, after connecting
    options.security.bondDirectory = bondDirectory(c)
    options.host.randomStaticAddress = options.security.bondDirectory.flatMap(bondedRandomStaticAddress)
    let central = try await interruptible { [options] in try await Central.open(transport, options: options) }
    out.progress(out.text(.localController(address: central.controller.address.description, transport: transport.name)))
    // However the scan ends, it is stopped before the transport closes.
    return try await closing({ await central.close() }) {
        // Every report, for the summary's timing and RSSI range; what is printed is chosen below.
        let stream = try await interruptible { try await central.scan(filter, active: !c.args.has("passive"), everyReport: true) }
        out.progress(out.text(.scanning(passive: c.args.has("passive"), duration: duration.map(formatSeconds))))

        let seen = SeenAdvertisers()
        let stats = ScanStatistics()
        let everyReport = c.args.has("duplicates")
        let started = ContinuousClock.now
        let failure = await consumeUntilStop(duration: duration) {
            var printed = PrintedAdvertisers()
            for try await adv in stream {
                stats.add(adv, at: .now)
                seen.add(adv)
                guard everyReport || printed.changed(adv) else { continue }
                out.event(adv.jsonFields)
                out.line(humanLine(adv, out: out))
            }
        }
        let elapsed = ContinuousClock.now - started
        if let failure {
            out.error("\(failure)")
            return ExitCode.transport
        }
        out.event(stats.summaryFields(duration: elapsed))
        out.progress(out.text(.scanEnded(advertisers: seen.count)))
        if !out.json { for line in stats.summaryLines(out.language) { out.progress(line) } }
        // Without --duration a signal is the requested end; with it, the scan was cut short.
        if duration != nil, let s = SignalWatcher.shared.received { return Interrupted(signal: s).exitCode }
        return ExitCode.success
    }
}

/// `scan --sync TARGET [--count N] [--duration S]`: finds TARGET as `central` does, synchronises
/// to its periodic train (Core v5.4 Vol 4 Part E 7.8.67) and prints each periodic advertisement,
/// its reports joined (7.7.65.15), until N of them, the duration, Ctrl-C, or the sync is lost;
/// then terminates the sync (7.8.69).
func runPeriodicSync(_ c: CommandContext, target: Target) async throws -> Int32 {
    let count = try c.args.last("count").map { text -> Int in
        guard let n = Int(text), n > 0 else { throw UsageError("--count needs a positive whole number, got '\(text)'", command: c.command) }
        return n
    }
    let duration = try c.args.double("duration", command: c.command)
    SignalWatcher.install()
    let out = c.out
    let opened = try openTransport(c)
    defer { opened.close() }
    // Bonds, as for scan: a bonded TARGET is found behind its RPA, by the controller or the host.
    var options = StackOptions()
    options.security.bondDirectory = bondDirectory(c)
    options.host.randomStaticAddress = options.security.bondDirectory.flatMap(bondedRandomStaticAddress)
    let central = try await interruptible { [options] in try await Central.open(opened.transport, options: options) }
    return try await closing({ await central.close() }) {
        let adv = try await findTarget(target, central: central, timeout: 10)
        guard adv.sid <= 0x0F else {
            throw CLIFailure("\(adv.address) uses legacy advertising (no Advertising SID): it has no periodic train to synchronise to", exitCode: ExitCode.failure)
        }
        out.progress("Found \(adv.address) (SID \(adv.sid)); synchronising to its periodic advertising…")
        let sync: PeriodicAdvertisingSync
        do {
            sync = try await interruptible { try await central.syncPeriodicAdvertising(of: adv) }
        } catch let e as BLEError {
            if case .transport = e { throw e }
            throw CLIFailure("could not synchronise to the periodic advertising of \(adv.address) (SID \(adv.sid)): \(e)", exitCode: ExitCode.failure)
        }
        let s = sync.sync
        out.event([.text("event", "periodicSync"), .text("address", s.advertiser.address.description), .text("addressType", s.advertiser.type.simple),
                   .int("sid", Int(s.sid)), .int("sync", Int(s.handle)), .int("interval", Int(s.interval))])
        out.line("Synchronised to \(s.advertiser) (SID \(s.sid), sync \(hexCode(s.handle, digits: 4)), every \(formatMilliseconds(Double(s.interval) * 1.25)))\(count.map { "; \($0) report\($0 == 1 ? "" : "s")" } ?? ", Ctrl-C to stop")")
        let failure = await consumeUntilStop(duration: duration) {
            var received = 0
            for try await r in sync.reports {
                var fields: [Field] = [.text("event", "periodicReport"), .bytes("data", r.data)]
                if let rssi = r.rssi { fields.append(.int("rssi", rssi)) }
                if let tx = r.txPower { fields.append(.int("txPower", tx)) }
                fields.append(.int("sync", Int(r.syncHandle)))
                if r.dataStatus != 0 { fields.append(.bool("truncated", true)) }
                out.event(fields)
                out.line("\(timestamp()) periodic report (\(r.data.count) octets\(r.rssi.map { ", \($0) dBm" } ?? "")\(r.dataStatus != 0 ? ", truncated" : "")): \(r.data.hex)")
                received += 1
                if let count, received >= count { return }
            }
        }
        try? await central.terminate(sync)
        if let failure {
            if case BLEError.transport = failure { out.error("\(failure)"); return ExitCode.transport }
            out.error("\(failure)")
            return ExitCode.failure
        }
        if duration != nil || count != nil, let s = SignalWatcher.shared.received { return Interrupted(signal: s).exitCode }
        return ExitCode.success
    }
}

/// `--service`, `--name`, `--rssi` (`--rssi-min`), `--phy`, `--manufacturer`, `--service-data`.
func scanFilter(_ args: ParsedArguments, command: String) throws -> ScanFilter {
    func uuids(_ option: String) throws -> [BluetoothUUID] {
        try args.all(option).map { text in
            guard let u = BluetoothUUID(string: text) else { throw UsageError("--\(option) needs a UUID (180d, 32-bit or 128-bit), got '\(text)'", command: command) }
            return u
        }
    }
    var filter = ScanFilter(services: try uuids("service"), nameContains: args.last("name"), serviceData: try uuids("service-data"))
    let rssiOptions = args.options.filter { $0.name == "rssi" || $0.name == "rssi-min" }
    if let (name, value) = rssiOptions.last, let value {
        // An RSSI is -127 to +20 dBm (Core v5.4 Vol 4 Part E 7.7.65.2; 127 means "not available").
        guard let dbm = Int8(value), (-127...20).contains(dbm) else {
            throw UsageError("--\(name) needs a signal strength in dBm from -127 to 20, e.g. -70, got '\(value)'", command: command)
        }
        filter.minimumRSSI = dbm
    }
    if let text = args.last("phy") {
        guard let phy = ScanFilter.PHY.allCases.first(where: { $0.name == text.lowercased() }) else {
            throw UsageError("--phy must be 1m, 2m or coded, got '\(text)'", command: command)
        }
        filter.phy = phy
    }
    filter.manufacturers = try args.all("manufacturer").map { text in
        // A company identifier: 16 bits, written in hex as Assigned Numbers lists them (0x004C).
        let digits = text.lowercased().hasPrefix("0x") ? String(text.dropFirst(2)) : text
        guard (1...4).contains(digits.count), digits.allSatisfy(\.isHexDigit), let id = UInt16(digits, radix: 16) else {
            throw UsageError("--manufacturer needs a 16-bit company identifier in hex, e.g. 0x004c, got '\(text)'", command: command)
        }
        return id
    }
    return filter
}

/// What scan has printed per advertiser, to print again only when the data change (as the
/// stack's own tracker would; here every report arrives, for the summary). Bounded as it is.
struct PrintedAdvertisers {
    private var meaning: [DeviceAddress: [Field]] = [:]
    private var order: [DeviceAddress] = []
    private let capacity = 4096

    /// Whether `adv` is new or says something else than when last printed (RSSI aside).
    mutating func changed(_ adv: Advertisement) -> Bool {
        let now = adv.jsonFields.filter { $0.name != "rssi" }
        guard let before = meaning[adv.address] else {
            meaning[adv.address] = now
            order.append(adv.address)
            if order.count > capacity { meaning[order.removeFirst()] = nil }
            return true
        }
        guard before != now else { return false }
        meaning[adv.address] = now
        return true
    }
}

/// Per advertiser, over the scan: reports, RSSI range, and the advertising interval measured
/// from the arrival times of its advertising reports (scan responses are not advertising
/// events). Bounded: 4096 advertisers, the last 1024 gaps of each.
final class ScanStatistics: Sendable {
    struct Advertiser {
        var address: DeviceAddress
        var name: String?
        var reports = 0
        var events = 0
        var rssiMin: Int8?
        var rssiMax: Int8?
        var primaryPHY: UInt8 = 1
        var secondaryPHY: UInt8 = 0
        var lastEvent: ContinuousClock.Instant?
        /// Gaps between consecutive advertising reports, microseconds (the newest 1024).
        var gaps: [Int] = []
    }
    static let maxAdvertisers = 4096
    static let maxGaps = 1024
    private struct State {
        var advertisers: [DeviceAddress: Advertiser] = [:]
        var order: [DeviceAddress] = []
        var untracked = 0
    }
    private let state = Mutex(State())

    func add(_ adv: Advertisement, at time: ContinuousClock.Instant) {
        state.withLock { s in
            var a: Advertiser
            if let known = s.advertisers[adv.address] {
                a = known
            } else {
                guard s.advertisers.count < Self.maxAdvertisers else { s.untracked += 1; return }
                a = Advertiser(address: adv.address)
                s.order.append(adv.address)
            }
            a.reports += 1
            if let name = adv.name { a.name = name }
            if let rssi = adv.rssi {
                a.rssiMin = min(a.rssiMin ?? rssi, rssi)
                a.rssiMax = max(a.rssiMax ?? rssi, rssi)
            }
            if !adv.fromScanResponse {
                a.events += 1
                a.primaryPHY = adv.primaryPHY
                a.secondaryPHY = adv.secondaryPHY
                if let last = a.lastEvent {
                    let gap = time - last
                    a.gaps.append(Int(gap.components.seconds) * 1_000_000 + Int(gap.components.attoseconds / 1_000_000_000_000))
                    if a.gaps.count > Self.maxGaps { a.gaps.removeFirst(a.gaps.count - Self.maxGaps) }
                }
                a.lastEvent = time
            }
            s.advertisers[adv.address] = a
        }
    }

    /// The median gap (the advertising interval plus advDelay, Core v5.4 Vol 6 Part B
    /// 4.4.2.2.1) and the smallest, in microseconds; nil with fewer than two events.
    static func interval(_ gaps: [Int]) -> (median: Int, minimum: Int)? {
        guard !gaps.isEmpty else { return nil }
        let sorted = gaps.sorted()
        let n = sorted.count
        let median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
        return (median, sorted[0])
    }

    private var snapshot: ([Advertiser], Int) { state.withLock { s in (s.order.compactMap { s.advertisers[$0] }, s.untracked) } }

    /// docs/cli.md's `{"event":"summary",...}`.
    func summaryFields(duration: Duration) -> [Field] {
        let (list, untracked) = snapshot
        let entries: [FieldValue] = list.map { a in
            var f: [Field] = [.text("address", a.address.address.description), .text("addressType", a.address.type.simple)]
            if let name = a.name { f.append(.text("name", name)) }
            f.append(.int("reports", a.reports))
            f.append(.int("events", a.events))
            if let lo = a.rssiMin, let hi = a.rssiMax { f.append(.int("rssiMin", lo)); f.append(.int("rssiMax", hi)) }
            if let i = Self.interval(a.gaps) { f.append(.int("intervalUs", i.median)); f.append(.int("intervalMinUs", i.minimum)) }
            f.append(.text("phy", ScanFilter.PHY(rawValue: a.secondaryPHY != 0 ? a.secondaryPHY : a.primaryPHY)?.name ?? hexCode(a.primaryPHY)))
            return .object(f)
        }
        let ms = Int(duration.components.seconds) * 1000 + Int(duration.components.attoseconds / 1_000_000_000_000_000)
        return [.text("event", "summary"), .int("durationMs", ms), Field("advertisers", .list(entries))]
            + (untracked > 0 ? [.int("untrackedReports", untracked)] : [])
    }

    /// The same for humans, one line per advertiser (stderr).
    func summaryLines(_ language: Language) -> [String] {
        snapshot.0.map { a in
            var parts = ["  \(a.address)" + (a.name.map { " \"\($0)\"" } ?? ""), Message.advertisingEvents(a.events).text(language)]
            if let i = Self.interval(a.gaps) {
                parts.append(Message.advertisingInterval(median: String(format: "%.1f", Double(i.median) / 1000),
                                                         shortest: String(format: "%.1f", Double(i.minimum) / 1000)).text(language))
            }
            if let lo = a.rssiMin, let hi = a.rssiMax { parts.append(Message.rssiRange(Int(lo), Int(hi)).text(language)) }
            return parts.joined(separator: Message.listSeparator.text(language))
        }
    }
}

/// One readable line per advertiser, with assigned-number names.
func humanLine(_ a: Advertisement, out: Output) -> String {
    var parts: [String] = [out.bold(a.address.address.description) + out.dim("/\(a.address.type.simple)")]
    if let id = a.identity { parts.append(out.text(.advBonded) + out.bold(id.address.description) + out.dim("/\(id.type.simple)")) }
    if let rssi = a.rssi { parts.append("\(rssi) dBm") }
    parts.append(out.text(.advConnectable(a.connectable)))
    if let name = a.name { parts.append(out.green("\"\(name)\"")) }
    if !a.services.isEmpty { parts.append(out.text(.advServices(a.services.map(uuidLabel).joined(separator: ", ")))) }
    for (company, data) in a.manufacturerData.sorted(by: { $0.key < $1.key }) {
        parts.append(out.text(.advManufacturer(AssignedNumbers.companyName(company) ?? hexCode(company, digits: 4), data: data.hex)))
    }
    for (uuid, data) in a.serviceData.sorted(by: { $0.key < $1.key }) { parts.append(out.text(.advServiceData(uuidLabel(uuid), data: data.hex))) }
    if let tx = a.txPower { parts.append(out.text(.advTxPower(Int(tx)))) }
    if let app = a.appearance { parts.append(out.text(.advAppearance(AssignedNumbers.appearanceName(app) ?? hexCode(app, digits: 4)))) }
    return parts.joined(separator: "  ")
}
