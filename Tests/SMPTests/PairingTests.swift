import Testing
import HCI
@testable import SMP

/// One ours-vs-ours pairing setup and what the spec says it must give.
struct PairingScenario: CustomTestStringConvertible, Sendable {
    var name: String
    var initiator: SMPConfiguration
    var responder: SMPConfiguration
    /// Expected method (Vol 3 Part H 2.3.5.1, Tables 2.6–2.8).
    var method: SMPMethod
    var secureConnections: Bool
    var testDescription: String { name }

    static func config(_ io: SMPIOCapability, sc: Bool, mitm: Bool, bonding: Bool,
                       identity: UInt8? = nil, oob: SMPOOBData? = nil) -> SMPConfiguration {
        var c = SMPConfiguration()
        c.ioCapability = io
        c.secureConnections = sc
        c.mitm = mitm
        c.bonding = bonding
        c.oob = oob
        if let identity {
            c.localIdentity = SMPIdentity(irk: [UInt8](repeating: identity, count: 16),
                                          address: DeviceAddress(BDAddress([0xC0, 0, 0, 0, 0, identity]), type: .random))
        }
        return c
    }

    static let all: [PairingScenario] = {
        var list: [PairingScenario] = []
        for bonding in [true, false] {
            let b = bonding ? "bonding" : "no bonding"
            for sc in [false, true] {
                let kind = sc ? "SC" : "legacy"
                list.append(PairingScenario(
                    name: "\(kind) Just Works, \(b)",
                    initiator: config(.noInputNoOutput, sc: sc, mitm: false, bonding: bonding, identity: 1),
                    responder: config(.noInputNoOutput, sc: sc, mitm: false, bonding: bonding, identity: 2),
                    method: .justWorks, secureConnections: sc))
                // Responder KeyboardOnly, initiator DisplayOnly: the initiator displays, the responder types.
                list.append(PairingScenario(
                    name: "\(kind) Passkey, initiator displays, \(b)",
                    initiator: config(.displayOnly, sc: sc, mitm: true, bonding: bonding, identity: 1),
                    responder: config(.keyboardOnly, sc: sc, mitm: true, bonding: bonding),
                    method: .passkeyEntry, secureConnections: sc))
                // Responder DisplayOnly, initiator KeyboardDisplay: the responder displays, the initiator types.
                list.append(PairingScenario(
                    name: "\(kind) Passkey, responder displays, \(b)",
                    initiator: config(.keyboardDisplay, sc: sc, mitm: true, bonding: bonding),
                    responder: config(.displayOnly, sc: sc, mitm: false, bonding: bonding, identity: 2),
                    method: .passkeyEntry, secureConnections: sc))
                list.append(PairingScenario(
                    name: "\(kind) Passkey, both type, \(b)",
                    initiator: config(.keyboardOnly, sc: sc, mitm: true, bonding: bonding),
                    responder: config(.keyboardOnly, sc: sc, mitm: true, bonding: bonding),
                    method: .passkeyEntry, secureConnections: sc))
            }
            // KeyboardDisplay both: legacy passkey (initiator displays), SC numeric comparison.
            list.append(PairingScenario(
                name: "legacy KeyboardDisplay both → Passkey, \(b)",
                initiator: config(.keyboardDisplay, sc: false, mitm: true, bonding: bonding),
                responder: config(.keyboardDisplay, sc: false, mitm: true, bonding: bonding),
                method: .passkeyEntry, secureConnections: false))
            list.append(PairingScenario(
                name: "SC Numeric Comparison, \(b)",
                initiator: config(.displayYesNo, sc: true, mitm: true, bonding: bonding, identity: 1),
                responder: config(.keyboardDisplay, sc: true, mitm: true, bonding: bonding, identity: 2),
                method: .numericComparison, secureConnections: true))
            // Legacy OOB: both sides have the same TK.
            let tk = SMPOOBData(legacyTK: Array(1...16))
            list.append(PairingScenario(
                name: "legacy OOB, \(b)",
                initiator: config(.noInputNoOutput, sc: false, mitm: true, bonding: bonding, oob: tk),
                responder: config(.noInputNoOutput, sc: false, mitm: true, bonding: bonding, oob: tk),
                method: .oob, secureConnections: false))
        }
        return list
    }()
}

