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

/// One entry of a Find By Type Value Response.
public struct ATTHandlesInformation: Sendable, Hashable {
    public var foundAttributeHandle: UInt16
    public var groupEndHandle: UInt16
    public init(foundAttributeHandle: UInt16, groupEndHandle: UInt16) {
        self.foundAttributeHandle = foundAttributeHandle
        self.groupEndHandle = groupEndHandle
    }
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

/// Execute Write Request flags.
public struct ATTExecuteWriteFlags: RawRepresentable, Hashable, Sendable {
    public var rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// 0x00: cancel all prepared writes.
    public static let cancel = ATTExecuteWriteFlags(rawValue: 0x00)
    /// 0x01: immediately write all pending prepared values.
    public static let write = ATTExecuteWriteFlags(rawValue: 0x01)
    public var name: String {
        switch rawValue {
        case 0x00: return "Cancel all prepared writes"
        case 0x01: return "Immediately write all pending prepared values"
        default: return "Reserved"
        }
    }
}

/// Every ATT PDU (Core Vol 3 Part F 3.4). `decode` and `bytes` are inverse for every PDU that
/// decodes, except that a 128-bit alias of a 16-bit UUID in a request's type field re-encodes
/// in its 16-bit form.
public enum ATTPDU: Sendable, Hashable {
    case errorResponse(requestOpcode: ATTOpcode, handle: UInt16, error: ATTErrorCode)
    case exchangeMTURequest(clientRxMTU: UInt16)
    case exchangeMTUResponse(serverRxMTU: UInt16)
    case findInformationRequest(startHandle: UInt16, endHandle: UInt16)
    /// UUIDs are encoded in `format`'s width (a 16-bit UUID in format 2 in its 128-bit form).
    case findInformationResponse(format: ATTUUIDFormat, information: [ATTHandleUUID])
    case findByTypeValueRequest(startHandle: UInt16, endHandle: UInt16, attributeType: UInt16, attributeValue: [UInt8])
    case findByTypeValueResponse([ATTHandlesInformation])
    /// `type` is a 16-bit or 128-bit UUID (a 32-bit one is sent in its 128-bit form).
    case readByTypeRequest(startHandle: UInt16, endHandle: UInt16, type: BluetoothUUID)
    /// All values have the same length (the encoder uses the first one's).
    case readByTypeResponse([ATTHandleValue])
    case readRequest(handle: UInt16)
    case readResponse(value: [UInt8])
    case readBlobRequest(handle: UInt16, offset: UInt16)
    case readBlobResponse(value: [UInt8])
    case readMultipleRequest(handles: [UInt16])
    case readMultipleResponse(values: [UInt8])
    case readMultipleVariableRequest(handles: [UInt16])
    /// The last tuple's value may be shorter than its length (cut at ATT_MTU − 1).
    case readMultipleVariableResponse([ATTLengthValue])
    case readByGroupTypeRequest(startHandle: UInt16, endHandle: UInt16, type: BluetoothUUID)
    /// All values have the same length (the encoder uses the first one's).
    case readByGroupTypeResponse([ATTGroupData])
    case writeRequest(handle: UInt16, value: [UInt8])
    case writeResponse
    case writeCommand(handle: UInt16, value: [UInt8])
    /// `signature` is the 12-octet Authentication Signature.
    case signedWriteCommand(handle: UInt16, value: [UInt8], signature: [UInt8])
    case prepareWriteRequest(handle: UInt16, offset: UInt16, value: [UInt8])
    case prepareWriteResponse(handle: UInt16, offset: UInt16, value: [UInt8])
    case executeWriteRequest(flags: ATTExecuteWriteFlags)
    case executeWriteResponse
    case handleValueNotification(handle: UInt16, value: [UInt8])
    case handleValueIndication(handle: UInt16, value: [UInt8])
    case handleValueConfirmation
    case multipleHandleValueNotification([ATTHandleValue])
    /// An opcode this codec doesn't know; `parameters` are the octets after the opcode.
    case unknown(opcode: ATTOpcode, parameters: [UInt8])

