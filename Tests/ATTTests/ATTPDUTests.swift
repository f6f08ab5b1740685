import Testing
import HCI
import L2CAP
@testable import ATT

/// A PDU as the Core specification lays it out, and the shortest valid prefix length.
struct Vector: Sendable, CustomTestStringConvertible {
    let name: String
    let hex: String
    let pdu: ATTPDU
    /// Every prefix shorter than this must throw.
    let minimum: Int
    /// Whether one more octet at the end must throw (fixed-length PDUs).
    let fixedLength: Bool
    var bytes: [UInt8] { [UInt8](hex: hex)! }
    var testDescription: String { name }
}

let uuid128 = BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!
let uuid128LE = "f0debc9a78563412785634127856341 2"

let vectors: [Vector] = [
    Vector(name: "Error Response", hex: "010a15000a",
           pdu: .errorResponse(requestOpcode: .readRequest, handle: 0x0015, error: .attributeNotFound), minimum: 5, fixedLength: true),
    Vector(name: "Exchange MTU Request", hex: "020502", pdu: .exchangeMTURequest(clientRxMTU: 517), minimum: 3, fixedLength: true),
    Vector(name: "Exchange MTU Response", hex: "03f700", pdu: .exchangeMTUResponse(serverRxMTU: 247), minimum: 3, fixedLength: true),
    Vector(name: "Find Information Request", hex: "040100ffff",
           pdu: .findInformationRequest(startHandle: 1, endHandle: 0xFFFF), minimum: 5, fixedLength: true),
    Vector(name: "Find Information Response 16", hex: "0501030002290400012 9",
           pdu: .findInformationResponse(format: .uuid16, information: [
               ATTHandleUUID(handle: 3, uuid: 0x2902), ATTHandleUUID(handle: 4, uuid: 0x2901)]),
           minimum: 6, fixedLength: false),
    Vector(name: "Find Information Response 128", hex: "05021000" + uuid128LE,
           pdu: .findInformationResponse(format: .uuid128, information: [ATTHandleUUID(handle: 0x10, uuid: uuid128)]),
           minimum: 20, fixedLength: false),
    Vector(name: "Find By Type Value Request", hex: "060100ffff00280d18",
           pdu: .findByTypeValueRequest(startHandle: 1, endHandle: 0xFFFF, attributeType: 0x2800, attributeValue: [0x0d, 0x18]),
           minimum: 7, fixedLength: false),
    Vector(name: "Find By Type Value Response", hex: "070a001100",
           pdu: .findByTypeValueResponse([ATTHandlesInformation(foundAttributeHandle: 10, groupEndHandle: 17)]),
           minimum: 5, fixedLength: false),
    Vector(name: "Read By Type Request", hex: "080100ffff0328",
           pdu: .readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: 0x2803), minimum: 7, fixedLength: true),
    Vector(name: "Read By Type Request 128", hex: "080100ffff" + uuid128LE,
           pdu: .readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: uuid128), minimum: 7, fixedLength: true),
    Vector(name: "Read By Type Response", hex: "0907020002030000 2a0400020500012a",
           pdu: .readByTypeResponse([ATTHandleValue(handle: 2, value: [0x02, 0x03, 0x00, 0x00, 0x2a]),
                                     ATTHandleValue(handle: 4, value: [0x02, 0x05, 0x00, 0x01, 0x2a])]),
           minimum: 9, fixedLength: false),
    Vector(name: "Read Request", hex: "0a0300", pdu: .readRequest(handle: 3), minimum: 3, fixedLength: true),
    Vector(name: "Read Response", hex: "0b626c65", pdu: .readResponse(value: Array("ble".utf8)), minimum: 1, fixedLength: false),
    Vector(name: "Read Blob Request", hex: "0c03001600", pdu: .readBlobRequest(handle: 3, offset: 22), minimum: 5, fixedLength: true),
    Vector(name: "Read Blob Response", hex: "0d0102", pdu: .readBlobResponse(value: [1, 2]), minimum: 1, fixedLength: false),
    Vector(name: "Read Multiple Request", hex: "0e03000500", pdu: .readMultipleRequest(handles: [3, 5]), minimum: 5, fixedLength: false),
    Vector(name: "Read Multiple Response", hex: "0f010203", pdu: .readMultipleResponse(values: [1, 2, 3]), minimum: 1, fixedLength: false),
    Vector(name: "Read Multiple Variable Request", hex: "2003000500",
           pdu: .readMultipleVariableRequest(handles: [3, 5]), minimum: 5, fixedLength: false),
    Vector(name: "Read Multiple Variable Response", hex: "2102000102010003",
           pdu: .readMultipleVariableResponse([ATTLengthValue([1, 2]), ATTLengthValue([3])]), minimum: 1, fixedLength: false),
    Vector(name: "Read By Group Type Request", hex: "100100ffff0028",
           pdu: .readByGroupTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: 0x2800), minimum: 7, fixedLength: true),
    Vector(name: "Read By Group Type Response", hex: "1106010005000018060009000118",
           pdu: .readByGroupTypeResponse([ATTGroupData(handle: 1, endGroupHandle: 5, value: [0x00, 0x18]),
                                          ATTGroupData(handle: 6, endGroupHandle: 9, value: [0x01, 0x18])]),
           minimum: 8, fixedLength: false),
    Vector(name: "Write Request", hex: "120f006869", pdu: .writeRequest(handle: 15, value: [0x68, 0x69]), minimum: 3, fixedLength: false),
    Vector(name: "Write Response", hex: "13", pdu: .writeResponse, minimum: 1, fixedLength: true),
    Vector(name: "Write Command", hex: "520f006869", pdu: .writeCommand(handle: 15, value: [0x68, 0x69]), minimum: 3, fixedLength: false),
    Vector(name: "Signed Write Command", hex: "d20f0001" + "a1a2a3a4a5a6a7a8a9aaabac",
           pdu: .signedWriteCommand(handle: 15, value: [1], signature: Array(0xa1...0xac)), minimum: 15, fixedLength: false),
    Vector(name: "Prepare Write Request", hex: "160f000000aabb",
           pdu: .prepareWriteRequest(handle: 15, offset: 0, value: [0xaa, 0xbb]), minimum: 5, fixedLength: false),
    Vector(name: "Prepare Write Response", hex: "170f001200aabb",
           pdu: .prepareWriteResponse(handle: 15, offset: 18, value: [0xaa, 0xbb]), minimum: 5, fixedLength: false),
    Vector(name: "Execute Write Request", hex: "1801", pdu: .executeWriteRequest(flags: .write), minimum: 2, fixedLength: true),
    Vector(name: "Execute Write Response", hex: "19", pdu: .executeWriteResponse, minimum: 1, fixedLength: true),
    Vector(name: "Handle Value Notification", hex: "1b0c003432",
           pdu: .handleValueNotification(handle: 12, value: [0x34, 0x32]), minimum: 3, fixedLength: false),
    Vector(name: "Handle Value Indication", hex: "1d080001000500",
           pdu: .handleValueIndication(handle: 8, value: [1, 0, 5, 0]), minimum: 3, fixedLength: false),
    Vector(name: "Handle Value Confirmation", hex: "1e", pdu: .handleValueConfirmation, minimum: 1, fixedLength: true),
    Vector(name: "Multiple Handle Value Notification", hex: "230c00020034320e00010007",
           pdu: .multipleHandleValueNotification([ATTHandleValue(handle: 12, value: [0x34, 0x32]),
                                                  ATTHandleValue(handle: 14, value: [0x07])]),
           minimum: 12, fixedLength: false),
]

