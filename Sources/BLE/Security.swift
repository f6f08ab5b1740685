import Synchronization
#if canImport(Glibc)
import Glibc
#endif
import HCI
import Host
import L2CAP
import ATT
import GATT
import SMP

/// Security settings of a `Central` or `Peripheral` (CLI.md "Security (SMP) options").
public struct SecurityConfiguration: Sendable {
    /// IO capability, MITM, bonding, Secure Connections, key sizes, fixed passkey, OOB data.
    public var smp = SMPConfiguration()
    /// The P-256 key pair every Secure Connections pairing uses, when our OOB data was handed out
    /// before (`SMPOOBData.local(keyPair:)`: its confirm value covers this public key, Core v5.4
    /// Vol 3 Part H 2.3.5.6.4). Nil: a fresh key pair per pairing (2.3.5.6.1).
    public var oobKeyPair: SMPKeyPair?
    /// Where bonds live (one file per local identity address); nil keeps no bonds.
    public var bondDirectory: String?
    /// Peripheral: send a Security Request to every central once connected.
    public var requestSecurityOnConnect = false
    /// Central: encrypt from the bond as soon as a bonded peripheral is connected.
    public var encryptBondedLinks = true
    /// Central: on an ATT Insufficient Authentication / Insufficient Encryption answer, encrypt
    /// (bond) or pair, then retry the request once (as CoreBluetooth does).
    public var automaticSecurity = true
    /// How long the encryption procedure may take (pairing itself is bounded by the SMP timeout).
    public var encryptionTimeout: Duration = .seconds(10)
    /// Hears each bond-store error (a bond file that cannot be read or written, a bond not
    /// stored), besides the log: the application can name the file and what to do.
    public var bondStoreProblem: (@Sendable (SMPBondStoreError) -> Void)?
    public init() {}
}

/// What happened to a link's security, for the application (CLI.md JSON events).
public enum SecurityEvent: Sendable, Equatable {
    /// Pairing shows something to the user: a passkey to type on the peer, or a number to compare.
    case pairing(method: SMPMethod, passkey: UInt32?, number: UInt32?)
    /// Pairing completed (the link is encrypted with the new key).
    case paired(PairingSummary)
    /// The link was encrypted with a stored bond's key.
    case encrypted(keySize: Int, bonded: Bool, authenticated: Bool)
    /// Pairing failed (sent or received Pairing Failed, or the SMP timeout).
    case pairingFailed(SMPPairingFailedReason, remote: Bool)
    /// Encryption did not start: PIN or Key Missing (0x06) means the peer lost its bond.
    case encryptionFailed(HCIStatus)
    /// This side refused the peer's encryption (a peripheral with no key for the central's LE
    /// Long Term Key Request answers it negatively, Core v5.4 Vol 6 Part B 5.1.3.1, and the
    /// central sees PIN or Key Missing 0x06): `reason` says which key was missing.
    case encryptionRefused(reason: String)
}

public struct PairingSummary: Sendable, Equatable {
    public var method: SMPMethod
    public var secureConnections: Bool
    /// MITM protection (authenticated key).
    public var authenticated: Bool
    /// The keys were stored.
    public var bonded: Bool
    public var keySize: Int
}

/// Answers the user-facing steps of pairing. Every method may take as long as the user needs,
/// within the SMP timeout (30 s).
public protocol PairingDelegate: Sendable {
    /// Passkey Entry with a keyboard: the 6-digit passkey the peer displays (nil = cancel).
    func enterPasskey(peer: DeviceAddress) async -> UInt32?
    /// Numeric Comparison: does the peer show `number`?
    func confirmNumber(_ number: UInt32, peer: DeviceAddress) async -> Bool
    /// Every security event of every link (passkeys to display arrive as `.pairing`).
    func securityEvent(_ event: SecurityEvent, peer: DeviceAddress)
}

extension PairingDelegate {
    public func securityEvent(_ event: SecurityEvent, peer: DeviceAddress) {}
}