    public static let signatureLength = 12

    public var opcode: ATTOpcode {
        switch self {
        case .errorResponse: return .errorResponse
        case .exchangeMTURequest: return .exchangeMTURequest
        case .exchangeMTUResponse: return .exchangeMTUResponse
        case .findInformationRequest: return .findInformationRequest
        case .findInformationResponse: return .findInformationResponse
        case .findByTypeValueRequest: return .findByTypeValueRequest
        case .findByTypeValueResponse: return .findByTypeValueResponse
        case .readByTypeRequest: return .readByTypeRequest
        case .readByTypeResponse: return .readByTypeResponse
        case .readRequest: return .readRequest
        case .readResponse: return .readResponse
        case .readBlobRequest: return .readBlobRequest
        case .readBlobResponse: return .readBlobResponse
        case .readMultipleRequest: return .readMultipleRequest
        case .readMultipleResponse: return .readMultipleResponse
        case .readMultipleVariableRequest: return .readMultipleVariableRequest
        case .readMultipleVariableResponse: return .readMultipleVariableResponse
        case .readByGroupTypeRequest: return .readByGroupTypeRequest
        case .readByGroupTypeResponse: return .readByGroupTypeResponse
        case .writeRequest: return .writeRequest
        case .writeResponse: return .writeResponse
        case .writeCommand: return .writeCommand
        case .signedWriteCommand: return .signedWriteCommand
        case .prepareWriteRequest: return .prepareWriteRequest
        case .prepareWriteResponse: return .prepareWriteResponse
        case .executeWriteRequest: return .executeWriteRequest
        case .executeWriteResponse: return .executeWriteResponse
        case .handleValueNotification: return .handleValueNotification
        case .handleValueIndication: return .handleValueIndication
        case .handleValueConfirmation: return .handleValueConfirmation
        case .multipleHandleValueNotification: return .multipleHandleValueNotification
        case .unknown(let op, _): return op
        }
    }
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
    /// Decodes one ATT PDU (opcode + parameters). An unknown opcode decodes to `.unknown`;
    /// a known opcode whose parameters are truncated, too long or inconsistent throws.
    public static func decode(_ bytes: [UInt8]) throws(DecodeError) -> ATTPDU {
        var r = ByteReader(bytes)
        let op = ATTOpcode(try r.u8("opcode"))
        let pdu: ATTPDU
        switch op.rawValue {
        case 0x01:
            pdu = .errorResponse(requestOpcode: ATTOpcode(try r.u8("requestOpcodeInError")),
                                 handle: try r.u16("attributeHandleInError"),
                                 error: ATTErrorCode(try r.u8("errorCode")))
        case 0x02: pdu = .exchangeMTURequest(clientRxMTU: try r.u16("clientRxMtu"))
        case 0x03: pdu = .exchangeMTUResponse(serverRxMTU: try r.u16("serverRxMtu"))
        case 0x04:
            pdu = .findInformationRequest(startHandle: try r.u16("startHandle"), endHandle: try r.u16("endHandle"))
        case 0x05:
            let rawFormat = try r.u8("format")
            guard let format = ATTUUIDFormat(rawValue: rawFormat) else {
                throw .invalid("Find Information Response: invalid format \(hexCode(rawFormat))")
            }
            let width = 2 + format.uuidLength
            try checkList(r.remaining, element: width, pdu: "Find Information Response")
            var list: [ATTHandleUUID] = []
            list.reserveCapacity(r.remaining / width)
            while !r.isAtEnd {
                let handle = try r.u16("handle")
                let uuid = try readUUID(&r, length: format.uuidLength)
                list.append(ATTHandleUUID(handle: handle, uuid: uuid))
            }
            pdu = .findInformationResponse(format: format, information: list)
        case 0x06:
            pdu = .findByTypeValueRequest(startHandle: try r.u16("startHandle"), endHandle: try r.u16("endHandle"),
                                          attributeType: try r.u16("attributeType"), attributeValue: r.rest())
        case 0x07:
            try checkList(r.remaining, element: 4, pdu: "Find By Type Value Response")
            var list: [ATTHandlesInformation] = []
            list.reserveCapacity(r.remaining / 4)
            while !r.isAtEnd {
                list.append(ATTHandlesInformation(foundAttributeHandle: try r.u16("foundAttributeHandle"),
                                                  groupEndHandle: try r.u16("groupEndHandle")))
            }
            pdu = .findByTypeValueResponse(list)
        case 0x08, 0x10:
            let start = try r.u16("startHandle")
            let end = try r.u16("endHandle")
            let uuid = try readUUID(&r, length: r.remaining)
            pdu = op.rawValue == 0x08 ? .readByTypeRequest(startHandle: start, endHandle: end, type: uuid)
                                      : .readByGroupTypeRequest(startHandle: start, endHandle: end, type: uuid)
        case 0x09:
            let length = Int(try r.u8("length"))
            guard length >= 2 else { throw .invalid("Read By Type Response: length \(length) < 2") }
            try checkList(r.remaining, element: length, pdu: "Read By Type Response")
            var list: [ATTHandleValue] = []
            list.reserveCapacity(r.remaining / length)
            while !r.isAtEnd {
                list.append(ATTHandleValue(handle: try r.u16("handle"), value: try r.bytes(length - 2, "value")))
            }
            pdu = .readByTypeResponse(list)
        case 0x0A: pdu = .readRequest(handle: try r.u16("handle"))
        case 0x0B: pdu = .readResponse(value: r.rest())
        case 0x0C: pdu = .readBlobRequest(handle: try r.u16("handle"), offset: try r.u16("valueOffset"))
        case 0x0D: pdu = .readBlobResponse(value: r.rest())
        case 0x0E, 0x20:
            let handles = try readHandles(&r, pdu: op.rawValue == 0x0E ? "Read Multiple Request" : "Read Multiple Variable Request")
            pdu = op.rawValue == 0x0E ? .readMultipleRequest(handles: handles) : .readMultipleVariableRequest(handles: handles)
        case 0x0F: pdu = .readMultipleResponse(values: r.rest())
        case 0x21:
            var tuples: [ATTLengthValue] = []
            while !r.isAtEnd {
                let length = try r.u16("valueLength")
                // The last value may be cut to fit ATT_MTU (Core Vol 3 Part F 3.4.4.12).
                tuples.append(ATTLengthValue(length: length, value: try r.bytes(Swift.min(Int(length), r.remaining), "value")))
            }
            pdu = .readMultipleVariableResponse(tuples)
        case 0x11:
            let length = Int(try r.u8("length"))
            guard length >= 4 else { throw .invalid("Read By Group Type Response: length \(length) < 4") }
            try checkList(r.remaining, element: length, pdu: "Read By Group Type Response")
            var list: [ATTGroupData] = []
            list.reserveCapacity(r.remaining / length)
            while !r.isAtEnd {
                list.append(ATTGroupData(handle: try r.u16("handle"), endGroupHandle: try r.u16("endGroupHandle"),
                                         value: try r.bytes(length - 4, "value")))
            }
            pdu = .readByGroupTypeResponse(list)
        case 0x12: pdu = .writeRequest(handle: try r.u16("handle"), value: r.rest())
        case 0x13: pdu = .writeResponse
        case 0x52: pdu = .writeCommand(handle: try r.u16("handle"), value: r.rest())
        case 0xD2:
            let handle = try r.u16("handle")
            let valueLength = r.remaining - signatureLength
            guard valueLength >= 0 else {
                throw .truncated(field: "authenticationSignature", needed: signatureLength, available: r.remaining)
            }
            pdu = .signedWriteCommand(handle: handle, value: try r.bytes(valueLength, "value"),
                                      signature: try r.bytes(signatureLength, "authenticationSignature"))
        case 0x16, 0x17:
            let handle = try r.u16("handle")
            let offset = try r.u16("valueOffset")
            let value = r.rest()
            pdu = op.rawValue == 0x16 ? .prepareWriteRequest(handle: handle, offset: offset, value: value)
                                      : .prepareWriteResponse(handle: handle, offset: offset, value: value)
        case 0x18: pdu = .executeWriteRequest(flags: ATTExecuteWriteFlags(rawValue: try r.u8("flags")))
        case 0x19: pdu = .executeWriteResponse
        case 0x1B: pdu = .handleValueNotification(handle: try r.u16("handle"), value: r.rest())
        case 0x1D: pdu = .handleValueIndication(handle: try r.u16("handle"), value: r.rest())
        case 0x1E: pdu = .handleValueConfirmation
        case 0x23:
            var list: [ATTHandleValue] = []
            while !r.isAtEnd {
                let handle = try r.u16("handle")
                let length = Int(try r.u16("valueLength"))
                list.append(ATTHandleValue(handle: handle, value: try r.bytes(length, "value")))
            }
            guard list.count >= 2 else {
                throw .invalid("Multiple Handle Value Notification: \(list.count) tuple(s), needs two or more")
            }
            pdu = .multipleHandleValueNotification(list)
        default:
            return .unknown(opcode: op, parameters: r.rest())
        }
        try r.expectEnd(op.name ?? "ATT PDU")
        return pdu
    }

