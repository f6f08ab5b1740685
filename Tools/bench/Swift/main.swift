// ble-hci-bench: the Swift side of `make bench` (Tools/bench/run.sh prints the comparison).
//
//   ble-hci-bench reads N          our Central reads a characteristic N times from our Peripheral
//   ble-hci-bench notifications N  our Peripheral notifies N values, our Central counts them
//   ble-hci-bench capture IN OUT N a btsnoop of N packets: IN's records repeated, times increasing
//   ble-hci-bench varied OUT N [SEED] a btsnoop of N packets, no exchange repeated (VariedCapture.swift)
//   ble-hci-bench links L [RATE S]  one Central connected to L Peripherals (one virtual link),
//                                  each notifying RATE values/s (default 720) of 244 octets for
//                                  S seconds (default 5): loss, process CPU, anonymous memory
//
// Each link runs on VirtualLink.inProcess (two virtual controllers, in-process transports).
// Output: one line "metric=<name> count=<n> seconds=<s> rate=<n/s>" on stdout.
import Foundation
import HCI
import Capture
import GATT
import BLE
import VirtualController

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

func report(_ metric: String, count: Int, seconds: Double) {
    print("metric=\(metric) count=\(count) seconds=\(String(format: "%.4f", seconds)) rate=\(String(format: "%.1f", Double(count) / seconds))")
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

func benchReads(_ n: Int) async throws {
    let (peripheral, central, remote, tree) = try await connectedPair()
    let c = characteristic(tree, DemoProfile.name)
    for _ in 0..<min(100, n) { _ = try await remote.read(c) }  // warm-up
    let t0 = now()
    for _ in 0..<n { _ = try await remote.read(c) }
    report("gatt-reads", count: n, seconds: now() - t0)
    await central.close()
    await peripheral.close()
}

func benchNotifications(_ n: Int) async throws {
    let (peripheral, central, remote, tree) = try await connectedPair()
    let c = characteristic(tree, DemoProfile.ticker)
    let values = try await remote.notifications(for: c)
    let counter = Task { () -> (Int, Double) in
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
    let value: [UInt8] = Array("12345678".utf8)
    let t0 = now()
    for _ in 0..<n { await peripheral.notify(value, for: DemoProfile.ticker) }
    // Whatever the central's stream dropped (it buffers 1024) is not counted: give it 2 s.
    let timeout = Task { try? await Task.sleep(for: .seconds(2)); counter.cancel() }
    let (count, last) = await counter.value
    timeout.cancel()
    report("notifications", count: count, seconds: last - t0)
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

/// One Central and `links` Peripherals on one in-process virtual link, every stack in this
/// process: each Peripheral notifies `rate` values/s for `seconds`; the Central counts what
/// arrives per link. CPU is the whole process's (the Central's host, the Peripherals' hosts and
/// the virtual controllers), divided by the number of links.
func benchLinks(_ links: Int, rate: Int, seconds: Int) async throws {
    let (_, transports) = VirtualLink.inProcess(count: links + 1)
    let central = try await Central.open(transports[links])
    var peripherals: [Peripheral] = []
    var streams: [GATTNotificationStream] = []
    var remotes: [RemotePeripheral] = []
    var anonAfterFirst = 0
    var mtu = 517  // the smallest ATT_MTU of the links (244-octet values need 247)
    for i in 0..<links {
        let name = "bench-link-\(i)."
        let p = try await Peripheral.open(transports[i], services: DemoProfile.services, name: name)
        try await p.startAdvertising(AdvertisingOptions(name: name, serviceUUIDs: DemoProfile.advertisedServices))
        let adv = try await central.find(ScanFilter(nameContains: name), timeout: .seconds(10), describe: "name \(name)")
        let remote = try await central.connect(to: adv.address)
        mtu = min(mtu, try await remote.exchangeMTU(247))
        let tree = try await remote.discoverAll()
        streams.append(try await remote.notifications(for: characteristic(tree, DemoProfile.ticker)))
        peripherals.append(p)
        remotes.append(remote)
        if i == 0 { anonAfterFirst = anonymousKiB() }
    }
    let anonAll = anonymousKiB()
    let perLink = rate * seconds
    let counters = streams.map { values in
        Task { () -> Int in
            var count = 0
            do { for try await _ in values { count += 1; if count == perLink { break } } } catch {}
            return count
        }
    }
    let value = [UInt8](repeating: 0x5A, count: 244)
    let cpu0 = cpuSeconds(), t0 = now()
    // Each Peripheral sends its values in ticks of 25 ms (rate / 40 per tick), on schedule.
    let ticks = seconds * 40, perTick = rate / 40
    let start = ContinuousClock.now
    await withTaskGroup(of: Void.self) { group in
        for p in peripherals {
            group.addTask {
                for tick in 0..<ticks {
                    try? await Task.sleep(until: start.advanced(by: .milliseconds(25 * tick)), clock: .continuous)
                    for _ in 0..<perTick { await p.notify(value, for: DemoProfile.ticker) }
                }
            }
        }
    }
    let sendSeconds = now() - t0
    // Whatever has not arrived 2 s after the last send is counted lost.
    let timeout = Task { try? await Task.sleep(for: .seconds(2)); for c in counters { c.cancel() } }
    var received = 0
    for c in counters { received += await c.value }
    timeout.cancel()
    let cpu = cpuSeconds() - cpu0, wall = now() - t0
    let sent = links * ticks * perTick
    print("metric=links links=\(links) att_mtu=\(mtu) sent=\(sent) received=\(received) lost=\(sent - received) "
          + "send_seconds=\(String(format: "%.2f", sendSeconds)) cpu_seconds=\(String(format: "%.2f", cpu)) wall_seconds=\(String(format: "%.2f", wall)) "
          + "cpu_percent_per_link=\(String(format: "%.2f", 100 * cpu / wall / Double(links))) "
          + "anon_kib_first_link=\(anonAfterFirst) anon_kib_all=\(anonAll) "
          + "anon_kib_per_extra_link=\(links > 1 ? (anonAll - anonAfterFirst) / (links - 1) : 0)")
    await central.close()
    for p in peripherals { await p.close() }
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
    FileHandle.standardError.write(Data("usage: ble-hci-bench reads N | notifications N | capture IN OUT N | varied OUT N [SEED] | links L [RATE SECONDS]\n".utf8))
    exit(2)
}
guard args.count >= 3 else { usage() }
do {
    switch args[1] {
    case "reads": try await benchReads(Int(args[2]) ?? 10_000)
    case "notifications": try await benchNotifications(Int(args[2]) ?? 10_000)
    case "links": try await benchLinks(Int(args[2]) ?? 32, rate: args.count > 3 ? Int(args[3]) ?? 720 : 720,
                                       seconds: args.count > 4 ? Int(args[4]) ?? 5 : 5)
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
