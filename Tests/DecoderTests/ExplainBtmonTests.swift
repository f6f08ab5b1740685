import Foundation
import Testing
import HCI
import Capture
import TestSupport
@testable import Decoder

// `dump --explain`'s bit names against btmon (BlueZ 5.66, an independent decoder): a btsnoop
// capture with every bit set in Read Local Supported Commands (Core v5.4 Vol 4 Part E 7.4.2,
// table 6.27), LE Read Local Supported Features (7.8.3; bits of Vol 6 Part B 4.6), Read Local
// Supported Features (7.4.3; LMP features, Vol 2 Part C 3.3), Set Event
// Mask (7.3.1) and LE Set Event Mask (7.8.1). Every bit btmon names must carry the same
// command, event or feature in ours, by position; names compare after spelling out the
// abbreviations both use, except the renames listed below (each says why).

/// Names btmon 5.66 gives by an older or abbreviated spelling (ours are Core v5.4's).
private let btmonNames: [String: String] = [
    // Core v5.3's inclusive-language renames (Vol 1 Part A): Master Link Key, Device Under Test.
    "Link Key Selection": "Temporary Link Key",
    "Enable Implementation Under Test Mode": "Enable Device Under Test Mode",
    // btmon abbreviates "Supported" / drops "Physical", "Set", "Size".
    "Read LE Host Support": "Read LE Host Supported",
    "Write LE Host Support": "Write LE Host Supported",
    "LE Read Advertising Physical Channel Tx Power": "LE Read Advertising Channel TX Power",
    "LE Set Periodic Advertising Receive Enable": "LE Periodic Advertising Receive Enable",
    "LE Set Periodic Advertising Sync Transfer Parameters": "LE Periodic Advertising Sync Transfer Parameters",
    "LE Read Buffer Size [v2]": "LE Read Buffer v2",
    // Core v5.2 / v5.3 names of commands and events that had other names before.
    "LE Read Remote Features": "LE Read Remote Used Features",
    "LE Enable Encryption": "LE Start Encryption",
    "LE Receiver Test [v2]": "LE Enhanced Receiver Test",
    "LE Transmitter Test [v2]": "LE Enhanced Transmitter Test",
    "LE Read Remote Features Complete": "LE Read Remote Used Features Complete",
    "LE Directed Advertising Report": "LE Direct Advertising Report",
    "LE Scan Timeout": "LE Extended Scan Timeout",
    "LE Advertising Set Terminated": "LE Extended Advertising Set Terminated",
    "Connection Parameters Request Procedure": "Connection Parameter Request Procedure",
    // LMP features: btmon's shorter names and spellings (Vol 2 Part C 3.3's are ours).
    "μ-law log synchronous data": "u-law log synchronous data",
    "Simultaneous LE and BR/EDR to Same Device Capable (Controller)": "Simultaneous LE and BR/EDR (Controller)",
    "Secure Simple Pairing (Controller Support)": "Secure Simple Pairing",
    "HCI_Link_Supervision_Timeout_Changed event": "Link Supervision Timeout Changed Event",
    "Variable Inquiry TX Power Level": "Inquiry TX Power Level",
    // btmon's typos and slips: "Advertisng", "Estabilished Complete"; octet 44 bit 0 repeats
    // octet 43 bit 7's name; event 0x32 is IO Capability Response (7.7.41), not "Request Reply".
    "LE Set Default Periodic Advertising Sync Transfer Parameters": "LE Set Default Periodic Advertisng Sync Transfer Parameters",
    "LE BIG Sync Established": "LE BIG Sync Estabilished Complete",
    "LE ISO Test End": "LE Isochronous Read Test Counters",
    "IO Capability Response": "IO Capability Request Reply",
]

/// Supported_Commands bits btmon still names whose commands Core v5.4 no longer has (AMP,
/// removed in v5.3; Park State, the encryption and page scan modes, Read Country Code, Add SCO
/// Connection, Create New Unit Key, Short Range Mode, Best Effort Flush Timeout, Location Data:
/// deprecated and removed earlier), and octet 14 bit 4 (Read Local Supported Commands, which
/// the stack's own table gives no bit: it is mandatory).
private let removedCommandBits: Set<Int> = [
    0 * 8 + 6, 4 * 8 + 4, 4 * 8 + 5, 6 * 8 + 4, 8 * 8 + 6, 8 * 8 + 7, 11 * 8 + 5, 11 * 8 + 6, 11 * 8 + 7, 12 * 8 + 0,
    14 * 8 + 4, 15 * 8 + 0, 21 * 8 + 0, 21 * 8 + 1, 21 * 8 + 2, 21 * 8 + 3, 21 * 8 + 4, 21 * 8 + 5, 21 * 8 + 6, 21 * 8 + 7,
    22 * 8 + 0, 22 * 8 + 1, 22 * 8 + 3, 22 * 8 + 4, 22 * 8 + 5, 22 * 8 + 6, 22 * 8 + 7, 23 * 8 + 5, 23 * 8 + 6, 23 * 8 + 7,
    24 * 8 + 2, 24 * 8 + 3, 24 * 8 + 4,
]

