import HCI

/// Find Information Response format (Core Vol 3 Part F 3.4.3.2).
public enum ATTUUIDFormat: UInt8, Sendable, Hashable {
    /// Handle(s) and 16-bit Bluetooth UUID(s).
    case uuid16 = 0x01
    /// Handle(s) and 128-bit UUID(s).
    case uuid128 = 0x02

    public var uuidLength: Int { self == .uuid16 ? 2 : 16 }
}

/// One entry of a Find Information Response.
public struct ATTHandleUUID: Sendable, Hashable {
    public var handle: UInt16
    public var uuid: BluetoothUUID
    public init(handle: UInt16, uuid: BluetoothUUID) { self.handle = handle; self.uuid = uuid }
}

/// A list element of fixed layout declared as a `record` in Tools/pdl/att.pdl (its struct and
/// codec are generated).
public protocol ATTRecord {
    static var encodedSize: Int { get }
    init(from r: inout ByteReader) throws(DecodeError)
    func encode(into w: inout ByteWriter)
    var fields: [Field] { get }
}

/// A handle with a value: Read By Type Response data, Multiple Handle Value Notification tuples.
public struct ATTHandleValue: Sendable, Hashable {
    public var handle: UInt16
    public var value: [UInt8]
    public init(handle: UInt16, value: [UInt8]) { self.handle = handle; self.value = value }
}

/// One Length Value Tuple of a Read Multiple Variable Response (Core v5.4 Vol 3 Part F
/// 3.4.4.12): the attribute value's whole length and its octets. Only the last tuple of a
/// response may carry fewer octets than `length` (the list is cut at ATT_MTU − 1 octets).
public struct ATTLengthValue: Sendable, Hashable {
    /// The Value Length field: the length of the whole attribute value.
    public var length: UInt16
    public var value: [UInt8]
    public init(length: UInt16, value: [UInt8]) { self.length = length; self.value = value }
    /// A whole value (its length is its count).
    public init(_ value: [UInt8]) { self.init(length: UInt16(truncatingIfNeeded: value.count), value: value) }
    /// The value was cut: the client reads the rest with Read Blob.
    public var isTruncated: Bool { value.count < Int(length) }
}

/// One entry of a Read By Group Type Response.
public struct ATTGroupData: Sendable, Hashable {
    public var handle: UInt16
    public var endGroupHandle: UInt16
    public var value: [UInt8]
    public init(handle: UInt16, endGroupHandle: UInt16, value: [UInt8]) {
        self.handle = handle
        self.endGroupHandle = endGroupHandle
        self.value = value
    }
}

// ATTExecuteWriteFlags: Tools/pdl/att.pdl (Generated/ATT.swift).

extension ATTPDU {
    public static let signatureLength = 12
}

// MARK: - Decoding

/// What a runtime does with received ATT bytes: a decoded PDU, or a PDU it must refuse.
public enum ATTDecodeResult: Sendable, Equatable {
    case pdu(ATTPDU)
    /// A known opcode with a malformed body (a server answers a request with Invalid PDU), or
    /// no opcode at all (`opcode` nil: empty PDU, dropped).
    case malformed(opcode: ATTOpcode?, error: DecodeError)
}

extension ATTPDU {
    /// Decodes without throwing, telling a malformed PDU of a known opcode apart.
    public static func decodeResult(_ bytes: [UInt8]) -> ATTDecodeResult {
        decodeResult(from: ByteReader(bytes))
    }

    /// `decodeResult` of the octets `reader` has left (a PDU in place in its frame).
    public static func decodeResult(from reader: ByteReader) -> ATTDecodeResult {
        do {
            return .pdu(try decode(from: reader))
        } catch {
            return .malformed(opcode: reader.isAtEnd ? nil : ATTOpcode(reader.bytes[reader.offset]), error: error)
        }
    }

