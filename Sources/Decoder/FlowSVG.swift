// `dump --svg OUT.svg`: a FlowDiagram as a standalone SVG (no scripts, no external resources).
import Capture

/// SVG rendering of a `FlowDiagram`: lifelines for the host, its controller and each peer; one
/// arrow per packet coloured by the layer whose words label it; step bands naming the
/// CoreBluetooth call; time since the first packet on the left. A run of the same exchange
/// (e.g. 58 notifications, each with its Number Of Completed Packets) is drawn once, then one
/// "× 58" row, then its last occurrence, so a long capture stays one page.
public enum FlowSVG {
    static let rowHeight = 18
    static let stepHeight = 24
    static let laneSpacing = 340
    static let firstLane = 230
    static let top = 96
    static let charWidth = 6.6  // 11 px monospace; a wide (CJK) character takes two (TextWidth)
    /// Monospace fonts with CJK glyphs after the Latin ones (zh-Hans labels, device names and
    /// values in any script); the explorer page (`dump --html`) uses the same stack.
    static let fontStack = "'DejaVu Sans Mono', 'Noto Sans Mono CJK SC', 'Noto Sans CJK SC', 'WenQuanYi Zen Hei Mono', 'Source Han Sans SC', 'PingFang SC', 'Microsoft YaHei', 'Droid Sans Fallback', monospace"

    /// A run repeated at least this many times is collapsed.
    public static let collapseThreshold = 4

    /// Layer → colour (distinct hues; the legend shows them).
    static let colours: [(layer: String, title: String, colour: String)] = [
        ("hci", "HCI", "#1f6fb4"), ("l2cap", "L2CAP", "#8e44ad"), ("signaling", "L2CAP signaling", "#b0489b"),
        ("att", "ATT / GATT", "#218a3a"), ("smp", "SMP", "#c0392b"), ("monitor", "btmon note", "#7f7f7f"),
    ]

    static func colour(_ layer: String) -> String { colours.first { $0.layer == layer }?.colour ?? "#444444" }

    /// One drawn row.
    enum Row {
        case step(number: Int, FlowStep)
        case arrow(FlowArrow)
        /// `count` repetitions of `cycle` arrows were folded (first and last are drawn); `hidden`
        /// are the folded arrows (listed in the row's pop-up panel).
        case folded(count: Int, cycle: [FlowArrow], first: Int, last: Int, hidden: ArraySlice<FlowArrow>)
        /// The `steps` steps above happen `times` more times (packets #first–#last).
        case repeatedSteps(steps: Int, times: Int, first: Int, last: Int)
    }

    /// The rows to draw, with repetition folded.
    static func rows(_ d: FlowDiagram) -> [Row] {
        var rows: [Row] = []
        // Whole sequences of steps that repeat (a capture of the same session run many times)
        // are drawn once, then one row says how often they repeat.
        let signature = d.steps.map { step -> Int in
            var h = Hasher()
            h.combine(step.kind.rawValue)
            h.combine(step.asServer)
            for a in step.arrows { h.combine(a.shape); h.combine(FlowText.column(a.from)); h.combine(FlowText.column(a.to)) }
            return h.finalize()
        }
        var n = 0
        while n < d.steps.count {
            if let (period, reps) = repetition(signature, at: n, maxPeriod: 32, minRepeats: 3) {
                for k in n..<(n + period) { appendStep(k, d.steps[k], to: &rows) }
                let firstFolded = d.steps[n + period].arrows.first?.index ?? 0
                let lastFolded = d.steps[n + reps * period - 1].arrows.last?.index ?? 0
                rows.append(.repeatedSteps(steps: period, times: reps - 1, first: firstFolded, last: lastFolded))
                n += reps * period
            } else {
                appendStep(n, d.steps[n], to: &rows)
                n += 1
            }
        }
        return rows
    }

    /// The shortest period (≤ maxPeriod) with which `sig` repeats from `start` at least
    /// `minRepeats` times, and how many times it does.
    static func repetition(_ sig: [Int], at start: Int, maxPeriod: Int, minRepeats: Int) -> (Int, Int)? {
        for period in 1...maxPeriod where start + period * minRepeats <= sig.count {
            var reps = 1
            while start + (reps + 1) * period <= sig.count,
                  (0..<period).allSatisfy({ sig[start + reps * period + $0] == sig[start + $0] }) {
                reps += 1
            }
            if reps >= minRepeats { return (period, reps) }
        }
        return nil
    }

