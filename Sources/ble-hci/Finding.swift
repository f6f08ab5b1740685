import Foundation
import HCI
import BLE

// Finding the central's TARGET, and what was seen on the way (also scan's summary).

/// Scans for TARGET; on failure, names the advertisers seen (with their address types) so a
/// wrong name or address type is visible at once.
func findTarget(_ target: Target, central: Central, timeout: Double, out: Output) async throws -> Advertisement {
    let seen = SeenAdvertisers()
    let stream = try await interruptible { try await central.scan(ScanFilter()) }
    let filter = target.filter
    let found = Task { () -> Advertisement? in
        for try await adv in stream {
            seen.add(adv)
            if filter.matches(adv) { return adv }
        }
        return nil
    }
    let limit = Task { try? await Task.sleep(for: .milliseconds(Int(timeout * 1000))); found.cancel() }
    defer { limit.cancel(); found.cancel() }
    let adv: Advertisement?
    do {
        adv = try await interruptible { try await found.value }
    } catch is CancellationError {
        adv = nil
    }
    guard let adv else {
        let list = seen.summary
        throw CLIFailure("no advertiser matched \(target.description) within \(formatSeconds(timeout))"
                         + (list.isEmpty ? " (none seen at all: is anything advertising?)" : "; seen: " + list),
                         exitCode: ExitCode.failure)
    }
    return adv
}

/// For a failed connection to an address given with a type: the type may be the wrong one.
func connectHint(_ target: Target, _ address: DeviceAddress) -> String {
    guard case .address(_, _?) = target else { return "" }
    let other = address.type == .public ? "random" : "public"
    return " (is it advertising with a \(other) address? try \(address.address)/\(other), or no suffix to use the type seen while scanning)"
}

/// Advertisers seen while looking for a target or scanning: how many (up to 10 000 counted)
/// and the first 20 with their names, for messages. Bounded: a crowded room cannot grow it.
final class SeenAdvertisers: @unchecked Sendable {
    private let lock = NSLock()
    private var addresses: Set<String> = []
    private var labels: [String: String] = [:]
    private var order: [String] = []

    func add(_ a: Advertisement) {
        let key = a.address.description
        lock.withLock {
            if addresses.count < 10_000 { addresses.insert(key) }
            if labels[key] == nil {
                guard order.count < 20 else { return }
                order.append(key)
            }
            if labels[key] == nil || a.name != nil { labels[key] = a.name.map { "\(key) \"\($0)\"" } ?? key }
        }
    }

    var summary: String { lock.withLock { order.compactMap { labels[$0] }.joined(separator: ", ") } }
    var count: Int { lock.withLock { addresses.count } }
}
