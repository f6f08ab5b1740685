import Foundation
import GATT
import Transport

extension DemoProfile {
    /// Runs fff1's behaviour: once a second, while anyone is subscribed, notify the current
    /// second of the minute as two ASCII digits. Cancel the task to stop.
    public static func startTicker(on peripheral: Peripheral, interval: Duration = .seconds(1)) -> Task<Void, Never> {
        Task {
            while !Task.isCancelled {
                if !peripheral.subscribers(of: ticker).isEmpty {
                    let second = Calendar(identifier: .gregorian).component(.second, from: Date())
                    _ = try? await peripheral.notify(tick(second: second), for: ticker)  // 2 octets: fits any link
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}

extension BandProfile {
    /// Opens a peripheral serving the band profile: each command written to fee1 is answered
    /// on fee2 to the writer, in notifications of at most 20 octets, in order.
    public static func openPeripheral(_ transport: any HCITransport, name: String, options: StackOptions = .init()) async throws -> Peripheral {
        let replies = AsyncStream<(UInt16, [UInt8])>.makeStream(bufferingPolicy: .bufferingNewest(64))
        let services = BandProfile.services { peer, written in replies.continuation.yield((peer.id, written)) }
        let peripheral = try await Peripheral.open(transport, services: services, name: name, options: options)
        Task {
            for await (handle, written) in replies.stream {
                for chunk in responseChunks(to: written) {
                    // Chunks of at most 20 octets fit the smallest ATT_MTU (23 − 3).
                    if (try? await peripheral.notify(chunk, for: response, to: [handle]))?.isEmpty ?? true { break }
                }
            }
        }
        return peripheral
    }
}