@Suite struct SMPPairingTests {
    @Test(arguments: PairingScenario.all)
    func oursVersusOurs(_ s: PairingScenario) throws {
        let link = PairingLink(initiator: s.initiator, responder: s.responder)
        link.run()
        let i = try #require(link.initiatorResult, "initiator: \(link.initiator.failure ?? "no result")")
        let r = try #require(link.responderResult, "responder: \(link.responder.failure ?? "no result")")
        #expect(i.method == s.method && r.method == s.method)
        #expect(i.secureConnections == s.secureConnections && r.secureConnections == s.secureConnections)
        #expect(i.authenticated == (s.method != .justWorks) && r.authenticated == i.authenticated)
        #expect(i.bonding == (s.initiator.bonding && s.responder.bonding) && r.bonding == i.bonding)
        #expect(i.keySize == 16 && r.keySize == 16)
        #expect(!i.debugKey && !r.debugKey)
        // What one side distributed is what the other received.
        #expect(i.local == r.peer)
        #expect(i.peer == r.local)
        #expect(link.responderLTKReply == link.encryptionKey)
        if s.secureConnections {
            // SC: the LTK is derived on both sides and never sent (Vol 3 Part H 2.3.5.6.5).
            #expect(i.local.ltk == link.encryptionKey && i.peer.ltk == link.encryptionKey)
            #expect(!link.transcript.contains { $0.1.first == SMPPDU.Code.encryptionInformation })
        } else if s.responder.bonding && s.initiator.bonding {
            // Legacy bonding: each side distributed its own LTK + EDIV/Rand, different from the STK.
            #expect(i.peer.ltk != nil && i.local.ltk != nil && i.peer.ltk != link.encryptionKey)
        }
        if s.initiator.bonding {
            // The initiator asked for the responder's keys; identity and signing keys as configured.
            #expect((i.peer.irk != nil) == (s.responder.localIdentity != nil))
            #expect(i.peer.identityAddress == s.responder.localIdentity?.address)
            #expect(i.peer.csrk != nil)
        } else {
            #expect(i.peer == SMPKeys(ltk: s.secureConnections ? link.encryptionKey : nil))
        }
        if s.method == .numericComparison {
            #expect(link.numbers[.initiator] != nil && link.numbers[.initiator] == link.numbers[.responder])
        }
        #expect(link.initiator.isFinished && link.responder.isFinished)
        #expect(link.initiator.deadline == nil && link.responder.deadline == nil)
    }

    /// Vol 3 Part H 3.3: a packet received with a reserved Code shall be ignored; Table 3.1
    /// defines 0x01–0x0E, so 0x00 and 0x0F–0xFF are reserved. Slipped in ahead of
    /// every PDU of a pairing, they get no answer, change no state, and the pairing completes.
    @Test(arguments: PairingScenario.all)
    func reservedCodesAreIgnoredMidPairing(_ s: PairingScenario) throws {
        let link = PairingLink(initiator: s.initiator, responder: s.responder)
        link.strays = [[0x00], [0x0F] + [UInt8](repeating: 0, count: 16), [0xFF, 0x01, 0x02]]
        link.run()
        // They arrived mid-pairing: every method exchanges Pairing Random (2.3.5.5, 2.3.5.6).
        #expect(link.strayArrivals.contains(.awaitingRandom))
        #expect(link.strayOutputs.isEmpty)
        #expect(link.strayStateChanges.isEmpty)
        #expect(!link.transcript.contains { $0.1.first == SMPPDU.Code.pairingFailed })
        let i = try #require(link.initiatorResult, "initiator: \(link.initiator.failure ?? "no result")")
        let r = try #require(link.responderResult, "responder: \(link.responder.failure ?? "no result")")
        #expect(i.method == s.method && r.method == s.method)
        #expect(link.responderLTKReply == link.encryptionKey)
    }

    @Test func bondFromResultFollowsRoles() throws {
        let s = PairingScenario.all.first { $0.name == "legacy Just Works, bonding" }!
        let link = PairingLink(initiator: s.initiator, responder: s.responder)
        link.run()
        let i = try #require(link.initiatorResult), r = try #require(link.responderResult)
        let central = try #require(SMPBond(result: i, role: .initiator, peerAddress: peripheralAddress))
        let peripheral = try #require(SMPBond(result: r, role: .responder, peerAddress: centralAddress))
        // Legacy: both encrypt later with the peripheral's distributed LTK + EDIV/Rand (Vol 3 Part H 2.4.4.1).
        #expect(central.ltk == peripheral.ltk && central.ediv == peripheral.ediv && central.rand == peripheral.rand)
        #expect(central.ltk == r.local.ltk)
        // The peripheral paired from a public address other than the identity it distributed
        // (Identity Address Information, Vol 3 Part H 3.6.5): filed under that address, the
        // identity beside it (issue 29); the central's bond is under its identity.
        #expect(central.peer == peripheralAddress && central.distributedIdentity == s.responder.localIdentity?.address)
        #expect(peripheral.peer == s.initiator.localIdentity?.address)
    }
}