    /// `decodeResult` for a PDU received on a bearer whose ATT_MTU is `mtu`. ATT_MTU is the
    /// largest PDU either side may send (Core v5.4 Vol 3 Part F 3.2.8), so a request or command
    /// longer than it is malformed: a request is answered Invalid PDU (Table 3.4: "The
    /// attribute PDU was invalid"), a command dropped, and neither is acted on.
    /// A PDU shorter than its opcode's minimum length (the table by opcode, Tools/pdl/att.pdl)
    /// is refused the same way before any field is read, like Zephyr's `handlers[]`.
    public static func decodeResult(_ bytes: [UInt8], mtu: Int) -> ATTDecodeResult {
        decodeResult(from: ByteReader(bytes), mtu: mtu)
    }

    /// `decodeResult(_:mtu:)` of the octets `reader` has left (a PDU in place in its frame).
    public static func decodeResult(from reader: ByteReader, mtu: Int) -> ATTDecodeResult {
        guard !reader.isAtEnd else { return decodeResult(from: reader) }
        let op = ATTOpcode(reader.bytes[reader.offset])
        let info = op.info, count = reader.remaining
        if count > mtu, op.isRequest || (op.isCommand && info != nil) {
            return .malformed(opcode: op, error: .invalid("\(op): \(count) octets exceed ATT_MTU \(mtu)"))
        }
        if let info, count < info.minimumLength {
            return .malformed(opcode: op, error: .truncated(field: "\(info.name) parameters",
                                                            needed: info.minimumLength - 1, available: count - 1))
        }
        return decodeResult(from: reader)
    }

    /// What a server sends back for bytes it could not decode or does not support, per Core
    /// Vol 3 Part F 3.4.1.1 / 3.3: a malformed request → Invalid PDU; an unknown request →
    /// Request Not Supported; commands, responses, notifications, empty PDUs → nil (ignored).
    public static func serverRejection(for result: ATTDecodeResult) -> ATTPDU? {
        switch result {
        case .malformed(let op?, _) where op.isRequest:
            return .errorResponse(requestOpcode: op, handle: 0, error: .invalidPDU)
        case .pdu(.unknown(let op, _)) where !op.isCommand:
            return .errorResponse(requestOpcode: op, handle: 0, error: .requestNotSupported)
        default:
            return nil
        }
    }

    @inline(__always)
    static func checkList(_ remaining: Int, element: Int, pdu: StaticString) throws(DecodeError) {
        guard remaining > 0 else { throw .truncated(field: "\(pdu) list", needed: element, available: 0) }
        guard remaining % element == 0 else {
            throw .invalid("\(pdu): \(remaining) octet(s) of list is not a multiple of \(element)")
        }
    }

    static func readUUID(_ r: inout ByteReader, length: Int) throws(DecodeError) -> BluetoothUUID {
        switch length {
        case 2:
            return BluetoothUUID(try r.u16("uuid"))
        case 16:
            let b = try r.bytes(16, "uuid")
            guard let u = BluetoothUUID(littleEndian: b) else { throw .invalid("bad UUID") }
            return u
        case 0, 1:
            throw .truncated(field: "uuid", needed: 2, available: length)
        default:
            throw .invalid("UUID of \(length) octets (must be 2 or 16)")
        }
    }

    /// One record or more, to the end of the PDU.
    static func readRecords<Record: ATTRecord>(_ r: inout ByteReader, pdu: StaticString) throws(DecodeError) -> [Record] {
        try checkList(r.remaining, element: Record.encodedSize, pdu: pdu)
        var list: [Record] = []
        list.reserveCapacity(r.remaining / Record.encodedSize)
        while !r.isAtEnd { list.append(try Record(from: &r)) }
        return list
    }

    static func readHandles(_ r: inout ByteReader, pdu: StaticString) throws(DecodeError) -> [UInt16] {
        guard r.remaining >= 4 else { throw .truncated(field: "setOfHandles", needed: 4, available: r.remaining) }
        guard r.remaining % 2 == 0 else { throw .invalid("\(pdu): odd length of Set Of Handles") }
        var handles: [UInt16] = []
        handles.reserveCapacity(r.remaining / 2)
        while !r.isAtEnd { handles.append(try r.u16("handle")) }
        return handles
    }
}
