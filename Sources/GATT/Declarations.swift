import HCI

/// The value of a Characteristic Declaration attribute (type 0x2803, Core Vol 3 Part G 3.3.1):
/// properties, value handle, UUID. One codec for the server that builds it, the client that
/// discovers it and the decoder that annotates captures with it.
public struct GATTCharacteristicDeclaration: Sendable, Equatable {
    public var properties: GATTCharacteristicProperties
    public var valueHandle: UInt16
    public var uuid: BluetoothUUID

    public init(properties: GATTCharacteristicProperties, valueHandle: UInt16, uuid: BluetoothUUID) {
        self.properties = properties
        self.valueHandle = valueHandle
        self.uuid = uuid
    }

    /// Decodes a declaration value: 5 octets (16-bit UUID) or 19 (128-bit UUID).
    public init(value: [UInt8]) throws(DecodeError) {
        guard value.count == 5 || value.count == 19 else {
            throw .invalid("characteristic declaration of \(value.count) octets (5 or 19 expected)")
        }
        var r = ByteReader(value)
        properties = GATTCharacteristicProperties(rawValue: try r.u8("properties"))
        valueHandle = try r.u16("valueHandle")
        guard let u = BluetoothUUID(littleEndian: r.rest()) else { throw .invalid("characteristic declaration UUID") }
        uuid = u
    }

    /// The attribute value (32-bit UUIDs widened to 128 bits, as ATT requires).
    public var value: [UInt8] {
        var w = ByteWriter(capacity: 19)
        w.u8(properties.rawValue)
        w.u16(valueHandle)
        w.append(uuid.littleEndianFor16Or128)
        return w.bytes
    }
}