/// SC OOB (Vol 3 Part H 2.3.5.6.4): the OOB data each side hands the other is r and C = f4(PKx, PKx, r, 0).
@Suite struct SMPOOBPairingTests {
    static func configs(initiatorHasPeerData: Bool, responderHasPeerData: Bool, a: SMPKeyPair, b: SMPKeyPair,
                        corruptResponderConfirm: Bool = false) -> (SMPConfiguration, SMPConfiguration) {
        let (ca, ra) = SMPOOBData.local(keyPair: a)
        var (cb, rb) = SMPOOBData.local(keyPair: b)
        if corruptResponderConfirm { cb[0] ^= 1 }
        var i = SMPConfiguration(), r = SMPConfiguration()
        i.oob = SMPOOBData(peerConfirm: initiatorHasPeerData ? cb : nil, peerRandom: initiatorHasPeerData ? rb : nil, localRandom: ra)
        r.oob = SMPOOBData(peerConfirm: responderHasPeerData ? ca : nil, peerRandom: responderHasPeerData ? ra : nil, localRandom: rb)
        i.mitm = true
        r.mitm = true
        return (i, r)
    }

    @Test(arguments: [(true, true), (true, false), (false, true)])
    func secureConnectionsOOB(_ flags: (Bool, Bool)) throws {
        let a = SMPKeyPair.generate(), b = SMPKeyPair.generate()
        let (i, r) = Self.configs(initiatorHasPeerData: flags.0, responderHasPeerData: flags.1, a: a, b: b)
        let link = PairingLink(initiator: i, responder: r, initiatorKeyPair: a, responderKeyPair: b)
        link.run()
        let ri = try #require(link.initiatorResult, "\(link.initiator.failure ?? "")")
        let rr = try #require(link.responderResult, "\(link.responder.failure ?? "")")
        #expect(ri.method == .oob && rr.method == .oob && ri.secureConnections && ri.authenticated)
        #expect(ri.peer.ltk == rr.local.ltk && ri.peer.ltk == link.encryptionKey)
        // SC OOB sends no Pairing Confirm at all (Vol 3 Part H 2.3.5.6.4, Figure 2.7).
        #expect(!link.transcript.contains { $0.1.first == SMPPDU.Code.pairingConfirm })
    }

    @Test func oobConfirmForAnotherKeyFails() throws {
        let a = SMPKeyPair.generate(), b = SMPKeyPair.generate()
        let (i, r) = Self.configs(initiatorHasPeerData: true, responderHasPeerData: false, a: a, b: b, corruptResponderConfirm: true)
        let link = PairingLink(initiator: i, responder: r, initiatorKeyPair: a, responderKeyPair: b)
        link.run()
        #expect(link.initiatorFailure?.0 == .confirmValueFailed && link.initiatorFailure?.1 == false)
        #expect(link.responderFailure?.0 == .confirmValueFailed && link.responderFailure?.1 == true)
        #expect(link.initiatorResult == nil && link.responderResult == nil)
    }
}

extension SMPOOBPairingTests {
    @Test func responderRefusesKeyNotMatchingOOBData() throws {
        // The responder holds the initiator's OOB data; a public key other than the committed one fails
        // with Confirm Value Failed before our public key goes out (Vol 3 Part H 2.3.5.6.4).
        let a = SMPKeyPair.generate(), b = SMPKeyPair.generate()
        let (_, r) = Self.configs(initiatorHasPeerData: false, responderHasPeerData: true, a: a, b: b)
        let p = SMPPairing(role: .responder, configuration: r, local: peripheralAddress, peer: centralAddress, keyPair: b)
        #expect(sentBytes(p.receive([0x01, 0x03, 0x00, 0x0D, 0x10, 0x00, 0x00])).first?[2] == 0x01)   // our OOB flag
        #expect(p.receive([0x0C] + SMPKeyPair.generate().publicKey) == [.send([0x05, 0x04]), .failed(.confirmValueFailed, remote: false)])
    }
}
