import HCI

/// `dump` / `--trace` / JSON description: `opcode`, `name`, then the specification's
/// parameter names in lowerCamelCase (CLI.md).
extension ATTPDU: FieldDescribable {
    public var fields: [Field] {
        let op = opcode
        var f: [Field] = [.code("opcode", op.rawValue), .text("name", op.name ?? "Unknown")]
        switch self {
        case let .errorResponse(requestOpcode, handle, error):
            f.append(.code("requestOpcodeInError", requestOpcode.rawValue, note: requestOpcode.name))
            f.append(.int("handle", handle))
            f.append(.code("errorCode", error.rawValue, note: error.name))
        case let .exchangeMTURequest(mtu):
            f.append(.int("clientRxMtu", mtu))
        case let .exchangeMTUResponse(mtu):
            f.append(.int("serverRxMtu", mtu))
        case let .findInformationRequest(start, end):
            f.append(.int("startHandle", start)); f.append(.int("endHandle", end))
        case let .findInformationResponse(format, information):
            f.append(.int("format", format.rawValue, note: format == .uuid16 ? "16-bit UUIDs" : "128-bit UUIDs"))
            f.append(Field("informationData", .list(information.map {
                .object([.int("handle", $0.handle), .text("uuid", $0.uuid.description)])
            })))
        case let .findByTypeValueRequest(start, end, type, value):
            f.append(.int("startHandle", start)); f.append(.int("endHandle", end))
            f.append(.text("attributeType", BluetoothUUID(type).description))
            f.append(.bytes("attributeValue", value))
        case let .findByTypeValueResponse(list):
            f.append(Field("handlesInformationList", .list(list.map {
                .object([.int("foundAttributeHandle", $0.foundAttributeHandle), .int("groupEndHandle", $0.groupEndHandle)])
            })))
        case let .readByTypeRequest(start, end, type), let .readByGroupTypeRequest(start, end, type):
            f.append(.int("startHandle", start)); f.append(.int("endHandle", end))
            f.append(.text("type", type.description))
        case let .readByTypeResponse(list):
            f.append(.int("length", (list.first?.value.count ?? 0) + 2))
            f.append(Field("attributeDataList", .list(list.map {
                .object([.int("handle", $0.handle), .bytes("value", $0.value)])
            })))
        case let .readRequest(handle):
            f.append(.int("handle", handle))
        case let .readResponse(value), let .readBlobResponse(value):
            f.append(.bytes("value", value))
        case let .readBlobRequest(handle, offset):
            f.append(.int("handle", handle)); f.append(.int("valueOffset", offset))
        case let .readMultipleRequest(handles), let .readMultipleVariableRequest(handles):
            f.append(Field("setOfHandles", .list(handles.map { .int(Int($0)) })))
        case let .readMultipleResponse(values):
            f.append(.bytes("setOfValues", values))
        case let .readMultipleVariableResponse(tuples):
            f.append(Field("lengthValueTupleList", .list(tuples.map {
                .object([.int("valueLength", $0.length), .bytes("value", $0.value)])
            })))
        case let .readByGroupTypeResponse(list):
            f.append(.int("length", (list.first?.value.count ?? 0) + 4))
            f.append(Field("attributeDataList", .list(list.map {
                .object([.int("handle", $0.handle), .int("endGroupHandle", $0.endGroupHandle), .bytes("value", $0.value)])
            })))
        case let .writeRequest(handle, value), let .writeCommand(handle, value),
             let .handleValueNotification(handle, value), let .handleValueIndication(handle, value):
            f.append(.int("handle", handle)); f.append(.bytes("value", value))
        case let .signedWriteCommand(handle, value, signature):
            f.append(.int("handle", handle)); f.append(.bytes("value", value))
            f.append(.bytes("authenticationSignature", signature))
        case let .prepareWriteRequest(handle, offset, value), let .prepareWriteResponse(handle, offset, value):
            f.append(.int("handle", handle)); f.append(.int("valueOffset", offset)); f.append(.bytes("value", value))
        case let .executeWriteRequest(flags):
            f.append(.code("flags", flags.rawValue, note: flags.name))
        case .writeResponse, .executeWriteResponse, .handleValueConfirmation:
            break
        case let .multipleHandleValueNotification(list):
            f.append(Field("handleLengthValueTupleList", .list(list.map {
                .object([.int("handle", $0.handle), .int("valueLength", $0.value.count), .bytes("value", $0.value)])
            })))
        case let .unknown(_, parameters):
            f.append(.bytes("parameters", parameters))
        }
        return f
    }
}
