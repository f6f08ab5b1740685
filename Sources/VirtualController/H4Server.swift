import Foundation
import HCI
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// Serves controllers of a `VirtualLink` as H4 over TCP or UNIX stream sockets: each listener
/// is one controller; each accepted connection drives it from reset. One host at a time: a
/// second connection while a host is attached is refused (closed at once, and logged), so a
/// stray client cannot silently cut off the host that is working.
///
/// `@unchecked Sendable`: it holds listening descriptors served by accept threads. Sound
/// because `listeners` is written only in `init` (before the server is shared) and every
/// other stored `var` is read and written under `lock`.
public final class H4Server: @unchecked Sendable {
    public struct Listener: Sendable {
        /// The SPEC as given (`tcp:127.0.0.1:0` stays as given; see `boundSpec`).
        public let spec: String
        /// The SPEC with the port the kernel chose (`tcp:127.0.0.1:41234`).
        public let boundSpec: String
        public let port: UInt16?
        public let controller: VirtualController
        let fd: Int32
    }

    public let link: VirtualLink
    public private(set) var listeners: [Listener] = []
    private let lock = NSLock()
    private var stopped = false
    private var hosts: [Int: H4Connection] = [:]
    private var generation: [Int: Int] = [:]

    /// LE ACL data length of the controllers this server adds (Read Buffer Size).
    let aclDataLength: Int

    /// Binds every SPEC (`tcp:HOST:PORT`, port 0 for any; `unix:PATH`), one new controller each
    /// (with `aclDataLength`-octet ACL buffers: 27, or up to 251 with Data Length Extension).
    public init(link: VirtualLink, listen specs: [String], aclDataLength: Int = 27) throws(TransportError) {
        self.link = link
        self.aclDataLength = aclDataLength
        do {
            for spec in specs { try bind(spec) }
        } catch {
            for l in listeners { Glibc.close(l.fd) }
            throw error
        }
    }

    /// A listening stream socket bound to `a`, and the port it got (the one asked for, or any free one for 0).
    private func listenTCP(on a: UnsafeMutablePointer<addrinfo>, spec: String) throws(TransportError) -> (Int32, UInt16) {
        let fd = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TransportError(.open, "\(spec): socket failed: \(String(cString: strerror(errno)))", errno: errno) }
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard Glibc.bind(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0, listen(fd, 4) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TransportError(.open, "\(spec): cannot listen: \(String(cString: strerror(e))) (errno \(e))\(e == EADDRINUSE ? "; pick another port" : "")", errno: e)
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

    private func bind(_ spec: String) throws(TransportError) {
        // Port 0 (any free port) is valid for a listener, not for a client SPEC.
        let anyPort = spec.hasPrefix("tcp:") && spec.hasSuffix(":0")
        let parsed = try TransportSpec(parsing: anyPort ? String(spec.dropLast()) + "1" : spec)
        switch parsed {
        case .tcp(let host, let specPort):
            let port = anyPort ? 0 : specPort
            let (fd, bound) = try withTCPAddresses(host: host, port: port, passive: true, name: spec) { a throws(TransportError) in
                try listenTCP(on: a, spec: spec)
            }
            let hostPart = host.contains(":") ? "[\(host)]" : host
            listeners.append(Listener(spec: spec, boundSpec: "tcp:\(hostPart):\(bound)", port: bound,
                                      controller: link.addController(aclDataLength: aclDataLength), fd: fd))
        case .unix(let path):
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw TransportError(.open, "\(spec): socket failed: \(String(cString: strerror(errno)))", errno: errno) }
            var addr = sockaddr_un()
            addr.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else {
                Glibc.close(fd)
                throw TransportError(.badSpec, "\(spec): path too long for a UNIX socket")
            }
            withUnsafeMutableBytes(of: &addr.sun_path) { raw in
                for (i, b) in bytes.enumerated() { raw[i] = b }
            }
            unlink(path)
            let ok = withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            guard ok == 0, listen(fd, 4) == 0 else {
                let e = errno
                Glibc.close(fd)
                throw TransportError(.open, "\(spec): cannot listen: \(String(cString: strerror(e))) (errno \(e))", errno: e)
            }
            listeners.append(Listener(spec: spec, boundSpec: spec, port: nil, controller: link.addController(aclDataLength: aclDataLength), fd: fd))
        default:
            throw TransportError(.badSpec, "\(spec): a listener is tcp:HOST:PORT or unix:PATH (or vhci)")
        }
    }

    /// Starts one accept thread per listener.
    public func start() {
        for (i, l) in listeners.enumerated() {
            let t = Thread { [self] in acceptLoop(i, l) }
            t.name = "h4-server \(l.boundSpec)"
            t.start()
        }
    }

    private func acceptLoop(_ i: Int, _ l: Listener) {
        while true {
            let fd = accept(l.fd, nil, nil)
            if fd < 0 {
                if errno == EINTR { continue }
                return  // closed by stop()
            }
            lock.lock()
            if stopped { lock.unlock(); Glibc.close(fd); return }
            lock.unlock()
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            // A host that stops reading must not block the link (every controller) for ever:
            // a send stuck this long ends that host's connection instead.
            var sendTimeout = timeval(tv_sec: 5, tv_usec: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))
            attach(i, l, fd: fd)
        }
    }

    private func attach(_ i: Int, _ l: Listener, fd: Int32) {
        let connection = H4Connection(fd: fd, name: "\(l.boundSpec) host", isSocket: true)
        lock.lock()
        if hosts[i] != nil {
            lock.unlock()
            Glibc.close(fd)
            link.note("\(l.boundSpec): refused a second host: controller \(l.controller.index) already has one (one host per controller; use another --listen, or stop the first host)")
            return
        }
        hosts[i] = connection
        let gen = (generation[i] ?? 0) + 1
        generation[i] = gen
        lock.unlock()
        link.note("\(l.boundSpec): host connected; controller \(l.controller.index) reset")

        let controller = l.controller
        controller.attachHost(nil)
        controller.powerCycle()
        controller.attachHost { packet in connection.send(packet) }
        connection.start(packet: { controller.receive(fromHost: $0) }, backlog: { controller.queuedFromHost }, ended: { [self] reason in
            lock.lock()
            let current = generation[i] == gen
            if current { hosts[i] = nil }
            lock.unlock()
            if current {
                controller.attachHost(nil)
                controller.powerCycle()
                link.note("\(l.boundSpec): host disconnected (\(reason))")
            }
        })
    }

    /// The host connection of listener `index`, if one is attached (tests).
    func host(_ index: Int) -> H4Connection? {
        lock.lock(); defer { lock.unlock() }
        return hosts[index]
    }

    /// Closes the listeners and every host connection.
    public func stop() {
        lock.lock()
        guard !stopped else { lock.unlock(); return }
        stopped = true
        let open = Array(hosts.values)
        hosts = [:]
        lock.unlock()
        for l in listeners {
            shutdown(l.fd, Int32(SHUT_RDWR))
            Glibc.close(l.fd)
            if case .unix(let path)? = try? TransportSpec(parsing: l.spec) { unlink(path) }
        }
        for t in open { t.close() }
    }

    deinit { stop() }
}
