import HCI

// Security Manager Protocol PDUs (Core Vol 3 Part H 3.3–3.6), carried on L2CAP CID 0x0006.
// Multi-octet values (keys, confirm/random values, public key coordinates, DHKey check)
// are kept exactly as they travel in the PDU: least significant octet first.

/// IO Capability (Vol 3 Part H 3.5.1, Table 3.4).
public struct SMPIOCapability: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let displayOnly = SMPIOCapability(rawValue: 0x00)
    public static let displayYesNo = SMPIOCapability(rawValue: 0x01)
    public static let keyboardOnly = SMPIOCapability(rawValue: 0x02)
    public static let noInputNoOutput = SMPIOCapability(rawValue: 0x03)
    public static let keyboardDisplay = SMPIOCapability(rawValue: 0x04)

    public var name: String? {
        switch rawValue {
        case 0x00: "DisplayOnly"
        case 0x01: "DisplayYesNo"
        case 0x02: "KeyboardOnly"
        case 0x03: "NoInputNoOutput"
        case 0x04: "KeyboardDisplay"
        default: nil
        }
    }
    public var description: String { name ?? "Reserved (\(hexCode(rawValue)))" }
}

/// AuthReq (Vol 3 Part H 3.5.1, Figure 3.3): Bonding_Flags (2 bits), MITM, SC, Keypress, CT2.
public struct SMPAuthReq: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public init(bonding: Bool = false, mitm: Bool = false, secureConnections: Bool = false,
                keypress: Bool = false, ct2: Bool = false) {
        rawValue = (bonding ? 0x01 : 0) | (mitm ? 0x04 : 0) | (secureConnections ? 0x08 : 0)
            | (keypress ? 0x10 : 0) | (ct2 ? 0x20 : 0)
    }

    /// Bonding_Flags: 0b00 No Bonding, 0b01 Bonding, others reserved.
    public var bondingFlags: UInt8 { rawValue & 0x03 }
    public var bonding: Bool { bondingFlags == 0x01 }
    public var mitm: Bool { rawValue & 0x04 != 0 }
    public var secureConnections: Bool { rawValue & 0x08 != 0 }
    public var keypress: Bool { rawValue & 0x10 != 0 }
    public var ct2: Bool { rawValue & 0x20 != 0 }

    public var description: String {
        var parts: [String] = []
        switch bondingFlags {
        case 0: parts.append("No Bonding")
        case 1: parts.append("Bonding")
        default: parts.append("Bonding_Flags reserved (\(bondingFlags))")
        }
        if mitm { parts.append("MITM") }
        if secureConnections { parts.append("SC") }
        if keypress { parts.append("Keypress") }
        if ct2 { parts.append("CT2") }
        if rawValue & 0xC0 != 0 { parts.append("RFU bits \(hexCode(rawValue & 0xC0))") }
        return parts.joined(separator: ", ")
    }

    /// The octet, then each bit field under its name in Figure 3.3 (lowerCamelCase).
    public var fields: [Field] {
        [.code("authReq", rawValue, note: description),
         .int("bondingFlags", bondingFlags, note: bondingFlags == 0 ? "No Bonding" : bondingFlags == 1 ? "Bonding" : "Reserved"),
         .bool("mitm", mitm), .bool("sc", secureConnections), .bool("keypress", keypress), .bool("ct2", ct2)]
    }
}

/// Initiator / Responder Key Distribution (Vol 3 Part H 3.6.1): EncKey, IdKey, SignKey, LinkKey.
public struct SMPKeyDistribution: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let encKey = SMPKeyDistribution(rawValue: 0x01)
    public static let idKey = SMPKeyDistribution(rawValue: 0x02)
    public static let signKey = SMPKeyDistribution(rawValue: 0x04)
    public static let linkKey = SMPKeyDistribution(rawValue: 0x08)

    public var description: String {
        var parts: [String] = []
        if contains(.encKey) { parts.append("EncKey") }
        if contains(.idKey) { parts.append("IdKey") }
        if contains(.signKey) { parts.append("SignKey") }
        if contains(.linkKey) { parts.append("LinkKey") }
        if rawValue & 0xF0 != 0 { parts.append("RFU bits \(hexCode(rawValue & 0xF0))") }
        return parts.isEmpty ? "none" : parts.joined(separator: ", ")
    }
}

