import Foundation
import Testing
import TestSupport
import VirtualController

/// The differential of issue 29: the same HCI command sequences, as raw H4 octets, to our virtual
/// controller (served over TCP by `H4Server`, as `ble-hci controllers` does) and to Rootcanal
/// (Android's virtual controller, an independent implementation). For every command the event
/// that answers it (Command Complete 0x0E or Command Status 0x0F), its status and the length of
/// its return parameters must be the same on both, and so must the events that follow it within
/// a moment (LE meta events, by subevent code and status). Every step also names the status the
/// Core specification (v5.4, Vol 4 Part E unless said) requires, and our answer must be that one.
/// Where the two differ on purpose, `intendedDifferences` says so with the section that backs ours.
///
/// Each sequence starts on a fresh controller of each (a new H4Server; a new connection to
/// Rootcanal is a new controller) with HCI_Reset.
@Suite(.serialized, .rootcanal, .timeLimit(.minutes(2)))
struct RootcanalDifferentialTests {
    // MARK: - The sequences

    /// One command of a sequence.
    struct Step: Sendable, CustomStringConvertible {
        let name: String
        let opcode: UInt16
        let parameters: [UInt8]
        /// The status the Core specification requires (nil: whatever the state makes it, e.g. a
        /// read whose status is not the point), and the section that says so.
        let spec: HCIStatusCode?
        let section: String
        /// Collect the events that follow the answer for this long (LE meta events).
        var followUp: TimeInterval = 0
        var description: String { "\(name) (0x\(String(opcode, radix: 16)))" }
    }

    /// Status codes of Core v5.4 Vol 1 Part F, by value.
    enum HCIStatusCode: UInt8, Sendable {
        case success = 0x00, unknownCommand = 0x01, unknownConnection = 0x02, commandDisallowed = 0x0C
        case unsupportedParameter = 0x11, invalidParameters = 0x12
    }

    static func u16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
    static func u24(_ v: UInt32) -> [UInt8] { [UInt8(v & 0xFF), UInt8((v >> 8) & 0xFF), UInt8((v >> 16) & 0xFF)] }

    static let reset = Step(name: "Reset", opcode: 0x0C03, parameters: [], spec: .success, section: "7.3.2")
    /// Every event of page 1 (7.3.1) and every LE meta subevent (7.8.1): nothing masked.
    static let setEventMask = Step(name: "Set Event Mask (all)", opcode: 0x0C01, parameters: [UInt8](repeating: 0xFF, count: 8),
                                   spec: .success, section: "7.3.1")
    static let leSetEventMask = Step(name: "LE Set Event Mask (all)", opcode: 0x2001, parameters: [UInt8](repeating: 0xFF, count: 8),
                                     spec: .success, section: "7.8.1")

    /// LE Set Advertising Parameters (7.8.5): Advertising_Interval_Min/Max, Advertising_Type,
    /// Own_Address_Type, Peer_Address_Type, Peer_Address, Advertising_Channel_Map,
    /// Advertising_Filter_Policy.
    static func advertisingParameters(_ name: String, min: UInt16 = 0x0800, max: UInt16 = 0x0800, type: UInt8 = 0x00,
                                      own: UInt8 = 0x00, peerType: UInt8 = 0x00, map: UInt8 = 0x07, policy: UInt8 = 0x00,
                                      spec: HCIStatusCode) -> Step {
        Step(name: "LE Set Advertising Parameters: \(name)", opcode: 0x2006,
             parameters: u16(min) + u16(max) + [type, own, peerType] + [0x11, 0x22, 0x33, 0x44, 0x55, 0x66] + [map, policy],
             spec: spec, section: "7.8.5")
    }

    /// LE Set Scan Parameters (7.8.10): LE_Scan_Type, LE_Scan_Interval, LE_Scan_Window,
    /// Own_Address_Type, Scanning_Filter_Policy.
    static func scanParameters(_ name: String, type: UInt8 = 0x01, interval: UInt16 = 0x0010, window: UInt16 = 0x0010,
                               own: UInt8 = 0x00, policy: UInt8 = 0x00, spec: HCIStatusCode) -> Step {
        Step(name: "LE Set Scan Parameters: \(name)", opcode: 0x200B,
             parameters: [type] + u16(interval) + u16(window) + [own, policy], spec: spec, section: "7.8.10")
    }

