// HCIPacketType (the H4 packet indicator, Core Vol 4 Part A 2) and PacketBoundary (Core Vol 4
// Part E 5.4.2) are generated from Tools/pdl/hci-codes.pdl.

extension HCIPacketType {
    /// Length of the header that precedes the payload, and where its length field is.
    public var headerLength: Int {
        switch self {
        case .command: 3  // opcode(2) length(1)
        case .acl: 4  // handle+flags(2) length(2)
        case .sco: 3  // handle+flags(2) length(1)
        case .event: 2  // code(1) length(1)
        case .iso: 4  // handle+flags(2) length(14 bits)
        }
    }

    /// Payload length read from a complete header (`header` excludes the H4 indicator).
    public func payloadLength(header: ArraySlice<UInt8>) -> Int {
        let h = header.startIndex
        switch self {
        case .command: return Int(header[h + 2])
        case .acl: return Int(header[h + 2]) | Int(header[h + 3]) << 8
        case .sco: return Int(header[h + 2])
        case .event: return Int(header[h + 1])
        case .iso: return (Int(header[h + 2]) | Int(header[h + 3]) << 8) & 0x3fff
        }
    }
}

/// Direction of a packet relative to the host.
public enum Direction: Sendable, Hashable, CustomStringConvertible {
    /// host → controller
    case sent
    /// controller → host
    case received

    public var description: String { self == .sent ? "sent" : "received" }
}

public struct HCICommandPacket: Sendable, Equatable {
    public var opcode: HCIOpcode
    public var parameters: [UInt8]

    public init(opcode: HCIOpcode, parameters: [UInt8] = []) {
        self.opcode = opcode
        self.parameters = parameters
    }
}

public struct HCIEventPacket: Sendable, Equatable {
    public var code: UInt8
    public var parameters: [UInt8]

    public init(code: UInt8, parameters: [UInt8] = []) {
        self.code = code
        self.parameters = parameters
    }
}

extension PacketBoundary {
    /// A first packet (either kind) or a complete one: the start of an L2CAP frame.
    public var isStart: Bool { self != .continuing }
}

public struct HCIACLPacket: Sendable, Equatable {
    /// Connection_Handle (12 bits).
    public var handle: UInt16
    public var boundary: PacketBoundary
    /// Broadcast_Flag (2 bits), always 0 on LE.
    public var broadcast: UInt8
    public var data: [UInt8]

    public init(handle: UInt16, boundary: PacketBoundary, broadcast: UInt8 = 0, data: [UInt8]) {
        self.handle = handle & 0x0fff
        self.boundary = boundary
        self.broadcast = broadcast & 0x3
        self.data = data
    }
}

/// One HCI packet as it crosses the host/controller boundary.
public enum HCIPacket: Sendable, Equatable {
    case command(HCICommandPacket)
    case acl(HCIACLPacket)
    case event(HCIEventPacket)
    /// SCO and ISO are recognised and carried raw (bytes after the H4 indicator); LE-only hosts don't use them.
    case sco([UInt8])
    case iso([UInt8])

    public var type: HCIPacketType {
        switch self {
        case .command: .command
        case .acl: .acl
        case .event: .event
        case .sco: .sco
        case .iso: .iso
        }
    }

    /// The packet without its H4 indicator (what btsnoop 1001 and pcap 187 carry).
    public var body: [UInt8] {
        var w = ByteWriter(capacity: 8 + payloadCount)
        switch self {
        case .command(let c):
            w.u16(c.opcode.rawValue)
            w.u8(UInt8(truncatingIfNeeded: c.parameters.count))
            w.append(c.parameters)
        case .acl(let a):
            w.u16(a.handle | UInt16(a.boundary.rawValue) << 12 | UInt16(a.broadcast) << 14)
            w.u16(UInt16(truncatingIfNeeded: a.data.count))
            w.append(a.data)
        case .event(let e):
            w.u8(e.code)
            w.u8(UInt8(truncatingIfNeeded: e.parameters.count))
            w.append(e.parameters)
        case .sco(let raw), .iso(let raw):
            w.append(raw)
        }
        return w.bytes
    }

    private var payloadCount: Int {
        switch self {
        case .command(let c): c.parameters.count
        case .acl(let a): a.data.count
        case .event(let e): e.parameters.count
        case .sco(let r), .iso(let r): r.count
        }
    }

    /// H4 framing: indicator byte followed by the packet.
    public var h4: [UInt8] { [type.rawValue] + body }

    /// Decodes a packet body (no indicator) of a known type. Checks the length fields against
    /// the bytes present: a lying length is an error, not a read past the end.
    public init(type: HCIPacketType, body: [UInt8]) throws(DecodeError) {
        var r = ByteReader(body)
        switch type {
        case .command:
            let opcode = try r.u16("opcode")
            let length = Int(try r.u8("parameterTotalLength"))
            guard r.remaining == length else {
                throw .invalid("command length field says \(length), \(r.remaining) octet(s) present")
            }
            self = .command(HCICommandPacket(opcode: HCIOpcode(rawValue: opcode), parameters: r.rest()))
        case .acl:
            let hf = try r.u16("handle")
            let length = Int(try r.u16("dataTotalLength"))
            guard r.remaining == length else {
                throw .invalid("ACL length field says \(length), \(r.remaining) octet(s) present")
            }
            // Two flag bits, four cases: the fallback is never taken.
            let boundary = PacketBoundary(rawValue: UInt8((hf >> 12) & 0x3)) ?? .continuing
            self = .acl(HCIACLPacket(handle: hf & 0x0fff, boundary: boundary, broadcast: UInt8(hf >> 14), data: r.rest()))
        case .event:
            let code = try r.u8("eventCode")
            let length = Int(try r.u8("parameterTotalLength"))
            guard r.remaining == length else {
                throw .invalid("event length field says \(length), \(r.remaining) octet(s) present")
            }
            self = .event(HCIEventPacket(code: code, parameters: r.rest()))
        case .sco:
            self = .sco(body)
        case .iso:
            self = .iso(body)
        }
    }

    /// Decodes H4 bytes (indicator + packet).
    public init(h4 bytes: [UInt8]) throws(DecodeError) {
        guard let first = bytes.first else { throw .truncated(field: "packet indicator", needed: 1, available: 0) }
        guard let type = HCIPacketType(rawValue: first) else {
            throw .invalid("unknown H4 packet indicator \(hexCode(first))")
        }
        try self.init(type: type, body: Array(bytes.dropFirst()))
    }
}
