import Testing
import HCI
@testable import Host

@Suite struct AdvertisingDataTests {
    static let uuid128 = BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!

    /// Flags, complete 128-bit UUID list, Apple iBeacon-style manufacturer data, service data, tx power.
    static let advertising: [UInt8] = [
        0x02, 0x01, 0x06,
        0x11, 0x07, 0xf0, 0xde, 0xbc, 0x9a, 0x78, 0x56, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12, 0x78, 0x56, 0x34, 0x12,
        0x06, 0xff, 0x4c, 0x00, 0x02, 0x15, 0xaa,
    ]
    /// Complete name, 16-bit list, service data, tx power, appearance.
    static let scanResponse: [UInt8] = [
        0x05, 0x09, 0x50, 0x65, 0x65, 0x72,
        0x05, 0x03, 0x0d, 0x18, 0x0f, 0x18,
        0x04, 0x16, 0x0f, 0x18, 0x64,
        0x02, 0x0a, 0x04,
        0x03, 0x19, 0x41, 0x03,
    ]

    @Test func parsesRealWorldAdvertisement() {
        let ad = AdvertisingData(parsing: Self.advertising)
        #expect(ad.problems.isEmpty)
        #expect(ad.structures.map(\.type) == [.flags, .completeServiceUUIDs128, .manufacturerSpecificData])
        #expect(ad.flags == 0x06)
        #expect(ad.uuids(.completeServiceUUIDs128) == [Self.uuid128])
        #expect(ad.services.map(\.description) == ["12345678-1234-5678-1234-56789abcdef0"])
        #expect(ad.manufacturerData == [0x004C: [0x02, 0x15, 0xaa]])
        #expect(ad.name == nil)
        #expect(ad.bytes == Self.advertising)
    }

    @Test func scanJSONAccessorsOfMergedData() {
        let ad = AdvertisingData(parsing: Self.advertising).merged(with: AdvertisingData(parsing: Self.scanResponse))
        #expect(ad.name == "Peer")
        #expect(ad.services.map(\.description) == ["12345678-1234-5678-1234-56789abcdef0", "180d", "180f"])
        #expect(ad.manufacturerData[0x004C] == [0x02, 0x15, 0xaa])
        #expect(ad.serviceData == [BluetoothUUID(0x180F): [0x64]])
        #expect(ad.txPower == 4)
        #expect(ad.flags == 6)
        #expect(ad.appearance == 0x0341)
        #expect(ad.structures.count == 8)
    }

    @Test func completeNameWinsOverShortened() {
        let ad = AdvertisingData(parsing: [0x03, 0x08, 0x41, 0x42, 0x04, 0x09, 0x41, 0x42, 0x43])
        #expect(ad.shortenedLocalName == "AB")
        #expect(ad.completeLocalName == "ABC")
        #expect(ad.name == "ABC")
        #expect(AdvertisingData(parsing: [0x03, 0x08, 0x41, 0x42]).name == "AB")
    }

    @Test func negativeTxPowerAnd32BitUUIDs() {
        let ad = AdvertisingData(parsing: [0x02, 0x0a, 0xf4, 0x05, 0x05, 0x78, 0x56, 0x34, 0x12])
        #expect(ad.txPower == -12)
        #expect(ad.services == [BluetoothUUID(uuid32: 0x12345678)])
        #expect(ad.services.first?.description == "12345678")
    }

    @Test func lengthRunningPastTheEndKeepsEarlierStructures() {
        let ad = AdvertisingData(parsing: [0x02, 0x01, 0x06, 0x05, 0x09, 0x41, 0x42])
        #expect(ad.structures == [ADStructure(type: .flags, data: [0x06])])
        #expect(ad.problems == [.lengthOverrun(offset: 3, length: 5, available: 3)])
        #expect(ad.problems[0].description.hasPrefix("malformed"))
    }

    @Test func lengthOctetAloneAtTheEnd() {
        let ad = AdvertisingData(parsing: [0x02, 0x01, 0x06, 0x01])
        #expect(ad.structures.count == 1)
        #expect(ad.problems == [.lengthOverrun(offset: 3, length: 1, available: 0)])
        let big = AdvertisingData(parsing: [0xff])
        #expect(big.structures.isEmpty)
        #expect(big.problems == [.lengthOverrun(offset: 0, length: 255, available: 0)])
    }

