import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 30: `advertise` (the broadcaster, with a periodic train) and `scan --sync`, against
    /// our controllers and against Bumble (its host's periodic advertiser and sync, bumble.device;
    /// its controller, bumble/controller.py), through Tools/bumble/periodic.py.
    @Suite(.serialized) struct Periodic {
        /// AD structures of `count` octets: Manufacturer Specific Data (0xFF) structures of at
        /// most 255 octets each (Core v5.4 Vol 3 Part C 11: length octet, type, value).
        static func adStructures(_ count: Int) -> String {
            var out: [UInt8] = []
            var seed: UInt8 = 1
            while out.count < count {
                let length = min(254, count - out.count - 1)
                out += [UInt8(length), 0xFF] + (0..<(length - 1)).map { _ in seed &+= 3; return seed }
            }
            return out.hex
        }

        /// Our broadcaster's 600-octet train (three LE Set Periodic Advertising Data fragments of
        /// at most 252, Core v5.4 Vol 4 Part E 7.8.62) reaches our scanner whole (from reports of
        /// at most 247 octets, 7.7.65.15), N times, and the sync is terminated. tshark (the
        /// independent decoder) finds in the scanner's capture one Create Sync (0x2044), one
        /// Sync Established (subevent 0x0E) and one Terminate Sync (0x2046), and `dump` names them.
        @Test func ourBroadcasterToOurScannerWithReassembly() async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            let train = Self.adStructures(600)
            let advertiser = try BleHCI.start(["-t", specs[0], "--json", "advertise", "--name", "train", "--data", "05ff4c000102",
                                               "--periodic-data", train, "--periodic-interval", "30", "--duration", "20"])
            defer { advertiser.stop(grace: 0.5) }
            let advertising = try await advertiser.nextEvent("advertising", timeout: 10)
            #expect(advertising["periodicData"] as? String == train)
            // The set's data: Complete Local Name (0x09) "train", then --data as given.
            #expect(advertising["data"] as? String == "0609" + hexOf("train") + "05ff4c000102")
            #expect(advertising["periodicInterval"] as? Int == 24)  // 30 ms in 1.25 ms units

            let dir = try TempDir()
            let capture = dir.path("sync.btsnoop")
            let r = try await BleHCI.run(["-t", specs[1], "-w", capture, "--json", "scan", "--sync", "name:train", "--count", "3"], timeout: 30)
            expectStatus(r, 0, "scan --sync")
            expectPureJSON(r, "scan --sync --json")
            let sync = try #require(r.events("periodicSync").first)
            #expect(sync["address"] as? String == advertising["address"] as? String)
            #expect(sync["interval"] as? Int == 24)
            let reports = r.events("periodicReport")
            #expect(reports.count == 3)
            #expect(reports.allSatisfy { $0["data"] as? String == train && $0["sync"] as? Int == sync["sync"] as? Int && $0["truncated"] == nil })

            let rows = try Tshark.fields(capture, ["bthci_cmd.opcode", "bthci_evt.le_meta_subevent"])
            #expect(rows.filter { $0.first == "0x2044" }.count == 1, "LE Periodic Advertising Create Sync")
            #expect(rows.filter { $0.first == "0x2046" }.count == 1, "LE Periodic Advertising Terminate Sync")
            #expect(rows.filter { $0.count > 1 && $0[1] == "0x0e" }.count == 1, "LE Periodic Advertising Sync Established")
            #expect(rows.filter { $0.count > 1 && $0[1] == "0x0f" }.count >= 9, "LE Periodic Advertising Report: 3 per advertisement")
            let dump = try await BleHCI.run(["dump", capture])
            for name in ["LE Periodic Advertising Create Sync", "LE Periodic Advertising Sync Established", "LE Periodic Advertising Report",
                         "LE Periodic Advertising Terminate Sync"] {
                #expect(dump.stdout.contains { $0.contains(name) }, "dump names \(name)")
            }
        }

        /// Bumble's periodic advertiser (its host and controller) → our `scan --sync`: the data its
        /// host set are the data we print.
        @Test func bumbleBroadcasterToOurScanner() async throws {
            let controllers = try await BumbleControllers.start()
            defer { controllers.stop() }
            let train = Self.adStructures(40)
            let peer = try PythonScript.start("periodic.py", ["--transport", controllers.bumbleTransport(0), "--timeout", "60",
                                                              "advertise", "--name", "btrain", "--data", train])
            defer { peer.stop(grace: 0.5) }
            let ready = try await peer.nextEvent("ready", timeout: 20)
            let r = try await BleHCI.run(["-t", controllers.transport(1), "--json", "scan", "--sync", "name:btrain", "--count", "2"], timeout: 30)
            expectStatus(r, 0, "scan --sync against Bumble")
            #expect(r.events("periodicSync").first?["address"] as? String == ready["address"] as? String)
            #expect(r.events("periodicReport").map { $0["data"] as? String } == [train, train])
        }

        /// Our broadcaster on Bumble's controller → Bumble's host synchronises
        /// (Device.create_periodic_advertising_sync) and receives our train.
        @Test func ourBroadcasterToBumbleScanner() async throws {
            let controllers = try await BumbleControllers.start()
            defer { controllers.stop() }
            let train = Self.adStructures(100)
            let advertiser = try BleHCI.start(["-t", controllers.transport(0), "--json", "advertise", "--name", "ours",
                                               "--periodic-data", train, "--duration", "20"])
            defer { advertiser.stop(grace: 0.5) }
            let advertising = try await advertiser.nextEvent("advertising", timeout: 10)
            let address = "\(advertising["address"] as? String ?? "")/\(advertising["addressType"] as? String ?? "")"
            let peer = try PythonScript.start("periodic.py", ["--transport", controllers.bumbleTransport(1), "--timeout", "20",
                                                              "sync", "--address", address, "--sid", "0", "--count", "2"])
            defer { peer.stop(grace: 0.5) }
            _ = try await peer.nextEvent("synchronised", timeout: 15)
            for _ in 0..<2 {
                let report = try await peer.nextEvent("periodicReport", timeout: 10)
                #expect(report["data"] as? String == train && report["truncated"] as? Bool == false)
            }
            _ = try await peer.nextEvent("terminated", timeout: 10)
        }

        /// Bumble's hosts on both sides, over our controllers: Bumble's periodic advertiser sets
        /// 250 octets in one command; our controller sends them in reports of 247 and 3 (Data_Status
        /// 0b01 then 0b00, 7.7.65.15), which Bumble's host joins back into what was set.
        @Test func bumbleHostsOverOurControllers() async throws {
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            func bumble(_ spec: String) -> String { "tcp-client:" + spec.dropFirst("tcp:".count) }
            let train = Self.adStructures(250)
            let advertiser = try PythonScript.start("periodic.py", ["--transport", bumble(specs[0]), "--timeout", "60",
                                                                    "advertise", "--name", "btrain", "--sid", "5", "--data", train])
            defer { advertiser.stop(grace: 0.5) }
            let ready = try await advertiser.nextEvent("ready", timeout: 20)
            let address = "\(ready["address"] as? String ?? "")/random"
            let peer = try PythonScript.start("periodic.py", ["--transport", bumble(specs[1]), "--timeout", "20",
                                                              "sync", "--address", address, "--sid", "5", "--count", "2"])
            defer { peer.stop(grace: 0.5) }
            let synchronised = try await peer.nextEvent("synchronised", timeout: 15)
            #expect(synchronised["sid"] as? Int == 5)
            for _ in 0..<2 {
                let report = try await peer.nextEvent("periodicReport", timeout: 10)
                #expect(report["data"] as? String == train && report["truncated"] as? Bool == false)
            }
        }

        /// Usage errors (exit 2) name what is wrong; a TARGET with legacy advertising (no
        /// Advertising SID, 7.7.65.13) has no train: exit 1, saying so.
        @Test func badArgumentsAndATargetWithoutATrain() async throws {
            for (args, says) in [(["advertise", "--data", "05ff4c00"], "says 5 octets follow"),
                                 (["advertise", "--periodic-data", "00"], "length 0"),
                                 (["advertise", "--periodic-interval", "50"], "goes with --periodic-data"),
                                 (["advertise", "--interval", "5"], "20 to 10240 ms"),
                                 (["advertise", "--periodic-data", Self.adStructures(1651)], "at most 1650"),
                                 (["scan", "--count", "3"], "goes with --sync"),
                                 (["scan", "--sync", "name:x", "--name", "y"], "with --sync TARGET give only")] {
                let r = try await BleHCI.run(["-t", "tcp:127.0.0.1:1"] + args)
                expectStatus(r, 2, "\(args.prefix(2))")
                #expect(r.stderr.contains(says), "\(args.prefix(2)): \(r.stderr)")
            }
            let (controllers, specs) = try await startControllers(2)
            defer { controllers.stop(grace: 0.5) }
            let peripheral = try BleHCI.start(["-t", specs[0], "--json", "peripheral", "--name", "legacy", "--duration", "20"])
            defer { peripheral.stop(grace: 0.5) }
            _ = try await peripheral.nextEvent("advertising", timeout: 10)
            let r = try await BleHCI.run(["-t", specs[1], "scan", "--sync", "name:legacy", "--count", "1"], timeout: 30)
            expectStatus(r, 1, "scan --sync to a legacy advertiser")
            #expect(r.stderr.contains("no periodic train"), "\(r.stderr)")
        }
    }
}
