import Testing
import HCI
@testable import SMP

@Suite struct SMPPDUTests {
    /// Vol 3 Part H 2.2.3 (c1 example): preq = 0x07071000000101, pres = 0x05000800000302 (LSO last).
    static let pairingRequest: [UInt8] = [0x01, 0x01, 0x00, 0x00, 0x10, 0x07, 0x07]
    static let pairingResponse: [UInt8] = [0x02, 0x03, 0x00, 0x00, 0x08, 0x00, 0x05]

    @Test func specPairingRequest() throws {
        let pdu = try SMPPDU.decode(Self.pairingRequest)
        guard case .pairingRequest(let p) = pdu else { Issue.record("decoded \(pdu)"); return }
        #expect(p.ioCapability == .displayYesNo)
        #expect(p.oobDataFlag == 0)
        #expect(p.authReq.rawValue == 0)
        #expect(!p.authReq.bonding && !p.authReq.mitm && !p.authReq.secureConnections)
        #expect(p.maxEncryptionKeySize == 16)
        #expect(p.initiatorKeyDistribution == [.encKey, .idKey, .signKey])
        #expect(p.responderKeyDistribution == [.encKey, .idKey, .signKey])
        #expect(pdu.bytes == Self.pairingRequest)
        #expect(pdu.name == "Pairing Request")
        #expect(jsonObject(pdu.fields) == #"{"code":"0x01","name":"Pairing Request","ioCapability":"0x01","oobDataFlag":"0x00","authReq":"0x00","bondingFlags":0,"mitm":false,"sc":false,"keypress":false,"ct2":false,"maxEncryptionKeySize":16,"initiatorKeyDistribution":"0x07","responderKeyDistribution":"0x07"}"#)
    }

    @Test func specPairingResponse() throws {
        let pdu = try SMPPDU.decode(Self.pairingResponse)
        guard case .pairingResponse(let p) = pdu else { Issue.record("decoded \(pdu)"); return }
        #expect(p.ioCapability == .noInputNoOutput)
        #expect(p.maxEncryptionKeySize == 8)
        #expect(p.initiatorKeyDistribution == [])
        #expect(p.responderKeyDistribution == [.encKey, .signKey])
        #expect(pdu.bytes == Self.pairingResponse)
    }

    @Test func authReqBits() {
        let a = SMPAuthReq(rawValue: 0x2D)
        #expect(a.bonding && a.mitm && a.secureConnections && a.ct2 && !a.keypress)
        #expect(SMPAuthReq(bonding: true, mitm: true, secureConnections: true, keypress: true, ct2: true).rawValue == 0x3D)
        #expect(a.description == "Bonding, MITM, SC, CT2")
        #expect(SMPAuthReq(rawValue: 0x10).keypress)
    }

    /// Each bit of AuthReq named as in Core v5.4 Vol 3 Part H 3.5.1 Figure 3.3: Bonding_Flags (bits
    /// 0–1), MITM (2), SC (3), Keypress (4), CT2 (5); in both PDUs that carry it.
    @Test func authReqFieldsNamed() {
        let request = SMPPDU.pairingRequest(SMPPairingParameters(ioCapability: .noInputNoOutput,
            authReq: SMPAuthReq(rawValue: 0x2D), maxEncryptionKeySize: 16, initiatorKeyDistribution: [], responderKeyDistribution: []))
        for pdu in [request, .securityRequest(authReq: SMPAuthReq(rawValue: 0x2D))] {
            let byName = Dictionary(uniqueKeysWithValues: pdu.fields.map { ($0.name, $0.value) })
            #expect(byName["authReq"] == .code("0x2d"))
            #expect(byName["bondingFlags"] == .int(1))
            #expect(byName["mitm"] == .bool(true))
            #expect(byName["sc"] == .bool(true))
            #expect(byName["keypress"] == .bool(false))
            #expect(byName["ct2"] == .bool(true))
        }
        let keypressOnly = SMPAuthReq(rawValue: 0x12).fields
        #expect(keypressOnly.first { $0.name == "bondingFlags" }?.value == .int(2))
        #expect(keypressOnly.first { $0.name == "bondingFlags" }?.note == "Reserved")
        #expect(keypressOnly.first { $0.name == "keypress" }?.value == .bool(true))
    }

