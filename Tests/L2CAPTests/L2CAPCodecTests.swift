import Testing
import HCI
@testable import L2CAP

@Suite struct L2CAPFrameTests {
    let bytes: [UInt8] = [0x07, 0x00, 0x04, 0x00, 0x10, 0x01, 0x00, 0xff, 0xff, 0x00, 0x28]

    @Test func decodesAndEncodesBFrame() throws {
        let frame = try L2CAPFrame.decode(bytes)
        #expect(frame.cid == .att)
        #expect(frame.payload == [0x10, 0x01, 0x00, 0xff, 0xff, 0x00, 0x28])
        #expect(frame.bytes == bytes)
        #expect(L2CAPFrame(cid: .leSignaling, payload: []).bytes == [0x00, 0x00, 0x05, 0x00])
        #expect(jsonObject(frame.fields) == #"{"cid":4,"length":7,"channel":"ATT"}"#)
    }

    @Test func shorterThanLengthIsIncompleteLongerIsMalformed() {
        for n in 0..<bytes.count {
            #expect(throws: DecodeError.self) { try L2CAPFrame.decode(Array(bytes.prefix(n))) }
        }
        #expect(throws: DecodeError.truncated(field: "information payload", needed: 7, available: 6)) {
            try L2CAPFrame.decode(Array(bytes.dropLast()))
        }
        #expect(throws: DecodeError.trailingBytes(pdu: "L2CAP frame", count: 1)) { try L2CAPFrame.decode(bytes + [0]) }
    }

    /// `decodeInPlace` reads the same frame as `decode` (Core Vol 3 Part A 3.1) and fails the
    /// same way; its payload is a window on the frame's octets.
    @Test func decodesInPlaceAsDecodeDoes() throws {
        var (cid, payload) = try L2CAPFrame.decodeInPlace(bytes)
        #expect(cid == .att)
        #expect(payload.offset == 4 && payload.remaining == 7)
        #expect(payload.rest() == [0x10, 0x01, 0x00, 0xff, 0xff, 0x00, 0x28])
        #expect(throws: DecodeError.truncated(field: "information payload", needed: 7, available: 6)) {
            try L2CAPFrame.decodeInPlace(Array(bytes.dropLast()))
        }
        #expect(throws: DecodeError.trailingBytes(pdu: "L2CAP frame", count: 1)) { try L2CAPFrame.decodeInPlace(bytes + [0]) }
        for n in 0..<4 { #expect(throws: DecodeError.self) { try L2CAPFrame.decodeInPlace(Array(bytes.prefix(n))) } }
    }

    /// A window never reaches outside its array, whatever range it is given (hostile lengths).
    @Test func readerWindowIsClampedAndBounded() throws {
        let octets: [UInt8] = [1, 2, 3, 4, 5]
        var r = ByteReader(octets, in: 1..<3)
        #expect(try r.u8() == 2)
        var inner = try r.window(1)
        #expect(try inner.u8() == 3)
        #expect(throws: DecodeError.self) { try inner.u8() }
        #expect(r.isAtEnd)
        #expect(throws: DecodeError.truncated(field: "bytes", needed: 1, available: 0)) { try r.window(1) }
        #expect(ByteReader(octets, in: 3..<99).remaining == 2)
        #expect(ByteReader(octets, in: 7..<9).remaining == 0)
        var negative = ByteReader(octets, in: -4..<2)
        #expect(negative.rest() == [1, 2])
    }

    @Test func totalLengthFromHeader() {
        #expect(L2CAPFrame.totalLength(header: bytes.prefix(4)) == 11)
        #expect(L2CAPFrame.totalLength(header: bytes.prefix(3)) == nil)
        #expect(L2CAPFrame.totalLength(header: [0xff, 0xff, 0x04, 0x00]) == 65539)
    }

    @Test func cidNames() {
        #expect(L2CAPCID.att.name == "ATT")
        #expect(L2CAPCID.leSignaling.name == "LE Signaling")
        #expect(L2CAPCID.smp.name == "SMP")
        #expect(L2CAPCID(0x0040).isDynamic && L2CAPCID(0x007F).isDynamic)
        #expect(!L2CAPCID(0x0080).isDynamic && !L2CAPCID(0x003F).isDynamic)
        // ACL-U's fixed channels (Core v5.4 Vol 3 Part A Table 2.1), named for the decoder;
        // 0x0003 (the AMP Manager, removed in v5.3) is reserved.
        #expect(L2CAPCID(0x0001).name == "Signaling")
        #expect(L2CAPCID(0x0007).name == "BR/EDR SMP")
        #expect(L2CAPCID(0x0003).name == nil)
    }
}

