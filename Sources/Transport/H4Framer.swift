import HCI

/// Incremental H4 deframer: feed it whatever a read returned (half a header, several packets,
/// a packet and a half) and it returns every packet completed so far.
///
/// The buffer holds at most one incomplete packet plus the chunk being fed, so memory is
/// bounded by `maxPayloadLength`. An unknown indicator or a payload length above
/// `maxPayloadLength` means the stream has lost framing: `feed` throws `.framing` naming the
/// offending bytes, and the framer stays failed (there is no way to resynchronise H4).
public struct H4Framer: Sendable {
    /// Largest payload accepted (after the header). Real LE controllers use a few hundred
    /// octets at most; 16 KiB leaves room for vendors while catching a lying length early.
    public let maxPayloadLength: Int
    private var buffer: [UInt8] = []
    /// Index in `buffer` of the first byte not yet consumed.
    private var start = 0
    /// Total stream bytes consumed before `buffer[start]` (for error messages).
    private var streamOffset = 0
    private var failure: TransportError?

    public init(maxPayloadLength: Int = 16 * 1024) {
        self.maxPayloadLength = maxPayloadLength
        buffer.reserveCapacity(4096)
    }

    /// Bytes held for a packet not complete yet.
    public var pendingCount: Int { buffer.count - start }

    public mutating func feed(_ chunk: some Collection<UInt8>) throws(TransportError) -> [HCIPacket] {
        var packets: [HCIPacket] = []
        try feed(chunk) { packets.append($0) }
        return packets
    }

    /// Feeds bytes and calls `emit` for each completed packet, in order.
    public mutating func feed(_ chunk: some Collection<UInt8>, emit: (HCIPacket) -> Void) throws(TransportError) {
        if let failure { throw failure }
        // Compact before growing so the buffer never exceeds one partial packet + one chunk.
        if start > 0 && (start == buffer.count || start >= 4096) {
            buffer.removeSubrange(0..<start)
            start = 0
        }
        buffer.append(contentsOf: chunk)
        do {
            while let packet = try nextPacket() { emit(packet) }
        } catch {
            failure = error
            throw error
        }
    }

    private mutating func nextPacket() throws(TransportError) -> HCIPacket? {
        let available = buffer.count - start
        guard available >= 1 else { return nil }
        let indicator = buffer[start]
        guard let type = HCIPacketType(rawValue: indicator) else {
            throw TransportError(.framing, "H4 framing lost: unknown packet indicator \(hexCode(indicator)) at stream offset \(streamOffset); bytes: \(preview())")
        }
        let headerLength = type.headerLength
        guard available >= 1 + headerLength else { return nil }
        let payloadLength = type.payloadLength(header: buffer[(start + 1)..<(start + 1 + headerLength)])
        guard payloadLength <= maxPayloadLength else {
            throw TransportError(.framing, "H4 framing lost: \(type) packet at stream offset \(streamOffset) claims \(payloadLength) octets (maximum \(maxPayloadLength)); bytes: \(preview())")
        }
        let total = 1 + headerLength + payloadLength
        guard available >= total else { return nil }
        let body = Array(buffer[(start + 1)..<(start + total)])
        start += total
        streamOffset += total
        do {
            return try HCIPacket(type: type, body: body)
        } catch {
            // Unreachable for a well-formed header, kept so hostile bytes can never trap.
            throw TransportError(.framing, "H4 packet at stream offset \(streamOffset - total) does not decode: \(error)")
        }
    }

    /// The first bytes at the failure point, in hex, for the error message.
    private func preview() -> String {
        let end = Swift.min(buffer.count, start + 16)
        let shown = Array(buffer[start..<end]).map { b -> String in
            let s = String(b, radix: 16)
            return s.count == 1 ? "0" + s : s
        }.joined(separator: " ")
        return end < buffer.count ? shown + " …" : shown
    }
}
