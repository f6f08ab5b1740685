/// A `-t/--transport` SPEC from CLI.md.
public enum TransportSpec: Sendable, Equatable, CustomStringConvertible {
    case userChannel(index: UInt16)
    case tcp(host: String, port: UInt16)
    case unix(path: String)
    case serial(path: String, baud: Int)
    case virtual

    public static let validForms = "hciN, hci:N, tcp:HOST:PORT, unix:PATH, serial:PATH[@BAUD], virtual"

    public init(parsing spec: String) throws(TransportError) {
        func bad(_ why: String) -> TransportError {
            TransportError(.badSpec, "bad transport \"\(spec)\": \(why); valid forms: \(TransportSpec.validForms)")
        }
        if spec == "virtual" { self = .virtual; return }
        if spec.hasPrefix("hci") {
            var digits = spec.dropFirst(3)
            if digits.hasPrefix(":") { digits = digits.dropFirst() }
            guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let n = UInt16(digits) else {
                throw bad("adapter index must be a number")
            }
            self = .userChannel(index: n)
            return
        }
        if spec.hasPrefix("tcp:") {
            let rest = spec.dropFirst(4)
            guard let colon = rest.lastIndex(of: ":") else { throw bad("expected tcp:HOST:PORT") }
            var host = String(rest[..<colon])
            if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            guard !host.isEmpty else { throw bad("missing host") }
            guard let port = UInt16(rest[rest.index(after: colon)...]), port != 0 else { throw bad("port must be 1-65535") }
            self = .tcp(host: host, port: port)
            return
        }
        if spec.hasPrefix("unix:") {
            let path = String(spec.dropFirst(5))
            guard !path.isEmpty else { throw bad("missing socket path") }
            self = .unix(path: path)
            return
        }
        if spec.hasPrefix("serial:") {
            let rest = spec.dropFirst(7)
            var path = String(rest)
            var baud = SerialTransport.defaultBaud
            if let at = rest.lastIndex(of: "@") {
                path = String(rest[..<at])
                guard let b = Int(rest[rest.index(after: at)...]), b > 0 else { throw bad("baud must be a number") }
                guard SerialTransport.speed(for: b) != nil else { throw bad("unsupported baud rate \(b)") }
                baud = b
            }
            guard !path.isEmpty else { throw bad("missing device path") }
            self = .serial(path: path, baud: baud)
            return
        }
        throw bad("unknown transport")
    }

    public var description: String {
        switch self {
        case .userChannel(let i): "hci\(i)"
        case .tcp(let h, let p): h.contains(":") ? "tcp:[\(h)]:\(p)" : "tcp:\(h):\(p)"
        case .unix(let p): "unix:\(p)"
        case .serial(let p, let b): "serial:\(p)@\(b)"
        case .virtual: "virtual"
        }
    }

    /// Opens the transport. `virtual` lives in a higher module: the CLI handles it.
    public func open(timeout: Double = 5) throws(TransportError) -> any HCITransport {
        switch self {
        case .userChannel(let i): return try UserChannelTransport.open(index: i)
        case .tcp(let h, let p): return try TCPTransport.connect(host: h, port: p, timeout: timeout)
        case .unix(let p): return try UnixTransport.connect(path: p, timeout: timeout)
        case .serial(let p, let b): return try SerialTransport.open(path: p, baud: b)
        case .virtual:
            throw TransportError(.badSpec, "the virtual controller is provided by the VirtualController module, not TransportSpec.open()")
        }
    }
}
