// An application's BLE code tested with `swift test`, no hardware, no other process: copy this
// file into your package's tests (depend on the `BLETesting` product) and replace the
// thermometer with your device. `swift test --filter ThermometerTests` runs it here.
import BLE
import BLETesting
import Testing

/// The application code under test: reads a temperature characteristic and decodes it.
struct ThermometerClient {
    static let service: BluetoothUUID = 0x1809          // Health Thermometer (Assigned Numbers)
    static let temperature: BluetoothUUID = 0x2A6E      // Temperature: sint16, 0.01 °C (GSS)

    let remote: RemotePeripheral

    func celsius() async throws -> Double {
        let service = try await remote.discoverServices(Self.service)[0]
        let characteristic = try await remote.discoverCharacteristics(of: service, uuid: Self.temperature)[0]
        let value = try await remote.read(characteristic)
        guard value.count == 2 else { throw BLEError.notPermitted("temperature of \(value.count) octets, not 2") }
        return Double(Int16(bitPattern: UInt16(value[0]) | UInt16(value[1]) << 8)) / 100
    }
}

@Suite struct ThermometerTests {
    /// The fake device: the same GATT table the real one has, with the value the test wants.
    static func thermometer(reading: [UInt8]) -> [GATTService] {
        [GATTService(uuid: ThermometerClient.service, characteristics: [
            GATTCharacteristic(uuid: ThermometerClient.temperature, properties: [.read], value: reading),
        ])]
    }

    @Test func readsAndDecodesTheTemperature() async throws {
        // 0x0915 = 2325 → 23.25 °C, little-endian on the air (Core v5.4 Vol 3 Part F 3.2.9 carries it as is).
        let bench = try await TestBench.start(services: Self.thermometer(reading: [0x15, 0x09]), name: "thermo")
        let remote = try await bench.connect()
        #expect(try await ThermometerClient(remote: remote).celsius() == 23.25)
        await bench.close()
    }

    @Test func refusesAValueOfTheWrongLength() async throws {
        let bench = try await TestBench.start(services: Self.thermometer(reading: [0x15]), name: "thermo")
        let remote = try await bench.connect()
        await #expect(throws: BLEError.self) { _ = try await ThermometerClient(remote: remote).celsius() }
        await bench.close()
    }
}
