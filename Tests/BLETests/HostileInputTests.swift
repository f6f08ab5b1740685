import Testing
import TestSupport
import HCI
import Host
import L2CAP
import ATT
import GATT
import SMP
import VirtualController
import BLE

/// A raw `Host` connected to our demo `Peripheral` sends thousands of hostile L2CAP frames
/// (fixed seed) one at a time and checks every answer against the Core specification:
/// every ATT request gets exactly the one PDU the spec requires, octet for octet (Invalid PDU,
/// Request Not Supported, each Error Response's code and handle, each response's content from
/// `DemoDatabase`, a model of the table written from the profile), bad signaling gets Command
/// Reject, and nothing else is answered. SMP is a state machine (a Pairing Request may start a
/// pairing, and PDUs out of order then fail it), so its answers are collected apart: each must be
/// a Pairing Response or a Pairing Failed (Core Vol 3 Part H 3.5). The peripheral must be alive
/// and correct afterwards.
@Suite(.timeLimit(.minutes(1))) struct HostileInputTests {
    static let frameCount = 5000
    static let mtu = 517

    @Test func peripheralSurvivesAndAnswersHostileFramesPerSpec() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 3)
        var options = StackOptions()
        options.attTimeout = .seconds(5)
        let peripheral = try await Peripheral.open(transports[0], services: DemoProfile.services, name: "ble-hci", options: options)
        try await peripheral.startAdvertising(AdvertisingOptions(name: "hostile", restartAfterDisconnection: false))
        let attacker = Host(transport: transports[1])
        _ = try await attacker.start()
        let link = try await connect(attacker, toAdvertiserNamed: "hostile")
        let inbox = Inbox()
        let reader = Task { for await f in link.frames { inbox.put(f) } }

        let model = DemoDatabase(deviceName: "ble-hci", databaseHash: peripheral.server.databaseHash, mtu: Self.mtu)
        // The model is written from the profile: check it describes this server's table.
        #expect(peripheral.server.attributeTypes.map(\.type) == model.attributes.map(\.type))
        let nameHandle = try #require(peripheral.server.valueHandle(of: DemoProfile.name))
        #expect(nameHandle == DemoDatabase.nameHandle)
        var generator = HostileFrames(rng: SeededGenerator(seed: 0x5EED_B1E), model: model, mtu: Self.mtu)
        let ping = Probe(frame: L2CAPFrame(cid: .att, payload: ATTPDU.readRequest(handle: nameHandle).bytes).bytes,
                         expectation: Expectation("Read Response \"ble-hci\"", cid: 0x0004) {
                             $0 == ATTPDU.readResponse(value: Array("ble-hci".utf8)).bytes
                         })

        // Well-formed first, so PDUs up to 517 octets are within ATT_MTU.
        let mtu = Probe(frame: L2CAPFrame(cid: .att, payload: ATTPDU.exchangeMTURequest(clientRxMTU: UInt16(Self.mtu)).bytes).bytes,
                        expectation: Expectation("Exchange MTU Response", cid: 0x0004) {
                            $0 == ATTPDU.exchangeMTUResponse(serverRxMTU: UInt16(Self.mtu)).bytes
                        })
        var tally: [String: Int] = [:]
        var failure = await exchange(mtu, attacker, link.handle, inbox, &tally)
        for i in 0..<Self.frameCount where failure == nil {
            failure = await exchange(generator.next(), attacker, link.handle, inbox, &tally)
            // The ping also proves nothing was answered that should not have been.
            if failure == nil, i % 100 == 99 { failure = await exchange(ping, attacker, link.handle, inbox, &tally) }
        }
        if failure == nil { failure = await exchange(ping, attacker, link.handle, inbox, &tally) }
        if let failure { Issue.record("\(failure)") }

        // Every kind of answer the spec asks for was exercised.
        for kind in ["ATT Invalid PDU", "ATT Invalid PDU (longer than ATT_MTU)", "Exchange MTU Response", "ATT Request Not Supported", "ATT Invalid Handle", "ATT response",
                     "Handle Value Confirmation", "Command Reject", "Command Reject (Invalid CID)",
                     "Credit Based Connection refused", "Reconfigure refused", "no answer"] {
            #expect(tally[kind, default: 0] > 0, "no \(kind) exercised: \(tally)")
        }
        let smpAnswers = inbox.smpAnswers
        let malformed = smpAnswers.filter { pdu in
            !((pdu.count == 7 && pdu[0] == SMPPDU.Code.pairingResponse) || (pdu.count == 2 && pdu[0] == SMPPDU.Code.pairingFailed))
        }
        #expect(malformed.isEmpty, "SMP answers other than Pairing Response / Pairing Failed: \(malformed.map(hex))")
        #expect(smpAnswers.contains { $0.first == SMPPDU.Code.pairingFailed }, "no Pairing Failed exercised")
        #expect(await attacker.connection(link.handle) != nil, "the peripheral dropped the link")
        #expect(peripheral.server.value(of: DemoProfile.name) == Array("ble-hci".utf8))

        // A well-behaved central on another controller still gets the whole demo profile.
        try await peripheral.startAdvertising(AdvertisingOptions(name: "hostile"))
        let central = try await Central.open(transports[2], options: options)
        let remote = try await central.connect(to: try await central.find(ScanFilter(nameContains: "hostile"), timeout: .seconds(5)).address)
        let tree = try await remote.discoverAll()
        #expect(tree.map(\.service.uuid) == [0x1800, 0x1801, 0xFFF0, 0xFFE0])
        let name = try #require(tree.first { $0.service.uuid == 0xFFF0 }?.characteristics.first { $0.characteristic.uuid == 0xFFF2 })
        #expect(try await remote.read(name.characteristic) == Array("ble-hci".utf8))

        reader.cancel()
        await central.close()
        await attacker.close()
        await peripheral.close()
    }

    /// Scans with the raw host for `name`, connects and returns the link.
    private func connect(_ host: Host, toAdvertiserNamed name: String) async throws -> LEConnection {
        try await host.startScanning()
        var found: AdvertisingReportValue?
        for await e in host.events {
            if case .advertisement(let r) = e, AdvertisingData(parsing: r.data).name == name, r.isConnectable { found = r; break }
        }
        try await host.stopScanning()
        return try await host.connect(to: try #require(found).address)
    }

    /// Sends one frame and, if the spec asks for an answer, checks the next frame received is it.
    /// Returns what went wrong, or nil.
    private func exchange(_ probe: Probe, _ host: Host, _ handle: UInt16, _ inbox: Inbox,
                  _ tally: inout [String: Int]) async -> String? {
        do {
            try await host.sendL2CAP(probe.frame, on: handle)
        } catch {
            return "sending \(hex(probe.frame)) failed: \(error)"
        }
        guard let e = probe.expectation else {
            tally["no answer", default: 0] += 1
            return nil
        }
        guard let frame = await inbox.next(timeout: .seconds(2)) else {
            return "no \(e.name) within 2 s to \(hex(probe.frame))"
        }
        guard let f = try? L2CAPFrame.decode(frame), f.cid.rawValue == e.cid, e.accepts(f.payload) else {
            return "\(hex(probe.frame)) was answered with \(hex(frame)); expected \(e.name) on CID \(e.cid)"
        }
        tally[e.name, default: 0] += 1
        return nil
    }
}

