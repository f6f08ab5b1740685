// Events about links. Core Vol 4 Part E 7.7.

/// Number Of Completed Packets (0x13): ACL buffers the controller freed, per handle.
public struct NumberOfCompletedPackets: HCIEventParameters, Equatable {

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
        // Each handle is followed by its count, as controllers send it (BlueZ and Bumble read it so).
        entries = try decodeList(&r, count: "numHandles", minimumSize: 4, "connectionHandle/numCompletedPackets") { r throws(DecodeError) in
            Entry(connectionHandle: try r.u16("connectionHandle") & 0x0fff, numCompletedPackets: try r.u16("numCompletedPackets"))
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

extension AddressType {
    /// Decodes an address type octet; values the spec reserves are malformed input.
    public static func decode(_ v: UInt8) throws(DecodeError) -> AddressType {
        guard let t = AddressType(rawValue: v) else { throw .invalid("reserved address type \(hexCode(v))") }
        return t
    }
}
