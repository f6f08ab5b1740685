import HCI

/// One pairing on one link (Core v5.4 Vol 3 Part H 2.3–2.4, 3.5–3.6), sans-IO: the stack feeds
/// received PDUs and HCI events, and carries out the returned outputs in order. Owned by one
/// serial context (not thread-safe by itself).
///
/// Initiator (A) = central, responder (B) = peripheral. Once `isFinished`, the object ignores
/// everything; after a completed or failed (not timed out) pairing the stack creates a new one
/// for the next procedure on the link. After a timeout, no more SMP on the link (3.4).
public final class SMPPairing {
    public let role: SMPRole
    public let configuration: SMPConfiguration
    public let localAddress: DeviceAddress
    public let peerAddress: DeviceAddress

    /// When the SMP timer must fire (nil = no procedure running). The stack keeps one timer.
    public private(set) var deadline: ContinuousClock.Instant?
    /// Completed or failed; nothing is stored or distributed after a failure.
    public var isFinished: Bool { state == .completed || state == .failed }
    /// The SMP timeout fired: no further SMP on this link (Vol 3 Part H 3.4).
    public private(set) var hasTimedOut = false
    /// Why pairing failed, in words (set with `.failed`).
    public private(set) var failure: String?
    /// The method chosen, once the Pairing Request/Response exchange is done.
    public private(set) var method: SMPMethod?
    /// Whether LE Secure Connections is used (valid once `method` is set).
    public private(set) var secureConnections = false

    private let random: (Int) -> [UInt8]
    private let injectedKeyPair: SMPKeyPair?
    private let now: () -> ContinuousClock.Instant
    private let attempts: SMPAttemptTracker?
    /// Whom the repeated-attempts tracker counts failures against: the peer's identity address
    /// when known (a bonded peer behind a new RPA is still the same peer, Vol 3 Part H 2.3.6).
    private let attemptsKey: DeviceAddress

    /// What the pairing waits for. Only the PDU a state names is accepted (others: Pairing Failed;
    /// reserved codes are ignored).
    enum State: Equatable {
        case idle                    // responder: Pairing Request; initiator: start() (or Security Request)
        case awaitingPairingResponse
        case awaitingPublicKey
        case awaitingConfirm         // the peer's Pairing Confirm
        case awaitingRandom          // the peer's Pairing Random
        case awaitingDHKeyCheck
        case awaitingUser            // a passkey or a yes/no; no PDU expected meanwhile
        case awaitingEncryption      // STK/LTK handed to the controllers; Encryption Change next
        case distributingKeys        // the peer's key distribution PDUs
        case completed
        case failed
    }
    private(set) var state: State = .idle

    // Pairing Request / Response as sent (c1's preq/pres) and their parameters.
    private var preq: [UInt8] = []
    private var pres: [UInt8] = []
    private var request: SMPPairingParameters?
    private var response: SMPPairingParameters?
    private var keySize = 16

    private enum PasskeyAction { case none, display, input }
    private var passkeyAction = PasskeyAction.none
    private var passkey: UInt32?
    private var tk: [UInt8]?                   // legacy
    private var localRandom: [UInt8] = []      // Mrand/Srand, Na/Nb (per passkey round)
    private var peerRandom: [UInt8] = []
    private var peerConfirm: [UInt8]?
    private var confirmSent = false

    // Secure Connections.
    private var keyPair: SMPKeyPair?
    private var peerPublicKey: [UInt8] = []
    private var dhKey: [UInt8] = []
    private var macKey: [UInt8] = []
    private var passkeyRound = 0
    private var pendingPeerCheck: [UInt8]?     // Ea received before the user's yes (responder)
    private var userAccepted = false
    private var debugKey = false

    /// STK (legacy) or LTK (SC) for the encryption that ends phase 2.
    private var encryptionKey: [UInt8]?

    // Phase 3.
    private var expectedKeyPDUs: [UInt8] = []
    private var earlyKeyPDUs: [SMPPDU] = []
    private var localKeys = SMPKeys()
    private var peerKeys = SMPKeys()

    /// `local` / `peer`: the addresses the link was made with, as on air (a resolvable private address
    /// stays random), since c1 and f5/f6 cover them. `random` and `keyPair` are injectable for replay
    /// tests; `keyPair` defaults to a fresh one per pairing. `attempts`: the stack's repeated-attempts
    /// tracker, if any, and `peerIdentity` the peer's identity address when known (it keys the tracker;
    /// else `peer` does). `now`: the clock `deadline` is computed from.
    public init(role: SMPRole, configuration: SMPConfiguration, local: DeviceAddress, peer: DeviceAddress,
                random: @escaping (Int) -> [UInt8] = SMPCrypto.randomBytes, keyPair: SMPKeyPair? = nil,
                attempts: SMPAttemptTracker? = nil, peerIdentity: DeviceAddress? = nil,
                now: @escaping () -> ContinuousClock.Instant = { .now }) {
        self.role = role
        self.configuration = configuration
        self.localAddress = local
        self.peerAddress = peer
        self.random = random
        self.injectedKeyPair = keyPair
        self.attempts = attempts
        self.attemptsKey = peerIdentity ?? peer
        self.now = now
    }

    // MARK: Public entry points

