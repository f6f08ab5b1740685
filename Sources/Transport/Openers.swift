import CBluetooth
import Foundation
import HCI
#if canImport(Glibc)
import Glibc
#endif

/// The stream-socket addresses `host`:`port` resolves to (getaddrinfo; `passive` for a listener),
/// handed to `body` and freed after it. `name` starts the error when nothing resolves.
package func withTCPAddresses<T>(host: String, port: UInt16, passive: Bool, name: String,
                                 _ body: (UnsafeMutablePointer<addrinfo>) throws(TransportError) -> T) throws(TransportError) -> T {
    var hints = addrinfo()
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    hints.ai_family = AF_UNSPEC
    if passive { hints.ai_flags = AI_PASSIVE }
    var list: UnsafeMutablePointer<addrinfo>?
    let gai = getaddrinfo(host, String(port), &hints, &list)
    guard gai == 0, let first = list else {
        throw TransportError(.open, "\(name): cannot resolve host \(host): \(String(cString: gai_strerror(gai)))")
    }
    defer { freeaddrinfo(list) }
    return try body(first)
}

/// H4 over TCP, as a client (virtual controllers, emulators, bridges).
public enum TCPTransport {
    /// `timeout`: for connecting; `sendTimeout`: how long a send may wait for the other end to
    /// read before the connection is declared lost.
    public static func connect(host: String, port: UInt16, timeout: Double = 5,
                               sendTimeout: Double = FileDescriptorTransport.defaultSendTimeout) throws(TransportError) -> FileDescriptorTransport {
        let name = "tcp:\(host):\(port)"
        return try withTCPAddresses(host: host, port: port, passive: false, name: name) { first throws(TransportError) in
            try connect(first, name: name, timeout: timeout, sendTimeout: sendTimeout)
        }
    }

    /// Tries each resolved address in turn; the last failure when none connects.
    private static func connect(_ first: UnsafeMutablePointer<addrinfo>, name: String, timeout: Double,
                                sendTimeout: Double) throws(TransportError) -> FileDescriptorTransport {
        var lastError = TransportError(.open, "\(name): no address to connect to")
        var ai: UnsafeMutablePointer<addrinfo>? = first
        while let a = ai {
            ai = a.pointee.ai_next
            let fd = socket(a.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else {
                let e = errno
                lastError = TransportError(.open, "\(name): socket failed: \(errnoString(e))", errno: e)
                continue
            }
            do {
                try connectWithTimeout(fd: fd, address: a.pointee.ai_addr, length: a.pointee.ai_addrlen, timeout: timeout, name: name)
                var one: Int32 = 1
                _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                return try FileDescriptorTransport(fd: fd, name: name, isSocket: true, sendTimeout: sendTimeout)
            } catch {
                Glibc.close(fd)
                lastError = error
            }
        }
        throw lastError
    }

    /// Non-blocking connect + poll so an unreachable host fails after `timeout`, not minutes.
    static func connectWithTimeout(fd: Int32, address: UnsafePointer<sockaddr>, length: socklen_t, timeout: Double, name: String) throws(TransportError) {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        if Glibc.connect(fd, address, length) != 0 {
            let e = errno
            guard e == EINPROGRESS || e == EINTR else { throw connectError(e, name) }
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let deadline = Date().addingTimeInterval(timeout)
            while true {
                let ms = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
                let r = poll(&p, 1, ms)
                if r < 0 && errno == EINTR { continue }
                if r == 0 { throw TransportError(.open, "\(name): connect timed out after \(timeout) s; is the controller listening?", errno: ETIMEDOUT) }
                break
            }
            var soError: Int32 = 0
            var len = socklen_t(MemoryLayout<Int32>.size)
            _ = getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len)
            if soError != 0 { throw connectError(soError, name) }
        }
        _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
    }

    static func connectError(_ e: Int32, _ name: String) -> TransportError {
        let hint = e == ECONNREFUSED || e == ENOENT ? "; is the controller (e.g. `ble-hci controllers --listen ...`) running?" : ""
        return TransportError(.open, "\(name): connect failed: \(errnoString(e))\(hint)", errno: e)
    }
}

/// H4 over a UNIX stream socket, as a client.
public enum UnixTransport {
    public static func connect(path: String, timeout: Double = 5) throws(TransportError) -> FileDescriptorTransport {
        let name = "unix:\(path)"
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: addr.sun_path)
        let utf8 = Array(path.utf8)
        guard !utf8.isEmpty, utf8.count < capacity else {
            throw TransportError(.open, "\(name): socket path must be 1 to \(capacity - 1) bytes long")
        }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: utf8)
            raw[utf8.count] = 0
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            let e = errno
            throw TransportError(.open, "\(name): socket failed: \(errnoString(e))", errno: e)
        }
        do {
            try withUnsafePointer(to: &addr) { p throws(TransportError) in
                try p.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa throws(TransportError) in
                    try TCPTransport.connectWithTimeout(fd: fd, address: sa, length: socklen_t(MemoryLayout<sockaddr_un>.size), timeout: timeout, name: name)
                }
            }
        } catch {
            Glibc.close(fd)
            throw error
        }
        return try FileDescriptorTransport(fd: fd, name: name, isSocket: true)
    }
}

/// H4 over a UART: raw 8N1 with RTS/CTS hardware flow control.
public enum SerialTransport {
    public static let defaultBaud = 1_000_000

