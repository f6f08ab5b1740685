// The ATT server (GATT.GATTServer behind the bearer's dispatch): a fresh server per input (a
// copy of one built at start: building the table and its Database Hash cost more than the
// requests) gets a sequence of PDUs at an ATT_MTU and security level the input chooses. Every request gets
// its response or an Error Response naming it; every answer fits ATT_MTU and decodes back to
// itself; commands get no answer. Exchange MTU is the bearer's, not the server's: skipped.
import FuzzSupport
import HCI
import ATT
import GATT

let template = GATTServer(services: sampleServices())

runFuzzer { data in
    var input = FuzzInput(data)
    let mtu = min(23 + Int(input.byte() ?? 0) * 2, 517)
    let s = input.byte() ?? 0
    let security = ATTSecurity(encrypted: s & 1 != 0, authenticated: s & 2 != 0, authorized: s & 4 != 0,
                               keySize: s & 1 != 0 ? 7 + Int(s >> 4) % 10 : 0)
    let server = GATTServer(copying: template)
    let peer = ATTPeer(id: 0x0040)

    func check(_ answer: ATTPDU, to op: ATTOpcode) {
        let bytes = answer.bytes
        require(bytes.count <= mtu, "\(answer.opcode) of \(bytes.count) octets with ATT_MTU \(mtu) (request \(op))")
        require((try? ATTPDU.decode(bytes)) == answer, "answer \(bytes) to \(op) does not decode to itself")
        switch answer {
        case .errorResponse(let requestOpcode, _, _):
            require(requestOpcode == op, "Error Response names \(requestOpcode), the request was \(op)")
        default:
            require(answer.opcode == op.responseOpcode, "\(answer.opcode) answers \(op)")
        }
    }

    while let pdu = input.message() {
        // The bearer drops PDUs longer than ATT_MTU before the server sees them.
        guard pdu.count <= mtu else { continue }
        // As the bearer reads it: in place after a B-frame header, other octets after it in
        // the same array; the same result as the PDU decoded alone.
        let framed: [UInt8] = [0x00, 0x00, 0x04, 0x00] + pdu + [0x0A, 0xFF]
        let decoded = ATTPDU.decodeResult(from: ByteReader(framed, in: 4..<4 + pdu.count), mtu: mtu)
        require(decoded == ATTPDU.decodeResult(pdu, mtu: mtu), "\(pdu) decodes differently in place")
        switch decoded {
        case .malformed(let op, let error):
            if let reply = ATTPDU.serverRejection(for: .malformed(opcode: op, error: error)), let op {
                check(reply, to: op)
            }
        case .pdu(let request):
            let op = request.opcode
            if let reply = ATTPDU.serverRejection(for: .pdu(request)) {
                check(reply, to: op)
                continue
            }
            if request.opcode == .exchangeMTURequest || !(op.isRequest || op.isCommand) { continue }
            let answer = server.response(to: request, from: peer, mtu: mtu, security: security)
            if op.isRequest {
                guard let answer else { require(false, "no answer to \(op)"); continue }
                check(answer, to: op)
            } else {
                require(answer == nil, "command \(op) answered with \(answer!.opcode)")
            }
        }
    }
}