/// The security manager of one link: owns the SMP pairing in progress (one `SMPPairing` per
/// pairing), its timer, the link's encryption state and the ATT bearer's security level.
/// SMP PDUs (L2CAP CID 6) and HCI encryption events are fed to it in order.
/// Plain state owned by the link's `L2CAPConnection` (its fixed channel 0x0006), inside the
/// host's isolation like the link's `ATTBearer`: each SMP PDU is handled synchronously as the
/// host receives it, its answers are queued with `Host.enqueueL2CAP`, the link's HCI events
/// reach it in order with its frames (`linkEvent`), and the SMP timer is a deadline in the
/// host's table. The
/// only async edges are the pairing delegate's answers (passkey, numeric comparison) and the
/// HCI commands that start encryption or answer an LTK request.
final class LinkSecurity: L2CAPFixedChannel {
    let connection: LEConnection
    /// The host's clock (the one its deadline table sweeps by).
    private let clock: any DeadlineClock
    private let bearer: ATTBearer
    private let configuration: SecurityConfiguration
    /// Nil until the bond directory exists (it is created by the first bond stored).
    private var bonds: SMPBondStore?
    private let delegate: (any PairingDelegate)?
    /// Repeated-attempts protection, shared by every link of the stack (Core Vol 3 Part H 2.3.6).
    private let attempts: SMPAttemptTracker
    private let log: (@Sendable (String) -> Void)?
    /// Told of each bond stored, in the host's isolation (the stack puts the peer in the
    /// controller's resolving list before the host handles its next event).
    private let bonded: (@Sendable (SMPBond, isolated Host) -> Void)?

    private var pairing: SMPPairing?
    /// The responder's pairing has only sent Security Request: the central may still answer by
    /// encrypting with a bond instead of pairing.
    private var requestOnly = false
    /// The SMP timer (Core Vol 3 Part H 3.4): a deadline in the host's table.
    private var timer: DeadlineID?
    /// After an SMP timeout no more SMP on this link (Core Vol 3 Part H 3.4).
    private var smpClosed = false
    /// Pairing waits for Encryption Change; SMP PDUs that overtake it wait here.
    private var encryptionPending = false
    private var held: [[UInt8]] = []
    /// Pairing Request / Response seen, for the key size between encryption and completion.
    private var offeredKeySizes: [UInt8] = []
    /// The bond whose key encrypts (or is about to encrypt) the link.
    private var bondInUse: SMPBond?
    private(set) var state = ATTSecurity.none
    private(set) var lastPairing: PairingSummary?
    private var waiters: [CheckedContinuation<ATTSecurity, any Error>] = []
    private var down: HCIStatus?
    /// The security the link has once the encryption being started succeeds: handed to the ATT
    /// bearer at the Encryption Change, synchronously (before the peer's next PDU).
    private var expected: ATTSecurity?

    init(connection: LEConnection, clock: any DeadlineClock, bearer: ATTBearer,
         configuration: SecurityConfiguration, bonds: SMPBondStore?, delegate: (any PairingDelegate)?,
         attempts: SMPAttemptTracker, log: (@Sendable (String) -> Void)?, bonded: (@Sendable (SMPBond, isolated Host) -> Void)? = nil) {
        self.attempts = attempts
        self.bonded = bonded
        self.connection = connection
        self.clock = clock
        self.bearer = bearer
        self.configuration = configuration
        self.bonds = bonds
        self.delegate = delegate
        self.log = log
    }

    /// Queues an SMP PDU behind what the host already queued on the link, in the order the
    /// engine produced it.
    private func send(_ pdu: [UInt8], host: isolated Host) {
        guard down == nil else { return }
        let frame = L2CAPFrame(cid: .smp, payload: pdu).bytes, handle = connection.handle
        do {
            try host.enqueueL2CAP(frame, on: handle, kind: .control)
        } catch {
            log?("SMP PDU 0x\(hexCode(pdu.first ?? 0, digits: 2)) not sent: \(error)")
        }
    }

    private var now: ContinuousClock.Instant { clock.now }

    /// An SMP PDU on CID 6 (the link's one receive path, in arrival order).
    func received(_ payload: ByteReader, host: isolated Host) {
        var r = payload
        received(r.rest(), host: host)
    }

