import Foundation
import Testing
import TestSupport
@testable import BLE

/// Every CLI end-to-end test runs its processes one suite at a time: they share 2 cores, and
/// the notification timing checks need a quiet machine.
@Suite(.serialized, .timeLimit(.minutes(5))) struct CLITests {}

extension CLITests {
    /// Issue 7's proof: `ble-hci controllers` + `ble-hci peripheral --profile demo` +
    /// `ble-hci central` as separate processes over TCP on 127.0.0.1.
    @Suite(.serialized) struct CentralAgainstPeripheral {
        @Test func defaultRunPrintsTheDemoTreeExactly() async throws {
            try await withRig { rig in
                let r = try await rig.central(["central", "name:ble-hci", "--json"])
                expectStatus(r, 0, "central name:ble-hci")
                expectPureJSON(r, "central --json")
                let events = r.stdout.compactMap(ChildProcess.json)
                let names = events.compactMap { $0["event"] as? String }
                #expect(names.first == "connected", "events: \(names)")
                #expect(names.last == "disconnected", "events: \(names)")
                #expect(names.filter { $0 == "gatt" }.count == 1, "events: \(names)")
                if let connected = events.first {
                    #expect(connected["address"] as? String == rig.advertising["address"] as? String)
                    #expect((connected["mtu"] as? Int).map { $0 >= 23 } == true, "\(connected)")
                    #expect(connected["handle"] is Int)
                }
                if let last = events.last {
                    #expect(last["reason"] as? String == "0x16", "\(last)")
                    #expect(last["message"] as? String == "Connection Terminated By Local Host", "\(last)")
                }
                let gatt = try #require(r.events("gatt").first)
                try checkDemoTree(gatt)
            }
        }

        /// `controllers` as users get it, with its airtime model (issue 29): the same exchange
        /// over connection events works, only slower.
        @Test func aWriteAndReadOverAirtimeControllers() async throws {
            try await withRig(airtime: []) { rig in
                let value = hexOf("airtime \(Int.random(in: 1000...9999))")
                let r = try await rig.central(["central", "name:ble-hci", "--write", "fff2=\(value)", "--read", "fff2", "--json"])
                expectStatus(r, 0, "central --write fff2 --read fff2 over airtime controllers")
                let names = r.stdout.compactMap(ChildProcess.json).compactMap { $0["event"] as? String }
                #expect(names == ["connected", "write", "read", "disconnected"])
                #expect(r.events("read").first?["value"] as? String == value)
            }
        }

        @Test func writeIsReadBackAndThePeripheralSeesIt() async throws {
            try await withRig { rig in
                let value = hexOf("cli-test \(Int.random(in: 1000...9999))")
                let r = try await rig.central(["central", "name:ble-hci", "--write", "fff2=\(value)", "--read", "fff2", "--json"])
                expectStatus(r, 0, "central --write fff2 --read fff2")
                expectPureJSON(r, "central --json")
                let names = r.stdout.compactMap(ChildProcess.json).compactMap { $0["event"] as? String }
                #expect(names == ["connected", "write", "read", "disconnected"])
                let write = try #require(r.events("write").first)
                #expect(write["uuid"] as? String == "fff2")
                let read = try #require(r.events("read").first)
                #expect(read["uuid"] as? String == "fff2")
                #expect(read["value"] as? String == value)
                #expect(read["handle"] as? Int == write["handle"] as? Int)

                let peripheral = try #require(rig.peripheral)
                let seen = try await peripheral.nextEvent("write", timeout: 5)
                #expect(seen["uuid"] as? String == "fff2")
                #expect(seen["value"] as? String == value)
                // A second central sees the new value too (the peripheral keeps it).
                let again = try await rig.central(["central", "name:ble-hci", "--read", "fff2", "--json"])
                expectStatus(again, 0, "second central --read fff2")
                #expect(again.events("read").first?["value"] as? String == value)
                await peripheral.stopAsync()
                expectPureJSON(lines: peripheral.output, "peripheral --json")
            }
        }

