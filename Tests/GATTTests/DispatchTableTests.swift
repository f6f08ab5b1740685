import Testing
import HCI
import ATT
@testable import GATT

/// The server's dispatch by opcode (generated from Tools/pdl/att.pdl into `ATTServerHandler`)
/// against the specification's rules for every one of the 256 opcodes, not only those a
/// scenario happens to send.
@Suite struct DispatchTableTests {
    /// Parameters tried after each opcode until one decodes: enough for every request and command
    /// layout of Core v5.4 Vol 3 Part F 3.4 (handles, handle ranges with a 16-bit UUID, flags,
    /// values, a 12-octet signature).
    static let candidates: [[UInt8]] = [
        [], [0x01], [0x01, 0x00], [0x01, 0x00, 0x02, 0x00], [0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28],
        [0x01, 0x00, 0xFF, 0xFF, 0x00, 0x28, 0x00, 0x18], [0x03, 0x00] + [UInt8](repeating: 0, count: 12),
    ]

    static func samplePDU(_ raw: UInt8) -> ATTPDU? {
        for parameters in candidates {
            if let pdu = try? ATTPDU.decode([raw] + parameters) { return pdu }
        }
        return nil
    }

    @Test func everyOpcodeIsAnsweredPerSpec() throws {
        let server = GATTServer(services: demoServices())
        let peer = ATTPeer(id: 0x0040)
        var served = 0
        for raw in UInt8.min...UInt8.max {
            let op = ATTOpcode(raw)
            guard let pdu = Self.samplePDU(raw) else {
                // Only PDUs a server never gets may fail every candidate (responses with lists).
                #expect(op.info.map { $0.kind != .request && $0.kind != .command } ?? false, "\(op) did not decode")
                continue
            }
            let answer = server.response(to: pdu, from: peer, mtu: 23, security: .none)
            switch op.info?.kind {
            case .request?:
                let answer = try #require(answer, "no answer to \(op)")
                if op == .exchangeMTURequest {
                    // The bearer answers Exchange MTU itself (3.4.2.2): not in the server's table.
                    #expect(answer == .errorResponse(requestOpcode: op, handle: 0, error: .requestNotSupported))
                } else if case .errorResponse(let inError, _, let code) = answer {
                    #expect(inError == op)
                    #expect(code != .requestNotSupported, "\(op) has no handler")
                    served += 1
                } else {
                    // A request is answered by the next opcode (3.3, Table 3.37).
                    #expect(answer.opcode == op.responseOpcode, "\(op) answered with \(answer.opcode)")
                    served += 1
                }
            case .command?:
                // Commands are never answered (3.3, 3.4.5.3, 3.4.5.4).
                #expect(answer == nil, "\(op) answered")
            case nil where !op.isCommand:
                // An unknown request: Request Not Supported (3.4.1.1, Table 3.4).
                #expect(answer == .errorResponse(requestOpcode: op, handle: 0, error: .requestNotSupported), "\(op)")
            default:
                // Unknown commands are ignored (3.3.1); responses, notifications, indications and
                // confirmations are not for the server's handlers.
                #expect(answer == nil, "\(op) answered")
            }
        }
        // Every request of Table 3.37 but Exchange MTU reaches its handler.
        #expect(served == 11)
    }
}