    /// Initiator: Pairing Request. Responder: Security Request (the peripheral asks the central to pair).
    public func start() -> [SMPOutput] {
        guard state == .idle, !hasTimedOut else { return [] }
        if let attempts, !attempts.mayPair(attemptsKey, now: now()) {
            return fail(.repeatedAttempts, "waiting interval after a failed pairing with \(attemptsKey) (Vol 3 Part H 2.3.6)", send: false)
        }
        switch role {
        case .initiator:
            let params = SMPPairingParameters(
                ioCapability: configuration.ioCapability,
                oobDataFlag: ourOOBFlag(secureConnections: configuration.secureConnections),
                authReq: ourAuthReq, maxEncryptionKeySize: ourMaximumKeySize,
                initiatorKeyDistribution: offeredKeys,
                responderKeyDistribution: configuration.bonding ? [.encKey, .idKey, .signKey] : [])
            request = params
            preq = SMPPDU.pairingRequest(params).bytes
            state = .awaitingPairingResponse
            return [send(preq)]
        case .responder:
            // No SMP timer for a Security Request: the central may ignore it (Vol 3 Part H 2.4.6).
            return [.send(SMPPDU.securityRequest(authReq: ourAuthReq).bytes)]
        }
    }

    /// One received SMP PDU (raw bytes from CID 0x0006).
    public func receive(_ bytes: [UInt8]) -> [SMPOutput] {
        guard !isFinished else { return [] }
        guard let code = bytes.first else { return fail(.invalidParameters, "empty SMP PDU") }
        let pdu: SMPPDU
        do {
            pdu = try SMPPDU.decode(bytes)
        } catch {
            return fail(.invalidParameters, "malformed \(SMPPDU.name(ofCode: code) ?? "PDU"): \(error)")
        }
        switch pdu {
        case .unknown:
            // A reserved code is ignored, during a pairing too (Vol 3 Part H 3.3; Linux's smp.c
            // drops it as well): no answer, the state and the SMP timer stay as they were.
            return []
        case .pairingFailed(let reason):
            return fail(reason, "peer sent Pairing Failed: \(reason)", send: false, remote: true)
        case .securityRequest(let authReq):
            guard role == .initiator else { return fail(.commandNotSupported, "Security Request sent to the peripheral") }
            // During a pairing the initiator ignores it; when idle, the stack decides (pair or encrypt).
            return state == .idle ? [.securityRequested(authReq)] : []
        case .keypressNotification:
            // Informational; only meaningful during Passkey Entry (we never set the Keypress flag).
            if method == .passkeyEntry, state != .awaitingEncryption, state != .distributingKeys { return [] }
            return unexpected(pdu)
        case .pairingRequest(let p):
            guard role == .responder else { return fail(.commandNotSupported, "Pairing Request sent to the central") }
            guard state == .idle else { return unexpected(pdu) }
            return pairingRequestReceived(p, bytes: bytes)
        case .pairingResponse(let p):
            guard state == .awaitingPairingResponse else { return unexpected(pdu) }
            return pairingResponseReceived(p, bytes: bytes)
        case .pairingPublicKey(let x, let y):
            guard state == .awaitingPublicKey else { return unexpected(pdu) }
            return publicKeyReceived(x + y)
        case .pairingConfirm(let value):
            guard state == .awaitingConfirm else { return unexpected(pdu) }
            peerConfirm = value
            return secureConnections ? scConfirmReceived() : legacyConfirmReceived()
        case .pairingRandom(let value):
            guard state == .awaitingRandom else { return unexpected(pdu) }
            peerRandom = value
            return secureConnections ? scRandomReceived() : legacyRandomReceived()
        case .pairingDHKeyCheck(let value):
            guard state == .awaitingDHKeyCheck else { return unexpected(pdu) }
            return dhKeyCheckReceived(value)
        case .encryptionInformation, .centralIdentification, .identityInformation,
             .identityAddressInformation, .signingInformation:
            // The responder distributes right after its Encryption Change; its PDUs can reach the
            // initiator's host before the initiator's own Encryption Change event: keep a few.
            if state == .awaitingEncryption, role == .initiator, earlyKeyPDUs.count < 5 {
                earlyKeyPDUs.append(pdu)
                return []
            }
            guard state == .distributingKeys, expectedKeyPDUs.first == pdu.code else { return unexpected(pdu) }
            return keyReceived(pdu)
        }
    }

    /// The user's passkey (nil = cancelled → Passkey Entry Failed).
    public func passkeyEntered(_ value: UInt32?) -> [SMPOutput] {
        guard !isFinished, passkeyAction == .input, passkey == nil else { return [] }
        guard let value else { return fail(.passkeyEntryFailed, "user cancelled passkey entry") }
        guard value <= 999_999 else { return fail(.passkeyEntryFailed, "passkey \(value) is not 0–999999") }
        setPasskey(value)
        return passkeyBecameKnown()
    }

    /// The user's answer to `.confirmNumber` (false → Numeric Comparison Failed).
    public func numericComparisonAnswered(_ accepted: Bool) -> [SMPOutput] {
        guard !isFinished, method == .numericComparison, !userAccepted, !macKey.isEmpty else { return [] }
        guard accepted else { return fail(.numericComparisonFailed, "user rejected the numeric comparison") }
        userAccepted = true
        switch role {
        case .initiator:
            guard state == .awaitingUser else { return [] }
            state = .awaitingDHKeyCheck
            return [send(SMPPDU.pairingDHKeyCheck(dhKeyCheck: localCheckValue()).bytes)]
        case .responder:
            guard state == .awaitingUser, let ea = pendingPeerCheck else { return [] }
            return dhKeyCheckReceived(ea)
        }
    }

