import Foundation
import HCI
import TestSupport
import Transport
#if canImport(Glibc)
import Glibc
#endif

struct TestTimeout: Error, CustomStringConvertible {
    var what: String
    var description: String { "timed out waiting for \(what)" }
}

/// Drains a transport's `incoming` on one task so tests can wait for packets with a deadline
/// (AsyncThrowingStream has a single consumer, and cancelling it would end the stream). Each
/// packet and the end wake the waiting test (no polling).
final class Inbox: Sendable {
    private struct State: Sendable {
        var packets: [HCIPacket] = []
        var endError: (any Error)?
        var ended = false
        var endCount = 0
    }
    private let state = Watched(State())

    init(_ stream: AsyncThrowingStream<HCIPacket, any Error>) {
        let state = state
        Task {
            do {
                for try await p in stream { state.withLock { $0.packets.append(p) } }
                state.withLock { $0.ended = true; $0.endCount += 1 }
            } catch {
                state.withLock { $0.ended = true; $0.endError = error; $0.endCount += 1 }
            }
        }
    }

    func next(timeout: Double = 5) async throws -> HCIPacket {
        try await state.until("a packet", timeout: .seconds(timeout)) { !$0.packets.isEmpty || $0.ended }
        if let p = state.withLock({ $0.packets.isEmpty ? nil : $0.packets.removeFirst() }) { return p }
        throw TestTimeout(what: "a packet (stream ended: \(String(describing: state.value.endError)))")
    }

    /// Waits for the stream to end; returns its error (nil for a normal finish).
    func end(timeout: Double = 5) async throws -> (error: (any Error)?, count: Int) {
        let s = try await state.until("the end of the stream", timeout: .seconds(timeout)) { $0.ended }
        return (s.endError, s.endCount)
    }
}

/// A listening socket on 127.0.0.1 (port chosen by the kernel) or a UNIX path.
final class TestListener {
    let fd: Int32
    let port: UInt16
    let path: String?

    init(unixPath: String? = nil) throws {
        if let unixPath {
            unlink(unixPath)
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            self.fd = fd
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                let u = Array(unixPath.utf8)
                raw.copyBytes(from: u)
                raw[u.count] = 0
            }
            let r = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
            guard r == 0 else { throw TestTimeout(what: "bind unix") }
            port = 0
            path = unixPath
        } else {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.fd = fd
            var addr = sockaddr_in()
            addr.sin_family = sa_family_t(AF_INET)
            addr.sin_addr.s_addr = inet_addr("127.0.0.1")
            addr.sin_port = 0
            var r = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard r == 0 else { throw TestTimeout(what: "bind tcp") }
            var len = socklen_t(MemoryLayout<sockaddr_in>.size)
            r = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
            port = UInt16(bigEndian: addr.sin_port)
            path = nil
        }
        listen(fd, 4)
    }

    /// Accepts one connection, waiting at most `timeout`.
    func accept(timeout: Double = 5) throws -> Int32 {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, Int32(timeout * 1000)) == 1 else { throw TestTimeout(what: "accept") }
        return Glibc.accept(fd, nil, nil)
    }

    deinit {
        Glibc.close(fd)
        if let path { unlink(path) }
    }
}

func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
    var off = 0
    while off < bytes.count {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + off, $0.count - off) }
        if n <= 0 { return }
        off += n
    }
}

/// Reads exactly `count` bytes or throws after `timeout`.
func readExactly(_ fd: Int32, _ count: Int, timeout: Double = 5) throws -> [UInt8] {
    var out: [UInt8] = []
    let deadline = Date().addingTimeInterval(timeout)
    var buf = [UInt8](repeating: 0, count: count)
    while out.count < count {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let ms = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
        guard poll(&p, 1, ms) == 1 else { throw TestTimeout(what: "\(count) bytes (got \(out.count))") }
        let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress!, count - out.count) }
        guard n > 0 else { throw TestTimeout(what: "\(count) bytes: EOF after \(out.count)") }
        out += buf[0..<n]
    }
    return out
}

/// posix_openpt/grantpt/unlockpt/ptsname are not exported by the Glibc module (they need
/// _XOPEN_SOURCE), so look them up with dlsym and call them through C function pointers.
func openPtyPair() throws -> (master: Int32, slavePath: String) {
    guard let libc = dlopen(nil, RTLD_NOW) else { throw TestTimeout(what: "dlopen") }
    func sym<T>(_ name: String, _: T.Type) throws -> T {
        guard let p = dlsym(libc, name) else { throw TestTimeout(what: "dlsym \(name)") }
        return unsafeBitCast(p, to: T.self)
    }
    typealias IntFn = @convention(c) (Int32) -> Int32
    typealias NameFn = @convention(c) (Int32) -> UnsafeMutablePointer<CChar>?
    let openpt = try sym("posix_openpt", IntFn.self)
    let master = openpt(O_RDWR | O_NOCTTY)
    guard master >= 0,
          try sym("grantpt", IntFn.self)(master) == 0,
          try sym("unlockpt", IntFn.self)(master) == 0,
          let name = try sym("ptsname", NameFn.self)(master) else { throw TestTimeout(what: "a pty pair") }
    return (master, String(cString: name))
}
