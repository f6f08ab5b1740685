import HCI

// The ATT PDUs whose parameters are a list the description format does not express, called by
// the generated codec (Generated/ATT.swift, `handwritten` in Tools/pdl/att.pdl): the element
// layout is set by the PDU itself (a format octet, a length octet, a length per element), or
// the last element may be cut at ATT_MTU. Each has its decoder, encoder, size and fields here.

extension ATTPDU {
    // Find Information Response (Core v5.4 Vol 3 Part F 3.4.3.2): the format octet sets the
    // UUID width of every handle/UUID pair.
    static func decodeFindInformationResponse(_ r: inout ByteReader) throws(DecodeError) -> ATTPDU {
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
            list.append(ATTHandleUUID(handle: handle, uuid: try readUUID(&r, length: format.uuidLength)))
        }
        return .findInformationResponse(format: format, information: list)
    }

    func encodeFindInformationResponse(_ format: ATTUUIDFormat, _ information: [ATTHandleUUID], into w: inout ByteWriter) {
        w.u8(format.rawValue)
        for item in information {
            w.u16(item.handle)
            if format == .uuid16, let u = item.uuid.uuid16 { w.u16(u) } else { w.append(item.uuid.uuid128.reversed()) }
        }
    }

    func findInformationResponseSize(_ format: ATTUUIDFormat, _ information: [ATTHandleUUID]) -> Int {
        1 + information.count * (2 + format.uuidLength)
    }

    func findInformationResponseFields(_ format: ATTUUIDFormat, _ information: [ATTHandleUUID], into f: inout [Field]) {
        f.append(.int("format", format.rawValue, note: format == .uuid16 ? "16-bit UUIDs" : "128-bit UUIDs"))
        f.append(Field("informationData", .list(information.map {
            .object([.int("handle", $0.handle), .text("uuid", $0.uuid.description)])
        })))
    }

    // Read By Type Response (3.4.4.2) and Read By Group Type Response (3.4.4.10): the length
    // octet sets the size of every entry (handle[, end group handle] and value).
    static func decodeReadByTypeResponse(_ r: inout ByteReader) throws(DecodeError) -> ATTPDU {
        .readByTypeResponse(try readUniformList(&r, header: 2, pdu: "Read By Type Response") { r, valueLength throws(DecodeError) in
            ATTHandleValue(handle: try r.u16("handle"), value: try r.bytes(valueLength, "value"))
        })
    }

    /// A list whose entries all take the length octet's size: `header` octets of handles, then a value.
    static func readUniformList<Entry>(_ r: inout ByteReader, header: Int, pdu: StaticString,
                                       _ entry: (inout ByteReader, Int) throws(DecodeError) -> Entry) throws(DecodeError) -> [Entry] {
        let length = Int(try r.u8("length"))
        guard length >= header else { throw .invalid("\(pdu): length \(length) < \(header)") }
        try checkList(r.remaining, element: length, pdu: pdu)
        var list: [Entry] = []
        list.reserveCapacity(r.remaining / length)
        while !r.isAtEnd { list.append(try entry(&r, length - header)) }
        return list
    }

    func encodeReadByTypeResponse(_ list: [ATTHandleValue], into w: inout ByteWriter) {
        w.u8(UInt8(truncatingIfNeeded: (list.first?.value.count ?? 0) + 2))
        for item in list { w.u16(item.handle); w.append(item.value) }
    }

    func readByTypeResponseSize(_ list: [ATTHandleValue]) -> Int {
        1 + list.reduce(0) { $0 + 2 + $1.value.count }
    }

    func readByTypeResponseFields(_ list: [ATTHandleValue], into f: inout [Field]) {
        f.append(.int("length", (list.first?.value.count ?? 0) + 2))
        f.append(Field("attributeDataList", .list(list.map { .object([.int("handle", $0.handle), .bytes("value", $0.value)]) })))
    }

    static func decodeReadByGroupTypeResponse(_ r: inout ByteReader) throws(DecodeError) -> ATTPDU {
        .readByGroupTypeResponse(try readUniformList(&r, header: 4, pdu: "Read By Group Type Response") { r, valueLength throws(DecodeError) in
            ATTGroupData(handle: try r.u16("handle"), endGroupHandle: try r.u16("endGroupHandle"),
                         value: try r.bytes(valueLength, "value"))
        })
    }

    func encodeReadByGroupTypeResponse(_ list: [ATTGroupData], into w: inout ByteWriter) {
        w.u8(UInt8(truncatingIfNeeded: (list.first?.value.count ?? 0) + 4))
        for item in list { w.u16(item.handle); w.u16(item.endGroupHandle); w.append(item.value) }
    }

    func readByGroupTypeResponseSize(_ list: [ATTGroupData]) -> Int {
        1 + list.reduce(0) { $0 + 4 + $1.value.count }
    }

    func readByGroupTypeResponseFields(_ list: [ATTGroupData], into f: inout [Field]) {
        f.append(.int("length", (list.first?.value.count ?? 0) + 4))
        f.append(Field("attributeDataList", .list(list.map {
            .object([.int("handle", $0.handle), .int("endGroupHandle", $0.endGroupHandle), .bytes("value", $0.value)])
        })))
    }

    // Read Multiple Variable Response (3.4.4.12): Length Value Tuples, the last of which may be
    // cut at ATT_MTU − 1 while its length still gives the whole value's.
    static func decodeReadMultipleVariableResponse(_ r: inout ByteReader) throws(DecodeError) -> ATTPDU {
        var tuples: [ATTLengthValue] = []
        while !r.isAtEnd {
            let length = try r.u16("valueLength")
            tuples.append(ATTLengthValue(length: length, value: try r.bytes(Swift.min(Int(length), r.remaining), "value")))
        }
        return .readMultipleVariableResponse(tuples)
    }

    func encodeReadMultipleVariableResponse(_ tuples: [ATTLengthValue], into w: inout ByteWriter) {
        for t in tuples { w.u16(t.length); w.append(t.value) }
    }

    func readMultipleVariableResponseSize(_ tuples: [ATTLengthValue]) -> Int {
        tuples.reduce(0) { $0 + 2 + $1.value.count }
    }

    func readMultipleVariableResponseFields(_ tuples: [ATTLengthValue], into f: inout [Field]) {
        f.append(Field("lengthValueTupleList", .list(tuples.map { .object([.int("valueLength", $0.length), .bytes("value", $0.value)]) })))
    }

    // Multiple Handle Value Notification (3.4.7.4): two or more handle/length/value tuples, each
    // with its own length.
    static func decodeMultipleHandleValueNotification(_ r: inout ByteReader) throws(DecodeError) -> ATTPDU {
        var list: [ATTHandleValue] = []
        while !r.isAtEnd {
            let handle = try r.u16("handle")
            let length = Int(try r.u16("valueLength"))
            list.append(ATTHandleValue(handle: handle, value: try r.bytes(length, "value")))
        }
        guard list.count >= 2 else {
            throw .invalid("Multiple Handle Value Notification: \(list.count) tuple(s), needs two or more")
        }
        return .multipleHandleValueNotification(list)
    }

    func encodeMultipleHandleValueNotification(_ list: [ATTHandleValue], into w: inout ByteWriter) {
        for item in list { w.u16(item.handle); w.u16(UInt16(truncatingIfNeeded: item.value.count)); w.append(item.value) }
    }

    func multipleHandleValueNotificationSize(_ list: [ATTHandleValue]) -> Int {
        list.reduce(0) { $0 + 4 + $1.value.count }
    }

    func multipleHandleValueNotificationFields(_ list: [ATTHandleValue], into f: inout [Field]) {
        f.append(Field("handleLengthValueTupleList", .list(list.map {
            .object([.int("handle", $0.handle), .int("valueLength", $0.value.count), .bytes("value", $0.value)])
        })))
    }
}
