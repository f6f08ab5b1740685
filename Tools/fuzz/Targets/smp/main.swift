// SMP PDUs (SMP.SMPPDU, Core Vol 3 Part H 3): what decodes encodes back to the same PDU and
// describes itself; nothing traps. (The pairing engine gets its own target when it lands.)
import FuzzSupport
import HCI
import SMP

runFuzzer { data in
    guard case .success(let pdu) = Result(catching: { () throws(DecodeError) in try SMPPDU.decode(data) }) else { return }
    _ = pdu.fields
    _ = pdu.name
    require((try? SMPPDU.decode(pdu.bytes)) == pdu, "SMP PDU does not survive encode/decode: \(data)")
}