        @Test func refusedWriteAndReadExitOneWithTheATTError() async throws {
            try await withRig { rig in
                let w = try await rig.central(["central", "name:ble-hci", "--write", "ffe1=00", "--json"])
                expectStatus(w, 1, "central --write ffe1=00")
                expectPureJSON(w, "central --json")
                let we = try #require(w.events("error").first, "no error line: \(w.stdout)")
                #expect(we["op"] as? String == "write")
                #expect(we["uuid"] as? String == "ffe1")
                #expect(we["att"] as? String == "0x03")
                #expect(we["message"] as? String == "Write Not Permitted")
                #expect(w.events("write").isEmpty)
                #expect(w.events("disconnected").count == 1, "the central still disconnects cleanly")

                let rd = try await rig.central(["central", "name:ble-hci", "--read", "fff1", "--json"])
                expectStatus(rd, 1, "central --read fff1")
                expectPureJSON(rd, "central --json")
                let re = try #require(rd.events("error").first, "no error line: \(rd.stdout)")
                #expect(re["op"] as? String == "read")
                #expect(re["uuid"] as? String == "fff1")
                #expect(re["att"] as? String == "0x02")
                #expect(re["message"] as? String == "Read Not Permitted")
                #expect(rd.events("read").isEmpty)

                // An action after the failing one is not run.
                let stop = try await rig.central(["central", "name:ble-hci", "--write", "ffe1=00", "--read", "fff2", "--json"])
                expectStatus(stop, 1, "central --write ffe1=00 --read fff2")
                #expect(stop.events("read").isEmpty, "the read after the failed write ran: \(stop.stdout)")
            }
        }

        @Test func subscribeCountsThreeTicksAboutASecondApart() async throws {
            try await withRig { rig in
                let child = try BleHCI.start(["-t", rig.centralSpec, "central", "name:ble-hci",
                                              "--subscribe", "fff1", "--count", "3", "--json"], lifetime: 30)
                defer { child.stop(grace: 0.5) }
                // Stamp each line as it arrives (the stream ends when the child closes stdout;
                // the child is killed after its lifetime at the latest).
                var stamped: [(time: Date, line: String)] = []
                for await line in child.lines { stamped.append((Date(), line)) }
                let status = try await child.exitStatus(timeout: 5)
                let lines = stamped.map(\.line)
                #expect(status == 0, "exit \(status)\n\(lines.joined(separator: "\n"))\n\(child.stderr)")
                expectPureJSON(lines: lines, "central --subscribe --json")
                let notes = stamped.compactMap { s -> (time: Date, object: [String: Any])? in
                    guard let o = ChildProcess.json(s.line), o["event"] as? String == "notification" else { return nil }
                    return (s.time, o)
                }
                #expect(notes.count == 3, "lines: \(lines)")
                for n in notes {
                    #expect(n.object["uuid"] as? String == "fff1")
                    let hex = n.object["value"] as? String ?? ""
                    let bytes = stride(from: 0, to: hex.count, by: 2).compactMap { i -> UInt8? in
                        let s = hex.index(hex.startIndex, offsetBy: i)
                        return UInt8(hex[s..<hex.index(s, offsetBy: min(2, hex.count - i))], radix: 16)
                    }
                    let text = String(decoding: bytes, as: UTF8.self)
                    #expect(text.count == 2 && text.allSatisfy(\.isASCII) && (Int(text).map { (0...59).contains($0) } ?? false),
                            "notification value \(hex) is not a 2-digit second")
                }
                for (a, b) in zip(notes, notes.dropFirst()) {
                    let gap = b.time.timeIntervalSince(a.time)
                    #expect(gap > 0.5 && gap < 1.6, "gap between notifications: \(gap) s")
                }
                let names = lines.compactMap { ChildProcess.json($0)?["event"] as? String }
                #expect(names.first == "connected" && names.last == "disconnected", "\(names)")

                let peripheral = try #require(rig.peripheral)
                let sub = try await peripheral.nextEvent("subscribed", timeout: 5)
                #expect(sub["uuid"] as? String == "fff1")
                #expect(sub["indications"] as? Bool == false)
                let unsub = try await peripheral.nextEvent("unsubscribed", timeout: 5)
                #expect(unsub["uuid"] as? String == "fff1")
                _ = try await peripheral.nextEvent("disconnected", timeout: 5)
                await peripheral.stopAsync()
                expectPureJSON(lines: peripheral.output, "peripheral --json")
            }
        }
    }
}

