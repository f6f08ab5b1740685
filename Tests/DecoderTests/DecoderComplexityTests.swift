import Foundation
import Testing
import HCI
import Capture
@testable import Decoder

// Issue 13 defect 11: `dump` of a crafted capture must take time linear in its size. The GATT
// tracker used to scan every value handle for each descriptor (and copied its tables on every
// packet): 8000 descriptors took seconds.

/// A btsnoop capture of one connection's discovery of `n` characteristics, each with one
/// descriptor after its value: characteristic k has its declaration at 3k+1, its value at
/// 3k+2 (UUID 0x1000+k) and a descriptor at 3k+3. Each declaration comes in its own Read By
/// Type Response, each descriptor in its own Find Information Response (Core v5.4 Vol 3 Part F
/// 3.4.4.2 / 3.4.3.2), both after their requests, so the capture has 4n packets.
func craftedDiscoveryCapture(characteristics n: Int) -> [UInt8] {
    func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8 & 0xff)] }
    func acl(_ att: [UInt8]) -> HCIPacket {
        // Basic L2CAP header (length, CID 0x0004 ATT) in one start fragment on handle 0x0040.
        .acl(HCIACLPacket(handle: 0x0040, boundary: .first, broadcast: 0, data: le16(att.count) + le16(0x0004) + att))
    }
    var file = BtsnoopWriter.fileHeader()
    let time = Date(timeIntervalSince1970: 1_700_000_000)
    for k in 0..<n {
        let declaration = 3 * k + 1, value = 3 * k + 2, descriptor = 3 * k + 3
        file += BtsnoopWriter.record(acl([0x08] + le16(declaration) + le16(0xffff) + le16(0x2803)), direction: .sent, time: time)
        file += BtsnoopWriter.record(acl([0x09, 7] + le16(declaration) + [0x02] + le16(value) + le16(0x1000 + k)), direction: .received, time: time)
        file += BtsnoopWriter.record(acl([0x04] + le16(descriptor) + le16(descriptor)), direction: .sent, time: time)
        file += BtsnoopWriter.record(acl([0x05, 0x01] + le16(descriptor) + le16(0x2901)), direction: .received, time: time)
    }
    return file
}

/// CPU seconds this thread spends reading and decoding `capture` (CPU time, not wall time: other
/// processes on a shared machine slow the wall clock, not this thread's own work).
func decodeCPUSeconds(_ capture: [UInt8]) throws -> (seconds: Double, packets: [DecodedPacket]) {
    func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
    let start = now()
    var reader = try CaptureReader(bytes: capture)
    let (records, error) = reader.readAll()
    if let error { throw error }
    let decoder = PacketDecoder()
    let packets = records.map { decoder.decode($0) }
    return (now() - start, packets)
}

@Suite struct DecoderComplexityTests {
    @Test func manyDescriptorsDecodeInLinearTime() throws {
        let n = 1000
        let smallCapture = craftedDiscoveryCapture(characteristics: n), largeCapture = craftedDiscoveryCapture(characteristics: 4 * n)
        // The best of several interleaved runs: the run least disturbed by the rest of the machine.
        var small = Double.infinity, large = Double.infinity
        var packets: [DecodedPacket] = []
        for _ in 0..<3 {
            small = min(small, try decodeCPUSeconds(smallCapture).seconds)
            let l = try decodeCPUSeconds(largeCapture)
            large = min(large, l.seconds)
            packets = l.packets
        }
        // Linear: 4x the packets take ~4x the time; quadratic would take ~16x. 8x leaves room
        // for noise on a shared machine and still fails the quadratic tracker.
        #expect(large / small < 8, "decoding \(4 * n) characteristics took \(large) s, \(n) took \(small) s: ratio \(large / small)")

        // And the answer is still right: a descriptor belongs to the characteristic whose value
        // handle precedes it (Core v5.4 Vol 3 Part G 3.3.3): the last descriptor, 3(4n-1)+3,
        // to UUID 0x1000 + 4n-1.
        let last = try #require(packets.last?.layer("gatt"))
        #expect(values(named: "characteristic", in: last) == [.text(BluetoothUUID(UInt16(0x1000 + 4 * n - 1)).description)])
        #expect(values(named: "handle", in: last).count == 1)
    }

    @Test func handleSetFindsTheLastMemberBelow() {
        // Against the obvious linear scan, on sparse and dense sets and at word boundaries.
        var rng = SystemRandomNumberGenerator()
        for density in [2, 64, 4000] {
            var set = HandleSet()
            var members: [UInt16] = [0, 63, 64, 4095, 65535]
            members += (0..<density).map { _ in UInt16.random(in: 0...65535, using: &rng) }
            for m in members { set.insert(m) }
            let sorted = members.sorted()
            var queries: [UInt16] = [0, 1, 63, 64, 65, 4096, 65535]
            queries += (0..<500).map { _ in UInt16.random(in: 0...65535, using: &rng) }
            for q in queries {
                #expect(set.last(before: q) == sorted.last { $0 < q }, "query \(q)")
            }
        }
        #expect(HandleSet().last(before: 100) == nil)
        var one = HandleSet()
        one.insert(100)
        #expect(one.last(before: 100) == nil)
        #expect(one.last(before: 101) == 100)
        #expect(one.last(before: 65535) == 100)
    }
}
