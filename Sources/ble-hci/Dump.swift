import Foundation
import HCI
import Capture
import Decoder
import ATT
import GATT

/// `ble-hci dump FILE [--layers LAYERS] [--json]` (CLI.md). Decodes every record through every
/// layer and prints a tree (or one JSON object per line). Exit 1 with one sentence on stderr
/// when the file is missing, unreadable or not a capture; a capture cut mid-record or with a
/// corrupt record prints every whole record before it, then names the record and its byte
/// offset on stderr and exits 1. A header with no records after it is a failed capture too
/// (issue 16 counts "header only" among the corrupt captures): exit 1, saying so.
func runDump(_ c: CommandContext) async throws -> Int32 {
    guard let path = c.args.positionals.first else { throw UsageError("dump needs a capture FILE", command: c.command) }
    guard c.args.positionals.count == 1 else {
        throw UsageError("dump takes one FILE, got \(c.args.positionals.count): \(c.args.positionals.joined(separator: " "))", command: c.command)
    }
    let layers = try parseLayers(c.args.last("layers"))
    var reader: CaptureReader
    do {
        reader = try openCapture(path)
    } catch {
        c.out.error(error.description)
        return ExitCode.failure
    }
    let flow = c.args.has("flow")
    let svgPath = c.args.last("svg")
    let hex = c.args.has("hex")
    if let htmlPath = c.args.last("html") {
        // The page is the whole explorer: it has its own layer filter, listing and diagram.
        if let other = ["flow", "svg", "layers", "hex", "stats", "attributes"].first(where: c.args.has) {
            throw UsageError("--html writes the whole capture explorer: --\(other) does not go with it", command: c.command)
        }
        guard !c.out.json else { throw UsageError("--html writes a page: --json does not go with it", command: c.command) }
        return runHTML(&reader, path: path, htmlPath: htmlPath, c)
    }
    let explain = c.args.has("explain")
    if c.args.has("stats") {
        // The statistics cover every packet and layer: the options that select packets to
        // print or draw them have nothing to act on.
        if let other = ["flow", "svg", "layers", "hex", "explain"].first(where: c.args.has) {
            throw UsageError("--stats summarises every packet and layer of the capture: --\(other) does not go with it (--json does)", command: c.command)
        }
        return runStats(&reader, path: path, c)
    }
    if c.args.has("attributes") {
        if let other = ["flow", "svg", "layers", "hex", "explain"].first(where: c.args.has) {
            throw UsageError("--attributes lists each GATT server's attribute table: --\(other) does not go with it (--json does)", command: c.command)
        }
        return runAttributes(&reader, path: path, c)
    }
    if flow || svgPath != nil {
        guard !c.out.json else { throw UsageError("--json, --flow and --svg are alternatives: choose one", command: c.command) }
        guard !hex else { throw UsageError("--hex adds octets to the packet listing: it does not go with --flow or --svg", command: c.command) }
        guard !explain else { throw UsageError("--explain annotates the packet listing: it does not go with --flow or --svg", command: c.command) }
        return try runFlow(&reader, path: path, layers: layers, text: flow, svgPath: svgPath, c)
    }
    // Performance: render UTF-8 bytes straight into one buffer (no String per packet), and
    // resolve `--layers` once instead of hashing layer names per packet.
    let selection = LayerSelection(layers)
    var out = BufferedStdout()
    let json = c.out.json
    let decoder = PacketDecoder(layerOctets: hex)
    let (records, damage) = decodeAll(&reader, decoder) { p in
        // --layers selects what is shown: a packet with nothing in those layers is left out.
        guard selection.shows(p) else { return }
        if json {
            appendJSON(p, layers: selection, hex: hex, explain: explain, to: &out.buffer)
            out.buffer.append(byte: 10)
        } else {
            appendTree(p, layers: selection, hex: hex, explain: explain, to: &out.buffer)
        }
        out.flushIfFull()
    }
    out.flush()
    return outcome(path, damage: damage, records: records, c)
}

/// Decodes every record up to the end or the first damage; returns how many records were read
/// and the damage (the reader's message names the record number and byte offset), if any.
private func decodeAll(_ reader: inout CaptureReader, _ decoder: PacketDecoder = PacketDecoder(),
                       _ body: (DecodedPacket) -> Void) -> (records: Int, damage: String?) {
    decodeRecords(&reader, decoder) { p, _ in body(p) }
}

/// `decodeAll`, with each packet's record (its bytes: `dump --html` shows them).
private func decodeRecords(_ reader: inout CaptureReader, _ decoder: PacketDecoder,
                           _ body: (DecodedPacket, CaptureRecord) -> Void) -> (records: Int, damage: String?) {
    var records = 0
    while true {
        do {
            guard let record = try reader.next() else { return (records, nil) }
            records += 1
            body(decoder.decode(record), record)
        } catch {
            return (records, error.description)
        }
    }
}

