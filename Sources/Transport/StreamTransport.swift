import Foundation
import HCI
#if canImport(Glibc)
import Glibc
#endif

/// An H4 transport over any file descriptor: TCP/UNIX sockets, a UART, an HCI user-channel
/// socket (which delivers one H4 packet per read, a special case of a stream).
///
/// A reader thread polls the descriptor and a wake pipe, feeds `H4Framer` and yields packets
/// to `inbox` (`incoming`). Loss (EOF, read error, framing error) is reported once: `incoming`
/// finishes with that error and every later `send` throws it. The reader thread owns the
/// descriptor and closes it when it exits.
public final class FileDescriptorTransport: HCITransport, @unchecked Sendable {
    public let name: String
    private let packets = PacketInbox()
    public var inbox: PacketInbox? { packets }
    public var incoming: AsyncThrowingStream<HCIPacket, any Error> { packets.stream }

    private let fd: Int32
    private let isSocket: Bool
    /// Guards `state` and the descriptor's lifetime (writes happen under it).
    private let lock = NSLock()
    private var state: State = .open
    private var wakeRead: Int32 = -1
    private var wakeWrite: Int32 = -1

    private enum State { case open, lost(TransportError), closed }
    /// How long `send` waits for the other end to take a packet (seconds).
    private let sendTimeout: Double

    /// Default `sendTimeout`: a controller that reads nothing for this long is gone.
    public static let defaultSendTimeout: Double = 5

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
        switch state {
        case .closed: throw TransportError(.closed, "\(name): transport is closed")
        case .lost(let e): throw e
        case .open: break
        }
        var offset = 0
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(sendTimeout * 1e9)
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { buf in
                isSocket
                    ? Glibc.send(fd, buf.baseAddress! + offset, buf.count - offset, Int32(MSG_NOSIGNAL))
                    : Glibc.write(fd, buf.baseAddress! + offset, buf.count - offset)
            }
            if n > 0 { offset += n; continue }
            let e = errno
            if n < 0 && e == EINTR { continue }
            if n < 0 && (e == EAGAIN || e == EWOULDBLOCK) {
                // Full: wait for room until the deadline.
                let now = DispatchTime.now().uptimeNanoseconds
                if now < deadline {
                    var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    _ = poll(&p, 1, Int32(min(1000, max(1, (deadline - now) / 1_000_000))))
                    continue
                }
                // Part of a packet may be out: the stream can no longer be trusted.
                let error = TransportError(.lost, "\(name): send timeout: the controller took no data for \(sendTimeout) s (\(offset) of \(bytes.count) octets of a packet written); the connection is considered gone")
                failLocked(error)
                throw error
            }
            let error = TransportError(.lost, "\(name): write failed: \(errnoString(e)); the controller connection is gone", errno: e)
            failLocked(error)
            throw error
        }
    }

    public func close() {
        lock.lock()
        if case .open = state {
            state = .closed
            packets.finish()
        }
        lock.unlock()
        wake()
    }

    private func wake() {
        var one: UInt8 = 1
        _ = Glibc.write(wakeWrite, &one, 1)
    }

    /// Records the first loss and finishes `incoming` with it. Caller holds `lock`.
    private func failLocked(_ error: TransportError) {
        guard case .open = state else { return }
        state = .lost(error)
        packets.finish(throwing: error)
        var one: UInt8 = 1
        _ = Glibc.write(wakeWrite, &one, 1)
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
            lock.lock()
            if case .open = state { state = .closed; packets.finish() }
            Glibc.close(fd)
            Glibc.close(wakeRead)
            Glibc.close(wakeWrite)
            lock.unlock()
        }
        var fds = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        while true {
            fds[0].revents = 0
            fds[1].revents = 0
            let r = poll(&fds, 2, -1)
            if r < 0 {
                let e = errno
                if e == EINTR { continue }
                fail(TransportError(.lost, "\(name): poll failed: \(errnoString(e))", errno: e))
                return
            }
            if fds[1].revents != 0 { return }  // close() or a failure elsewhere
            guard fds[0].revents != 0 else { continue }
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