@Suite struct ATTPDUCodecTests {
    @Test(arguments: vectors) func encodesToSpecBytes(_ v: Vector) {
        #expect(v.pdu.bytes == v.bytes)
        #expect(v.pdu.opcode.rawValue == v.bytes[0])
    }

    @Test(arguments: vectors) func decodesToValue(_ v: Vector) throws {
        let decoded = try ATTPDU.decode(v.bytes)
        #expect(decoded == v.pdu)
        #expect(decoded.bytes == v.bytes)
        #expect(ATTPDU.decodeResult(v.bytes) == .pdu(v.pdu))
    }

    @Test(arguments: vectors) func everyShortPrefixThrows(_ v: Vector) {
        let bytes = v.bytes
        for n in 0..<v.minimum {
            #expect(throws: DecodeError.self, "prefix of \(n) octets") { try ATTPDU.decode(Array(bytes.prefix(n))) }
        }
    }

    /// The receive path decodes a PDU in place in its B-frame (Core Vol 3 Part A 3.1: Length,
    /// CID, then the information payload): the same PDU as from the payload alone, and the
    /// window's bounds are the payload's. The octet after the window (here the frame's next
    /// bytes in the same array) is not read: a fixed-length PDU with an octet after its
    /// window still decodes, and one whose window is cut short is malformed, naming the
    /// PDU's own opcode (what an Invalid PDU answer carries, Part F 3.4.1.1), not the frame's.
    @Test(arguments: vectors) func decodesInPlaceInItsFrame(_ v: Vector) throws {
        let frame = L2CAPFrame(cid: .att, payload: v.bytes).bytes
        let (cid, payload) = try L2CAPFrame.decodeInPlace(frame)
        #expect(cid == .att)
        #expect(payload.remaining == v.bytes.count)
        #expect(try ATTPDU.decode(from: payload) == v.pdu)
        #expect(ATTPDU.decodeResult(from: payload, mtu: 517) == .pdu(v.pdu))
        // A window inside a longer array: whatever follows it is not the PDU's.
        let padded = frame + [0xEE]
        #expect(try ATTPDU.decode(from: ByteReader(padded, in: 4..<frame.count)) == v.pdu)
        for n in 0..<v.minimum where n > 0 {
            let cut = ByteReader(padded, in: 4..<4 + n)
            guard case .malformed(let op, _) = ATTPDU.decodeResult(from: cut, mtu: 517) else {
                Issue.record("prefix of \(n) octets decoded"); continue
            }
            #expect(op == v.pdu.opcode)
        }
        guard case .malformed(nil, _) = ATTPDU.decodeResult(from: ByteReader(padded, in: 4..<4), mtu: 517) else {
            Issue.record("an empty window is an empty PDU"); return
        }
    }

