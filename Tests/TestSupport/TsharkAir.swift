import Foundation
import Testing

extension Tshark {
    /// One frame as tshark decodes it: every field's values by name (a protocol or subtree by
    /// its name, with an empty value) and the frame's octets.
    public struct Frame: Sendable {
        public var fields: [String: [String]]
        public var raw: [UInt8]
        public func first(_ name: String) -> String? { fields[name]?.first }
        /// A field's value as a number ("0x…" hexadecimal, else decimal).
        public func int(_ name: String) -> Int? { first(name).flatMap { $0.hasPrefix("0x") ? Int($0.dropFirst(2), radix: 16) : Int($0) } }
        public func has(_ name: String) -> Bool { fields[name] != nil }
    }

    /// Every frame of `path` (`tshark -T json -x`).
    public static func frames(_ path: String) throws -> [Frame] {
        let data = try output(["-n", "-r", path, "-T", "json", "-x", "--no-duplicate-keys"])
        let json = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] ?? []
        return json.map { packet in
            var fields: [String: [String]] = [:]
            var raw: [UInt8] = []
            func walk(_ key: String, _ value: Any) {
                switch value {
                case let s as String: fields[key, default: []].append(s)
                case let a as [Any] where key.hasSuffix("_raw"):
                    if key == "frame_raw", let hex = a.first as? String { raw = octets(hex) }
                case let a as [Any]: for v in a { walk(key, v) }
                case let d as [String: Any]:
                    fields[key, default: []].append("")
                    for (k, v) in d { walk(k, v) }
                default: break
                }
            }
            for (k, v) in ((packet["_source"] as? [String: Any])?["layers"] as? [String: Any]) ?? [:] { walk(k, v) }
            return Frame(fields: fields, raw: raw)
        }
    }

    private static func octets(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count - 1, by: 2).compactMap { UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16) }
    }

    /// Advertising channel access address (Core v5.4 Vol 6 Part B 2.1.2).
    public static let advertisingAccessAddress = "0x8e89bed6"
}

/// What tshark must say of every air capture (issue 28): BT LE LL frames only, none malformed,
/// no expert warning or error, no incorrect CRC, every advertising channel CRC checked (Core
/// v5.4 Vol 6 Part B 3.1.1; tshark 4.0 checks data channel CRCs only when the capture's
/// pseudo-header carries the connection's CRCInit, so those are noted "unchecked"), and times
/// that never go back.
public func expectSoundAirCapture(_ frames: [Tshark.Frame], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(!frames.isEmpty, "no frames in the air capture", sourceLocation: sourceLocation)
    var last = 0.0
    for (i, f) in frames.enumerated() {
        #expect(f.has("btle"), "frame \(i + 1) is not BT LE LL: \(f.fields.keys.sorted())", sourceLocation: sourceLocation)
        #expect(!f.has("_ws.malformed"), "frame \(i + 1) malformed", sourceLocation: sourceLocation)
        #expect(!f.has("btle.crc.incorrect"), "frame \(i + 1): incorrect CRC", sourceLocation: sourceLocation)
        if f.first("btle.access_address") == Tshark.advertisingAccessAddress {
            #expect(!f.has("btle.crc.indeterminate"), "frame \(i + 1): advertising CRC not checked", sourceLocation: sourceLocation)
        }
        // Expert severities: 0x600000 warning, 0x800000 error (Wireshark's PI_WARN, PI_ERROR).
        for s in f.fields["_ws.expert.severity"] ?? [] {
            #expect((Int(s) ?? 0) < 0x60_0000, "frame \(i + 1): expert \(f.fields["_ws.expert.message"] ?? [])", sourceLocation: sourceLocation)
        }
        let t = Double(f.first("frame.time_epoch") ?? "") ?? 0
        #expect(t >= last, "frame \(i + 1) goes back in time", sourceLocation: sourceLocation)
        last = t
    }
}