    /// The link's HCI events, in controller order with its frames: Encryption Change / Key
    /// Refresh Complete is handled before the ACL data that follows it (the peer's key
    /// distribution, its ATT requests), so SMP PDUs see the encryption they were sent under.
    func linkEvent(_ event: HostLinkEvent, host: isolated Host) {
        switch event {
        case let .encryptionChanged(enabled, status):
            if enabled, let s = expected { bearer.setSecurity(s) }
            encryptionChanged(enabled: enabled, status: status, host: host)
        case let .longTermKeyRequest(random, ediv):
            longTermKeyRequested(ediv: ediv, rand: random, host: host)
        case .disconnected(let reason):
            linkDown(reason, host: host)
        }
    }

    private func expect(_ s: ATTSecurity) {
        var s = s
        s.keyAvailable = keyAvailable
        expected = s
    }

    /// What a pairing's key gives before its completion confirms it: every method but Just Works
    /// is authenticated (Core Vol 3 Part H 2.3.5.1); the key size is the smaller maximum offered.
    private func provisional(_ p: SMPPairing) -> ATTSecurity {
        ATTSecurity(encrypted: true, authenticated: p.method.map { $0 != .justWorks } ?? false,
                    keySize: Int(offeredKeySizes.min() ?? 16))
    }

    /// Whether this side's IO capability allows an authenticated (MITM) pairing at all.
    var canAuthenticate: Bool { configuration.smp.ioCapability != .noInputNoOutput }

    private var role: SMPRole { connection.role == .central ? .initiator : .responder }

    private func event(_ e: SecurityEvent) { delegate?.securityEvent(e, peer: connection.peer) }

    // MARK: Bonds

    /// The stored bond with this peer (by address, or by resolving its RPA with bonded IRKs).
    private func storedBond() -> SMPBond? {
        guard let bonds else { return nil }
        do {
            if let b = try bonds.bond(for: connection.peer) { return b }
            if connection.peer.type == .random, connection.peer.address.isResolvablePrivate {
                return try bonds.resolve(connection.peer.address)
            }
        } catch {
            bondStoreFailed(error)
        }
        return nil
    }

    /// A bond-store error: logged, and told to the application.
    private func bondStoreFailed(_ error: any Error) {
        log?("bond store: \(error)")
        if let e = error as? SMPBondStoreError { configuration.bondStoreProblem?(e) }
    }

    /// Whether this side holds a bond with the peer (the server answers 0x0F rather than 0x05).
    func hasBond() -> Bool { storedBond() != nil }

    /// Whether a signed write can be made: the bond holds the CSRK we distributed.
    var canSign: Bool { storedBond()?.localCSRK != nil }

    /// The Authentication Signature of `message` with our CSRK and the next SignCounter, which is
    /// stored before the signature leaves (a counter is never used twice, Vol 3 Part H 2.4.5).
    func sign(_ message: [UInt8]) throws -> [UInt8] {
        guard let bonds, var bond = storedBond(), let csrk = bond.localCSRK else {
            throw BLEError.securityFailed("no CSRK bonded with \(connection.peer) to sign with")
        }
        let counter = bond.localSignCounter
        guard counter < UInt32.max else { throw BLEError.securityFailed("SignCounter exhausted: pair again") }
        bond.localSignCounter = counter + 1
        try bonds.save(bond, allowDowngrade: true)
        return SMPCrypto.signature(csrk: csrk, message: message, signCounter: counter)
    }
    private var keyAvailable = false
    /// How many times the waiters were resolved, and the last outcome (`wait(since:)`).
    private var resolutions: UInt64 = 0
    private var lastResolution: Result<ATTSecurity, any Error>?

    /// Called once when the link is set up: the server learns whether a bond exists.
    func prepare() {
        keyAvailable = hasBond()
        if keyAvailable { bearer.setSecurity(ATTSecurity(keyAvailable: true)) }
    }

    // MARK: Procedures the application starts

