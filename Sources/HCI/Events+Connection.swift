// Events about links. Core Vol 4 Part E 7.7.

/// Disconnection Complete (0x05).
public struct DisconnectionComplete: HCIEventParameters, Equatable {
    public static let eventCode: UInt8 = 0x05
    public static let name = "Disconnection Complete"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    public var reason: HCIStatus

    public init(status: HCIStatus = .success, connectionHandle: UInt16, reason: HCIStatus) {
        self.status = status
        self.connectionHandle = connectionHandle
        self.reason = reason
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status"))
        connectionHandle = try r.u16("connectionHandle") & 0x0fff
        reason = HCIStatus(try r.u8("reason"))
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(status.rawValue); w.u16(connectionHandle); w.u8(reason.rawValue)
    }

    public var fields: [Field] {
        [.code("status", status.rawValue, note: status.name),
         .int("connectionHandle", connectionHandle),
         .code("reason", reason.rawValue, note: reason.name)]
    }
}

/// Number Of Completed Packets (0x13): ACL buffers the controller freed, per handle.
public struct NumberOfCompletedPackets: HCIEventParameters, Equatable {
    public static let eventCode: UInt8 = 0x13
    public static let name = "Number Of Completed Packets"

    public struct Entry: Sendable, Equatable {
        public var connectionHandle: UInt16
        public var numCompletedPackets: UInt16
        public init(connectionHandle: UInt16, numCompletedPackets: UInt16) {
            self.connectionHandle = connectionHandle
            self.numCompletedPackets = numCompletedPackets
        }
    }

    public var entries: [Entry]
    public init(entries: [Entry]) { self.entries = entries }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        let n = Int(try r.u8("numHandles"))
        // Each handle is followed by its count, as controllers send it (BlueZ and Bumble read it so).
        try r.need(n * 4, "connectionHandle/numCompletedPackets")
        entries = []
        entries.reserveCapacity(n)
        for _ in 0..<n {
            entries.append(Entry(connectionHandle: try r.u16("connectionHandle") & 0x0fff,
                                 numCompletedPackets: try r.u16("numCompletedPackets")))
        }
    }

    public func encodeParameters(into w: inout ByteWriter) {
        encodeList(entries, into: &w) { e, w in w.u16(e.connectionHandle); w.u16(e.numCompletedPackets) }
    }

    public var fields: [Field] {
        [.int("numHandles", entries.count),
         Field("handles", .list(entries.map {
             .object([.int("connectionHandle", $0.connectionHandle), .int("numCompletedPackets", $0.numCompletedPackets)])
         }))]
    }
}

/// LE Connection Complete (LE Meta subevent 0x01).
public struct LEConnectionComplete: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x01
    public static let name = "LE Connection Complete"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    /// 0x00 central, 0x01 peripheral.
    public var role: UInt8
    public var peerAddressType: AddressType
    public var peerAddress: BDAddress
    public var connectionInterval: UInt16
    public var peripheralLatency: UInt16
    public var supervisionTimeout: UInt16
    public var centralClockAccuracy: UInt8

    public init(status: HCIStatus, connectionHandle: UInt16, role: UInt8, peerAddressType: AddressType,
                peerAddress: BDAddress, connectionInterval: UInt16, peripheralLatency: UInt16,
                supervisionTimeout: UInt16, centralClockAccuracy: UInt8 = 0) {
        self.status = status
        self.connectionHandle = connectionHandle
        self.role = role
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.connectionInterval = connectionInterval
        self.peripheralLatency = peripheralLatency
        self.supervisionTimeout = supervisionTimeout
        self.centralClockAccuracy = centralClockAccuracy
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status"))
        connectionHandle = try r.u16("connectionHandle") & 0x0fff
        role = try r.u8("role")
        peerAddressType = try AddressType.decode(try r.u8("peerAddressType"))
        peerAddress = try r.address("peerAddress")
        connectionInterval = try r.u16("connectionInterval")
        peripheralLatency = try r.u16("peripheralLatency")
        supervisionTimeout = try r.u16("supervisionTimeout")
        centralClockAccuracy = try r.u8("centralClockAccuracy")
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(status.rawValue); w.u16(connectionHandle); w.u8(role); w.u8(peerAddressType.rawValue)
        w.address(peerAddress); w.u16(connectionInterval); w.u16(peripheralLatency)
        w.u16(supervisionTimeout); w.u8(centralClockAccuracy)
    }

    public var fields: [Field] {
        [.code("status", status.rawValue, note: status.name),
         .int("connectionHandle", connectionHandle),
         .code("role", role, note: roleNote(role)),
         .code("peerAddressType", peerAddressType.rawValue, note: peerAddressType.description),
         .address("peerAddress", peerAddress, type: peerAddressType),
         .interval("connectionInterval", connectionInterval, unitMicroseconds: 1250),
         .int("peripheralLatency", peripheralLatency),
         .interval("supervisionTimeout", supervisionTimeout, unitMicroseconds: 10_000),
         .code("centralClockAccuracy", centralClockAccuracy)]
    }
}

extension AddressType {
    /// Decodes an address type octet; values the spec reserves are malformed input.
    public static func decode(_ v: UInt8) throws(DecodeError) -> AddressType {
        guard let t = AddressType(rawValue: v) else { throw .invalid("reserved address type \(hexCode(v))") }
        return t
    }
}
