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
        // H4 type 1, handle 2, length 2, then the data (the 4-octet direction is pcap's
        // pseudo-header, not part of tshark's frame).
        out += f.raw.dropFirst(5).prefix(n)
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
        /// (With the airtime model: Tests/HostTests/AirViewTests.swift.)
        @Test func demoAirMatchesTheHCICaptures() async throws {
            let dir = try TempDir()
            let air = dir.path("air.pcap"), hci = dir.path("demo.pcap")
            let r = try await BleHCI.run(["demo", "--air", air, "-w", hci], timeout: 30)
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

        /// `controllers --air FILE`, a central reading ff01 of the `secure` profile, pairing
        /// (legacy Just Works) on its refusal, then reading it again from the bond: each time
        /// LL_ENC_REQ with the Rand and EDIV of the central's HCI LE Enable Encryption (zero for
        /// the STK, the bond's the second time), LL_ENC_RSP, LL_START_ENC_REQ, LL_START_ENC_RSP
        /// both ways (Vol 6 Part B 2.4.2.4-7, 5.1.3.1). Each link's packets are flagged decrypted
        /// from its first LL_START_ENC_RSP on, the first encrypted one (and none before it), and
        /// the read after it decodes as ATT: the plaintext, as the help says.
        @Test func encryptionStartsWithLLEncReq() async throws {
            let dir = try TempDir()
            let air = dir.path("air.pcap")
            let hci = [dir.path("pairing.pcap"), dir.path("bonded.pcap")]
            try await withRig(profile: "secure", peripheralArgs: ["--name", "secure", "--bonds", dir.path("peripheral")],
                              airtime: ["--airtime", "off", "--air", air]) { rig in
                for path in hci {
                    let r = try await rig.central(["-w", path, "central", "name:secure", "--read", "ff01", "--legacy",
                                                   "--bonds", dir.path("central"), "--json"])
                    expectStatus(r, 0, "central --read ff01")
                }
            }
            let frames = try Tshark.frames(air)
            expectSoundAirCapture(frames)
            let encryption = frames.compactMap { $0.int("btle.control_opcode") }.filter { (0x03...0x06).contains($0) }
            #expect(encryption == [0x03, 0x04, 0x05, 0x06, 0x06, 0x03, 0x04, 0x05, 0x06, 0x06],
                    "LL_ENC_REQ, LL_ENC_RSP, LL_START_ENC_REQ, LL_START_ENC_RSP ×2, twice")
            // LE Enable Encryption, OCF 0x0019 (Core v5.4 Vol 4 Part E 7.8.24): Random_Number and EDIV.
            let enables = try hci.flatMap { try Tshark.frames($0) }.filter { $0.int("bthci_cmd.opcode") == 0x2019 }
            let requests = frames.filter { $0.int("btle.control_opcode") == 0x03 }
            #expect(requests.map { number($0.first("btle.control.random_number")) }
                    == enables.map { littleEndian($0.first("bthci_cmd.le_random_number")) })
            #expect(requests.map { $0.int("btle.control.encrypted_diversifier") } == enables.map { $0.int("bthci_cmd.le_encrypted_diversifier") })
            #expect(enables.count == 2 && enables[1].int("bthci_cmd.le_encrypted_diversifier") != 0, "the bond's EDIV")

            // Per link (its access address): plaintext before its first LL_START_ENC_RSP, flagged decrypted from it on.
            let links = frames.compactMap { $0.first("btle.link_layer_data.access_address") }
            #expect(links.count == 2)
            for aa in links {
                let link = frames.filter { $0.first("btle.access_address") == aa }
                let start = try #require(link.firstIndex { $0.int("btle.control_opcode") == 0x06 })
                for (i, f) in link.enumerated() {
                    #expect(f.first("btle_rf.flags.decrypted") == (i >= start ? "1" : "0"), "link \(aa) packet \(i + 1) of \(link.count)")
                }
                // ATT Read Request (0x0a) of ff01 on the encrypted link.
                #expect(link[start...].contains { $0.int("btatt.opcode") == 0x0a })
            }
        }
    }
}

/// A little-endian octet string as tshark shows it ("01:02:…").
private func littleEndian(_ s: String?) -> UInt64? {
    guard let s else { return nil }
    return s.split(separator: ":").enumerated().reduce(UInt64(0)) { v, e in v | UInt64(UInt8(e.element, radix: 16) ?? 0) << (8 * UInt64(e.offset)) }
}

/// A tshark number ("0x…" or decimal) of up to 64 bits.
private func number(_ s: String?) -> UInt64? {
    guard let s else { return nil }
    return s.hasPrefix("0x") ? UInt64(s.dropFirst(2), radix: 16) : UInt64(s)
}
