import Foundation
import Synchronization
import HCI
import BLE
import Decoder

// Finding the central's TARGET, and what was seen on the way (also scan's summary).

/// Scans for TARGET; on failure, names the advertisers seen (with their address types) so a
/// wrong name or address type is visible at once. `onSeen` hears every advertisement (the
/// session remembers them for completion); `untilSignal`: SIGINT/SIGTERM end the wait (the
/// one-shot commands), else only the caller's cancellation (the session's requests).
/// `scanning` is called once the controller scans (LE Set Scan Enable completed), so that a
/// "Scanning for" line is true when it is printed.
func findTarget(_ target: Target, central: Central, timeout: Double, onSeen: @escaping @Sendable (Advertisement) -> Void = { _ in },
                untilSignal: Bool = true, language: Language = .english, scanning: () -> Void = {}) async throws -> Advertisement {
    let seen = SeenAdvertisers()
    let stream = untilSignal ? try await interruptible { try await central.scan(ScanFilter()) } : try await central.scan(ScanFilter())
    scanning()
    let filter = target.filter
    let found = Task { () -> Advertisement? in
        for try await adv in stream {
            seen.add(adv)
            onSeen(adv)
            if filter.matches(adv) { return adv }
        }
        return nil
    }
    let limit = Task { try? await Task.sleep(for: .milliseconds(Int(timeout * 1000))); found.cancel() }
    defer { limit.cancel(); found.cancel() }
    let wait: @Sendable () async throws -> Advertisement? = {
        try await withTaskCancellationHandler { try await found.value } onCancel: { found.cancel() }
    }
    let adv: Advertisement?
    do {
        adv = untilSignal ? try await interruptible(wait) : try await wait()
    } catch is CancellationError {
        adv = nil
    }
    // Cancelled by the caller (not by the time limit): say so, not "no advertiser matched".
    try Task.checkCancellation()
    guard let adv else {
        let list = seen.summary
        throw CLIFailure(Message.noAdvertiserMatched(target: target.text(language), within: formatSeconds(timeout), seen: list).text(language),
                         exitCode: ExitCode.failure)
    }
    return adv
}

/// The advertisers a session heard (scans, connects), by address with their names, for names
/// and Tab completion: the last 256.
final class AdvertiserNames: Sendable {
    private struct State {
        var names: [String: String?] = [:]
        var order: [String] = []
    }
    private let state = Mutex(State())

    func remember(_ adv: Advertisement) {
        let key = adv.address.address.description
        state.withLock { s in
            if s.names[key] == nil {
                s.order.append(key)
                if s.order.count > 256 { s.names[s.order.removeFirst()] = nil }
            }
            if s.names[key] == nil || adv.name != nil { s.names[key] = .some(adv.name) }
        }
    }

    func name(of address: String) -> String? { state.withLock { $0.names[address] ?? nil } }

    /// Each address heard, followed by `name:NAME` when it had one, oldest first.
    var targets: [String] {
        state.withLock { s in s.order.flatMap { key in [key] + ((s.names[key] ?? nil).map { ["name:" + $0] } ?? []) } }
    }
}

/// Where TARGET is: a typed address connected to directly, unless it is a bonded identity that
/// may advertise from another address (an RPA, or the address it paired from); else the
/// advertiser `find` scans for (returned with it).
nonisolated(nonsending) func targetAddress(_ target: Target, central: Central,
                   find: () async throws -> Advertisement) async throws -> (address: DeviceAddress, found: Advertisement?) {
    if case .address(let a, let type?) = target, !(await central.bondedPeerMayUseAnotherAddress(DeviceAddress(a, type: type))) {
        return (DeviceAddress(a, type: type), nil)
    }
    let adv = try await find()
    return (adv.address, adv)
}

/// Connects to `address`, found for `target`: a failure other than a lost transport (exit 3)
/// is a CLIFailure naming the address, with a hint when the address was given with a type.
func connectTarget(_ address: DeviceAddress, for target: Target, central: Central, timeout: Double,
                   language: Language = .english) async throws -> RemotePeripheral {
    do {
        return try await central.connect(to: address, timeout: .milliseconds(Int(timeout * 1000)))
    } catch let e as BLEError {
        if case .transport = e { throw e }
        throw CLIFailure(Message.couldNotConnect(address: "\(address)", error: "\(e)\(connectHint(target, address))").text(language), exitCode: ExitCode.failure)
    }
}

/// For a failed connection to an address given with a type: the type may be the wrong one.
func connectHint(_ target: Target, _ address: DeviceAddress) -> String {
    guard case .address(_, _?) = target else { return "" }
    let other = address.type == .public ? "random" : "public"
    return " (is it advertising with a \(other) address? try \(address.address)/\(other), or no suffix to use the type seen while scanning)"
}

/// Advertisers seen while looking for a target or scanning: how many (up to 10 000 counted)
/// and the first 20 with their names, for messages. Bounded: a crowded room cannot grow it.
final class SeenAdvertisers: Sendable {
    private struct State {
        var addresses: Set<String> = []
        var labels: [String: String] = [:]
        var order: [String] = []
    }
    private let state = Mutex(State())

    func add(_ a: Advertisement) {
        let key = a.address.description
        state.withLock { s in
            if s.addresses.count < 10_000 { s.addresses.insert(key) }
            if s.labels[key] == nil {
                guard s.order.count < 20 else { return }
                s.order.append(key)
            }
            if s.labels[key] == nil || a.name != nil { s.labels[key] = a.name.map { "\(key) \"\($0)\"" } ?? key }
        }
    }

    var summary: String { state.withLock { s in s.order.compactMap { s.labels[$0] }.joined(separator: ", ") } }
    var count: Int { state.withLock { $0.addresses.count } }
}
