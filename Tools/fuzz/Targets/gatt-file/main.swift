// The `--gatt` table parser (GATT.GATTFile: `ble-hci peripheral --gatt FILE` and
// `BLETesting.FakePeripheral`): any bytes parse to a table or a GATTFileError naming a JSON path,
// never a trap; a table it accepts is one a GATT server lays out.
import Foundation
import FuzzSupport
import GATT

runFuzzer { data in
    do throws(GATTFileError) {
        let file = try GATTFile(data: Data(data))
        require(file.services.allSatisfy { $0.uuid != GATTUUID.genericAccess && $0.uuid != GATTUUID.genericAttribute },
                "the server's own services were kept")
        _ = GATTServer(services: file.services, configuration: .init(deviceName: file.deviceName ?? "fuzz"))
    } catch {
        require(error.location == "(file)" || error.location.hasPrefix("$"), "an error without a JSON path: \(error)")
    }
}