    /// LE Create Connection (7.8.12): LE_Scan_Interval, LE_Scan_Window, Initiator_Filter_Policy,
    /// Peer_Address_Type, Peer_Address (nobody advertises it), Own_Address_Type,
    /// Connection_Interval_Min/Max, Max_Latency, Supervision_Timeout, Min/Max_CE_Length.
    static func createConnection(_ name: String, interval: UInt16 = 0x0060, window: UInt16 = 0x0030, min: UInt16 = 0x0018,
                                 max: UInt16 = 0x0028, latency: UInt16 = 0, timeout: UInt16 = 0x002A, spec: HCIStatusCode,
                                 section: String = "7.8.12") -> Step {
        Step(name: "LE Create Connection: \(name)", opcode: 0x200D,
             parameters: u16(interval) + u16(window) + [0x00, 0x00] + [0x01, 0x02, 0x03, 0x04, 0x05, 0x06] + [0x00]
                + u16(min) + u16(max) + u16(latency) + u16(timeout) + u16(0) + u16(0),
             spec: spec, section: section)
    }

    static let createConnectionCancel = Step(name: "LE Create Connection Cancel", opcode: 0x200E, parameters: [],
                                             spec: .success, section: "7.8.13", followUp: 0.3)
    static func setRandomAddress(_ name: String, spec: HCIStatusCode, section: String = "7.8.4") -> Step {
        // A static random address: the two most significant bits 0b11 (Vol 6 Part B 1.3.2.1).
        Step(name: "LE Set Random Address: \(name)", opcode: 0x2005, parameters: [0x01, 0x02, 0x03, 0x04, 0x05, 0xC6],
             spec: spec, section: section)
    }
    static func advertisingEnable(_ value: UInt8, spec: HCIStatusCode) -> Step {
        Step(name: "LE Set Advertising Enable \(value)", opcode: 0x200A, parameters: [value], spec: spec, section: "7.8.9")
    }
    static func scanEnable(_ enable: UInt8, duplicates: UInt8, spec: HCIStatusCode) -> Step {
        Step(name: "LE Set Scan Enable \(enable), Filter_Duplicates \(duplicates)", opcode: 0x200C, parameters: [enable, duplicates],
             spec: spec, section: "7.8.11")
    }
    /// LE Set Extended Advertising Parameters [v1] (7.8.53), handle 0, legacy connectable and
    /// scannable undirected PDUs (properties 0x0013), 1.28 s, all channels, LE 1M.
    static func extendedAdvertisingParameters(_ name: String, interval: UInt32 = 0x0800, spec: HCIStatusCode, section: String) -> Step {
        Step(name: "LE Set Extended Advertising Parameters: \(name)", opcode: 0x2036,
             parameters: [0x00] + u16(0x0013) + u24(interval) + u24(interval) + [0x07, 0x00, 0x00]
                + [0, 0, 0, 0, 0, 0] + [0x00, 0x7F, 0x01, 0x00, 0x01, 0x00, 0x00],
             spec: spec, section: section)
    }
    /// LE Set Extended Scan Parameters (7.8.64): Own_Address_Type, Scanning_Filter_Policy,
    /// Scanning_PHYs (LE 1M), then Scan_Type, Scan_Interval, Scan_Window.
    static func extendedScanParameters(spec: HCIStatusCode, section: String) -> Step {
        Step(name: "LE Set Extended Scan Parameters", opcode: 0x2041,
             parameters: [0x00, 0x00, 0x01, 0x01] + u16(0x0010) + u16(0x0010), spec: spec, section: section)
    }