    @Test(arguments: vectors.filter(\.fixedLength)) func trailingOctetThrows(_ v: Vector) {
        #expect(throws: DecodeError.self) { try ATTPDU.decode(v.bytes + [0]) }
        #expect(ATTPDU.serverRejection(for: ATTPDU.decodeResult(v.bytes + [0])) == (v.pdu.opcode.isRequest
            ? .errorResponse(requestOpcode: v.pdu.opcode, handle: 0, error: .invalidPDU) : nil))
    }

    @Test func everyOpcodeHasAVectorAndAName() {
        let covered = Set(vectors.map(\.pdu.opcode))
        for raw in UInt8.min...UInt8.max where ATTOpcode(raw).isKnown {
            #expect(covered.contains(ATTOpcode(raw)), "no vector for \(ATTOpcode(raw))")
        }
        #expect(covered.count == 31)
    }

    @Test func inconsistentListsThrow() {
        let bad: [String] = [
            "0900",                   // Read By Type Response, length 0
            "090102",                 // length 1 < handle
            "0904010002000300",       // 6 octets of list, length 4
            "1103010000",             // Read By Group Type Response, length 3 < 4
            "110601000500001806",     // list not a multiple of 6
            "0503010002 29", // format 3
            "05010100022904",         // format 1, 5 octets of list
            "0502100000",             // format 2, 4 octets
            "0701000200ff",           // Find By Type Value Response, 5 octets
            "07",                     // empty handles information list
            "080100ffff00280000",     // 32-bit UUID in Read By Type Request
            "100100ffff002800",       // 3-octet UUID
            "0e0300",                 // Read Multiple: one handle
            "0e030005",               // odd
            "230c0002003432",         // Multiple Handle Value Notification: one tuple
            "230c000500343207000100", // lying length
            "2102",                   // Read Multiple Variable Response: half a length
            "d20f00a1a2a3a4a5a6a7a8a9aaab", // signature of 11 octets
            "",
        ]
        for hex in bad {
            #expect(throws: DecodeError.self, "\(hex)") { try ATTPDU.decode([UInt8](hex: hex)!) }
        }
    }

    @Test func truncatedLastReadMultipleVariableValueIsKept() throws {
        // Second value announces 4 octets but the PDU was cut at ATT_MTU: its Value Length is
        // the whole value's (Core v5.4 Vol 3 Part F 3.4.4.12), kept so the client reads the rest.
        let bytes: [UInt8] = [0x21, 0x01, 0x00, 0xaa, 0x04, 0x00, 0xbb, 0xcc]
        let pdu = try ATTPDU.decode(bytes)
        #expect(pdu == .readMultipleVariableResponse([ATTLengthValue([0xaa]), ATTLengthValue(length: 4, value: [0xbb, 0xcc])]))
        #expect(pdu.bytes == bytes)
    }

    @Test func uuid128AliasOf16BitDecodesShort() throws {
        // 0x2800 in its 128-bit form.
        let base = "fb349b5f80000080001000000028 0000"
        let pdu = try ATTPDU.decode([UInt8](hex: "100100ffff" + base)!)
        #expect(pdu == .readByGroupTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: 0x2800))
        // Find Information Response keeps its format: a 16-bit UUID in format 2 is sent as 128 bits.
        let fir = ATTPDU.findInformationResponse(format: .uuid128, information: [ATTHandleUUID(handle: 1, uuid: 0x2800)])
        #expect(fir.bytes == [0x05, 0x02, 0x01, 0x00] + [UInt8](hex: base)!)
        #expect(try ATTPDU.decode(fir.bytes) == fir)
    }

    @Test func unknownOpcodes() throws {
        let req = try ATTPDU.decode([0x3f, 1, 2])
        #expect(req == .unknown(opcode: ATTOpcode(0x3f), parameters: [1, 2]))
        #expect(req.bytes == [0x3f, 1, 2])
        #expect(ATTPDU.serverRejection(for: .pdu(req))
                == .errorResponse(requestOpcode: ATTOpcode(0x3f), handle: 0, error: .requestNotSupported))
        // Unknown command (bit 6): ignored.
        #expect(ATTPDU.serverRejection(for: ATTPDU.decodeResult([0x7f, 1])) == nil)
    }

    @Test func malformedKnownRequestIsInvalidPDU() {
        let result = ATTPDU.decodeResult([0x0a, 0x03])
        guard case .malformed(let op, _) = result else { Issue.record("expected malformed"); return }
        #expect(op == .readRequest)
        #expect(ATTPDU.serverRejection(for: result) == .errorResponse(requestOpcode: .readRequest, handle: 0, error: .invalidPDU))
        // A malformed notification or response is dropped, not answered.
        #expect(ATTPDU.serverRejection(for: ATTPDU.decodeResult([0x1b, 0x01])) == nil)
        #expect(ATTPDU.serverRejection(for: ATTPDU.decodeResult([0x13, 0x00])) == nil)
        #expect(ATTPDU.decodeResult([]) == .malformed(opcode: nil, error: .truncated(field: "opcode", needed: 1, available: 0)))
        #expect(ATTPDU.serverRejection(for: ATTPDU.decodeResult([0x0a, 0x03, 0x00])) == nil)
    }

    @Test func hostileInputNeverTraps() {
        // Deterministic pseudo-random PDUs for every opcode: decode throws or round-trips.
        var state: UInt64 = 0x9E3779B97F4A7C15
        func next() -> UInt8 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        for op in UInt8.min...UInt8.max {
            for _ in 0..<40 {
                let length = Int(next() % 40)
                let bytes = [op] + (0..<length).map { _ in next() }
                if let pdu = try? ATTPDU.decode(bytes) {
                    let again = try? ATTPDU.decode(pdu.bytes)
                    #expect(again == pdu, "\(bytes.hex)")
                }
            }
        }
    }
}