/// Damage (a cut or corrupt record) fails the run after everything before it was shown, as
/// tshark does; so does a capture that ends right after its file header (issue 16).
private func outcome(_ path: String, damage: String?, records: Int, _ c: CommandContext) -> Int32 {
    let name = path == "-" ? "stdin" : path
    if let damage {
        c.out.error("\(name): \(damage)")
        return ExitCode.failure
    }
    if records == 0 {
        c.out.error("\(name): a valid header with no packets after it")
        return ExitCode.failure
    }
    return ExitCode.success
}

/// `dump --stats`: every packet decoded, nothing printed per packet; then the statistics (one
/// JSON object with `--json`). A damaged capture gets the statistics of what came before the
/// damage, then fails as plain `dump` does.
private func runStats(_ reader: inout CaptureReader, path: String, _ c: CommandContext) -> Int32 {
    let decoder = PacketDecoder(statistics: true)
    let (records, damage) = decodeAll(&reader, decoder) { _ in }
    if damage == nil && records == 0 { return outcome(path, damage: nil, records: 0, c) }
    if let stats = decoder.statistics() {
        var out = BufferedStdout()
        if c.out.json {
            out.buffer.append(stats.json)
            out.buffer.append(byte: 10)
        } else {
            out.buffer.append(stats.text)
        }
        out.flush()
    }
    return outcome(path, damage: damage, records: records, c)
}

/// `dump --attributes`: every packet decoded, nothing printed per packet; then each GATT
/// server's attribute table as the capture revealed it. With `--json`, one `gatt` line per
/// server in the shape `peripheral --gatt` reads (CLI.md), so a device seen in a log can be
/// served again.
private func runAttributes(_ reader: inout CaptureReader, path: String, _ c: CommandContext) -> Int32 {
    let decoder = PacketDecoder(attributes: true)
    let (records, damage) = decodeAll(&reader, decoder) { _ in }
    if damage == nil && records == 0 { return outcome(path, damage: nil, records: 0, c) }
    let servers = decoder.attributes() ?? []
    let out = c.out
    if servers.isEmpty { out.line("No ATT server traffic in the capture (no discovery, reads or notifications).") }
    for server in servers {
        var snapshot = GATTSnapshot(tree: server.tree, values: server.values)
        for (handle, code) in server.readRefusals { snapshot.errors[handle] = ATTError(code, requestOpcode: .readRequest, handle: handle) }
        snapshot.permissions = revealedPermissions(server)
        let side = server.serverDirection.map { $0 == .received ? "remote" : "local" }
        if c.out.json {
            var fields = snapshot.jsonFields
            fields.insert(.int("connection", server.connection), at: 1)
            if let side { fields.insert(.text("server", side), at: 2) }
            if !server.unplaced.isEmpty {
                fields.append(Field("unplaced", .list(server.unplaced.map { h in
                    var f: [Field] = [.int("handle", h)]
                    if let v = server.values[h] { f.append(.bytes("value", v)) }
                    return .object(f)
                })))
            }
            out.event(fields)
            continue
        }
        let whose = side.map { $0 == "remote" ? "the capture's peer" : "this host" } ?? "direction unknown"
        out.line("GATT server on connection \(hexCode(server.connection, digits: 4)) (\(whose))")
        if server.tree.isEmpty { out.line("  no service discovery in the capture") }
        for line in snapshot.humanLines(out) { out.line("  \(line)") }
        for (handle, code) in server.writeRefusals.sorted(by: { $0.key < $1.key }) {
            out.line("  handle \(handle): writes refused: \(code.name) (\(hexCode(code.rawValue)))")
        }
        for handle in server.unplaced {
            let value = server.values[handle].map { " = \(valueLabel($0))" } ?? ""
            out.line("  handle \(handle) (no characteristic or descriptor the capture discovered)\(value)")
        }
    }
    return outcome(path, damage: damage, records: records, c)
}

/// The permissions (`peripheral --gatt` names) the server's Error Responses revealed, by
/// characteristic value handle and descriptor handle; only for attributes that were refused.
/// Read Not Permitted (0x02) and Write Not Permitted (0x03) take the access away; Insufficient
/// Authentication (0x05) asks for an authenticated link; Insufficient Encryption (0x0F) and
/// Encryption Key Size Too Short (0x0C) for an encrypted one (Core v5.4 Vol 3 Part F 3.4.1.1).
func revealedPermissions(_ server: ServerAttributes) -> [UInt16: [String]] {
    var out: [UInt16: [String]] = [:]
    var properties: [UInt16: GATTCharacteristicProperties] = [:]
    for s in server.tree { for c in s.characteristics { properties[c.characteristic.valueHandle] = c.characteristic.properties } }
    for handle in Set(server.readRefusals.keys).union(server.writeRefusals.keys) {
        let p = properties[handle]
        var read: String? = p.map { $0.contains(.read) ? "read" : nil } ?? "read"
        var write: String? = p.map { $0.contains(.write) || $0.contains(.writeWithoutResponse) || $0.contains(.authenticatedSignedWrites) ? "write" : nil } ?? nil
        switch server.readRefusals[handle] {
        case .readNotPermitted?: read = nil
        case .insufficientAuthentication?: read = "readAuthenticated"
        case .insufficientEncryption?, .encryptionKeySizeTooShort?: read = "readEncrypted"
        default: break
        }
        switch server.writeRefusals[handle] {
        case .writeNotPermitted?: write = nil
        case .insufficientAuthentication?: write = "writeAuthenticated"
        case .insufficientEncryption?, .encryptionKeySizeTooShort?: write = "writeEncrypted"
        case nil: break
        default: write = write ?? "write"
        }
        out[handle] = [read, write].compactMap { $0 }
    }
    return out
}

