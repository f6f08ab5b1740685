import Foundation
import Testing
import TestSupport
import HCI
import GATT
@testable import VirtualController
@testable import BLE

/// Our stacks over a live in-process link with the airtime model (issue 29): a notification
/// stream is paced by the air, at most the PDUs per connection event the PHY timings allow
/// (Core v5.4 Vol 6 Part B 2.1, 4.1.1, 4.5.6), not by the CPU.
@Suite(.timeLimit(.minutes(1))) struct AirtimeStackTests {
    @Test func aNotificationStreamStaysWithinTheLinksLimit() async throws {
        // 64 buffers: the air, not the controller's buffers, is what limits the stream.
        let (link, transports) = VirtualLink.inProcess(count: 2, aclBuffers: 64, airtime: Airtime.Configuration())
        var options = StackOptions()
        options.attTimeout = .seconds(5)
        let peripheral = try await Peripheral.open(transports[0], services: DemoProfile.services, name: "air", options: options)
        let central = try await Central.open(transports[1], options: options)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "air", serviceUUIDs: DemoProfile.advertisedServices))
        let adv = try await central.find(ScanFilter(nameContains: "air"), timeout: .seconds(10))
        let remote = try await central.connect(to: adv.address)
        let tree = try await remote.discoverAll()
        let ticker = try #require(tree.lazy.flatMap(\.characteristics).first { $0.characteristic.uuid == DemoProfile.ticker })
        let n = 1500
        let values = try await remote.notifications(for: ticker.characteristic, bufferLimit: n)
        try await peripheral.until("subscribed") { $0.subscribers(of: DemoProfile.ticker).count == 1 }

        // The link's interval, as the controllers use it (the host asks, the central's controller picks).
        let intervalUnits = try #require(await withCheckedContinuation { (c: CheckedContinuation<UInt16?, Never>) in
            link.perform { ctx in c.resume(returning: ctx.controllers[1].connections.values.first?.interval) }
        })
        let interval = Double(intervalUnits) * 1.25e-3
        // 20-octet values: ATT header 3 + L2CAP header 4 = 27 octets, one PDU on a link with the
        // default data length (27, Vol 6 Part B 4.5.10), on LE 1M. Exchange: 296 µs data + 150
        // T_IFS + 80 µs empty + 150 T_IFS = 676 µs (Vol 6 Part B 2.1, 4.1.1).
        let perEvent = Airtime.pdusPerEvent(octets: 27, phy: .le1M, eventLength: interval)
        let arrivals = Watched<[Double]>([])
        let counter = Task {
            do {
                for try await _ in values {
                    let count = arrivals.withLock { times in
                        times.append(Double(DispatchTime.now().uptimeNanoseconds) / 1e9)
                        return times.count
                    }
                    if count == n { break }
                }
            } catch {}
        }
        let value = [UInt8](repeating: 0x42, count: 20)
        for _ in 0..<n { try await peripheral.notify(value, for: DemoProfile.ticker) }
        // The air paces them (real time, the live link's clock): each arrival wakes the wait.
        _ = try? await arrivals.until("\(n) notifications", timeout: .seconds(20)) { $0.count == n }
        counter.cancel()
        let times = arrivals.value
        #expect(times.count == n, "\(times.count) of \(n) notifications arrived")
        let span = try #require(times.last) - times[0]
        // Events spanned by the arrivals: at most span / interval + 1 (and one more for a late
        // timer of the live clock); each carries at most `perEvent` packets.
        let bound = Double(perEvent) * (span / interval + 2)
        #expect(Double(times.count) <= bound, "\(times.count) in \(span) s: over \(perEvent) per \(interval * 1000) ms event")
        // And the air is what paced it: not far below the limit either (the stack keeps up).
        let limit = Double(perEvent) / interval
        #expect(Double(times.count) / span >= 0.3 * limit, "\(Double(times.count) / span) per second, limit \(limit)")
        await central.close()
        await peripheral.close()
    }
}
