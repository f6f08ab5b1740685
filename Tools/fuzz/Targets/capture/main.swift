// Capture files (Capture.CaptureReader: btsnoop 1001/1002/2001, pcap and pcapng 187/201/254, Apple
// PacketLogger in both byte orders) through the whole
// `dump` path: every record the reader yields is decoded and rendered as text and JSON, with
// `--stats`' counting and `--attributes`' tables collected and finished at the end.
import FuzzSupport
import HCI
import Capture
import Decoder

runFuzzer { data in
    guard var reader = try? CaptureReader(bytes: data) else { return }
    let decoder = PacketDecoder(statistics: true, attributes: true)
    var count = 0
    while let record = try? reader.next() {
        count += 1
        require(count <= data.count, "more records than octets")
        let p = decoder.decode(record)
        _ = render(p, json: count & 1 == 0)
    }
    _ = decoder.statistics()
    _ = decoder.attributes()
}
