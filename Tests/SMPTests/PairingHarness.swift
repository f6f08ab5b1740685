import Testing
import HCI
@testable import SMP

let centralAddress = DeviceAddress(BDAddress(be("A1A2A3A4A5A6")), type: .random)
let peripheralAddress = DeviceAddress(BDAddress(be("B1B2B3B4B5B6")), type: .public)

/// Two SMPPairing objects on one simulated link: PDUs go across in order, the "user" types what
/// the other side displays (or `typedPasskey` when both sides must type), answers numeric
/// comparison with `acceptNumbers`, and the controllers' encryption is simulated as the spec's
/// LL procedure would run it (LTK request on the responder, Encryption Change on both; the
/// responder's first, so its key distribution can overtake the initiator's event).
final class PairingLink {
    let initiator: SMPPairing
    let responder: SMPPairing
    var typedPasskey: UInt32 = 123_456
    var acceptNumbers = true

    var initiatorResult: SMPPairingResult?
    var responderResult: SMPPairingResult?
    var initiatorFailure: (SMPPairingFailedReason, Bool)?
    var responderFailure: (SMPPairingFailedReason, Bool)?
    var displayed: [SMPRole: UInt32] = [:]
    var numbers: [SMPRole: UInt32] = [:]
    var waitingForPasskey: Set<SMPRole> = []
    var encryptionKey: [UInt8]?
    var responderLTKReply: [UInt8]?
    /// Every PDU in order, tagged with its sender.
    var transcript: [(SMPRole, [UInt8])] = []
    /// PDUs a hostile peer slips in ahead of every PDU the receiver gets; the receiver's state
    /// when each arrived, what it answered, and the states they changed (state or SMP timer).
    var strays: [[UInt8]] = []
    var strayArrivals: [SMPPairing.State] = []
    var strayOutputs: [SMPOutput] = []
    var strayStateChanges: [SMPPairing.State] = []

    private var queue: [(SMPRole, SMPOutput)] = []

    init(initiator: SMPConfiguration, responder: SMPConfiguration,
         initiatorKeyPair: SMPKeyPair? = nil, responderKeyPair: SMPKeyPair? = nil,
         initiatorRandom: ((Int) -> [UInt8])? = nil, responderRandom: ((Int) -> [UInt8])? = nil) {
        self.initiator = SMPPairing(role: .initiator, configuration: initiator, local: centralAddress, peer: peripheralAddress,
                                    random: initiatorRandom ?? SMPCrypto.randomBytes, keyPair: initiatorKeyPair)
        self.responder = SMPPairing(role: .responder, configuration: responder, local: peripheralAddress, peer: centralAddress,
                                    random: responderRandom ?? SMPCrypto.randomBytes, keyPair: responderKeyPair)
    }

    func side(_ role: SMPRole) -> SMPPairing { role == .initiator ? initiator : responder }
    func other(_ role: SMPRole) -> SMPRole { role == .initiator ? .responder : .initiator }

    /// Runs the pairing to its end (or until nothing more happens).
    func run() {
        enqueue(.initiator, initiator.start())
        drain()
    }

    func enqueue(_ from: SMPRole, _ outputs: [SMPOutput]) {
        queue += outputs.map { (from, $0) }
    }

    func drain() {
        var steps = 0
        while !queue.isEmpty {
            steps += 1
            precondition(steps < 10_000, "pairing does not terminate")
            let (from, output) = queue.removeFirst()
            handle(from, output)
        }
    }

    private func handle(_ from: SMPRole, _ output: SMPOutput) {
        let to = other(from)
        switch output {
        case .send(let bytes):
            transcript.append((from, bytes))
            for stray in strays {
                let before = side(to).state, deadline = side(to).deadline
                strayArrivals.append(before)
                strayOutputs += side(to).receive(stray)
                if side(to).state != before || side(to).deadline != deadline { strayStateChanges.append(before) }
            }
            enqueue(to, side(to).receive(bytes))
        case .user(.displayPasskey(let p)):
            displayed[from] = p
            if waitingForPasskey.remove(to) != nil { enqueue(to, side(to).passkeyEntered(p)) }
        case .user(.enterPasskey):
            if let p = displayed[to] {
                enqueue(from, side(from).passkeyEntered(p))
            } else if waitingForPasskey.contains(to) {
                // Both sides type (KeyboardOnly on both): the user makes one up and types it twice.
                waitingForPasskey.remove(to)
                enqueue(to, side(to).passkeyEntered(typedPasskey))
                enqueue(from, side(from).passkeyEntered(typedPasskey))
            } else {
                waitingForPasskey.insert(from)
            }
        case .user(.confirmNumber(let v)):
            numbers[from] = v
            enqueue(from, side(from).numericComparisonAnswered(acceptNumbers))
        case .startEncryption(let ltk, let ediv, let rand):
            #expect(from == .initiator)
            encryptionKey = ltk
            responderLTKReply = responder.longTermKeyRequested(ediv: ediv, rand: rand)
            let same = responderLTKReply == ltk
            enqueue(.responder, responder.encryptionChanged(enabled: same, status: same ? 0x00 : 0x06))
            enqueue(.initiator, initiator.encryptionChanged(enabled: same, status: same ? 0x00 : 0x06))
        case .completed(let r):
            if from == .initiator { initiatorResult = r } else { responderResult = r }
        case .failed(let reason, let remote):
            if from == .initiator { initiatorFailure = (reason, remote) } else { responderFailure = (reason, remote) }
        case .securityRequested:
            enqueue(.initiator, initiator.start())
        }
    }

    /// The PDUs one side sent, decoded.
    func sent(by role: SMPRole) -> [SMPPDU] {
        transcript.filter { $0.0 == role }.compactMap { try? SMPPDU.decode($0.1) }
    }
}
