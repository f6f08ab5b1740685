import Foundation
import Testing
import TestSupport
import HCI
import VirtualController
@testable import BLE

extension CLITests {
    /// The band profile: `ble-hci central --profile band` against `ble-hci peripheral --profile band`,
    /// and the >512-octet reassembly through the Swift API (the CLI asks for one day only).
    @Suite(.serialized) struct Band {
        @Test func centralPrintsTheDaysRecordsAsTheProtocolDefinesThem() async throws {
            let day = try #require(BandProtocol.Day("2026-03-01"))
            let records = BandProtocol.records(for: day)
            #expect(records.count == 32)
            try await withRig(profile: "band") { rig in
                let r = try await rig.central(["central", "name:ble-hci", "--profile", "band", "--date", "2026-03-01", "--json"])
                expectStatus(r, 0, "central --profile band")
                expectPureJSON(r, "central --profile band --json")
                let total = try #require(r.events("totalSteps").first, "no totalSteps line: \(r.stdout)")
                #expect(total["date"] as? String == "2026-03-01")
                #expect(total["steps"] as? Int == Int(BandProtocol.totalSteps(for: day)))
                let lines = r.events("record")
                #expect(lines.count == 32)
                for (i, (line, want)) in zip(lines, records).enumerated() {
                    #expect(line["date"] as? String == "2026-03-01", "record \(i)")
                    #expect(line["kind"] as? String == (want.kind == .steps ? "steps" : "sleep"), "record \(i)")
                    #expect(line["count"] as? Int == Int(want.count), "record \(i)")
                    #expect(line["hour"] as? Int == Int(want.hour), "record \(i)")
                    #expect(line["minutes"] as? Int == Int(want.minutes), "record \(i)")
                    #expect(line["heartRate"] as? Int == Int(want.heartRate), "record \(i)")
                    #expect(line["intensity"] as? Int == Int(want.intensity), "record \(i)")
                }
                // Known values, independent of the generator: 24 step hours, then the night.
                #expect(lines.prefix(24).compactMap { $0["hour"] as? Int } == Array(0..<24))
                #expect(lines.suffix(8).compactMap { $0["hour"] as? Int } == [23, 0, 1, 2, 3, 4, 5, 6])
                #expect(lines.suffix(8).allSatisfy { $0["kind"] as? String == "sleep" })
                #expect(total["steps"] as? Int == lines.prefix(24).compactMap { $0["count"] as? Int }.reduce(0, +))

                // A different date gives different data.
                let other = try await rig.central(["central", "name:ble-hci", "--profile", "band", "--date", "2026-03-02", "--json"])
                expectStatus(other, 0, "central --profile band --date 2026-03-02")
                let otherCounts = other.events("record").compactMap { $0["count"] as? Int }
                #expect(otherCounts.count == 32)
                #expect(otherCounts != lines.compactMap { $0["count"] as? Int })
                #expect(other.events("totalSteps").first?["steps"] as? Int == Int(BandProtocol.totalSteps(for: day.next)))
            }
        }

        @Test func badDateIsAUsageError() async throws {
            let r = try await BleHCI.run(["-t", "tcp:127.0.0.1:1", "central", "name:x", "--profile", "band", "--date", "2026-02-30"])
            expectStatus(r, 2, "--date 2026-02-30")
            #expect(r.stderr.contains("--help"), "stderr: \(r.stderr)")
        }

        /// A 3-day history is 586 octets: 30 notifications of at most 20 octets, reassembled
        /// from the length in the header, CRC checked (docs/band.md).
        @Test func threeDayHistoryOver512OctetsIsReassembled() async throws {
            let (_, transports) = VirtualLink.inProcess(count: 2)
            var options = StackOptions()
            options.attTimeout = .seconds(5)
            let peripheral = try await BandProfile.openPeripheral(transports[0], name: "band", options: options)
            let central = try await Central.open(transports[1], options: options)
            do {
                try await peripheral.startAdvertising(AdvertisingOptions(name: "band", serviceUUIDs: BandProfile.advertisedServices))
                let adv = try await central.find(ScanFilter(nameContains: "band"), timeout: .seconds(5))
                let remote = try await central.connect(to: adv.address, timeout: .seconds(5))
                _ = try await remote.exchangeMTU(517)
                let tree = try await remote.discoverAll()
                let chars = tree.flatMap(\.characteristics).map(\.characteristic)
                let command = try #require(chars.first { $0.uuid == BandProfile.command })
                let response = try #require(chars.first { $0.uuid == BandProfile.response })
                let notifications = try await remote.notifications(for: response)

                let day = try #require(BandProtocol.Day("2026-12-30"))  // crosses a year end
                try await remote.write(BandProtocol.historyRequest(day, days: 3).bytes, to: command, type: .withResponse)
                let (frame, chunkSizes, pending) = try await withTimeout(.seconds(10), "the 3-day history") { () -> (BandProtocol.Frame?, [Int], Bool) in
                    var reassembler = BandProtocol.Reassembler()
                    var sizes: [Int] = []
                    for try await chunk in notifications {
                        sizes.append(chunk.count)
                        if let f = try reassembler.push(chunk) { return (f, sizes, reassembler.isPending) }
                    }
                    return (nil, sizes, reassembler.isPending)
                }
                let f = try #require(frame, "no complete frame after \(chunkSizes.count) notifications")
                #expect(f.bytes.count == 586)
                #expect(chunkSizes.count == 30)
                #expect(chunkSizes.allSatisfy { $0 <= 20 })
                #expect(chunkSizes.reduce(0, +) == 586)
                let expected = BandProtocol.records(for: day) + BandProtocol.records(for: day.next) + BandProtocol.records(for: day.next.next)
                #expect(day.next.next.description == "2027-01-01")
                #expect(try BandProtocol.parseResponse(f) == .history(day, expected))
                #expect(!pending)

                // A corrupted CRC is refused, not accepted.
                var corrupted = f.bytes
                corrupted[corrupted.count - 1] ^= 0xFF
                var r2 = BandProtocol.Reassembler()
                var threw = false
                do {
                    for chunk in stride(from: 0, to: corrupted.count, by: 20).map({ Array(corrupted[$0..<min($0 + 20, corrupted.count)]) }) {
                        _ = try r2.push(chunk)
                    }
                } catch { threw = true }
                #expect(threw, "a wrong CRC was accepted")

                _ = try await remote.disconnect()
            } catch {
                await central.close()
                await peripheral.close()
                throw error
            }
            await central.close()
            await peripheral.close()
        }
    }
}