/// `dump --flow` / `--svg OUT.svg`: the capture as a sequence diagram (Decoder's FlowBuilder,
/// drawn by FlowText / FlowSVG). Both together print the text and write the SVG.
private func runFlow(_ reader: inout CaptureReader, path: String, layers: Set<String>, text: Bool, svgPath: String?, _ c: CommandContext) throws -> Int32 {
    var builder = FlowBuilder(layers: layers)
    let (records, damage) = decodeAll(&reader) { builder.add($0) }
    // Nothing to draw: no empty diagram, no SVG file.
    if damage == nil && records == 0 { return outcome(path, damage: nil, records: 0, c) }
    let diagram = builder.finish()
    if text {
        var out = BufferedStdout()
        FlowText.render(diagram, to: &out.buffer, language: c.out.language)
        out.flush()
    }
    if let svgPath {
        let svg = FlowSVG.render(diagram, language: c.out.language)
        do {
            // Written whole to a temporary file, then renamed: never a half-written SVG.
            try Data(svg.utf8).write(to: URL(fileURLWithPath: svgPath), options: .atomic)
        } catch {
            c.out.error("cannot write \(svgPath): \(error.localizedDescription)")
            return ExitCode.failure
        }
    }
    // A damaged capture fails as plain `dump` does, after drawing what came before the damage.
    return outcome(path, damage: damage, records: records, c)
}

/// `dump --html OUT.html`: every packet decoded with its fields' octet ranges, the flow, the
/// exchanges and the GATT database, into one page (Decoder's ExplorerPage).
private func runHTML(_ reader: inout CaptureReader, path: String, htmlPath: String, _ c: CommandContext) -> Int32 {
    let decoder = PacketDecoder(attributes: true, fieldRanges: true)
    var page = ExplorerPage(title: path == "-" ? "stdin" : (path as NSString).lastPathComponent, explain: ExplorerPage.fieldExplanations)
    let (records, damage) = decodeRecords(&reader, decoder) { p, record in page.add(p, raw: record.raw) }
    if damage == nil && records == 0 { return outcome(path, damage: nil, records: 0, c) }
    do {
        // Written whole to a temporary file, then renamed: never a half-written page.
        try Data(page.render(servers: decoder.attributes() ?? []).utf8).write(to: URL(fileURLWithPath: htmlPath), options: .atomic)
    } catch {
        c.out.error("cannot write \(htmlPath): \(error.localizedDescription)")
        return ExitCode.failure
    }
    return outcome(path, damage: damage, records: records, c)
}

/// FILE, or standard input for `-` (a pipe: `... | ble-hci dump -`). Paths such as
/// /dev/stdin that FileManager cannot map are read as streams.
func openCapture(_ path: String) throws(CaptureError) -> CaptureReader {
    if path == "-" { return try CaptureReader(bytes: try readStream(FileHandle.standardInput, name: "stdin"), name: "stdin") }
    if let data = FileManager.default.contents(atPath: path) {
        return try CaptureReader(bytes: [UInt8](data), name: path)
    }
    if let handle = FileHandle(forReadingAtPath: path) {  // /dev/stdin, a FIFO: not mappable
        return try CaptureReader(bytes: try readStream(handle, name: path), name: path)
    }
    return try CaptureReader(path: path)  // says why it cannot be read
}

/// A pipe's bytes up to its end, at most `streamLimit` of them: a pipe that never ends must
/// not grow memory without bound.
private func readStream(_ handle: FileHandle, name: String) throws(CaptureError) -> [UInt8] {
    let streamLimit = 1 << 30
    var bytes: [UInt8] = []
    while true {
        let chunk = handle.availableData
        if chunk.isEmpty { return bytes }
        guard bytes.count + chunk.count <= streamLimit else {
            throw CaptureError("\(name): more than \(streamLimit >> 20) MiB from a pipe; write it to a file and dump that")
        }
        bytes += chunk
    }
}

/// Collects output and writes it to fd 1 in chunks of about 64 KiB: no syscall per packet.
struct BufferedStdout: ~Copyable {
    var buffer: RenderBuffer
    static let chunk = 64 * 1024

    init() { buffer = RenderBuffer(capacity: Self.chunk + 8192) }

    mutating func flushIfFull() {
        if buffer.count >= Self.chunk { flush() }
    }

    mutating func flush() {
        guard buffer.count > 0 else { return }
        buffer.withUnsafeBytes { buf in
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