struct SignalingVector: Sendable, CustomTestStringConvertible {
    let hex: String
    let command: SignalingCommand
    var bytes: [UInt8] { [UInt8](hex: hex)! }
    var testDescription: String { command.code.name ?? hex }
}

let signalingVectors: [SignalingVector] = [
    SignalingVector(hex: "01 02 02 00 00 00", command: SignalingCommand(identifier: 2, .commandReject(.commandNotUnderstood))),
    SignalingVector(hex: "01 02 04 00 01 00 17 00", command: SignalingCommand(identifier: 2, .commandReject(.signalingMTUExceeded(actualMTU: 23)))),
    SignalingVector(hex: "01 02 06 00 02 00 40 00 41 00",
                    command: SignalingCommand(identifier: 2, .commandReject(.invalidCID(localCID: 0x40, remoteCID: 0x41)))),
    SignalingVector(hex: "06 03 04 00 40 00 41 00",
                    command: SignalingCommand(identifier: 3, .disconnectionRequest(destinationCID: 0x40, sourceCID: 0x41))),
    SignalingVector(hex: "07 03 04 00 40 00 41 00",
                    command: SignalingCommand(identifier: 3, .disconnectionResponse(destinationCID: 0x40, sourceCID: 0x41))),
    SignalingVector(hex: "12 01 08 00 06 00 0c 00 00 00 c8 00",
                    command: SignalingCommand(identifier: 1, .connectionParameterUpdateRequest(intervalMin: 6, intervalMax: 12, latency: 0, timeout: 200))),
    SignalingVector(hex: "13 01 02 00 01 00", command: SignalingCommand(identifier: 1, .connectionParameterUpdateResponse(result: 1))),
    SignalingVector(hex: "14 04 0a 00 80 00 40 00 00 02 f7 00 0a 00",
                    command: SignalingCommand(identifier: 4, .leCreditBasedConnectionRequest(spsm: 0x80, sourceCID: 0x40, mtu: 512, mps: 247, initialCredits: 10))),
    SignalingVector(hex: "15 04 0a 00 41 00 00 02 f7 00 0a 00 04 00",
                    command: SignalingCommand(identifier: 4, .leCreditBasedConnectionResponse(destinationCID: 0x41, mtu: 512, mps: 247,
                                                                                            initialCredits: 10, result: .noResourcesAvailable))),
    SignalingVector(hex: "16 05 04 00 40 00 05 00", command: SignalingCommand(identifier: 5, .flowControlCreditInd(cid: 0x40, credits: 5))),
    SignalingVector(hex: "17 06 0c 00 80 00 00 02 f7 00 0a 00 40 00 41 00",
                    command: SignalingCommand(identifier: 6, .creditBasedConnectionRequest(spsm: 0x80, mtu: 512, mps: 247, initialCredits: 10,
                                                                                         sourceCIDs: [0x40, 0x41]))),
    SignalingVector(hex: "18 06 0a 00 00 02 f7 00 0a 00 00 00 42 00",
                    command: SignalingCommand(identifier: 6, .creditBasedConnectionResponse(mtu: 512, mps: 247, initialCredits: 10,
                                                                                          result: .successful, destinationCIDs: [0x42]))),
    SignalingVector(hex: "19 07 06 00 00 02 f7 00 40 00",
                    command: SignalingCommand(identifier: 7, .creditBasedReconfigureRequest(mtu: 512, mps: 247, destinationCIDs: [0x40]))),
    SignalingVector(hex: "1a 07 02 00 00 00", command: SignalingCommand(identifier: 7, .creditBasedReconfigureResponse(result: 0))),
    SignalingVector(hex: "30 08 02 00 ab cd", command: SignalingCommand(identifier: 8, .unknown(code: SignalingCode(0x30), data: [0xab, 0xcd]))),
]

@Suite struct SignalingTests {
    @Test(arguments: signalingVectors) func roundTrip(_ v: SignalingVector) throws {
        #expect(v.command.bytes == v.bytes)
        #expect(try SignalingCommand.decode(v.bytes) == v.command)
    }

    @Test(arguments: signalingVectors) func everyPrefixThrows(_ v: SignalingVector) {
        let bytes = v.bytes
        for n in 0..<bytes.count {
            #expect(throws: DecodeError.self) { try SignalingCommand.decode(Array(bytes.prefix(n))) }
        }
        // LE-U: one command per C-frame, so trailing octets are malformed.
        #expect(throws: DecodeError.self) { try SignalingCommand.decode(bytes + [0]) }
    }