    /// Responder: the controller's LE Long Term Key Request during this pairing → the STK/LTK to reply
    /// with (nil = negative reply: not this pairing's EDIV/Rand, or no key yet).
    public func longTermKeyRequested(ediv: UInt16, rand: [UInt8]) -> [UInt8]? {
        guard role == .responder, state == .awaitingEncryption, ediv == 0, rand.allSatisfy({ $0 == 0 }) else { return nil }
        return encryptionKey
    }

    /// HCI Encryption Change for the link: key distribution follows (Vol 3 Part H 3.6.1).
    public func encryptionChanged(enabled: Bool, status: UInt8) -> [SMPOutput] {
        guard state == .awaitingEncryption else { return [] }
        guard status == 0, enabled else {
            return fail(.unspecifiedReason, "encryption with the new key failed (HCI status \(hexCode(status)))")
        }
        return startKeyDistribution()
    }

    /// The stack's timer fired at `deadline`: pairing fails, no more SMP on this link (Vol 3 Part H 3.4).
    /// Returns `.failed(.unspecifiedReason, remote: false)` without sending Pairing Failed;
    /// `hasTimedOut` and `failure` tell a timeout apart.
    public func timedOut() -> [SMPOutput] {
        guard !isFinished, deadline != nil else { return [] }
        hasTimedOut = true
        return fail(.unspecifiedReason, "SMP timeout (\(configuration.timeout)) in state \(state)", send: false)
    }

    // MARK: Phase 1: feature exchange

    private var ourAuthReq: SMPAuthReq {
        SMPAuthReq(bonding: configuration.bonding, mitm: configuration.mitm,
                   secureConnections: configuration.secureConnections, keypress: false, ct2: configuration.secureConnections)
    }

    /// What we put in Maximum Encryption Key Size (7–16 whatever the configuration says).
    private var ourMaximumKeySize: UInt8 { UInt8(min(max(configuration.maximumKeySize, 7), 16)) }

    /// The keys we can give: EncKey (legacy LTK), IdKey if we have an identity, SignKey if asked to.
    private var offeredKeys: SMPKeyDistribution {
        var keys: SMPKeyDistribution = [.encKey]
        if configuration.localIdentity != nil { keys.insert(.idKey) }
        if configuration.distributeSigningKey { keys.insert(.signKey) }
        return keys
    }

    private func ourOOBFlag(secureConnections sc: Bool) -> UInt8 {
        configuration.oob?.present(secureConnections: sc) == true ? 1 : 0
    }

    /// Checks shared by both roles on the peer's parameters; nil = acceptable.
    private func refusal(of p: SMPPairingParameters) -> (SMPPairingFailedReason, String)? {
        if !p.isKeySizeValid { return (.invalidParameters, "maximum key size \(p.maxEncryptionKeySize) not 7–16") }
        if p.ioCapability.name == nil { return (.invalidParameters, "reserved IO capability \(p.ioCapability)") }
        if p.oobDataFlag > 1 { return (.invalidParameters, "reserved OOB data flag \(p.oobDataFlag)") }
        return nil
    }

    private func pairingRequestReceived(_ p: SMPPairingParameters, bytes: [UInt8]) -> [SMPOutput] {
        if let attempts, !attempts.mayPair(attemptsKey, now: now()) {
            return fail(.repeatedAttempts, "waiting interval after a failed pairing with \(attemptsKey) (Vol 3 Part H 2.3.6)")
        }
        if let (reason, why) = refusal(of: p) { return fail(reason, why) }
        request = p
        preq = bytes
        let sc = configuration.secureConnections && p.authReq.secureConnections
        // We ask for the peer's keys only when bonding (we would not keep them otherwise), and give ours as asked.
        let params = SMPPairingParameters(
            ioCapability: configuration.ioCapability, oobDataFlag: ourOOBFlag(secureConnections: sc), authReq: ourAuthReq,
            maxEncryptionKeySize: min(ourMaximumKeySize, p.maxEncryptionKeySize),
            initiatorKeyDistribution: configuration.bonding ? p.initiatorKeyDistribution.intersection([.encKey, .idKey, .signKey]) : [],
            responderKeyDistribution: p.responderKeyDistribution.intersection(offeredKeys))
        if let refused = negotiate(request: p, response: params) { return refused }
        response = params
        pres = SMPPDU.pairingResponse(params).bytes
        var out = [send(pres)]
        if secureConnections {
            state = .awaitingPublicKey
            out += askUserForPasskeyIfNeeded()
        } else {
            out += legacySetUpTK()
            state = .awaitingConfirm
        }
        return out
    }