    /// Decodes without throwing, telling a malformed PDU of a known opcode apart.
    public static func decodeResult(_ bytes: [UInt8]) -> ATTDecodeResult {
        do {
            return .pdu(try decode(bytes))
        } catch {
            return .malformed(opcode: bytes.first.map(ATTOpcode.init(rawValue:)), error: error)
        }
    }

    /// `decodeResult` for a PDU received on a bearer whose ATT_MTU is `mtu`. ATT_MTU is the
    /// largest PDU either side may send (Core v5.4 Vol 3 Part F 3.2.8), so a request or command
    /// longer than it is malformed: a request is answered Invalid PDU (Table 3.4: "The
    /// attribute PDU was invalid"), a command dropped, and neither is acted on.
    /// A PDU shorter than its opcode's minimum length (the table by opcode, Tools/pdl/att.pdl)
    /// is refused the same way before any field is read, like Zephyr's `handlers[]`.
    public static func decodeResult(_ bytes: [UInt8], mtu: Int) -> ATTDecodeResult {
        guard let first = bytes.first else { return decodeResult(bytes) }
        let op = ATTOpcode(first)
        let info = op.info
        if bytes.count > mtu, op.isRequest || (op.isCommand && info != nil) {
            return .malformed(opcode: op, error: .invalid("\(op): \(bytes.count) octets exceed ATT_MTU \(mtu)"))
        }
        if let info, bytes.count < info.minimumLength {
            return .malformed(opcode: op, error: .truncated(field: "\(info.name) parameters",
                                                            needed: info.minimumLength - 1, available: bytes.count - 1))
        }
        return decodeResult(bytes)
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

    static func readHandles(_ r: inout ByteReader, pdu: StaticString) throws(DecodeError) -> [UInt16] {
        guard r.remaining >= 4 else { throw .truncated(field: "setOfHandles", needed: 4, available: r.remaining) }
        guard r.remaining % 2 == 0 else { throw .invalid("\(pdu): odd length of Set Of Handles") }
        var handles: [UInt16] = []
        handles.reserveCapacity(r.remaining / 2)
        while !r.isAtEnd { handles.append(try r.u16("handle")) }
        return handles
    }
}

// MARK: - Encoding

extension ATTPDU {
    /// The PDU's octets: opcode followed by its parameters.
    public var bytes: [UInt8] {
        var w = ByteWriter(capacity: encodedCapacity)
        w.u8(opcode.rawValue)
        switch self {
        case let .errorResponse(requestOpcode, handle, error):
            w.u8(requestOpcode.rawValue); w.u16(handle); w.u8(error.rawValue)
        case let .exchangeMTURequest(mtu), let .exchangeMTUResponse(mtu):
            w.u16(mtu)
        case let .findInformationRequest(start, end):
            w.u16(start); w.u16(end)
        case let .findInformationResponse(format, information):
            w.u8(format.rawValue)
            for item in information {
                w.u16(item.handle)
                if format == .uuid16, let u = item.uuid.uuid16 { w.u16(u) } else { w.append(item.uuid.uuid128.reversed()) }
            }
        case let .findByTypeValueRequest(start, end, type, value):
            w.u16(start); w.u16(end); w.u16(type); w.append(value)
        case let .findByTypeValueResponse(list):
            for item in list { w.u16(item.foundAttributeHandle); w.u16(item.groupEndHandle) }
        case let .readByTypeRequest(start, end, type), let .readByGroupTypeRequest(start, end, type):
            w.u16(start); w.u16(end); w.append(type.littleEndianFor16Or128)
        case let .readByTypeResponse(list):
            let valueLength = list.first?.value.count ?? 0
            w.u8(UInt8(truncatingIfNeeded: valueLength + 2))
            for item in list { w.u16(item.handle); w.append(item.value) }
        case let .readRequest(handle):
            w.u16(handle)
        case let .readResponse(value), let .readBlobResponse(value), let .readMultipleResponse(value):
            w.append(value)
        case let .readBlobRequest(handle, offset):
            w.u16(handle); w.u16(offset)
        case let .readMultipleRequest(handles), let .readMultipleVariableRequest(handles):
            for h in handles { w.u16(h) }
        case let .readMultipleVariableResponse(tuples):
            for t in tuples { w.u16(t.length); w.append(t.value) }
        case let .readByGroupTypeResponse(list):
            let valueLength = list.first?.value.count ?? 0
            w.u8(UInt8(truncatingIfNeeded: valueLength + 4))
            for item in list { w.u16(item.handle); w.u16(item.endGroupHandle); w.append(item.value) }
        case let .writeRequest(handle, value), let .writeCommand(handle, value),
             let .handleValueNotification(handle, value), let .handleValueIndication(handle, value):
            w.u16(handle); w.append(value)
        case let .signedWriteCommand(handle, value, signature):
            w.u16(handle); w.append(value); w.append(signature)
        case let .prepareWriteRequest(handle, offset, value), let .prepareWriteResponse(handle, offset, value):
            w.u16(handle); w.u16(offset); w.append(value)
        case let .executeWriteRequest(flags):
            w.u8(flags.rawValue)
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation:
            break
        case let .multipleHandleValueNotification(list):
            for item in list { w.u16(item.handle); w.u16(UInt16(truncatingIfNeeded: item.value.count)); w.append(item.value) }
        case let .unknown(_, parameters):
            w.append(parameters)
        }
        return w.bytes
    }

    /// Octets `bytes` will need (exact for the common PDUs), so encoding allocates once.
    var encodedCapacity: Int {
        switch self {
        case let .readResponse(v), let .readBlobResponse(v), let .readMultipleResponse(v): return 1 + v.count
        case let .writeRequest(_, v), let .writeCommand(_, v),
             let .handleValueNotification(_, v), let .handleValueIndication(_, v): return 3 + v.count
        case let .prepareWriteRequest(_, _, v), let .prepareWriteResponse(_, _, v): return 5 + v.count
        case let .signedWriteCommand(_, v, s): return 3 + v.count + s.count
        case let .unknown(_, p): return 1 + p.count
        default: return 32
        }
    }
}
