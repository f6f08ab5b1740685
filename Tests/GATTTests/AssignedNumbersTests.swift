import Testing
import HCI
@testable import GATT

@Suite struct AssignedNumbersTests {
    @Test func uuidNames() {
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x180D)) == "Heart Rate")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x2A37)) == "Heart Rate Measurement")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x2902)) == "Client Characteristic Configuration")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x1800)) == "Generic Access")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x1801)) == "Generic Attribute")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x180F)) == "Battery")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x2A19)) == "Battery Level")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x2A05)) == "Service Changed")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x2B2A)) == "Database Hash")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x2800)) == "Primary Service")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x2803)) == "Characteristic")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x2904)) == "Characteristic Presentation Format")
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x272F)) == "Celsius temperature (degree Celsius)")
    }

    @Test func everyRequiredRangeIsNamed() {
        for v: UInt16 in 0x1800...0x1816 where v != 0x180B && v != 0x180C {
            #expect(AssignedNumbers.name(of16: v) != nil, "service \(hexCode(v))")
        }
        for v: UInt16 in 0x1818...0x181E { #expect(AssignedNumbers.name(of16: v) != nil, "service \(hexCode(v))") }
        for v: UInt16 in [0x2A00, 0x2A01, 0x2A02, 0x2A03, 0x2A04, 0x2A05, 0x2A06, 0x2A07, 0x2A19,
                          0x2A23, 0x2A24, 0x2A25, 0x2A26, 0x2A27, 0x2A28, 0x2A29, 0x2A2A,
                          0x2A37, 0x2A38, 0x2A39, 0x2B29, 0x2B2A, 0x2B3A] {
            #expect(AssignedNumbers.name(of16: v) != nil, "characteristic \(hexCode(v))")
        }
        for v: UInt16 in 0x2900...0x2908 { #expect(AssignedNumbers.name(of16: v) != nil, "descriptor \(hexCode(v))") }
        for v: UInt16 in 0x2800...0x2803 { #expect(AssignedNumbers.name(of16: v) != nil, "declaration \(hexCode(v))") }
    }

    @Test func aliasesAndUnknowns() {
        // The 128-bit form of a SIG UUID names the same thing.
        #expect(AssignedNumbers.name(of: BluetoothUUID(string: "0000180d-0000-1000-8000-00805f9b34fb")!) == "Heart Rate")
        #expect(AssignedNumbers.name(of: BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!) == nil)
        #expect(AssignedNumbers.name(of: BluetoothUUID(0xFFF0)) == nil)
        #expect(AssignedNumbers.name(of: BluetoothUUID(0x180B)) == nil)
        #expect(AssignedNumbers.kind(of: BluetoothUUID(0x180D)) == .service)
        #expect(AssignedNumbers.kind(of: BluetoothUUID(0x2A37)) == .characteristic)
        #expect(AssignedNumbers.kind(of: BluetoothUUID(0x2902)) == .descriptor)
        #expect(AssignedNumbers.kind(of: BluetoothUUID(0x2800)) == .declaration)
        #expect(AssignedNumbers.kind(of: BluetoothUUID(0xFFF1)) == nil)
    }

    /// GATTUUID's constants, generated from Tools/pdl/gatt-codes.pdl, carry the Assigned Numbers
    /// values (3.4 GATT Services, 3.6 Declarations, 3.7 Descriptors, 3.8 Characteristics) and
    /// are named by the same lines.
    @Test func gattUUIDConstantsAreTheAssignedNumbers() {
        let expected: [(BluetoothUUID, UInt16, String)] = [
            (GATTUUID.genericAccess, 0x1800, "Generic Access"), (GATTUUID.genericAttribute, 0x1801, "Generic Attribute"),
            (GATTUUID.primaryService, 0x2800, "Primary Service"), (GATTUUID.secondaryService, 0x2801, "Secondary Service"),
            (GATTUUID.include, 0x2802, "Include"), (GATTUUID.characteristic, 0x2803, "Characteristic"),
            (GATTUUID.characteristicExtendedProperties, 0x2900, "Characteristic Extended Properties"),
            (GATTUUID.characteristicUserDescription, 0x2901, "Characteristic User Description"),
            (GATTUUID.clientCharacteristicConfiguration, 0x2902, "Client Characteristic Configuration"),
            (GATTUUID.deviceName, 0x2A00, "Device Name"), (GATTUUID.appearance, 0x2A01, "Appearance"),
            (GATTUUID.serviceChanged, 0x2A05, "Service Changed"),
            (GATTUUID.clientSupportedFeatures, 0x2B29, "Client Supported Features"),
            (GATTUUID.databaseHash, 0x2B2A, "Database Hash"),
        ]
        for (uuid, value, name) in expected {
            #expect(uuid == BluetoothUUID(value), "\(name)")
            #expect(AssignedNumbers.name(of: uuid) == name)
        }
    }

    /// Characteristic Properties bits (Core v5.4 Vol 3 Part G 3.3.1.1, Table 3.5), generated from
    /// Tools/pdl/gatt-codes.pdl, under the names CLI.md lists ("Property names").
    @Test func characteristicPropertiesBitsAndCLINames() {
        let table: [(GATTCharacteristicProperties, UInt8, String)] = [
            (.broadcast, 0x01, "broadcast"), (.read, 0x02, "read"), (.writeWithoutResponse, 0x04, "writeWithoutResponse"),
            (.write, 0x08, "write"), (.notify, 0x10, "notify"), (.indicate, 0x20, "indicate"),
            (.authenticatedSignedWrites, 0x40, "authenticatedSignedWrites"), (.extendedProperties, 0x80, "extendedProperties"),
        ]
        for (bit, value, name) in table { #expect(bit.rawValue == value, "\(name)") }
        #expect(GATTCharacteristicProperties.allNames.map(\.0.rawValue) == table.map(\.1))
        #expect(GATTCharacteristicProperties.allNames.map(\.1) == table.map(\.2))
        let p = GATTCharacteristicProperties(rawValue: 0x0A)
        #expect(p.names == ["read", "write"])
        #expect(p.description == "read,write")
        #expect(GATTCharacteristicProperties().names.isEmpty)
    }

    @Test func companyNames() {
        #expect(AssignedNumbers.companyName(0x004C) == "Apple, Inc.")
        #expect(AssignedNumbers.companyName(0x0006) == "Microsoft")
        #expect(AssignedNumbers.companyName(0x00E0) == "Google")
        #expect(AssignedNumbers.companyName(0x0059) == "Nordic Semiconductor ASA")
        #expect(AssignedNumbers.companyName(0x0075) == "Samsung Electronics Co. Ltd.")
        #expect(AssignedNumbers.companyName(0x02E5) == "Espressif Systems (Shanghai) Co., Ltd.")
        #expect(AssignedNumbers.companyName(0xFFFF) == "reserved for internal use / test")
        #expect(AssignedNumbers.companyName(0xFFFE) == nil)
        let known = (0...0x0FFF).filter { AssignedNumbers.companyName(UInt16($0)) != nil }
        #expect(known.count >= 60)
    }

    @Test func appearanceNames() {
        #expect(AssignedNumbers.appearanceName(0x0341) == "Heart Rate Sensor: Heart Rate Belt")
        #expect(AssignedNumbers.appearanceName(0x0340) == "Heart Rate Sensor")
        #expect(AssignedNumbers.appearanceName(0x0000) == "Unknown")
        #expect(AssignedNumbers.appearanceName(0x0040) == "Phone")
        #expect(AssignedNumbers.appearanceName(0x03C1) == "Human Interface Device: Keyboard")
        #expect(AssignedNumbers.appearanceName(0x03C2) == "Human Interface Device: Mouse")
        #expect(AssignedNumbers.appearanceName(0x00C2) == "Watch: Smartwatch")
        #expect(AssignedNumbers.appearanceName(0x0941) == "Wearable Audio Device: Earbud")
        // A known category with an unlisted subcategory still names the category.
        #expect(AssignedNumbers.appearanceName(0x037F) == "Heart Rate Sensor: subcategory 0x3f")
        #expect(AssignedNumbers.appearanceName(0xFFC0) == nil)
    }
}