    private func pairingResponseReceived(_ p: SMPPairingParameters, bytes: [UInt8]) -> [SMPOutput] {
        guard let req = request else { return unexpected(.pairingResponse(p)) }
        if let (reason, why) = refusal(of: p) { return fail(reason, why) }
        guard req.initiatorKeyDistribution.isSuperset(of: p.initiatorKeyDistribution),
              req.responderKeyDistribution.isSuperset(of: p.responderKeyDistribution) else {
            return fail(.invalidParameters, "Pairing Response asks for keys the request did not offer")
        }
        if let refused = negotiate(request: req, response: p) { return refused }
        response = p
        pres = bytes
        if secureConnections {
            state = .awaitingPublicKey
            return [send(publicKeyPDU())] + askUserForPasskeyIfNeeded()
        }
        let out = legacySetUpTK()
        state = .awaitingUser
        return out + legacySendConfirmIfReady()
    }

    /// Key size, SC, method and MITM from both parameter sets (Vol 3 Part H 2.3.4, 2.3.5.1); nil when pairing may go on.
    private func negotiate(request req: SMPPairingParameters, response res: SMPPairingParameters) -> [SMPOutput]? {
        keySize = Int(min(req.maxEncryptionKeySize, res.maxEncryptionKeySize))
        if keySize < configuration.minimumKeySize {
            return fail(.encryptionKeySize, "key size \(keySize) below the minimum \(configuration.minimumKeySize)")
        }
        secureConnections = req.authReq.secureConnections && res.authReq.secureConnections
        if configuration.secureConnectionsOnly && !secureConnections {
            return fail(.authenticationRequirements, "peer does not support LE Secure Connections (SC-only mode)")
        }
        // Secure Connections Only mode also requires a 128-bit key (Vol 3 Part C 10.2.4).
        if configuration.secureConnectionsOnly && keySize < 16 {
            return fail(.encryptionKeySize, "key size \(keySize) in Secure Connections Only mode (needs 16)")
        }
        let (chosen, initiatorAction, responderAction) = Self.method(
            initiator: req, responder: res, secureConnections: secureConnections)
        method = chosen
        passkeyAction = role == .initiator ? initiatorAction : responderAction
        if configuration.mitm && chosen == .justWorks {
            return fail(.authenticationRequirements, "MITM protection required but the IO capabilities only allow Just Works")
        }
        // Legacy OOB needs a TK (our OOB flag may have been set for SC data when we offered SC).
        if chosen == .oob && !secureConnections && configuration.oob?.legacyTK?.count != 16 {
            return fail(.oobNotAvailable, "legacy OOB pairing chosen but no 16-octet OOB TK is configured")
        }
        return nil
    }

    /// The pairing method and each side's passkey role (Vol 3 Part H 2.3.5.1, Tables 2.6–2.8).
    private static func method(initiator a: SMPPairingParameters, responder b: SMPPairingParameters,
                               secureConnections sc: Bool) -> (SMPMethod, PasskeyAction, PasskeyAction) {
        let oob = sc ? (a.oobDataFlag == 1 || b.oobDataFlag == 1) : (a.oobDataFlag == 1 && b.oobDataFlag == 1)
        if oob { return (.oob, .none, .none) }
        if !a.authReq.mitm && !b.authReq.mitm { return (.justWorks, .none, .none) }
        let i = a.ioCapability, r = b.ioCapability
        let displayOnly = SMPIOCapability.displayOnly, yesNo = SMPIOCapability.displayYesNo
        let keyboard = SMPIOCapability.keyboardOnly, none = SMPIOCapability.noInputNoOutput
        let kbDisplay = SMPIOCapability.keyboardDisplay
        if i == none || r == none { return (.justWorks, .none, .none) }
        // Passkey entry, initiator types what the responder shows (and the reverse).
        let responderShows: (SMPMethod, PasskeyAction, PasskeyAction) = (.passkeyEntry, .input, .display)
        let initiatorShows: (SMPMethod, PasskeyAction, PasskeyAction) = (.passkeyEntry, .display, .input)
        let numeric: (SMPMethod, PasskeyAction, PasskeyAction) = (.numericComparison, .none, .none)
        let justWorks: (SMPMethod, PasskeyAction, PasskeyAction) = (.justWorks, .none, .none)
        switch (r, i) {
        case (displayOnly, keyboard), (displayOnly, kbDisplay), (yesNo, keyboard), (kbDisplay, keyboard):
            return responderShows
        case (displayOnly, _): return justWorks
        case (yesNo, yesNo): return sc ? numeric : justWorks
        case (yesNo, kbDisplay): return sc ? numeric : responderShows
        case (yesNo, _): return justWorks
        case (keyboard, keyboard): return (.passkeyEntry, .input, .input)
        case (keyboard, _): return initiatorShows
        case (kbDisplay, yesNo), (kbDisplay, kbDisplay): return sc ? numeric : initiatorShows
        case (kbDisplay, _): return initiatorShows
        default: return justWorks
        }
    }

    /// Passkey Entry: show a passkey, or ask for one (unless configured).
    private func askUserForPasskeyIfNeeded() -> [SMPOutput] {
        switch passkeyAction {
        case .none: return []
        case .display:
            let value = configuration.fixedPasskey ?? random(4).reduce(0) { $0 << 8 | UInt32($1) } % 1_000_000
            setPasskey(value)
            return [.user(.displayPasskey(value))]
        case .input:
            if let value = configuration.fixedPasskey {
                setPasskey(value)
                return []
            }
            return [.user(.enterPasskey)]
        }
    }