    static let sequences: [(name: String, steps: [Step])] = [
        ("bring-up", [
            reset,
            Step(name: "Read Local Version Information", opcode: 0x1001, parameters: [], spec: .success, section: "7.4.1"),
            Step(name: "Read Local Supported Commands", opcode: 0x1002, parameters: [], spec: .success, section: "7.4.2"),
            Step(name: "Read BD_ADDR", opcode: 0x1009, parameters: [], spec: .success, section: "7.4.6"),
            Step(name: "LE Read Buffer Size [v1]", opcode: 0x2002, parameters: [], spec: .success, section: "7.8.2"),
            Step(name: "LE Read Local Supported Features", opcode: 0x2003, parameters: [], spec: .success, section: "7.8.3"),
            setEventMask, leSetEventMask,
        ]),
        ("advertising parameters", [
            reset,
            advertisingParameters("valid, 1.28 s undirected", spec: .success),
            // 7.8.5: Advertising_Interval_Min shall not be greater than Advertising_Interval_Max.
            advertisingParameters("min > max", min: 0x0900, max: 0x0800, spec: .invalidParameters),
            // 7.8.5: an interval range outside the one the Controller supports (at most 0x0020-0x4000,
            // the parameters' range): Unsupported Feature or Parameter Value.
            advertisingParameters("interval 0x001F", min: 0x001F, max: 0x0800, spec: .unsupportedParameter),
            advertisingParameters("interval 0x4001", min: 0x0800, max: 0x4001, spec: .unsupportedParameter),
            // 7.8.5: Advertising_Type 0x00-0x04, others reserved.
            advertisingParameters("Advertising_Type 0x05", type: 0x05, spec: .invalidParameters),
            // 7.8.5: Advertising_Channel_Map, at least one of bits 0-2; bits 3-7 reserved.
            advertisingParameters("channel map 0x00", map: 0x00, spec: .invalidParameters),
            // 7.8.5: Advertising_Filter_Policy 0x00-0x03.
            advertisingParameters("filter policy 0x04", policy: 0x04, spec: .invalidParameters),
            // 7.8.5: Peer_Address_Type 0x00 or 0x01, for directed advertising (type 0x04).
            advertisingParameters("directed, Peer_Address_Type 0x02", type: 0x04, peerType: 0x02, spec: .invalidParameters),
            advertisingParameters("valid again", spec: .success),
        ]),
        ("scan parameters", [
            reset,
            scanParameters("valid, active, 10 ms", spec: .success),
            // 7.8.10: LE_Scan_Type 0x00 or 0x01.
            scanParameters("LE_Scan_Type 0x02", type: 0x02, spec: .invalidParameters),
            // 7.8.10: LE_Scan_Interval and LE_Scan_Window 0x0004-0x4000, the window not larger; no
            // command-specific code, so Vol 1 Part F 2.18: a parameter outside its range is invalid.
            scanParameters("interval 0x0003", interval: 0x0003, window: 0x0003, spec: .invalidParameters),
            scanParameters("interval 0x4001", interval: 0x4001, window: 0x0010, spec: .invalidParameters),
            scanParameters("window > interval", interval: 0x0010, window: 0x0020, spec: .invalidParameters),
            // 7.8.10: Scanning_Filter_Policy 0x00-0x03.
            scanParameters("filter policy 0x04", policy: 0x04, spec: .invalidParameters),
            scanParameters("valid again", spec: .success),
        ]),
        ("create connection", [
            reset, setEventMask, leSetEventMask,
            // 7.8.12: LE_Scan_Window shall be less than or equal to LE_Scan_Interval.
            createConnection("window > interval", interval: 0x0010, window: 0x0020, spec: .invalidParameters),
            createConnection("scan interval 0x0003", interval: 0x0003, window: 0x0003, spec: .invalidParameters),
            // 7.8.12: Connection_Interval_Min not above Max.
            createConnection("interval min > max", min: 0x0030, max: 0x0020, timeout: 0x0100, spec: .invalidParameters),
            // 7.8.12: Supervision_Timeout in ms larger than (1 + Max_Latency) × Connection_Interval_Max × 2:
            // 0x0010 × 10 ms = 160 ms is below 2 × 100 ms (the case where it equals is the last step).
            createConnection("timeout below (1 + latency) × interval × 2", max: 0x0050, timeout: 0x0010, spec: .invalidParameters),
            createConnection("valid", spec: .success),
            // 7.8.4: LE Set Random Address while initiating: Command Disallowed.
            setRandomAddress("while initiating", spec: .commandDisallowed),
            // 7.8.12: a second LE Create Connection while one is pending: Command Disallowed.
            createConnection("while initiating", spec: .commandDisallowed),
            // 7.8.13: Command Complete, then LE Connection Complete with Unknown Connection Identifier.
            createConnectionCancel,
            setRandomAddress("after the cancel", spec: .success),
            // 7.8.13: no LE Create Connection pending: Command Disallowed.
            Step(name: "LE Create Connection Cancel, nothing pending", opcode: 0x200E, parameters: [],
                 spec: .commandDisallowed, section: "7.8.13"),
            // 7.8.12: "larger than": 0x000A × 10 ms = 100 ms equals 2 × 50 ms, so it is refused. Last:
            // Rootcanal accepts it and is initiating afterwards.
            createConnection("timeout equal to (1 + latency) × interval × 2", timeout: 0x000A, spec: .invalidParameters),
        ]),
        ("random address while advertising", [
            reset,
            setRandomAddress("idle", spec: .success),
            advertisingParameters("valid", spec: .success),
            advertisingEnable(0x01, spec: .success),
            // 7.8.4: while legacy advertising is enabled: Command Disallowed.
            setRandomAddress("while advertising", spec: .commandDisallowed),
            advertisingEnable(0x00, spec: .success),
            setRandomAddress("advertising off", spec: .success),
        ]),
        ("legacy, then extended", [
            reset,
            advertisingParameters("valid", spec: .success),
            // Vol 4 Part E 3.1.1: an extended advertising command after a legacy one without Reset.
            extendedAdvertisingParameters("after a legacy command", spec: .commandDisallowed, section: "3.1.1"),
            extendedScanParameters(spec: .commandDisallowed, section: "3.1.1"),
            reset,
            extendedAdvertisingParameters("after Reset", spec: .success, section: "7.8.53 (after Reset, 3.1.1)"),
            // 7.8.53: a primary interval range outside the one the Controller supports: 0x11.
            extendedAdvertisingParameters("interval 0x000010", interval: 0x000010, spec: .unsupportedParameter, section: "7.8.53"),
        ]),
        ("extended, then legacy", [
            reset,
            extendedScanParameters(spec: .success, section: "7.8.64"),
            // Vol 4 Part E 3.1.1: a legacy command after an extended one without Reset.
            scanParameters("after an extended command", spec: .commandDisallowed),
            advertisingParameters("after an extended command", spec: .commandDisallowed),
            reset,
            scanParameters("after Reset", spec: .success),
        ]),
        ("reserved values", [
            reset,
            // 7.8.9: Advertising_Enable 0x00 or 0x01, all other values reserved.
            advertisingEnable(0x02, spec: .invalidParameters),
            scanParameters("valid", spec: .success),
            // 7.8.11: LE_Scan_Enable and Filter_Duplicates 0x00 or 0x01 each.
            scanEnable(0x02, duplicates: 0x00, spec: .invalidParameters),
            scanEnable(0x01, duplicates: 0x02, spec: .invalidParameters),
            scanEnable(0x01, duplicates: 0x00, spec: .success),
            scanEnable(0x00, duplicates: 0x00, spec: .success),
        ]),
    ]

