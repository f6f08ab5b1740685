// ble-hci-bench: the Swift side of `make bench` (Tools/bench/run.sh prints the comparison).
//
//   ble-hci-bench reads N          our Central reads a characteristic N times from our Peripheral
//   ble-hci-bench notifications N  our Peripheral notifies N values, our Central counts them
//   ble-hci-bench reads-on-stack N, notifications-on-stack N  the same, the bench's tasks
//                                  running on the stacks' executor (`withTaskExecutorPreference`,
//                                  `Central.executor`): one thread in all, as Bumble's asyncio loop
//   ble-hci-bench reads-in-stack N, notifications-in-stack N  the same, the bench's code in the
//                                  stacks' isolation (`withStackIsolation`): the reads in the
//                                  central's, the notifications sent in the peripheral's and
//                                  counted in the central's, as Bumble's code shares its loop
//   ble-hci-bench notifications-queued N  notifications from the pool with the non-blocking
//                                  Peripheral.updateValue (then the ready event when refused)
//   ble-hci-bench capture IN OUT N a btsnoop of N packets: IN's records repeated, times increasing
//   ble-hci-bench varied OUT N [SEED] a btsnoop of N packets, no exchange repeated (VariedCapture.swift)
//   ble-hci-bench links L [RATE S [LEN]]  one Central connected to L Peripherals (one virtual link),
//                                  each notifying RATE values/s (default 720) of 244 octets for
//                                  S seconds (default 5): loss, process CPU, anonymous memory
//   ble-hci-bench airtime          the airtime model on a manual clock (AirtimeBench.swift): throughput
//                                  per link for 1M/2M × 27/251 octets against the PHY limits, read
//                                  latency at 7.5 and 30 ms, CPU per simulated second with 1/8/32 links
//   ble-hci-bench links-split L [RATE S [LEN]]  the same with the Central in a child process over
//                                  H4/TCP (`links-central SPEC L RATE S`): the Central's own CPU
//
// Each link runs on VirtualLink.inProcess (two virtual controllers, in-process transports).
// Output: one line "metric=<name> count=<n> seconds=<s> rate=<n/s>" on stdout; reads and
// notifications add cpu_us_per_exchange (process CPU, getrusage, over the timed loop / N) and
// context_switches_per_exchange (the process's, all threads).
import Foundation
import HCI
import Capture
import GATT
import BLE
import VirtualController
import Transport

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func report(_ metric: String, count: Int, seconds: Double, extra: String = "") {
    print("metric=\(metric) count=\(count) seconds=\(String(format: "%.4f", seconds)) rate=\(String(format: "%.1f", Double(count) / seconds))"
          + (extra.isEmpty ? "" : " " + extra))
}

/// A connected pair on an in-process virtual link: our Peripheral (demo profile) and our
/// Central, with the demo database discovered.
func connectedPair() async throws -> (Peripheral, Central, RemotePeripheral, [GATTRemoteServiceTree]) {
    let (_, transports) = VirtualLink.inProcess(count: 2)
    let peripheral = try await Peripheral.open(transports[0], services: DemoProfile.services, name: "bench")
    try await peripheral.startAdvertising(AdvertisingOptions(name: "bench", serviceUUIDs: DemoProfile.advertisedServices))
    let central = try await Central.open(transports[1])
    let adv = try await central.find(ScanFilter(nameContains: "bench"), timeout: .seconds(10), describe: "name bench")
    let remote = try await central.connect(to: adv.address)
    let tree = try await remote.discoverAll()
    return (peripheral, central, remote, tree)
}

func characteristic(_ tree: [GATTRemoteServiceTree], _ uuid: BluetoothUUID) -> GATTRemoteCharacteristic {
    tree.lazy.flatMap(\.characteristics).first { $0.characteristic.uuid == uuid }!.characteristic
}

/// Where the bench's tasks run: the calling task (the global pool), preferring the stacks'
/// executor (`withTaskExecutorPreference`, `Central.executor`), or in a stack's isolation
/// (`withStackIsolation`, its layers' own).
enum Placement: String {
    case pool = "", preferring = "-on-stack", isolated = "-in-stack"
}