    private func setPasskey(_ value: UInt32) {
        passkey = value
        // The passkey as a 128-bit value, LSO first (TK for legacy, r for SC's Ea/Eb).
        var r = [UInt8](repeating: 0, count: 16)
        r[0] = UInt8(value & 0xFF); r[1] = UInt8(value >> 8 & 0xFF); r[2] = UInt8(value >> 16 & 0xFF)
        tk = r
    }

    private func passkeyBecameKnown() -> [SMPOutput] {
        if secureConnections {
            switch (role, state) {
            case (.initiator, .awaitingUser):
                return scSendPasskeyRoundConfirm()
            case (.responder, .awaitingUser):
                return scConfirmReceived()
            default: return []
            }
        }
        switch (role, state) {
        case (.initiator, .awaitingUser): return legacySendConfirmIfReady()
        case (.responder, .awaitingUser): return legacyConfirmReceived()
        default: return []
        }
    }

    // MARK: Phase 2, LE legacy (Vol 3 Part H 2.3.5.2–2.3.5.5)

    private func legacySetUpTK() -> [SMPOutput] {
        switch method {
        case .oob: tk = configuration.oob?.legacyTK; return []
        case .passkeyEntry: return askUserForPasskeyIfNeeded()
        default: tk = [UInt8](repeating: 0, count: 16); return []
        }
    }

    private func c1(_ r: [UInt8], tk: [UInt8]) -> [UInt8] {
        let (ia, ra) = role == .initiator ? (localAddress, peerAddress) : (peerAddress, localAddress)
        return SMPCrypto.c1(k: tk, r: r, preq: preq, pres: pres,
                            iat: ia.type.isRandom ? 1 : 0, ia: ia.address, rat: ra.type.isRandom ? 1 : 0, ra: ra.address)
    }

    /// Initiator: Mconfirm once the TK is known (until then, no PDU is expected).
    private func legacySendConfirmIfReady() -> [SMPOutput] {
        guard role == .initiator, let tk, !confirmSent else { return [] }
        confirmSent = true
        state = .awaitingConfirm
        localRandom = random(16)
        return [send(SMPPDU.pairingConfirm(confirmValue: c1(localRandom, tk: tk)).bytes)]
    }

    private func legacyConfirmReceived() -> [SMPOutput] {
        switch role {
        case .initiator:
            // Sconfirm: answer with Mrand.
            state = .awaitingRandom
            return [send(SMPPDU.pairingRandom(randomValue: localRandom).bytes)]
        case .responder:
            guard let tk else { state = .awaitingUser; return [] }
            localRandom = random(16)
            state = .awaitingRandom
            return [send(SMPPDU.pairingConfirm(confirmValue: c1(localRandom, tk: tk)).bytes)]
        }
    }

    private func legacyRandomReceived() -> [SMPOutput] {
        // awaitingRandom is reached only once the TK is known.
        guard let tk else { return fail(.unspecifiedReason, "no TK") }
        guard let confirm = peerConfirm, confirm == c1(peerRandom, tk: tk) else {
            return fail(.confirmValueFailed, "peer's confirm value does not match its random (c1)")
        }
        let (mrand, srand) = role == .initiator ? (localRandom, peerRandom) : (peerRandom, localRandom)
        let stk = SMPCrypto.mask(SMPCrypto.s1(k: tk, r1: srand, r2: mrand), toSize: keySize)
        encryptionKey = stk
        state = .awaitingEncryption
        switch role {
        case .initiator:
            // The SMP timer keeps running until key distribution ends: a controller that never
            // reports Encryption Change fails the pairing by timeout.
            return [.startEncryption(ltk: stk, ediv: 0, rand: [UInt8](repeating: 0, count: 8))]
        case .responder:
            return [send(SMPPDU.pairingRandom(randomValue: localRandom).bytes)]
        }
    }

    // MARK: Phase 2, LE Secure Connections (Vol 3 Part H 2.3.5.6)

    private var ourKeyPair: SMPKeyPair {
        if let keyPair { return keyPair }
        let pair = injectedKeyPair ?? SMPKeyPair.generate()
        keyPair = pair
        return pair
    }

    private func publicKeyPDU() -> [UInt8] {
        let pk = ourKeyPair.publicKey
        return SMPPDU.pairingPublicKey(publicKeyX: Array(pk[0..<32]), publicKeyY: Array(pk[32..<64])).bytes
    }

    /// X coordinates of the initiator's and responder's public keys.
    private var pkax: [UInt8] { Array((role == .initiator ? ourKeyPair.publicKey : peerPublicKey).prefix(32)) }
    private var pkbx: [UInt8] { Array((role == .initiator ? peerPublicKey : ourKeyPair.publicKey).prefix(32)) }

