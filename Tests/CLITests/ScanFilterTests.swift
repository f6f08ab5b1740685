import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 27: scan filters (RSSI, PHY, manufacturer, service data) and the end-of-scan
    /// summary, against a Bumble advertiser (Tools/bumble/peripheral.py) on Bumble's controllers.
    @Suite(.serialized) struct ScanFilters {
        /// The AD structures of advertising data: length, AD type, data (Core Specification
        /// Supplement v11 Part A 1, "Data Types Definitions and Formats"; Core v5.4 Vol 3 Part C 11).
        static func adStructures(_ hex: String) -> [(type: UInt8, data: [UInt8])] {
            var bytes: [UInt8] = []
            var i = hex.startIndex
            while i < hex.endIndex, let j = hex.index(i, offsetBy: 2, limitedBy: hex.endIndex), let b = UInt8(hex[i..<j], radix: 16) {
                bytes.append(b)
                i = j
            }
            var out: [(UInt8, [UInt8])] = []
            var o = 0
            while o < bytes.count, bytes[o] > 0, o + 1 + Int(bytes[o]) <= bytes.count {
                out.append((bytes[o + 1], Array(bytes[(o + 2)..<(o + 1 + Int(bytes[o]))])))
                o += 1 + Int(bytes[o])
            }
            return out
        }

        @Test func filtersAndSummaryAgainstABumbleAdvertiser() async throws {
            let controllers = try BumbleControllers()
            defer { controllers.stop() }
            // An extended advertiser every 100 ms (primary_advertising_interval_min/max = 100 ms;
            // Bumble's controller sends one advertising report per interval, bumble/controller.py).
            let peer = try PythonScript.start("peripheral.py", ["--transport", controllers.bumbleTransport(0), "--name", "filtered",
                                                                "--interval", "100", "--timeout", "90"])
            defer { peer.stop(grace: 0.5) }
            let ready = try await peer.nextEvent("ready", timeout: 20)
            let ad = Self.adStructures(ready["advertisingData"] as? String ?? "")
            // Manufacturer Specific Data (AD type 0xFF, Supplement Part A 1.4): the company
            // identifier is its first two octets, little-endian.
            let companies = ad.filter { $0.type == 0xFF && $0.data.count >= 2 }.map { UInt16($0.data[0]) | UInt16($0.data[1]) << 8 }
            // Service Data - 16-bit UUID (AD type 0x16, Part A 1.11): the UUID is its first two octets, little-endian.
            let serviceData = ad.filter { $0.type == 0x16 && $0.data.count >= 2 }.map { String(format: "%04x", UInt16($0.data[0]) | UInt16($0.data[1]) << 8) }
            // Complete List of 16-bit Service UUIDs (0x03, Part A 1.1) that are not service data.
            let listedOnly = ad.filter { $0.type == 0x03 }.flatMap { s in stride(from: 0, to: s.data.count - 1, by: 2).map { String(format: "%04x", UInt16(s.data[$0]) | UInt16(s.data[$0 + 1]) << 8) } }
                .filter { !serviceData.contains($0) }
            let company = try #require(companies.first, "the peer advertises no manufacturer data: \(ad)")
            let dataUUID = try #require(serviceData.first, "the peer advertises no service data: \(ad)")
            let otherUUID = try #require(listedOnly.first, "the peer lists no service without service data: \(ad)")
            let absentCompany: UInt16 = companies.contains(0x004C) ? 0x0006 : 0x004C

            func scan(_ filter: [String], seconds: String = "1.5") async throws -> BleHCI.Result {
                let r = try await BleHCI.run(["-t", controllers.transport(1), "scan", "--json", "--duration", seconds] + filter, timeout: 20)
                expectStatus(r, 0, "scan \(filter)")
                expectPureJSON(r, "scan \(filter) --json")
                return r
            }
            func names(_ r: BleHCI.Result) -> [String] { r.events("advertisement").compactMap { $0["name"] as? String } }

            // Bumble's controller reports every advertiser at RSSI -50 dBm and its extended
            // reports with Primary_PHY and Secondary_PHY LE 1M (bumble/controller.py; DESIGN.md).
            let matching: [[String]] = [
                ["--manufacturer", String(format: "0x%04x", company)],
                ["--manufacturer", String(format: "0x%04x", absentCompany), "--manufacturer", String(format: "%04X", company)],
                ["--service-data", dataUUID],
                ["--rssi", "-50"], ["--rssi-min", "-60"],
                ["--phy", "1m"],
            ]
            for f in matching {
                #expect(names(try await scan(f)) == ["filtered"], "scan \(f) should see the peer")
            }
            let excluding: [[String]] = [
                ["--manufacturer", String(format: "0x%04x", absentCompany)],
                ["--service-data", otherUUID],
                ["--rssi", "-49"],
                ["--phy", "2m"], ["--phy", "coded"],
                ["--service-data", dataUUID, "--rssi", "-40"],
            ]
            for f in excluding {
                #expect(names(try await scan(f)).isEmpty, "scan \(f) should not see the peer")
            }

            // The summary, after every filter at once: events about every 100 ms, RSSI -50 throughout.
            let all = try await scan(["--manufacturer", String(format: "0x%04x", company), "--service-data", dataUUID, "--rssi", "-60", "--phy", "1m"],
                                     seconds: "3")
            let summary = try #require(all.events("summary").first, "no summary event: \(all.stdout)")
            #expect(all.stdout.last.flatMap(ChildProcess.json)?["event"] as? String == "summary", "the summary is not the last line")
            let advertisers = summary["advertisers"] as? [[String: Any]] ?? []
            #expect(advertisers.count == 1, "summary: \(summary)")
            let a = try #require(advertisers.first)
            #expect(a["address"] as? String == ready["address"] as? String && a["addressType"] as? String == "random")
            #expect(a["name"] as? String == "filtered")
            #expect(a["rssiMin"] as? Int == -50 && a["rssiMax"] as? Int == -50, "RSSI range: \(a)")
            #expect(a["phy"] as? String == "1m")
            let events = a["events"] as? Int ?? 0
            #expect((15...40).contains(events), "\(events) advertising events in 3 s at 100 ms")
            let interval = a["intervalUs"] as? Int ?? 0
            #expect((80_000...125_000).contains(interval), "measured interval \(interval) µs, configured 100 ms: \(a)")
            let shortest = a["intervalMinUs"] as? Int ?? 0
            #expect(shortest > 0 && shortest <= interval)
            #expect((summary["durationMs"] as? Int ?? 0) >= 2900)
        }

        @Test(arguments: [
            ["--rssi", "30"], ["--rssi-min", "loud"], ["--phy", "3m"], ["--manufacturer", "0x12345"],
            ["--manufacturer", "apple"], ["--service-data", "zz"],
        ])
        func badFilterValuesAreUsageErrors(_ filter: [String]) async throws {
            let r = try await BleHCI.run(["-t", "tcp:127.0.0.1:1", "scan"] + filter)
            expectStatus(r, 2, "scan \(filter)")
            #expect(r.stderr.contains("--help") && r.stderr.contains(filter[0]), "stderr: \(r.stderr)")
        }
    }
}
