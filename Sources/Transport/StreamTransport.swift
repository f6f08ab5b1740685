import Foundation
import HCI
#if canImport(Glibc)
import Glibc
#endif

/// An H4 transport over any file descriptor: TCP/UNIX sockets, a UART, an HCI user-channel
/// socket (which delivers one H4 packet per read, a special case of a stream).
///
/// A reader thread polls the descriptor and a wake pipe, feeds `H4Framer` and hands packets
/// to `inbox`. Loss (EOF, read error, framing error) is reported once: `inbox`
/// ends with that error and every later `send` throws it. The reader thread owns the
/// descriptor and closes it when it exits.
///
/// `send` never waits for the other end in normal operation (it runs on the host's executor,
/// which must not block): what the descriptor does not take at once is kept, in order, and
/// written by the reader thread when the descriptor has room. The host is flow controlled by
/// the controller (command and ACL credits), so this backlog stays small; a controller that
/// takes nothing for `sendTimeout` is declared lost, and only a sender that outruns the
/// `maxBacklog` bound (no flow control) waits for room, at most `sendTimeout`.
///
/// `@unchecked Sendable`: a wrapper of a C descriptor whose `send` must let go of its lock in
/// the middle (it polls for room without it, so that the reader thread can flush), which a
/// `Mutex`'s scoped `withLock` cannot express. Sound because every stored `var` is read and
/// written under `lock` only, and the descriptor is closed by the reader thread alone.
public final class FileDescriptorTransport: HCITransport, @unchecked Sendable {
    public let name: String
    private let packets = PacketInbox()
    public var inbox: PacketInbox { packets }

    private let fd: Int32
    private let isSocket: Bool
    /// Guards `state` and the descriptor's lifetime (writes happen under it).
    private let lock = NSLock()
    private var state: State = .open
    private var wakeRead: Int32 = -1
    private var wakeWrite: Int32 = -1

    private enum State { case open, lost(TransportError), closed }
    /// Octets `send` accepted that the descriptor has not taken yet (under `lock`), from `backlogHead`.
    private var backlog: [UInt8] = []
    private var backlogHead = 0
    /// When the backlog last stopped shrinking (nil: empty), for the send timeout.
    private var stalledSince: UInt64?
    /// The backlog above which `send` waits for room.
    private let maxBacklog = 1 << 20
    /// How long `send` waits for the other end to take a packet (seconds).
    private let sendTimeout: Double

    /// Default `sendTimeout`: a controller that reads nothing for this long is gone.
    public static let defaultSendTimeout: Double = 5

    /// Octets `send` accepted that the descriptor has not taken yet (diagnostics and tests).
    public var unsentOctets: Int {
        lock.lock(); defer { lock.unlock() }
        return backlog.count - backlogHead
    }

