import HCI

/// LE credit-based flow control mode SDUs (Core Vol 3 Part A 3.4): the first K-frame of an SDU
/// starts with a 2-octet SDU Length, then the information payload; following K-frames carry
/// payload only. Each K-frame's information (SDU length included) is at most MPS octets.
public enum KFrame {
    public static let sduLengthSize = 2
    /// Smallest MPS and MTU allowed on LE credit-based channels.
    public static let minimumMPS = 23
    public static let minimumMTU = 23
    public static let maximumMPS = 65533
}

public enum SDUError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The SDU (announced or sent) is larger than the channel's MTU.
    case sduTooLarge(length: Int, mtu: Int)
    /// A K-frame payload larger than the MPS.
    case frameTooLarge(length: Int, mps: Int)
    /// More payload arrived than the SDU Length announced.
    case overrun(expected: Int, received: Int)
    /// A first K-frame shorter than the 2-octet SDU Length.
    case missingSDULength
    /// The MPS is below 2 (or 23 where the spec requires it).
    case invalidMPS(Int)

    public var description: String {
        switch self {
        case let .sduTooLarge(length, mtu): return "SDU of \(length) octets exceeds MTU \(mtu)"
        case let .frameTooLarge(length, mps): return "K-frame of \(length) octets exceeds MPS \(mps)"
        case let .overrun(expected, received): return "SDU overrun: \(received) octets for an SDU of \(expected)"
        case .missingSDULength: return "first K-frame shorter than its SDU Length field"
        case let .invalidMPS(mps): return "invalid MPS \(mps)"
        }
    }
}

/// Splits an SDU into K-frame information payloads of at most `mps` octets each, the first
/// prefixed by the SDU length. An empty SDU is one K-frame holding only the SDU length.
/// Throws when the SDU doesn't fit the 16-bit SDU Length or `mtu` (when given).
public func segmentSDU(_ sdu: [UInt8], mps: Int, mtu: Int? = nil) throws(SDUError) -> [[UInt8]] {
    guard mps > KFrame.sduLengthSize, mps <= 65535 else { throw .invalidMPS(mps) }
    let limit = Swift.min(mtu ?? 65535, 65535)
    guard sdu.count <= limit else { throw .sduTooLarge(length: sdu.count, mtu: limit) }
    var frames: [[UInt8]] = []
    frames.reserveCapacity((sdu.count + KFrame.sduLengthSize) / mps + 1)
    let firstCount = Swift.min(sdu.count, mps - KFrame.sduLengthSize)
    var first: [UInt8] = []
    first.reserveCapacity(KFrame.sduLengthSize + firstCount)
    first.append(UInt8(sdu.count & 0xff))
    first.append(UInt8(sdu.count >> 8))
    first.append(contentsOf: sdu[0..<firstCount])
    frames.append(first)
    var offset = firstCount
    while offset < sdu.count {
        let n = Swift.min(mps, sdu.count - offset)
        frames.append(Array(sdu[offset..<offset + n]))
        offset += n
    }
    return frames
}

/// Reassembles SDUs from K-frame information payloads. Memory is bounded by the MTU: an SDU
/// Length above the MTU, a K-frame above the MPS or more octets than announced throw (the
/// channel must then be disconnected, Core Vol 3 Part A 3.4.3) and reset the reassembler.
public struct SDUReassembler: Sendable {
    /// Raised by a reconfiguration (Core v5.4 Vol 3 Part A 4.27), even in the middle of an SDU.
    public var mtu: Int
    public var mps: Int
    private var buffer: [UInt8] = []
    private var expected: Int? = nil

    public init(mtu: Int, mps: Int = 65533) {
        self.mtu = mtu
        self.mps = mps
    }

    /// True while an SDU is partly received.
    public var isReassembling: Bool { expected != nil }
    /// Octets still missing from the SDU in progress (0 when none is).
    public var missing: Int { expected.map { $0 - buffer.count } ?? 0 }

    /// Feeds one K-frame's information payload; returns the SDU when it is complete.
    public mutating func push(_ payload: [UInt8]) throws(SDUError) -> [UInt8]? {
        guard payload.count <= mps else {
            reset()
            throw .frameTooLarge(length: payload.count, mps: mps)
        }
        if let expected {
            guard buffer.count + payload.count <= expected else {
                let received = buffer.count + payload.count
                reset()
                throw .overrun(expected: expected, received: received)
            }
            buffer.append(contentsOf: payload)
            return completeIfDone()
        }
        guard payload.count >= KFrame.sduLengthSize else {
            reset()
            throw .missingSDULength
        }
        let length = Int(payload[payload.startIndex]) | Int(payload[payload.startIndex + 1]) << 8
        guard length <= mtu else { throw .sduTooLarge(length: length, mtu: mtu) }
        let body = payload.count - KFrame.sduLengthSize
        guard body <= length else { throw .overrun(expected: length, received: body) }
        expected = length
        buffer = []
        buffer.reserveCapacity(length)
        buffer.append(contentsOf: payload[(payload.startIndex + KFrame.sduLengthSize)...])
        return completeIfDone()
    }

    /// Drops any partial SDU.
    public mutating func reset() {
        buffer = []
        expected = nil
    }

    private mutating func completeIfDone() -> [UInt8]? {
        guard let expected, buffer.count == expected else { return nil }
        let sdu = buffer
        reset()
        return sdu
    }
}