    private func publicKeyReceived(_ key: [UInt8]) -> [SMPOutput] {
        let ours = ourKeyPair
        // Reflection (CVE-2020-26558): the same X coordinate as ours, i.e. our key or its negation.
        if key.prefix(32) == ours.publicKey.prefix(32) {
            return fail(.dhKeyCheckFailed, "peer's public key reflects ours (CVE-2020-26558)")
        }
        do {
            dhKey = try SMPCrypto.dhKey(ours, peerPublicKey: key)
        } catch {
            return fail(.dhKeyCheckFailed, "invalid peer public key: \(error) (CVE-2018-5383)")
        }
        if SMPKeyPair.isDebugPublicKey(key) && !configuration.allowDebugKeys {
            return fail(.authenticationRequirements, "peer uses the debug key pair (Vol 3 Part H 2.3.5.6.1)")
        }
        debugKey = SMPKeyPair.isDebugPublicKey(key) || SMPKeyPair.isDebugPublicKey(ours.publicKey)
        peerPublicKey = key
        // OOB: check the peer's commitment to this key, if we received its OOB data.
        if method == .oob, ourOOBFlag(secureConnections: true) == 1, let oob = configuration.oob,
           let c = oob.peerConfirm, let r = oob.peerRandom {
            let x = Array(key.prefix(32))
            guard SMPCrypto.f4(u: x, v: x, x: r, z: 0) == c else {
                return fail(.confirmValueFailed, "peer's public key does not match its OOB confirm value")
            }
        }
        var out: [SMPOutput] = []
        if role == .responder { out.append(send(publicKeyPDU())) }
        switch (method, role) {
        case (.justWorks, .initiator), (.numericComparison, .initiator):
            state = .awaitingConfirm
        case (.justWorks, .responder), (.numericComparison, .responder):
            localRandom = random(16)
            out.append(send(SMPPDU.pairingConfirm(confirmValue: SMPCrypto.f4(u: pkbx, v: pkax, x: localRandom, z: 0)).bytes))
            state = .awaitingRandom
        case (.passkeyEntry, .initiator):
            if passkey == nil { state = .awaitingUser } else { out += scSendPasskeyRoundConfirm() }
        case (.passkeyEntry, .responder):
            state = .awaitingConfirm
        case (.oob, .initiator):
            localRandom = random(16)
            out.append(send(SMPPDU.pairingRandom(randomValue: localRandom).bytes))
            state = .awaitingRandom
        case (.oob, .responder), (nil, _):   // OOB responder: Na comes first
            state = .awaitingRandom
        }
        return out
    }

    /// rai / rbi of passkey round `passkeyRound`: 0x80 | bit i of the passkey (Vol 3 Part H 2.3.5.6.3).
    /// Only used once the passkey is known (a missing one could only make the confirm values differ).
    private var passkeyBit: UInt8 { 0x80 | UInt8(((passkey ?? 0) >> UInt32(passkeyRound)) & 1) }

    /// Initiator, Passkey Entry: Cai = f4(PKax, PKbx, Nai, rai).
    private func scSendPasskeyRoundConfirm() -> [SMPOutput] {
        localRandom = random(16)
        state = .awaitingConfirm
        return [send(SMPPDU.pairingConfirm(confirmValue: SMPCrypto.f4(u: pkax, v: pkbx, x: localRandom, z: passkeyBit)).bytes)]
    }

    private func scConfirmReceived() -> [SMPOutput] {
        switch (role, method) {
        case (.initiator, .justWorks), (.initiator, .numericComparison), (.initiator, .passkeyEntry):
            // Cb (or Cbi): reveal Na (Nai; that one was drawn for Cai).
            if method != .passkeyEntry { localRandom = random(16) }
            state = .awaitingRandom
            return [send(SMPPDU.pairingRandom(randomValue: localRandom).bytes)]
        case (.responder, .passkeyEntry):
            guard passkey != nil else { state = .awaitingUser; return [] }
            localRandom = random(16)
            state = .awaitingRandom
            return [send(SMPPDU.pairingConfirm(confirmValue: SMPCrypto.f4(u: pkbx, v: pkax, x: localRandom, z: passkeyBit)).bytes)]
        default:
            return unexpected(.pairingConfirm(confirmValue: peerConfirm ?? []))
        }
    }

    private func scRandomReceived() -> [SMPOutput] {
        switch role {
        case .responder:
            if method == .passkeyEntry {
                guard peerConfirm == SMPCrypto.f4(u: pkax, v: pkbx, x: peerRandom, z: passkeyBit) else {
                    return fail(.confirmValueFailed, "Cai of passkey round \(passkeyRound + 1) does not match Nai")
                }
            }
            // JW/NC: Nb was committed to with Cb already; passkey: Nbi with Cbi. OOB: fresh Nb.
            if method == .oob { localRandom = random(16) }
            var out = [send(SMPPDU.pairingRandom(randomValue: localRandom).bytes)]
            if method == .passkeyEntry && passkeyRound < 19 {
                passkeyRound += 1
                state = .awaitingConfirm
                return out
            }
            computeKeys()
            state = .awaitingDHKeyCheck
            if method == .numericComparison { out.append(.user(.confirmNumber(numericValue))) }
            return out
        case .initiator:
            switch method {
            case .justWorks, .numericComparison:
                guard peerConfirm == SMPCrypto.f4(u: pkbx, v: pkax, x: peerRandom, z: 0) else {
                    return fail(.confirmValueFailed, "Cb does not match Nb")
                }
            case .passkeyEntry:
                guard peerConfirm == SMPCrypto.f4(u: pkbx, v: pkax, x: peerRandom, z: passkeyBit) else {
                    return fail(.confirmValueFailed, "Cbi of passkey round \(passkeyRound + 1) does not match Nbi")
                }
                if passkeyRound < 19 {
                    passkeyRound += 1
                    return scSendPasskeyRoundConfirm()
                }
            default: break
            }
            computeKeys()
            if method == .numericComparison {
                state = .awaitingUser
                return [.user(.confirmNumber(numericValue))]
            }
            state = .awaitingDHKeyCheck
            return [send(SMPPDU.pairingDHKeyCheck(dhKeyCheck: localCheckValue()).bytes)]
        }
    }