    @Test func truncationsAndTrailingBytesThrow() {
        for n in 0..<Self.pairingRequest.count {
            #expect(throws: DecodeError.self) { try SMPPDU.decode(Array(Self.pairingRequest.prefix(n))) }
        }
        #expect(throws: DecodeError.trailingBytes(pdu: "Pairing Request", count: 1)) {
            try SMPPDU.decode(Self.pairingRequest + [0])
        }
        do {
            _ = try SMPPDU.decode([0x03] + Array(repeating: 0, count: 15))
            Issue.record("short Pairing Confirm decoded")
        } catch {
            #expect(error == .truncated(field: "confirmValue", needed: 16, available: 15))
        }
    }

    static let all: [SMPPDU] = [
        .pairingRequest(SMPPairingParameters(ioCapability: .keyboardDisplay, oobDataFlag: 1,
                                             authReq: SMPAuthReq(bonding: true, mitm: true, secureConnections: true),
                                             maxEncryptionKeySize: 16, initiatorKeyDistribution: [.encKey, .idKey],
                                             responderKeyDistribution: [.encKey, .idKey, .signKey, .linkKey])),
        .pairingConfirm(confirmValue: Array(0..<16)),
        .pairingRandom(randomValue: Array(16..<32)),
        .pairingFailed(reason: .confirmValueFailed),
        .encryptionInformation(longTermKey: Array(32..<48)),
        .centralIdentification(ediv: 0x1234, rand: 0x0102030405060708),
        .identityInformation(identityResolvingKey: Array(48..<64)),
        .identityAddressInformation(addrType: 1, bdAddr: BDAddress([0xC0, 0x11, 0x22, 0x33, 0x44, 0x55])),
        .signingInformation(signatureKey: Array(64..<80)),
        .securityRequest(authReq: SMPAuthReq(bonding: true, mitm: true)),
        .pairingPublicKey(publicKeyX: Array(0..<32), publicKeyY: Array(32..<64)),
        .pairingDHKeyCheck(dhKeyCheck: Array(80..<96)),
        .keypressNotification(notificationType: .passkeyDigitEntered),
    ]
    static let lengths = [7, 17, 17, 2, 17, 11, 17, 8, 17, 2, 65, 17, 2]

    @Test func everyPDURoundTripsAndEveryPrefixThrows() throws {
        for (pdu, length) in zip(Self.all, Self.lengths) {
            let b = pdu.bytes
            #expect(b.count == length, "\(pdu.name)")
            #expect(try SMPPDU.decode(b) == pdu)
            for n in 0..<b.count {
                #expect(throws: DecodeError.self, "\(pdu.name) cut to \(n)") { try SMPPDU.decode(Array(b.prefix(n))) }
            }
            #expect(throws: DecodeError.self) { try SMPPDU.decode(b + [0xEE]) }
        }
    }

    @Test func wireOrderOfMultiOctetValues() throws {
        let central = SMPPDU.centralIdentification(ediv: 0x1234, rand: 0x0102030405060708)
        #expect(central.bytes == [0x07, 0x34, 0x12, 0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01])
        let ida = try SMPPDU.decode([0x09, 0x00, 0xF5, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0])
        #expect(ida == .identityAddressInformation(addrType: 0, bdAddr: BDAddress(string: "F0:F1:F2:F3:F4:F5")!))
        let fields = ida.fields
        #expect(fields.first { $0.name == "bdAddr" }?.value == .text("F0:F1:F2:F3:F4:F5"))
    }

    @Test func reasonNames() throws {
        for r: UInt8 in 0x01...0x0F { #expect(SMPPairingFailedReason(rawValue: r).name != nil) }
        #expect(SMPPairingFailedReason(rawValue: 0x10).name == nil)
        #expect(SMPPairingFailedReason.pairingNotSupported.description == "Pairing Not Supported")
        #expect(SMPPairingFailedReason(rawValue: 0x0B).description == "DHKey Check Failed")
        let failed = try SMPPDU.decode([0x05, 0x05])
        #expect(failed == .pairingFailed(reason: .pairingNotSupported))
        #expect(failed.fields.first { $0.name == "reason" } == Field("reason", .code("0x05"), note: "Pairing Not Supported"))
        #expect(SMPIOCapability(rawValue: 3).description == "NoInputNoOutput")
        #expect(SMPIOCapability(rawValue: 9).name == nil)
        for c: UInt8 in 0x01...0x0E { #expect(SMPPDU.name(ofCode: c) != nil) }
    }

    /// Each PDU's length, Code octet included (Core v5.4 Vol 3 Part H 3.5.1-3.5.8, 3.6.2-3.6.7):
    /// one octet shorter is truncated (naming the missing field), one longer has trailing bytes.
    @Test func everyPDUHasItsSpecLength() throws {
        let specLengths: [UInt8: Int] = [0x01: 7, 0x02: 7, 0x03: 17, 0x04: 17, 0x05: 2, 0x06: 17, 0x07: 11,
                                         0x08: 17, 0x09: 8, 0x0A: 17, 0x0B: 2, 0x0C: 65, 0x0D: 17, 0x0E: 2]
        for (code, length) in specLengths {
            #expect(SMPPDU.length(ofCode: code) == length)
            let pdu = try SMPPDU.decode([code] + Array(repeating: 0, count: length - 1))
            #expect(pdu.code == code && pdu.bytes.count == length)
            #expect(throws: DecodeError.self) { try SMPPDU.decode([code] + Array(repeating: 0, count: length - 2)) }
            #expect(throws: DecodeError.trailingBytes(pdu: SMPPDU.name(ofCode: code)!, count: 1)) {
                try SMPPDU.decode([code] + Array(repeating: 0, count: length))
            }
        }
        #expect(SMPPDU.length(ofCode: 0x0F) == nil)
        #expect(throws: DecodeError.truncated(field: "dhKeyCheck", needed: 16, available: 15)) {
            try SMPPDU.decode([0x0D] + Array(repeating: 0, count: 15))
        }
    }

    @Test func unknownCodesAreKept() throws {
        let pdu = try SMPPDU.decode([0x20, 0xAA, 0xBB])
        #expect(pdu == .unknown(code: 0x20, data: [0xAA, 0xBB]))
        #expect(pdu.bytes == [0x20, 0xAA, 0xBB])
        #expect(pdu.name == "Unknown SMP Command (0x20)")
    }

    @Test func shortValuesArePaddedOnEncode() {
        #expect(SMPPDU.pairingRandom(randomValue: [1]).bytes == [0x04, 1] + Array(repeating: 0, count: 15))
        #expect(SMPPDU.pairingConfirm(confirmValue: Array(repeating: 9, count: 20)).bytes.count == 17)
    }
}
