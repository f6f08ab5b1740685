import Foundation
import Testing
import TestSupport
import HCI
import Capture
import L2CAP
@testable import Decoder

// Dynamic L2CAP channels followed by the decoder (issue 26): BR/EDR signaling, channels opened by
// Connection Request/Response (BR/EDR 0x02/0x03, LE Credit Based 0x14/0x15, Enhanced Credit Based
// 0x17/0x18), decoded by their PSM, ended by Disconnection Response and Disconnection Complete.
//
// Oracles:
// - Tests/Fixtures/bumble-channels.btsnoop (Tools/bumble/channels.py: two Bumble hosts) against
//   tshark field by field (signaling codes, PSMs, SDU lengths, ATT opcode and handle), and
//   against Bumble's own parse of the ATT PDUs it exchanged on the dynamic channels
//   (bumble-channels.att.json), which covers EATT, where tshark 4.0 has nothing to say.
// - Captures built here from the byte layouts of Core v5.4 Vol 3 Part A (cited at each packet),
//   written as btsnoop and also read by tshark.
//
// tshark 4.0.17's behaviours the comparison allows for (checked in
// `bumbleChannelsAgreeWithTshark`, everything else must agree):
// 1. It does not know Credit Based Connection Request/Response (0x17/0x18, Core v5.2+): it names
//    them "Unknown command" and follows no channel they open (no EATT), so packets we decode on
//    such channels have no PSM and no ATT in tshark.
// 2. It ends no channel: after a Disconnection Response, or a new link on the same handle, it
//    still names a CID's old PSM (the fixture's LE Disconnection Request of CID 0x0041 shows
//    the BR/EDR channel's PSM 0x1001); we compare PSMs only on packets of channels we follow.
// 3. It does not decode SMP over BR/EDR (CID 0x0007: "Reserved"); we check that one against
//    the bytes Bumble sent (a Pairing Request, Core v5.4 Vol 3 Part H 3.5.1).

private func tsharkColumns(_ path: String, _ fields: [String]) throws -> [[String]] { try Tshark.fields(path, fields) }

private func hexList(_ s: String) -> [Int] {
    s.split(separator: ",").compactMap { Int($0.hasPrefix("0x") ? $0.dropFirst(2) : $0[...], radix: 16) }
}

private func decList(_ s: String) -> [Int] { s.split(separator: ",").compactMap { Int($0) } }

private func textValue(_ f: FieldValue?) -> String? { if case .text(let s)? = f { return s } else { return nil } }

/// The signaling command codes of a decoded packet (one command, or several under `commands`).
private func signalingCodes(_ p: DecodedPacket) -> [Int] {
    guard let s = p.layer("signaling") else { return [] }
    if case .list(let items)? = field("commands", s) {
        return items.compactMap { if case .object(let f) = $0 { return intValue(field("code", f)) } else { return nil } }
    }
    return intValue(field("code", s)).map { [$0] } ?? []
}

@Suite struct ChannelTests {
    static let fields = ["frame.number", "btl2cap.cid", "btl2cap.cmd_code", "btl2cap.psm", "btl2cap.le_sdu_length",
                         "btatt.opcode", "btatt.handle"]

