import Testing
@testable import HCI

@Suite struct PacketTests {
    @Test func resetCommandH4() throws {
        let p = HCIPacket.command(Reset().packet)
        #expect(p.h4 == [0x01, 0x03, 0x0c, 0x00])
        #expect(try HCIPacket(h4: p.h4) == p)
    }

    @Test func lyingLengthIsAnError() {
        #expect(throws: DecodeError.self) { try HCIPacket(h4: [0x04, 0x0e, 0x05, 0x01]) }
    }

    @Test func commandCompleteReadBDADDR() throws {
        // Event: Command Complete, 1 packet, opcode 0x1009, status 0, address 00:11:22:33:44:55.
        let bytes: [UInt8] = [0x0e, 0x0a, 0x01, 0x09, 0x10, 0x00, 0x55, 0x44, 0x33, 0x22, 0x11, 0x00]
        guard case .event(let e) = try HCIPacket(type: .event, body: bytes) else { Issue.record("not an event"); return }
        let cc = try #require(try HCIEvents.decode(e) as? CommandComplete)
        #expect(try cc.result(ReadBDADDR.self).address.description == "00:11:22:33:44:55")
    }

    /// The closed value sets generated from Tools/pdl/hci-codes.pdl (`cases`), their codes from
    /// the specification and their descriptions the words CLI.md prints.
    @Test func codesOfTheGeneratedEnums() {
        // H4 packet indicators, Core v5.4 Vol 4 Part A 2 (Table 2.1); CLI.md's `type` field.
        let types: [(HCIPacketType, UInt8, String)] = [(.command, 0x01, "command"), (.acl, 0x02, "acl"), (.sco, 0x03, "sco"),
                                                       (.event, 0x04, "event"), (.iso, 0x05, "iso")]
        for (t, code, word) in types {
            #expect(t.rawValue == code && t.description == word)
            #expect(HCIPacketType(rawValue: code) == t)
        }
        #expect(HCIPacketType(rawValue: 0x00) == nil && HCIPacketType(rawValue: 0x06) == nil)
        // Packet_Boundary_Flag, Core v5.4 Vol 4 Part E 5.4.2: 0b00 first non-automatically-flushable,
        // 0b01 continuing fragment, 0b10 first automatically-flushable, 0b11 complete L2CAP PDU.
        let boundaries: [(PacketBoundary, UInt8, String, Bool)] = [
            (.firstNonFlushable, 0b00, "firstNonFlushable", true), (.continuing, 0b01, "continuing", false),
            (.first, 0b10, "first", true), (.complete, 0b11, "complete", true),
        ]
        for (b, code, word, start) in boundaries {
            #expect(b.rawValue == code && b.description == word && b.isStart == start)
        }
        // Peer_Address_Type, Core v5.4 Vol 4 Part E 7.8.12: public, random, public identity, random (static) identity.
        let addressTypes: [(AddressType, UInt8, String, String)] = [
            (.public, 0x00, "public", "public"), (.random, 0x01, "random", "random"),
            (.publicIdentity, 0x02, "public identity", "public"), (.randomIdentity, 0x03, "random identity", "random"),
        ]
        for (t, code, word, simple) in addressTypes {
            #expect(t.rawValue == code && t.description == word && t.simple == simple)
        }
        #expect(AddressType(rawValue: 0x04) == nil)
    }
}

@Suite struct HexCodeTests {
    @Test func padsToTheTypeWidthOrTheDigitsAsked() {
        #expect(hexCode(UInt8(0x0c)) == "0x0c")
        #expect(hexCode(UInt16(0x0c03)) == "0x0c03")
        #expect(hexCode(UInt16(0x3), digits: 2) == "0x03")
        #expect(hexCode(UInt32(0x1ffff), digits: 2) == "0x1ffff")
        #expect(hexCode(UInt64.max) == "0xffffffffffffffff")
        #expect(hexCode(Int8(-1)) == "0xff")
        #expect(hexCode(UInt8(0), digits: 0) == "0x0")
    }

    /// Binary values as lowercase hex without separators (CLI.md), and 128-bit UUIDs in the
    /// 8-4-4-4-12 text form of RFC 4122 section 3 (as Core Vol 3 Part B 2.5.1 and tshark write
    /// them); 16-bit UUIDs as their 4 digits.
    @Test func hexAndUUIDText() {
        #expect([UInt8]().hex == "")
        #expect([0x00, 0x0a, 0xab, 0xff].hex == "000aabff")
        #expect([UInt8](repeating: 0x5a, count: 40).hex == String(repeating: "5a", count: 40))
        let u = BluetoothUUID(bigEndian: [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                          0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef])!
        #expect(u.description == "12345678-9abc-def0-0123-456789abcdef")
        #expect(BluetoothUUID(0x180d).description == "180d")
        #expect(BluetoothUUID(uuid32: 0x1234_5678).description == "12345678")
    }
}
