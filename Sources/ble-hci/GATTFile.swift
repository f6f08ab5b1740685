import Foundation
import GATT

/// `peripheral --gatt FILE`: the table as `GATT.GATTFile` parses it (one parser, shared with
/// `BLETesting.FakePeripheral`); every problem is a usage error (exit 2) naming the JSON path,
/// and each value served although over the spec's 512 octets is a warning on stderr.
extension GATTFile {
    init(path: String, command: String) throws {
        do {
            self = try GATTFile(contentsOf: path) { warning in
                FileHandle.standardError.write(Data("ble-hci: warning: --gatt \(path): \(warning)\n".utf8))
            }
        } catch {
            throw UsageError("--gatt \(path): \(error.location): \(error.problem)", command: command)
        }
    }
}