    /// Central: encrypts from the bond, or pairs (always pairs with `force`). Peripheral: sends a
    /// Security Request and waits for the central to pair or encrypt. Returns the new security.
    func secure(force: Bool = false, mitm: Bool = false, host: isolated Host) async throws -> ATTSecurity {
        if let down { throw BLEError.disconnected(down) }
        let seen = resolutions
        let pairingInProgress = pairing.map { !$0.isFinished } ?? false
        if state.encrypted && !force && (!mitm || state.authenticated) && !pairingInProgress { return state }
        // A peripheral that has just answered the central's LTK request from a bond waits for
        // that encryption rather than sending a Security Request over it (which would start a
        // pairing and forget the bond the link is being encrypted with).
        let encryptingFromBond = role == .responder && bondInUse != nil && !state.encrypted
        if !pairingInProgress, !encryptionPending, !encryptingFromBond {
            if smpClosed { throw BLEError.securityFailed("SMP timed out earlier on this link: no more pairing on it (Core Vol 3 Part H 3.4)") }
            if role == .initiator, !force, let bond = storedBond(), !mitm || bond.authenticated {
                startEncryption(with: bond, host: host)
            } else {
                startPairing(mitm: mitm, host: host)
            }
        }
        return try await wait(since: seen)
    }

    /// Waits for the outcome of the procedure under way; at once with it when it came after
    /// `seen` was read (an await lets the host's other jobs run before the waiter is parked).
    private nonisolated(nonsending) func wait(since seen: UInt64) async throws -> ATTSecurity {
        try await withCheckedThrowingContinuation { c in
            if resolutions != seen, let r = lastResolution { c.resume(with: r) } else { waiters.append(c) }
        }
    }

    /// Waits until a pairing or encryption in progress ends (at once when none is); a failure
    /// was already reported to the delegate.
    nonisolated(nonsending) func settle() async {
        guard down == nil, encryptionPending || (pairing.map { !$0.isFinished } ?? false) && !requestOnly else { return }
        _ = try? await wait(since: resolutions)
    }

    private func startPairing(mitm: Bool = false, host: isolated Host) {
        var smp = configuration.smp
        if mitm { smp.mitm = true }
        let p = SMPPairing(role: role, configuration: smp, local: connection.local, peer: connection.peer,
                           keyPair: configuration.oobKeyPair, attempts: attempts, peerIdentity: storedBond()?.peer,
                               now: { [clock] in clock.now })
        pairing = p
        offeredKeySizes = []
        bondInUse = nil
        requestOnly = role == .responder
        run(p.start(), host: host)
    }

    private func startEncryption(with bond: SMPBond, host: isolated Host) {
        bondInUse = bond
        expect(ATTSecurity(encrypted: true, authenticated: bond.authenticated, keySize: bond.keySize))
        encrypt(ltk: bond.ltk, ediv: bond.ediv, rand: bond.rand, host: host)
    }

    /// HCI LE Enable Encryption; the outcome arrives as an Encryption Change event. Failures that
    /// produce no event (command refused, timeout) are handled here.
    private func encrypt(ltk: [UInt8], ediv: UInt16, rand: [UInt8], host: isolated Host) {
        encryptionPending = true
        let handle = connection.handle, timeout = configuration.encryptionTimeout
        let random = rand.prefix(8).enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        host.spawn {
            do {
                try await host.startEncryption(handle: handle, ltk: ltk, ediv: ediv, rand: random, timeout: timeout)
            } catch HostError.encryptionFailed {
                // Reported by the Encryption Change event itself.
            } catch {
                self.encryptionProcedureFailed(error, host: host)
            }
        }
    }

    private func encryptionProcedureFailed(_ error: any Error, host: isolated Host) {
        guard encryptionPending else { return }
        encryptionPending = false
        log?("encryption of \(hexCode(connection.handle, digits: 4)): \(error)")
        if let p = pairing, !p.isFinished {
            run(p.encryptionChanged(enabled: false, status: (error as? HCIError)?.status.rawValue ?? HCIStatus.unspecifiedError.rawValue), host: host)
        } else {
            bondInUse = nil
            if case HostError.disconnected(_, let reason) = error {
                resolveWaiters(.failure(BLEError.disconnected(reason)))
            } else {
                resolveWaiters(.failure(error))
            }
        }
    }

    // MARK: Input