    /// A step's band and its arrows, runs of the same exchange folded.
    private static func appendStep(_ n: Int, _ step: FlowStep, to rows: inout [Row]) {
        rows.append(.step(number: n + 1, step))
        let a = step.arrows
        let signature = a.map { arrow -> Int in
            var h = Hasher()
            h.combine(arrow.shape)
            h.combine(FlowText.column(arrow.from))
            return h.finalize()
        }
        var i = 0
        while i < a.count {
            guard let (period, reps) = repetition(signature, at: i, maxPeriod: 3, minRepeats: collapseThreshold) else {
                rows.append(.arrow(a[i]))
                i += 1
                continue
            }
            // First and last occurrence drawn, the ones between folded into one row.
            for k in 0..<period { rows.append(.arrow(a[i + k])) }
            let lastStart = i + (reps - 1) * period
            rows.append(.folded(count: reps - 2, cycle: Array(a[i..<(i + period)]),
                                first: a[i + period].index, last: a[lastStart - 1].index,
                                hidden: a[(i + period)..<lastStart]))
            for k in 0..<period { rows.append(.arrow(a[lastStart + k])) }
            i += reps * period
        }
    }

    /// The SVG document.
    public static func render(_ d: FlowDiagram, language: Language = .english) -> String {
        let titles = FlowWords.columnTitles(d, language)
        let rows = rows(d)
        let lastLane = firstLane + (titles.count - 1) * laneSpacing
        let width = lastLane + laneSpacing
        var height = top + 8
        for r in rows {
            switch r {
            case .step, .repeatedSteps: height += stepHeight
            default: height += rowHeight
            }
        }
        height += 16
        let summary = FlowWords.summary(packets: d.packetCount, steps: d.steps.count).text(language)
        var s = ""
        s.reserveCapacity(rows.count * 260 + 4096)
        s += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        s += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(width)\" height=\"\(height)\" viewBox=\"0 0 \(width) \(height)\" font-family=\"\(fontStack)\" font-size=\"11\">\n"
        s += "<title>ble-hci flow: \(summary)</title>\n"
        s += "<defs>\n"
        for c in colours {
            s += "<marker id=\"head-\(c.layer)\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"\(c.colour)\"/></marker>\n"
        }
        s += "<style>.panel { display: none } .panel:target { display: inline }</style>\n"
        s += "</defs>\n"
        s += "<rect x=\"0\" y=\"0\" width=\"\(width)\" height=\"\(height)\" fill=\"#ffffff\"/>\n"
        s += "<text x=\"10\" y=\"18\" font-size=\"13\" font-weight=\"bold\">ble-hci flow: \(summary)</text>\n"
        var lx = 10
        for c in colours {
            s += "<rect x=\"\(lx)\" y=\"28\" width=\"12\" height=\"10\" fill=\"\(c.colour)\"/><text x=\"\(lx + 16)\" y=\"37\">\(escape(c.title))</text>\n"
            lx += 30 + Int(Double(TextWidth.columns(of: c.title)) * charWidth)
        }
        s += "<text x=\"10\" y=\"\(top - 14)\" fill=\"#555555\">#  \(FlowWords.timeColumn.text(language))</text>\n"
        for (i, t) in titles.enumerated() {
            let x = firstLane + i * laneSpacing
            s += "<rect x=\"\(x - 95)\" y=\"\(top - 34)\" width=\"190\" height=\"24\" rx=\"4\" fill=\"#f2f2f2\" stroke=\"#333333\"/>"
            s += "<text x=\"\(x)\" y=\"\(top - 18)\" text-anchor=\"middle\" font-weight=\"bold\">\(escape(t))</text>\n"
            s += "<line x1=\"\(x)\" y1=\"\(top - 10)\" x2=\"\(x)\" y2=\"\(height - 8)\" stroke=\"#999999\" stroke-dasharray=\"4 3\"/>\n"
        }
        var y = top + 8
        var panels = 0
        var panelText = ""
        for r in rows {
            switch r {
            case let .step(number, step):
                s += "<g class=\"step\"><rect x=\"4\" y=\"\(y + 2)\" width=\"\(width - 8)\" height=\"\(stepHeight - 4)\" fill=\"#fff6d5\" stroke=\"#e0c060\"/>"
                s += "<text x=\"10\" y=\"\(y + 16)\"><tspan font-weight=\"bold\">\(number). \(escape(step.kind.title(language)))</tspan>  \(escape(step.kind.coreBluetooth(asServer: step.asServer, language: language)))</text></g>\n"
                y += stepHeight
            case .arrow(let a):
                appendArrow(a, y: y, start: d.start, to: &s)
                y += rowHeight
            case let .folded(count, cycle, first, last, hidden):
                let names = cycle.map(\.shape)
                let what = names.count == 1 ? names[0] : names.joined(separator: " + ")
                panels += 1
                // A link to the panel that lists the folded packets (CSS :target, no script).
                s += "<a href=\"#fold-\(panels)\"><g class=\"folded\"><title>click to list the \(hidden.count) folded packets</title>"
                s += "<rect x=\"\(firstLane - 20)\" y=\"\(y + 2)\" width=\"\(lastLane - firstLane + 40)\" height=\"\(rowHeight - 4)\" fill=\"#eeeeee\" stroke=\"#bbbbbb\" stroke-dasharray=\"2 2\"/>"
                s += "<text x=\"\(firstLane)\" y=\"\(y + 13)\" font-style=\"italic\">⋮ × \(count + 2) in all: \(escape(what)) — \(count) repetitions folded (#\(first)–#\(last)) ▸</text></g></a>\n"
                appendPanel(panels, hidden, y: y, x: firstLane - 20, width: lastLane - firstLane + 40, height: height, start: d.start, to: &panelText)
                y += rowHeight
            case let .repeatedSteps(steps, times, first, last):
                s += "<g class=\"repeated\"><rect x=\"4\" y=\"\(y + 2)\" width=\"\(width - 8)\" height=\"\(stepHeight - 4)\" fill=\"#e8e8e8\" stroke=\"#999999\" stroke-dasharray=\"4 2\"/>"
                s += "<text x=\"10\" y=\"\(y + 16)\" font-style=\"italic\">⋮ the \(steps == 1 ? "step" : "\(steps) steps") above repeat × \(times) more (packets #\(first)–#\(last), folded)</text></g>\n"
                y += stepHeight
            }
        }
        s += panelText  // last, so an open panel is drawn over the diagram
        s += "</svg>\n"
        return s
    }