/// The demo profile's tree as CLI.md and the GATT layer define it, checked field by field.
func checkDemoTree(_ gatt: [String: Any]) throws {
    let services = try #require(gatt["services"] as? [[String: Any]])
    #expect(services.compactMap { $0["uuid"] as? String } == ["1800", "1801", "fff0", "ffe0"])

    struct Expected {
        var uuid: String
        var properties: [String]
        var value: String?     // nil: the central must not print a value
        var valueLength: Int?  // when the value is not fixed
        var descriptors: [(String, String)]
    }
    let expected: [String: [Expected]] = [
        "1800": [Expected(uuid: "2a00", properties: ["read"], value: hexOf("ble-hci"), descriptors: []),
                 Expected(uuid: "2a01", properties: ["read"], value: "0000", descriptors: [])],
        "1801": [Expected(uuid: "2a05", properties: ["indicate"], value: nil, descriptors: [("2902", "0000")]),
                 Expected(uuid: "2b29", properties: ["read", "write"], value: "00", descriptors: []),
                 Expected(uuid: "2b2a", properties: ["read"], value: nil, valueLength: 16, descriptors: [])],
        "fff0": [Expected(uuid: "fff1", properties: ["notify"], value: nil, descriptors: [("2902", "0000")]),
                 Expected(uuid: "fff2", properties: ["read", "write"], value: hexOf("ble-hci"), descriptors: [("2901", hexOf("name"))])],
        "ffe0": [Expected(uuid: "ffe1", properties: ["read"], value: hexOf("read only"), descriptors: [])],
    ]
    var nextHandle = 1
    for s in services {
        let uuid = s["uuid"] as? String ?? "?"
        let start = try #require(s["start"] as? Int, "service \(uuid) has no start")
        let end = try #require(s["end"] as? Int, "service \(uuid) has no end")
        #expect(start == nextHandle, "service \(uuid) starts at \(start), want \(nextHandle)")
        var handle = start + 1
        let chars = try #require(s["characteristics"] as? [[String: Any]], "service \(uuid) has no characteristics list")
        let want = expected[uuid] ?? []
        #expect(chars.compactMap { $0["uuid"] as? String } == want.map(\.uuid), "characteristics of \(uuid)")
        for (c, w) in zip(chars, want) {
            let cu = w.uuid
            #expect(c["handle"] as? Int == handle, "\(cu) declaration handle")
            #expect(c["valueHandle"] as? Int == handle + 1, "\(cu) value handle")
            #expect(c["properties"] as? [String] == w.properties, "\(cu) properties: \(c["properties"] ?? "none")")
            if let v = w.value {
                #expect(c["value"] as? String == v, "\(cu) value")
            } else if let n = w.valueLength {
                #expect((c["value"] as? String)?.count == 2 * n, "\(cu) value length: \(c["value"] ?? "none")")
            } else {
                #expect(c["value"] == nil, "\(cu) has a value but is not readable: \(String(describing: c["value"]))")
            }
            handle += 2
            let ds = try #require(c["descriptors"] as? [[String: Any]], "\(cu) has no descriptors list")
            #expect(ds.compactMap { $0["uuid"] as? String } == w.descriptors.map(\.0), "descriptors of \(cu)")
            for (d, (du, dv)) in zip(ds, w.descriptors) {
                #expect(d["handle"] as? Int == handle, "\(cu)/\(du) handle")
                #expect(d["value"] as? String == dv, "\(cu)/\(du) value")
                handle += 1
            }
        }
        #expect(end == handle - 1, "service \(uuid) ends at \(end), want \(handle - 1)")
        nextHandle = end + 1
    }
}
