import COpenSSL
import HCI
import OpenSSLCrypto

// The Security Manager's cryptographic toolbox (Core v5.4 Vol 3 Part H 2.2), all through
// OpenSSL's libcrypto: AES-128 (e), AES-CMAC (RFC 4493) and P-256 ECDH. Nothing is hand-rolled.
//
// Byte order: every value passed to or returned by these functions is in the order SMP PDUs
// carry it, least significant octet first (LSO first), except `aesCMAC`, which works on byte
// strings exactly as RFC 4493 defines it. The specification defines the functions (and prints
// its sample data, Appendix D) most significant octet first, so each function reverses its
// inputs, computes exactly what the spec's formula says, and reverses the result.

public enum SMPCrypto {
    /// `n` octets from the OS's CSPRNG (OpenSSL RAND_bytes). Never HCI LE Rand (issue 12).
    public static func randomBytes(_ n: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: n)
        guard n > 0 else { return out }
        // RAND_bytes only fails when the OS gives no entropy; continuing with zeros would be a silent
        // security failure, so this is a hard stop.
        precondition(RAND_bytes(&out, Int32(n)) == 1, "RAND_bytes failed: no entropy from the OS")
        return out
    }

    // MARK: AES-128 based (legacy pairing, privacy)

    /// e(key, plaintextData): AES-128 of one block (Vol 3 Part H 2.2.1). LSO first in and out.
    public static func e(key: [UInt8], plaintext: [UInt8]) -> [UInt8] {
        Array(aes128(key: key.reversed(), block: plaintext.reversed()).reversed())
    }

    /// c1 confirm value generation for LE legacy pairing (Vol 3 Part H 2.2.3):
    /// c1(k, r, preq, pres, iat, rat, ia, ra) = e(k, e(k, r XOR p1) XOR p2), with
    /// p1 = pres || preq || rat' || iat' and p2 = padding || ia || ra (MSO first).
    /// `preq`/`pres` are the 7-octet Pairing Request/Response PDUs as sent; `iat`/`rat` the
    /// address types (0 public, 1 random).
    public static func c1(k: [UInt8], r: [UInt8], preq: [UInt8], pres: [UInt8],
                          iat: UInt8, ia: BDAddress, rat: UInt8, ra: BDAddress) -> [UInt8] {
        // LSO first, p1 is iat', rat', then preq and pres in PDU order.
        let p1 = [iat & 1, rat & 1] + preq + pres
        let p2 = ra.littleEndian + ia.littleEndian + [0, 0, 0, 0]
        return e(key: k, plaintext: xor(e(key: k, plaintext: xor(r, p1)), p2))
    }

    /// s1 key generation for the STK (Vol 3 Part H 2.2.4): s1(k, r1, r2) = e(k, r1' || r2'),
    /// r1' and r2' being the least significant 64 bits of r1 and r2.
    public static func s1(k: [UInt8], r1: [UInt8], r2: [UInt8]) -> [UInt8] {
        e(key: k, plaintext: Array(r2.prefix(8)) + Array(r1.prefix(8)))
    }

    /// ah random address hash (Vol 3 Part H 2.2.2): ah(k, r) = e(k, padding || r) mod 2^24.
    /// `prand` and the result are 3 octets, LSO first.
    public static func ah(irk: [UInt8], prand: [UInt8]) -> [UInt8] {
        Array(e(key: irk, plaintext: Array(prand.prefix(3)) + [UInt8](repeating: 0, count: 13)).prefix(3))
    }

    // MARK: AES-CMAC based (LE Secure Connections)

    /// AES-CMAC with a 128-bit key (RFC 4493), on byte strings in their natural order (MSO first).
    public static func aesCMAC(key: [UInt8], message: [UInt8]) -> [UInt8] { AES128.cmac(key: key, message: message) }

    /// f4(U, V, X, Z) = AES-CMAC_X(U || V || Z) (Vol 3 Part H 2.2.6): SC confirm values.
    /// U, V: 32-octet public key X coordinates; X: 16-octet nonce; Z: one octet. LSO first.
    public static func f4(u: [UInt8], v: [UInt8], x: [UInt8], z: UInt8) -> [UInt8] {
        cmacLE(key: x, message: [z] + v + u)
    }

    /// f5(W, N1, N2, A1, A2) (Vol 3 Part H 2.2.7): SC MacKey and LTK from the DHKey W.
    /// A1/A2: 7 octets each, see `addressOctets`. Returns (MacKey, LTK), LSO first.
    public static func f5(w: [UInt8], n1: [UInt8], n2: [UInt8], a1: [UInt8], a2: [UInt8]) -> (macKey: [UInt8], ltk: [UInt8]) {
        // SALT and keyID "btle" as the spec prints them (MSO first).
        let salt: [UInt8] = [0x6C, 0x88, 0x83, 0x91, 0xAA, 0xF5, 0xA5, 0x38, 0x60, 0x37, 0x0B, 0xDB, 0x5A, 0x60, 0x83, 0xBE]
        let keyID: [UInt8] = Array("btle".utf8)
        let t = aesCMAC(key: salt, message: w.reversed())
        func block(_ counter: UInt8) -> [UInt8] {
            // Counter || keyID || N1 || N2 || A1 || A2 || Length (256 = 0x0100), MSO first.
            let m: [UInt8] = [counter] + keyID + n1.reversed() + n2.reversed() + a1.reversed() + a2.reversed() + [0x01, 0x00]
            return Array(aesCMAC(key: t, message: m).reversed())
        }
        return (block(0), block(1))
    }

    /// f6(W, N1, N2, R, IOcap, A1, A2) = AES-CMAC_W(N1 || N2 || R || IOcap || A1 || A2)
    /// (Vol 3 Part H 2.2.8): SC DHKey check values. IOcap LSO first is
    /// [IO Capability, OOB data flag, AuthReq] (the spec's AuthReq || OOB || IO, MSO first).
    public static func f6(w: [UInt8], n1: [UInt8], n2: [UInt8], r: [UInt8], ioCap: [UInt8],
                          a1: [UInt8], a2: [UInt8]) -> [UInt8] {
        cmacLE(key: w, message: a2 + a1 + ioCap + r + n2 + n1)
    }

    /// g2(U, V, X, Y) = AES-CMAC_X(U || V || Y) mod 2^32 (Vol 3 Part H 2.2.9); the numeric
    /// comparison value shown to the user is this modulo 10^6.
    public static func g2(u: [UInt8], v: [UInt8], x: [UInt8], y: [UInt8]) -> UInt32 {
        let mac = aesCMAC(key: x.reversed(), message: Array(u.reversed()) + v.reversed() + y.reversed())
        return mac[12...].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// h6(W, keyID) = AES-CMAC_W(keyID) (Vol 3 Part H 2.2.10). keyID: 4 octets LSO first
    /// (the spec's "lebr" = 0x6C656272 is [0x72, 0x62, 0x65, 0x6C]).
    public static func h6(w: [UInt8], keyID: [UInt8]) -> [UInt8] {
        cmacLE(key: w, message: keyID)
    }

    /// h7(SALT, W) = AES-CMAC_SALT(W) (Vol 3 Part H 2.2.11). SALT and W LSO first.
    public static func h7(salt: [UInt8], w: [UInt8]) -> [UInt8] {
        cmacLE(key: salt, message: w)
    }

    /// BR/EDR link key from an LE Secure Connections LTK (Vol 3 Part H 2.4.2.4): ILK = h7(SALT "tmp1", LTK)
    /// when both sides set CT2, else h6(LTK, "tmp1"); link key = h6(ILK, "lebr"). LSO first. A helper
    /// only: the pairing itself never agrees on LinkKey (LE-only stack).
    public static func linkKey(fromLTK ltk: [UInt8], ct2: Bool) -> [UInt8] {
        let tmp1 = Array("tmp1".utf8.reversed()), lebr = Array("lebr".utf8.reversed())
        let ilk = ct2 ? h7(salt: tmp1 + [UInt8](repeating: 0, count: 12), w: ltk) : h6(w: ltk, keyID: tmp1)
        return h6(w: ilk, keyID: lebr)
    }

    /// Data signing (Vol 3 Part H 2.4.5, used by ATT Signed Write Command, Vol 3 Part F 3.4.5.4):
    /// the 12-octet Authentication Signature = SignCounter (4 octets LSO first) || MAC, where MAC is
    /// the 64 most significant bits of AES-CMAC_CSRK(m || SignCounter). `message` (m: the ATT PDU
    /// before the signature) and `csrk` are LSO first, like everything SMP and ATT carry.
    public static func signature(csrk: [UInt8], message: [UInt8], signCounter: UInt32) -> [UInt8] {
        let counter = (0..<4).map { UInt8(truncatingIfNeeded: signCounter >> (8 * UInt32($0))) }
        let mac = cmacLE(key: csrk, message: message + counter)
        return counter + mac[8..<16]
    }

    /// A1/A2 of f5 and f6: the address type octet (0 public, 1 random) as most significant
    /// octet above the 48-bit address, LSO first: address LSO first, then the type.
    public static func addressOctets(_ a: DeviceAddress) -> [UInt8] {
        a.address.littleEndian + [a.type.isRandom ? 1 : 0]
    }

    // MARK: Helpers

    /// AES-CMAC on LSO-first key and message, LSO-first result.
    static func cmacLE(key: [UInt8], message: [UInt8]) -> [UInt8] {
        Array(aesCMAC(key: key.reversed(), message: message.reversed()).reversed())
    }

    static func xor(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] { zip(a, b).map { $0 ^ $1 } }

    /// AES-128-ECB of one block, MSO first (the byte order AES itself uses).
    static func aes128<K: Sequence, B: Sequence>(key: K, block: B) -> [UInt8] where K.Element == UInt8, B.Element == UInt8 {
        AES128.encrypt(key: Array(key), block: Array(block))
    }

    /// Masks a key to `size` octets (Vol 3 Part H 2.3.4): the most significant 16 - size octets
    /// become zero. LSO first, so those are the last ones.
    public static func mask(_ key: [UInt8], toSize size: Int) -> [UInt8] {
        key.enumerated().map { $0.offset < size ? $0.element : 0 }
    }
}

extension AddressType {
    /// Random (or random identity) vs public: what SMP's address type bits carry.
    var isRandom: Bool { self == .random || self == .randomIdentity }
}
