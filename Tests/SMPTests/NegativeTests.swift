import Testing
import HCI
@testable import SMP

/// Hostile or broken peers: every case fails pairing with the reason the spec names (Vol 3 Part H
/// 3.5.5, Table 3.7), sends Pairing Failed (except on timeout), and leaves nothing to store.
@Suite struct SMPNegativeTests {
    /// A Pairing Request with SC + Bonding, NoInputNoOutput, the given key size.
    static func request(keySize: UInt8 = 16, authReq: UInt8 = 0x09, io: UInt8 = 0x03) -> [UInt8] {
        [0x01, io, 0x00, authReq, keySize, 0x00, 0x00]
    }

    static func responder(_ configure: (inout SMPConfiguration) -> Void = { _ in },
                          now: @escaping () -> ContinuousClock.Instant = { .now },
                          attempts: SMPAttemptTracker? = nil) -> SMPPairing {
        var c = SMPConfiguration()
        configure(&c)
        return SMPPairing(role: .responder, configuration: c, local: peripheralAddress, peer: centralAddress,
                          attempts: attempts, now: now)
    }

    static func failure(_ reason: SMPPairingFailedReason) -> [SMPOutput] {
        [.send([0x05, reason.rawValue]), .failed(reason, remote: false)]
    }

    @Test func keySizeBelowMinimum() {
        // Key size 7 against the default minimum 16 (issue 12): Encryption Key Size (0x06).
        let p = Self.responder()
        #expect(p.receive(Self.request(keySize: 7)) == Self.failure(.encryptionKeySize))
        #expect(p.isFinished && p.failure?.contains("key size 7") == true)
        // Accepted with a minimum of 7, and the agreed size is 7.
        let q = Self.responder { $0.minimumKeySize = 7 }
        #expect(sentBytes(q.receive(Self.request(keySize: 7))).first?[4] == 7)
        // The initiator side: a response offering 7.
        let i = SMPPairing(role: .initiator, configuration: SMPConfiguration(), local: centralAddress, peer: peripheralAddress)
        _ = i.start()
        #expect(i.receive([0x02, 0x03, 0x00, 0x09, 0x07, 0x00, 0x00]) == Self.failure(.encryptionKeySize))
    }

    @Test func keySizeOutOfRangeIsInvalid() {
        // Maximum Encryption Key Size outside 7–16 (Vol 3 Part H 3.5.1).
        #expect(Self.responder().receive(Self.request(keySize: 6)) == Self.failure(.invalidParameters))
        #expect(Self.responder().receive(Self.request(keySize: 17)) == Self.failure(.invalidParameters))
        #expect(Self.responder().receive(Self.request(io: 0x05)) == Self.failure(.invalidParameters))
    }

    @Test(arguments: ["off curve", "zero", "reflected"])
    func badPublicKey(_ kind: String) throws {
        let ours = SMPKeyPair.generate()
        let p = SMPPairing(role: .responder, configuration: SMPConfiguration(), local: peripheralAddress, peer: centralAddress, keyPair: ours)
        _ = p.receive(Self.request())
        var key: [UInt8]
        switch kind {
        case "off curve":
            key = SMPKeyPair.generate().publicKey
            key[40] ^= 0x01   // a Y coordinate changed: not on P-256 (CVE-2018-5383)
        case "zero": key = [UInt8](repeating: 0, count: 64)
        default: key = ours.publicKey   // our own key sent back (CVE-2020-26558)
        }
        // Invalid peer public key: DHKey Check Failed, before our public key is sent.
        #expect(p.receive([0x0C] + key) == Self.failure(.dhKeyCheckFailed))
        #expect(p.isFinished)
        #expect(p.longTermKeyRequested(ediv: 0, rand: [UInt8](repeating: 0, count: 8)) == nil)
    }

    @Test func wrongLegacyConfirm() {
        let p = Self.responder { $0.secureConnections = false }
        _ = p.receive(Self.request(authReq: 0x01))
        _ = p.receive([0x03] + [UInt8](repeating: 0x42, count: 16))
        #expect(p.receive([0x04] + [UInt8](repeating: 0x17, count: 16)) == Self.failure(.confirmValueFailed))
        #expect(p.longTermKeyRequested(ediv: 0, rand: [UInt8](repeating: 0, count: 8)) == nil)
        #expect(p.encryptionChanged(enabled: true, status: 0) == [])
    }