/// A frame to send and the answer it must get (nil: none).
private struct Probe {
    let frame: [UInt8]
    let expectation: Expectation?
}

private struct Expectation {
    let name: String
    let cid: UInt16
    let accepts: @Sendable ([UInt8]) -> Bool
    init(_ name: String, cid: UInt16, accepts: @escaping @Sendable ([UInt8]) -> Bool) {
        self.name = name
        self.cid = cid
        self.accepts = accepts
    }
}

/// Frames received by the raw host, read with a timeout (each frame wakes the reader).
private final class Inbox: Sendable {
    private struct State: Sendable {
        var frames: [[UInt8]] = []
        var head = 0
        /// SMP payloads received (CID 0x0006), kept apart from the strict request/answer checks.
        var smpAnswers: [[UInt8]] = []
    }
    private let state = Watched(State())

    var smpAnswers: [[UInt8]] { state.value.smpAnswers }

    func put(_ frame: [UInt8]) {
        state.withLock { s in
            if let f = try? L2CAPFrame.decode(frame), f.cid == .smp { s.smpAnswers.append(f.payload) } else { s.frames.append(frame) }
        }
    }

    /// The next frame not yet read, or nil when none comes within `timeout`.
    func next(timeout: Duration) async -> [UInt8]? {
        guard (try? await state.until("a frame", timeout: timeout, { $0.frames.count > $0.head })) != nil else { return nil }
        return state.withLock { s in
            s.head += 1
            return s.frames[s.head - 1]
        }
    }
}

