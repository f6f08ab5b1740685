import Foundation
import Testing
import TestSupport

/// The octets of each data channel PDU with an L2CAP payload (LLID 0b01 or 0b10, Vol 6 Part B
/// 2.4), one direction (pseudo-header PDU type 2 central → peripheral, 3 back), in order.
private func dataPayload(_ air: [Tshark.Frame], pduType: Int) -> [UInt8] {
    var out: [UInt8] = []
    for f in air where f.int("btle_rf.pdu_type") == pduType {
        guard let llid = f.int("btle.data_header.llid"), llid == 1 || llid == 2, let n = f.int("btle.data_header.length") else { continue }
        // Pseudo-header 10, access address 4, header 2, then the payload.
        out += f.raw.dropFirst(16).prefix(n)
    }
    return out
}

/// The data of the HCI ACL packets of an HCI capture (pcap 201) one way (H4 direction 0 sent, 1 received).
private func aclData(_ hci: [Tshark.Frame], direction: Int) -> [UInt8] {
    var out: [UInt8] = []
    for f in hci where f.has("bthci_acl") && f.int("hci_h4.direction") == direction {
        guard let n = f.int("bthci_acl.length") else { continue }
        // Direction 4, H4 type 1, handle 2, length 2, then the data.
        out += f.raw.dropFirst(9).prefix(n)
    }
    return out
}

extension CLITests {
    /// Issue 28: the air view. tshark reads each air capture without a malformed packet or an
    /// incorrect CRC and agrees with the controllers' own HCI captures (decoded by tshark too)
    /// on what went over the air.
    @Suite(.serialized) struct AirCapture {
        /// `demo --air FILE`: ADV_IND carries the advertised name, SCAN_REQ/SCAN_RSP, CONNECT_IND
        /// with the interval, latency and timeout of LE Enhanced Connection Complete and the
        /// access address the data PDUs use, data PDUs whose payloads are each side's HCI ACL
        /// data, LL_TERMINATE_IND with the HCI Disconnect's reason (Vol 6 Part B 2.3.1, 2.3.2,
        /// 2.3.3.1, 2.4, 2.4.2.2).
        @Test(arguments: [false, true])
        func demoAirMatchesTheHCICaptures(airtime: Bool) async throws {
            let dir = try TempDir()
            let air = dir.path("air.pcap"), hci = dir.path("demo.pcap")
            let r = try await BleHCI.run(["demo", "--air", air, "-w", hci] + (airtime ? ["--airtime"] : []), timeout: 30)
            expectStatus(r, 0, "ble-hci demo --air")
            let frames = try Tshark.frames(air)
            expectSoundAirCapture(frames)
            let central = try Tshark.frames(hci)
            let peripheral = try Tshark.frames(dir.path("demo-peripheral.pcap"))

            // Advertising: the demo's legacy set, ADV_IND (0) with the name the peripheral's host gave.
            let advertised = Set(peripheral.compactMap { $0.first("btcommon.eir_ad.entry.device_name") })
            #expect(advertised == ["ble-hci"])
            let advInd = try #require(frames.first { $0.int("btle.advertising_header.pdu_type") == 0 })
            #expect(advInd.first("btcommon.eir_ad.entry.device_name") == "ble-hci")
            // The central scanned actively: SCAN_REQ (3) then SCAN_RSP (4).
            let types = frames.compactMap { $0.int("btle.advertising_header.pdu_type") }
            #expect(types.contains(3) && types.contains(4), "advertising PDU types \(types)")

            // CONNECT_IND (5) and the central's LE Enhanced Connection Complete (subevent 0x0a).
            let connect = try #require(frames.first { $0.int("btle.advertising_header.pdu_type") == 5 })
            let complete = try #require(central.first { $0.int("bthci_evt.le_meta_subevent") == 0x0a })
            #expect(connect.int("btle.link_layer_data.interval") == complete.int("bthci_evt.le_con_interval"))
            #expect(connect.int("btle.link_layer_data.latency") == complete.int("bthci_evt.le_con_latency"))
            #expect(connect.int("btle.link_layer_data.timeout") == complete.int("bthci_evt.le_supv_timeout"))
            let accessAddress = try #require(connect.first("btle.link_layer_data.access_address"))
            let data = frames.filter { $0.first("btle.access_address") != Tshark.advertisingAccessAddress }
            #expect(!data.isEmpty && data.allSatisfy { $0.first("btle.access_address") == accessAddress })

            // Each side's data PDUs carry exactly what its host sent over HCI, in order.
            #expect(dataPayload(frames, pduType: 2) == aclData(central, direction: 0), "central → peripheral")
            #expect(dataPayload(frames, pduType: 3) == aclData(peripheral, direction: 0), "peripheral → central")
            #expect(!dataPayload(frames, pduType: 2).isEmpty)

            // LL_TERMINATE_IND (0x02) last, with the reason of the central's HCI Disconnect (0x0406).
            let disconnect = try #require(central.first { $0.int("bthci_cmd.opcode") == 0x0406 })
            let terminate = try #require(frames.last { $0.has("btle.control_opcode") })
            #expect(terminate.int("btle.control_opcode") == 0x02)
            #expect(terminate.int("btle.control.error_code") == disconnect.int("bthci_cmd.reason"))
            #expect(terminate.int("btle_rf.pdu_type") == 2, "sent by the central")
        }

