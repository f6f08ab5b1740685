import Testing
import HCI
@testable import SMP

/// The PDUs among outputs.
func sentBytes(_ outputs: [SMPOutput]) -> [[UInt8]] {
    outputs.compactMap { if case .send(let b) = $0 { b } else { nil } }
}

/// Byte-exact replays: our engine against a scripted peer whose PDUs and expected answers come
/// from the specification's sample data.
@Suite struct SMPReplayTests {
    // Vol 3 Part H 2.2.3 c1 example: preq/pres, iat = 1 (random), rat = 0 (public), r, result.
    static let preq = le("07071000000101")
    static let pres = le("05000800000302")
    static let r = le("5783D521 56AD6F0E 6388274E C6702EE0")
    static let c1 = le("1e1e3fef 878988ea d2a74dc5 bef13b86")

    /// Legacy Just Works, our responder answering the spec's c1 example exchange byte for byte.
    /// Both random values are the example's r, so both confirm values are the example's c1 result.
    @Test func legacyResponderReplaysC1Example() throws {
        var config = SMPConfiguration()
        config.ioCapability = .noInputNoOutput
        config.bonding = false
        config.secureConnections = false
        config.maximumKeySize = 8
        config.minimumKeySize = 7
        let ediv: [UInt8] = [0x34, 0x12], rand: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8]
        let pairing = SMPPairing(role: .responder, configuration: config, local: peripheralAddress, peer: centralAddress,
                                 random: { n in n == 16 ? Self.r : n == 2 ? ediv : rand })
        // The example's Pairing Response: NoInputNoOutput, AuthReq 0, key size 8, keys 0x00 / 0x05.
        #expect(pairing.receive(Self.preq) == [.send(Self.pres)])
        #expect(pairing.receive(SMPPDU.pairingConfirm(confirmValue: Self.c1).bytes)
                == [.send(SMPPDU.pairingConfirm(confirmValue: Self.c1).bytes)])
        #expect(pairing.receive(SMPPDU.pairingRandom(randomValue: Self.r).bytes)
                == [.send(SMPPDU.pairingRandom(randomValue: Self.r).bytes)])
        // STK = s1(TK = 0, Srand, Mrand) = e(0, Srand[0..<8] || Mrand[0..<8]) (Vol 3 Part H 2.2.4),
        // masked to the 8 agreed octets (2.3.4).
        let stk = SMPCrypto.mask(SMPCrypto.e(key: [UInt8](repeating: 0, count: 16), plaintext: Array(Self.r[0..<8] + Self.r[0..<8])), toSize: 8)
        #expect(pairing.longTermKeyRequested(ediv: 0, rand: [UInt8](repeating: 0, count: 8)) == stk)
        #expect(pairing.longTermKeyRequested(ediv: 1, rand: [UInt8](repeating: 0, count: 8)) == nil)
        let out = pairing.encryptionChanged(enabled: true, status: 0)
        // Responder keys 0x05: Encryption Information + Central Identification, then Signing Information.
        let ltk = SMPCrypto.mask(Self.r, toSize: 8)
        #expect(sentBytes(out) == [
            [0x06] + ltk,
            [0x07, 0x34, 0x12, 1, 2, 3, 4, 5, 6, 7, 8],
            [0x0A] + Self.r,
        ])
        guard case .completed(let result)? = out.last else { Issue.record("no result: \(out)"); return }
        #expect(result.method == .justWorks && !result.secureConnections && !result.authenticated)
        #expect(!result.bonding)   // AuthReq 0 on both sides: No Bonding
        #expect(result.keySize == 8)
        #expect(result.local == SMPKeys(ltk: ltk, ediv: 0x1234, rand: rand, csrk: Self.r))
        #expect(result.peer == SMPKeys())
    }

    /// Legacy Just Works, our initiator: the Mconfirm it sends and the STK it encrypts with follow
    /// from c1/s1 (checked against the spec above) with its own Pairing Request.
    @Test func legacyInitiatorReplay() throws {
        var config = SMPConfiguration()
        config.secureConnections = false
        config.distributeSigningKey = false
        let mrand = Self.r
        let pairing = SMPPairing(role: .initiator, configuration: config, local: centralAddress, peer: peripheralAddress,
                                 random: { n in n == 16 ? mrand : [UInt8](repeating: 0, count: n) })
        let start = pairing.start()
        // NoInputNoOutput, no OOB, AuthReq Bonding (0x01), 16 octets, initiator keys EncKey, responder keys all three.
        let request: [UInt8] = [0x01, 0x03, 0x00, 0x01, 0x10, 0x01, 0x07]
        #expect(start == [.send(request)])
        let response: [UInt8] = [0x02, 0x03, 0x00, 0x01, 0x10, 0x00, 0x01]
        let mconfirm = SMPCrypto.c1(k: [UInt8](repeating: 0, count: 16), r: mrand, preq: request, pres: response,
                                    iat: 1, ia: centralAddress.address, rat: 0, ra: peripheralAddress.address)
        #expect(pairing.receive(response) == [.send(SMPPDU.pairingConfirm(confirmValue: mconfirm).bytes)])
        let srand = le("00112233 44556677 8899aabb ccddeeff")
        let sconfirm = SMPCrypto.c1(k: [UInt8](repeating: 0, count: 16), r: srand, preq: request, pres: response,
                                    iat: 1, ia: centralAddress.address, rat: 0, ra: peripheralAddress.address)
        #expect(pairing.receive(SMPPDU.pairingConfirm(confirmValue: sconfirm).bytes) == [.send(SMPPDU.pairingRandom(randomValue: mrand).bytes)])
        let stk = SMPCrypto.s1(k: [UInt8](repeating: 0, count: 16), r1: srand, r2: mrand)
        #expect(pairing.receive(SMPPDU.pairingRandom(randomValue: srand).bytes)
                == [.startEncryption(ltk: stk, ediv: 0, rand: [UInt8](repeating: 0, count: 8))])
        #expect(pairing.encryptionChanged(enabled: true, status: 0) == [])
        let peerLTK = le("0f0e0d0c 0b0a0908 07060504 03020100")
        #expect(pairing.receive([0x06] + peerLTK) == [])
        let out = pairing.receive([0x07, 0xCD, 0xAB, 8, 7, 6, 5, 4, 3, 2, 1])
        guard case .completed(let result)? = out.last, out.count == 1 else { Issue.record("\(out)"); return }
        #expect(result.bonding && result.keySize == 16)
        #expect(result.peer == SMPKeys(ltk: peerLTK, ediv: 0xABCD, rand: [8, 7, 6, 5, 4, 3, 2, 1]))
        #expect(result.local == SMPKeys())   // response asked for no initiator keys
    }

    // Appendix D: the addresses of D.3/D.4 (A1 = 0x00561237 37bfce, A2 = 0x00a71370 2dcfc1: public).
    static let addressA = DeviceAddress(BDAddress(be("561237 37bfce")), type: .public)
    static let addressB = DeviceAddress(BDAddress(be("a71370 2dcfc1")), type: .public)
    typealias T = SMPCryptoTests

    /// SC Just Works, our initiator with data set 1's key pair A (the debug key pair) and the sample's
    /// Na, against a scripted responder with key pair B and the sample's Nb: the DHKey, the MacKey and
    /// the LTK are then Appendix D's (D.3), so the key our engine encrypts with is the spec's LTK.
    @Test func secureConnectionsInitiatorReplaysAppendixD() throws {
        var config = SMPConfiguration()
        config.bonding = false
        let a = try #require(SMPKeyPair(privateKey: T.privateA))
        let pairing = SMPPairing(role: .initiator, configuration: config, local: Self.addressA, peer: Self.addressB,
                                 random: { _ in T.n1 }, keyPair: a)
        let request: [UInt8] = [0x01, 0x03, 0x00, 0x28, 0x10, 0x05, 0x00]   // SC + CT2, no bonding; EncKey + SignKey offered
        #expect(pairing.start() == [.send(request)])
        let response: [UInt8] = [0x02, 0x03, 0x00, 0x08, 0x10, 0x00, 0x00]
        // Our public key is data set 1's A, as the spec prints it.
        #expect(pairing.receive(response) == [.send([0x0C] + T.publicAX + T.publicAY)])
        #expect(pairing.receive([0x0C] + T.publicBX + T.publicBY) == [])
        let cb = SMPCrypto.f4(u: T.publicBX, v: T.publicAX, x: T.n2, z: 0)
        #expect(pairing.receive([0x03] + cb) == [.send([0x04] + T.n1)])
        // Ea = f6(MacKey, Na, Nb, 0, IOcapA, A, B) with D.3's MacKey.
        let ioCapA: [UInt8] = [0x03, 0x00, 0x28], ioCapB: [UInt8] = [0x03, 0x00, 0x08]
        let zero = [UInt8](repeating: 0, count: 16)
        let ea = SMPCrypto.f6(w: T.macKey, n1: T.n1, n2: T.n2, r: zero, ioCap: ioCapA, a1: T.a1, a2: T.a2)
        #expect(pairing.receive([0x04] + T.n2) == [.send([0x0D] + ea)])
        let eb = SMPCrypto.f6(w: T.macKey, n1: T.n2, n2: T.n1, r: zero, ioCap: ioCapB, a1: T.a2, a2: T.a1)
        #expect(pairing.receive([0x0D] + eb) == [.startEncryption(ltk: T.ltk, ediv: 0, rand: [UInt8](repeating: 0, count: 8))])
        let out = pairing.encryptionChanged(enabled: true, status: 0)
        guard case .completed(let result)? = out.last, out.count == 1 else { Issue.record("\(out)"); return }
        #expect(result.secureConnections && result.method == .justWorks && !result.authenticated)
        #expect(result.peer.ltk == T.ltk && result.local.ltk == T.ltk)
        // Our side used the debug key pair: never to be stored (Vol 3 Part H 2.3.5.6.1).
        #expect(result.debugKey)
        #expect(SMPBond(result: result, role: .initiator, peerAddress: Self.addressB) == nil)
    }

    /// The same exchange with our engine as responder (key pair B, Nb) and the scripted initiator
    /// using the debug key pair, which therefore has to be allowed.
    @Test func secureConnectionsResponderReplaysAppendixD() throws {
        var config = SMPConfiguration()
        config.allowDebugKeys = true
        let b = try #require(SMPKeyPair(privateKey: T.privateB))
        let pairing = SMPPairing(role: .responder, configuration: config, local: Self.addressB, peer: Self.addressA,
                                 random: { _ in T.n2 }, keyPair: b)
        let request: [UInt8] = [0x01, 0x03, 0x00, 0x08, 0x10, 0x00, 0x00]
        // NoInputNoOutput, SC + CT2 + Bonding, 16, no keys (none asked for).
        let response: [UInt8] = [0x02, 0x03, 0x00, 0x29, 0x10, 0x00, 0x00]
        #expect(pairing.receive(request) == [.send(response)])
        let cb = SMPCrypto.f4(u: T.publicBX, v: T.publicAX, x: T.n2, z: 0)
        #expect(pairing.receive([0x0C] + T.publicAX + T.publicAY) == [.send([0x0C] + T.publicBX + T.publicBY), .send([0x03] + cb)])
        #expect(pairing.receive([0x04] + T.n1) == [.send([0x04] + T.n2)])
        let ioCapA: [UInt8] = [0x03, 0x00, 0x08], ioCapB: [UInt8] = [0x03, 0x00, 0x29]
        let zero = [UInt8](repeating: 0, count: 16)
        let ea = SMPCrypto.f6(w: T.macKey, n1: T.n1, n2: T.n2, r: zero, ioCap: ioCapA, a1: T.a1, a2: T.a2)
        let eb = SMPCrypto.f6(w: T.macKey, n1: T.n2, n2: T.n1, r: zero, ioCap: ioCapB, a1: T.a2, a2: T.a1)
        #expect(pairing.receive([0x0D] + ea) == [.send([0x0D] + eb)])
        #expect(pairing.longTermKeyRequested(ediv: 0, rand: [UInt8](repeating: 0, count: 8)) == T.ltk)
        let out = pairing.encryptionChanged(enabled: true, status: 0)
        guard case .completed(let result)? = out.last, out.count == 1 else { Issue.record("\(out)"); return }
        #expect(result.debugKey && !result.bonding)
    }

    @Test func debugKeyRefusedByDefault() throws {
        let b = try #require(SMPKeyPair(privateKey: T.privateB))
        let pairing = SMPPairing(role: .responder, configuration: SMPConfiguration(), local: Self.addressB, peer: Self.addressA, keyPair: b)
        _ = pairing.receive([0x01, 0x03, 0x00, 0x09, 0x10, 0x00, 0x00])
        let out = pairing.receive([0x0C] + T.publicAX + T.publicAY)
        #expect(out == [.send([0x05, 0x03]), .failed(.authenticationRequirements, remote: false)])
        #expect(pairing.isFinished)
    }
}
