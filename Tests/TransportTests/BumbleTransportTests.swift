import Foundation
import HCI
import Testing
import Transport
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite(.timeLimit(.minutes(1)))
struct BumbleTransportTests {
    func commandComplete(_ p: HCIPacket) throws -> CommandComplete {
        guard case .event(let e) = p else { throw TestTimeout(what: "an event, got \(p)") }
        let decoded = try HCIEvents.decode(e)
        return try #require(decoded as? CommandComplete)
    }

    @Test func resetReadAddressReadVersion() async throws {
        let bumble = try await BumbleControllers.start()
        defer { bumble.stop() }
        let t = try TCPTransport.connect(host: "127.0.0.1", port: bumble.port1, timeout: 5)
        defer { t.close() }
        let inbox = Inbox(t.incoming)

        try t.send(.command(Reset().packet))
        let reset = try commandComplete(try await inbox.next(timeout: 10))
        #expect(reset.opcode == Reset.opcode)
        #expect(reset.status == .success)

        try t.send(.command(ReadBDADDR().packet))
        let addr = try commandComplete(try await inbox.next(timeout: 10))
        #expect(addr.opcode == ReadBDADDR.opcode)
        let address = try addr.result(ReadBDADDR.self).address
        #expect(address.description.count == 17)

        try t.send(.command(ReadLocalVersionInformation().packet))
        let version = try commandComplete(try await inbox.next(timeout: 10))
        #expect(version.opcode == ReadLocalVersionInformation.opcode)
        let v = try version.result(ReadLocalVersionInformation.self)
        #expect(v.hciVersion == 9)  // Bumble's controller reports Core 5.0
        #expect(v.lmpVersion == 9)
    }
}