/// Runs `body` as `placement` says; `isolated` runs it in `central`'s stack's isolation.
func run(_ placement: Placement, _ central: Central, _ body: nonisolated(nonsending) @Sendable () async throws -> Void) async throws {
    switch placement {
    case .pool: try await body()
    case .preferring: try await withTaskExecutorPreference(central.executor.taskExecutor) { try await body() }
    case .isolated: try await central.withStackIsolation { try await body() }
    }
}

func benchReads(_ n: Int, _ placement: Placement) async throws {
    let (peripheral, central, remote, tree) = try await connectedPair()
    let c = characteristic(tree, DemoProfile.name)
    try await run(placement, central) {
        for _ in 0..<min(100, n) { _ = try await remote.read(c) }  // warm-up
        let (t0, cpu0, switches0) = (now(), cpuSeconds(), contextSwitches())
        for _ in 0..<n { _ = try await remote.read(c) }
        let (t1, cpu1, switches1) = (now(), cpuSeconds(), contextSwitches())
        report("gatt-reads" + placement.rawValue, count: n, seconds: t1 - t0,
               extra: "cpu_us_per_exchange=\(String(format: "%.2f", (cpu1 - cpu0) / Double(n) * 1e6))"
                   + " context_switches_per_exchange=\(String(format: "%.2f", Double(switches1 - switches0) / Double(n)))")
    }
    await central.close()
    await peripheral.close()
}

/// An actor on a `SerialThreadExecutor`, as a host is, whose method does next to nothing
/// (it touches its state, so that the hop into it is not optimised away).
actor Echo {
    let executor: SerialThreadExecutor
    var total = 0
    init(executor: SerialThreadExecutor) { self.executor = executor }
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    func echo(_ v: Int) -> Int { total &+= v; return total }
}

/// The floor under a read from the pool: a task on the global pool awaits an actor on the
/// stacks' kind of executor N times, and nothing else happens (one thread switch in, one out,
/// the two a pool read pays). No read from the pool can be cheaper than this.
func benchPoolHops(_ n: Int) async {
    let echo = Echo(executor: SerialThreadExecutor(name: "bench hops"))
    var sum = 0
    for i in 0..<min(100, n) { sum &+= await echo.echo(i) }  // warm-up
    let (t0, cpu0, switches0) = (now(), cpuSeconds(), contextSwitches())
    for i in 0..<n { sum &+= await echo.echo(i) }
    let (t1, cpu1, switches1) = (now(), cpuSeconds(), contextSwitches())
    report("pool-hops", count: n, seconds: t1 - t0,
           extra: "cpu_us_per_exchange=\(String(format: "%.2f", (cpu1 - cpu0) / Double(n) * 1e6))"
               + " context_switches_per_exchange=\(String(format: "%.2f", Double(switches1 - switches0) / Double(n))) checksum=\(sum)")
}