/// Pairing Failed Reason (Vol 3 Part H 3.5.5, Table 3.7).
public struct SMPPairingFailedReason: RawRepresentable, Hashable, Sendable, CustomStringConvertible, Error {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let passkeyEntryFailed = Self(rawValue: 0x01)
    public static let oobNotAvailable = Self(rawValue: 0x02)
    public static let authenticationRequirements = Self(rawValue: 0x03)
    public static let confirmValueFailed = Self(rawValue: 0x04)
    public static let pairingNotSupported = Self(rawValue: 0x05)
    public static let encryptionKeySize = Self(rawValue: 0x06)
    public static let commandNotSupported = Self(rawValue: 0x07)
    public static let unspecifiedReason = Self(rawValue: 0x08)
    public static let repeatedAttempts = Self(rawValue: 0x09)
    public static let invalidParameters = Self(rawValue: 0x0A)
    public static let dhKeyCheckFailed = Self(rawValue: 0x0B)
    public static let numericComparisonFailed = Self(rawValue: 0x0C)
    public static let brEdrPairingInProgress = Self(rawValue: 0x0D)
    public static let crossTransportKeyDerivationNotAllowed = Self(rawValue: 0x0E)
    public static let keyRejected = Self(rawValue: 0x0F)

    public var name: String? {
        switch rawValue {
        case 0x01: "Passkey Entry Failed"
        case 0x02: "OOB Not Available"
        case 0x03: "Authentication Requirements"
        case 0x04: "Confirm Value Failed"
        case 0x05: "Pairing Not Supported"
        case 0x06: "Encryption Key Size"
        case 0x07: "Command Not Supported"
        case 0x08: "Unspecified Reason"
        case 0x09: "Repeated Attempts"
        case 0x0A: "Invalid Parameters"
        case 0x0B: "DHKey Check Failed"
        case 0x0C: "Numeric Comparison Failed"
        case 0x0D: "BR/EDR pairing in progress"
        case 0x0E: "Cross-transport Key Derivation/Generation not allowed"
        case 0x0F: "Key Rejected"
        default: nil
        }
    }
    public var description: String { name ?? "Reserved (\(hexCode(rawValue)))" }
}

/// Keypress Notification Type (Vol 3 Part H 3.5.8, Table 3.8).
public struct SMPKeypressNotificationType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    public static let passkeyEntryStarted = Self(rawValue: 0)
    public static let passkeyDigitEntered = Self(rawValue: 1)
    public static let passkeyDigitErased = Self(rawValue: 2)
    public static let passkeyCleared = Self(rawValue: 3)
    public static let passkeyEntryCompleted = Self(rawValue: 4)

    public var name: String? {
        switch rawValue {
        case 0: "Passkey entry started"
        case 1: "Passkey digit entered"
        case 2: "Passkey digit erased"
        case 3: "Passkey cleared"
        case 4: "Passkey entry completed"
        default: nil
        }
    }
    public var description: String { name ?? "Reserved (\(hexCode(rawValue)))" }
}

/// The parameters shared by Pairing Request and Pairing Response (Vol 3 Part H 3.5.1, 3.5.2).
public struct SMPPairingParameters: Hashable, Sendable {
    public var ioCapability: SMPIOCapability
    /// OOB data flag: 0x00 not present, 0x01 present from the remote device.
    public var oobDataFlag: UInt8
    public var authReq: SMPAuthReq
    /// 7...16 octets when valid; decoding keeps other values so the state machine can refuse them.
    public var maxEncryptionKeySize: UInt8
    public var initiatorKeyDistribution: SMPKeyDistribution
    public var responderKeyDistribution: SMPKeyDistribution