/// Event mask bit 30: Page Scan Mode Change (event 0x1F), removed from the specification.
private let removedEventBits: Set<Int> = [30]

/// LMP feature bit 8: Park state, "Previously used" in Core v5.4 Vol 2 Part C 3.3.
private let removedLMPBits: Set<Int> = [8]

/// Lowercase words with the abbreviations both decoders use spelled out.
private func normalized(_ name: String) -> String {
    let expansions = ["neg": "negative", "tx": "transmit", "cis": "connected isochronous stream",
                      "cig": "connected isochronous group", "big": "broadcast isochronous group", "iso": "isochronous",
                      "sync": "synchronous", "advertise": "advertising", "filter": "", "mbps": "mb s"]
    let words = name.lowercased().replacingOccurrences(of: #"\[(v\d)\]"#, with: " $1", options: .regularExpression)
        .split { !$0.isLetter && !$0.isNumber }.map(String.init).filter { $0 != "command" && $0 != "v1" }
    return words.map { expansions[$0] ?? $0 }.filter { !$0.isEmpty }.joined(separator: " ")
}

private func sameName(_ ours: String, _ btmon: String) -> Bool {
    btmonNames[ours] == btmon || normalized(ours) == normalized(btmon)
}

private struct BtmonMissing: Error, CustomStringConvertible {
    var description: String { "btmon is not installed (Tools/setup.sh installs it: apt-get install bluez)" }
}

/// btmon's decoding of `path` (btmon -r).
private func btmon(_ path: String) throws -> [String] {
    guard FileManager.default.isExecutableFile(atPath: "/usr/bin/btmon") else {
        throw BtmonMissing()
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/btmon")
    p.arguments = ["-r", path]
    let out = Pipe()
    p.standardOutput = out
    p.standardError = FileHandle.nullDevice
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}

/// The names btmon lists in the packet whose line contains `header`: under its "Mask:" or
/// "Features:" line, one indented name per bit set it knows, in bit order, then "Unknown ...
/// (0x..)" for the rest. Paired with their bit numbers.
private func btmonBits(_ lines: [String], after header: String, mask: UInt64) -> [Int: String] {
    guard let packet = lines.firstIndex(where: { $0.contains(header) }),
          let start = lines[packet...].firstIndex(where: { $0.contains("Mask: ") || $0.contains("Features: ") }) else { return [:] }
    var names: [String] = []
    var unknown: UInt64 = 0
    for line in lines[(start + 1)...] {
        if line.hasPrefix("<") || line.hasPrefix(">") { break }
        let t = line.trimmingCharacters(in: .whitespaces)
        if t.hasPrefix("Unknown"), let open = t.lastIndex(of: "("), let v = UInt64(t[t.index(open, offsetBy: 3)...].dropLast(), radix: 16) {
            unknown = v
        } else {
            names.append(t)
        }
    }
    let bits = (0..<64).filter { mask & ~unknown & (1 << UInt64($0)) != 0 }
    return Dictionary(uniqueKeysWithValues: zip(bits, names))
}

@Suite(.timeLimit(.minutes(1)))
struct ExplainBtmonTests {
    static let allFeatures: UInt64 = (1 << 45) - 1  // Core v5.4 defines bits 0–44

    /// The capture both decoders read.
    static func capture() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("explain-bits-\(UUID().uuidString).btsnoop").path
        let w = try CaptureWriter(path: path, format: .btsnoop)
        func complete(_ op: UInt16, _ ret: [UInt8]) -> HCIPacket {
            .event(HCIEventPacket(code: 0x0e, parameters: [1, UInt8(op & 0xff), UInt8(op >> 8), 0x00] + ret))
        }
        w.write(complete(0x1002, [UInt8](repeating: 0xff, count: 64)), direction: .received)
        w.write(complete(0x2003, (0..<8).map { UInt8(truncatingIfNeeded: allFeatures >> (8 * $0)) }), direction: .received)
        w.write(complete(0x1003, [UInt8](repeating: 0xff, count: 8)), direction: .received)
        w.write(.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x0c01), parameters: [UInt8](repeating: 0xff, count: 8))), direction: .sent)
        w.write(.command(HCICommandPacket(opcode: HCIOpcode(rawValue: 0x2001), parameters: [UInt8](repeating: 0xff, count: 8))), direction: .sent)
        w.close()
        return path
    }

    @Test func supportedCommandsNameTheCommandsBtmonNames() throws {
        let path = try Self.capture()
        defer { try? FileManager.default.removeItem(atPath: path) }
        var theirs: [Int: String] = [:]
        let regex = try NSRegularExpression(pattern: #"^\s+(.+?)\s*\(Octet (\d+) - Bit (\d)\)\s*$"#)
        for line in try btmon(path) {
            let ns = line as NSString
            guard let m = regex.firstMatch(in: line, range: NSRange(location: 0, length: ns.length)) else { continue }
            theirs[Int(ns.substring(with: m.range(at: 2)))! * 8 + Int(ns.substring(with: m.range(at: 3)))!] = ns.substring(with: m.range(at: 1))
        }
        #expect(theirs.count > 200, "btmon named \(theirs.count) commands")
        let ours = Dictionary(uniqueKeysWithValues: HCIBitFields.supportedCommands([UInt8](repeating: 0xff, count: 64)).map { ($0.bit, $0.name) })
        #expect(ours.count == 512)
        for (bit, name) in theirs.sorted(by: { $0.key < $1.key }) {
            let mine = ours[bit] ?? "reserved"
            if removedCommandBits.contains(bit) {
                #expect(mine == "reserved", "octet \(bit / 8) bit \(bit % 8): btmon \(name), ours \(mine)")
            } else {
                #expect(sameName(mine, name), "octet \(bit / 8) bit \(bit % 8): btmon \(name), ours \(mine)")
            }
        }
        // What btmon 5.66 does not know yet (Core v5.2–v5.4 commands) we still name.
        #expect(ours.values.filter { $0 != "reserved" }.count > theirs.count - removedCommandBits.count)

        // The decoder's explanation of the field lists the same bits, btmon's way.
        var reader = try CaptureReader(path: path)
        let packet = PacketDecoder().decode(try #require(try reader.next()))
        let layer = try #require(packet.layers.first)
        let field = try #require(layer.fields.first { $0.name == "supportedCommands" })
        let lines = try #require(explanation(of: field, in: layer, of: packet)).decoded
        #expect(lines.first == "Inquiry (Octet 0 - Bit 0)")
        #expect(lines.contains("LE Set Extended Advertising Enable (Octet 36 - Bit 5)"))
    }

    @Test func eventMasksAndLEFeaturesNameWhatBtmonNames() throws {
        let path = try Self.capture()
        defer { try? FileManager.default.removeItem(atPath: path) }
        let lines = try btmon(path)
        let cases: [(String, UInt64, [NamedBit], Set<Int>)] = [
            ("LE Read Local Supported Features (0x08|0x0003) ncmd", Self.allFeatures, HCIBitFields.leFeatures(Self.allFeatures), []),
            ("Read Local Supported Features (0x04|0x0003) ncmd", .max, HCIBitFields.lmpFeatures(.max), removedLMPBits),
            ("Set Event Mask (0x03|0x0001) plen", .max, HCIBitFields.eventMask(.max), removedEventBits),
            ("LE Set Event Mask (0x08|0x0001) plen", .max, HCIBitFields.leEventMask(.max), []),
        ]
        for (header, mask, ours, removed) in cases {
            let theirs = btmonBits(lines, after: header, mask: mask)
            #expect(theirs.count > 20, "\(header): btmon named \(theirs.count) bits")
            let mine = Dictionary(uniqueKeysWithValues: ours.map { ($0.bit, $0.name) })
            for (bit, name) in theirs.sorted(by: { $0.key < $1.key }) {
                let m = mine[bit] ?? "reserved"
                if removed.contains(bit) {
                    #expect(m == "reserved", "\(header) bit \(bit): btmon \(name), ours \(m)")
                } else {
                    #expect(sameName(m, name), "\(header) bit \(bit): btmon \(name), ours \(m)")
                }
            }
        }
    }
}