@Suite struct ATTNamesTests {
    @Test func opcodeFlags() {
        #expect(ATTOpcode.writeCommand.isCommand && !ATTOpcode.writeCommand.hasSignature)
        #expect(ATTOpcode.signedWriteCommand.isCommand && ATTOpcode.signedWriteCommand.hasSignature)
        #expect(!ATTOpcode.writeRequest.isCommand && ATTOpcode.writeRequest.isRequest)
        #expect(ATTOpcode.readRequest.responseOpcode == .readResponse)
        #expect(ATTOpcode.readMultipleVariableRequest.responseOpcode == .readMultipleVariableResponse)
        #expect(ATTOpcode.executeWriteRequest.responseOpcode == .executeWriteResponse)
        #expect(ATTOpcode.handleValueIndication.responseOpcode == .handleValueConfirmation)
        #expect(ATTOpcode.handleValueNotification.responseOpcode == nil)
        #expect(!ATTOpcode.handleValueIndication.isRequest)
        #expect(ATTOpcode.readResponse.isResponse && !ATTOpcode.errorResponse.isResponse)
        #expect(ATTOpcode.readByGroupTypeRequest.name == "Read By Group Type Request")
        #expect(ATTOpcode.multipleHandleValueNotification.name == "Multiple Handle Value Notification")
        #expect(ATTOpcode(0x3f).name == nil)
        #expect(ATTOpcode.readRequest.description == "Read Request (0x0a)")
    }