/// Hostile frames with the answers the Core specification requires of a peripheral that has
/// no credit-based channels, no listeners and no pairing.
private struct HostileFrames {
    var rng: SeededGenerator
    /// What every well-formed request must get.
    let model: DemoDatabase
    let mtu: Int
    var attributeCount: Int { model.attributes.count }

    mutating func next() -> Probe {
        switch int(0..<10) {
        case 0..<6: return att()
        case 6..<8: return signaling()
        case 8: return smp()
        default: return otherChannel()
        }
    }

    // MARK: random values

    mutating func int(_ r: Range<Int>) -> Int { Int.random(in: r, using: &rng) }
    mutating func int(_ r: ClosedRange<Int>) -> Int { Int.random(in: r, using: &rng) }
    mutating func chance(_ percent: Int) -> Bool { int(0..<100) < percent }
    mutating func byte() -> UInt8 { UInt8.random(in: 0...255, using: &rng) }
    mutating func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in byte() } }
    mutating func u16() -> UInt16 { UInt16.random(in: 0...0xFFFF, using: &rng) }
    /// Mostly the database's handles and their neighbours (0 and past the end included).
    mutating func handle() -> UInt16 { chance(70) ? UInt16(int(0...(attributeCount + 2))) : u16() }
    func le(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }

    // MARK: ATT (CID 0x0004)

    static let attOpcodes: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,
                                      0x0F, 0x10, 0x11, 0x12, 0x13, 0x16, 0x17, 0x18, 0x19, 0x1B, 0x1D, 0x1E, 0x20, 0x21,
                                      0x23, 0x52, 0xD2]

    mutating func att() -> Probe {
        let op = chance(20) ? byte() : Self.attOpcodes[int(0..<Self.attOpcodes.count)]
        var pdu = [op] + attBody(op)
        switch int(0..<5) {
        case 0: break                                                         // well-formed
        case 1: pdu = Array(pdu.prefix(int(0...pdu.count)))                   // truncated (even empty)
        case 2: if pdu.count < mtu { pdu += bytes(int(1...(mtu - pdu.count))) } // oversized, up to the MTU
        case 3: pdu += bytes(mtu + int(1...40) - pdu.count)                   // longer than ATT_MTU
        default: pdu = [op] + bytes(int(0...(mtu - 1)))                       // random length
        }
        // Writes leave the writable attributes alone (handle 0 instead), so the database
        // stays the model's and every answer is known exactly.
        if let first = pdu.first, [0x12, 0x16, 0x52, 0xD2].contains(first), pdu.count >= 3,
           DemoDatabase.writableHandles.contains(UInt16(pdu[1]) | UInt16(pdu[2]) << 8) {
            pdu[1] = 0; pdu[2] = 0
        }
        return Probe(frame: L2CAPFrame(cid: .att, payload: pdu).bytes, expectation: attAnswer(pdu))
    }

    mutating func attBody(_ op: UInt8) -> [UInt8] {
        switch op {
        case 0x01: return [byte()] + le(handle()) + [byte()]
        case 0x02, 0x03: return le(chance(50) ? UInt16(int(0...600)) : u16())
        case 0x04: return le(handle()) + le(handle())
        case 0x05: let format = UInt8(int(1...3)); return [format] + bytes(int(1...4) * (format == 2 ? 18 : 4))
        case 0x06: return le(handle()) + le(handle()) + le(chance(50) ? 0x2800 : u16()) + bytes(int(0...16))
        case 0x07: return bytes(4 * int(1...5))
        case 0x08, 0x10:
            let uuid = chance(70) ? le([0x2800, 0x2803, 0xFFF2, u16()][int(0..<4)]) : bytes(16)
            return le(handle()) + le(chance(10) ? 0xFFFF : handle()) + uuid
        case 0x09, 0x11: let n = int(2...20); return [UInt8(n)] + bytes(n * int(1...3))
        case 0x0A: return le(handle())
        case 0x0C: return le(handle()) + le(chance(50) ? UInt16(int(0...30)) : u16())
        case 0x0E, 0x20: return (0..<int(2...8)).flatMap { _ in le(handle()) }
        case 0x12, 0x52: return le(handle()) + bytes(chance(80) ? int(0...20) : int(0...(mtu - 3)))
        case 0xD2: return le(handle()) + bytes(int(0...20)) + bytes(12)
        case 0x16, 0x17: return le(handle()) + le(UInt16(int(0...40))) + bytes(int(0...20))
        case 0x18: return [chance(80) ? UInt8(int(0...1)) : byte()]
        case 0x1B, 0x1D: return le(handle()) + bytes(int(0...20))
        case 0x13, 0x19, 0x1E: return []
        case 0x23: return (0..<int(1...3)).flatMap { _ in le(handle()) + le(2) + bytes(2) }
        default: return bytes(int(0...20))
        }
    }

    /// Core Vol 3 Part F 3.3, 3.4.1.1: a malformed request → Invalid PDU; an unknown request →
    /// Request Not Supported; a well-formed request → its response or an Error Response naming
    /// it (Invalid Handle for handle 0, past the database, or a start above the end); an
    /// indication → Handle Value Confirmation; everything else → silence.
    func attAnswer(_ pdu: [UInt8]) -> Expectation? {
        guard let first = pdu.first else { return nil }
        let op = ATTOpcode(first)
        func error(_ code: ATTErrorCode, _ name: String, handle: UInt16? = nil) -> Expectation {
            Expectation("ATT \(name)", cid: 0x0004) { answer in
                guard case let .errorResponse(o, h, c)? = try? ATTPDU.decode(answer) else { return false }
                return o == op && c == code && (handle == nil || h == handle)
            }
        }
        // Core v5.4 Vol 3 Part F 3.2.8: no PDU is longer than ATT_MTU; a longer request is
        // Invalid PDU (Table 3.4), a longer command is dropped.
        if pdu.count > mtu, op.isRequest { return error(.invalidPDU, "Invalid PDU (longer than ATT_MTU)", handle: 0) }
        if pdu.count > mtu, op.isCommand, op.isKnown { return nil }
        let badHandle = { (h: UInt16) in h == 0 || Int(h) > attributeCount }
        // Anything else well-formed: the exact PDU the model says (code and handle included).
        let answered = { (p: ATTPDU) -> Expectation in
            let exact = model.answer(to: p)
            return Expectation("ATT response", cid: 0x0004) { $0 == exact }
        }
        guard case .pdu(let p) = ATTPDU.decodeResult(pdu) else {
            return op.isRequest ? error(.invalidPDU, "Invalid PDU", handle: 0) : nil
        }
        switch p {
        case .unknown:
            return op.isCommand ? nil : error(.requestNotSupported, "Request Not Supported", handle: 0)
        case .exchangeMTURequest:
            // Core v5.4 Vol 3 Part F 3.4.2.2: answered with the Server Rx MTU whatever the
            // Client Rx MTU (below 23 leaves ATT_MTU at 23; a repeated exchange changes nothing).
            return Expectation("Exchange MTU Response", cid: 0x0004) {
                $0 == ATTPDU.exchangeMTUResponse(serverRxMTU: UInt16(HostileInputTests.mtu)).bytes
            }
        case .readRequest(let h), .readBlobRequest(let h, _), .writeRequest(let h, _), .prepareWriteRequest(let h, _, _):
            return badHandle(h) ? error(.invalidHandle, "Invalid Handle", handle: h) : answered(p)
        case .findInformationRequest(let s, let e), .findByTypeValueRequest(let s, let e, _, _),
             .readByTypeRequest(let s, let e, _), .readByGroupTypeRequest(let s, let e, _):
            return s == 0 || s > e ? error(.invalidHandle, "Invalid Handle", handle: s) : answered(p)
        case .executeWriteRequest(let flags) where flags.rawValue > 1:
            return error(.invalidPDU, "Invalid PDU", handle: 0)
        case .handleValueIndication:
            return Expectation("Handle Value Confirmation", cid: 0x0004) { $0 == [ATTOpcode.handleValueConfirmation.rawValue] }
        default:
            return op.isRequest ? answered(p) : nil
        }
    }

    // MARK: LE signaling (CID 0x0005)

    /// Data length each known command must have (Core Vol 3 Part A 4); nil: a range of CIDs.
    static let signalingDataLength: [UInt8: [Int]] = [
        0x01: [2, 4, 6], 0x06: [4], 0x07: [4], 0x12: [8], 0x13: [2], 0x14: [10], 0x15: [10], 0x16: [4],
        0x17: (1...5).map { 8 + 2 * $0 }, 0x18: (0...5).map { 8 + 2 * $0 }, 0x19: (1...5).map { 4 + 2 * $0 }, 0x1A: [2],
    ]

    mutating func signaling() -> Probe {
        let known = Array(Self.signalingDataLength.keys).sorted()
        let code = chance(70) ? known[int(0..<known.count)] : byte()
        // Identifier 0 is never valid (Core Vol 3 Part A 4); what a receiver does with it is unspecified.
        let identifier = UInt8(int(1...255))
        let lengths = Self.signalingDataLength[code] ?? [int(0...12)]
        let data = bytes(chance(60) ? lengths[int(0..<lengths.count)] : int(0...19))
        var length = UInt16(data.count)
        if chance(20) { length = UInt16(int(0...30)) }
        var payload = [code, identifier] + le(length) + data
        if chance(5) { payload = Array(payload.prefix(int(0...3))) }
        return Probe(frame: L2CAPFrame(cid: .leSignaling, payload: payload).bytes, expectation: signalingAnswer(payload))
    }

    /// Core Vol 3 Part A 4.1: a command not understood (unknown code, wrong length) → Command
    /// Reject with its identifier, except a Command Reject itself. A peripheral rejects
    /// Connection Parameter Update Requests (4.20); Disconnection Requests for channels that
    /// don't exist get Invalid CID (4.6); credit-based connection requests are refused with
    /// their response (4.22, 4.25); Reconfigure Requests name no channel of ours: result 0x0003
    /// (invalid Destination CIDs) or, for an MTU or MPS below 64, 0x0004 (4.28).
    func signalingAnswer(_ payload: [UInt8]) -> Expectation? {
        guard payload.count >= 2, payload[0] != 0x01 else { return nil }
        let code = payload[0], identifier = payload[1]
        func reject(_ reason: UInt16, _ name: String) -> Expectation {
            Expectation(name, cid: 0x0005) { a in
                a.count >= 6 && a[0] == 0x01 && a[1] == identifier && UInt16(a[4]) | UInt16(a[5]) << 8 == reason
            }
        }
        let wellFormed = payload.count >= 4
            && Int(payload[2]) | Int(payload[3]) << 8 == payload.count - 4
            && Self.signalingDataLength[code]?.contains(payload.count - 4) == true
        guard wellFormed else { return reject(0x0000, "Command Reject") }
        switch code {
        case 0x06: return reject(0x0002, "Command Reject (Invalid CID)")
        case 0x12: return reject(0x0000, "Command Reject")
        case 0x19:
            return Expectation("Reconfigure refused", cid: 0x0005) { a in
                a.count == 6 && a[0] == 0x1A && a[1] == identifier && a[2] == 2 && a[3] == 0 && (a[4] == 3 || a[4] == 4) && a[5] == 0
            }
        case 0x14, 0x17:
            return Expectation("Credit Based Connection refused", cid: 0x0005) { a in
                guard a.count >= 4, a[0] == code + 1, a[1] == identifier else { return false }
                let result = code == 0x14 ? a.dropFirst(12).prefix(2) : a.dropFirst(10).prefix(2)
                return result.count == 2 && result != [0, 0]
            }
        default:
            return nil  // responses and credit indications for nothing we asked
        }
    }

    // MARK: SMP (CID 0x0006)

    mutating func smp() -> Probe {
        var payload: [UInt8]
        if chance(30) {
            payload = SMPPDU.pairingRequest(SMPPairingParameters(
                ioCapability: SMPIOCapability(rawValue: UInt8(int(0...5))), authReq: SMPAuthReq(rawValue: byte()),
                maxEncryptionKeySize: UInt8(int(0...20)), initiatorKeyDistribution: SMPKeyDistribution(rawValue: byte()),
                responderKeyDistribution: SMPKeyDistribution(rawValue: byte()))).bytes
        } else {
            payload = [chance(80) ? UInt8(int(0...0x10)) : byte()] + bytes(int(0...70))
            if chance(5) { payload = [] }
        }
        // Answers (if any) are collected by the inbox and checked at the end.
        let answer: Expectation? = nil
        return Probe(frame: L2CAPFrame(cid: .smp, payload: payload).bytes, expectation: answer)
    }

    // MARK: other channels and broken basic headers

    mutating func otherChannel() -> Probe {
        if chance(30) {
            // A Length field that disagrees with the payload: dropped by the reassembler. One
            // ACL fragment (27 octets), so no shorter prefix of it can pass as a whole frame.
            let payload = bytes(int(1...22))
            var frame = L2CAPFrame(cid: .att, payload: payload).bytes
            let wrong = chance(50) ? payload.count + int(1...100) : int(0..<payload.count)
            frame[0] = UInt8(wrong & 0xFF)
            frame[1] = UInt8(wrong >> 8)
            return Probe(frame: frame, expectation: nil)
        }
        var cid = u16()
        if (4...6).contains(cid) { cid = 0x0040 + UInt16(int(0...0x3F)) }  // dynamic, but no channel is open
        return Probe(frame: L2CAPFrame(cid: L2CAPCID(cid), payload: bytes(int(0...100))).bytes, expectation: nil)
    }
}

