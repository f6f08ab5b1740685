import Foundation
import HCI
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// One host attached to a controller over an H4 byte stream (socket or /dev/vhci).
/// A dedicated reader thread deframes with `H4Framer` and feeds the controller directly (no
/// async hop, so it never depends on the cooperative thread pool). What goes to the host is
/// queued by `send`, which never waits (it runs on the link's context, shared by every
/// controller of the link), and on a socket written by a writer thread of the connection's own. A host
/// that stops reading stops being read (issue 31): past `maxQueuedOctets` unwritten, or
/// `maxBacklog` packets waiting in its controller, the reader waits, so the host's own sends
/// block and neither queue grows. The reader owns the descriptor and closes it when it ends.
///
/// `@unchecked Sendable`: a wrapper of a C descriptor shared by its reader and writer threads
/// and its senders, which wait on `condition` (an `NSCondition`, which a `Mutex` cannot
/// express). Sound because every stored `var` is read and written with `condition` locked,
/// except `writerDone`'s first set in `start`, before the threads that read it exist; the
/// descriptor is closed by the reader thread alone.
final class H4Connection: @unchecked Sendable {
    let name: String
    private let fd: Int32
    private let isSocket: Bool
    /// Guards everything below; signalled when the queue changes or the connection ends.
    private let condition = NSCondition()
    private var open = true
    /// Packets for the host not written yet (a socket's: /dev/vhci's host is the kernel,
    /// which always reads, and each packet is written at once, one write(2) each, as it needs).
    private var queued: [[UInt8]] = []
    private var queuedOctetCount = 0
    private var writerDone = false

    /// Octets queued for the host above which the host stops being read.
    static let maxQueuedOctets = 256 * 1024
    /// Packets from the host waiting in its controller above which it stops being read.
    static let maxBacklog = 4096

    /// Octets queued for the host and not written yet (tests, diagnostics).
    var queuedOctets: Int {
        condition.lock(); defer { condition.unlock() }
        return queuedOctetCount
    }

    init(fd: Int32, name: String, isSocket: Bool) {
        self.fd = fd
        self.name = name
        self.isSocket = isSocket
    }

    /// Starts reading and writing; `packet` gets each host packet, `ended` the reason the stream
    /// ended; `backlog` says how many of the host's packets its controller has not handled yet.
    func start(packet: @escaping @Sendable (HCIPacket) -> Void, backlog: @escaping @Sendable () -> Int = { 0 },
               ended: @escaping @Sendable (String) -> Void) {
        if isSocket {
            let writer = Thread { [self] in writeLoop() }
            writer.name = "h4 \(name) writer"
            writer.start()
        } else {
            writerDone = true
        }
        let t = Thread { [self] in
            var framer = H4Framer()
            var buffer = [UInt8](repeating: 0, count: 64 * 1024)
            var reason = "closed"
            while true {
                waitForRoom(backlog)
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
            condition.lock()
            open = false
            condition.broadcast()
            // The writer is done with the descriptor before it is closed (no write to a reused one).
            while !writerDone { condition.wait() }
            Glibc.close(fd)
            condition.unlock()
            ended(reason)
        }
        t.name = "h4 \(name)"
        t.start()
    }

    /// Reader: returns when the host may be read again (its answers are being taken, its
    /// controller keeps up), or the connection ends.
    private func waitForRoom(_ backlog: () -> Int) {
        condition.lock()
        defer { condition.unlock() }
        while open && (queuedOctetCount > Self.maxQueuedOctets || backlog() > Self.maxBacklog) {
            _ = condition.wait(until: Date().addingTimeInterval(0.01))  // the backlog is polled
        }
    }

    /// Queues one packet (H4) for the host; drops it once the connection is closed. Never waits.
    func send(_ packet: HCIPacket) {
        condition.lock()
        defer { condition.unlock() }
        guard open else { return }
        let bytes = packet.h4
        guard isSocket else { return writeNow(bytes) }
        queued.append(bytes)
        queuedOctetCount += bytes.count
        condition.broadcast()
    }

    /// /dev/vhci: writes one packet now (caller holds `condition`: the reader closes the
    /// descriptor under it).
    private func writeNow(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            return
        }
    }

    /// Writer thread (sockets): writes what is queued, in order. A write that fails or stays stuck for
    /// the socket's send timeout (SO_SNDTIMEO) ends the connection; the reader reports why.
    private func writeLoop() {
        condition.lock()
        while true {
            while open && queued.isEmpty { condition.wait() }
            if queued.isEmpty { break }  // closed, and everything written
            let packets = queued
            queued.removeAll()
            condition.unlock()
            // A stream: the packets go out joined.
            let bytes = Array(packets.joined())
            var offset = 0
            var failed = false
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
                if n > 0 { offset += n; continue }
                if n < 0 && errno == EINTR { continue }
                failed = true
                break
            }
            condition.lock()
            queuedOctetCount -= packets.reduce(0) { $0 + $1.count }
            condition.broadcast()
            if failed {
                shutdown(fd, Int32(SHUT_RDWR))
                break
            }
        }
        writerDone = true
        condition.broadcast()
        condition.unlock()
    }

    /// Ends the connection; the reader thread closes the descriptor.
    func close() {
        condition.lock()
        if open { shutdown(fd, Int32(SHUT_RDWR)) }
        condition.unlock()
    }
}
