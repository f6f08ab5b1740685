import Foundation
import Testing
import TestSupport
import BLE
import BLETesting

/// Issue 25: `BLETesting.FakePeripheral`, a fake device from a GATT table or a `--gatt` file
/// (docs/cli.md), as an application's tests use it: the application's own central finds it by
/// what it advertises and reads the file's values.
@Suite(.timeLimit(.minutes(1))) struct FakePeripheralTests {
    /// The central's `--json` output as it is (its `gatt` line is the table; Device Name
    /// "fake-1" = 66 61 6b 65 2d 31).
    static let lines = """
    {"event":"connected","handle":64}
    {"event":"gatt","services":[{"uuid":"1800","characteristics":[{"uuid":"2a00","properties":["read"],"value":"66616b652d31"}]},{"uuid":"180f","characteristics":[{"uuid":"2a19","properties":["read","notify"],"value":"4b"}]}]}
    """

    @Test func fromTheCentralsJSONLines() async throws {
        let fake = try await FakePeripheral.start(gatt: Data(Self.lines.utf8))
        #expect(fake.name == "fake-1")
        #expect(fake.advertisedServices == [0x180F])
        let central = try await Central.open(fake.centralTransport())
        // Found by the service it advertises, as an application finds the device.
        let found = try await central.find(ScanFilter(services: [0x180F]), timeout: .seconds(5))
        #expect(found.name == "fake-1")
        let remote = try await central.connect(to: found.address)
        let service = try #require(try await remote.discoverServices(0x180F).first)
        let level = try #require(try await remote.discoverCharacteristics(of: service, uuid: 0x2A19).first)
        #expect(try await remote.read(level) == [0x4B])  // the file's value, 75 %
        await central.close()
        await fake.close()
    }

    @Test func aTestBenchFromAFile() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("fake-peripheral-\(UUID().uuidString).json").path
        try Self.lines.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let bench = try await TestBench.start(gattFile: path, name: "bench")
        let remote = try await bench.connect()
        let service = try #require(try await remote.discoverServices(0x180F).first)
        let level = try #require(try await remote.discoverCharacteristics(of: service, uuid: 0x2A19).first)
        #expect(try await remote.read(level) == [0x4B])
        await bench.close()
    }

    /// A file that cannot be read, and a broken one: `GATTFileError` with where and what.
    @Test func badFilesAreRefusedWithTheirPath() async throws {
        await #expect(throws: GATTFileError("(file)", "cannot read it")) {
            _ = try await FakePeripheral.start(gattFile: "/nonexistent/table.json")
        }
        do {
            _ = try await FakePeripheral.start(gatt: Data(#"{"services":[{"uuid":"zz"}]}"#.utf8))
            Issue.record("a bad UUID was taken")
        } catch let e as GATTFileError {
            #expect(e.location == "$.services[0].uuid")
        }
    }
}