    /// termios speed constants by baud rate.
    private static let speeds: [Int: Int32] = [
        9600: B9600, 19200: B19200, 38400: B38400, 57600: B57600, 115200: B115200,
        230400: B230400, 460800: B460800, 500000: B500000, 576000: B576000, 921600: B921600,
        1_000_000: B1000000, 1_152_000: B1152000, 1_500_000: B1500000, 2_000_000: B2000000,
        2_500_000: B2500000, 3_000_000: B3000000, 3_500_000: B3500000, 4_000_000: B4000000,
    ]

    /// termios speed constant for a baud rate; nil if the kernel has no constant for it.
    public static func speed(for baud: Int) -> speed_t? { speeds[baud].map { speed_t($0) } }

    public static func open(path: String, baud: Int = defaultBaud) throws(TransportError) -> FileDescriptorTransport {
        let name = "serial:\(path)@\(baud)"
        guard let speed = speed(for: baud) else {
            let supported = speeds.keys.sorted().map(String.init).joined(separator: ", ")
            throw TransportError(.open, "\(name): unsupported baud rate \(baud); use one of \(supported)")
        }
        let fd = Glibc.open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            let e = errno
            let hint = e == EACCES ? "; add yourself to the dialout group or run as root" : e == ENOENT ? "; check the device path (ls /dev/tty*)" : ""
            throw TransportError(.open, "\(name): cannot open: \(errnoString(e))\(hint)", errno: e)
        }
        var tio = termios()
        guard tcgetattr(fd, &tio) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TransportError(.open, "\(name): not a terminal device: \(errnoString(e))", errno: e)
        }
        cfmakeraw(&tio)
        tio.c_cflag &= ~tcflag_t(CSIZE | PARENB | CSTOPB)
        tio.c_cflag |= tcflag_t(CS8) | tcflag_t(CLOCAL) | tcflag_t(CREAD) | tcflag_t(CRTSCTS)
        tio.c_iflag &= ~tcflag_t(IXON | IXOFF | IXANY)
        // Reads return as soon as one byte is there; poll() does the waiting.
        withUnsafeMutableBytes(of: &tio.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        cfsetispeed(&tio, speed)
        cfsetospeed(&tio, speed)
        guard tcsetattr(fd, TCSANOW, &tio) == 0 else {
            let e = errno
            Glibc.close(fd)
            throw TransportError(.open, "\(name): cannot configure the UART (8N1, RTS/CTS, \(baud) baud): \(errnoString(e))", errno: e)
        }
        tcflush(fd, TCIOFLUSH)
        return try FileDescriptorTransport(fd: fd, name: name, isSocket: false)
    }
}

/// Linux HCI user channel: exclusive raw access to adapter hciN, one H4 packet per read/write.
public enum UserChannelTransport {
    /// How long to keep retrying EBUSY: a freshly attached adapter is busy while the kernel initialises it.
    public static let busyRetry: Double = 1.0

    public static func open(index: UInt16) throws(TransportError) -> FileDescriptorTransport {
        let name = "hci\(index) (user channel)"
        let deadline = Date().addingTimeInterval(busyRetry)
        while true {
            let fd = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
            guard fd >= 0 else { throw userChannelError(errno, index: index, step: "socket") }
            var addr = sockaddr_hci(hci_family: sa_family_t(AF_BLUETOOTH), hci_dev: index, hci_channel: UInt16(HCI_CHANNEL_USER))
            let r = withUnsafePointer(to: &addr) { p in
                p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_hci>.size)) }
            }
            if r == 0 { return try FileDescriptorTransport(fd: fd, name: name, isSocket: true) }
            let e = errno
            Glibc.close(fd)
            if e == EBUSY && Date() < deadline {
                usleep(50_000)
                continue
            }
            throw userChannelError(e, index: index, step: "bind")
        }
    }

    /// EAFNOSUPPORT's advice: load the module, or work without an adapter in ways that work.
    public static let noBluetoothAdvice = "this kernel has no Bluetooth support (AF_BLUETOOTH sockets: EAFNOSUPPORT): load the bluetooth module (modprobe bluetooth; in a container the host's kernel decides), or work without an adapter: `ble-hci demo`, or virtual controllers in another terminal (`ble-hci controllers --listen tcp:127.0.0.1:9001 --listen tcp:127.0.0.1:9002`) driven with -t tcp:127.0.0.1:9001 and -t tcp:127.0.0.1:9002"

    /// What failed and what to do about it, per errno.
    public static func userChannelError(_ e: Int32, index: UInt16, step: String) -> TransportError {
        let advice: String
        switch e {
        case EAFNOSUPPORT:
            advice = noBluetoothAdvice
        case EPERM, EACCES:
            advice = "opening an HCI user channel needs root: run as root or grant CAP_NET_ADMIN (setcap cap_net_admin+ep ble-hci)"
        case ENODEV:
            let adapters = (try? FileManager.default.contentsOfDirectory(atPath: "/sys/class/bluetooth"))?.sorted() ?? []
            advice = "no such adapter hci\(index); " + (adapters.isEmpty ? "/sys/class/bluetooth lists no adapters" : "adapters present: \(adapters.joined(separator: ", "))")
        case EBUSY:
            advice = "adapter hci\(index) is busy: it is up or still being initialised (power it off with `btmgmt -i hci\(index) power off`, or stop bluetooth.service), or another program (e.g. another ble-hci) holds its user channel (stop it); then retry"
        case EUSERS, EALREADY:
            advice = "another program already holds the user channel of hci\(index); stop it and retry"
        default:
            advice = "\(step) failed"
        }
        return TransportError(.open, "hci\(index): cannot open the HCI user channel: \(errnoString(e)): \(advice)", errno: e)
    }
}