    @Test func wrongSecureConnectionsConfirmAndCheck() throws {
        // Our initiator, Just Works: a Cb that does not commit to Nb → Confirm Value Failed.
        let peer = SMPKeyPair.generate()
        let i = SMPPairing(role: .initiator, configuration: SMPConfiguration(), local: centralAddress, peer: peripheralAddress)
        _ = i.start()
        _ = i.receive([0x02, 0x03, 0x00, 0x09, 0x10, 0x00, 0x00])
        _ = i.receive([0x0C] + peer.publicKey)
        _ = i.receive([0x03] + [UInt8](repeating: 1, count: 16))
        #expect(i.receive([0x04] + [UInt8](repeating: 2, count: 16)) == Self.failure(.confirmValueFailed))

        // Our responder, Just Works: a wrong Ea → DHKey Check Failed, no LTK for the controller.
        let r = Self.responder()
        _ = r.receive(Self.request())
        _ = r.receive([0x0C] + peer.publicKey)
        _ = r.receive([0x04] + [UInt8](repeating: 3, count: 16))
        #expect(r.receive([0x0D] + [UInt8](repeating: 4, count: 16)) == Self.failure(.dhKeyCheckFailed))
        #expect(r.longTermKeyRequested(ediv: 0, rand: [UInt8](repeating: 0, count: 8)) == nil)
    }

    @Test func pdusOutOfOrder() {
        // Pairing Random before anything: Unspecified Reason (0x08).
        #expect(Self.responder().receive([0x04] + [UInt8](repeating: 0, count: 16)) == Self.failure(.unspecifiedReason))
        // SC: Pairing Confirm where the public key is expected.
        let p = Self.responder()
        _ = p.receive(Self.request())
        #expect(p.receive([0x03] + [UInt8](repeating: 0, count: 16)) == Self.failure(.unspecifiedReason))
        // A second Pairing Request during pairing.
        let q = Self.responder()
        _ = q.receive(Self.request())
        #expect(q.receive(Self.request()) == Self.failure(.unspecifiedReason))
        // Key distribution PDU before encryption.
        let k = Self.responder { $0.secureConnections = false }
        _ = k.receive(Self.request(authReq: 0x01))
        #expect(k.receive([0x06] + [UInt8](repeating: 0, count: 16)) == Self.failure(.unspecifiedReason))
        // A Pairing Request sent to the central, a Security Request sent to the peripheral: Command Not Supported.
        let i = SMPPairing(role: .initiator, configuration: SMPConfiguration(), local: centralAddress, peer: peripheralAddress)
        #expect(i.receive(Self.request()) == Self.failure(.commandNotSupported))
        #expect(Self.responder().receive([0x0B, 0x09]) == Self.failure(.commandNotSupported))
    }

    @Test func badLengthsAndUnknownCodes() {
        #expect(Self.responder().receive(Array(Self.request().dropLast())) == Self.failure(.invalidParameters))
        #expect(Self.responder().receive(Self.request() + [0]) == Self.failure(.invalidParameters))
        #expect(Self.responder().receive([]) == Self.failure(.invalidParameters))
        let p = Self.responder()
        _ = p.receive(Self.request())
        #expect(p.receive([0x0C] + [UInt8](repeating: 0, count: 63)) == Self.failure(.invalidParameters))
        // A reserved code is ignored, not answered (Vol 3 Part H 3.3; Table 3.1 ends at 0x0E).
        let q = Self.responder()
        #expect(q.receive([0x1F, 0x00]) == [])
        #expect(!q.isFinished && q.state == .idle)
    }

    @Test func peerPairingFailedEndsPairing() {
        let p = Self.responder()
        _ = p.receive(Self.request())
        #expect(p.receive([0x05, 0x08]) == [.failed(.unspecifiedReason, remote: true)])
        #expect(p.isFinished && p.deadline == nil)
        #expect(p.receive(Self.request()) == [])
    }

    @Test func timeout() {
        // Vol 3 Part H 3.4: 30 s after the last PDU queued, the pairing fails and SMP stops on the link.
        var clock = ContinuousClock.now
        let p = Self.responder(now: { clock })
        #expect(p.deadline == nil)
        _ = p.receive(Self.request())
        #expect(p.deadline == clock + .seconds(30))
        clock += .seconds(10)
        _ = p.receive([0x0C] + SMPKeyPair.generate().publicKey)   // we answer: timer restarts
        #expect(p.deadline == clock + .seconds(30))
        #expect(p.timedOut() == [.failed(.unspecifiedReason, remote: false)])   // no PDU after a timeout
        #expect(p.hasTimedOut && p.isFinished && p.deadline == nil)
        #expect(p.receive([0x04] + [UInt8](repeating: 0, count: 16)) == [])
        #expect(p.start() == [])
        #expect(p.timedOut() == [])
    }

