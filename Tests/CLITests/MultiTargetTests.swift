import Foundation
import Testing
import TestSupport

extension CLITests {
    /// Issue 27: `central` with several targets finds, connects and serves them at once; each
    /// link is reported by its `connection` (and its `target`), and one target that is not
    /// there fails the run without stopping the others.
    @Suite(.serialized) struct MultiTarget {
        /// Three virtual controllers: two demo peripherals ("left", "right") and the central.
        func withThree<T>(_ body: (_ central: String) async throws -> T) async throws -> T {
            let (controllers, specs) = try await startControllers(3)
            defer { controllers.stop(grace: 0.5) }
            var peripherals: [ChildProcess] = []
            defer { for p in peripherals { p.stop(grace: 0.5) } }
            for (spec, name) in zip(specs, ["left", "right"]) {
                let p = try BleHCI.start(["-t", spec, "peripheral", "--profile", "demo", "--name", name, "--json"], lifetime: 90)
                peripherals.append(p)
                _ = try await p.nextEvent("advertising", timeout: 10)
            }
            return try await body(specs[2])
        }

        @Test func twoTargetsAreReadAtOnce() async throws {
            try await withThree { central in
                let r = try await BleHCI.run(["-t", central, "central", "name:left", "name:right", "--read", "fff2", "--json"], timeout: 40)
                expectStatus(r, 0, "central of two targets")
                let connected = r.events("connected")
                #expect(Set(connected.compactMap { $0["target"] as? String }) == ["name:left", "name:right"])
                let connections = connected.compactMap { $0["connection"] as? Int }
                #expect(connections.count == 2 && Set(connections).count == 2, "one link per target: \(connected)")
                // The demo profile's fff2 starts as "ble-hci" (Sources/BLE/Profiles/DemoProfile.swift's table).
                let reads = r.events("read")
                #expect(reads.count == 2)
                #expect(reads.allSatisfy { $0["value"] as? String == Array("ble-hci".utf8).hex })
                #expect(Set(reads.compactMap { $0["connection"] as? Int }) == Set(connections))
                #expect(Set(r.events("disconnected").compactMap { $0["connection"] as? Int }) == Set(connections))
            }
        }

        /// The same against an independent peer: two Bumble peripherals (Tools/bumble/peripheral.py)
        /// on two controllers, read and subscribed at once. Each Bumble reports its own connection,
        /// the subscription our central wrote to its CCCD (Core v5.4 Vol 3 Part G 4.10) and the
        /// values it notified; our central must report exactly those values on that link.
        @Test func twoBumblePeripheralsAreServedAtOnce() async throws {
            let (controllers, specs) = try await startControllers(3)
            defer { controllers.stop(grace: 0.5) }
            let peers = [try await BumblePeer.start(on: specs[0], name: "bumble-a", address: "C0:27:00:00:00:0A", extra: ["--notify-count", "3"]),
                         try await BumblePeer.start(on: specs[1], name: "bumble-b", address: "C0:27:00:00:00:0B", extra: ["--notify-count", "3"])]
            defer { for peer in peers { peer.process.stop(grace: 0.5) } }
            let r = try await BleHCI.run(["-t", specs[2], "central", "name:bumble-a", "name:bumble-b", "--read", "2a38",
                                          "--subscribe", "2a37", "--count", "3", "--json"], timeout: 60)
            expectStatus(r, 0, "central of two Bumble peripherals")
            let connected = r.events("connected")
            #expect(Set(connected.compactMap { $0["target"] as? String }) == ["name:bumble-a", "name:bumble-b"])
            // 2a38 Body Sensor Location is 01 in Bumble's database (peripheral.py).
            #expect(r.events("read").map { $0["value"] as? String } == ["01", "01"])
            for peer in peers {
                let link = try #require(connected.first { ($0["address"] as? String)?.uppercased() == peer.address.uppercased() }, "\(connected)")
                _ = try await peer.process.nextEvent("subscribed", timeout: 10)
                var sent: [String] = []
                for _ in 0..<3 { sent.append(try #require(try await peer.process.nextEvent("notified", timeout: 10)["value"] as? String)) }
                let received = r.events("notification").filter { $0["connection"] as? Int == link["connection"] as? Int }
                #expect(received.compactMap { $0["value"] as? String } == sent, "\(peer.name)")
            }
        }

        @Test func aMissingTargetFailsTheRunNotTheOthers() async throws {
            try await withThree { central in
                let r = try await BleHCI.run(["-t", central, "central", "name:left", "name:absent", "--read", "fff2",
                                              "--timeout", "2", "--json"], timeout: 40)
                expectStatus(r, 1, "one target absent")
                #expect(r.events("read").map { $0["target"] as? String } == ["name:left"])
                #expect(r.stderr.split(separator: "\n").contains { $0.contains("[name:absent]") && $0.contains("no advertiser matched") }, "stderr: \(r.stderr)")
            }
        }

        @Test func aTargetGivenTwiceIsAUsageError() async throws {
            let r = try await BleHCI.run(["-t", "tcp:127.0.0.1:1", "central", "name:left", "name:left"])
            expectStatus(r, 2, "the same target twice")
        }
    }
}
