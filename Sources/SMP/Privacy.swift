import HCI
import Synchronization

/// Resolvable private addresses (Core v5.4 Vol 6 Part B 1.3.2.2; hash from ah, Vol 3 Part H 2.2.2).
public enum SMPPrivacy {
    /// A new RPA: prand (24 bits, two most significant bits 0b01, the random part neither all 0 nor
    /// all 1) above hash = ah(IRK, prand).
    public static func resolvablePrivateAddress(irk: [UInt8], random: (Int) -> [UInt8] = SMPCrypto.randomBytes) -> BDAddress {
        while true {
            var prand = random(3)   // LSO first
            prand[2] = prand[2] & 0x3F | 0x40
            let randomPart = (UInt32(prand[2] & 0x3F) << 16) | (UInt32(prand[1]) << 8) | UInt32(prand[0])
            guard randomPart != 0, randomPart != 0x3F_FFFF else { continue }
            return BDAddress(littleEndian: SMPCrypto.ah(irk: irk, prand: prand) + prand)
        }
    }

    /// Whether `rpa` is a resolvable private address generated from `irk`.
    public static func resolves(_ rpa: BDAddress, irk: [UInt8]) -> Bool {
        guard irk.count == 16, rpa.bytes[0] & 0xC0 == 0x40 else { return false }
        let le = rpa.littleEndian
        return SMPCrypto.ah(irk: irk, prand: Array(le[3..<6])) == Array(le[0..<3])
    }
}

/// Repeated-attempts protection (Vol 3 Part H 2.3.6): after a failed pairing with a peer, a waiting
/// interval must pass before pairing with it again, growing exponentially with each failure and
/// reset by a success. The stack keeps one tracker across links; SMPPairing consults it.
public final class SMPAttemptTracker: Sendable {
    public let initialWait: Duration
    public let maximumWait: Duration
    private struct Entry { var failures: Int; var until: ContinuousClock.Instant }
    private let entries = Mutex<[BDAddress: Entry]>([:])
    private static let capacity = 256

    public init(initialWait: Duration = .seconds(2), maximumWait: Duration = .seconds(64)) {
        self.initialWait = initialWait
        self.maximumWait = maximumWait
    }

    /// Whether pairing with `peer` may start now.
    public func mayPair(_ peer: DeviceAddress, now: ContinuousClock.Instant = .now) -> Bool {
        entries.withLock { $0[peer.address].map { now >= $0.until } ?? true }
    }

    /// When the waiting interval for `peer` ends (nil = none).
    public func waitingUntil(_ peer: DeviceAddress) -> ContinuousClock.Instant? {
        entries.withLock { $0[peer.address]?.until }
    }

    public func recordFailure(_ peer: DeviceAddress, now: ContinuousClock.Instant = .now) {
        entries.withLock { table in
            let failures = (table[peer.address]?.failures ?? 0) + 1
            var wait = initialWait
            for _ in 1..<failures where wait < maximumWait { wait *= 2 }
            table[peer.address] = Entry(failures: failures, until: now + min(wait, maximumWait))
            // Bounded memory: forget expired entries once the table grows, then the ones ending soonest.
            if table.count > Self.capacity {
                table = table.filter { $0.value.until > now }
                while table.count > Self.capacity, let soonest = table.min(by: { $0.value.until < $1.value.until }) {
                    table.removeValue(forKey: soonest.key)
                }
            }
        }
    }

    public func recordSuccess(_ peer: DeviceAddress) {
        _ = entries.withLock { $0.removeValue(forKey: peer.address) }
    }
}