    @Test func errorCodeNames() {
        let expected: [UInt8: String] = [
            0x01: "Invalid Handle", 0x02: "Read Not Permitted", 0x03: "Write Not Permitted", 0x04: "Invalid PDU",
            0x05: "Insufficient Authentication", 0x06: "Request Not Supported", 0x07: "Invalid Offset",
            0x08: "Insufficient Authorization", 0x09: "Prepare Queue Full", 0x0A: "Attribute Not Found",
            0x0B: "Attribute Not Long", 0x0C: "Encryption Key Size Too Short", 0x0D: "Invalid Attribute Value Length",
            0x0E: "Unlikely Error", 0x0F: "Insufficient Encryption", 0x10: "Unsupported Group Type",
            0x11: "Insufficient Resources", 0x12: "Database Out Of Sync", 0x13: "Value Not Allowed",
            0xFC: "Write Request Rejected",
            0xFD: "Client Characteristic Configuration Descriptor Improperly Configured",
            0xFE: "Procedure Already in Progress", 0xFF: "Out of Range",
        ]
        for (code, name) in expected { #expect(ATTErrorCode(code).name == name) }
        #expect(ATTErrorCode(0x80).name == "Application Error" && ATTErrorCode(0x9F).isApplicationError)
        #expect(ATTErrorCode.application(0x05).rawValue == 0x85)
        #expect(!ATTErrorCode(0xA0).isApplicationError)
        #expect(ATTErrorCode(0x14).name == "Reserved")
    }

    @Test func attErrorDescribesItself() {
        let e = ATTError(.writeNotPermitted, requestOpcode: .writeRequest, handle: 20)
        #expect(e.description == "Write Not Permitted (0x03)")
        #expect(e.pdu.bytes == [0x01, 0x12, 0x14, 0x00, 0x03])
    }
}

@Suite struct ATTFieldsTests {
    @Test func readByGroupTypeRequestJSONMatchesCLIContract() {
        let pdu = ATTPDU.readByGroupTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: 0x2800)
        #expect(jsonObject(pdu.fields)
                == #"{"opcode":"0x10","name":"Read By Group Type Request","startHandle":1,"endHandle":65535,"type":"2800"}"#)
    }

    @Test func errorResponseJSON() throws {
        let pdu = try ATTPDU.decode([0x01, 0x12, 0x14, 0x00, 0x03])
        #expect(jsonObject(pdu.fields)
                == #"{"opcode":"0x01","name":"Error Response","requestOpcodeInError":"0x12","handle":20,"errorCode":"0x03"}"#)
        #expect(pdu.fields.first { $0.name == "errorCode" }?.note == "Write Not Permitted")
    }

    @Test func singleHandlePDUsCallItHandle() {
        let pdus: [ATTPDU] = [.readRequest(handle: 7), .readBlobRequest(handle: 7, offset: 0), .writeRequest(handle: 7, value: []),
                              .writeCommand(handle: 7, value: []), .prepareWriteRequest(handle: 7, offset: 0, value: []),
                              .handleValueNotification(handle: 7, value: []), .handleValueIndication(handle: 7, value: []),
                              .errorResponse(requestOpcode: .readRequest, handle: 7, error: .invalidHandle)]
        for pdu in pdus {
            #expect(pdu.fields.contains(Field("handle", .int(7))), "\(pdu.opcode)")
        }
    }

