import HCI

/// Names from the Bluetooth SIG Assigned Numbers: GATT services, characteristics, descriptors,
/// declarations and units (16-bit UUIDs), company identifiers, appearance values.
/// Tables are `switch` statements: no allocation, no start-up cost. The UUID tables are
/// generated from Tools/pdl/gatt-codes.pdl.
public enum AssignedNumbers {
    /// The SIG name of a 16-bit UUID (or its 128-bit alias in the Base UUID range), or nil.
    public static func name(of uuid: BluetoothUUID) -> String? {
        guard let v = uuid.uuid16 else { return nil }
        return name(of16: v)
    }

    /// What kind of thing a 16-bit UUID names, from its Assigned Numbers range.
    public enum UUIDKind: String, Sendable {
        case service, characteristic, descriptor, declaration, unit
    }

    public static func kind(of uuid: BluetoothUUID) -> UUIDKind? {
        guard let v = uuid.uuid16, name(of16: v) != nil else { return nil }
        switch v {
        case 0x1800...0x18FF: return .service
        case 0x2700...0x27FF: return .unit
        case 0x2800...0x28FF: return .declaration
        case 0x2900...0x29FF: return .descriptor
        case 0x2A00...0x2CFF: return .characteristic
        default: return nil
        }
    }

    public static func name(of16 v: UInt16) -> String? {
        switch v {
        case 0x1800...0x18FF: return serviceName(v)
        case 0x2700...0x27FF: return unitName(v)
        case 0x2800...0x28FF: return declarationName(v)
        case 0x2900...0x29FF: return descriptorName(v)
        case 0x2A00...0x2CFF: return characteristicName(v)
        default: return nil
        }
    }

    // serviceName, declarationName, descriptorName, characteristicName, unitName: generated from
    // Tools/pdl/gatt-codes.pdl (Sources/GATT/Generated/Codes.swift).
}
