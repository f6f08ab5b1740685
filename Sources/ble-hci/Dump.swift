import Foundation
import HCI
import Capture
import Decoder

/// `ble-hci dump FILE [--layers LAYERS] [--json]` (CLI.md). Decodes every record through every
/// layer and prints a tree (or one JSON object per line). Exit 1 with one sentence on stderr
/// when the file is missing, unreadable or not a capture; a capture cut mid-record prints every
/// whole record, then warns on stderr and exits 0 (the header was valid).
func runDump(_ c: CommandContext) async throws -> Int32 {
    guard let path = c.args.positionals.first else { throw UsageError("dump needs a capture FILE", command: c.command) }
    guard c.args.positionals.count == 1 else {
        throw UsageError("dump takes one FILE, got \(c.args.positionals.count): \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let layers = try parseLayers(c.args.last("layers"))
    var reader: CaptureReader
    do {
        reader = try CaptureReader(path: path)
    } catch {
        c.out.error(error.description)
        return ExitCode.failure
    }
    let flow = c.args.has("flow")
    let svgPath = c.args.last("svg")
    if flow || svgPath != nil {
        guard !c.out.json else { throw UsageError("--json, --flow and --svg are alternatives: choose one", command: c.command) }
        return try runFlow(&reader, layers: layers, text: flow, svgPath: svgPath, c)
    }
    let decoder = PacketDecoder()
    // Performance: render UTF-8 bytes straight into one buffer (no String per packet), and
    // resolve `--layers` once instead of hashing layer names per packet.
    let selection = LayerSelection(layers)
    var out = BufferedStdout()
    let json = c.out.json
    var warning: String? = nil
    while true {
        let record: CaptureRecord?
        do {
            record = try reader.next()
        } catch {
            warning = error.description
            break
        }
        guard let record else { break }
        let p = decoder.decode(record)
        if json {
            appendJSON(p, layers: selection, to: &out.buffer)
            out.buffer.append(byte: 10)
        } else {
            appendTree(p, layers: selection, to: &out.buffer)
        }
        out.flushIfFull()
    }
    out.flush()
    if let warning { c.out.error("warning: \(warning)") }
    return ExitCode.success
}

/// `dump --flow` / `--svg OUT.svg`: the capture as a sequence diagram (Decoder's FlowBuilder,
/// drawn by FlowText / FlowSVG). Both together print the text and write the SVG.
private func runFlow(_ reader: inout CaptureReader, layers: Set<String>, text: Bool, svgPath: String?, _ c: CommandContext) throws -> Int32 {
    let decoder = PacketDecoder()
    var builder = FlowBuilder(layers: layers)
    var warning: String? = nil
    while true {
        let record: CaptureRecord?
        do {
            record = try reader.next()
        } catch {
            warning = error.description
            break
        }
        guard let record else { break }
        builder.add(decoder.decode(record))
    }
    let diagram = builder.finish()
    if text {
        var out = BufferedStdout()
        FlowText.render(diagram, to: &out.buffer)
        out.flush()
    }
    if let svgPath {
        let svg = FlowSVG.render(diagram)
        do {
            // Written whole to a temporary file, then renamed: never a half-written SVG.
            try Data(svg.utf8).write(to: URL(fileURLWithPath: svgPath), options: .atomic)
        } catch {
            c.out.error("cannot write \(svgPath): \(error.localizedDescription)")
            return ExitCode.failure
        }
    }
    if let warning { c.out.error("warning: \(warning)") }
    return ExitCode.success
}

/// Collects output and writes it to fd 1 in chunks of about 64 KiB: no syscall per packet.
struct BufferedStdout {
    var buffer: RenderBuffer
    static let chunk = 64 * 1024

    init() { buffer = RenderBuffer(capacity: Self.chunk + 8192) }

    mutating func flushIfFull() {
        if buffer.count >= Self.chunk { flush() }
    }

    mutating func flush() {
        guard buffer.count > 0 else { return }
        buffer.bytes.withUnsafeBytes { buf in
            var offset = 0
            while offset < buf.count {
                let n = write(STDOUT_FILENO, buf.baseAddress! + offset, buf.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return  // stdout closed (e.g. `| head`): nothing more to do
                }
                offset += n
            }
        }
        buffer.removeAll()
    }
}