        /// `controllers --air FILE`, a central pairing with the `secure` profile (Just Works) and
        /// reading ff01: LL_ENC_REQ with the Rand and EDIV of the central's HCI LE Enable
        /// Encryption, LL_ENC_RSP, LL_START_ENC_REQ, LL_START_ENC_RSP both ways (Vol 6 Part B
        /// 2.4.2.4-7, 5.1.3.1). The link's packets are flagged decrypted from the first
        /// LL_START_ENC_RSP on, the first encrypted one (and none before it), and the read
        /// after it decodes as ATT: the plaintext, as the help says.
        @Test func pairingStartsEncryptionWithLLEncReq() async throws {
            let dir = try TempDir()
            let air = dir.path("air.pcap"), hci = dir.path("central.pcap")
            try await withRig(profile: "secure", airtime: ["--airtime", "off", "--air", air]) { rig in
                let r = try await rig.central(["-w", hci, "central", "name:secure", "--pair", "--read", "ff01",
                                               "--bonds", dir.path("bonds.json"), "--json"])
                expectStatus(r, 0, "central --pair --read ff01")
            }
            let frames = try Tshark.frames(air)
            expectSoundAirCapture(frames)
            let encryption = frames.compactMap { $0.int("btle.control_opcode") }.filter { (0x03...0x06).contains($0) }
            #expect(encryption == [0x03, 0x04, 0x05, 0x06, 0x06], "LL_ENC_REQ, LL_ENC_RSP, LL_START_ENC_REQ, LL_START_ENC_RSP ×2")
            let central = try Tshark.frames(hci)
            // LE Enable Encryption, OCF 0x0019 (Core v5.4 Vol 4 Part E 7.8.24).
            let enable = try #require(central.first { $0.int("bthci_cmd.opcode") == 0x2019 })
            let encReq = try #require(frames.first { $0.int("btle.control_opcode") == 0x03 })
            #expect(number(encReq.first("btle.control.random_number")) == number(enable.first("bthci_cmd.random_number")))
            #expect(encReq.int("btle.control.encrypted_diversifier") == enable.int("bthci_cmd.encrypted_diversifier"))
            let link = frames.filter { $0.first("btle.access_address") != Tshark.advertisingAccessAddress }
            let start = try #require(link.firstIndex { $0.int("btle.control_opcode") == 0x06 })
            for (i, f) in link.enumerated() {
                #expect(f.first("btle_rf.flags.decrypted") == (i >= start ? "1" : "0"), "link packet \(i + 1) of \(link.count)")
            }
            #expect(link[..<start].contains { $0.has("btsmp") }, "pairing (SMP) before encryption")
            // ATT Read Request (0x0a) on the encrypted link.
            #expect(link[start...].contains { $0.int("btatt.opcode") == 0x0a })
        }
    }
}

/// A tshark number ("0x…" or decimal) of up to 64 bits.
private func number(_ s: String?) -> UInt64? {
    guard let s else { return nil }
    return s.hasPrefix("0x") ? UInt64(s.dropFirst(2), radix: 16) : UInt64(s)
}
