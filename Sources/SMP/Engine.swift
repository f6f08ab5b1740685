import HCI

// The public types of the SMP engine (see SMPPairing in Pairing.swift). The engine is sans-IO:
// the stack feeds it received PDUs and HCI events and carries out the outputs it returns.
// Keys and random values are LSO first, as SMP PDUs and HCI carry them.

/// Initiator = central, responder = peripheral (Vol 3 Part H 2.1).
public enum SMPRole: Sendable { case initiator, responder }

/// Pairing method (Vol 3 Part H 2.3.5.1).
public enum SMPMethod: String, Sendable, Codable { case justWorks, passkeyEntry, numericComparison, oob }

/// Out-of-band data for one pairing (Vol 3 Part H 2.3.5.6.4 for SC, 2.3.5.4 for legacy).
public struct SMPOOBData: Sendable, Equatable {
    /// Legacy OOB: the 16-octet TK both sides received out of band.
    public var legacyTK: [UInt8]?
    /// SC OOB: the peer's confirm value Cb = f4(PKb, PKb, rb, 0) and random rb, as received out of band.
    public var peerConfirm: [UInt8]?
    public var peerRandom: [UInt8]?
    /// SC OOB: the random r we gave the peer out of band (see `SMPOOBData.local`), if any.
    public var localRandom: [UInt8]?

    public init(legacyTK: [UInt8]? = nil, peerConfirm: [UInt8]? = nil, peerRandom: [UInt8]? = nil, localRandom: [UInt8]? = nil) {
        self.legacyTK = legacyTK
        self.peerConfirm = peerConfirm
        self.peerRandom = peerRandom
        self.localRandom = localRandom
    }

    /// The SC OOB data we hand the peer: r (random) and C = f4(PKx, PKx, r, 0). The pairing must then use
    /// this same key pair (pass it to SMPPairing's `keyPair:`).
    public static func local(keyPair: SMPKeyPair, random: [UInt8] = SMPCrypto.randomBytes(16)) -> (confirm: [UInt8], random: [UInt8]) {
        let x = Array(keyPair.publicKey.prefix(32))
        return (SMPCrypto.f4(u: x, v: x, x: random, z: 0), random)
    }

    /// Whether there is OOB data for the chosen kind of pairing (sets our OOB data flag).
    func present(secureConnections: Bool) -> Bool {
        secureConnections ? (peerConfirm != nil && peerRandom != nil) : legacyTK?.count == 16
    }
}

/// Our identity, distributed in Identity Information + Identity Address Information.
public struct SMPIdentity: Sendable, Hashable {
    public var irk: [UInt8]
    public var address: DeviceAddress
    public init(irk: [UInt8], address: DeviceAddress) {
        self.irk = irk
        self.address = address
    }
}

public struct SMPConfiguration: Sendable {
    public var ioCapability: SMPIOCapability = .noInputNoOutput
    /// AuthReq Bonding_Flags; false = pair without distributing or storing keys.
    public var bonding = true
    /// Require MITM protection (authenticated pairing); Just Works then fails with Authentication Requirements.
    public var mitm = false
    /// Offer LE Secure Connections (false = legacy pairing only).
    public var secureConnections = true
    /// Refuse legacy pairing (Pairing Failed Authentication Requirements, Vol 3 Part H 2.3.5.1).
    public var secureConnectionsOnly = false
    /// 7...16 octets; a smaller negotiated size fails with Encryption Key Size (0x06).
    public var minimumKeySize = 16
    public var maximumKeySize = 16
    /// A peer using the spec's debug public key is refused unless this is set; such pairings are never stored.
    public var allowDebugKeys = false
    /// OOB data of the peer, if any.
    public var oob: SMPOOBData? = nil
    /// The passkey we display (or that the user entered in advance) instead of a random one / asking.
    public var fixedPasskey: UInt32? = nil
    /// Our IRK + identity address, distributed when IdKey is agreed.
    public var localIdentity: SMPIdentity? = nil
    public var distributeSigningKey = true
    /// SMP timeout (Vol 3 Part H 3.4).
    public var timeout: Duration = .seconds(30)
    public init() {}
}

/// What the engine needs from the user; answered with `SMPPairing.passkeyEntered(_:)` /
/// `numericComparisonAnswered(_:)`. `displayPasskey` needs no answer.
public enum SMPUserRequest: Sendable, Equatable {
    case displayPasskey(UInt32)
    case enterPasskey
    /// SC numeric comparison: show the 6-digit number and answer yes/no.
    case confirmNumber(UInt32)
}

/// Keys of one side as distributed (Vol 3 Part H 3.6) or derived (SC LTK).
public struct SMPKeys: Sendable, Equatable {
    /// 16 octets, LSO first, already masked to the key size.
    public var ltk: [UInt8]?
    /// 0 for SC.
    public var ediv: UInt16
    /// 8 octets LSO first; zeros for SC.
    public var rand: [UInt8]
    public var irk: [UInt8]?
    public var identityAddress: DeviceAddress?
    public var csrk: [UInt8]?

    public init(ltk: [UInt8]? = nil, ediv: UInt16 = 0, rand: [UInt8] = [UInt8](repeating: 0, count: 8),
                irk: [UInt8]? = nil, identityAddress: DeviceAddress? = nil, csrk: [UInt8]? = nil) {
        self.ltk = ltk
        self.ediv = ediv
        self.rand = rand
        self.irk = irk
        self.identityAddress = identityAddress
        self.csrk = csrk
    }
}

public struct SMPPairingResult: Sendable, Equatable {
    public var method: SMPMethod
    public var secureConnections: Bool
    /// MITM protection was achieved (any method but Just Works).
    public var authenticated: Bool
    /// Both sides asked for bonding: store it (unless `debugKey`).
    public var bonding: Bool
    public var keySize: Int
    /// A side used the debug key pair: never store.
    public var debugKey: Bool
    /// What we distributed (for the peripheral: its LTK/EDIV/Rand to answer LTK requests later); SC: the LTK.
    public var local: SMPKeys
    /// What the peer distributed; SC: the LTK too.
    public var peer: SMPKeys
}

public enum SMPOutput: Sendable, Equatable {
    /// One SMP PDU for L2CAP CID 0x0006.
    case send([UInt8])
    case user(SMPUserRequest)
    /// Initiator: HCI LE Enable Encryption with this key (STK or LTK).
    case startEncryption(ltk: [UInt8], ediv: UInt16, rand: [UInt8])
    /// Pairing and key distribution done.
    case completed(SMPPairingResult)
    /// remote: the peer sent Pairing Failed. See `SMPPairing.failure` for the cause in words.
    case failed(SMPPairingFailedReason, remote: Bool)
    /// (initiator) The peer sent Security Request: the stack decides to pair or to encrypt from a bond.
    case securityRequested(SMPAuthReq)
}