func benchNotifications(_ n: Int, _ placement: Placement, queued: Bool = false) async throws {
    let (peripheral, central, remote, tree) = try await connectedPair()
    let c = characteristic(tree, DemoProfile.ticker)
    // The sender is not flow controlled by the receiving application (notifications have no
    // flow control; Bumble's LocalLink queue is unbounded too): the stream holds up to N values
    // so that a receiver descheduled by the machine's load loses none. Lost values are counted.
    let values = try await remote.notifications(for: c, bufferLimit: n)
    let countValues: nonisolated(nonsending) @Sendable () async -> (Int, Double) = {
        var count = 0
        var last = now()
        do {
            for try await _ in values {
                count += 1
                last = now()
                if count == n { break }
            }
        } catch {}
        return (count, last)
    }
    // The counter in the central's stack's isolation, the sender in the peripheral's (two hosts).
    let counter = placement == .isolated ? Task { (try? await central.withStackIsolation { await countValues() }) ?? (0, now()) }
        : Task(executorPreference: placement == .preferring ? central.executor.taskExecutor : nil) { await countValues() }
    let value: [UInt8] = Array("12345678".utf8)
    let (t0, cpu0, switches0) = (now(), cpuSeconds(), contextSwitches())
    if queued {
        // CoreBluetooth's pattern: updateValue until it refuses, then wait for the ready event.
        var events = peripheral.events.makeAsyncIterator()
        var sent = 0
        while sent < n {
            if try peripheral.updateValue(value, for: DemoProfile.ticker) {
                sent += 1
                continue
            }
            while let e = await events.next(), e != .readyToUpdateSubscribers {}
        }
    } else {
        let send: nonisolated(nonsending) @Sendable () async throws -> Void = {
            for _ in 0..<n { try await peripheral.notify(value, for: DemoProfile.ticker) }
        }
        if placement == .isolated { try await peripheral.withStackIsolation { try await send() } }
        else { try await run(placement, central, send) }
    }
    // Whatever the central's stream dropped (it buffers 1024) is not counted: give it 2 s.
    let timeout = Task { try? await Task.sleep(for: .seconds(2)); counter.cancel() }
    let (count, last) = await counter.value
    let (cpu1, switches1) = (cpuSeconds(), contextSwitches())
    timeout.cancel()
    // (CPU until the counter ended: a run that lost values includes the 2 s wait, idle.)
    report(queued ? "notifications-queued" : "notifications" + placement.rawValue, count: count, seconds: last - t0,
           extra: "sent=\(n) lost=\(n - count) dropped_by_stream=\(values.droppedCount) dropped_by_bearer=\(remote.droppedNotifications)"
               + " cpu_us_per_exchange=\(String(format: "%.2f", (cpu1 - cpu0) / Double(n) * 1e6))"
               + " context_switches_per_exchange=\(String(format: "%.2f", Double(switches1 - switches0) / Double(n)))")
    await central.close()
    await peripheral.close()
}

/// Anonymous resident memory of this process (RssAnon, /proc/self/status), in KiB.
func anonymousKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }) else { return -1 }
    return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? -1
}

/// User + system CPU time of this process, in seconds.
func cpuSeconds() -> Double {
    var u = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &u)
    return Double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + Double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6
}

/// The process's context switches so far, all threads (a thread that sleeps and is woken counts one):
/// what a task that moves between threads per operation pays.
func contextSwitches() -> Int {
    var u = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &u)
    return u.ru_nvcsw + u.ru_nivcsw
}

/// The Central's side of the links benchmark: connects to the `links` Peripherals named
/// "bench-link-<i>." in turn, exchanges ATT_MTU 247 and subscribes to fff1 on each.
/// `opened(i)` is called after link i is up (the caller opens Peripheral i+1 then, or has all
/// advertising already). Returns the streams and the smallest ATT_MTU.
func connectLinks(_ central: Central, _ links: Int, opened: (Int) async throws -> Void = { _ in }) async throws -> ([GATTNotificationStream], Int) {
    var streams: [GATTNotificationStream] = []
    var mtu = 517  // the smallest ATT_MTU of the links (244-octet values need 247)
    for i in 0..<links {
        let name = "bench-link-\(i)."
        let adv = try await central.find(ScanFilter(nameContains: name), timeout: .seconds(10), describe: "name \(name)")
        let remote = try await central.connect(to: adv.address)
        mtu = min(mtu, try await remote.exchangeMTU(247))
        let tree = try await remote.discoverAll()
        streams.append(try await remote.notifications(for: characteristic(tree, DemoProfile.ticker)))
        try await opened(i)
    }
    return (streams, mtu)
}

/// Counts what each stream receives, up to `perLink` values each.
func countNotifications(_ streams: [GATTNotificationStream], perLink: Int) -> [Task<Int, Never>] {
    streams.map { values in
        Task { () -> Int in
            var count = 0
            do { for try await _ in values { count += 1; if count == perLink { break } } } catch {}
            return count
        }
    }
}

/// Waits for the counters; what has not arrived `within` seconds from now is counted lost.
/// Returns the total received and when the last counter ended.
func collect(_ counters: [Task<Int, Never>], within seconds: Double) async -> (Int, Double) {
    let timeout = Task { try? await Task.sleep(for: .milliseconds(Int(seconds * 1000))); for c in counters { c.cancel() } }
    var received = 0
    for c in counters { received += await c.value }
    timeout.cancel()
    return (received, now())
}

