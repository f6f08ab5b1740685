// A fake device for an application's tests (issue 25): our peripheral serving a GATT table on
// one controller of an in-process `VirtualRadio`, advertising like the real device, so the
// application's central code runs against it with `swift test` and no other process.
import Foundation
import BLE

/// A peripheral serving `services` on controller 0 of its own ``VirtualRadio``, advertising
/// `name` (and up to four 16-bit service UUIDs, as `ble-hci peripheral` does). The code under
/// test opens its `Central` on ``centralTransport(_:)`` and finds the fake as it would find the
/// device. The table can come from a `--gatt` file (`ble-hci central --json` of the real device,
/// or written by hand; docs/cli.md), parsed by the same ``GATTFile`` the CLI uses.
///
/// ```swift
/// let fake = try await FakePeripheral.start(gattFile: "Tests/Fixtures/thermometer.json")
/// let central = try await Central.open(fake.centralTransport())
/// let device = try await central.find(ScanFilter(nameContains: fake.name))
/// ```
public struct FakePeripheral: Sendable {
    public let radio: VirtualRadio
    public let peripheral: Peripheral
    /// The name it advertises (its GAP Device Name too).
    public let name: String
    /// The services it serves (besides the server's own Generic Access and Generic Attribute).
    public let services: [GATTService]
    /// The 16-bit service UUIDs it advertises.
    public let advertisedServices: [BluetoothUUID]
    /// When the table came from a file whose handles could not be served as given: why (the
    /// handles were then assigned in the file's order, as `ble-hci peripheral --gatt` does).
    public let handleProblem: String?

    /// Starts serving `services` and advertising `name` with `advertising` service UUIDs (by
    /// default the first four 16-bit UUIDs of the primary services). `radio` needs at least
    /// two controllers: the fake takes controller 0.
    public static func start(services: [GATTService], name: String = "ble-hci fake",
                             advertising: [BluetoothUUID]? = nil,
                             radio: VirtualRadio = VirtualRadio(controllers: 2),
                             options: StackOptions = .init()) async throws -> FakePeripheral {
        try await start(services: services, name: name, advertising: advertising, handleProblem: nil, radio: radio, options: options)
    }

    /// Starts serving the table of a `--gatt` file (see ``GATTFile``); `name` defaults to the
    /// file's Device Name, else "ble-hci fake". Throws ``GATTFileError`` naming the JSON path of
    /// what is wrong in the file.
    public static func start(gattFile path: String, name: String? = nil,
                             radio: VirtualRadio = VirtualRadio(controllers: 2),
                             options: StackOptions = .init()) async throws -> FakePeripheral {
        try await start(GATTFile(contentsOf: path), name: name, radio: radio, options: options)
    }

    /// Starts serving a `--gatt` table given as data (the JSON object, or a central's JSON lines).
    public static func start(gatt data: Data, name: String? = nil,
                             radio: VirtualRadio = VirtualRadio(controllers: 2),
                             options: StackOptions = .init()) async throws -> FakePeripheral {
        try await start(GATTFile(data: data), name: name, radio: radio, options: options)
    }

    private static func start(_ file: GATTFile, name: String?, radio: VirtualRadio, options: StackOptions) async throws -> FakePeripheral {
        try await start(services: file.services, name: name ?? file.deviceName ?? "ble-hci fake",
                        advertising: file.advertisedServices, handleProblem: file.handleProblem, radio: radio, options: options)
    }

    private static func start(services: [GATTService], name: String, advertising: [BluetoothUUID]?, handleProblem: String?,
                              radio: VirtualRadio, options: StackOptions) async throws -> FakePeripheral {
        let uuids = advertising ?? Array(services.filter { $0.primary && $0.uuid.uuid16 != nil }.map(\.uuid).prefix(4))
        let peripheral = try await Peripheral.open(radio.transport(0), services: services, name: name, options: options)
        do {
            try await peripheral.startAdvertising(AdvertisingOptions(name: name, serviceUUIDs: uuids))
        } catch {
            await peripheral.close()
            throw error
        }
        return FakePeripheral(radio: radio, peripheral: peripheral, name: name, services: services,
                              advertisedServices: uuids, handleProblem: handleProblem)
    }

    /// A controller of the same radio for the code under test to open its `Central` on
    /// (controller 1 by default; each controller takes one stack).
    public func centralTransport(_ index: Int = 1) -> any HCITransport { radio.transport(index) }

    /// Stops advertising, disconnects every central and closes the peripheral's stack.
    public func close() async { await peripheral.close() }
}

extension TestBench {
    /// A ``TestBench`` whose peripheral serves the table of a `--gatt` file (``FakePeripheral/start(gattFile:name:radio:options:)``).
    public static func start(gattFile path: String, name: String? = nil,
                             central centralOptions: StackOptions = .init(),
                             peripheral peripheralOptions: StackOptions = .init()) async throws -> TestBench {
        let fake = try await FakePeripheral.start(gattFile: path, name: name, options: peripheralOptions)
        do {
            let central = try await Central.open(fake.centralTransport(), options: centralOptions)
            return TestBench(radio: fake.radio, central: central, peripheral: fake.peripheral, name: fake.name)
        } catch {
            await fake.close()
            throw error
        }
    }
}
