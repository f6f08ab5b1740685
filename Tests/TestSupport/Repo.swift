import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Errors of the interop test harness, each saying what to do.
public struct HarnessError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Where the repository and its tools are, found from this file's path (no working-directory
/// assumptions: `swift test` may run from anywhere).
public enum Repo {
    /// The repository root: this file is `<root>/Tests/TestSupport/Repo.swift`.
    public static let root: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `<root>/.venv/bin/python`, made by `make deps` (Tools/setup.sh).
    public static var venvPython: URL { root.appendingPathComponent(".venv/bin/python") }

    /// `<root>/Tools/bumble/NAME`.
    public static func bumbleScript(_ name: String) -> URL {
        root.appendingPathComponent("Tools/bumble").appendingPathComponent(name)
    }

    /// `<root>/Tests/Fixtures/NAME`.
    public static func fixture(_ name: String) -> URL {
        root.appendingPathComponent("Tests/Fixtures").appendingPathComponent(name)
    }

    /// True when the venv has a Python with Bumble's controller importable path.
    public static var venvAvailable: Bool {
        FileManager.default.isExecutableFile(atPath: venvPython.path)
            && FileManager.default.fileExists(atPath: bumbleScript("controllers.py").path)
    }

    /// The venv's Python, or an error telling to run `make deps`.
    public static func requireVenvPython() throws -> URL {
        guard FileManager.default.isExecutableFile(atPath: venvPython.path) else {
            throw HarnessError("""
                no Python venv with Bumble at \(venvPython.path): run `make deps` \
                (Tools/setup.sh) in \(root.path) first
                """)
        }
        return venvPython
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's pick for port 0).
/// Another process may take it before you bind it; prefer letting the server pick its port
/// (as `BumbleControllers` does) when you can.
public func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HarnessError("socket(): \(String(cString: strerror(errno)))") }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard bound == 0 else { throw HarnessError("bind(127.0.0.1:0): \(String(cString: strerror(errno)))") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let named = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    guard named == 0 else { throw HarnessError("getsockname: \(String(cString: strerror(errno)))") }
    return UInt16(bigEndian: addr.sin_port)
}
