// Waits on the state of our stacks in the BLE tests: each is checked in the host's isolation
// whenever the host has run (`Host.until`, StackTestSupport), never polled on a timer.
import Host
import L2CAP
import TestSupport
@testable import ATT
import StackTestSupport
@testable import BLE

extension RemotePeripheral {
    /// Returns once the link's security satisfies `predicate` (pairing or encryption done).
    func untilSecurity(_ what: String, _ predicate: @escaping @Sendable (ATTSecurity) -> Bool) async throws {
        let connection = link.connection
        try await link.host.until(what) { host in
            (try? Link.layers(of: connection, on: host)).map { predicate($0.security.state) } ?? false
        }
    }
}

/// Counts the ATT frames a link receives, in its host's isolation (a layer attached with
/// `Host.attach`, as the stack's own): once the host is idle, every frame it has handled is
/// counted, so a test can say "no more came" after `settled()` instead of after a sleep.
final class ATTFrameCounter: HostLinkLayer {
    let count: Watched<Int>
    init(_ count: Watched<Int>) { self.count = count }
    func received(_ frame: [UInt8], host: isolated Host) {
        if (try? L2CAPFrame.decode(frame))?.cid == .att { count.withLock { $0 += 1 } }
    }
    func linkEvent(_ event: HostLinkEvent, host: isolated Host) {}

    /// Attaches a counter to `link` of `host`; its count.
    static func attach(to link: LEConnection, of host: Host) async -> Watched<Int> {
        let count = Watched(0)
        _ = await host.run { host in host.attach(ATTFrameCounter(count), to: link) }
        return count
    }
}

extension Peripheral {
    /// Returns once `predicate` holds for the peripheral (what it reports changes in its host,
    /// so it is checked each time the host has run: `Host.until`).
    func until(_ what: String, _ predicate: @escaping @Sendable (Peripheral) -> Bool) async throws {
        try await stack.host.until(what) { _ in predicate(self) }
    }

    /// Whether the ATT bearer of link `handle` has sent an indication whose confirmation has
    /// not come (read in the host's isolation, after what it handled before).
    func indicationOutstanding(on handle: UInt16) async -> Bool {
        await stack.host.run { host in (host.layer(for: handle) as? LinkLayers)?.bearer.indication != nil }
    }

    /// Returns once the ATT bearer of link `handle` has an indication out, unconfirmed.
    func untilIndicationOutstanding(on handle: UInt16) async throws {
        try await stack.host.until("an indication sent on \(handle)") { host in
            (host.layer(for: handle) as? LinkLayers)?.bearer.indication != nil
        }
    }
}

extension Central {
    /// Returns once the central's controller is scanning (`true`) or not (`false`), as
    /// `isScanning` reports it (the host's state, checked each time the host has run).
    func untilScanning(_ scanning: Bool, _ what: String) async throws {
        try await stack.host.until(what) { $0.isScanning == scanning }
    }

    /// Deadlines armed in the central's host's table.
    var armedDeadlineCount: Int { get async { await stack.host.armedDeadlineCount } }

    /// Returns once `count` deadlines are armed in the central's host's table.
    func untilArmed(_ count: Int) async throws { try await stack.host.armed(count) }
}
