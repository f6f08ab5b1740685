import HCI
import Testing
@testable import Transport

@Suite struct H4FramerTests {
    // Reset command, Command Complete for Reset, an ACL packet, an empty-parameter event.
    let stream: [UInt8] = [0x01, 0x03, 0x0c, 0x00,
                           0x04, 0x0e, 0x04, 0x01, 0x03, 0x0c, 0x00,
                           0x02, 0x40, 0x20, 0x05, 0x00, 0x01, 0x00, 0x04, 0x00, 0xaa,
                           0x04, 0x13, 0x00]
    var expected: [HCIPacket] {
        [.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0c03))),
         .event(HCIEventPacket(code: 0x0e, parameters: [0x01, 0x03, 0x0c, 0x00])),
         .acl(HCIACLPacket(handle: 0x040, boundary: .first, data: [0x01, 0x00, 0x04, 0x00, 0xaa])),
         .event(HCIEventPacket(code: 0x13))]
    }

    @Test func wholeStreamInOneChunk() throws {
        var f = H4Framer()
        #expect(try f.feed(stream) == expected)
        #expect(f.pendingCount == 0)
    }

    @Test func splitAtEveryOffset() throws {
        for cut in 0...stream.count {
            var f = H4Framer()
            var got = try f.feed(stream[0..<cut])
            got += try f.feed(stream[cut...])
            #expect(got == expected, "cut at \(cut)")
        }
    }

    @Test func oneByteAtATime() throws {
        var f = H4Framer()
        var got: [HCIPacket] = []
        for b in stream { got += try f.feed([b]) }
        #expect(got == expected)
    }

    @Test func unknownIndicatorIsFramingErrorNamingBytes() throws {
        var f = H4Framer()
        #expect(throws: TransportError.self) { _ = try f.feed([0x01, 0x03, 0x0c, 0x00, 0x07, 0xde, 0xad]) }
        do {
            var g = H4Framer()
            _ = try g.feed([0x04, 0x13, 0x00, 0x07, 0xde, 0xad])
            Issue.record("expected a framing error")
        } catch {
            #expect(error.kind == .framing)
            #expect(error.message.contains("0x07"))
            #expect(error.message.contains("07 de ad"))
            #expect(error.message.contains("offset 3"))
        }
        // Stays failed: H4 cannot resynchronise.
        #expect(throws: TransportError.self) { _ = try f.feed([0x04, 0x13, 0x00]) }
    }

    @Test func oversizeLengthIsFramingError() throws {
        var f = H4Framer(maxPayloadLength: 1024)
        do {
            _ = try f.feed([0x02, 0x40, 0x20, 0xff, 0xff])  // ACL claiming 65535 octets
            Issue.record("expected a framing error")
        } catch {
            #expect(error.kind == .framing)
            #expect(error.message.contains("65535"))
            #expect(error.message.contains("02 40 20 ff ff"))
        }
        // A length within the maximum just waits for more bytes, holding only that packet.
        var g = H4Framer(maxPayloadLength: 1024)
        #expect(try g.feed([0x02, 0x40, 0x20, 0x00, 0x04] + [UInt8](repeating: 0, count: 100)).isEmpty)
        #expect(g.pendingCount == 105)
    }

    @Test func manyPacketsBufferStaysBounded() throws {
        var f = H4Framer()
        var count = 0
        let chunk = [UInt8](repeating: 0, count: 0) + Array(repeating: [0x04, 0x13, 0x00] as [UInt8], count: 1000).flatMap { $0 }
        for _ in 0..<50 { try f.feed(chunk) { _ in count += 1 } }
        #expect(count == 50_000)
        #expect(f.pendingCount == 0)
    }
}

@Suite struct TransportSpecTests {
    @Test func parsesEveryForm() throws {
        #expect(try TransportSpec(parsing: "hci0") == .userChannel(index: 0))
        #expect(try TransportSpec(parsing: "hci:12") == .userChannel(index: 12))
        #expect(try TransportSpec(parsing: "tcp:127.0.0.1:9000") == .tcp(host: "127.0.0.1", port: 9000))
        #expect(try TransportSpec(parsing: "tcp:[::1]:9000") == .tcp(host: "::1", port: 9000))
        #expect(try TransportSpec(parsing: "unix:/tmp/c.sock") == .unix(path: "/tmp/c.sock"))
        #expect(try TransportSpec(parsing: "serial:/dev/ttyUSB0") == .serial(path: "/dev/ttyUSB0", baud: 1_000_000))
        #expect(try TransportSpec(parsing: "serial:/dev/ttyS1@115200") == .serial(path: "/dev/ttyS1", baud: 115200))
        #expect(try TransportSpec(parsing: "virtual") == .virtual)
        #expect(TransportSpec.tcp(host: "::1", port: 1).description == "tcp:[::1]:1")
    }

    @Test(arguments: ["", "hci", "hcix", "hci:-1", "tcp:host", "tcp::9000", "tcp:h:0", "tcp:h:70000",
                      "unix:", "serial:", "serial:/dev/x@fast", "serial:/dev/x@12345", "bluetooth", "hci0 "])
    func rejectsBadSpecs(_ spec: String) {
        do {
            _ = try TransportSpec(parsing: spec)
            Issue.record("\(spec) parsed")
        } catch {
            #expect(error.kind == .badSpec)
            #expect(error.message.contains("tcp:HOST:PORT"))
        }
    }
}