/// Opens Peripheral `i` (demo profile) on `transport`, advertising "bench-link-<i>.".
func openPeripheral(_ i: Int, _ transport: any HCITransport) async throws -> Peripheral {
    let name = "bench-link-\(i)."
    let p = try await Peripheral.open(transport, services: DemoProfile.services, name: name)
    try await p.startAdvertising(AdvertisingOptions(name: name, serviceUUIDs: DemoProfile.advertisedServices))
    return p
}

/// Each Peripheral sends `rate` values/s of 244 octets for `seconds`, in ticks of 25 ms
/// (rate / 40 per tick), on schedule. Returns the number sent.
func sendSchedule(_ peripherals: [Peripheral], rate: Int, seconds: Int) async -> Int {
    let value = [UInt8](repeating: 0x5A, count: 244)
    let ticks = seconds * 40, perTick = rate / 40
    let start = ContinuousClock.now
    await withTaskGroup(of: Void.self) { group in
        for p in peripherals {
            group.addTask {
                for tick in 0..<ticks {
                    try? await Task.sleep(until: start.advanced(by: .milliseconds(25 * tick)), clock: .continuous)
                    for _ in 0..<perTick { _ = try? await p.notify(value, for: DemoProfile.ticker) }
                }
            }
        }
    }
    return peripherals.count * ticks * perTick
}

/// One Central and `links` Peripherals on one in-process virtual link, every stack in this
/// process: each Peripheral notifies `rate` values/s for `seconds`; the Central counts what
/// arrives per link. CPU is the whole process's (the Central's host, the Peripherals' hosts and
/// the virtual controllers), divided by the number of links.
func benchLinks(_ links: Int, rate: Int, seconds: Int, aclDataLength: Int) async throws {
    let (_, transports) = VirtualLink.inProcess(count: links + 1, aclDataLength: aclDataLength)
    let central = try await Central.open(transports[links])
    var peripherals = [try await openPeripheral(0, transports[0])]
    var anonAfterFirst = 0
    let (streams, mtu) = try await connectLinks(central, links) { i in
        if i == 0 { anonAfterFirst = anonymousKiB() }
        if i + 1 < links { peripherals.append(try await openPeripheral(i + 1, transports[i + 1])) }
    }
    let anonAll = anonymousKiB()
    let counters = countNotifications(streams, perLink: seconds * 40 * (rate / 40))
    let cpu0 = cpuSeconds(), t0 = now()
    let sent = await sendSchedule(peripherals, rate: rate, seconds: seconds)
    let sendSeconds = now() - t0
    // Whatever has not arrived 2 s after the last send is counted lost.
    let (received, _) = await collect(counters, within: 2)
    let cpu = cpuSeconds() - cpu0, wall = now() - t0
    print("metric=links links=\(links) acl_data_length=\(aclDataLength) att_mtu=\(mtu) sent=\(sent) received=\(received) lost=\(sent - received) "
          + "send_seconds=\(String(format: "%.2f", sendSeconds)) cpu_seconds=\(String(format: "%.2f", cpu)) wall_seconds=\(String(format: "%.2f", wall)) "
          + "cpu_percent_per_link=\(String(format: "%.2f", 100 * cpu / wall / Double(links))) "
          + "anon_kib_first_link=\(anonAfterFirst) anon_kib_all=\(anonAll) "
          + "anon_kib_per_extra_link=\(links > 1 ? (anonAll - anonAfterFirst) / (links - 1) : 0)")
    await central.close()
    for p in peripherals { await p.close() }
}

