import Testing
import Synchronization
import HCI
import ATT
@testable import GATT

/// The GATT server's side of Signed Write Command (Core v5.4 Vol 3 Part G 4.9.2, Part F
/// 3.4.5.4): GATT holds no keys, so the verifier here is a stand-in that records what it was
/// asked; the CSRK check itself is the stack's (BLETests/SignedWriteTests).
@MainActor @Suite struct SignedWriteServerTests {
    final class Recorder: GATTSignedWriteVerifier {
        let verdict: ATTSecurity?
        let asked = Mutex<[[UInt8]]>([])
        init(verdict: ATTSecurity?) { self.verdict = verdict }
        func verify(peer: ATTPeer, message: [UInt8], signature: [UInt8]) -> ATTSecurity? {
            asked.withLock { $0.append(message + signature) }
            return verdict
        }
    }

    static func server() -> GATTServer {
        GATTServer(services: [GATTService(uuid: 0xFF70, characteristics: [
            GATTCharacteristic(uuid: 0xFF71, properties: [.authenticatedSignedWrites],
                               permissions: [.readable, .writable, .writeEncryptionRequired], value: [0]),
            GATTCharacteristic(uuid: 0xFF72, properties: [.read, .writeWithoutResponse],
                               permissions: [.readable, .writable], value: [0]),
        ])])
    }

    @Test func onlySignedCharacteristicsAndOnlyVerifiedSignatures() async throws {
        let server = Self.server()
        let (_, link) = await Loopback.connect(server)
        let signed = try #require(server.valueHandle(of: 0xFF71)), plain = try #require(server.valueHandle(of: 0xFF72))
        let signature = [UInt8](repeating: 0xAA, count: 12)
        func send(_ handle: UInt16, _ value: [UInt8]) async -> ATTPDU? {
            await link.raw(ATTPDU.signedWriteCommand(handle: handle, value: value, signature: signature).bytes)
        }
        // No verifier installed: ignored (a command is never answered).
        #expect(await send(signed, [1]) == nil)
        #expect(server.value(of: 0xFF71) == [0])

        // The verifier refuses (bad signature or replay): ignored.
        let refusing = Recorder(verdict: nil)
        server.setSignedWriteVerifier(refusing)
        #expect(await send(signed, [2]) == nil)
        #expect(server.value(of: 0xFF71) == [0])
        // It was asked about opcode || handle || value (Part F 3.4.5.4), with the signature.
        #expect(refusing.asked.withLock { $0 } == [[0xD2, UInt8(signed & 0xFF), UInt8(signed >> 8), 2] + signature])

        // Accepted: written with the security the signing key stands for (encryption required here).
        let accepting = Recorder(verdict: ATTSecurity(encrypted: true, authenticated: false, keySize: 16))
        server.setSignedWriteVerifier(accepting)
        #expect(await send(signed, [3]) == nil)
        #expect(server.value(of: 0xFF71) == [3])

        // A characteristic without the Authenticated Signed Writes property: not even verified.
        #expect(await send(plain, [4]) == nil)
        #expect(server.value(of: 0xFF72) == [0])
        #expect(accepting.asked.withLock { $0.count } == 1)
    }
}