    @Test func zeroLengthEndsSignificantPart() {
        let padded = AdvertisingData(parsing: [0x02, 0x01, 0x06, 0x00, 0x00, 0x00, 0x00])
        #expect(padded.structures.count == 1)
        #expect(padded.problems.isEmpty)
        // Whatever follows the terminator is not parsed, but non-zero octets are reported.
        let dirty = AdvertisingData(parsing: [0x02, 0x01, 0x06, 0x00, 0x00, 0x02, 0x09, 0x41])
        #expect(dirty.structures.count == 1)
        #expect(dirty.name == nil)
        #expect(dirty.problems == [.nonZeroPadding(offset: 5)])
    }

    @Test func emptyAndTypeOnlyStructures() {
        #expect(AdvertisingData(parsing: []) == AdvertisingData())
        let typeOnly = AdvertisingData(parsing: [0x01, 0x09])
        #expect(typeOnly.problems.isEmpty)
        #expect(typeOnly.completeLocalName == "")
    }

    @Test func wrongDataLengthsAreReportedAndKeptRaw() {
        let bytes: [UInt8] = [
            0x01, 0x01,                    // Flags without its octet
            0x04, 0x03, 0x0d, 0x18, 0x0f,  // odd-length 16-bit UUID list
            0x03, 0x0a, 0x01, 0x02,        // Tx Power with two octets
            0x02, 0xff, 0x4c,              // manufacturer data without a full company id
            0x02, 0x19, 0x41,              // Appearance with one octet
            0x02, 0x16, 0x0d,              // service data shorter than its UUID
            0x03, 0x12, 0x06, 0x00,        // connection interval range too short
            0x02, 0x09, 0x5a,              // a good one after all that
        ]
        let ad = AdvertisingData(parsing: bytes)
        #expect(ad.structures.count == 8)
        #expect(ad.problems == [
            .badDataLength(type: .flags, length: 0),
            .badDataLength(type: .completeServiceUUIDs16, length: 3),
            .badDataLength(type: .txPowerLevel, length: 2),
            .badDataLength(type: .manufacturerSpecificData, length: 1),
            .badDataLength(type: .appearance, length: 1),
            .badDataLength(type: .serviceData16, length: 1),
            .badDataLength(type: .peripheralConnectionIntervalRange, length: 2),
        ])
        #expect(ad.flags == nil)
        #expect(ad.txPower == nil)
        #expect(ad.manufacturerData.isEmpty)
        #expect(ad.appearance == nil)
        #expect(ad.serviceData.isEmpty)
        #expect(ad.peripheralConnectionIntervalRange == nil)
        #expect(ad.services == [BluetoothUUID(0x180D)])
        #expect(ad.name == "Z")
        #expect(ad.bytes == bytes)
        // The dump still shows every structure, the bad ones as raw data.
        guard case .list(let items)? = ad.fields.first?.value else { Issue.record("no adStructures"); return }
        #expect(items.count == 8)
        #expect(ad.fields.contains { $0.name == "problems" })
    }

    @Test func unknownTypesAreKeptRaw() {
        let ad = AdvertisingData(parsing: [0x04, 0x3e, 0x01, 0x02, 0x03])
        #expect(ad.structures == [ADStructure(type: ADType(0x3e), data: [1, 2, 3])])
        #expect(ad.problems.isEmpty)
        #expect(ADType(0x3e).name == nil)
        #expect(ad.bytes == [0x04, 0x3e, 0x01, 0x02, 0x03])
    }

    @Test func builderRoundTrip() {
        var ad = AdvertisingData()
        ad.addFlags([.leGeneralDiscoverableMode, .brEdrNotSupported])
        ad.addServiceUUIDs([BluetoothUUID(0x180D), Self.uuid128, BluetoothUUID(uuid32: 0xAABBCCDD), BluetoothUUID(0x180F)])
        ad.addLocalName("ble-hci")
        ad.addTxPower(-8)
        ad.addManufacturerData(company: 0x0059, data: [1, 2])
        ad.addManufacturerData(company: 0x004C, data: [3])
        ad.addServiceData(BluetoothUUID(0x180F), data: [0x64])
        ad.addServiceData(Self.uuid128, data: [9])
        ad.addAppearance(0x0341)
        ad.addPeripheralConnectionIntervalRange(ConnectionIntervalRange(min: 6, max: 0x0C80))
        ad.addSolicitedServices([BluetoothUUID(0x1812)])
        ad.addURI("https://example.com/x")
        ad.addLESupportedFeatures([0x01])

        #expect(Array(ad.bytes.prefix(9)) == [0x02, 0x01, 0x06, 0x05, 0x03, 0x0d, 0x18, 0x0f, 0x18])
        let back = AdvertisingData(parsing: ad.bytes)
        #expect(back == ad)
        #expect(back.problems.isEmpty)
        #expect(back.services == [BluetoothUUID(0x180D), BluetoothUUID(0x180F), BluetoothUUID(uuid32: 0xAABBCCDD), Self.uuid128])
        #expect(back.name == "ble-hci")
        #expect(back.txPower == -8)
        #expect(back.manufacturerSpecificData.map(\.companyIdentifier) == [0x0059, 0x004C])
        #expect(back.manufacturerData == [0x0059: [1, 2], 0x004C: [3]])
        #expect(back.serviceData == [BluetoothUUID(0x180F): [0x64], Self.uuid128: [9]])
        #expect(back.appearance == 0x0341)
        #expect(back.peripheralConnectionIntervalRange == ConnectionIntervalRange(min: 6, max: 0x0C80))
        #expect(back.solicitedServices == [BluetoothUUID(0x1812)])
        #expect(back.uri == "https://example.com/x")
        #expect(back.leSupportedFeatures == [0x01])
    }

    @Test func uriSchemeCodePoints() {
        var ad = AdvertisingData()
        ad.addURI("https://example.com")
        #expect(ad.structures[0].data == [0x17] + Array("//example.com".utf8))
        ad = AdvertisingData()
        ad.addURI("http://a")
        #expect(ad.structures[0].data.first == 0x16)
        ad = AdvertisingData()
        ad.addURI("unknownscheme:zz")
        #expect(ad.structures[0].data == [0x01] + Array("unknownscheme:zz".utf8))
        #expect(ad.uri == "unknownscheme:zz")
        #expect(AdvertisingData(parsing: [0x04, 0x24, 0x26, 0x61, 0x62]).uri == "mailto:ab")
    }

    @Test func localNameFittingShortensAtCharacterBoundary() {
        var ad = AdvertisingData()
        ad.addFlags(0x06)
        ad.addLocalName("short", fittingIn: 31)
        #expect(ad.completeLocalName == "short")

        var long = AdvertisingData()
        long.addFlags(0x06)
        long.addLocalName(String(repeating: "é", count: 20), fittingIn: 31) // 40 UTF-8 octets
        #expect(long.completeLocalName == nil)
        #expect(long.shortenedLocalName == String(repeating: "é", count: 13)) // 26 octets of room
        #expect(long.encodedLength == 31)
        #expect(long.bytes.count == 31)
    }

    @Test func fieldsNameEachStructure() {
        let ad = AdvertisingData(parsing: Self.advertising)
        let fields = ad.describe(companyName: { $0 == 0x004C ? "Apple, Inc." : nil })
        #expect(fields.count == 1)
        guard case .list(let items) = fields[0].value, items.count == 3,
              case .object(let flags) = items[0], case .object(let uuids) = items[1], case .object(let mfg) = items[2]
        else { Issue.record("unexpected shape \(fields)"); return }
        #expect(flags.first { $0.name == "adType" }?.value == .code("0x01"))
        #expect(flags.first { $0.name == "adType" }?.note == "Flags")
        #expect(flags.first { $0.name == "flags" }?.note == "LE General Discoverable Mode, BR/EDR Not Supported")
        #expect(uuids.first { $0.name == "uuids" }?.value == .list([.text("12345678-1234-5678-1234-56789abcdef0")]))
        #expect(mfg.first { $0.name == "companyIdentifier" }?.value == .code("0x004c"))
        #expect(mfg.first { $0.name == "companyIdentifier" }?.note == "Apple, Inc.")
        #expect(mfg.first { $0.name == "data" }?.value == .bytes([0x02, 0x15, 0xaa]))
        #expect(jsonObject(fields).hasPrefix("{\"adStructures\":[{\"length\":2,\"adType\":\"0x01\",\"flags\":\"0x06\"}"))
    }

    /// Flags bits (Core Specification Supplement Part A 1.3; generated from Tools/pdl/gap-codes.pdl):
    /// bit 0 LE Limited Discoverable Mode, 1 LE General Discoverable Mode, 2 BR/EDR Not Supported,
    /// 3 Simultaneous LE and BR/EDR to Same Device Capable (Controller); 4 previously used, 5-7 reserved.
    @Test func flagsBitsAndNotes() {
        #expect(ADFlags.leLimitedDiscoverableMode.rawValue == 0x01)
        #expect(ADFlags.leGeneralDiscoverableMode.rawValue == 0x02)
        #expect(ADFlags.brEdrNotSupported.rawValue == 0x04)
        #expect(ADFlags.simultaneousLEAndBREDR.rawValue == 0x08)
        #expect(ADFlags(rawValue: 0x05).description == "LE Limited Discoverable Mode, BR/EDR Not Supported")
        #expect(ADFlags(rawValue: 0x1A).description == "LE General Discoverable Mode, Simultaneous LE and BR/EDR (Controller), RFU bits 0x10")
        #expect(ADFlags(rawValue: 0).description == "none")
    }

    /// AD type codes (Assigned Numbers 2.3, Common Data Types; generated from Tools/pdl/gap-codes.pdl).
    @Test func adTypeCodesAndNames() {
        let table: [(ADType, UInt8, String)] = [
            (.flags, 0x01, "Flags"), (.completeServiceUUIDs16, 0x03, "Complete List of 16-bit Service or Service Class UUIDs"),
            (.completeServiceUUIDs128, 0x07, "Complete List of 128-bit Service or Service Class UUIDs"),
            (.shortenedLocalName, 0x08, "Shortened Local Name"), (.completeLocalName, 0x09, "Complete Local Name"),
            (.txPowerLevel, 0x0A, "Tx Power Level"), (.serviceData16, 0x16, "Service Data - 16-bit UUID"),
            (.appearance, 0x19, "Appearance"), (.uri, 0x24, "URI"), (.manufacturerSpecificData, 0xFF, "Manufacturer Specific Data"),
        ]
        for (type, code, name) in table {
            #expect(type.rawValue == code, "\(name)")
            #expect(type.name == name)
        }
        #expect(ADType(0x3E).description == "Unknown AD Type 0x3e")
    }

    /// Event_Type bits of LE Extended Advertising Report (Core v5.4 Vol 4 Part E 7.7.65.13):
    /// bit 0 connectable, 1 scannable, 2 directed, 3 scan response, 4 legacy PDUs; legacy
    /// Event_Types (7.7.65.2) mapped onto them with the values 7.7.65.13 gives the legacy PDUs
    /// (ADV_IND 0b0010011, ADV_DIRECT_IND 0b0010101, ADV_SCAN_IND 0b0010010, ADV_NONCONN_IND 0b0010000).
    @Test func advertisingEventKindBits() {
        #expect(AdvertisingEventKind.connectable.rawValue == 0x01)
        #expect(AdvertisingEventKind.scannable.rawValue == 0x02)
        #expect(AdvertisingEventKind.directed.rawValue == 0x04)
        #expect(AdvertisingEventKind.scanResponse.rawValue == 0x08)
        #expect(AdvertisingEventKind.legacy.rawValue == 0x10)
        #expect(AdvertisingEventKind(legacyEventType: 0).rawValue == 0b0010011)
        #expect(AdvertisingEventKind(legacyEventType: 1).rawValue == 0b0010101)
        #expect(AdvertisingEventKind(legacyEventType: 2).rawValue == 0b0010010)
        #expect(AdvertisingEventKind(legacyEventType: 3).rawValue == 0b0010000)
        #expect(AdvertisingEventKind(legacyEventType: 0).description == "connectable, scannable, legacy")
        #expect(AdvertisingEventKind().description == "non-connectable")
    }

    @Test func oversizedDataIsTruncatedOnEncode() {
        let ad = AdvertisingData([ADStructure(type: ADType(0x3e), data: Array(repeating: 7, count: 300))])
        let b = ad.bytes
        #expect(b.count == 256)
        #expect(b[0] == 255)
        #expect(AdvertisingData(parsing: b).structures[0].data.count == 254)
    }
}
