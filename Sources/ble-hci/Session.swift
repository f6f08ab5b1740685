import Foundation
import HCI
import Transport
import Capture
import Decoder
import Synchronization

/// Opens what `-t`, `-w` and `--trace` ask for: the transport, wrapped so that every packet is
/// recorded to the capture file and/or decoded and printed live.
struct TracedTransport {
    let transport: any HCITransport
    let writer: CaptureWriter?

    func close() {
        transport.close()
        writer.map(closeCapture)
    }
}

/// Wraps `inner` with the capture writer and the live trace the context asks for.
/// `label` names the host ("central", "peripheral") in trace lines when one process traces two (demo).
func wrapForCaptureAndTrace(_ inner: any HCITransport, context c: CommandContext, writer: CaptureWriter?, label: String? = nil) -> any HCITransport {
    var observer: CapturingTransport.Observer? = nil
    if let layers = c.traceLayers {
        // The observer runs on the transport's reader and on senders: one decode at a time, in order.
        let decoder = LiveDecoder()
        let out = c.out
        observer = { direction, packet, date in
            var text = decoder.state.withLock { d in
                render(d.decode(direction: direction, packet: .success(packet), raw: packet.h4, time: CaptureTime(date)),
                       layers: layers, json: out.json)
            }
            // A packet with nothing in the chosen layers (e.g. an HCI event under --trace=att).
            guard !text.allSatisfy(\.isWhitespace) else { return }
            if let label {
                // Which host: "[central] #12 ..." in text, a leading "host" key in JSON.
                if out.json { text = "{\"host\":\"\(label)\"," + text.dropFirst() } else { text = "[\(label)] " + text }
            }
            if out.json { text += text.hasSuffix("\n") ? "" : "\n"; out.write(text) } else { out.trace(text) }
        }
    }
    guard writer != nil || observer != nil else { return inner }
    return CapturingTransport(inner, writers: writer.map { [$0] } ?? [], observer: observer)
}

/// The live trace's decoder, shared by the threads that see packets.
final class LiveDecoder: Sendable {
    let state = Mutex(PacketDecoder())
}

/// Closes a capture file and says so on stderr when a record could not be written (disk full):
/// the file then holds every record up to the failure, whole.
func closeCapture(_ writer: CaptureWriter) {
    writer.close()
    if let failure = writer.failure {
        FileHandle.standardError.write(Data("ble-hci: the capture \(writer.path) stopped early: \(failure)\n".utf8))
    }
}

/// Opens the capture file of `-w FILE`, if given.
func openCaptureWriter(_ c: CommandContext) throws -> CaptureWriter? {
    guard let path = c.capturePath else { return nil }
    do {
        return try CaptureWriter.open(path: path)
    } catch {
        throw CLIFailure("\(error)", exitCode: ExitCode.failure)  // names the file and the reason
    }
}

/// Opens `-t SPEC` (not `virtual`: commands that support it build the virtual link themselves).
func openTransport(_ c: CommandContext) throws -> TracedTransport {
    let spec = try TransportSpec(parsing: c.transportSpec)
    if case .virtual = spec {
        throw CLIFailure("-t virtual is an in-process controller alone on its link, so \(c.command) would have no other device: use `ble-hci demo` (a central and a peripheral on one virtual link), or run `ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002` and give this command -t tcp:127.0.0.1:9002 (and the other side -t tcp:127.0.0.1:9001)", exitCode: ExitCode.usage)
    }
    let writer = try openCaptureWriter(c)
    let inner = try spec.open()
    return TracedTransport(transport: wrapForCaptureAndTrace(inner, context: c, writer: writer), writer: writer)
}

/// A failure with its own exit code and a one-sentence message.
struct CLIFailure: Error, CustomStringConvertible {
    var message: String
    var exitCode: Int32
    init(_ message: String, exitCode: Int32) { self.message = message; self.exitCode = exitCode }
    var description: String { message }
}