    // MARK: - What each controller answered

    /// The answer to one command: the event that completes it and what followed.
    struct Answer: Equatable, Sendable, CustomStringConvertible {
        /// 0x0E Command Complete or 0x0F Command Status.
        var eventCode: UInt8
        var status: UInt8
        /// Return parameters after the status (Command Complete); 0 for Command Status.
        var returnLength: Int
        /// Events other than the answer, as "0xCODE" or "0x3E/SUBEVENT" with their status octet.
        var following: [String]
        var description: String {
            let kind = eventCode == 0x0E ? "Command Complete" : eventCode == 0x0F ? "Command Status" : "event 0x\(String(eventCode, radix: 16))"
            return "\(kind) status 0x\(String(format: "%02X", status)) +\(returnLength)" + (following.isEmpty ? "" : " then \(following)")
        }
    }

    /// Sends each step over `connection` (an H4 stream to a controller) and reads its answer.
    static func run(_ steps: [Step], on connection: RawTCPConnection, who: String) throws -> [Answer] {
        var answers: [Answer] = []
        for step in steps {
            try connection.send([0x01] + u16(step.opcode) + [UInt8(step.parameters.count)] + step.parameters)
            var answer: Answer?
            var before: [String] = []
            let deadline = Date().addingTimeInterval(5)
            while answer == nil {
                guard let event = try readEvent(connection, timeout: deadline.timeIntervalSinceNow) else {
                    throw HarnessError("\(who): no answer to \(step) within 5 s (other events: \(before))")
                }
                if let a = completion(of: step.opcode, event) { answer = a } else { before.append(summary(event)) }
            }
            var a = answer!
            a.following = before
            if step.followUp > 0 {
                let end = Date().addingTimeInterval(step.followUp)
                while let event = try readEvent(connection, timeout: end.timeIntervalSinceNow) { a.following.append(summary(event)) }
            }
            answers.append(a)
        }
        return answers
    }