    @Test func listsAndMTU() {
        #expect(jsonObject(ATTPDU.exchangeMTURequest(clientRxMTU: 517).fields)
                == #"{"opcode":"0x02","name":"Exchange MTU Request","clientRxMtu":517}"#)
        #expect(jsonObject(ATTPDU.exchangeMTUResponse(serverRxMTU: 23).fields)
                == #"{"opcode":"0x03","name":"Exchange MTU Response","serverRxMtu":23}"#)
        let rsp = ATTPDU.readByGroupTypeResponse([ATTGroupData(handle: 1, endGroupHandle: 5, value: [0x00, 0x18])])
        #expect(jsonObject(rsp.fields) == #"{"opcode":"0x11","name":"Read By Group Type Response","length":6,"#
                + #""attributeDataList":[{"handle":1,"endGroupHandle":5,"value":"0018"}]}"#)
        let fi = ATTPDU.findInformationResponse(format: .uuid128, information: [ATTHandleUUID(handle: 16, uuid: uuid128)])
        #expect(jsonObject(fi.fields) == #"{"opcode":"0x05","name":"Find Information Response","format":2,"#
                + #""informationData":[{"handle":16,"uuid":"12345678-1234-5678-1234-56789abcdef0"}]}"#)
        #expect(jsonObject(ATTPDU.unknown(opcode: ATTOpcode(0x3f), parameters: [1]).fields)
                == #"{"opcode":"0x3f","name":"Unknown","parameters":"01"}"#)
    }
}

/// The table by opcode (Tools/pdl/att.pdl → ATTOpcode.info) against the specification's vectors.
@Suite struct ATTOpcodeTableTests {
    /// No PDU laid out as the specification shows it is refused by its opcode's minimum length,
    /// and the shortest prefix the codec refuses is the table's minimum for fixed layouts.
    @Test(arguments: vectors) func minimumLengthAdmitsEverySpecVector(_ v: Vector) throws {
        let info = try #require(v.pdu.opcode.info)
        #expect(info.minimumLength <= v.bytes.count)
        #expect(info.minimumLength <= v.minimum)
        #expect(ATTPDU.decodeResult(v.bytes, mtu: 517) == .pdu(v.pdu))
    }

    /// A PDU shorter than its opcode's minimum (here with zero-filled parameters) is refused by
    /// the codec too, so the bearer's early check (Zephyr `handlers[]` style) refuses nothing the
    /// codec would have accepted; the spec vectors above show it refuses no well-formed PDU.
    @Test func shorterThanMinimumIsMalformed() {
        for raw in UInt8.min...UInt8.max {
            let op = ATTOpcode(raw)
            guard let info = op.info else { continue }
            for n in 1..<info.minimumLength {
                let bytes = [raw] + [UInt8](repeating: 0, count: n - 1)
                #expect(throws: DecodeError.self, "\(op) in \(n) octets") { try ATTPDU.decode(bytes) }
                guard case .malformed(op, _) = ATTPDU.decodeResult(bytes, mtu: 23) else {
                    Issue.record("\(op) in \(n) octets not refused"); continue
                }
            }
        }
    }

    /// Kinds from Core v5.4 Vol 3 Part F 3.3 and 3.4.8 (Table 3.37): requests are answered by
    /// the next opcode, and a response always follows its request.
    @Test func kindsPairRequestsWithResponses() {
        #expect(ATTOpcode.readRequest.info?.kind == .request)
        #expect(ATTOpcode.writeCommand.info?.kind == .command)
        #expect(ATTOpcode.handleValueIndication.info?.kind == .indication)
        #expect(ATTOpcode.errorResponse.info?.kind == .error)
        for raw in UInt8.min...UInt8.max where ATTOpcode(raw).isRequest {
            #expect(ATTOpcode(raw + 1).info?.kind == .response, "\(ATTOpcode(raw))")
        }
        // Bit 6 is the command flag (3.3.1): the table's commands are exactly the known ones with it.
        for raw in UInt8.min...UInt8.max {
            let op = ATTOpcode(raw)
            if let kind = op.info?.kind { #expect((kind == .command) == op.isCommand, "\(op)") }
        }
    }
}