    /// At most this many folded packets are listed in a panel.
    static let panelLines = 40

    /// The panel of fold `n`: hidden until its row is clicked (`#fold-n` becomes the target).
    private static func appendPanel(_ n: Int, _ hidden: ArraySlice<FlowArrow>, y: Int, x: Int, width: Int, height: Int,
                                    start: CaptureTime?, to s: inout String) {
        let listed = hidden.prefix(panelLines)
        let lines = listed.count + (hidden.count > listed.count ? 1 : 0)
        let h = 34 + lines * 14
        let py = max(top, min(y, height - h - 4))
        s += "<g id=\"fold-\(n)\" class=\"panel\"><rect x=\"\(x)\" y=\"\(py)\" width=\"\(width)\" height=\"\(h)\" fill=\"#fffff4\" stroke=\"#666666\"/>"
        s += "<a href=\"#\"><text x=\"\(x + width - 8)\" y=\"\(py + 16)\" text-anchor=\"end\" font-weight=\"bold\">close ✕</text></a>"
        s += "<text x=\"\(x + 8)\" y=\"\(py + 16)\" font-weight=\"bold\">\(hidden.count) folded packets</text>"
        var ly = py + 32
        for a in listed {
            s += "<text x=\"\(x + 8)\" y=\"\(ly)\" fill=\"\(colour(a.layer))\">#\(a.index) \(FlowText.relativeTime(a.time, since: start)) \(escape(fit(a.label, px: width - 140)))</text>"
            ly += 14
        }
        if hidden.count > listed.count { s += "<text x=\"\(x + 8)\" y=\"\(ly)\">… and \(hidden.count - listed.count) more (ble-hci dump --flow lists every packet)</text>" }
        s += "</g>\n"
    }