/// The same exchange with the Central in its own process, so that its CPU is its own: this
/// process keeps the virtual link, the 32 Peripherals and their controllers, and serves the
/// Central's controller as H4 over TCP (`H4Server`, as `ble-hci controllers` does); the child
/// (`links-central`) runs the Central over `TCPTransport` and measures its own CPU. The
/// Central's figure therefore includes its transport (socket reads and writes, H4 framing),
/// as a host on a real controller has.
func benchLinksSplit(_ links: Int, rate: Int, seconds: Int, aclDataLength: Int) async throws {
    let link = VirtualLink(mode: .live)
    let transports = (0..<links).map { _ in InProcessTransport(controller: link.addController(aclDataLength: aclDataLength)) }
    let server = try H4Server(link: link, listen: ["tcp:127.0.0.1:0"], aclDataLength: aclDataLength)
    server.start()
    defer { server.stop() }
    var peripherals: [Peripheral] = []
    for i in 0..<links { peripherals.append(try await openPeripheral(i, transports[i])) }
    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    child.arguments = ["links-central", server.listeners[0].boundSpec, "\(links)", "\(rate)", "\(seconds)"]
    let out = Pipe(), control = Pipe()
    child.standardOutput = out
    child.standardInput = control
    try child.run()
    // The child prints "ready" once every link is subscribed, then its figures at the end.
    let lines = AsyncStream<String> { c in
        Thread.detachNewThread {
            var pending = ""
            while true {
                let d = out.fileHandleForReading.availableData
                if d.isEmpty { break }
                pending += String(decoding: d, as: UTF8.self)
                while let nl = pending.firstIndex(of: "\n") {
                    c.yield(String(pending[..<nl]))
                    pending = String(pending[pending.index(after: nl)...])
                }
            }
            c.finish()
        }
    }
    var it = lines.makeAsyncIterator()
    guard await it.next() == "ready" else { throw CaptureError("links-central did not get ready") }
    let cpu0 = cpuSeconds(), t0 = now()
    let sent = await sendSchedule(peripherals, rate: rate, seconds: seconds)
    let sendSeconds = now() - t0
    control.fileHandleForWriting.write(Data("sent\n".utf8))  // the child counts 2 s more
    var centralLine = ""
    while let l = await it.next() { if l.hasPrefix("metric=") { centralLine = l } }
    child.waitUntilExit()
    let cpu = cpuSeconds() - cpu0, wall = now() - t0
    func field(_ name: String) -> String {
        centralLine.split(separator: " ").first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) } ?? "?"
    }
    print("metric=links-split links=\(links) acl_data_length=\(aclDataLength) sent=\(sent) received=\(field("received")) lost=\(sent - (Int(field("received")) ?? 0)) "
          + "send_seconds=\(String(format: "%.2f", sendSeconds)) "
          + "central_cpu_seconds=\(field("cpu_seconds")) central_wall_seconds=\(field("wall_seconds")) "
          + "central_cpu_percent_per_link=\(field("cpu_percent_per_link")) "
          + "peripherals_cpu_seconds=\(String(format: "%.2f", cpu)) peripherals_cpu_percent_per_link=\(String(format: "%.2f", 100 * cpu / wall / Double(links))) "
          + "central_anon_kib_first_link=\(field("anon_kib_first_link")) central_anon_kib_all=\(field("anon_kib_all")) "
          + "central_anon_kib_per_extra_link=\(field("anon_kib_per_extra_link"))")
    for p in peripherals { await p.close() }
}

/// The child of `links-split`: the Central over H4/TCP at `spec`.
func benchLinksCentral(spec: String, _ links: Int, rate: Int, seconds: Int) async throws {
    guard case .tcp(let host, let port) = try TransportSpec(parsing: spec) else { throw CaptureError("\(spec): tcp:HOST:PORT expected") }
    let central = try await Central.open(try TCPTransport.connect(host: host, port: port))
    var anonAfterFirst = 0
    let (streams, _) = try await connectLinks(central, links) { i in if i == 0 { anonAfterFirst = anonymousKiB() } }
    let anonAll = anonymousKiB()
    let counters = countNotifications(streams, perLink: seconds * 40 * (rate / 40))
    print("ready")
    fflush(nil)
    let cpu0 = cpuSeconds(), t0 = now()
    // The parent starts sending on "ready" and writes "sent" on stdin when its schedule is
    // done: what has not arrived 2 s later is counted lost.
    await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
        Thread.detachNewThread { _ = readLine(); c.resume() }  // not a pool thread: it blocks
    }
    let (received, last) = await collect(counters, within: 2)
    let cpu = cpuSeconds() - cpu0, wall = last - t0
    print("metric=links-central links=\(links) received=\(received) cpu_seconds=\(String(format: "%.2f", cpu)) wall_seconds=\(String(format: "%.2f", wall)) "
          + "cpu_percent_per_link=\(String(format: "%.2f", 100 * cpu / wall / Double(links))) "
          + "anon_kib_first_link=\(anonAfterFirst) anon_kib_all=\(anonAll) "
          + "anon_kib_per_extra_link=\(links > 1 ? (anonAll - anonAfterFirst) / (links - 1) : 0)")
    fflush(nil)
    await central.close()
}

