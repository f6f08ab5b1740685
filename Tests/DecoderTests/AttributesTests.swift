import Testing
import HCI
import Capture
import ATT
import GATT
@testable import Decoder

// `dump --attributes` (issue 26): a server's attribute table as its traffic reveals it. The
// capture is built here from the PDU layouts of Core v5.4 Vol 3 Part F 3.4 (opcodes and
// parameters) and Part G 3 (declaration values); the expected table is what those PDUs say.
@Suite struct AttributesTests {
    final class Capture {
        let d = PacketDecoder(attributes: true)
        var ms = 0.0
        func acl(_ dir: Direction, _ att: [UInt8], handle: UInt16 = 0x0040) {
            ms += 1
            let body = aclBody(handle: handle, pb: 0x02, l2cap(cid: 4, att))
            let n = Int64(ms * 1_000_000)
            _ = d.decode(direction: dir, packet: packet(.acl, body), raw: [0x02] + body,
                         time: CaptureTime(seconds: 1_800_000_000 + n / 1_000_000_000, nanoseconds: Int32(n % 1_000_000_000)))
        }
        func event(_ code: UInt8, _ params: [UInt8]) {
            let body = [code, UInt8(params.count)] + params
            _ = d.decode(direction: .received, packet: packet(.event, body), raw: [0x04] + body, time: CaptureTime(seconds: 1_800_000_000, nanoseconds: 0))
        }
    }