    public init(ioCapability: SMPIOCapability, oobDataFlag: UInt8 = 0, authReq: SMPAuthReq,
                maxEncryptionKeySize: UInt8 = 16, initiatorKeyDistribution: SMPKeyDistribution,
                responderKeyDistribution: SMPKeyDistribution) {
        self.ioCapability = ioCapability
        self.oobDataFlag = oobDataFlag
        self.authReq = authReq
        self.maxEncryptionKeySize = maxEncryptionKeySize
        self.initiatorKeyDistribution = initiatorKeyDistribution
        self.responderKeyDistribution = responderKeyDistribution
    }

    public var isKeySizeValid: Bool { (7...16).contains(maxEncryptionKeySize) }
}

/// One SMP PDU: Code (1 octet) + Data.
public enum SMPPDU: Sendable, Hashable, FieldDescribable {
    case pairingRequest(SMPPairingParameters)
    case pairingResponse(SMPPairingParameters)
    /// Mconfirm / Sconfirm, 16 octets.
    case pairingConfirm(confirmValue: [UInt8])
    /// Mrand / Srand / Na / Nb, 16 octets.
    case pairingRandom(randomValue: [UInt8])
    case pairingFailed(reason: SMPPairingFailedReason)
    /// Long Term Key, 16 octets.
    case encryptionInformation(longTermKey: [UInt8])
    case centralIdentification(ediv: UInt16, rand: UInt64)
    /// Identity Resolving Key, 16 octets.
    case identityInformation(identityResolvingKey: [UInt8])
    /// AddrType 0x00 public, 0x01 random static.
    case identityAddressInformation(addrType: UInt8, bdAddr: BDAddress)
    /// Connection Signature Resolving Key, 16 octets.
    case signingInformation(signatureKey: [UInt8])
    case securityRequest(authReq: SMPAuthReq)
    /// P-256 public key coordinates, 32 octets each.
    case pairingPublicKey(publicKeyX: [UInt8], publicKeyY: [UInt8])
    /// Ea / Eb, 16 octets.
    case pairingDHKeyCheck(dhKeyCheck: [UInt8])
    case keypressNotification(notificationType: SMPKeypressNotificationType)
    /// A code this stack doesn't know (a reserved code: the receiver ignores it, Core Vol 3 Part H 3.3).
    case unknown(code: UInt8, data: [UInt8])

    // MARK: Codes

    public enum Code {
        public static let pairingRequest: UInt8 = 0x01
        public static let pairingResponse: UInt8 = 0x02
        public static let pairingConfirm: UInt8 = 0x03
        public static let pairingRandom: UInt8 = 0x04
        public static let pairingFailed: UInt8 = 0x05
        public static let encryptionInformation: UInt8 = 0x06
        public static let centralIdentification: UInt8 = 0x07
        public static let identityInformation: UInt8 = 0x08
        public static let identityAddressInformation: UInt8 = 0x09
        public static let signingInformation: UInt8 = 0x0A
        public static let securityRequest: UInt8 = 0x0B
        public static let pairingPublicKey: UInt8 = 0x0C
        public static let pairingDHKeyCheck: UInt8 = 0x0D
        public static let keypressNotification: UInt8 = 0x0E
    }

    public static func name(ofCode code: UInt8) -> String? {
        switch code {
        case 0x01: "Pairing Request"
        case 0x02: "Pairing Response"
        case 0x03: "Pairing Confirm"
        case 0x04: "Pairing Random"
        case 0x05: "Pairing Failed"
        case 0x06: "Encryption Information"
        case 0x07: "Central Identification"
        case 0x08: "Identity Information"
        case 0x09: "Identity Address Information"
        case 0x0A: "Signing Information"
        case 0x0B: "Security Request"
        case 0x0C: "Pairing Public Key"
        case 0x0D: "Pairing DHKey Check"
        case 0x0E: "Pairing Keypress Notification"
        default: nil
        }
    }

