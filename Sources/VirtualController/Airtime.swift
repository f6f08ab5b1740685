/// Time on the air of LE packets, from the PHY timings of the Core Specification (v5.4):
/// what the airtime model of `VirtualLink` spends per PDU, per connection event and per
/// advertising event. Times are in seconds.
public enum Airtime {
    /// The LE PHYs a connection can use (Core v5.4 Vol 6 Part A 3.1, Vol 6 Part B 2.2).
    public enum PHY: Sendable, Hashable, CaseIterable, CustomStringConvertible {
        case le1M, le2M, codedS2, codedS8

        /// The HCI PHY number (LE Read PHY, LE PHY Update Complete: 1, 2, 3 Coded) and the
        /// coding for Coded (S=8 unless the host prefers S=2, Vol 4 Part E 7.8.49).
        public init?(hci: UInt8, preferS2: Bool = false) {
            switch hci {
            case 1: self = .le1M
            case 2: self = .le2M
            case 3: self = preferS2 ? .codedS2 : .codedS8
            default: return nil
            }
        }

        public var description: String {
            switch self {
            case .le1M: "1M"
            case .le2M: "2M"
            case .codedS2: "Coded S=2"
            case .codedS8: "Coded S=8"
            }
        }
    }

    /// Inter frame space between consecutive packets on the same channel (Vol 6 Part B 4.1.1).
    public static let tIFS = 150e-6
    /// Delay from the end of CONNECT_IND to the transmit window (Vol 6 Part B 4.5.3: 1.25 ms on
    /// the LE 1M primary channel).
    public static let transmitWindowDelay = 1.25e-3
    /// advDelay is a pseudo-random value in 0–10 ms added to each advertising interval
    /// (Vol 6 Part B 4.4.2.2.1).
    public static let maxAdvDelay = 10e-3
    /// Octets of a Message Integrity Check, in every encrypted PDU with a payload (Vol 6 Part B
    /// 2.4: not in a PDU whose Length is 0).
    public static let micOctets = 4

    /// Air time of one link layer packet carrying a PDU of `payload` octets (header not counted,
    /// the MIC counted when `encrypted` and the payload is not empty).
    /// - Uncoded (Vol 6 Part B 2.1): preamble (1 octet on 1M, 2 on 2M), access address (4),
    ///   PDU header (2), payload, CRC (3); 1 µs per bit on LE 1M, 0.5 µs on LE 2M.
    /// - Coded (Vol 6 Part B 2.2): preamble 80 µs; FEC block 1 (access address 32 bits, CI 2,
    ///   TERM1 3) at S=8: 296 µs; FEC block 2 (header, payload, CRC, TERM2 3 bits) at 2 or 8 µs
    ///   per bit.
    /// (Vol 6 Part B 4.5.10's limits follow: 328 µs for 27 octets with MIC on 1M, 2120 for 251;
    /// 2704 and 17040 µs on Coded S=8.)
    public static func packetTime(payload: Int, phy: PHY, encrypted: Bool = false) -> Double {
        let pdu = 2 + payload + (encrypted && payload > 0 ? micOctets : 0)
        switch phy {
        case .le1M: return Double((1 + 4 + pdu + 3) * 8) * 1e-6
        case .le2M: return Double((2 + 4 + pdu + 3) * 8) * 0.5e-6
        case .codedS2: return (80 + 296 + Double((pdu + 3) * 8 + 3) * 2) * 1e-6
        case .codedS8: return (80 + 296 + Double((pdu + 3) * 8 + 3) * 8) * 1e-6
        }
    }

    /// One exchange of a connection event: the central's packet, T_IFS, the peripheral's
    /// answer, T_IFS (Vol 6 Part B 4.5.1, 4.5.6: the two alternate, each T_IFS after the other).
    public static func exchangeTime(central: Int, peripheral: Int, phy: PHY, encrypted: Bool = false) -> Double {
        packetTime(payload: central, phy: phy, encrypted: encrypted) + tIFS
            + packetTime(payload: peripheral, phy: phy, encrypted: encrypted) + tIFS
    }

    /// Data PDUs of `octets` octets one side can send in one connection event of at most
    /// `eventLength` seconds, the other side answering with empty PDUs and the sender setting
    /// the MD bit while it has more (Vol 6 Part B 4.5.6). The event ends at least T_IFS before
    /// the next anchor point (4.5.6), so every exchange counts its trailing T_IFS; at least one
    /// exchange takes place at the anchor.
    public static func pdusPerEvent(octets: Int, phy: PHY, eventLength: Double, encrypted: Bool = false) -> Int {
        let exchange = exchangeTime(central: octets, peripheral: 0, phy: phy, encrypted: encrypted)
        return max(1, Int((eventLength + 1e-12) / exchange))
    }

    /// The most data PDUs per second a link carries one way at connection interval `interval`,
    /// with events as long as the interval (`pdusPerEvent` per event).
    public static func throughputLimit(octets: Int, phy: PHY, interval: Double, eventLength: Double? = nil,
                                       encrypted: Bool = false) -> Double {
        Double(pdusPerEvent(octets: octets, phy: phy, eventLength: min(interval, eventLength ?? interval),
                            encrypted: encrypted)) / interval
    }

    /// Link layer PDUs that carry an ACL packet of `length` octets with PDUs of at most
    /// `maxOctets` (Vol 6 Part B 4.5.10; an empty start fragment still takes one PDU).
    static func pdus(forLength length: Int, maxOctets: Int) -> Int {
        max(1, (length + maxOctets - 1) / max(1, maxOctets))
    }

    /// An advertising event on `channels` primary channels (Vol 6 Part B 4.4.2): on each, the
    /// advertising PDU (AdvA and data, on LE 1M), T_IFS, room for a request (SCAN_REQ 12
    /// octets, CONNECT_IND 34), T_IFS; plus the scan response when a scanner asks for it.
    static func advertisingEventTime(dataOctets: Int, scanResponseOctets: Int?, connectable: Bool, channels: Int) -> Double {
        let pdu = packetTime(payload: 6 + min(dataOctets, 31), phy: .le1M)
        let request = packetTime(payload: connectable ? 34 : 12, phy: .le1M)
        var t = Double(max(1, channels)) * (pdu + tIFS + request + tIFS)
        if let rsp = scanResponseOctets { t += packetTime(payload: 6 + min(rsp, 31), phy: .le1M) + tIFS }
        return t
    }

    /// What `VirtualLink` simulates when it has an airtime model.
    public struct Configuration: Sendable {
        /// The longest connection event the controllers schedule (a controller's own setting;
        /// the host's Min/Max_CE_Length are hints it need not follow, Vol 4 Part E 7.8.12).
        /// nil: the whole connection interval.
        public var maxEventLength: Double?
        /// Seed of the advDelay draws (runs with the same seed draw the same delays).
        public var seed: UInt64

        public init(maxEventLength: Double? = nil, seed: UInt64 = 0x29) {
            self.maxEventLength = maxEventLength
            self.seed = seed
        }
    }
}

/// SplitMix64: the advDelay draws, reproducible from a seed (link context only).
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
