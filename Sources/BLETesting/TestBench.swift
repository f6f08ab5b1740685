// Testing an application's BLE code with `swift test` and no hardware, no other process
// (issue 25): our central and our peripheral on an in-process virtual radio (ble-hci's own
// virtual controller: advertising, scanning, connections, ACL flow control, encryption).
import BLE
import VirtualController

/// A virtual radio in this process with one controller per stack on it. The controllers see
/// each other's advertising and connect as over the air. Packets go through at once, unless
/// `airtime` is set: then connection events, PDUs per event and advertising events keep time as
/// a radio does (the airtime model of `ble-hci controllers`, docs/ARCHITECTURE.md).
public final class VirtualRadio: Sendable {
    private let link: VirtualLink
    private let transports: [InProcessTransport]

    /// `controllers` controllers, each with `aclBuffers` LE ACL buffers of 27 octets (the
    /// smallest LE data length, Core v5.4 Vol 6 Part B 4.5.10, so long values are fragmented
    /// as on a real link).
    public init(controllers: Int = 2, aclBuffers: Int = 8, airtime: Bool = false) {
        (link, transports) = VirtualLink.inProcess(count: max(1, controllers), aclBuffers: aclBuffers,
                                                   airtime: airtime ? Airtime.Configuration() : nil)
    }

    /// How many controllers the radio has.
    public var count: Int { transports.count }

    /// Controller `index` (0-based) as a transport to open a `Central` or `Peripheral` on.
    /// Each controller takes one stack.
    public func transport(_ index: Int) -> any HCITransport { transports[index] }

    /// What the virtual controllers noted about the hosts (refused commands, Data Buffer
    /// Overflow, faults): an application that misuses HCI shows here.
    public var log: [String] { link.log }
}

/// A central and a peripheral on one `VirtualRadio`: the peripheral serves `services` and
/// advertises `name`; `connect()` finds it as an app would (by name) and connects.
///
/// ```swift
/// let bench = try await TestBench.start(services: [thermometer])
/// defer { Task { await bench.close() } }
/// let remote = try await bench.connect()
/// let value = try await remote.read(...)
/// ```
public struct TestBench: Sendable {
    public let radio: VirtualRadio
    public let central: Central
    public let peripheral: Peripheral
    public let name: String

    public static func start(services: [GATTService], name: String = "ble-hci test",
                             central centralOptions: StackOptions = .init(),
                             peripheral peripheralOptions: StackOptions = .init()) async throws -> TestBench {
        let radio = VirtualRadio(controllers: 2)
        let peripheral = try await Peripheral.open(radio.transport(0), services: services, name: name, options: peripheralOptions)
        do {
            try await peripheral.startAdvertising(AdvertisingOptions(name: name))
            let central = try await Central.open(radio.transport(1), options: centralOptions)
            return TestBench(radio: radio, central: central, peripheral: peripheral, name: name)
        } catch {
            await peripheral.close()
            throw error
        }
    }

    /// Scans for the peripheral by name and connects to it.
    public func connect(timeout: Duration = .seconds(5)) async throws -> RemotePeripheral {
        let found = try await central.find(ScanFilter(nameContains: name), timeout: timeout, describe: "name \(name)")
        return try await central.connect(to: found.address, timeout: timeout)
    }

    public func close() async {
        await central.close()
        await peripheral.close()
    }
}