    @Test func secureConnectionsOnlyRefusesLegacy() {
        let p = Self.responder { $0.secureConnectionsOnly = true }
        #expect(p.receive(Self.request(authReq: 0x01)) == Self.failure(.authenticationRequirements))
        // SC with a 15-octet key is refused too, even with a lower configured minimum (Vol 3 Part C 10.2.4).
        let q = Self.responder { $0.secureConnectionsOnly = true; $0.minimumKeySize = 7 }
        #expect(q.receive(Self.request(keySize: 15)) == Self.failure(.encryptionKeySize))
    }

    @Test func mitmRequiredButJustWorks() {
        // Both NoInputNoOutput: only Just Works is possible (Table 2.8), which gives no MITM protection.
        let p = Self.responder { $0.mitm = true }
        #expect(p.receive(Self.request(authReq: 0x0D)) == Self.failure(.authenticationRequirements))
    }

    @Test func userRefusals() throws {
        var display = SMPConfiguration(), keyboard = SMPConfiguration()
        display.ioCapability = .displayYesNo
        display.mitm = true
        keyboard.ioCapability = .keyboardDisplay
        // Numeric comparison rejected by the responder's user: Numeric Comparison Failed (0x0C).
        let link = PairingLink(initiator: display, responder: keyboard)
        link.acceptNumbers = false
        link.run()
        #expect(link.initiatorFailure?.0 == .numericComparisonFailed)
        #expect(link.responderFailure?.0 == .numericComparisonFailed)
        #expect(link.initiatorResult == nil && link.responderResult == nil)

        // Passkey entry cancelled: Passkey Entry Failed (0x01).
        var typing = SMPConfiguration()
        typing.ioCapability = .keyboardOnly
        typing.mitm = true
        let p = SMPPairing(role: .responder, configuration: typing, local: peripheralAddress, peer: centralAddress)
        let out = p.receive(Self.request(authReq: 0x0D, io: 0x00))   // initiator DisplayOnly: we type
        #expect(out.last == .user(.enterPasskey))
        #expect(p.passkeyEntered(nil) == Self.failure(.passkeyEntryFailed))
    }

    @Test func repeatedAttempts() {
        // Vol 3 Part H 2.3.6: after a failed pairing, the peer waits before pairing again.
        var clock = ContinuousClock.now
        let tracker = SMPAttemptTracker(initialWait: .seconds(2), maximumWait: .seconds(8))
        func failOnce() {
            let p = Self.responder({ $0.secureConnections = false }, now: { clock }, attempts: tracker)
            _ = p.receive(Self.request(authReq: 0x01))
            _ = p.receive([0x03] + [UInt8](repeating: 0x42, count: 16))
            #expect(p.receive([0x04] + [UInt8](repeating: 0x17, count: 16)).last == .failed(.confirmValueFailed, remote: false))
        }
        failOnce()
        let blocked = Self.responder(now: { clock }, attempts: tracker)
        #expect(blocked.receive(Self.request()) == Self.failure(.repeatedAttempts))
        clock += .seconds(2)
        failOnce()   // allowed again after 2 s; fails again: now 4 s
        clock += .seconds(3)
        #expect(!tracker.mayPair(centralAddress, now: clock))
        clock += .seconds(1)
        #expect(tracker.mayPair(centralAddress, now: clock))
        // Our initiator does not start either while waiting.
        failOnce()
        let i = SMPPairing(role: .initiator, configuration: SMPConfiguration(), local: peripheralAddress, peer: centralAddress,
                           attempts: tracker, now: { clock })
        #expect(i.start() == [.failed(.repeatedAttempts, remote: false)])
        tracker.recordSuccess(centralAddress)
        #expect(tracker.mayPair(centralAddress, now: clock))
    }