    @Test func connectionParameterUpdateRequestFields() throws {
        let cmd = try SignalingCommand.decode([0x12, 0x01, 0x08, 0x00, 0x06, 0x00, 0x0c, 0x00, 0x00, 0x00, 0xc8, 0x00])
        guard case let .connectionParameterUpdateRequest(minI, maxI, latency, timeout) = cmd.body else {
            Issue.record("wrong body \(cmd)"); return
        }
        #expect((minI, maxI, latency, timeout) == (6, 12, 0, 200))
        #expect(cmd.identifier == 1 && cmd.code == .connectionParameterUpdateRequest)
        #expect(jsonObject(cmd.fields) == #"{"code":"0x12","name":"Connection Parameter Update Request","identifier":1,"length":8,"#
                + #""intervalMin":6,"intervalMax":12,"latency":0,"timeout":200}"#)
        #expect(cmd.fields.first { $0.name == "timeout" }?.note == "2000.00 ms")
        #expect(cmd.fields.first { $0.name == "intervalMin" }?.note == "7.50 ms")
    }

    @Test func lengthFieldMustMatch() {
        // Length says 8 but the data has 6 octets; and one where it says 4 but a known command needs 8.
        #expect(throws: DecodeError.truncated(field: "data", needed: 8, available: 6)) {
            try SignalingCommand.decode([0x12, 0x01, 0x08, 0x00, 0x06, 0x00, 0x0c, 0x00, 0x00, 0x00])
        }
        #expect(throws: DecodeError.self) { try SignalingCommand.decode([0x12, 0x01, 0x04, 0x00, 0x06, 0x00, 0x0c, 0x00]) }
        // More than 5 CIDs in an enhanced request.
        #expect(throws: DecodeError.self) {
            try SignalingCommand.decode([UInt8](hex: "17 06 14 00 80 00 00 02 f7 00 0a 00 40 00 41 00 42 00 43 00 44 00 45 00")!)
        }
        // Enhanced request without any source CID.
        #expect(throws: DecodeError.self) { try SignalingCommand.decode([UInt8](hex: "17 06 08 00 80 00 00 02 f7 00 0a 00")!) }
    }

    @Test func rejections() {
        // Unknown code → Command Reject, command not understood, same identifier.
        #expect(SignalingCommand.rejection(for: [0x30, 0x08, 0x00, 0x00])
                == SignalingCommand(identifier: 8, .commandReject(.commandNotUnderstood)))
        #expect(SignalingCommand(identifier: 8, .commandReject(.commandNotUnderstood)).bytes == [0x01, 0x08, 0x02, 0x00, 0x00, 0x00])
        // Malformed known command → reject.
        #expect(SignalingCommand.rejection(for: [0x12, 0x09, 0x02, 0x00, 0x06, 0x00])
                == SignalingCommand(identifier: 9, .commandReject(.commandNotUnderstood)))
        // Valid command, malformed Command Reject, or no identifier → nothing.
        #expect(SignalingCommand.rejection(for: [0x13, 0x01, 0x02, 0x00, 0x00, 0x00]) == nil)
        #expect(SignalingCommand.rejection(for: [0x01, 0x01, 0x01, 0x00, 0x00]) == nil)
        #expect(SignalingCommand.rejection(for: [0x30]) == nil)
    }

    @Test func resultNames() {
        let names: [UInt16: String] = [
            0x0000: "Connection successful", 0x0002: "Connection refused - SPSM not supported",
            0x0004: "Connection refused - no resources available", 0x0005: "Connection refused - insufficient authentication",
            0x0006: "Connection refused - insufficient authorization",
            0x0007: "Connection refused - insufficient encryption key size",
            0x0008: "Connection refused - insufficient encryption", 0x0009: "Connection refused - invalid Source CID",
            0x000A: "Connection refused - Source CID already allocated",
            0x000B: "Connection refused - unacceptable parameters",
        ]
        for (code, name) in names { #expect(CreditBasedConnectionResult(code).name == name) }
        #expect(CommandRejectReason.signalingMTUExceeded(actualMTU: 23).name == "Signaling MTU exceeded")
        #expect(SignalingCode.leCreditBasedConnectionRequest.isRequest && !SignalingCode.flowControlCreditInd.isRequest)
        let rsp = SignalingCommand(identifier: 4, .leCreditBasedConnectionResponse(destinationCID: 0, mtu: 0, mps: 0, initialCredits: 0,
                                                                                    result: .spsmNotSupported))
        #expect(rsp.fields.first { $0.name == "result" } == Field("result", .code("0x0002"), note: "Connection refused - SPSM not supported"))
    }

    @Test func hostileInputNeverTraps() {
        var state: UInt64 = 42
        func next() -> UInt8 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        for code in UInt8(0)...0x20 {
            for _ in 0..<200 {
                let dataLength = Int(next() % 24)
                let declared = next() % 4 == 0 ? Int(next() % 24) : dataLength
                let bytes = [code, next(), UInt8(declared), 0] + (0..<dataLength).map { _ in next() }
                if let cmd = try? SignalingCommand.decode(bytes) {
                    #expect(cmd.bytes == bytes)
                }
            }
        }
    }
}