private func hex(_ bytes: [UInt8]) -> String {
    let shown = bytes.prefix(24).map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
    return shown.joined(separator: " ") + (bytes.count > 24 ? " … (\(bytes.count) octets)" : "")
}

/// The demo peripheral's attribute table as Core v5.4 Vol 3 Part G 3 lays it out for
/// `DemoProfile.services` after the mandatory GAP and GATT services (written here from the
/// profile, not read from the server), and the answer the specification requires from it for
/// each well-formed request of an unencrypted client at ATT_MTU `mtu`. The Database Hash is
/// taken from the server (its computation is checked against the spec elsewhere).
struct DemoDatabase {
    struct Attribute { let type: BluetoothUUID; let value: [UInt8]; let readable: Bool; let groupEnd: UInt16 }
    /// Attribute `h` is at index h − 1.
    let attributes: [Attribute]
    let mtu: Int

    /// Service Changed CCCD, Client Supported Features, FFF1's CCCD, FFF2: the hostile frames
    /// never write them, so the table stays as built.
    static let writableHandles: Set<UInt16> = [0x0009, 0x000B, 0x0011, 0x0013]
    static let nameHandle: UInt16 = 0x0013

    init(deviceName: String, databaseHash: [UInt8], mtu: Int) {
        func a(_ type: BluetoothUUID, _ value: [UInt8], readable: Bool = true, end: UInt16 = 0) -> Attribute {
            Attribute(type: type, value: value, readable: readable, groupEnd: end)
        }
        // Characteristic declaration value: properties, value handle, UUID (Part G 3.3.1).
        func decl(_ properties: UInt8, _ valueHandle: UInt16, _ uuid: UInt16) -> Attribute {
            a(0x2803, [properties, UInt8(valueHandle & 0xFF), UInt8(valueHandle >> 8), UInt8(uuid & 0xFF), UInt8(uuid >> 8)])
        }
        var table: [Attribute] = [
            a(0x2800, [0x00, 0x18], end: 0x0005),                 // 0001 GAP
            decl(0x02, 0x0003, 0x2A00), a(0x2A00, Array(deviceName.utf8)),
            decl(0x02, 0x0005, 0x2A01), a(0x2A01, [0x00, 0x00]),  // Appearance 0 (unknown)
            a(0x2800, [0x01, 0x18], end: 0x000D),                 // 0006 GATT
            decl(0x20, 0x0008, 0x2A05), a(0x2A05, [0, 0, 0, 0], readable: false), a(0x2902, [0x00, 0x00]),
            decl(0x0A, 0x000B, 0x2B29), a(0x2B29, [0x00]),
            decl(0x02, 0x000D, 0x2B2A), a(0x2B2A, databaseHash),
            a(0x2800, [0xF0, 0xFF], end: 0x0014),                 // 000E FFF0
            decl(0x10, 0x0010, 0xFFF1), a(0xFFF1, [], readable: false), a(0x2902, [0x00, 0x00]),
            decl(0x0A, 0x0013, 0xFFF2), a(0xFFF2, Array("ble-hci".utf8)), a(0x2901, Array("name".utf8)),
            a(0x2800, [0xE0, 0xFF], end: 0x0017),                 // 0015 FFE0
            decl(0x02, 0x0017, 0xFFE1), a(0xFFE1, Array("read only".utf8)),
        ]
        for i in table.indices where table[i].groupEnd == 0 {
            table[i] = Attribute(type: table[i].type, value: table[i].value, readable: table[i].readable, groupEnd: UInt16(i + 1))
        }
        attributes = table
        self.mtu = mtu
    }