    /// Discovery, reads (one long), a notification, refused read and write, a Read Multiple
    /// Variable, all from the peer's server (received): the tree and values they carry.
    @Test func discoveryAndReadsBuildTheServersTable() throws {
        let c = Capture()
        // Read By Group Type Request 0x10 (1..FFFF, 0x2800) → Response 0x11: length 6,
        // (0x0001, 0x0005, 0x1800), (0x000A, 0x0010, 0x180F).
        c.acl(.sent, [0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28])
        c.acl(.received, [0x11, 0x06, 0x01, 0x00, 0x05, 0x00, 0x00, 0x18, 0x0A, 0x00, 0x10, 0x00, 0x0F, 0x18])
        // Secondary services: Read By Group Type of 0x2801 → (0x0011, 0x0013, 0xAAAA).
        c.acl(.sent, [0x10, 0x11, 0x00, 0xFF, 0xFF, 0x01, 0x28])
        c.acl(.received, [0x11, 0x06, 0x11, 0x00, 0x13, 0x00, 0xAA, 0xAA])
        // Read By Type Request 0x08 of 0x2803 → 0x09, length 7: declaration 0x0002 (read 0x02,
        // value 0x0003, 0x2A00); 0x000B (read|notify 0x12, value 0x000C, 0x2A19); 0x0012 (write 0x08, 0x0013, 0xBBBB).
        c.acl(.sent, [0x08, 0x01, 0x00, 0xFF, 0xFF, 0x03, 0x28])
        c.acl(.received, [0x09, 0x07, 0x02, 0x00, 0x02, 0x03, 0x00, 0x00, 0x2A,
                          0x0B, 0x00, 0x12, 0x0C, 0x00, 0x19, 0x2A,
                          0x12, 0x00, 0x08, 0x13, 0x00, 0xBB, 0xBB])
        // Find Information Request 0x04 (0x000D..0x0010) → 0x05 format 1: 0x000D = 0x2902.
        c.acl(.sent, [0x04, 0x0D, 0x00, 0x10, 0x00])
        c.acl(.received, [0x05, 0x01, 0x0D, 0x00, 0x02, 0x29])
        // Read 0x0003 → "ab"; Read Blob at offset 2 → "c": the value is "abc" (Part G 4.8.3).
        c.acl(.sent, [0x0A, 0x03, 0x00])
        c.acl(.received, [0x0B, 0x61, 0x62])
        c.acl(.sent, [0x0C, 0x03, 0x00, 0x02, 0x00])
        c.acl(.received, [0x0D, 0x63])
        // Notification 0x1B of 0x000C = 0x64; the read of it later wins (a read is the value).
        c.acl(.received, [0x1B, 0x0C, 0x00, 0x64])
        c.acl(.sent, [0x0A, 0x0C, 0x00])
        c.acl(.received, [0x0B, 0x63])
        // Read of 0x0013 refused: Error Response 0x01 (Read Request 0x0A, 0x0013, Insufficient
        // Authentication 0x05); write of 0x0003 refused: Write Not Permitted 0x03.
        c.acl(.sent, [0x0A, 0x13, 0x00])
        c.acl(.received, [0x01, 0x0A, 0x13, 0x00, 0x05])
        c.acl(.sent, [0x12, 0x03, 0x00, 0x01])
        c.acl(.received, [0x01, 0x12, 0x03, 0x00, 0x03])
        // Read Multiple Variable Request 0x20 (0x0005, 0x0020) → 0x21: (1, 0x07), (2, 0x0809).
        c.acl(.sent, [0x20, 0x05, 0x00, 0x20, 0x00])
        c.acl(.received, [0x21, 0x01, 0x00, 0x07, 0x02, 0x00, 0x08, 0x09])

        let servers = try #require(c.d.attributes())
        #expect(servers.count == 1)
        let s = try #require(servers.first)
        #expect(s.connection == 0x0040 && s.serverDirection == .received)
        #expect(s.tree.map(\.service) == [
            GATTRemoteService(uuid: 0x1800, primary: true, startHandle: 0x0001, endHandle: 0x0005),
            GATTRemoteService(uuid: 0x180F, primary: true, startHandle: 0x000A, endHandle: 0x0010),
            GATTRemoteService(uuid: 0xAAAA, primary: false, startHandle: 0x0011, endHandle: 0x0013),
        ])
        #expect(s.tree.map { $0.characteristics.map(\.characteristic.valueHandle) } == [[0x0003], [0x000C], [0x0013]])
        let battery = try #require(s.tree[1].characteristics.first)
        #expect(battery.characteristic.uuid == 0x2A19 && battery.characteristic.properties == [.read, .notify])
        #expect(battery.descriptors == [GATTRemoteDescriptor(uuid: 0x2902, handle: 0x000D)])
        #expect(s.values[0x0003] == [0x61, 0x62, 0x63])
        #expect(s.values[0x000C] == [0x63])
        #expect(s.values[0x0005] == [0x07])
        #expect(s.readRefusals == [0x0013: .insufficientAuthentication])
        #expect(s.writeRefusals == [0x0003: .writeNotPermitted])
        // 0x0005 (in 1800, but no declaration says whose value it is) and 0x0020 (in no
        // service) are not in the tree.
        #expect(s.unplaced == [0x0005, 0x0020])
    }

    /// Our own server (the responses were sent) is a second table; a disconnection
    /// (Disconnection Complete 0x05, Vol 4 Part E 7.7.5) ends the link's tables, and the
    /// handle's next link starts new ones.
    @Test func eachServerAndEachLinkHasItsTable() throws {
        let c = Capture()
        c.acl(.received, [0x0A, 0x03, 0x00])
        c.acl(.sent, [0x0B, 0x01])
        c.acl(.sent, [0x0A, 0x03, 0x00])
        c.acl(.received, [0x0B, 0x02])
        c.event(0x05, [0x00, 0x40, 0x00, 0x13])
        c.acl(.sent, [0x0A, 0x03, 0x00])
        c.acl(.received, [0x0B, 0x03])
        let servers = try #require(c.d.attributes())
        #expect(servers.map(\.serverDirection) == [.sent, .received, .received])
        #expect(servers.map { $0.values[0x0003] } == [[0x01], [0x02], [0x03]])
    }

    /// Hostile: a long read that grows past 65535 octets (what Read Blob's 16-bit offset
    /// reaches, Core v5.4 Vol 3 Part F 3.4.4.5) is cut there; a Read Blob part at an offset that does not continue the value is ignored;
    /// responses with no request are ignored; every 16-bit handle discovered stays linear.
    @Test func hostileTrafficIsBounded() throws {
        let c = Capture()
        c.acl(.sent, [0x0A, 0x03, 0x00])
        c.acl(.received, [0x0B] + Array(repeating: 0x41, count: 500))
        // Parts of 500 at each offset up to 65 500, then one of 100 at offset 65 500.
        for offset in stride(from: 500, to: 65_500, by: 500) {
            c.acl(.sent, [0x0C, 0x03, 0x00, UInt8(offset & 0xFF), UInt8(offset >> 8)])
            c.acl(.received, [0x0D] + Array(repeating: 0x41, count: 500))
        }
        c.acl(.sent, [0x0C, 0x03, 0x00, 0xDC, 0xFF])
        c.acl(.received, [0x0D] + Array(repeating: 0x42, count: 100))
        c.acl(.sent, [0x0C, 0x03, 0x00, 0x00, 0x10])
        c.acl(.received, [0x0D, 0x43])
        c.acl(.received, [0x0B, 0x44])
        let s = try #require(c.d.attributes()?.first)
        #expect(s.values[0x0003] == Array(repeating: 0x41, count: 65_500) + Array(repeating: 0x42, count: 35))
        // 4 000 characteristic declarations in one service, each with a descriptor.
        let many = Capture()
        many.acl(.sent, [0x10, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28])
        many.acl(.received, [0x11, 0x06, 0x01, 0x00, 0xFF, 0xFF, 0x00, 0x18])
        for i in 0..<4000 {
            let h = UInt16(2 + 3 * i)
            many.acl(.sent, [0x08, UInt8(h & 0xFF), UInt8(h >> 8), 0xFF, 0xFF, 0x03, 0x28])
            many.acl(.received, [0x09, 0x07, UInt8(h & 0xFF), UInt8(h >> 8), 0x02, UInt8((h + 1) & 0xFF), UInt8((h + 1) >> 8), 0x00, 0x2A])
            many.acl(.sent, [0x04, UInt8((h + 2) & 0xFF), UInt8((h + 2) >> 8), UInt8((h + 2) & 0xFF), UInt8((h + 2) >> 8)])
            many.acl(.received, [0x05, 0x01, UInt8((h + 2) & 0xFF), UInt8((h + 2) >> 8), 0x01, 0x29])
        }
        let big = try #require(many.d.attributes()?.first)
        #expect(big.tree.first?.characteristics.count == 4000)
        #expect(big.tree.first?.characteristics.allSatisfy { $0.descriptors.count == 1 } == true)
    }
}
