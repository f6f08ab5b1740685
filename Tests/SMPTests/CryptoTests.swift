import Testing
import HCI
@testable import SMP

/// Octets of a hex string in the order written (spaces ignored).
func be(_ hex: String) -> [UInt8] {
    let digits = Array(hex.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

/// A value the spec prints most significant octet first, as SMP carries it (LSO first).
func le(_ hex: String) -> [UInt8] { be(hex).reversed() }

/// Core v5.4 Vol 3 Part H Appendix D sample data (printed MSO first; `le` turns it into PDU order),
/// Vol 3 Part H 2.2.2–2.2.4 examples, Vol 2 Part G 7.1.2 P-256 data set 1, RFC 4493 section 4.
@Suite struct SMPCryptoTests {
    // P-256 data set 1 (Vol 2 Part G 7.1.2.1); private key A is the debug private key (Vol 3 Part H 2.3.5.6.1).
    static let privateA = le("3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd")
    static let publicAX = le("20b003d2 f297be2c 5e2c83a7 e9f9a5b9 eff49111 acf4fddb cc030148 0e359de6")
    static let publicAY = le("dc809c49 652aeb6d 63329abf 5a52155c 766345c2 8fed3024 741c8ed0 1589d28b")
    static let privateB = le("55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd")
    static let publicBX = le("1ea1f0f0 1faf1d96 09592284 f19e4c00 47b58afd 8615a69f 559077b2 2faaa190")
    static let publicBY = le("4c55f33e 429dad37 7356703a 9ab85160 472d1130 e28e3676 5f89aff9 15b1214a")
    static let dhKey = le("ec0234a3 57c8ad05 341010a6 0a397d9b 99796b13 b4f866f1 868d34f3 73bfa698")

    // Appendix D nonces and addresses (D.2–D.5).
    static let n1 = le("d5cb8454 d177733e ffffb2ec 712baeab")
    static let n2 = le("a6e8e7cc 25a75f6e 216583f7 ff3dc4cf")
    static let a1 = le("00561237 37bfce")
    static let a2 = le("00a71370 2dcfc1")
    static let macKey = le("2965f176 a1084a02 fd3f6a20 ce636e20")
    static let ltk = le("69867911 69d7cd23 980522b5 94750a38")

    @Test func aesCMACRFC4493() {
        // RFC 4493 section 4, examples 1–4 (byte strings, no reversal).
        let key = be("2b7e1516 28aed2a6 abf71588 09cf4f3c")
        let m = be("6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51 30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710")
        #expect(SMPCrypto.aesCMAC(key: key, message: []) == be("bb1d6929 e9593728 7fa37d12 9b756746"))
        #expect(SMPCrypto.aesCMAC(key: key, message: Array(m[0..<16])) == be("070a16b4 6b4d4144 f79bdd9d d04a287c"))
        #expect(SMPCrypto.aesCMAC(key: key, message: Array(m[0..<40])) == be("dfa66747 de9ae630 30ca3261 1497c827"))
        #expect(SMPCrypto.aesCMAC(key: key, message: m) == be("51f0bebf 7e3b9d92 fc497417 79363cfe"))
    }

    @Test func c1SpecExample() {
        // Vol 3 Part H 2.2.3: k = 0, r, preq/pres as the PDUs, iat = 1, rat = 0.
        let c = SMPCrypto.c1(k: [UInt8](repeating: 0, count: 16), r: le("5783D521 56AD6F0E 6388274E C6702EE0"),
                             preq: le("07071000000101"), pres: le("05000800000302"),
                             iat: 1, ia: BDAddress(be("A1A2A3A4A5A6")), rat: 0, ra: BDAddress(be("B1B2B3B4B5B6")))
        #expect(c == le("1e1e3fef 878988ea d2a74dc5 bef13b86"))
    }

    @Test func s1SpecExample() {
        // Vol 3 Part H 2.2.4.
        let stk = SMPCrypto.s1(k: [UInt8](repeating: 0, count: 16),
                               r1: le("000F0E0D 0C0B0A09 11223344 55667788"), r2: le("01020304 05060708 99AABBCC DDEEFF00"))
        #expect(stk == le("9a1fe1f0 e8b0f49b 5b4216ae 796da062"))
    }

    @Test func ahSampleD7() {
        #expect(SMPCrypto.ah(irk: le("ec0234a3 57c8ad05 341010a6 0a397d9b"), prand: le("708194")) == le("0dfbaa"))
    }

    @Test func f4SampleD2() {
        // U = PKax, V as printed in D.2, X = Na, Z = 0.
        let v = le("55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd")
        #expect(SMPCrypto.f4(u: Self.publicAX, v: v, x: Self.n1, z: 0) == le("f2c916f1 07a9bd1c f1eda1be a974872d"))
    }

    @Test func f5SampleD3() {
        let keys = SMPCrypto.f5(w: Self.dhKey, n1: Self.n1, n2: Self.n2, a1: Self.a1, a2: Self.a2)
        #expect(keys.macKey == Self.macKey)
        #expect(keys.ltk == Self.ltk)
    }

    @Test func f6SampleD4() {
        // IOcap 0x010102 (AuthReq 01, OOB 01, IO 02) is [02, 01, 01] LSO first.
        let e = SMPCrypto.f6(w: Self.macKey, n1: Self.n1, n2: Self.n2, r: le("12a3343b b453bb54 08da42d2 0c2d0fc8"),
                             ioCap: le("010102"), a1: Self.a1, a2: Self.a2)
        #expect(e == le("e3c47398 9cd0e8c5 d26c0b09 da958f61"))
    }

    @Test func g2SampleD5() {
        let v = le("55188b3d 32f6bb9a 900afcfb eed4e72a 59cb9ac2 f19d7cfb 6b4fdd49 f47fc5fd")
        let g = SMPCrypto.g2(u: Self.publicAX, v: v, x: Self.n1, y: Self.n2)
        #expect(g == 0x2f9ed5ba)
        #expect(g % 1_000_000 == 0x2f9ed5ba % 1_000_000)
    }

    @Test func h6SampleD6() {
        #expect(SMPCrypto.h6(w: le("ec0234a3 57c8ad05 341010a6 0a397d9b"), keyID: le("6c656272"))
                == le("2d9ae102 e76dc91c e8d3a9e2 80b16399"))
    }

    @Test func h7SampleD8() {
        #expect(SMPCrypto.h7(salt: le("00000000 00000000 00000000 746D7031"), w: le("ec0234a3 57c8ad05 341010a6 0a397d9b"))
                == le("fb173597 c6a3c0ec d2998c2a 75a57011"))
    }

    @Test func linkKeyFromLTKSamplesD9D10() {
        let ltk = le("368df9bc e3264b58 bd066c33 334fbf64")
        #expect(SMPCrypto.linkKey(fromLTK: ltk, ct2: true) == le("287ad379 dca40253 0a39f1f4 3047b835"))
        #expect(SMPCrypto.linkKey(fromLTK: ltk, ct2: false) == le("bc1ca4ef 633fc1bd 0d8230af ee388fb0"))
    }

    @Test func signatureMatchesBlueZ() {
        // BlueZ unit/test-crypto.c (bt_crypto_sign_att, independent peer): the RFC 4493 key and
        // messages taken as LSO-first octets, SignCounter 0; expected signatures as BlueZ lists them.
        let csrk = le("2b7e1516 28aed2a6 abf71588 09cf4f3c")
        let m = be("6bc1bee2 2e409f96 e93d7e11 7393172a ae2d8a57 1e03ac9c 9eb76fac 45af8e51 30c81c46 a35ce411 e5fbc119 1a0a52ef f69f2445 df4f9b17 ad2b417b e66c3710")
        #expect(SMPCrypto.signature(csrk: csrk, message: [], signCounter: 0) == be("00000000 b3a85941 27ebc2c0"))
        #expect(SMPCrypto.signature(csrk: csrk, message: Array(m[0..<16]), signCounter: 0) == be("00000000 273974f4 392a232a"))
        #expect(SMPCrypto.signature(csrk: csrk, message: Array(m[0..<40]), signCounter: 0) == be("00000000 b7ca94ab 87c78218"))
        #expect(SMPCrypto.signature(csrk: csrk, message: m, signCounter: 0) == be("00000000 44e1e6ce 1df51368"))
        // The counter travels LSO first in front of the MAC.
        #expect(SMPCrypto.signature(csrk: csrk, message: [], signCounter: 0x01020304).prefix(4) == [4, 3, 2, 1])
    }

    @Test func p256DataSet1() throws {
        let a = try #require(SMPKeyPair(privateKey: Self.privateA))
        let b = try #require(SMPKeyPair(privateKey: Self.privateB))
        #expect(a.publicKey == Self.publicAX + Self.publicAY)
        #expect(b.publicKey == Self.publicBX + Self.publicBY)
        #expect(try SMPCrypto.dhKey(a, peerPublicKey: b.publicKey) == Self.dhKey)
        #expect(try SMPCrypto.dhKey(b, peerPublicKey: a.publicKey) == Self.dhKey)
        // The debug key pair is data set 1's A (Vol 3 Part H 2.3.5.6.1).
        #expect(SMPKeyPair.debug == a)
        #expect(SMPKeyPair.isDebugPublicKey(a.publicKey))
    }

    @Test func publicKeyValidation() throws {
        let b = try #require(SMPKeyPair(privateKey: Self.privateB))
        // Last bit of Y flipped: off the curve (the invalid key of CVE-2018-5383 tests).
        var offCurve = SMPKeyPair.debug.publicKey
        offCurve[32] ^= 0x01
        #expect(throws: SMPPublicKeyError.notOnCurve) { try SMPCrypto.dhKey(b, peerPublicKey: offCurve) }
        #expect(throws: SMPPublicKeyError.notOnCurve) { try SMPCrypto.dhKey(b, peerPublicKey: [UInt8](repeating: 0, count: 64)) }
        // A coordinate >= p is no field element.
        #expect(throws: SMPPublicKeyError.notOnCurve) { try SMPCrypto.dhKey(b, peerPublicKey: [UInt8](repeating: 0xFF, count: 64)) }
        #expect(throws: SMPPublicKeyError.reflected) { try SMPCrypto.dhKey(b, peerPublicKey: b.publicKey) }
        #expect(throws: SMPPublicKeyError.wrongLength(63)) { try SMPCrypto.dhKey(b, peerPublicKey: Array(b.publicKey.prefix(63))) }
    }

    @Test func generatedKeyPairsAgree() throws {
        let a = SMPKeyPair.generate(), b = SMPKeyPair.generate()
        #expect(a != b)
        #expect(try SMPCrypto.dhKey(a, peerPublicKey: b.publicKey) == SMPCrypto.dhKey(b, peerPublicKey: a.publicKey))
        // Scalar 0 and the group order n are no private keys.
        #expect(SMPKeyPair(privateKey: [UInt8](repeating: 0, count: 32)) == nil)
        #expect(SMPKeyPair(privateKey: le("ffffffff 00000000 ffffffff ffffffff bce6faad a7179e84 f3b9cac2 fc632551")) == nil)
    }

    @Test func keyMaskingKeepsLeastSignificantOctets() {
        // Vol 3 Part H 2.3.4: a 7-octet key keeps its 7 least significant octets.
        let key: [UInt8] = Array(1...16)
        #expect(SMPCrypto.mask(key, toSize: 7) == [1, 2, 3, 4, 5, 6, 7] + [UInt8](repeating: 0, count: 9))
        #expect(SMPCrypto.mask(key, toSize: 16) == key)
    }

    @Test func resolvablePrivateAddress() {
        let irk = le("ec0234a3 57c8ad05 341010a6 0a397d9b")
        // D.7: prand 0x708194 gives hash 0x0dfbaa, so 70:81:94:0D:FB:AA resolves with this IRK.
        #expect(SMPPrivacy.resolves(BDAddress(be("708194 0dfbaa")), irk: irk))
        #expect(!SMPPrivacy.resolves(BDAddress(be("708194 0dfbab")), irk: irk))
        #expect(!SMPPrivacy.resolves(BDAddress(be("708194 0dfbaa")), irk: le("ec0234a3 57c8ad05 341010a6 0a397d9a")))
        let rpa = SMPPrivacy.resolvablePrivateAddress(irk: irk)
        #expect(rpa.bytes[0] & 0xC0 == 0x40)   // Vol 6 Part B 1.3.2.2: two MSB 0b01
        #expect(SMPPrivacy.resolves(rpa, irk: irk))
        // Injected prand 0x708194 (LSO first 94 81 70): the D.7 address.
        #expect(SMPPrivacy.resolvablePrivateAddress(irk: irk, random: { _ in le("708194") }) == BDAddress(be("708194 0dfbaa")))
    }
}
