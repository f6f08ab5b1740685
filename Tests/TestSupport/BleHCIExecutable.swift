import Foundation

/// `ble-hci` in the directory of the running test executable (after
/// `swift build --build-tests`), or `$BLE_HCI` when set.
public func bleHCIExecutable() throws -> URL {
    if let env = ProcessInfo.processInfo.environment["BLE_HCI"], FileManager.default.isExecutableFile(atPath: env) {
        return URL(fileURLWithPath: env)
    }
    var dirs: [URL] = []
    if let first = CommandLine.arguments.first {
        dirs.append(URL(fileURLWithPath: first).resolvingSymlinksInPath().deletingLastPathComponent())
    }
    if let main = Bundle.main.executableURL { dirs.append(main.resolvingSymlinksInPath().deletingLastPathComponent()) }
    dirs.append(Bundle.main.bundleURL.deletingLastPathComponent())
    for dir in dirs {
        // The .xctest may be a directory bundle (macOS) or a plain executable (Linux).
        for candidate in [dir, dir.deletingLastPathComponent()] {
            let url = candidate.appendingPathComponent("ble-hci")
            var isDir: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDir), !isDir.boolValue,
               FileManager.default.isExecutableFile(atPath: url.path) {
                return url
            }
        }
    }
    throw HarnessError("""
        no ble-hci executable next to the test bundle (looked in \(dirs.map(\.path).joined(separator: ", "))): \
        build it first with `swift build --build-tests`, or set BLE_HCI=/path/to/ble-hci
        """)
}
