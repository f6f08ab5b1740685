// An application's central code tested against a fake of the real device, built from the
// device's GATT table in the `--gatt` file format: `ble-hci --json central ADDRESS > table.json`
// of the real device (or a table written by hand, docs/cli.md "--gatt FILE"). Copy this file
// and heart-rate.json into your package's tests (depend on the `BLETesting` product; the JSON
// is read from beside this file, so `exclude` it from the test target as Package.swift does
// here), then replace the monitor with your own code. `swift test --filter HeartRateMonitorTests`
// runs it here (the ExampleTests target).
import Foundation
import BLE
import BLETesting
import Testing

/// The application code under test: finds a heart rate sensor, reads where it is worn and
/// decodes its measurements.
struct HeartRateMonitor {
    static let service: BluetoothUUID = 0x180D             // Heart Rate (Assigned Numbers)
    static let measurement: BluetoothUUID = 0x2A37         // Heart Rate Measurement (HRS 3.1)
    static let bodySensorLocation: BluetoothUUID = 0x2A38  // Body Sensor Location (HRS 3.2)

    let central: Central

    /// Connects to the first device that advertises the Heart Rate service.
    func connect() async throws -> RemotePeripheral {
        let device = try await central.find(ScanFilter(services: [Self.service]), timeout: .seconds(5))
        return try await central.connect(to: device.address)
    }

    /// "Chest", "Wrist", ... (HRS 3.2.1: 0 Other, 1 Chest, 2 Wrist, 3 Finger, 4 Hand, 5 Ear Lobe, 6 Foot).
    func location(of sensor: RemotePeripheral) async throws -> String {
        let names = ["Other", "Chest", "Wrist", "Finger", "Hand", "Ear Lobe", "Foot"]
        let value = try await sensor.read(try await characteristic(Self.bodySensorLocation, of: sensor))
        guard let code = value.first, Int(code) < names.count else { return "Unknown" }
        return names[Int(code)]
    }

    /// The next `count` heart rates in beats per minute (HRS 3.1.1.1: flags bit 0 clear, a
    /// UINT8 value; set, a UINT16).
    func heartRates(of sensor: RemotePeripheral, count: Int) async throws -> [Int] {
        var rates: [Int] = []
        for try await value in try await sensor.notifications(for: try await characteristic(Self.measurement, of: sensor)) {
            guard let flags = value.first else { continue }
            if flags & 0x01 == 0, value.count >= 2 { rates.append(Int(value[1])) }
            if flags & 0x01 != 0, value.count >= 3 { rates.append(Int(value[1]) | Int(value[2]) << 8) }
            if rates.count == count { break }
        }
        return rates
    }

    private func characteristic(_ uuid: BluetoothUUID, of sensor: RemotePeripheral) async throws -> GATTRemoteCharacteristic {
        let service = try await sensor.discoverServices(Self.service)[0]
        return try await sensor.discoverCharacteristics(of: service, uuid: uuid)[0]
    }
}

@Suite(.timeLimit(.minutes(1))) struct HeartRateMonitorTests {
    /// The table of the real device, beside this file.
    static let table = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("heart-rate.json").path

    @Test func readsWhereTheSensorIsWorn() async throws {
        // The fake serves heart-rate.json and advertises 180d and 180f under the file's Device Name.
        let fake = try await FakePeripheral.start(gattFile: Self.table)
        #expect(fake.name == "HRM-1")
        let central = try await Central.open(fake.centralTransport())
        let monitor = HeartRateMonitor(central: central)
        let sensor = try await monitor.connect()
        #expect(try await monitor.location(of: sensor) == "Chest")  // the file's 2a38 value, 01
        await central.close()
        await fake.close()
    }

    @Test func decodesEightAndSixteenBitHeartRates() async throws {
        let fake = try await FakePeripheral.start(gattFile: Self.table)
        let central = try await Central.open(fake.centralTransport())
        let monitor = HeartRateMonitor(central: central)
        let sensor = try await monitor.connect()
        let rates = Task { try await monitor.heartRates(of: sensor, count: 2) }
        // The fake's side: wait for the monitor to subscribe, then send two measurements.
        for await event in fake.peripheral.events {
            if case .subscribed(_, HeartRateMonitor.measurement, _) = event { break }
        }
        try await fake.peripheral.notify([0x00, 72], for: HeartRateMonitor.measurement)        // UINT8: 72 bpm
        try await fake.peripheral.notify([0x01, 0x2C, 0x01], for: HeartRateMonitor.measurement) // UINT16: 300 bpm
        #expect(try await rates.value == [72, 300])
        await central.close()
        await fake.close()
    }

    /// A broken table is refused with the JSON path of what is wrong.
    @Test func aBrokenTableNamesWhereItIsBroken() async throws {
        let broken = Data(#"{"services":[{"uuid":"180d","characteristics":[{"uuid":"2a37","properties":["notfy"]}]}]}"#.utf8)
        await #expect(throws: GATTFileError.self) { _ = try await FakePeripheral.start(gatt: broken) }
        do {
            _ = try GATTFile(data: broken)
            Issue.record("a table with an unknown property was taken")
        } catch {
            #expect(error.location == "$.services[0].characteristics[0].properties[0]")
        }
    }
}
