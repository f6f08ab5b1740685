import Foundation
import HCI
import Transport

/// Wraps a transport: every packet sent and received is written to the capture writers and
/// shown to the observer (the CLI's `--trace`), then passed on unchanged.
public final class CapturingTransport: HCITransport, Sendable {
    public typealias Observer = @Sendable (Direction, HCIPacket, Date) -> Void

    public let inner: any HCITransport
    public let writers: [CaptureWriter]
    private let observer: Observer?

    public var name: String { inner.name }
    /// The inner transport's inbox, tapped: received packets are recorded where they arrive and
    /// the host reads them as it would without a capture (same batches, same executor).
    public var inbox: PacketInbox { inner.inbox }
    public var executor: SerialThreadExecutor? { inner.executor }

    public init(_ inner: any HCITransport, writers: [CaptureWriter] = [], observer: Observer? = nil) {
        self.inner = inner
        self.writers = writers
        self.observer = observer
        inner.inbox.tap { packet in
            let now = Date()
            for w in writers { w.write(packet, direction: .received, time: now) }
            observer?(.received, packet, now)
        }
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