    /// The next H4 event (code, parameters), or nil when none starts within `timeout`.
    static func readEvent(_ connection: RawTCPConnection, timeout: TimeInterval) throws -> (code: UInt8, parameters: [UInt8])? {
        guard timeout > 0, let type = try? connection.receive(exactly: 1, timeout: timeout) else { return nil }
        guard type == [0x04] else { throw HarnessError("H4 packet type \(type) from a controller where an event (0x04) was due") }
        let header = try connection.receive(exactly: 2, timeout: 2)
        let parameters = header[1] == 0 ? [] : try connection.receive(exactly: Int(header[1]), timeout: 2)
        return (header[0], parameters)
    }

    /// The answer when `event` is the Command Complete (7.7.14) or Command Status (7.7.15) of `opcode`.
    static func completion(of opcode: UInt16, _ event: (code: UInt8, parameters: [UInt8])) -> Answer? {
        let p = event.parameters
        switch event.code {
        case 0x0E where p.count >= 4 && u16(opcode) == Array(p[1...2]):
            return Answer(eventCode: 0x0E, status: p[3], returnLength: p.count - 4, following: [])
        case 0x0F where p.count >= 4 && u16(opcode) == Array(p[2...3]):
            return Answer(eventCode: 0x0F, status: p[0], returnLength: 0, following: [])
        default:
            return nil
        }
    }

    static func summary(_ event: (code: UInt8, parameters: [UInt8])) -> String {
        let p = event.parameters
        if event.code == 0x3E, p.count >= 2 { return String(format: "0x3E/0x%02X status 0x%02X", p[0], p[1]) }
        return String(format: "0x%02X", event.code) + (p.isEmpty ? "" : String(format: " 0x%02X", p[0]))
    }

    // MARK: - Intended differences

    /// Which part of an answer differs.
    enum Field: Sendable { case status, returnLength }

    /// A difference to Rootcanal 1.10.0 on purpose: the step (by name), the part that differs,
    /// what Rootcanal answers (measured), and the section of the Core specification (v5.4) that
    /// backs ours. Every other part of every answer must be the same on both.
    struct IntendedDifference: Sendable {
        let step: String
        let field: Field
        let rootcanal: Int
        let why: String
    }

    static let reserved = "Vol 1 Part F 2.18: Invalid HCI Command Parameters when a parameter is outside its specified range; "
        + "the section lists the valid values and reserves the others. Rootcanal 1.10.0 takes the reserved value"
    static let noSpecificCode = "Vol 1 Part F 2.18 (a parameter outside its specified range is invalid, 0x12); the section names "
        + "no other code. Rootcanal answers 0x11 by analogy with 7.8.5 (its source says so: \"no explicit error code stated\")"

    static let refusedReturnParameters = "Vol 4 Part E 4.5: after an error only the Status (and a Connection_Handle or BD_ADDR "
        + "right after it) must be returned; whether more parameters are is implementation specific. Ours returns the Status "
        + "alone, Rootcanal the Selected_TX_Power too"