    public var code: UInt8 {
        switch self {
        case .pairingRequest: Code.pairingRequest
        case .pairingResponse: Code.pairingResponse
        case .pairingConfirm: Code.pairingConfirm
        case .pairingRandom: Code.pairingRandom
        case .pairingFailed: Code.pairingFailed
        case .encryptionInformation: Code.encryptionInformation
        case .centralIdentification: Code.centralIdentification
        case .identityInformation: Code.identityInformation
        case .identityAddressInformation: Code.identityAddressInformation
        case .signingInformation: Code.signingInformation
        case .securityRequest: Code.securityRequest
        case .pairingPublicKey: Code.pairingPublicKey
        case .pairingDHKeyCheck: Code.pairingDHKeyCheck
        case .keypressNotification: Code.keypressNotification
        case .unknown(let c, _): c
        }
    }

    public var name: String { Self.name(ofCode: code) ?? "Unknown SMP Command (\(hexCode(code)))" }

    // MARK: Decode

    /// Decodes one SMP PDU (the whole L2CAP payload). Every known PDU has a fixed length:
    /// too short throws `.truncated`, too long throws `.trailingBytes`.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> SMPPDU {
        var r = ByteReader(bytes)
        let code = try r.u8("code")
        let pdu: SMPPDU
        switch code {
        case Code.pairingRequest, Code.pairingResponse:
            let p = SMPPairingParameters(
                ioCapability: SMPIOCapability(rawValue: try r.u8("ioCapability")),
                oobDataFlag: try r.u8("oobDataFlag"),
                authReq: SMPAuthReq(rawValue: try r.u8("authReq")),
                maxEncryptionKeySize: try r.u8("maxEncryptionKeySize"),
                initiatorKeyDistribution: SMPKeyDistribution(rawValue: try r.u8("initiatorKeyDistribution")),
                responderKeyDistribution: SMPKeyDistribution(rawValue: try r.u8("responderKeyDistribution")))
            pdu = code == Code.pairingRequest ? .pairingRequest(p) : .pairingResponse(p)
        case Code.pairingConfirm: pdu = .pairingConfirm(confirmValue: try r.bytes(16, "confirmValue"))
        case Code.pairingRandom: pdu = .pairingRandom(randomValue: try r.bytes(16, "randomValue"))
        case Code.pairingFailed: pdu = .pairingFailed(reason: SMPPairingFailedReason(rawValue: try r.u8("reason")))
        case Code.encryptionInformation: pdu = .encryptionInformation(longTermKey: try r.bytes(16, "longTermKey"))
        case Code.centralIdentification:
            pdu = .centralIdentification(ediv: try r.u16("ediv"), rand: try r.u64("rand"))
        case Code.identityInformation: pdu = .identityInformation(identityResolvingKey: try r.bytes(16, "identityResolvingKey"))
        case Code.identityAddressInformation:
            pdu = .identityAddressInformation(addrType: try r.u8("addrType"), bdAddr: try r.address("bdAddr"))
        case Code.signingInformation: pdu = .signingInformation(signatureKey: try r.bytes(16, "signatureKey"))
        case Code.securityRequest: pdu = .securityRequest(authReq: SMPAuthReq(rawValue: try r.u8("authReq")))
        case Code.pairingPublicKey:
            pdu = .pairingPublicKey(publicKeyX: try r.bytes(32, "publicKeyX"), publicKeyY: try r.bytes(32, "publicKeyY"))
        case Code.pairingDHKeyCheck: pdu = .pairingDHKeyCheck(dhKeyCheck: try r.bytes(16, "dhKeyCheck"))
        case Code.keypressNotification:
            pdu = .keypressNotification(notificationType: SMPKeypressNotificationType(rawValue: try r.u8("notificationType")))
        default:
            return .unknown(code: code, data: r.rest())
        }
        try r.expectEnd(Self.name(ofCode: code) ?? "SMP PDU")
        return pdu
    }

    // MARK: Encode

    /// The PDU's octets. Fixed-size values shorter than the spec's size are zero-padded and
    /// longer ones cut, so what is sent is always well-formed.
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: 65)
        w.u8(code)
        func fixed(_ b: [UInt8], _ n: Int) {
            if b.count >= n { w.append(b.prefix(n)) } else { w.append(b); w.append(repeatElement(0, count: n - b.count)) }
        }
        switch self {
        case .pairingRequest(let p), .pairingResponse(let p):
            w.u8(p.ioCapability.rawValue)
            w.u8(p.oobDataFlag)
            w.u8(p.authReq.rawValue)
            w.u8(p.maxEncryptionKeySize)
            w.u8(p.initiatorKeyDistribution.rawValue)
            w.u8(p.responderKeyDistribution.rawValue)
        case .pairingConfirm(let v), .pairingRandom(let v), .encryptionInformation(let v),
             .identityInformation(let v), .signingInformation(let v), .pairingDHKeyCheck(let v):
            fixed(v, 16)
        case .pairingFailed(let reason): w.u8(reason.rawValue)
        case .centralIdentification(let ediv, let rand):
            w.u16(ediv)
            w.u64(rand)
        case .identityAddressInformation(let type, let addr):
            w.u8(type)
            w.address(addr)
        case .securityRequest(let a): w.u8(a.rawValue)
        case .pairingPublicKey(let x, let y):
            fixed(x, 32)
            fixed(y, 32)
        case .keypressNotification(let t): w.u8(t.rawValue)
        case .unknown(_, let data): w.append(data)
        }
        return w.bytes
    }

    // MARK: Fields

    public var fields: [Field] {
        var f: [Field] = [.code("code", code), .text("name", name)]
        switch self {
        case .pairingRequest(let p), .pairingResponse(let p):
            f.append(.code("ioCapability", p.ioCapability.rawValue, note: p.ioCapability.description))
            f.append(.code("oobDataFlag", p.oobDataFlag, note: p.oobDataFlag == 0
                ? "OOB Authentication data not present"
                : p.oobDataFlag == 1 ? "OOB Authentication data from remote device present" : "Reserved"))
            f += p.authReq.fields
            f.append(.int("maxEncryptionKeySize", p.maxEncryptionKeySize, note: p.isKeySizeValid ? "octets" : "invalid: not 7–16"))
            f.append(.code("initiatorKeyDistribution", p.initiatorKeyDistribution.rawValue, note: p.initiatorKeyDistribution.description))
            f.append(.code("responderKeyDistribution", p.responderKeyDistribution.rawValue, note: p.responderKeyDistribution.description))
        case .pairingConfirm(let v): f.append(.bytes("confirmValue", v))
        case .pairingRandom(let v): f.append(.bytes("randomValue", v))
        case .pairingFailed(let r): f.append(.code("reason", r.rawValue, note: r.description))
        case .encryptionInformation(let v): f.append(.bytes("longTermKey", v))
        case .centralIdentification(let ediv, let rand):
            f.append(.code("ediv", ediv))
            f.append(.code("rand", rand))
        case .identityInformation(let v): f.append(.bytes("identityResolvingKey", v))
        case .identityAddressInformation(let t, let a):
            f.append(.code("addrType", t, note: t == 0 ? "Public Device Address" : t == 1 ? "Random Static Address" : "Reserved"))
            f.append(.address("bdAddr", a))
        case .signingInformation(let v): f.append(.bytes("signatureKey", v))
        case .securityRequest(let a): f += a.fields
        case .pairingPublicKey(let x, let y):
            f.append(.bytes("publicKeyX", x))
            f.append(.bytes("publicKeyY", y))
        case .pairingDHKeyCheck(let v): f.append(.bytes("dhKeyCheck", v))
        case .keypressNotification(let t): f.append(.code("notificationType", t.rawValue, note: t.description))
        case .unknown(_, let d): f.append(.bytes("data", d))
        }
        return f
    }
}