    /// One SMP PDU, in arrival order. PDUs that arrived before a disconnection are still
    /// processed after it, so key distribution that completed on air completes here too.
    private func received(_ pdu: [UInt8], host: isolated Host) {
        guard !smpClosed, let code = pdu.first else { return }
        if down != nil, pairing?.isFinished ?? true { return }
        if encryptionPending {
            // Key distribution is a handful of PDUs; a peer flooding more is not waited for.
            if held.count < 16 { held.append(pdu) } else { log?("SMP PDU dropped while waiting for Encryption Change") }
            return
        }
        if let p = pairing, !p.isFinished {
            noteParameters(pdu)
            run(p.receive(pdu), host: host)
            return
        }
        switch (role, code) {
        case (.responder, SMPPDU.Code.pairingRequest):
            let p = SMPPairing(role: .responder, configuration: configuration.smp, local: connection.local, peer: connection.peer,
                               keyPair: configuration.oobKeyPair, attempts: attempts, peerIdentity: storedBond()?.peer,
                               now: { [clock] in clock.now })
            pairing = p
            offeredKeySizes = []
            noteParameters(pdu)
            run(p.receive(pdu), host: host)
        case (.initiator, SMPPDU.Code.securityRequest):
            guard case .securityRequest(let authReq)? = try? SMPPDU.decode(pdu) else {
                send(SMPPDU.pairingFailed(reason: .invalidParameters).bytes, host: host)
                return
            }
            securityRequested(authReq, host: host)
        case (.responder, SMPPDU.Code.securityRequest), (.initiator, SMPPDU.Code.pairingRequest):
            // Only a peripheral sends Security Request, only a central Pairing Request.
            send(SMPPDU.pairingFailed(reason: .commandNotSupported).bytes, host: host)
        default:
            break  // nothing in progress: late or stray PDUs are ignored
        }
    }

    /// A peripheral's Security Request (Core Vol 3 Part H 2.4.6): encrypt with a bond good
    /// enough for what it asks, otherwise pair.
    private func securityRequested(_ authReq: SMPAuthReq, host: isolated Host) {
        guard !encryptionPending, pairing?.isFinished ?? true else { return }
        if state.encrypted && (!authReq.mitm || state.authenticated) { return }
        if let bond = storedBond(), !authReq.mitm || bond.authenticated {
            startEncryption(with: bond, host: host)
        } else {
            startPairing(mitm: authReq.mitm, host: host)
        }
    }

    private func noteParameters(_ pdu: [UInt8]) {
        if pdu.first == SMPPDU.Code.pairingRequest { requestOnly = false }
        switch try? SMPPDU.decode(pdu) {
        case .pairingRequest(let p)?, .pairingResponse(let p)?: offeredKeySizes.append(p.maxEncryptionKeySize)
        default: break
        }
    }

    /// Encryption Change / Key Refresh Complete for this link.
    func encryptionChanged(enabled: Bool, status: HCIStatus, host: isolated Host) {
        let wasPending = encryptionPending
        encryptionPending = false
        if let p = pairing, !p.isFinished, !requestOnly, wasPending || role == .responder {
            if enabled {
                // Encrypted with the pairing's key: the server must grant what it protects before
                // key distribution ends (the peer may send ATT requests meanwhile). Every method
                // but Just Works is authenticated (Core Vol 3 Part H 2.3.5.1); the completion confirms.
                setState(provisional(p))
            }
            run(p.encryptionChanged(enabled: enabled, status: status.rawValue), host: host)
            drainHeld(host: host)
            return
        }
        if enabled {
            let bond = bondInUse
            setState(ATTSecurity(encrypted: true, authenticated: bond?.authenticated ?? state.authenticated,
                                 keySize: bond?.keySize ?? max(state.keySize, 7)))
            event(.encrypted(keySize: state.keySize, bonded: bond != nil, authenticated: state.authenticated))
            if requestOnly {
                // The central answered our Security Request with its bond: nothing to pair.
                requestOnly = false
                pairing = nil
                armTimer(host: host)
            }
            resolveWaiters(.success(state))
        } else {
            bondInUse = nil
            if !status.isSuccess {
                event(.encryptionFailed(status))
                resolveWaiters(.failure(BLEError.encryptionFailed(status)))
            } else {
                setState(.none)
            }
        }
        drainHeld(host: host)
    }

    private func drainHeld(host: isolated Host) {
        let pending = held
        held = []
        for pdu in pending { received(pdu, host: host) }
    }

