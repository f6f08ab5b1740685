// H4 framing (Transport.H4Framer): the same stream fed whole and in fuzzer-chosen pieces gives
// the same packets and the same verdict; each packet's H4 bytes are the stream's next bytes;
// what the framer holds stays below one packet of the maximum size.
import FuzzSupport
import HCI
import Transport

runFuzzer { data in
    var input = FuzzInput(data)
    let maxPayload = Int(input.byte() ?? 0) * 64 + 1
    let pieceSeed = Int(input.byte() ?? 0)
    let stream = input.rest()

    var whole = H4Framer(maxPayloadLength: maxPayload)
    var wholePackets: [HCIPacket] = []
    var wholeFailed = false
    do { try whole.feed(stream) { wholePackets.append($0) } } catch { wholeFailed = true }

    var pieces = H4Framer(maxPayloadLength: maxPayload)
    var piecePackets: [HCIPacket] = []
    var piecesFailed = false
    var i = 0, k = 0
    while i < stream.count {
        let n = 1 + (pieceSeed + 31 * k) % 13
        k += 1
        let chunk = stream[i..<min(stream.count, i + n)]
        i += n
        do { try pieces.feed(chunk) { piecePackets.append($0) } } catch { piecesFailed = true; break }
        require(pieces.pendingCount < 1 + 4 + maxPayload, "framer holds \(pieces.pendingCount) octets (max payload \(maxPayload))")
    }
    require(wholePackets == piecePackets, "whole and piecewise feeding disagree")
    require(wholeFailed == piecesFailed, "whole feeding failed: \(wholeFailed), piecewise: \(piecesFailed)")

    var offset = 0
    for p in wholePackets {
        let h4 = p.h4
        require(offset + h4.count <= stream.count && Array(stream[offset..<offset + h4.count]) == h4,
                "packet at stream offset \(offset) is not the bytes fed")
        offset += h4.count
        if case .success(let again) = Result(catching: { () throws(DecodeError) in try HCIPacket(h4: h4) }) {
            require(again == p, "H4 bytes of a framed packet decode to another packet")
        }
    }
}
