import Testing
import HCI
import Host
import GATT
import VirtualController
@testable import BLE

/// Issue 13 defect 6: advertising data built to fit the advertising set it is sent on, the
/// name shortened (Shortened Local Name, Core Supplement Part A 1.2) when it does not fit.
@Suite(.timeLimit(.minutes(1))) struct AdvertisingFitTests {
    /// 30 characters: with Flags (3 octets) the complete name (2 + 30) exceeds the 31 octets of
    /// legacy advertising data (Core v5.4 Vol 6 Part B 2.3.1.1).
    static let name = "abcdefghijklmnopqrstuvwxyz0123"

    @Test func thirtyOctetNameIsShortenedInBothLegacyPayloads() {
        let (data, response) = AdvertisingOptions(name: Self.name).advertisingData()
        // Advertising data: Flags (Supplement Part A 1.3) then a Shortened Local Name (0x08)
        // holding the first 31 - 3 - 2 = 26 octets of the name ("contiguous characters from the
        // beginning of the full name", Supplement Part A 1.2).
        #expect(data.bytes == [0x02, 0x01, 0x06, 27, 0x08] + Array(Self.name.utf8.prefix(26)))
        // Scan response (31 octets too): the name does not fit complete (2 + 30 > 31) either, so
        // the longest shortened one: 29 octets.
        #expect(response?.bytes == [30, 0x08] + Array(Self.name.utf8.prefix(29)))
    }

    @Test func nameThatFitsTheScanResponseGoesThereComplete() {
        let name = String(Self.name.prefix(29))
        let (data, response) = AdvertisingOptions(name: name).advertisingData()
        #expect(data.bytes == [0x02, 0x01, 0x06, 27, 0x08] + Array(name.utf8.prefix(26)))
        #expect(response?.bytes == [30, 0x09] + Array(name.utf8))
    }

    @Test func dataBeyondLegacyGoesInOneExtendedConnectableSetWithoutScanResponse() {
        // 3 + 2 + 2 * 16 = 37 octets of UUIDs and flags: legacy PDUs cannot carry it, and an
        // extended connectable set is not scannable (Vol 4 Part E 7.8.53).
        let uuids = [BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!,
                     BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef1")!]
        let (data, response) = AdvertisingOptions(name: Self.name, serviceUUIDs: uuids).advertisingData()
        #expect(response == nil)
        #expect(data.completeLocalName == Self.name)
        #expect(data.encodedLength == 37 + 32)
    }

    @Test func extendedConnectableDataIsCutToOneAuxiliaryPDU() {
        // 191 octets fit one AUX_ADV_IND whatever its extended header holds (255 - 1 - 63,
        // Vol 6 Part B 2.3.4): a 160-octet name after 37 octets of flags and UUIDs is shortened
        // to 191 - 37 - 2 = 152 octets.
        let uuids = [BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef0")!,
                     BluetoothUUID(string: "12345678-1234-5678-1234-56789abcdef1")!]
        let name = String(repeating: "n", count: 160)
        let (data, response) = AdvertisingOptions(name: name, serviceUUIDs: uuids).advertisingData()
        #expect(response == nil)
        #expect(data.encodedLength == 191)
        #expect(data.shortenedLocalName == String(repeating: "n", count: 152))
    }

    /// Fails before the fix: the host put the 32-octet scan response on an extended
    /// connectable (non-scannable) set and the controller answered LE Set Extended Scan
    /// Response Data with Invalid HCI Command Parameters (0x12) (Vol 4 Part E 7.8.55).
    @Test func thirtyOctetNameAdvertisesOnTheVirtualController() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: [], name: Self.name)
        let central = try await Central.open(transports[1])
        try await peripheral.startAdvertising(AdvertisingOptions(name: Self.name))
        let stream = try await central.scan(ScanFilter(nameContains: "abcdef"), everyReport: true)
        var seen: Advertisement?
        for try await adv in stream where adv.scanResponse != nil {
            seen = adv
            break
        }
        let adv = try #require(seen)
        #expect(adv.connectable)
        #expect(adv.advertisingData.shortenedLocalName == String(Self.name.prefix(26)))
        #expect(adv.scanResponse?.shortenedLocalName == String(Self.name.prefix(29)))
        #expect(adv.data.completeLocalName == nil)
        // What a scanner shows: the longest of the two shortened names.
        #expect(adv.name == String(Self.name.prefix(29)))
        await central.close()
        await peripheral.close()
    }

    /// Defect 7 end to end: the virtual controller splits advertising data over reports of
    /// 229 octets (Data_Status "more data to come", Vol 4 Part E 7.7.65.13); the scanner sees
    /// the whole data, the name at its end included. Before the fix the second fragment was
    /// parsed on its own, from inside an AD structure, and the name was never found.
    @Test func extendedDataSplitOverReportsArrivesWhole() async throws {
        let (_, transports) = VirtualLink.inProcess(count: 2)
        let peripheral = try await Peripheral.open(transports[0], services: [])
        let central = try await Central.open(transports[1])
        var ad = AdvertisingData()
        ad.addFlags(0x04)
        ad.addManufacturerData(company: 0xFFFF, data: [UInt8](repeating: 0xA5, count: 140))
        ad.addManufacturerData(company: 0xFFFE, data: [UInt8](repeating: 0x5A, count: 140))
        ad.addLocalName("tail-name")
        #expect(ad.encodedLength == 3 + 2 * 144 + 11)
        try await peripheral.stack.host.startAdvertising(AdvertisingParameters(kind: .nonConnectable, data: ad))
        let adv = try await central.find(ScanFilter(nameContains: "tail-name"), timeout: .seconds(5))
        #expect(adv.advertisingData.bytes == ad.bytes)
        #expect(adv.advertisingData.problems.isEmpty)
        #expect(!adv.connectable)
        await central.close()
        await peripheral.close()
    }
}