    /// LE Long Term Key Request (peripheral): the pairing's key while pairing, otherwise the
    /// bond's key by EDIV/Rand (SC bonds: EDIV 0, Rand 0, found by peer); none → negative reply.
    func longTermKeyRequested(ediv: UInt16, rand: UInt64, host: isolated Host) {
        let randBytes = (0..<8).map { UInt8(truncatingIfNeeded: rand >> (8 * UInt64($0))) }
        var key: [UInt8]?
        if let p = pairing, !p.isFinished, !requestOnly {
            key = p.longTermKeyRequested(ediv: ediv, rand: randBytes)
            if key != nil { expect(provisional(p)) }
        } else {
            var bond: SMPBond?
            do {
                if ediv == 0 && rand == 0 {
                    bond = storedBond().flatMap { $0.secureConnections ? $0 : nil }
                } else {
                    bond = try bonds?.bond(ediv: ediv, rand: randBytes)
                }
            } catch {
                bondStoreFailed(error)
            }
            bondInUse = bond
            key = bond?.ltk
            if let bond { expect(ATTSecurity(encrypted: true, authenticated: bond.authenticated, keySize: bond.keySize)) }
            if bond == nil {
                let reason = ediv == 0 && rand == 0
                    ? "no Secure Connections bond with \(connection.peer)"
                    : "no bond with EDIV \(hexCode(ediv, digits: 4)) and this Rand (a legacy key we never distributed or no longer hold)"
                log?("LTK request on \(hexCode(connection.handle, digits: 4)): \(reason): negative reply")
                event(.encryptionRefused(reason: reason))
            }
        }
        let handle = connection.handle
        host.spawn {
            do { try await host.replyLongTermKey(handle: handle, ltk: key) } catch { self.logError("LTK reply: \(error)") }
        }
    }

    private func logError(_ s: String) { log?(s) }

    func answerPasskey(_ passkey: UInt32?, host: isolated Host) {
        guard let p = pairing, !p.isFinished else { return }
        run(p.passkeyEntered(passkey), host: host)
    }

    func answerComparison(_ accepted: Bool, host: isolated Host) {
        guard let p = pairing, !p.isFinished else { return }
        run(p.numericComparisonAnswered(accepted), host: host)
    }

    func linkDown(_ reason: HCIStatus, host: isolated Host) {
        down = reason
        disarmTimer(host: host)
        resolveWaiters(.failure(BLEError.disconnected(reason)))
    }

    private func timedOut(host: isolated Host) {
        timer = nil
        guard let p = pairing, !p.isFinished, let deadline = p.deadline, deadline <= now else {
            armTimer(host: host)
            return
        }
        smpClosed = true
        run(p.timedOut(), host: host)
    }

    // MARK: Outputs

    private func run(_ outputs: [SMPOutput], host: isolated Host) {
        for output in outputs {
            switch output {
            case .send(let pdu):
                noteParameters(pdu)
                send(pdu, host: host)
            case .user(let request):
                userRequest(request, host: host)
            case let .startEncryption(ltk, ediv, rand):
                if let p = pairing { expect(provisional(p)) }
                encrypt(ltk: ltk, ediv: ediv, rand: rand, host: host)
            case .completed(let result):
                completed(result, host: host)
            case let .failed(reason, remote):
                event(.pairingFailed(reason, remote: remote))
                resolveWaiters(.failure(BLEError.pairingFailed(reason, remote: remote)))
            case .securityRequested(let authReq):
                securityRequested(authReq, host: host)
            }
        }
        armTimer(host: host)
    }

    private func userRequest(_ request: SMPUserRequest, host: isolated Host) {
        let peer = connection.peer, delegate = self.delegate
        switch request {
        case .displayPasskey(let passkey):
            event(.pairing(method: .passkeyEntry, passkey: passkey, number: nil))
        case .enterPasskey:
            event(.pairing(method: .passkeyEntry, passkey: nil, number: nil))
            host.spawn {
                let passkey = await delegate?.enterPasskey(peer: peer)
                self.answerPasskey(passkey, host: host)
            }
        case .confirmNumber(let number):
            event(.pairing(method: .numericComparison, passkey: nil, number: number))
            host.spawn {
                let accepted = await delegate?.confirmNumber(number, peer: peer) ?? false
                self.answerComparison(accepted, host: host)
            }
        }
    }

