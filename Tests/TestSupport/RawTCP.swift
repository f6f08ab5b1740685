import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP client socket to 127.0.0.1 for tests that speak raw bytes (e.g. H4 to a
/// virtual controller) without any of the stack's code in the way.
public final class RawTCPConnection: @unchecked Sendable {
    private var fd: Int32

    public init(port: UInt16, host: String = "127.0.0.1") throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HarnessError("socket(): \(String(cString: strerror(errno)))") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr(host)
        let result = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let message = String(cString: strerror(errno))
            Glibc.close(fd)
            throw HarnessError("connect(\(host):\(port)): \(message)")
        }
    }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw HarnessError("send: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// Reads exactly `count` bytes, or throws after `timeout` seconds or at end of stream.
    public func receive(exactly count: Int, timeout: TimeInterval = 5) throws -> [UInt8] {
        var result: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while result.count < count {
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else {
                throw HarnessError("received \(result.count) of \(count) bytes in \(timeout) s: \(result)")
            }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, Int32(max(1, remaining * 1000)))
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { continue }
            var buffer = [UInt8](repeating: 0, count: count - result.count)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw HarnessError("connection closed after \(result.count) of \(count) bytes: \(result)") }
            result += buffer[0..<n]
        }
        return result
    }

    public func close() {
        if fd >= 0 { Glibc.close(fd); fd = -1 }
    }

    deinit { close() }
}
