import Foundation
import HCI
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// One host attached to a controller over an H4 byte stream (socket or /dev/vhci).
/// A dedicated reader thread deframes with `H4Framer` and feeds the controller directly (no
/// async hop, so it never depends on the cooperative thread pool); writes happen on the
/// link's context. The reader owns the descriptor and closes it when it ends.
final class H4Connection: @unchecked Sendable {
    let name: String
    private let fd: Int32
    private let isSocket: Bool
    private let lock = NSLock()
    private var open = true

    init(fd: Int32, name: String, isSocket: Bool) {
        self.fd = fd
        self.name = name
        self.isSocket = isSocket
    }

    /// Starts reading; `packet` gets each host packet, `ended` the reason the stream ended.
    func start(packet: @escaping @Sendable (HCIPacket) -> Void, ended: @escaping @Sendable (String) -> Void) {
        let t = Thread { [self] in
            var framer = H4Framer()
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var reason = "closed"
            while true {
                let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { reason = n == 0 ? "end of stream" : "read failed: \(String(cString: strerror(errno)))"; break }
                do {
                    try framer.feed(buffer[0..<n]) { packet($0) }
                } catch {
                    reason = "\(error)"
                    break
                }
            }
            lock.lock()
            open = false
            Glibc.close(fd)
            lock.unlock()
            ended(reason)
        }
        t.name = "h4 \(name)"
        t.start()
    }

    /// Writes one packet (H4); drops it once the connection is closed.
    func send(_ packet: HCIPacket) {
        let bytes = packet.h4
        lock.lock()
        defer { lock.unlock() }
        guard open else { return }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buf in
                isSocket ? Glibc.send(fd, buf.baseAddress! + offset, buf.count - offset, Int32(MSG_NOSIGNAL))
                         : Glibc.write(fd, buf.baseAddress! + offset, buf.count - offset)
            }
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            // Failed, or timed out (SO_SNDTIMEO): end the connection; the reader reports why.
            shutdown(fd, Int32(SHUT_RDWR))
            return
        }
    }

    /// Ends the connection; the reader thread closes the descriptor.
    func close() {
        lock.lock()
        if open { shutdown(fd, Int32(SHUT_RDWR)) }
        lock.unlock()
    }
}