    private static func appendArrow(_ a: FlowArrow, y: Int, start: CaptureTime?, to s: inout String) {
        let c = colour(a.layer)
        let from = FlowText.column(a.from), to = FlowText.column(a.to)
        let x1 = firstLane + from * laneSpacing, x2 = firstLane + to * laneSpacing
        let ly = y + rowHeight - 4
        s += "<g><title>#\(a.index) \(escape(a.label))</title>"
        s += "<text x=\"10\" y=\"\(ly)\" fill=\"#555555\">#\(a.index)</text><text x=\"62\" y=\"\(ly)\" fill=\"#555555\">\(FlowText.relativeTime(a.time, since: start))</text>"
        let dash = a.malformed ? " stroke-dasharray=\"5 3\"" : ""
        if from == to {
            s += "<circle cx=\"\(x1)\" cy=\"\(ly - 2)\" r=\"4\" fill=\"\(c)\"/>"
            s += "<text x=\"\(x1 + 10)\" y=\"\(ly)\" fill=\"\(c)\">\(escape(fit(a.label, px: laneSpacing - 20)))</text>"
        } else {
            s += "<line x1=\"\(x1)\" y1=\"\(ly)\" x2=\"\(x2)\" y2=\"\(ly)\" stroke=\"\(c)\" stroke-width=\"1.5\"\(dash) marker-end=\"url(#head-\(a.layer))\"/>"
            let lo = min(x1, x2)
            s += "<text x=\"\(lo + 8)\" y=\"\(ly - 3)\" fill=\"\(c)\">\(escape(fit(a.label, px: abs(x2 - x1) - 16)))</text>"
        }
        s += "</g>\n"
    }

    /// How many characters fit in `px` pixels of the 11 px monospace font (at least 8).
    static func capacity(px: Int) -> Int { max(8, Int(Double(px) / charWidth)) }

    /// Shorter spellings of the words labels repeat, tried in order until a label fits.
    static let abbreviations: [(String, String)] = [
        ("HCI Command ", "HCI Cmd "), ("HCI Event ", "HCI Evt "), ("Command ", "Cmd "), ("Extended ", "Ext "), ("Advertising", "Adv"),
        ("Connection", "Conn"), ("Parameters", "Params"), ("Information", "Info"), ("Supported", "Supp"),
        ("Request", "Req"), ("Response", "Rsp"), ("Complete", "Cmpl"), ("Number Of Completed Packets", "NOCP"),
    ]

    /// The label made to fit `px` pixels (the full label is in the row's <title>): first with
    /// the common words abbreviated, then cut in the middle so the last word stays — it is what
    /// tells packets of one kind apart ("on" / "off", a value, a reason, a size).
    static func fit(_ label: String, px: Int) -> String {
        let n = capacity(px: px)
        if TextWidth.columns(of: label) <= n { return label }
        var short = label
        for (long, abbreviation) in abbreviations {
            short = short.replacingOccurrences(of: long, with: abbreviation)
            if TextWidth.columns(of: short) <= n { return short }
        }
        guard let space = short.lastIndex(of: " ") else { return TextWidth.prefix(short, columns: n - 1) + "…" }
        let last = String(short[short.index(after: space)...])
        let lastWidth = TextWidth.columns(of: last)
        guard lastWidth + 2 < n else { return TextWidth.prefix(short, columns: n - 1) + "…" }  // the word alone is too long
        return TextWidth.prefix(short, columns: n - lastWidth - 2) + "… " + last
    }

    static func escape(_ t: String) -> String {
        var out = ""
        out.reserveCapacity(t.utf8.count)
        for ch in t.unicodeScalars {
            switch ch {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default:
                // XML 1.0 forbids most control characters even escaped.
                if (ch.value < 0x20 && ch != "\t" && ch != "\n") || ch.value == 0xFFFE || ch.value == 0xFFFF {
                    out += "?"
                } else {
                    out.unicodeScalars.append(ch)
                }
            }
        }
        return out
    }
}
