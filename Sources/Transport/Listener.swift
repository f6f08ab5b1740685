import CBluetooth
import Foundation
import HCI
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A listening H4 stream socket (`tcp:HOST:PORT`, port 0 for any free port, or `unix:PATH`)
/// whose accepted connections become `FileDescriptorTransport`s: the side of a byte stream
/// that another host stack connects to (`ble-hci proxy --host SPEC`). The transport it hands
/// over frames H4 whichever way the packets go, so the packets read from it are the host's
/// commands, ACL and ISO data, and `send` gives that host events and data.
public final class H4Listener: Sendable {
    /// The SPEC with the port the kernel chose (`tcp:127.0.0.1:41234`), or the UNIX path.
    public let boundSpec: String
    private let fd: Int32
    private let unixPath: String?
    private let stopped = Atomic<Bool>(false)

    /// Binds and listens. Throws `.badSpec` for a SPEC that is not tcp:HOST:PORT or unix:PATH,
    /// `.open` (with the errno in words) when the address cannot be bound.
    public init(spec: String) throws(TransportError) {
        let anyPort = spec.hasPrefix("tcp:") && spec.hasSuffix(":0")
        let parsed = try TransportSpec(parsing: anyPort ? String(spec.dropLast()) + "1" : spec)
        switch parsed {
        case .tcp(let host, let specPort):
            let port = anyPort ? 0 : specPort
            let (fd, bound) = try withTCPAddresses(host: host, port: port, passive: true, name: spec) { a throws(TransportError) in
                try Self.listenTCP(on: a, spec: spec)
            }
            self.fd = fd
            self.unixPath = nil
            boundSpec = "tcp:\(host.contains(":") ? "[\(host)]" : host):\(bound)"
        case .unix(let path):
            fd = try Self.listenUnix(path: path, spec: spec)
            unixPath = path
            boundSpec = spec
        default:
            throw TransportError(.badSpec, "\(spec): a listening side is tcp:HOST:PORT (port 0: any free port) or unix:PATH")
        }
    }

    private static func listenTCP(on a: UnsafeMutablePointer<addrinfo>, spec: String) throws(TransportError) -> (Int32, UInt16) {
        let fd = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            let e = errno
            throw TransportError(.open, "\(spec): socket failed: \(errnoString(e))", errno: e)
        }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard Glibc.bind(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0, listen(fd, 4) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TransportError(.open, "\(spec): cannot listen: \(errnoString(e))\(e == EADDRINUSE ? "; pick another port (or port 0 for any free one)" : "")", errno: e)
        }
        var ss = sockaddr_storage()
        var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let bound: UInt16 = withUnsafeMutablePointer(to: &ss) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &len) }
            if Int32(p.pointee.ss_family) == AF_INET6 {
                return p.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return p.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
        return (fd, bound)
    }

    private static func listenUnix(path: String, spec: String) throws(TransportError) -> Int32 {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        guard !bytes.isEmpty, bytes.count < capacity else {
            throw TransportError(.badSpec, "\(spec): a UNIX socket path is 1 to \(capacity - 1) bytes long")
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            let e = errno
            throw TransportError(.open, "\(spec): socket failed: \(errnoString(e))", errno: e)
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        // Only a stale socket is replaced, never a file of another kind.
        var st = stat()
        if lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK { unlink(path) }
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard ok == 0, listen(fd, 4) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TransportError(.open, "\(spec): cannot listen: \(errnoString(e))\(e == EADDRINUSE ? " (a file of that name exists: remove it or pick another path)" : "")", errno: e)
        }
        return fd
    }

    /// Accepts connections on a thread of its own until `stop()`, handing each to `accepted`
    /// as a transport with the peer's address in words (`127.0.0.1:53412`, or the UNIX path).
    /// A connection whose transport cannot be set up is closed and reported to `failed`.
    public func start(accepted: @escaping @Sendable (FileDescriptorTransport, String) -> Void,
                      failed: @escaping @Sendable (TransportError) -> Void) {
        let thread = Thread { [self] in acceptLoop(accepted: accepted, failed: failed) }
        thread.name = "h4-listener \(boundSpec)"
        thread.start()
    }

    private func acceptLoop(accepted: @escaping @Sendable (FileDescriptorTransport, String) -> Void,
                            failed: @escaping @Sendable (TransportError) -> Void) {
        while true {
            var ss = sockaddr_storage()
            var len = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &ss) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(fd, $0, &len) }
            }
            if client < 0 {
                let e = errno
                if e == EINTR || e == ECONNABORTED { continue }
                if isStopped { return }
                failed(TransportError(.lost, "\(boundSpec): accept failed: \(errnoString(e))", errno: e))
                return
            }
            if isStopped { Glibc.close(client); return }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            let peer = unixPath ?? Self.describe(&ss)
            if unixPath == nil {
                var one: Int32 = 1
                _ = setsockopt(client, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            }
            switch Result(catching: { () throws(TransportError) in
                try FileDescriptorTransport(fd: client, name: "\(boundSpec) host \(peer)", isSocket: true)
            }) {
            case .success(let transport): accepted(transport, peer)
            case .failure(let error): failed(error)
            }
        }
    }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) }

    /// `HOST:PORT` of an accepted TCP peer.
    private static func describe(_ ss: inout sockaddr_storage) -> String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var serv = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let r = withUnsafePointer(to: &ss) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, socklen_t(MemoryLayout<sockaddr_storage>.size), &host, socklen_t(host.count), &serv, socklen_t(serv.count),
                            NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard r == 0 else { return "an unknown address" }
        let h = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let s = String(decoding: serv.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return h.contains(":") ? "[\(h)]:\(s)" : "\(h):\(s)"
    }

    /// Stops accepting and closes the listening socket (a UNIX socket's file is removed).
    /// Connections already handed over are the caller's. Idempotent.
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        Glibc.close(fd)
        if let unixPath { unlink(unixPath) }
    }

    deinit { stop() }
}