    /// The waiting interval follows the peer's identity, not the RPA it connected from: a bonded
    /// peer that failed under one RPA is still refused under the next (Vol 3 Part H 2.3.6 "a device
    /// claiming the same identity as the failed device").
    @Test func repeatedAttemptsFollowTheIdentityAddress() {
        let clock = ContinuousClock.now
        let tracker = SMPAttemptTracker()
        let identity = DeviceAddress(BDAddress([0xC1, 0x22, 0x33, 0x44, 0x55, 0x66]), type: .random)
        let rpa1 = DeviceAddress(BDAddress([0x4A, 0x01, 0x02, 0x03, 0x04, 0x05]), type: .random)
        let rpa2 = DeviceAddress(BDAddress([0x5B, 0x06, 0x07, 0x08, 0x09, 0x0A]), type: .random)
        func responder(_ peer: DeviceAddress) -> SMPPairing {
            var c = SMPConfiguration()
            c.secureConnections = false
            return SMPPairing(role: .responder, configuration: c, local: peripheralAddress, peer: peer,
                              attempts: tracker, peerIdentity: identity, now: { clock })
        }
        let first = responder(rpa1)
        _ = first.receive(Self.request(authReq: 0x01))
        _ = first.receive([0x03] + [UInt8](repeating: 0x42, count: 16))
        #expect(first.receive([0x04] + [UInt8](repeating: 0x17, count: 16)).last == .failed(.confirmValueFailed, remote: false))
        #expect(!tracker.mayPair(identity, now: clock))
        #expect(tracker.mayPair(rpa1, now: clock), "counted against the identity, not the RPA")
        #expect(responder(rpa2).receive(Self.request()) == Self.failure(.repeatedAttempts))
    }

    @Test func securityRequest() {
        let i = SMPPairing(role: .initiator, configuration: SMPConfiguration(), local: centralAddress, peer: peripheralAddress)
        #expect(i.receive([0x0B, 0x0D]) == [.securityRequested(SMPAuthReq(rawValue: 0x0D))])
        #expect(!i.isFinished)
        // Our responder's Security Request carries our AuthReq: Bonding, SC, CT2 by default.
        #expect(Self.responder().start() == [.send([0x0B, 0x29])])
    }
}

@Suite struct SMPMixedTests {
    @Test func secureConnectionsFallsBackToLegacy() throws {
        // Only one side offers SC: LE legacy pairing (Vol 3 Part H 2.3.5.1: SC needs both SC bits).
        var legacy = SMPConfiguration()
        legacy.secureConnections = false
        for (i, r) in [(SMPConfiguration(), legacy), (legacy, SMPConfiguration())] {
            let link = PairingLink(initiator: i, responder: r)
            link.run()
            let a = try #require(link.initiatorResult), b = try #require(link.responderResult)
            #expect(!a.secureConnections && !b.secureConnections && a.method == .justWorks)
            #expect(a.peer.ltk == b.local.ltk && a.peer.ltk != nil)
        }
    }

    @Test func legacyOOBWithoutTK() {
        // Our SC OOB data set our OOB flag; the peer is legacy with a TK: legacy OOB without a TK → OOB Not Available.
        var i = SMPConfiguration(), r = SMPConfiguration()
        i.oob = SMPOOBData(peerConfirm: [UInt8](repeating: 1, count: 16), peerRandom: [UInt8](repeating: 2, count: 16))
        r.secureConnections = false
        r.oob = SMPOOBData(legacyTK: Array(1...16))
        let link = PairingLink(initiator: i, responder: r)
        link.run()
        #expect(link.initiatorFailure?.0 == .oobNotAvailable && link.responderFailure?.1 == true)
    }

