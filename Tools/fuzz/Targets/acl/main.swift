// ACL → L2CAP reassembly: the host's L2CAPReassembler, the decoder's per-(handle, direction)
// reassembly, and LE credit-based SDU reassembly of the frames. Each input is a sequence of
// (flags octet, fragment) pairs. Frames come out whole and within bounds; memory held stays
// below the configured frame size; the decoder renders every packet.
import FuzzSupport
import HCI
import Host
import L2CAP
import Capture
import Decoder

runFuzzer { data in
    var input = FuzzInput(data)
    let maxFrame = 4 + Int(input.byte() ?? 0) * 16
    let mtu = 23 + Int(input.byte() ?? 0) * 4
    let mps = 23 + Int(input.byte() ?? 0)
    var host = L2CAPReassembler(maxFrame: maxFrame)
    var sdu = SDUReassembler(mtu: mtu, mps: mps)
    let decoder = PacketDecoder()
    while let flags = input.byte() {
        let fragment = input.message() ?? []
        let start = flags & 1 == 0
        switch host.push(fragment, start: start) {
        case .frame(let f), .replaced(_, let f?):
            require(f.count <= host.maxFrame, "frame of \(f.count) octets above maxFrame \(host.maxFrame)")
            require(L2CAPFrame.totalLength(header: f) == f.count, "frame length disagrees with its basic header")
            let inPlace = try? L2CAPFrame.decodeInPlace(f)
            require((inPlace == nil) == ((try? L2CAPFrame.decode(f)) == nil), "decodeInPlace and decode disagree on \(f)")
            if let frame = try? L2CAPFrame.decode(f), var (cid, payload) = inPlace {
                require(frame.bytes == f, "L2CAP frame does not encode back to its bytes")
                require(cid == frame.cid && payload.rest() == frame.payload, "the payload read in place differs")
                if case .success(let s?) = Result(catching: { () throws(SDUError) in try sdu.push(frame.payload) }) {
                    require(s.count <= mtu, "SDU of \(s.count) octets above MTU \(mtu)")
                }
            }
        default: break
        }
        require(host.pendingCount <= host.maxFrame, "reassembler holds \(host.pendingCount) octets")

        let acl = HCIACLPacket(handle: UInt16(flags >> 4), boundary: start ? .first : .continuing, broadcast: 0, data: fragment)
        let p = decoder.decode(direction: flags & 2 == 0 ? .sent : .received, packet: .success(.acl(acl)),
                               raw: HCIPacket.acl(acl).h4, time: CaptureTime(seconds: 0, nanoseconds: 0))
        _ = render(p, json: flags & 4 != 0)
    }
}