    /// The file is written after `save` returns: a write that fails is told to the application
    /// too (waited for off the host's loop).
    private func reportWriteFailure(of store: SMPBondStore) {
        guard let problem = configuration.bondStoreProblem else { return }
        Task.detached {
            do { try await store.flushed() } catch { if let e = error as? SMPBondStoreError { problem(e) } }
        }
    }

    private func completed(_ result: SMPPairingResult, host: isolated Host) {
        var bonded = false
        if bonds == nil, let dir = configuration.bondDirectory {
            bonds = BondStores.store(directory: dir, localIdentity: connection.local, create: true, log: log,
                                     problem: configuration.bondStoreProblem)
        }
        if result.bonding, !result.debugKey, configuration.smp.bonding, let bonds,
           let bond = SMPBond(result: result, role: role, peerAddress: connection.peer) {
            if let identity = bond.distributedIdentity {
                log?("\(connection.peer) distributed the identity address \(identity) but paired from its own \(connection.peer): the bond is kept under \(connection.peer) and found by either")
            }
            do {
                try bonds.save(bond)
                bonded = true
                keyAvailable = true
                reportWriteFailure(of: bonds)
                self.bonded?(bond, host)
            } catch {
                log?("the bond with \(connection.peer) was not stored: \(error)")
                if let e = error as? SMPBondStoreError { configuration.bondStoreProblem?(e) }
            }
        }
        let summary = PairingSummary(method: result.method, secureConnections: result.secureConnections,
                                     authenticated: result.authenticated, bonded: bonded, keySize: result.keySize)
        lastPairing = summary
        setState(ATTSecurity(encrypted: true, authenticated: result.authenticated, keySize: result.keySize))
        event(.paired(summary))
        resolveWaiters(.success(state))
    }

    private func setState(_ new: ATTSecurity) {
        var s = new
        s.keyAvailable = keyAvailable
        state = s
        bearer.setSecurity(s)
    }

    private func resolveWaiters(_ result: Result<ATTSecurity, any Error>) {
        resolutions &+= 1
        lastResolution = result
        let ws = waiters
        waiters = []
        for w in ws { w.resume(with: result) }
    }

    /// (Re)arms the SMP timer at the pairing's deadline in the host's table.
    private func armTimer(host: isolated Host) {
        disarmTimer(host: host)
        guard down == nil, let p = pairing, !p.isFinished, let deadline = p.deadline else { return }
        let after = now.duration(to: deadline)
        timer = host.arm(after: after) { self.timedOut(host: host) }
    }

    private func disarmTimer(host: isolated Host) {
        guard let t = timer else { return }
        timer = nil
        host.disarm(t)
    }
}

/// One `SMPBondStore` per file in the process, so every link (and stack) serialises its
/// writes to a file through the same store.
/// The GATT server's check of Signed Write Commands: the CSRK the peer distributed to us, in
/// its bond (found by address, or by resolving an RPA with the bond's IRK). `signCounter` in the
/// bond is the lowest SignCounter still accepted: a smaller one is a replay and is ignored (Core
/// Vol 3 Part H 2.4.5); an accepted one moves it past itself, stored before the write happens.
final class BondedSignedWrites: GATTSignedWriteVerifier {
    let bonds: @Sendable () -> SMPBondStore?
    let log: (@Sendable (String) -> Void)?
    /// One verification at a time: the counter's read-check-store is not interleaved.
    private let serial = Mutex(())

    init(bonds: @escaping @Sendable () -> SMPBondStore?, log: (@Sendable (String) -> Void)?) {
        self.bonds = bonds
        self.log = log
    }

    func verify(peer: ATTPeer, message: [UInt8], signature: [UInt8]) -> ATTSecurity? {
        serial.withLock { _ in
            guard signature.count == 12, let text = peer.address, let address = BDAddress(string: text),
                  let store = bonds(), let all = try? store.bonds(),
                  var bond = all.first(where: { $0.peer.address == address })
                    ?? (address.isResolvablePrivate ? all.first { $0.peerIRK.map { SMPPrivacy.resolves(address, irk: $0) } ?? false } : nil),
                  let csrk = bond.peerCSRK else {
                log?("Signed Write Command from \(peer) ignored: no CSRK bonded with it")
                return nil
            }
            let counter = signature[0..<4].enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * UInt32($1.offset)) }
            guard counter >= bond.signCounter else {
                log?("Signed Write Command from \(peer) ignored: SignCounter \(counter) already used (replay)")
                return nil
            }
            guard SMPCrypto.signature(csrk: csrk, message: message, signCounter: counter) == signature else {
                log?("Signed Write Command from \(peer) ignored: wrong Authentication Signature")
                return nil
            }
            bond.signCounter = counter == UInt32.max ? counter : counter + 1
            do { try store.save(bond, allowDowngrade: true) } catch {
                log?("Signed Write Command from \(peer) ignored: the SignCounter could not be stored: \(error)")
                return nil
            }
            return ATTSecurity(encrypted: true, authenticated: bond.authenticated, keySize: bond.keySize)
        }
    }
}