    @Test func hostileBytesNeverTrap() {
        // Random PDUs (valid codes, random lengths and contents) in every role: each either is
        // accepted or fails the pairing; nothing traps, and a finished pairing stays silent.
        var generator = SystemRandomNumberGenerator()
        for round in 0..<300 {
            let role: SMPRole = round % 2 == 0 ? .initiator : .responder
            var c = SMPConfiguration()
            c.secureConnections = round % 3 != 0
            c.ioCapability = SMPIOCapability(rawValue: UInt8(round % 5))
            let p = SMPPairing(role: role, configuration: c, local: centralAddress, peer: peripheralAddress)
            if role == .initiator { _ = p.start() }
            for _ in 0..<8 {
                let code = UInt8.random(in: 0...0x10, using: &generator)
                let length = [0, 1, 6, 15, 16, 64, 65].randomElement(using: &generator)!
                let body = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let out = p.receive([code] + body)
                if p.isFinished { #expect(p.receive([code] + body) == []) }
                for o in out { if case .send(let b) = o { #expect(!b.isEmpty) } }
            }
        }
    }
}

@Suite struct SMPPhaseThreeTests {
    /// Our legacy Just Works responder driven to key distribution by a scripted initiator
    /// (confirm values from c1, checked against the spec example in SMPCryptoTests).
    static func responderAwaitingKeys(initiatorKeys: UInt8) throws -> SMPPairing {
        var c = SMPConfiguration()
        c.secureConnections = false
        c.distributeSigningKey = false
        let p = SMPPairing(role: .responder, configuration: c, local: peripheralAddress, peer: centralAddress)
        let preq: [UInt8] = [0x01, 0x03, 0x00, 0x01, 0x10, initiatorKeys, 0x00]
        let pres = try #require(sentBytes(p.receive(preq)).first)
        #expect(pres == [0x02, 0x03, 0x00, 0x01, 0x10, initiatorKeys, 0x00])
        let mrand = [UInt8](repeating: 0x5A, count: 16), zero = [UInt8](repeating: 0, count: 16)
        let mconfirm = SMPCrypto.c1(k: zero, r: mrand, preq: preq, pres: pres, iat: 1, ia: centralAddress.address,
                                    rat: 0, ra: peripheralAddress.address)
        _ = p.receive([0x03] + mconfirm)
        #expect(sentBytes(p.receive([0x04] + mrand)).first?.first == 0x04)
        #expect(p.longTermKeyRequested(ediv: 0, rand: [UInt8](repeating: 0, count: 8)) != nil)
        #expect(p.encryptionChanged(enabled: true, status: 0) == [])
        return p
    }

    @Test func identityAddressMustBePublicOrStatic() throws {
        let p = try Self.responderAwaitingKeys(initiatorKeys: 0x02)
        #expect(p.receive([0x08] + [UInt8](repeating: 7, count: 16)) == [])
        // Random address with top bits 0b01 (resolvable private): no identity address (Vol 3 Part H 3.6.5).
        #expect(p.receive([0x09, 0x01, 1, 2, 3, 4, 5, 0x45]) == SMPNegativeTests.failure(.invalidParameters))

        let q = try Self.responderAwaitingKeys(initiatorKeys: 0x02)
        _ = q.receive([0x08] + [UInt8](repeating: 7, count: 16))
        let out = q.receive([0x09, 0x01, 1, 2, 3, 4, 5, 0xC5])
        guard case .completed(let r)? = out.last else { Issue.record("\(out)"); return }
        #expect(r.peer.irk == [UInt8](repeating: 7, count: 16))
        #expect(r.peer.identityAddress == DeviceAddress(BDAddress(be("C50504030201")), type: .random))
    }

    @Test func keysInTheWrongOrder() throws {
        // Vol 3 Part H 3.6.1: Identity Information comes before Identity Address Information.
        let p = try Self.responderAwaitingKeys(initiatorKeys: 0x02)
        #expect(p.receive([0x09, 0x00, 1, 2, 3, 4, 5, 6]) == SMPNegativeTests.failure(.unspecifiedReason))
        // A key that was not agreed on.
        let q = try Self.responderAwaitingKeys(initiatorKeys: 0x02)
        #expect(q.receive([0x0A] + [UInt8](repeating: 1, count: 16)) == SMPNegativeTests.failure(.unspecifiedReason))
    }

    @Test func encryptionFailureFailsPairing() throws {
        var c = SMPConfiguration()
        c.secureConnections = false
        // An Encryption Change with an error (here PIN or Key Missing, 0x06) ends the pairing, nothing distributed.
        let p = SMPPairing(role: .responder, configuration: c, local: peripheralAddress, peer: centralAddress)
        let preq: [UInt8] = [0x01, 0x03, 0x00, 0x01, 0x10, 0x00, 0x00]
        let pres = try #require(sentBytes(p.receive(preq)).first)
        let mrand = [UInt8](repeating: 1, count: 16), zero = [UInt8](repeating: 0, count: 16)
        _ = p.receive([0x03] + SMPCrypto.c1(k: zero, r: mrand, preq: preq, pres: pres, iat: 1, ia: centralAddress.address,
                                            rat: 0, ra: peripheralAddress.address))
        _ = p.receive([0x04] + mrand)
        #expect(p.encryptionChanged(enabled: false, status: 0x06) == SMPNegativeTests.failure(.unspecifiedReason))
        #expect(p.failure?.contains("0x06") == true)
    }

    @Test func keypressNotificationsOnlyDuringPasskeyEntry() {
        var typing = SMPConfiguration()
        typing.ioCapability = .keyboardOnly
        typing.mitm = true
        let p = SMPPairing(role: .responder, configuration: typing, local: peripheralAddress, peer: centralAddress)
        _ = p.receive(SMPNegativeTests.request(authReq: 0x0D, io: 0x00))
        #expect(p.receive([0x0E, 0x00]) == [])   // passkey entry started: informational
        #expect(!p.isFinished)
        let q = SMPNegativeTests.responder()
        _ = q.receive(SMPNegativeTests.request())
        #expect(q.receive([0x0E, 0x00]) == SMPNegativeTests.failure(.unspecifiedReason))
    }
}