    @Test func bumbleChannelsAgreeWithTshark() throws {
        let path = fixturePath("bumble-channels.btsnoop")
        let ours = try decodeCapture(path)
        let theirs = try tsharkColumns(path, Self.fields)
        #expect(ours.count == theirs.count)
        var problems: [String] = []
        var checked = (signaling: 0, psm: 0, att: 0, sdu: 0, eattOnly: 0)
        for (p, t) in zip(ours, theirs) where t.count == Self.fields.count {
            func fail(_ what: String, _ o: Any, _ w: Any) { problems.append("#\(p.index) \(what): ours \(o), tshark \(w)") }
            if p.malformed != nil { fail("malformed", p.malformed!, "-") }
            let l2 = p.layer("l2cap"), a = p.layer("att")
            let tCodes = hexList(t[2])
            if !tCodes.isEmpty || !signalingCodes(p).isEmpty {
                if signalingCodes(p) != tCodes { fail("signaling codes", signalingCodes(p), t[2]) }
                checked.signaling += 1
            }
            // PSMs on data frames: ours on every frame tshark follows (and tshark's only on
            // channels it could follow, behaviours 1 and 2).
            let cid = hexList(t[1]).last ?? 0
            let ourPSM = intValue(field("psm", l2))
            let mode = { if case .text(let m)? = field("mode", l2) { return m } else { return "" } }()
            if cid >= 0x40, tCodes.isEmpty {
                if let w = hexList(t[3]).first {
                    if ourPSM != w { fail("psm", ourPSM as Any, t[3]) }
                    checked.psm += 1
                } else if ourPSM != nil {
                    // Behaviour 1: only a channel of an Enhanced Credit Based Connection.
                    if mode != "enhanced credit based" { fail("psm tshark lacks", ourPSM!, "-") }
                    checked.eattOnly += 1
                }
            }
            let tSDU = decList(t[4])
            let ourSDU = intValue(field("sduLength", l2)).map { [$0] } ?? []
            if !tSDU.isEmpty || (!ourSDU.isEmpty && mode == "LE credit based") {
                if tSDU != ourSDU { fail("SDU length", ourSDU, t[4]) }
                checked.sdu += 1
            }
            let tOp = hexList(t[5])
            if !tOp.isEmpty {
                checked.att += 1
                if intValue(field("opcode", a)).map({ [$0] }) != tOp { fail("ATT opcode", intValue(field("opcode", a)) as Any, t[5]) }
                if let h = intValue(field("handle", a)), !hexList(t[6]).contains(h) { fail("ATT handle", h, t[6]) }
            } else if a != nil, mode != "enhanced credit based" {
                fail("ATT tshark lacks", intValue(field("opcode", a)) as Any, "-")
            }
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
        // What the fixture holds (Tools/bumble/channels.py): 6 ATT PDUs over BR/EDR, signaling
        // on both links, an SDU each way on the LE credit-based channel.
        #expect(checked.att == 6)
        #expect(checked.sdu == 2)
        #expect(checked.signaling >= 20)
        #expect(checked.psm >= 18)
        #expect(checked.eattOnly >= 30)
    }

    /// Issue 30: Tests/Fixtures/kernel-eatt.pcap, the Linux kernel's enhanced credit-based L2CAP
    /// socket as EATT client of `ble-hci peripheral --eatt` (Tools/vm/cli_tests.py section 6).
    /// Signaling codes agree with tshark on every packet; the Credit Based Reconfigure Request
    /// and Response (0x19/0x1A, which tshark 4.0 names only by code) decode to the octets of
    /// Core v5.4 Vol 3 Part A 4.27 (MTU, MPS, Destination CIDs after the 4-octet signaling
    /// header) and 4.28 (Result); and the ATT PDUs on PSM 0x0027 have the opcode of the first
    /// octet after the K-frame's SDU length (Part A 3.4.3).
    @Test func kernelEnhancedATTCapture() throws {
        let path = fixturePath("kernel-eatt.pcap")
        let ours = try decodeCapture(path)
        let theirs = try tsharkColumns(path, ["frame.number", "btl2cap.cmd_code"])
        var reader = try CaptureReader(path: path)
        let raw = reader.readAll().records.map(\.raw)
        try #require(ours.count == theirs.count && raw.count == ours.count)
        let u16 = { (b: [UInt8], i: Int) in Int(b[i]) | Int(b[i + 1]) << 8 }
        var reconfigure = 0, att = 0
        for (p, t) in zip(ours, theirs) {
            #expect(p.malformed == nil, "#\(p.index)")
            let codes = hexList(t.count > 1 ? t[1] : "")
            #expect(signalingCodes(p) == codes, "#\(p.index): ours \(signalingCodes(p)), tshark \(codes)")
            // H4 type (1), ACL header (4), L2CAP header (4), signaling header (4), then the data.
            let b = raw[p.index - 1]
            if codes == [0x19], let s = p.layer("signaling") {
                #expect(textValue(field("name", s)) == "Credit Based Reconfigure Request")
                #expect(intValue(field("mtu", s)) == u16(b, 13) && intValue(field("mps", s)) == u16(b, 15))
                guard case .list(let cids)? = field("destinationCid", s) else { Issue.record("no Destination CIDs"); continue }
                #expect(cids.compactMap { if case .int(let c) = $0 { c } else { nil } } == stride(from: 17, to: b.count, by: 2).map { u16(b, $0) })
                reconfigure += 1
            }
            if codes == [0x1A], let s = p.layer("signaling") {
                #expect(textValue(field("name", s)) == "Credit Based Reconfigure Response")
                #expect(intValue(field("result", s)) == u16(b, 13))
                reconfigure += 1
            }
            // An SDU whole in this one ACL packet: L2CAP length = octets after the L2CAP header, SDU length 2 fewer.
            if let a = p.layer("att"), intValue(field("psm", p.layer("l2cap"))) == 0x0027, b.count > 11,
               u16(b, 5) == b.count - 9, intValue(field("sduLength", p.layer("l2cap"))) == b.count - 11 {
                #expect(intValue(field("opcode", a)) == Int(b[11]), "#\(p.index)")
                att += 1
            }
        }
        #expect(reconfigure == 2)
        #expect(att >= 6, "ATT PDUs on the EATT channel: \(att)")
    }

    /// Every ATT PDU on the dynamic channels, as Bumble parsed what it sent and received.
    @Test func dynamicATTAgreesWithBumble() throws {
        let log = try #require(try JSONSerialization.jsonObject(
            with: Data(contentsOf: URL(fileURLWithPath: fixturePath("bumble-channels.att.json")))) as? [[String: Any]])
        let ours = try decodeCapture(fixturePath("bumble-channels.btsnoop")).filter {
            $0.layer("att") != nil && intValue(field("psm", $0.layer("l2cap"))) != nil
        }
        #expect(ours.count == log.count)
        for (p, e) in zip(ours, log) {
            let l2 = p.layer("l2cap"), a = p.layer("att")
            let psm = e["bearer"] as? String == "eatt" ? 0x0027 : 0x001F
            #expect(intValue(field("psm", l2)) == psm, "#\(p.index)")
            #expect((p.direction == .sent ? "sent" : "received") == e["direction"] as? String, "#\(p.index)")
            #expect(intValue(field("opcode", a)) == e["opcode"] as? Int, "#\(p.index)")
            #expect(intValue(field("handle", a)) == e["handle"] as? Int, "#\(p.index)")
        }
        // EATT responses longer than the MPS (23) come in several K-frames (Core v5.4 Vol 3
        // Part A 3.4.3): the 180-octet value read with ATT_MTU 100 takes 5.
        let multi = ours.filter { field("sduFrames", $0.layer("l2cap")) != nil }
        #expect(multi.count >= 3)
    }

    /// SMP over BR/EDR (CID 0x0007, Core v5.4 Vol 3 Part H 3.2): the Pairing Request Bumble sent
    /// (channels.py: NoInputNoOutput, no OOB, AuthReq bonding + SC 0x09, key size 16, no keys).
    @Test func smpOverBREDR() throws {
        let ours = try decodeCapture(fixturePath("bumble-channels.btsnoop"))
        let smp = ours.filter { intValue(field("cid", $0.layer("l2cap"))) == 7 }
        #expect(smp.count == 2)
        let req = try #require(smp.first?.layer("smp"))
        #expect(intValue(field("code", req)) == 0x01)
        #expect(intValue(field("ioCapability", req)) == 0x03)
        #expect(intValue(field("maxEncryptionKeySize", req)) == 16)
        #expect(smp.last?.layer("smp").flatMap { intValue(field("code", $0)) } == 0x02)  // Pairing Response
    }

    // MARK: Captures built from the specification's layouts

    static let bredr: UInt16 = 0x000B
    static let le: UInt16 = 0x0040

    struct Built {
        var packets: [(HCIPacket, Direction)] = []
        mutating func acl(_ d: Direction, handle: UInt16, cid: UInt16, _ payload: [UInt8]) {
            packets.append((.acl(HCIACLPacket(handle: handle, boundary: .first, data: l2cap(cid: cid, payload))), d))
        }
        mutating func event(_ code: UInt8, _ params: [UInt8]) {
            packets.append((.event(HCIEventPacket(code: code, parameters: params)), .received))
        }
        func write() throws -> String {
            let path = "/tmp/ble-hci-channels-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).btsnoop"
            var bytes = BtsnoopWriter.fileHeader()
            for (i, (p, d)) in packets.enumerated() {
                bytes += BtsnoopWriter.record(p, direction: d, time: Date(timeIntervalSince1970: 1_800_000_000 + Double(i) / 1000))
            }
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            return path
        }
    }

    /// Connection Complete (Core v5.4 Vol 4 Part E 7.7.3): status, handle, BD_ADDR, ACL, no encryption.
    static func connectionComplete(_ h: UInt16) -> [UInt8] { [0x00, UInt8(h & 0xff), UInt8(h >> 8), 1, 2, 3, 4, 5, 6, 0x01, 0x00] }
    /// Disconnection Complete (7.7.5): status, handle, reason 0x13.
    static func disconnectionComplete(_ h: UInt16) -> [UInt8] { [0x00, UInt8(h & 0xff), UInt8(h >> 8), 0x13] }

    static func bredrCapture() -> Built {
        var b = Built()
        b.event(0x03, connectionComplete(bredr))                                           // 1
        // Two commands in one C-frame (Core v5.4 Vol 3 Part A 4: several per C-frame on ACL-U):
        // Information Request, InfoType 0x0002 (4.10); Echo Request "abc" (4.8).
        b.acl(.sent, handle: bredr, cid: 0x0001, [0x0A, 0x01, 0x02, 0x00, 0x02, 0x00,
                                                  0x08, 0x02, 0x03, 0x00, 0x61, 0x62, 0x63])  // 2
        // Information Response (4.11): InfoType 2, Success, feature mask 0x000000b8 (ERTM,
        // Streaming, FCS, Fixed Channels: bits 3, 4, 5, 7 of Table 4.13).
        b.acl(.received, handle: bredr, cid: 0x0001, [0x0B, 0x01, 0x08, 0x00, 0x02, 0x00, 0x00, 0x00, 0xB8, 0x00, 0x00, 0x00]) // 3
        // Connection Request PSM 0x001F, Source CID 0x0070 (4.2).
        b.acl(.sent, handle: bredr, cid: 0x0001, [0x02, 0x03, 0x04, 0x00, 0x1F, 0x00, 0x70, 0x00])          // 4
        // Connection Response: pending, authorization pending (4.3), then success, DCID 0x0081.
        b.acl(.received, handle: bredr, cid: 0x0001, [0x03, 0x03, 0x08, 0x00, 0x00, 0x00, 0x70, 0x00, 0x01, 0x00, 0x02, 0x00]) // 5
        b.acl(.received, handle: bredr, cid: 0x0001, [0x03, 0x03, 0x08, 0x00, 0x81, 0x00, 0x70, 0x00, 0x00, 0x00, 0x00, 0x00]) // 6
        // ATT Read Request handle 0x0003 to the responder's CID; Read Response to ours (Vol 3 Part F 3.4.4.3/4).
        b.acl(.sent, handle: bredr, cid: 0x0081, [0x0A, 0x03, 0x00])                                          // 7
        b.acl(.received, handle: bredr, cid: 0x0070, [0x0B, 0x68, 0x69])                                      // 8
        // A second channel, PSM 0x0019 (AVDTP), Source CID 0x0071 → DCID 0x0082; a
        // Configuration Request to 0x0082 with a Retransmission and Flow Control option (5.4)
        // asking Enhanced Retransmission mode (0x03), TxWindow 10, MaxTransmit 3, 2000 ms,
        // 12000 ms, MPS 1000; then an I-frame on it.
        b.acl(.sent, handle: bredr, cid: 0x0001, [0x02, 0x04, 0x04, 0x00, 0x19, 0x00, 0x71, 0x00])          // 9
        b.acl(.received, handle: bredr, cid: 0x0001, [0x03, 0x04, 0x08, 0x00, 0x82, 0x00, 0x71, 0x00, 0x00, 0x00, 0x00, 0x00]) // 10
        b.acl(.sent, handle: bredr, cid: 0x0001, [0x04, 0x05, 0x0F, 0x00, 0x82, 0x00, 0x00, 0x00,
                                                  0x04, 0x09, 0x03, 0x0A, 0x03, 0xD0, 0x07, 0xE0, 0x2E, 0xE8, 0x03]) // 11
        b.acl(.sent, handle: bredr, cid: 0x0082, [0x00, 0x00, 0x01, 0x02, 0x03, 0x04])                      // 12
        // The link ends; a new one gets the same handle: CID 0x0070 is no longer ATT.
        b.event(0x05, disconnectionComplete(bredr))                                        // 13
        b.event(0x03, connectionComplete(bredr))                                           // 14
        b.acl(.received, handle: bredr, cid: 0x0070, [0x0B, 0x68, 0x69])                                      // 15
        return b
    }

    @Test func bredrChannelsFromSpecBytes() throws {
        let path = try Self.bredrCapture().write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let p = try decodeCapture(path)
        #expect(p.count == 15)
        #expect(p.allSatisfy { $0.malformed == nil }, "\(p.compactMap(\.malformed))")
        #expect(signalingCodes(p[1]) == [0x0A, 0x08])
        #expect(p[1].summary == "L2CAP Information Request, Echo Request")
        let info = try #require(p[2].layer("signaling"))
        #expect(intValue(field("extendedFeatureMask", info)) == 0xB8)
        // Pending does not open the channel; the final response does.
        #expect(intValue(field("result", p[4].layer("signaling"))) == 0x0001)
        #expect(intValue(field("status", p[4].layer("signaling"))) == 0x0002)
        for i in [6, 7] {
            #expect(intValue(field("psm", p[i].layer("l2cap"))) == 0x001F)
            #expect(intValue(field("openedIn", p[i].layer("l2cap"))) == 6)
        }
        #expect(intValue(field("opcode", p[6].layer("att"))) == 0x0A)
        #expect(intValue(field("handle", p[6].layer("att"))) == 3)
        #expect(intValue(field("opcode", p[7].layer("att"))) == 0x0B)
        // Enhanced Retransmission mode: the frame is shown, not decoded as a B-frame.
        #expect(intValue(field("psm", p[11].layer("l2cap"))) == 0x0019)
        #expect(field("mode", p[11].layer("l2cap")) == .text("Enhanced Retransmission mode"))
        #expect(p[11].layer("att") == nil)
        // After Disconnection Complete: not followed.
        #expect(field("psm", p[14].layer("l2cap")) == nil)
        #expect(p[14].layer("att") == nil)

        // tshark agrees on what both decode: the commands, the channel's PSM, ATT opcode and handle.
        let t = try tsharkColumns(path, Self.fields)
        #expect(t.count == 15)
        for i in 0..<14 where t[i].count == Self.fields.count {
            #expect(signalingCodes(p[i]) == hexList(t[i][2]), "#\(i + 1)")
            if let psm = intValue(field("psm", p[i].layer("l2cap"))) { #expect(hexList(t[i][3]) == [psm], "#\(i + 1)") }
            #expect(p[i].layer("att").flatMap { intValue(field("opcode", $0)) }.map { [$0] } ?? [] == hexList(t[i][5]), "#\(i + 1)")
        }
    }

    static func leCapture() -> Built {
        var b = Built()
        // Credit Based Connection Request (Core v5.4 Vol 3 Part A 4.25): SPSM 0x0027 (EATT), MTU 64,
        // MPS 64, 5 credits, Source CIDs 0x0040 and 0x0041.
        b.acl(.sent, handle: le, cid: 0x0005, [0x17, 0x01, 0x0C, 0x00, 0x27, 0x00, 0x40, 0x00, 0x40, 0x00, 0x05, 0x00,
                                               0x40, 0x00, 0x41, 0x00])                                        // 1
        // Response (4.26): MTU 64, MPS 30, 5 credits, result 0x0004 (some refused, no
        // resources), Destination CIDs 0x0050 and 0x0000 (the second refused).
        b.acl(.received, handle: le, cid: 0x0005, [0x18, 0x01, 0x0C, 0x00, 0x40, 0x00, 0x1E, 0x00, 0x05, 0x00, 0x04, 0x00,
                                                   0x50, 0x00, 0x00, 0x00])                                    // 2
        // K-frames (3.4.3): SDU Length 3, ATT Read Request handle 0x0003.
        b.acl(.sent, handle: le, cid: 0x0050, [0x03, 0x00, 0x0A, 0x03, 0x00])                                 // 3
        // A 12-octet Read Response in two K-frames: SDU Length 12 + 5 octets, then 7 octets.
        b.acl(.received, handle: le, cid: 0x0040, [0x0C, 0x00, 0x0B, 0x01, 0x02, 0x03, 0x04])                // 4
        b.acl(.received, handle: le, cid: 0x0040, [0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B])                // 5
        // The refused CID: not a channel.
        b.acl(.sent, handle: le, cid: 0x0041, [0x03, 0x00, 0x0A, 0x03, 0x00])                                 // 6
        // Disconnection Request/Response (4.6, 4.7): DCID 0x0050, SCID 0x0040.
        b.acl(.sent, handle: le, cid: 0x0005, [0x06, 0x02, 0x04, 0x00, 0x50, 0x00, 0x40, 0x00])              // 7
        b.acl(.received, handle: le, cid: 0x0005, [0x07, 0x02, 0x04, 0x00, 0x50, 0x00, 0x40, 0x00])          // 8
        b.acl(.sent, handle: le, cid: 0x0050, [0x03, 0x00, 0x0A, 0x03, 0x00])                                 // 9
        return b
    }

    @Test func enhancedCreditBasedChannelsFromSpecBytes() throws {
        let path = try Self.leCapture().write()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let p = try decodeCapture(path)
        #expect(p.count == 9)
        #expect(p.allSatisfy { $0.malformed == nil }, "\(p.compactMap(\.malformed))")
        #expect(field("channel", p[2].layer("l2cap")) == .text("EATT"))
        #expect(intValue(field("sduLength", p[2].layer("l2cap"))) == 3)
        #expect(intValue(field("opcode", p[2].layer("att"))) == 0x0A)
        #expect(intValue(field("handle", p[2].layer("att"))) == 3)
        #expect(p[3].layer("att") == nil)
        #expect(intValue(field("sduLength", p[3].layer("l2cap"))) == 12)
        #expect(field("sduFrames", p[4].layer("l2cap")) == Field("sduFrames", .list([.int(4), .int(5)])).value)
        #expect(intValue(field("opcode", p[4].layer("att"))) == 0x0B)
        #expect(field("value", p[4].layer("att")) == .bytes(Array(1...11)))
        #expect(field("psm", p[5].layer("l2cap")) == nil)
        #expect(field("psm", p[8].layer("l2cap")) == nil)
    }

    // MARK: Hostile input

    @Test func hostileSignalingAndKFrames() {
        let d = PacketDecoder()
        // A Length running past the C-frame (Core v5.4 Vol 3 Part A 4): the command before it is kept.
        let cut = d.acl(.sent, handle: Self.bredr, pb: 2, l2cap(cid: 1, [0x08, 0x01, 0x00, 0x00, 0x0A, 0x02, 0x09, 0x00, 0x02]))
        #expect(cut.malformed != nil)
        #expect(signalingCodes(cut) == [0x08])
        // A configuration option whose length runs past the command.
        let opt = d.acl(.sent, handle: Self.bredr, pb: 2, l2cap(cid: 1, [0x04, 0x01, 0x06, 0x00, 0x40, 0x00, 0x00, 0x00, 0x01, 0x05]))
        #expect(opt.malformed != nil)
        // LE channel opened, then K-frames carrying more than the SDU Length says.
        _ = d.acl(.sent, handle: Self.le, pb: 2, l2cap(cid: 5, [0x14, 0x01, 0x0A, 0x00, 0x80, 0x00, 0x40, 0x00, 0x17, 0x00, 0x17, 0x00, 0x01, 0x00]))
        _ = d.acl(.received, handle: Self.le, pb: 2, l2cap(cid: 5, [0x15, 0x01, 0x0A, 0x00, 0x45, 0x00, 0x17, 0x00, 0x17, 0x00, 0x01, 0x00, 0x00, 0x00]))
        let first = d.acl(.sent, handle: Self.le, pb: 2, l2cap(cid: 0x45, [0x04, 0x00, 0x01, 0x02]))
        #expect(first.malformed == nil)
        #expect(intValue(field("sduOctetsSoFar", first.layer("l2cap"))) == 2)
        let over = d.acl(.sent, handle: Self.le, pb: 2, l2cap(cid: 0x45, [0x03, 0x04, 0x05]))
        #expect(over.malformed?.contains("SDU of 4") == true)
        let short = d.acl(.sent, handle: Self.le, pb: 2, l2cap(cid: 0x45, [0x04]))
        #expect(short.malformed?.contains("no SDU Length") == true)
    }

    /// A capture that opens thousands of channels and never closes them holds at most
    /// `ChannelTracker.maxChannels` of them; the newest are followed.
    @Test func followedChannelsAreBounded() {
        var t = ChannelTracker()
        for i in 0..<3000 {
            let scid = UInt16(0x0040 + i % 0xFF00), dcid = UInt16(0x0040 + (i * 7) % 0xFF00), id = UInt8(i % 255 + 1)
            t.observe(.connectionRequest(psm: 0x1001, sourceCID: scid), identifier: id, handle: UInt16(i % 16), direction: .sent, index: 2 * i)
            t.observe(.connectionResponse(destinationCID: dcid, sourceCID: scid, result: .successful, status: .noFurtherInformation),
                      identifier: id, handle: UInt16(i % 16), direction: .received, index: 2 * i + 1)
            #expect(t.channels.count <= ChannelTracker.maxChannels)
        }
        // Unanswered requests are bounded too.
        for i in 0..<1000 {
            t.observe(.leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x40, mtu: 23, mps: 23, initialCredits: 1),
                      identifier: UInt8(i % 256), handle: UInt16(i), direction: .sent, index: i)
        }
        #expect(t.channels.count <= ChannelTracker.maxChannels)
    }

    /// On LE-U the BR/EDR-only commands are not understood (Core v5.4 Vol 3 Part A Table 4.2):
    /// the stack's LE signaling codec leaves them `unknown`, so it answers Command Reject.
    @Test func bredrCommandsAreNotUnderstoodOnLEU() throws {
        let connect: [UInt8] = [0x02, 0x07, 0x04, 0x00, 0x1F, 0x00, 0x40, 0x00]
        let cmd = try SignalingCommand.decode(connect)
        guard case .unknown = cmd.body else { Issue.record("decoded as \(cmd.body)"); return }
        #expect(SignalingCommand.rejection(for: connect) == SignalingCommand(identifier: 7, .commandReject(.commandNotUnderstood)))
        #expect(SignalingCode.connectionRequest.isACLU && !SignalingCode.connectionRequest.isLEU)
        #expect(SignalingCode.leCreditBasedConnectionRequest.isLEU && !SignalingCode.leCreditBasedConnectionRequest.isACLU)
        #expect(SignalingCode.creditBasedConnectionRequest.isLEU && SignalingCode.creditBasedConnectionRequest.isACLU)
    }
}
