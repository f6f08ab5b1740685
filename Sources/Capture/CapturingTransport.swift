import Foundation
import HCI
import Transport

/// Wraps a transport: every packet sent and received is written to the capture writers and
/// shown to the observer (the CLI's `--trace`), then passed on unchanged.
public final class CapturingTransport: HCITransport, @unchecked Sendable {
    public typealias Observer = @Sendable (Direction, HCIPacket, Date) -> Void

    public let inner: any HCITransport
    public let writers: [CaptureWriter]
    public let incoming: AsyncThrowingStream<HCIPacket, any Error>
    private let observer: Observer?
    private let relay: Task<Void, Never>

    public var name: String { inner.name }

    public init(_ inner: any HCITransport, writers: [CaptureWriter] = [], observer: Observer? = nil) {
        self.inner = inner
        self.writers = writers
        self.observer = observer
        let (stream, continuation) = AsyncThrowingStream<HCIPacket, any Error>.makeStream()
        incoming = stream
        let source = inner.incoming
        relay = Task {
            do {
                for try await packet in source {
                    let now = Date()
                    for w in writers { w.write(packet, direction: .received, time: now) }
                    observer?(.received, packet, now)
                    continuation.yield(packet)
                }
                continuation.finish()
            } catch {
                continuation.finish(throwing: error)
            }
        }
        continuation.onTermination = { @Sendable [relay] _ in relay.cancel() }
    }

    public func send(_ packet: HCIPacket) throws(TransportError) {
        let now = Date()
        for w in writers { w.write(packet, direction: .sent, time: now) }
        observer?(.sent, packet, now)
        try inner.send(packet)
    }

    public func close() {
        inner.close()
    }
}