@Suite struct SDUTests {
    @Test func segmentsWithSDULengthInFirstFrame() throws {
        let sdu = (0..<100).map { UInt8($0) }
        let frames = try segmentSDU(sdu, mps: 23)
        #expect(frames.map(\.count) == [23, 23, 23, 23, 10])
        #expect(Array(frames[0].prefix(2)) == [100, 0])
        #expect(Array(frames[0].dropFirst(2)) == Array(sdu[0..<21]))
        #expect(frames.dropFirst().joined().elementsEqual(sdu[21...]))
        #expect(try segmentSDU([], mps: 23) == [[0, 0]])
        #expect(try segmentSDU([1, 2, 3], mps: 23) == [[3, 0, 1, 2, 3]])
    }

    @Test func segmentRejectsOversizeAndBadMPS() {
        #expect(throws: SDUError.sduTooLarge(length: 101, mtu: 100)) { try segmentSDU([UInt8](repeating: 0, count: 101), mps: 23, mtu: 100) }
        #expect(throws: SDUError.sduTooLarge(length: 65536, mtu: 65535)) { try segmentSDU([UInt8](repeating: 0, count: 65536), mps: 1000) }
        #expect(throws: SDUError.invalidMPS(2)) { try segmentSDU([1], mps: 2) }
    }

    @Test func reassemblesSegments() throws {
        let sdu = (0..<1000).map { UInt8(truncatingIfNeeded: $0 * 7) }
        var r = SDUReassembler(mtu: 1000, mps: 64)
        let frames = try segmentSDU(sdu, mps: 64)
        var out: [[UInt8]] = []
        for (i, f) in frames.enumerated() {
            if let done = try r.push(f) { out.append(done) } else { #expect(r.isReassembling, "frame \(i)") }
        }
        #expect(out == [sdu])
        #expect(!r.isReassembling)
        // And the next SDU, an empty one, in one frame.
        #expect(try r.push([0, 0]) == [])
    }

    @Test func truncatedSDUWaitsAndCanBeReset() throws {
        var r = SDUReassembler(mtu: 100, mps: 23)
        #expect(try r.push([10, 0, 1, 2, 3]) == nil)
        #expect(r.missing == 7)
        r.reset()
        #expect(!r.isReassembling && r.missing == 0)
        #expect(try r.push([2, 0, 9, 9]) == [9, 9])
    }

    @Test func oversizeAndMalformedThrowWithoutGrowing() {
        var r = SDUReassembler(mtu: 50, mps: 23)
        // SDU Length 51 > MTU: refused before any buffering.
        #expect(throws: SDUError.sduTooLarge(length: 51, mtu: 50)) { try r.push([51, 0, 1]) }
        #expect(!r.isReassembling)
        // SDU Length 0xFFFF: refused too (bounded memory).
        #expect(throws: SDUError.sduTooLarge(length: 65535, mtu: 50)) { try r.push([0xff, 0xff]) }
        // More octets than announced.
        #expect(throws: SDUError.overrun(expected: 2, received: 3)) { try r.push([2, 0, 1, 2, 3]) }
        #expect(throws: Never.self) { _ = try r.push([5, 0, 1, 2]) }
        #expect(throws: SDUError.overrun(expected: 5, received: 6)) { try r.push([3, 4, 5, 6]) }
        #expect(!r.isReassembling)
        // First frame without a complete SDU Length; frame above MPS.
        #expect(throws: SDUError.missingSDULength) { try r.push([1]) }
        #expect(throws: SDUError.frameTooLarge(length: 24, mps: 23)) { try r.push([UInt8](repeating: 0, count: 24)) }
    }
}