enum BondStores {
    private static let stores = Mutex<[String: SMPBondStore]>([:])

    /// Makes `store` the process's store of its file (tests: one whose writer they hold).
    static func adopt(_ store: SMPBondStore, directory: String) {
        stores.withLock { $0[directory + "\u{0}" + store.localIdentity.description] = store }
    }

    /// Waits until every store of the process has written what was saved (off the host's loop).
    static func flushAll(log: (@Sendable (String) -> Void)?) async {
        for store in stores.withLock({ Array($0.values) }) {
            do { try await store.flushed() } catch { log?("bond store: \(error)") }
        }
    }

    /// The store of `localIdentity` in `directory`; without `create`, nil while the directory
    /// doesn't exist (no bonds yet: it is made when the first bond is stored).
    static func store(directory: String, localIdentity: DeviceAddress, create: Bool,
                      log: (@Sendable (String) -> Void)?,
                      problem: (@Sendable (SMPBondStoreError) -> Void)? = nil) -> SMPBondStore? {
        stores.withLock { stores in
            let key = directory + "\u{0}" + localIdentity.description
            if let s = stores[key] { return s }
            guard create || access(directory, F_OK) == 0 else { return nil }
            do {
                // A write fails after the save that caused it has returned: said in the log.
                let s = try SMPBondStore(directory: directory, localIdentity: localIdentity,
                                         writeFailed: { log?("bond store: \($0): the bonds saved since are kept in memory only") })
                stores[key] = s
                return s
            } catch {
                log?("bond store in \(directory): \(error)")
                if let e = error as? SMPBondStoreError { problem?(e) }
                return nil
            }
        }
    }
}

/// The GATT client's requester on a central: an Insufficient Authentication / Insufficient
/// Encryption answer makes the link encrypt (bond) or pair, then the request is sent once more.
/// Runs where the client does (the host's isolation).
final class SecuringRequester: ATTRequester {
    let bearer: ATTBearers
    let security: LinkSecurity
    let connection: LEConnection
    let host: Host

    init(bearers: ATTBearers, security: LinkSecurity, connection: LEConnection, host: Host) {
        self.bearer = bearers
        self.security = security
        self.connection = connection
        self.host = host
    }

    var mtu: Int { bearer.mtu }

    nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        do {
            return try await bearer.request(pdu)
        } catch {
            return try await recover(pdu, from: error)
        }
    }

    func begin(_ pdu: ATTPDU) throws -> ATTBearer.Transaction? { try bearer.beginRequest(pdu) }

    nonisolated(nonsending) func recover(_ pdu: ATTPDU, from error: any Error) async throws -> ATTPDU {
        switch error {
        case let errorResponse as ATTError
                where errorResponse.code == .insufficientAuthentication || errorResponse.code == .insufficientEncryption:
            // Encrypted but not authenticated: only a MITM pairing can help, which needs IO.
            let mitm = errorResponse.code == .insufficientAuthentication && security.state.encrypted
            if mitm && !security.canAuthenticate { throw errorResponse }
            let connection = connection
            do {
                _ = try await host.run { host in
                    try await Link.layers(of: connection, on: host).security.secure(force: mitm, mitm: mitm, host: host)
                }
            } catch {
                // The cause went to the pairing delegate; the request's own answer stands.
                throw errorResponse
            }
            return try await bearer.request(pdu)
        default:
            throw error
        }
    }

    nonisolated(nonsending) func command(_ pdu: ATTPDU) async throws { try await bearer.command(pdu) }
}
