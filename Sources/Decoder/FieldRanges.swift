// `dump --html`: which octets of a packet each decoded field came from. The layer's own parser
// notes its reads (`FieldReads`, in HCI's ByteReader); this only pairs those reads with the
// fields the parser's PDU describes itself as, by name, in order. No byte is parsed here.
import HCI

/// Pairs the reads of one layer's parse with that layer's fields.
struct ReadPlacer {
    private let reads: [FieldReads.Read]
    private var used: [Bool]
    /// Field name → read name, for a field derived from a read of another name (`name` from
    /// `opcode`, ACL's `pb` and `bc` from the 16-bit `handle` they share). Shared: the read is
    /// not used up.
    private let aliases: [String: String]

    init(_ reads: [FieldReads.Read], aliases: [String: String] = [:]) {
        self.reads = reads
        used = Array(repeating: false, count: reads.count)
        self.aliases = aliases
    }

    /// Gives every field (at any depth) the range of its read; a list or object with none of
    /// its own spans its members'.
    mutating func place(_ fields: inout [Field]) {
        for i in fields.indices {
            let own = take(fields[i].name, isBytes: fields[i].value.isBytes)
            switch fields[i].value {
            case .object(var inner):
                place(&inner)
                fields[i].value = .object(inner)
                fields[i].range = own ?? Self.span(inner.map(\.range))
            case .list(var items):
                var spans: [Range<Int>?] = []
                for j in items.indices {
                    guard case .object(var inner) = items[j] else { continue }
                    place(&inner)
                    spans.append(Self.span(inner.map(\.range)))
                    items[j] = .object(inner)
                }
                fields[i].value = .list(items)
                fields[i].range = own ?? Self.span(spans)
            default:
                fields[i].range = own
            }
        }
    }

    /// The first read of `name` not used yet; else the read its alias names; else, for a
    /// bytes field, the first unnamed `rest()` not used yet.
    private mutating func take(_ name: String, isBytes: Bool) -> Range<Int>? {
        if let k = reads.indices.first(where: { !used[$0] && reads[$0].name == name }) {
            used[k] = true
            return reads[k].range
        }
        if let alias = aliases[name], let read = reads.first(where: { $0.name == alias }) { return read.range }
        if isBytes, let k = reads.indices.first(where: { !used[$0] && reads[$0].name == "\(FieldReads.rest)" }) {
            used[k] = true
            return reads[k].range
        }
        return nil
    }

    /// The smallest range holding every range given (nil when none is).
    static func span(_ ranges: [Range<Int>?]) -> Range<Int>? {
        let present = ranges.compactMap { $0 }
        guard let lower = present.map(\.lowerBound).min(), let upper = present.map(\.upperBound).max() else { return nil }
        return lower..<upper
    }
}

extension FieldValue {
    fileprivate var isBytes: Bool {
        if case .bytes = self { return true }
        return false
    }
}

extension Array where Element == Field {
    /// `ReadPlacer.place` over these fields.
    mutating func place(_ reads: [FieldReads.Read], aliases: [String: String] = [:]) {
        guard !reads.isEmpty else { return }
        var placer = ReadPlacer(reads, aliases: aliases)
        placer.place(&self)
    }
}