    static let intendedDifferences: [IntendedDifference] = [
        // Reserved values, taken by Rootcanal.
        .init(step: "LE Set Advertising Parameters: Advertising_Type 0x05", field: .status, rootcanal: 0x00, why: "7.8.5; " + reserved),
        .init(step: "LE Set Advertising Parameters: filter policy 0x04", field: .status, rootcanal: 0x00, why: "7.8.5; " + reserved),
        .init(step: "LE Set Advertising Parameters: directed, Peer_Address_Type 0x02", field: .status, rootcanal: 0x00,
              why: "7.8.5; " + reserved),
        .init(step: "LE Set Scan Parameters: LE_Scan_Type 0x02", field: .status, rootcanal: 0x00, why: "7.8.10; " + reserved),
        .init(step: "LE Set Scan Parameters: filter policy 0x04", field: .status, rootcanal: 0x00, why: "7.8.10; " + reserved),
        .init(step: "LE Set Advertising Enable 2", field: .status, rootcanal: 0x00, why: "7.8.9; " + reserved),
        .init(step: "LE Set Scan Enable 2, Filter_Duplicates 0", field: .status, rootcanal: 0x00, why: "7.8.11; " + reserved),
        .init(step: "LE Set Scan Enable 1, Filter_Duplicates 2", field: .status, rootcanal: 0x00, why: "7.8.11; " + reserved),
        // Scan and initiating intervals out of range: 0x12 (ours) or 0x11 (Rootcanal's guess).
        .init(step: "LE Set Scan Parameters: interval 0x0003", field: .status, rootcanal: 0x11, why: "7.8.10; " + noSpecificCode),
        .init(step: "LE Set Scan Parameters: interval 0x4001", field: .status, rootcanal: 0x11, why: "7.8.10; " + noSpecificCode),
        .init(step: "LE Create Connection: scan interval 0x0003", field: .status, rootcanal: 0x11, why: "7.8.12; " + noSpecificCode),
        // Rootcanal compares with < where 7.8.12 says "larger than".
        .init(step: "LE Create Connection: timeout equal to (1 + latency) × interval × 2", field: .status, rootcanal: 0x00,
              why: "7.8.12: the Supervision_Timeout in milliseconds shall be larger than (1 + Max_Latency) × Connection_Interval_Max × 2; "
                + "Rootcanal refuses only a smaller one"),
        // What a refused command's Command Complete carries.
        .init(step: "LE Set Extended Advertising Parameters: after a legacy command", field: .returnLength, rootcanal: 1,
              why: refusedReturnParameters),
        .init(step: "LE Set Extended Advertising Parameters: interval 0x000010", field: .returnLength, rootcanal: 1,
              why: refusedReturnParameters),
    ]

    // MARK: - The test

    @Test(arguments: sequences.indices)
    func sameAnswersAsRootcanal(sequence index: Int) async throws {
        let (name, steps) = Self.sequences[index]
        let rootcanal = try await RootcanalControllers.start()
        defer { rootcanal.stop() }
        let theirs = try await offPool {
            let c = try RawTCPConnection(port: rootcanal.hciPort)
            defer { c.close() }
            return try Self.run(steps, on: c, who: "Rootcanal")
        }
        let server = try H4Server(link: VirtualLink(mode: .live), listen: ["tcp:127.0.0.1:0"])
        server.start()
        defer { server.stop() }
        let port = try #require(server.listeners[0].port)
        let ours = try await offPool {
            let c = try RawTCPConnection(port: port)
            defer { c.close() }
            return try Self.run(steps, on: c, who: "our controller")
        }
        for (i, step) in steps.enumerated() {
            let (o, t) = (ours[i], theirs[i])
            // Ours: what the specification says.
            if let spec = step.spec {
                #expect(o.status == spec.rawValue,
                        "\(name): \(step): ours \(o), Core v5.4 \(step.section) says 0x\(String(format: "%02X", spec.rawValue))")
            }
            // Rootcanal: the same answer, but for the listed differences (which must still be there).
            let differences = Self.intendedDifferences.filter { $0.step == step.name }
            let statusDiffers = differences.first { $0.field == .status }
            let lengthDiffers = differences.first { $0.field == .returnLength }
            #expect(o.eventCode == t.eventCode, "\(name): \(step): ours \(o), Rootcanal \(t)")
            #expect(o.following == t.following, "\(name): \(step): ours \(o), Rootcanal \(t)")
            if let d = statusDiffers {
                #expect(Int(t.status) == d.rootcanal && o.status != t.status, "\(name): \(step): listed (\(d.why)) but Rootcanal \(t), ours \(o)")
            } else {
                #expect(o.status == t.status, "\(name): \(step): ours \(o), Rootcanal \(t)")
            }
            if let d = lengthDiffers {
                #expect(t.returnLength == d.rootcanal && o.returnLength != t.returnLength, "\(name): \(step): listed (\(d.why)) but Rootcanal \(t), ours \(o)")
            } else {
                #expect(o.returnLength == t.returnLength, "\(name): \(step): ours \(o), Rootcanal \(t)")
            }
        }
    }

    /// Every listed difference names a step that the sequences send (none is left stale).
    @Test func everyIntendedDifferenceNamesAStep() {
        let names = Set(Self.sequences.flatMap { $0.steps.map(\.name) })
        for d in Self.intendedDifferences { #expect(names.contains(d.step), "no step \"\(d.step)\"") }
    }
}
