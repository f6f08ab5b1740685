// The central side of the `band` profile (docs/band.md), beside its peripheral (DemoProfile's
// BandProfile) and its frames (BandProtocol): requests written to fee1, responses reassembled
// from fee2 notifications.
import GATT

/// Why a band exchange failed (besides the link's and GATT's own errors).
public enum BandClientError: Error, Sendable, Equatable, CustomStringConvertible {
    case noAnswer(Duration)

    public var description: String {
        switch self {
        case .noAnswer(let d): return "the band did not answer within \(d.components.seconds) s"
        }
    }
}

/// One band-profile peer: `exchange` writes a request and returns the response reassembled
/// from the notifications that carry it (at most `timeout` later).
public final class BandClient: Sendable {
    public let remote: RemotePeripheral
    public let timeout: Duration
    let command: GATTRemoteCharacteristic
    let response: GATTRemoteCharacteristic
    let frames = Mailbox<Result<(BandProtocol.Frame, Int), any Error>>(capacity: 8)
    let reassembly: Task<Void, Never>

    /// Finds fee1/fee2 on `remote` and subscribes to the responses.
    public init(_ remote: RemotePeripheral, timeout: Duration = .seconds(10)) async throws {
        let all = try await remote.discoverAll().flatMap(\.characteristics).map(\.characteristic)
        guard let command = all.first(where: { $0.uuid == BandProfile.command }),
              let response = all.first(where: { $0.uuid == BandProfile.response }) else {
            throw BLEError.unknownCharacteristic("fee1/fee2: is this a band-profile peripheral?")
        }
        self.remote = remote
        self.timeout = timeout
        self.command = command
        self.response = response
        let notifications = try await remote.notifications(for: response)
        let frames = self.frames
        // Reassembles in the background; each complete frame (or the error) goes to the mailbox.
        reassembly = Task {
            var reassembler = BandProtocol.Reassembler()
            var chunks = 0
            do {
                for try await chunk in notifications {
                    chunks += 1
                    if let frame = try reassembler.push(chunk) {
                        await frames.put(.success((frame, chunks)))
                        chunks = 0
                    }
                }
            } catch {
                await frames.put(.failure(error))
            }
        }
    }

    deinit { reassembly.cancel() }

    /// Writes `request` and returns the band's response with the frame and the number of
    /// notifications it came in.
    public func exchange(_ request: BandProtocol.Frame) async throws
        -> (response: BandProtocol.Response, frame: BandProtocol.Frame, chunks: Int) {
        try await remote.write(request.bytes, to: command, type: .withResponse)
        let frames = self.frames
        let (frame, chunks) = try await withThrowingTaskGroup(of: (BandProtocol.Frame, Int)?.self) { group in
            group.addTask { try await frames.take().get() }
            group.addTask { try await Task.sleep(for: self.timeout); return nil }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let got = first else { throw BandClientError.noAnswer(timeout) }
            return got
        }
        return (try BandProtocol.parseResponse(frame), frame, chunks)
    }

    /// Unsubscribes and stops reassembling.
    public func close() async throws {
        reassembly.cancel()
        try await remote.stopNotifications(for: response)
    }
}

/// A queue one task fills and another drains, waiting. Holds at most `capacity` items (a
/// peer sending what nobody asked for cannot grow it); `take` ends when its task is cancelled.
actor Mailbox<Item: Sendable> {
    private let capacity: Int
    private var items: [Item] = []
    private var waiter: CheckedContinuation<Item, any Error>?

    init(capacity: Int) { self.capacity = capacity }

    func put(_ item: Item) {
        if let w = waiter {
            waiter = nil
            w.resume(returning: item)
        } else if items.count < capacity {
            items.append(item)
        }
    }

    func take() async throws -> Item {
        if !items.isEmpty { return items.removeFirst() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { c in
                if Task.isCancelled { c.resume(throwing: CancellationError()) } else { waiter = c }
            }
        } onCancel: {
            Task { await self.cancelWaiter() }
        }
    }

    private func cancelWaiter() {
        waiter?.resume(throwing: CancellationError())
        waiter = nil
    }
}