    /// Takes ownership of `fd` and puts it in non-blocking mode: `send` waits for room with
    /// poll, at most `sendTimeout` seconds, so a peer that stops reading never pins the
    /// calling thread (one of the concurrency pool's) for ever.
    public init(fd: Int32, name: String, isSocket: Bool, maxPayloadLength: Int = 16 * 1024,
                sendTimeout: Double = FileDescriptorTransport.defaultSendTimeout) throws(TransportError) {
        self.fd = fd
        self.name = name
        self.isSocket = isSocket
        self.sendTimeout = sendTimeout
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var pipeFDs: [Int32] = [-1, -1]
        guard pipe(&pipeFDs) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TransportError(.open, "\(name): cannot create wake pipe: \(errnoString(e))", errno: e)
        }
        wakeRead = pipeFDs[0]
        wakeWrite = pipeFDs[1]
        for p in pipeFDs {
            _ = fcntl(p, F_SETFD, FD_CLOEXEC)
            _ = fcntl(p, F_SETFL, fcntl(p, F_GETFL) | O_NONBLOCK)
        }
        let thread = Thread { [self] in readLoop(maxPayloadLength: maxPayloadLength) }
        thread.name = "hci-reader \(name)"
        thread.start()
    }

    public func send(_ packet: HCIPacket) throws(TransportError) {
        let bytes = packet.h4
        lock.lock()
        defer { lock.unlock() }
        try checkOpenLocked()
        let hadBacklog = backlogHead < backlog.count
        var offset = 0
        if !hadBacklog { offset = try writeLocked(bytes, from: 0) }
        guard offset < bytes.count else { return }
        backlog.append(contentsOf: bytes[offset...])
        if stalledSince == nil { stalledSince = DispatchTime.now().uptimeNanoseconds }
        if !hadBacklog { wake() }  // the reader thread now polls for room too
        // No flow control above us (a controller granting credits it does not honour): wait
        // for room, at most the send timeout. The wait is made without the lock: the reader
        // thread needs it to deliver what the peer sends meanwhile and to flush the backlog.
        while backlog.count - backlogHead > maxBacklog {
            guard let since = stalledSince else { break }
            let waited = DispatchTime.now().uptimeNanoseconds - since
            if waited >= UInt64(sendTimeout * 1e9) { throw sendTimedOutLocked() }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            lock.unlock()
            // The descriptor may be closed by the reader thread meanwhile (state is no longer
            // open then, checked below before any write): poll then answers POLLNVAL at once.
            _ = poll(&p, 1, Int32(min(1000, max(1, (UInt64(sendTimeout * 1e9) - waited) / 1_000_000))))
            lock.lock()
            try checkOpenLocked()
            try flushLocked()
        }
    }

    /// Throws why the transport can no longer send. Caller holds `lock`.
    private func checkOpenLocked() throws(TransportError) {
        switch state {
        case .closed: throw TransportError(.closed, "\(name): transport is closed")
        case .lost(let e): throw e
        case .open: break
        }
    }

    /// Writes `bytes[offset...]` until the descriptor would block; returns the new offset.
    /// Caller holds `lock`; a write error fails the transport.
    private func writeLocked(_ bytes: [UInt8], from offset: Int) throws(TransportError) -> Int {
        var offset = offset
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buf in
                isSocket
                    ? Glibc.send(fd, buf.baseAddress! + offset, buf.count - offset, Int32(MSG_NOSIGNAL))
                    : Glibc.write(fd, buf.baseAddress! + offset, buf.count - offset)
            }
            if n > 0 { offset += n; continue }
            let e = errno
            if n < 0 && e == EINTR { continue }
            if n < 0 && (e == EAGAIN || e == EWOULDBLOCK) { break }
            let error = TransportError(.lost, "\(name): write failed: \(errnoString(e)); the controller connection is gone", errno: e)
            failLocked(error)
            throw error
        }
        return offset
    }

    /// Writes what the backlog holds until the descriptor would block. Caller holds `lock`.
    private func flushLocked() throws(TransportError) {
        guard backlogHead < backlog.count else { return }
        let head = try writeLocked(backlog, from: backlogHead)
        if head > backlogHead { stalledSince = DispatchTime.now().uptimeNanoseconds }
        backlogHead = head
        if backlogHead == backlog.count {
            backlog.removeAll(keepingCapacity: backlog.capacity <= 64 * 1024)
            backlogHead = 0
            stalledSince = nil
        } else if backlogHead >= 64 * 1024 {
            backlog.removeFirst(backlogHead)
            backlogHead = 0
        }
    }

    /// The controller took nothing for `sendTimeout`: the transport is lost. Caller holds `lock`.
    private func sendTimedOutLocked() -> TransportError {
        // Part of a packet may be out: the stream can no longer be trusted.
        let error = TransportError(.lost, "\(name): send timeout: the controller took no data for \(sendTimeout) s (\(backlog.count - backlogHead) octets waiting); the connection is considered gone")
        failLocked(error)
        return error
    }

    public func close() {
        lock.lock()
        if case .open = state {
            state = .closed
            packets.finish()
            wake()  // under the lock: the reader thread closes the pipe under it when it exits
        }
        lock.unlock()
    }

    /// Makes the reader thread look at the state again (the pipe is non-blocking: a full pipe
    /// already holds a wake).
    /// Caller holds `lock` (the reader thread closes the pipe under it).
    private func wake() {
        var one: UInt8 = 1
        _ = Glibc.write(wakeWrite, &one, 1)
    }

    /// Records the first loss and ends `inbox` with it. Caller holds `lock`.
    private func failLocked(_ error: TransportError) {
        guard case .open = state else { return }
        state = .lost(error)
        packets.finish(throwing: error)
        wake()
    }

    private func fail(_ error: TransportError) {
        lock.lock()
        failLocked(error)
        lock.unlock()
    }

    private func readLoop(maxPayloadLength: Int) {
        var framer = H4Framer(maxPayloadLength: maxPayloadLength)
        let capacity = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer {
            buffer.deallocate()
            // Close under the lock so a concurrent send never writes to a reused descriptor.
            // What `send` accepted before `close` goes out if the descriptor takes it now.
            lock.lock()
            if case .open = state { state = .closed; packets.finish() }
            if case .closed = state { try? flushLocked() }
            Glibc.close(fd)
            Glibc.close(wakeRead)
            Glibc.close(wakeWrite)
            lock.unlock()
        }
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        var drain = [UInt8](repeating: 0, count: 64)
        while true {
            // Room to write is polled for only while `send` left a backlog.
            lock.lock()
            guard case .open = state else { lock.unlock(); return }  // close() or a failure elsewhere
            let stalled = backlogHead < backlog.count ? stalledSince : nil
            lock.unlock()
            var timeout: Int32 = -1
            if let stalled {
                let limit = UInt64(sendTimeout * 1e9), waited = DispatchTime.now().uptimeNanoseconds - stalled
                timeout = waited >= limit ? 0 : Int32(min(1000, max(1, (limit - waited) / 1_000_000)))
            }
            fds[0].events = Int16(POLLIN) | (stalled != nil ? Int16(POLLOUT) : 0)
            fds[0].revents = 0
            fds[1].revents = 0
            let r = poll(&fds, 2, timeout)
            if r < 0 {
                let e = errno
                if e == EINTR { continue }
                fail(TransportError(.lost, "\(name): poll failed: \(errnoString(e))", errno: e))
                return
            }
            if fds[1].revents != 0 { _ = read(wakeRead, &drain, drain.count) }  // state is looked at above
            if stalled != nil {
                lock.lock()
                if case .open = state, backlogHead < backlog.count {
                    do {
                        if fds[0].revents & Int16(POLLOUT) != 0 { try flushLocked() }
                        if let s = stalledSince, DispatchTime.now().uptimeNanoseconds - s >= UInt64(sendTimeout * 1e9) {
                            _ = sendTimedOutLocked()
                        }
                    } catch {}  // failLocked recorded it
                }
                lock.unlock()
            }
            guard fds[0].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 else { continue }
            let n = read(fd, buffer.baseAddress, capacity)
            if n < 0 {
                let e = errno
                if e == EINTR || e == EAGAIN { continue }
                fail(TransportError(.lost, "\(name): read failed: \(errnoString(e)); the controller connection is gone", errno: e))
                return
            }
            if n == 0 {
                fail(TransportError(.lost, "\(name): the controller closed the connection (end of stream)"))
                return
            }
            do {
                try framer.feed(UnsafeRawBufferPointer(rebasing: buffer[0..<n])) { packet in
                    packets.deliver(packet)
                }
            } catch {
                fail(error)
                return
            }
        }
    }
}

func errnoString(_ e: Int32) -> String {
    String(cString: strerror(e)) + " (errno \(e))"
}