    func attribute(_ h: UInt16) -> Attribute? { h >= 1 && Int(h) <= attributes.count ? attributes[Int(h) - 1] : nil }
    func error(_ op: ATTOpcode, _ h: UInt16, _ code: ATTErrorCode) -> [UInt8] {
        ATTPDU.errorResponse(requestOpcode: op, handle: h, error: code).bytes
    }
    /// Part F 3.4.4.3 / 3.4.4.5 / 3.4.4.7: Invalid Handle, else Read Not Permitted, naming the handle.
    func readError(_ op: ATTOpcode, _ h: UInt16) -> [UInt8]? {
        guard let a = attribute(h) else { return error(op, h, .invalidHandle) }
        return a.readable ? nil : error(op, h, .readNotPermitted)
    }
    /// The handles of `start...end` that exist.
    func range(_ start: UInt16, _ end: UInt16) -> ClosedRange<Int>? {
        let last = min(Int(end), attributes.count)
        return Int(start) <= last ? Int(start)...last : nil
    }

    /// The exact answer to a well-formed request no longer than ATT_MTU.
    func answer(to request: ATTPDU) -> [UInt8] {
        let op = request.opcode
        switch request {
        case let .readRequest(h):                                               // 3.4.4.3
            if let e = readError(op, h) { return e }
            return ATTPDU.readResponse(value: Array(attribute(h)!.value.prefix(mtu - 1))).bytes
        case let .readBlobRequest(h, offset):                                   // 3.4.4.5
            if let e = readError(op, h) { return e }
            let v = attribute(h)!.value, o = Int(offset)
            guard o <= v.count else { return error(op, h, .invalidOffset) }
            return ATTPDU.readBlobResponse(value: Array(v[o..<min(v.count, o + mtu - 1)])).bytes
        case let .readMultipleRequest(handles):                                 // 3.4.4.7
            for h in handles { if let e = readError(op, h) { return e } }
            return ATTPDU.readMultipleResponse(values: Array(handles.flatMap { attribute($0)!.value }.prefix(mtu - 1))).bytes
        case let .readMultipleVariableRequest(handles):                         // 3.4.4.11–12
            for h in handles { if let e = readError(op, h) { return e } }
            var tuples: [ATTLengthValue] = [], room = mtu - 1
            for h in handles where room >= 2 {
                let v = attribute(h)!.value
                tuples.append(ATTLengthValue(length: UInt16(v.count), value: Array(v.prefix(room - 2))))
                room -= 2 + min(v.count, room - 2)
            }
            return ATTPDU.readMultipleVariableResponse(tuples).bytes
        case let .readByTypeRequest(start, end, type):                          // 3.4.4.1–2
            let found = range(start, end).map { $0.filter { attributes[$0 - 1].type == type } } ?? []
            guard let first = found.first else { return error(op, start, .attributeNotFound) }
            guard attributes[first - 1].readable else { return error(op, UInt16(first), .readNotPermitted) }
            var list: [ATTHandleValue] = [], used = 2
            for h in found {
                let a = attributes[h - 1]
                // Stop at an unreadable one, a different length, or a full PDU.
                let v = Array(a.value.prefix(min(mtu - 4, 253)))
                guard a.readable, v.count == list.first?.value.count ?? v.count, used + 2 + v.count <= mtu else { break }
                list.append(ATTHandleValue(handle: UInt16(h), value: v))
                used += 2 + v.count
            }
            return ATTPDU.readByTypeResponse(list).bytes
        case let .readByGroupTypeRequest(start, end, type):                     // 3.4.4.9–10
            guard type == 0x2800 || type == 0x2801 else { return error(op, start, .unsupportedGroupType) }
            var list: [ATTGroupData] = [], used = 2
            var h = Int(start)
            while let r = range(UInt16(h), end), h <= r.upperBound {
                let a = attributes[h - 1]
                guard a.type == type else { h += 1; continue }
                guard a.value.count == list.first?.value.count ?? a.value.count, used + 4 + a.value.count <= mtu else { break }
                list.append(ATTGroupData(handle: UInt16(h), endGroupHandle: a.groupEnd, value: a.value))
                used += 4 + a.value.count
                h = Int(a.groupEnd) + 1
            }
            return list.isEmpty ? error(op, start, .attributeNotFound) : ATTPDU.readByGroupTypeResponse(list).bytes
        case let .findInformationRequest(start, end):                           // 3.4.3.1–2
            guard let r = range(start, end) else { return error(op, start, .attributeNotFound) }
            // Every type here is a 16-bit UUID: format 0x01, 4 octets per entry.
            let list = r.prefix((mtu - 2) / 4).map { ATTHandleUUID(handle: UInt16($0), uuid: attributes[$0 - 1].type) }
            return ATTPDU.findInformationResponse(format: .uuid16, information: list).bytes
        case let .findByTypeValueRequest(start, end, type, value):              // 3.4.3.3–4
            // Only values the client may read are compared (3.2.5). A service UUID given in
            // its 128-bit form is the same UUID as its 16-bit alias (Core Vol 3 Part B 2.5.1).
            let isGroup = type == 0x2800 || type == 0x2801
            let wanted = isGroup ? BluetoothUUID(littleEndian: value) : nil
            var list: [ATTHandlesInformation] = []
            var h = Int(start)
            while let r = range(UInt16(h), end), h <= r.upperBound, list.count < (mtu - 1) / 4 {
                let a = attributes[h - 1]
                if a.type == BluetoothUUID(type), a.readable,
                   wanted.map({ BluetoothUUID(littleEndian: a.value) == $0 }) ?? (a.value == value) {
                    list.append(ATTHandlesInformation(foundAttributeHandle: UInt16(h), groupEndHandle: a.groupEnd))
                }
                h = a.type == BluetoothUUID(type) && isGroup ? Int(a.groupEnd) + 1 : h + 1
            }
            return list.isEmpty ? error(op, start, .attributeNotFound) : ATTPDU.findByTypeValueResponse(list).bytes
        case let .writeRequest(h, _), let .prepareWriteRequest(h, _, _):        // 3.4.5.1, 3.4.6.1
            // Nothing the hostile frames write to is writable.
            return attribute(h) == nil ? error(op, h, .invalidHandle) : error(op, h, .writeNotPermitted)
        case .executeWriteRequest:                                              // 3.4.6.3: nothing queued
            return ATTPDU.executeWriteResponse.bytes
        default:
            return error(op, 0, .requestNotSupported)
        }
    }
}
