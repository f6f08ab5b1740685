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
}