/// Repeats the records of `input` until `count` packets, in btsnoop 1002 with increasing times.
func makeCapture(input: String, output: String, count: Int) throws {
    var reader = try CaptureReader(path: input)
    var packets: [(HCIPacket, Direction)] = []
    while let r = try reader.next() {
        if case .packet(.success(let p)) = r.content { packets.append((p, r.direction ?? .sent)) }
    }
    precondition(!packets.isEmpty, "\(input) has no HCI packets")
    var out = BtsnoopWriter.fileHeader()
    out.reserveCapacity(count * 40)
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    for i in 0..<count {
        let (p, d) = packets[i % packets.count]
        out += BtsnoopWriter.record(p, direction: d, time: start.addingTimeInterval(Double(i) * 0.001))
    }
    guard FileManager.default.createFile(atPath: output, contents: Data(out)) else {
        throw CaptureError("cannot write \(output)")
    }
    print("capture=\(output) packets=\(count) bytes=\(out.count)")
}

let args = CommandLine.arguments
func usage() -> Never {
    FileHandle.standardError.write(Data("usage: ble-hci-bench reads N | notifications N | notifications-queued N | pool-hops N | reads-on-stack N | notifications-on-stack N | reads-in-stack N | notifications-in-stack N | capture IN OUT N | varied OUT N [SEED] | links L [RATE SECONDS [ACL_DATA_LENGTH]] | links-split L [RATE SECONDS [ACL_DATA_LENGTH]] | airtime\n".utf8))
    exit(2)
}
if args.count == 2 && args[1] == "airtime" {
    do { try benchAirtime() } catch {
        FileHandle.standardError.write(Data("ble-hci-bench: \(error)\n".utf8))
        exit(1)
    }
    exit(0)
}
guard args.count >= 3 else { usage() }
do {
    switch args[1] {
    case "reads", "reads-on-stack", "reads-in-stack":
        try await benchReads(Int(args[2]) ?? 10_000, Placement(rawValue: String(args[1].dropFirst("reads".count)))!)
    case "notifications", "notifications-on-stack", "notifications-in-stack":
        try await benchNotifications(Int(args[2]) ?? 10_000, Placement(rawValue: String(args[1].dropFirst("notifications".count)))!)
    case "notifications-queued":
        try await benchNotifications(Int(args[2]) ?? 10_000, .pool, queued: true)
    case "pool-hops": await benchPoolHops(Int(args[2]) ?? 10_000)
    case "links", "links-split":
        // links L [RATE SECONDS [ACL_DATA_LENGTH]]: 27-octet ACL buffers by default, 251 with
        // Data Length Extension (the issue's "251-octet PDUs").
        let n = Int(args[2]) ?? 32, rate = args.count > 3 ? Int(args[3]) ?? 720 : 720
        let seconds = args.count > 4 ? Int(args[4]) ?? 5 : 5, length = args.count > 5 ? Int(args[5]) ?? 27 : 27
        if args[1] == "links" { try await benchLinks(n, rate: rate, seconds: seconds, aclDataLength: length) }
        else { try await benchLinksSplit(n, rate: rate, seconds: seconds, aclDataLength: length) }
    case "links-central" where args.count == 6:
        try await benchLinksCentral(spec: args[2], Int(args[3]) ?? 32, rate: Int(args[4]) ?? 720, seconds: Int(args[5]) ?? 5)
    case "capture" where args.count == 5: try makeCapture(input: args[2], output: args[3], count: Int(args[4]) ?? 500_000)
    case "varied" where args.count == 4 || args.count == 5:
        try makeVariedCapture(output: args[2], count: Int(args[3]) ?? 50_000,
                              seed: args.count == 5 ? UInt64(args[4]) ?? 1 : 1)
    default: usage()
    }
} catch {
    FileHandle.standardError.write(Data("ble-hci-bench: \(error)\n".utf8))
    exit(1)
}
exit(0)