    private var na: [UInt8] { role == .initiator ? localRandom : peerRandom }
    private var nb: [UInt8] { role == .initiator ? peerRandom : localRandom }

    /// Vb/Va = g2(PKax, PKbx, Na, Nb) mod 10^6 (Vol 3 Part H 2.3.5.6.2).
    private var numericValue: UInt32 { SMPCrypto.g2(u: pkax, v: pkbx, x: na, y: nb) % 1_000_000 }

    /// MacKey and LTK = f5(DHKey, Na, Nb, A, B) (Vol 3 Part H 2.3.5.6.5).
    private func computeKeys() {
        let (a, b) = role == .initiator ? (localAddress, peerAddress) : (peerAddress, localAddress)
        let keys = SMPCrypto.f5(w: dhKey, n1: na, n2: nb, a1: SMPCrypto.addressOctets(a), a2: SMPCrypto.addressOctets(b))
        macKey = keys.macKey
        encryptionKey = SMPCrypto.mask(keys.ltk, toSize: keySize)
    }

    /// The r of a DHKey check value (Vol 3 Part H 2.3.5.6.5): the passkey, the OOB random, or 0.
    /// `forInitiator`: Ea's r (rb) vs Eb's r (ra).
    private func checkR(forInitiator: Bool) -> [UInt8] {
        let zero = [UInt8](repeating: 0, count: 16)
        switch method {
        case .passkeyEntry: return tk ?? zero
        case .oob:
            // Ea uses rb if A received B's OOB data, Eb uses ra if B received A's.
            let computedByUs = forInitiator == (role == .initiator)
            let receiverFlag = forInitiator ? request?.oobDataFlag : response?.oobDataFlag
            guard receiverFlag == 1 else { return zero }
            return (computedByUs ? configuration.oob?.peerRandom : configuration.oob?.localRandom) ?? zero
        default: return zero
        }
    }

    private func checkValue(forInitiator: Bool) -> [UInt8] {
        let (a, b) = role == .initiator ? (localAddress, peerAddress) : (peerAddress, localAddress)
        let (aa, ba) = (SMPCrypto.addressOctets(a), SMPCrypto.addressOctets(b))
        let ioA = request.map { [$0.ioCapability.rawValue, $0.oobDataFlag, $0.authReq.rawValue] } ?? []
        let ioB = response.map { [$0.ioCapability.rawValue, $0.oobDataFlag, $0.authReq.rawValue] } ?? []
        return forInitiator
            ? SMPCrypto.f6(w: macKey, n1: na, n2: nb, r: checkR(forInitiator: true), ioCap: ioA, a1: aa, a2: ba)
            : SMPCrypto.f6(w: macKey, n1: nb, n2: na, r: checkR(forInitiator: false), ioCap: ioB, a1: ba, a2: aa)
    }

    private func localCheckValue() -> [UInt8] { checkValue(forInitiator: role == .initiator) }

    private func dhKeyCheckReceived(_ value: [UInt8]) -> [SMPOutput] {
        if role == .responder && method == .numericComparison && !userAccepted {
            pendingPeerCheck = value
            state = .awaitingUser
            return []
        }
        guard value == checkValue(forInitiator: role == .responder) else {
            return fail(.dhKeyCheckFailed, "peer's DHKey check value does not match")
        }
        state = .awaitingEncryption
        switch role {
        case .responder:
            return [send(SMPPDU.pairingDHKeyCheck(dhKeyCheck: localCheckValue()).bytes)]
        case .initiator:
            return [.startEncryption(ltk: encryptionKey ?? [], ediv: 0, rand: [UInt8](repeating: 0, count: 8))]
        }
    }

    // MARK: Phase 3: key distribution (Vol 3 Part H 3.6.1)

    /// What each side distributes, as agreed in the Pairing Response. In SC the LTK is derived, not
    /// distributed (EncKey ignored); LinkKey (cross-transport derivation) is not supported.
    private func agreedKeys(initiator: Bool) -> SMPKeyDistribution {
        guard let res = response else { return [] }
        var keys = (initiator ? res.initiatorKeyDistribution : res.responderKeyDistribution).intersection([.encKey, .idKey, .signKey])
        if secureConnections { keys.remove(.encKey) }
        return keys
    }

