// `dump --flow`: a FlowDiagram as a text sequence diagram, one line per packet.
import Capture

/// Text rendering of a `FlowDiagram`:
/// ```
///       #  time (s)                host             controller      F0:F1:F2:F3:F4:01
/// ── 2. scan · centralManager.scanForPeripherals(withServices:) → ...
///     #19  +0.001164             ├──────────────────▶│                   │     HCI Command LE Set Extended Scan Parameters
///     #23  +0.021664             │◀──────────────────┼───────────────────┤     HCI Event LE Extended Advertising Report ...
/// ```
public enum FlowText {
    /// Width of one column (lane).
    static let lane = 20
    /// "#index  +time" before the lanes.
    static let prefix = 24

    /// Appends the whole diagram to `out`, its words in `language`. Widths are terminal
    /// columns (TextWidth), so wide (CJK) titles line up.
    public static func render(_ d: FlowDiagram, to out: inout RenderBuffer, language: Language = .english) {
        let titles = FlowWords.columnTitles(d, language)
        out.append(FlowWords.summary(packets: d.packetCount, steps: d.steps.count).text(language)
                   + FlowWords.columns.text(language) + titles.joined(separator: " | ") + "\n\n")
        var head = "      #  " + FlowWords.timeColumn.text(language)
        head += String(repeating: " ", count: max(1, prefix - TextWidth.columns(of: head)))
        for t in titles {
            let name = TextWidth.prefix(t, columns: lane - 2)
            let w = TextWidth.columns(of: name)
            let left = (lane - w) / 2
            head += String(repeating: " ", count: left) + name + String(repeating: " ", count: lane - left - w)
        }
        out.append(head + "\n")
        let width = titles.count * lane
        var number = 0
        var changes = d.linkStates[...]
        for step in d.steps {
            number += 1
            out.append("── \(number). \(step.kind.title(language)) · \(step.kind.coreBluetooth(asServer: step.asServer, language: language))\n")
            for a in step.arrows {
                appendRow(a, columns: titles.count, width: width, start: d.start, to: &out)
                // The link-layer state the packet left the controller in (a packet left out of
                // the diagram shows its change under the next one drawn).
                while let c = changes.first, c.index <= a.index {
                    appendLinkState(c, language, to: &out)
                    changes = changes.dropFirst()
                }
            }
        }
        for c in changes { appendLinkState(c, language, to: &out) }
    }

    /// "◆ link layer: standby → scanning", under the controller's column.
    private static func appendLinkState(_ c: LinkLayerStateChange, _ language: Language, to out: inout RenderBuffer) {
        out.append(String(repeating: " ", count: prefix + lane)
                   + "◆ \(FlowWords.linkLayer.text(language)): \(c.from.text(language)) → \(c.to.text(language))\n")
    }

    static func column(_ p: FlowParty) -> Int {
        switch p {
        case .host: return 0
        case .controller: return 1
        case .peer(let i): return 2 + i
        }
    }

    private static func appendRow(_ a: FlowArrow, columns: Int, width: Int, start: CaptureTime?, to out: inout RenderBuffer) {
        var idx = "#" + String(a.index)
        if idx.count < 7 { idx = String(repeating: " ", count: 7 - idx.count) + idx }
        out.append(idx)
        out.append("  ")
        let t = relativeTime(a.time, since: start)
        out.append(t)
        if t.count < prefix - 9 { out.append(String(repeating: " ", count: prefix - 9 - t.count)) }
        var row = [Character](repeating: " ", count: width)
        for c in 0..<columns { row[c * lane + lane / 2] = "│" }
        let from = column(a.from), to = column(a.to)
        let x1 = from * lane + lane / 2, x2 = to * lane + lane / 2
        if from == to {
            row[x1] = "●"  // a note on the host (btmon's own records)
        } else {
            let lo = min(x1, x2), hi = max(x1, x2)
            for x in (lo + 1)..<hi { row[x] = row[x] == "│" ? "┼" : "─" }
            row[x1] = x1 < x2 ? "├" : "┤"
            if x1 < x2 { row[x2 - 1] = "▶" } else { row[x2 + 1] = "◀" }
        }
        out.append(String(row))
        out.append("  ")
        out.append(a.label)
        out.append(byte: 10)
    }

    /// "+12.345678": seconds since the first packet, to the microsecond.
    static func relativeTime(_ t: CaptureTime, since start: CaptureTime?) -> String {
        guard let start else { return "+0.000000" }
        let micros = (t.seconds - start.seconds) * 1_000_000 + Int64(t.nanoseconds / 1000) - Int64(start.nanoseconds / 1000)
        let sign = micros < 0 ? "-" : "+"
        let m = micros.magnitude
        var frac = String(m % 1_000_000)
        frac = String(repeating: "0", count: 6 - frac.count) + frac
        return "\(sign)\(m / 1_000_000).\(frac)"
    }
}