    private func startKeyDistribution() -> [SMPOutput] {
        if secureConnections {
            localKeys.ltk = encryptionKey
            peerKeys.ltk = encryptionKey
        }
        let peerDistributes = agreedKeys(initiator: role == .responder)
        expectedKeyPDUs = []
        if peerDistributes.contains(.encKey) {
            expectedKeyPDUs += [SMPPDU.Code.encryptionInformation, SMPPDU.Code.centralIdentification]
        }
        if peerDistributes.contains(.idKey) {
            expectedKeyPDUs += [SMPPDU.Code.identityInformation, SMPPDU.Code.identityAddressInformation]
        }
        if peerDistributes.contains(.signKey) { expectedKeyPDUs.append(SMPPDU.Code.signingInformation) }
        // The responder distributes first.
        var out = role == .responder ? distributeOurKeys() : []
        if expectedKeyPDUs.isEmpty {
            if let extra = earlyKeyPDUs.first { return out + unexpected(extra) }
            if role == .initiator { out += distributeOurKeys() }
            return out + complete()
        }
        state = .distributingKeys
        deadline = now() + configuration.timeout
        let early = earlyKeyPDUs
        earlyKeyPDUs = []
        for pdu in early where !isFinished {
            out += expectedKeyPDUs.first == pdu.code ? keyReceived(pdu) : unexpected(pdu)
        }
        return out
    }

    private func distributeOurKeys() -> [SMPOutput] {
        let keys = agreedKeys(initiator: role == .initiator)
        var out: [SMPOutput] = []
        if keys.contains(.encKey) {
            let ltk = SMPCrypto.mask(random(16), toSize: keySize)
            let ediv = random(2), rand = random(8)
            localKeys.ltk = ltk
            localKeys.ediv = UInt16(ediv[0]) | UInt16(ediv[1]) << 8
            localKeys.rand = rand
            out.append(send(SMPPDU.encryptionInformation(longTermKey: ltk).bytes))
            out.append(send(SMPPDU.centralIdentification(ediv: localKeys.ediv, rand: Self.uint64(rand)).bytes))
        }
        if keys.contains(.idKey), let id = configuration.localIdentity {
            localKeys.irk = id.irk
            localKeys.identityAddress = id.address
            out.append(send(SMPPDU.identityInformation(identityResolvingKey: id.irk).bytes))
            out.append(send(SMPPDU.identityAddressInformation(addrType: id.address.type.isRandom ? 1 : 0, bdAddr: id.address.address).bytes))
        }
        if keys.contains(.signKey) {
            let csrk = random(16)
            localKeys.csrk = csrk
            out.append(send(SMPPDU.signingInformation(signatureKey: csrk).bytes))
        }
        return out
    }

    private func keyReceived(_ pdu: SMPPDU) -> [SMPOutput] {
        switch pdu {
        case .encryptionInformation(let ltk): peerKeys.ltk = SMPCrypto.mask(ltk, toSize: keySize)
        case .centralIdentification(let ediv, let rand):
            peerKeys.ediv = ediv
            peerKeys.rand = (0..<8).map { UInt8(truncatingIfNeeded: rand >> (8 * UInt64($0))) }
        case .identityInformation(let irk): peerKeys.irk = irk
        case .identityAddressInformation(let type, let address):
            // An identity address is public or random static (Vol 3 Part H 3.6.5).
            guard type == 0 || (type == 1 && address.isRandomStatic) else {
                return fail(.invalidParameters, "identity address \(address) type \(type) is neither public nor static random")
            }
            peerKeys.identityAddress = DeviceAddress(address, type: type == 0 ? .public : .random)
        case .signingInformation(let csrk): peerKeys.csrk = csrk
        default: return unexpected(pdu)
        }
        expectedKeyPDUs.removeFirst()
        guard expectedKeyPDUs.isEmpty else { return [] }
        let out = role == .initiator ? distributeOurKeys() : []
        return out + complete()
    }

    private static func uint64(_ bytes: [UInt8]) -> UInt64 {
        bytes.prefix(8).enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
    }

    private func complete() -> [SMPOutput] {
        guard let req = request, let res = response, let method else { return [] }
        state = .completed
        deadline = nil
        attempts?.recordSuccess(attemptsKey)
        let result = SMPPairingResult(
            method: method, secureConnections: secureConnections, authenticated: method != .justWorks,
            bonding: req.authReq.bonding && res.authReq.bonding, keySize: keySize, debugKey: debugKey,
            local: localKeys, peer: peerKeys)
        return [.completed(result)]
    }

    // MARK: Sending and failing

    /// A PDU to send; queuing it restarts the SMP timer (Vol 3 Part H 3.4).
    private func send(_ bytes: [UInt8]) -> SMPOutput {
        deadline = now() + configuration.timeout
        return .send(bytes)
    }

    private func unexpected(_ pdu: SMPPDU) -> [SMPOutput] {
        fail(.unspecifiedReason, "unexpected \(pdu.name) in state \(state)")
    }

    private func fail(_ reason: SMPPairingFailedReason, _ why: String, send: Bool = true, remote: Bool = false) -> [SMPOutput] {
        state = .failed
        failure = why
        deadline = nil
        // Nothing of a failed pairing survives.
        tk = nil; dhKey = []; macKey = []; encryptionKey = nil
        localKeys = SMPKeys(); peerKeys = SMPKeys()
        // Only what we detected ourselves counts as a failed attempt of the peer (Vol 3 Part H 2.3.6).
        if !remote && (reason == .confirmValueFailed || reason == .dhKeyCheckFailed) {
            attempts?.recordFailure(attemptsKey, now: now())
        }
        var out: [SMPOutput] = []
        if send { out.append(.send(SMPPDU.pairingFailed(reason: reason).bytes)) }
        out.append(.failed(reason, remote: remote))
        return out
    }
}
