import Testing
import Synchronization
import HCI
import ATT
@testable import GATT

// Raw PDU exchanges against our GATT server, organised by the Bluetooth SIG GATT test-suite
// case identifiers (GATT.TS; cross-checked against the server cases of BlueZ's
// unit/test-gatt.c, which names them /TP/<group>/SR/<id>). Every expected answer is written
// here from the Core specification (v5.4, Vol 3 Part F = ATT, Part G = GATT), never from our
// output. ATT_MTU is 23 unless said otherwise.

/// The database under test. Handles follow from Part G 3 (a service declaration, then its
/// includes, then per characteristic its declaration, value and descriptors) after the
/// mandatory GAP (0x0001–0x0005) and GATT (0x0006–0x000D) services:
///
///     000E  Primary Service A000 (group end 001E)
///     000F  Characteristic: read|write (0x0A), value 0010, A001     0010  "BlueZ"
///     0011  Characteristic: read (0x02), value 0012, A002           0012  45 octets 00…2C
///     0013  Characteristic: read, value 0014, A003 (not readable)   0014  [0x03]
///     0015  Characteristic: read|write, 0016, A004 (authorization)  0016  [0x04]
///     0017  Characteristic: read, 0018, A005 (authentication)       0018  [0x05]
///     0019  Characteristic: read, 001A, A006 (encryption, key 16)   001A  [0x06]
///     001B  Characteristic: read|notify|indicate (0x32), 001C, A007 001C  [0x07]
///     001D  CCCD   001E  User Description "desc"
///     001F  Primary Service B000 (group end 0022)
///     0020  Include 000E–001E, UUID A000
///     0021  Characteristic: read, 0022, 12345678-9abc-def0-1234-56789abcdef0   0022  [0x01]
enum ConformanceDB {
    static let u128 = BluetoothUUID(string: "12345678-9abc-def0-1234-56789abcdef0")!
    /// `u128` as sent over the air (little-endian).
    static let u128LE = "f0debc9a78563412f0debc9a78563412"
    static let long45: [UInt8] = Array(0..<45)

    static func services() -> [GATTService] {
        [
            GATTService(uuid: 0xA000, characteristics: [
                GATTCharacteristic(uuid: 0xA001, properties: [.read, .write], value: Array("BlueZ".utf8)),
                GATTCharacteristic(uuid: 0xA002, properties: .read, value: long45),
                GATTCharacteristic(uuid: 0xA003, properties: .read, permissions: [], value: [0x03]),
                GATTCharacteristic(uuid: 0xA004, properties: [.read, .write],
                                   permissions: [.readable, .writable, .readAuthorizationRequired, .writeAuthorizationRequired],
                                   value: [0x04]),
                GATTCharacteristic(uuid: 0xA005, properties: .read,
                                   permissions: [.readable, .readAuthenticationRequired], value: [0x05]),
                GATTCharacteristic(uuid: 0xA006, properties: .read,
                                   permissions: [.readable, .readEncryptionRequired], value: [0x06], minimumKeySize: 16),
                GATTCharacteristic(uuid: 0xA007, properties: [.read, .notify, .indicate], value: [0x07],
                                   descriptors: [.userDescription("desc")]),
            ]),
            GATTService(uuid: 0xB000, includes: [0xA000], characteristics: [
                GATTCharacteristic(uuid: u128, properties: .read, value: [0x01]),
            ]),
        ]
    }

    @MainActor static func connect(mtu: Int = 23, security: ATTSecurity = .none) async -> (GATTServer, Loopback) {
        let server = GATTServer(services: services())
        let (_, link) = await Loopback.connect(server, mtu: mtu, security: security)
        return (server, link)
    }
}

/// Sends each request (hex) as the bearer would receive it and checks the server's answer
/// octet for octet; `nil`: no answer allowed (commands).
func expectExchanges(_ link: Loopback, _ steps: [(request: String, answer: String?)],
                     sourceLocation: SourceLocation = #_sourceLocation) async {
    for step in steps {
        let answer = await link.raw([UInt8](hex: step.request)!)
        let expected = step.answer.map { [UInt8](hex: $0)! }
        #expect(answer?.bytes == expected, "\(step.request) → \(answer?.bytes.hex ?? "no answer"), expected \(step.answer ?? "no answer")",
                sourceLocation: sourceLocation)
    }
}

@MainActor
@Suite("GATT server conformance: configuration and discovery (GATT/SR/GAC, GATT/SR/GAD)")
struct ServerDiscoveryConformanceTests {
    /// GATT/SR/GAD/BV-01-C Discover All Primary Services (Part G 4.4.1; Part F 3.4.4.9–10):
    /// Read By Group Type 0x2800 answered with as many same-length entries as fit ATT_MTU
    /// (1 + 1 + 3 × 6 = 20 octets; a fourth would make 26 > 23), then Attribute Not Found
    /// with the Starting Handle past the last group.
    @Test("GATT/SR/GAD/BV-01-C") func discoverAllPrimaryServices() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("10 0100 ffff 0028", "11 06 0100 0500 0018 0600 0d00 0118 0e00 1e00 00a0"),
            ("10 1f00 ffff 0028", "11 06 1f00 2200 00b0"),
            ("10 2300 ffff 0028", "01 10 2300 0a"),
        ])
    }

    /// GATT/SR/GAD/BV-02-C Discover Primary Service by Service UUID (Part G 4.4.2; Part F
    /// 3.4.3.3–4): Find By Type Value answers Found Attribute Handle and Group End Handle;
    /// none left or none at all → Attribute Not Found with the Starting Handle.
    @Test("GATT/SR/GAD/BV-02-C") func discoverPrimaryServiceByUUID() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("06 0100 ffff 0028 00a0", "07 0e00 1e00"),
            ("06 1f00 ffff 0028 00a0", "01 06 1f00 0a"),
            ("06 0100 ffff 0028 01a0", "01 06 0100 0a"),                 // missing
            ("06 0100 ffff 0028 " + ConformanceDB.u128LE, "01 06 0100 0a"), // 128-bit: no such service
        ])
    }

    /// GATT/SR/GAD/BV-03-C Find Included Services (Part G 4.5.1, 3.2): the include's value is
    /// the included service's handle, end group handle and (16-bit) UUID.
    @Test("GATT/SR/GAD/BV-03-C") func findIncludedServices() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("08 0100 ffff 0228", "09 08 2000 0e00 1e00 00a0"),
            ("08 2100 ffff 0228", "01 08 2100 0a"),
        ])
    }

    /// GATT/SR/GAD/BV-04-C Discover All Characteristics of a Service (Part G 4.6.1, 3.3.1):
    /// declarations of the same length (7 = handle + properties + value handle + 16-bit UUID),
    /// three per response at ATT_MTU 23; the 128-bit one alone (length 21).
    @Test("GATT/SR/GAD/BV-04-C") func discoverAllCharacteristics() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("08 0e00 1e00 0328", "09 07 0f00 0a 1000 01a0 1100 02 1200 02a0 1300 02 1400 03a0"),
            ("08 1400 1e00 0328", "09 07 1500 0a 1600 04a0 1700 02 1800 05a0 1900 02 1a00 06a0"),
            ("08 1a00 1e00 0328", "09 07 1b00 32 1c00 07a0"),
            ("08 1c00 1e00 0328", "01 08 1c00 0a"),
            ("08 1f00 2200 0328", "09 15 2100 02 2200 " + ConformanceDB.u128LE),
            ("08 2200 2200 0328", "01 08 2200 0a"),
        ])
    }

    /// GATT/SR/GAD/BV-06-C Discover All Characteristic Descriptors (Part G 4.7.1; Part F
    /// 3.4.3.1–2): Find Information in one format per response (0x01 16-bit, 0x02 128-bit).
    @Test("GATT/SR/GAD/BV-06-C") func discoverAllDescriptors() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("04 1d00 1e00", "05 01 1d00 0229 1e00 0129"),
            ("04 2100 2200", "05 01 2100 0328"),          // the 128-bit type does not share the response
            ("04 2200 2200", "05 02 2200 " + ConformanceDB.u128LE),
            ("04 2300 ffff", "01 04 2300 0a"),
        ])
    }
}

@MainActor
@Suite("GATT server conformance: reading (GATT/SR/GAR)")
struct ServerReadConformanceTests {
    /// GATT/SR/GAR/BV-01-C Read Characteristic Value (Part F 3.4.4.3–4).
    @Test("GATT/SR/GAR/BV-01-C") func read() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [("0a 1000", "0b 426c75655a")])
    }

    /// GATT/SR/GAR/BI-01-C Read Not Permitted (Part F 3.4.4.3: Error Response naming the
    /// handle; Table 3.4 code 0x02).
    @Test("GATT/SR/GAR/BI-01-C") func readNotPermitted() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [("0a 1400", "01 0a 1400 02")])
    }

    /// GATT/SR/GAR/BI-02-C Read – Invalid Handle (Table 3.4 code 0x01, the handle in error).
    @Test("GATT/SR/GAR/BI-02-C") func readInvalidHandle() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [("0a 0000", "01 0a 0000 01"), ("0a f00f", "01 0a f00f 01")])
    }

    /// GATT/SR/GAR/BI-03-C, BI-04-C, BI-05-C Read – Insufficient Authorization (0x08),
    /// Authentication (0x05), Encryption Key Size (0x0C). An unencrypted link reading a value
    /// that needs encryption gets Insufficient Authentication (0x05) when no LTK is available
    /// and Insufficient Encryption (0x0F) when one is (Core Vol 3 Part C 10.3.1; Part F Table 3.4).
    @Test("GATT/SR/GAR/BI-03-C, BI-04-C, BI-05-C") func readSecurityErrors() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("0a 1600", "01 0a 1600 08"),
            ("0a 1800", "01 0a 1800 05"),
            ("0a 1a00", "01 0a 1a00 05"),
        ])
        link.security = ATTSecurity(keyAvailable: true)
        await expectExchanges(link, [("0a 1a00", "01 0a 1a00 0f")])
        link.security = ATTSecurity(encrypted: true, keySize: 7)
        await expectExchanges(link, [("0a 1a00", "01 0a 1a00 0c")])
        link.security = ATTSecurity(encrypted: true, authenticated: true, authorized: true, keySize: 16)
        await expectExchanges(link, [("0a 1600", "0b 04"), ("0a 1800", "0b 05"), ("0a 1a00", "0b 06")])
    }

    /// GATT/SR/GAR/BV-03-C Read Using Characteristic UUID (Part G 4.8.2; Part F 3.4.4.1–2).
    @Test("GATT/SR/GAR/BV-03-C") func readUsingCharacteristicUUID() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("08 0100 ffff 01a0", "09 07 1000 426c75655a"),
            ("08 0100 ffff " + ConformanceDB.u128LE, "09 03 2200 01"),
        ])
    }

    /// GATT/SR/GAR/BI-06-C, BI-07-C, BI-08-C Read Using Characteristic UUID – Read Not
    /// Permitted (the attribute's handle), Attribute Not Found (the Starting Handle), Invalid
    /// Handle (Starting Handle above Ending Handle) (Part F 3.4.4.1).
    @Test("GATT/SR/GAR/BI-06-C, BI-07-C, BI-08-C") func readUsingUUIDErrors() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("08 0100 ffff 03a0", "01 08 1400 02"),
            ("08 0100 ffff f00f", "01 08 0100 0a"),
            ("08 0200 0100 0028", "01 08 0200 01"),
            ("08 0000 ffff 0028", "01 08 0000 01"),
        ])
    }

    /// GATT/SR/GAR/BI-09-C, BI-10-C, BI-11-C Read Using Characteristic UUID – Insufficient
    /// Authorization, Authentication, Encryption Key Size, each naming the attribute.
    @Test("GATT/SR/GAR/BI-09-C, BI-10-C, BI-11-C") func readUsingUUIDSecurityErrors() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("08 0100 ffff 04a0", "01 08 1600 08"),
            ("08 0100 ffff 05a0", "01 08 1800 05"),
        ])
        link.security = ATTSecurity(encrypted: true, keySize: 7)
        await expectExchanges(link, [("08 0100 ffff 06a0", "01 08 1a00 0c")])
    }

    /// GATT/SR/GAR/BV-04-C Read Long Characteristic Values (Part G 4.8.3; Part F 3.4.4.5–6):
    /// Read Blob parts of ATT_MTU − 1 from each offset; an offset equal to the length answers
    /// an empty part. A value shorter than ATT_MTU − 1 is read from an offset too (Attribute
    /// Not Long is only a "may", for fixed-length values).
    @Test("GATT/SR/GAR/BV-04-C") func readLong() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("0a 1200", "0b 000102030405060708090a0b0c0d0e0f101112131415"),
            ("0c 1200 1600", "0d 161718191a1b1c1d1e1f202122232425262728292a2b"),
            ("0c 1200 2c00", "0d 2c"),
            ("0c 1200 2d00", "0d"),
            ("0c 1000 0200", "0d 75655a"),
        ])
    }

    /// GATT/SR/GAR/BI-12-C, BI-13-C, BI-14-C Read Long – Read Not Permitted, Invalid Offset
    /// (offset 6 > length 5), Invalid Handle (Part F 3.4.4.5).
    @Test("GATT/SR/GAR/BI-12-C, BI-13-C, BI-14-C") func readLongErrors() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("0c 1400 0000", "01 0c 1400 02"),
            ("0c 1000 0600", "01 0c 1000 07"),
            ("0c f00f 0000", "01 0c f00f 01"),
        ])
    }

    /// GATT/SR/GAR/BV-05-C Read Multiple Characteristic Values (Part F 3.4.4.7–8): the values
    /// concatenated.
    @Test("GATT/SR/GAR/BV-05-C") func readMultiple() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [("0e 1000 1c00", "0f 426c75655a 07")])
    }

    /// GATT/SR/GAR/BI-18-C, BI-19-C, BI-20-C, BI-21-C Read Multiple – Read Not Permitted,
    /// Invalid Handle, Insufficient Authorization, Authentication: the first handle in error
    /// (Part F 3.4.4.7).
    @Test("GATT/SR/GAR/BI-18-C, BI-19-C, BI-20-C, BI-21-C") func readMultipleErrors() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("0e 1000 1400", "01 0e 1400 02"),
            ("0e 1000 f00f", "01 0e f00f 01"),
            ("0e 1000 1600 1800", "01 0e 1600 08"),
            ("0e 1000 1800 1600", "01 0e 1800 05"),
        ])
    }

    /// Read Multiple Variable Length Characteristic Values (Part G 4.8.5; Part F 3.4.4.11–12):
    /// Length Value Tuples with each value's whole length; cut at ATT_MTU − 1 octets with the
    /// cut value's Value Length still its whole length (45 = 0x002D).
    @Test("GATT/SR/GAR: Read Multiple Variable (Part G 4.8.5)") func readMultipleVariable() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("20 1000 1c00", "21 0500 426c75655a 0100 07"),
            ("20 1200 1000", "21 2d00 000102030405060708090a0b0c0d0e0f10111213"),
            ("20 1000 1400", "01 20 1400 02"),
        ])
    }

    /// GATT/SR/GAR/BV-06-C Read Characteristic Descriptors (Part G 4.12.1).
    @Test("GATT/SR/GAR/BV-06-C") func readDescriptor() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [("0a 1e00", "0b 64657363"), ("0a 1d00", "0b 0000")])
    }
}

@MainActor
@Suite("GATT server conformance: writing (GATT/SR/GAW)")
struct ServerWriteConformanceTests {
    /// GATT/SR/GAW/BV-01-C Write Without Response (Part G 4.9.1): no answer, value written.
    @Test("GATT/SR/GAW/BV-01-C") func writeWithoutResponse() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [("52 1000 0a0b", nil), ("0a 1000", "0b 0a0b")])
        // Errors of a command are not answered (Part F 3.4.5.3).
        await expectExchanges(link, [("52 1200 01", nil), ("52 0000 01", nil), ("0a 1200", "0b " + Array(ConformanceDB.long45.prefix(22)).hex)])
    }

    /// GATT/SR/GAW/BV-03-C Write Characteristic Value (Part F 3.4.5.1–2).
    @Test("GATT/SR/GAW/BV-03-C") func write() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [("12 1000 010203", "13"), ("0a 1000", "0b 010203")])
    }

    /// GATT/SR/GAW/BI-02-C, BI-03-C, BI-04-C Write – Invalid Handle, Write Not Permitted,
    /// Insufficient Authorization (Part F 3.4.5.1, Table 3.4).
    @Test("GATT/SR/GAW/BI-02-C, BI-03-C, BI-04-C") func writeErrors() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("12 0000 010203", "01 12 0000 01"),
            ("12 1200 01", "01 12 1200 03"),
            ("12 1600 01", "01 12 1600 08"),
            ("12 1d00 01", "01 12 1d00 0d"),     // a CCCD is 2 octets: Invalid Attribute Value Length
        ])
    }

    /// Part G 3.3.3.3 (Table 3.11): the Notification bit can only be set when the
    /// characteristic's properties have Notify, the Indication bit only with Indicate. A write
    /// setting one anyway is refused with 0xFD, Client Characteristic Configuration Descriptor
    /// Improperly Configured (Core Specification Supplement Part B 1.2), and the CCCD keeps its
    /// value. After GAP and GATT (Service Changed 0008 is Indicate only, CCCD 0009, Part G 7.1):
    ///
    ///     000E  Primary Service C000
    ///     000F  Characteristic: read|notify (0x12), value 0010, C001     0011  CCCD
    ///     0012  Characteristic: read|indicate (0x22), value 0013, C002   0014  CCCD
    @Test("GATT/SR: CCCD bit without its property (Part G 3.3.3.3)") func cccdBitWithoutItsProperty() async {
        let server = GATTServer(services: [GATTService(uuid: 0xC000, characteristics: [
            GATTCharacteristic(uuid: 0xC001, properties: [.read, .notify], value: [0x01]),
            GATTCharacteristic(uuid: 0xC002, properties: [.read, .indicate], value: [0x02]),
        ])])
        let (_, link) = await Loopback.connect(server)
        await expectExchanges(link, [
            // The layout above (Part G 3.3.1, 3.3.3.3).
            ("08 0e00 ffff 0328", "09 07 0f00 12 1000 01c0 1200 22 1300 02c0"),
            ("04 1100 1100", "05 01 1100 0229"),
            ("04 1400 1400", "05 01 1400 0229"),
            // Notify only: Indication refused, alone or with Notification; Notification taken.
            ("12 1100 0200", "01 12 1100 fd"),
            ("12 1100 0300", "01 12 1100 fd"),
            ("0a 1100", "0b 0000"),
            ("12 1100 0100", "13"),
            ("12 1100 0200", "01 12 1100 fd"),
            ("0a 1100", "0b 0100"),
            // Indicate only: the other way round.
            ("12 1400 0100", "01 12 1400 fd"),
            ("12 1400 0300", "01 12 1400 fd"),
            ("0a 1400", "0b 0000"),
            ("12 1400 0200", "13"),
            ("0a 1400", "0b 0200"),
            ("12 0900 0100", "01 12 0900 fd"),
            ("0a 0900", "0b 0000"),
            // A Write Command is not answered (Part F 3.4.5.3) and sets nothing either.
            ("52 1400 0100", nil),
            ("0a 1400", "0b 0200"),
        ])
    }

    /// GATT/SR/GAW/BV-07-C Reliable Writes; GATT/SR/GAW/BV-05-C Write Long (Part G 4.9.4–5;
    /// Part F 3.4.6.1–4): Prepare Write Responses echo the request; Execute Write (0x01) writes.
    @Test("GATT/SR/GAW/BV-07-C, BV-05-C") func preparedWrites() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("16 1000 0000 010203", "17 1000 0000 010203"),
            ("16 1000 0300 0405", "17 1000 0300 0405"),
            ("18 01", "19"),
            ("0a 1000", "0b 0102030405"),
            // Cancel (0x00) writes nothing.
            ("16 1000 0000 ff", "17 1000 0000 ff"),
            ("18 00", "19"),
            ("0a 1000", "0b 0102030405"),
        ])
    }

    /// GATT/SR/GAW/BI-25-C, BI-26-C Prepare Write – Invalid Handle, Write Not Permitted
    /// (Part F 3.4.6.1: checked when the request is received).
    @Test("GATT/SR/GAW/BI-25-C, BI-26-C") func prepareWriteErrors() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("16 0000 0000 ff", "01 16 0000 01"),
            ("16 1200 0000 ff", "01 16 1200 03"),
        ])
    }
}

/// Records what the server pushes to one peer, as the octets the bearer would send.
final class RecordingPush: ATTServerPush {
    let sent = Mutex<[[UInt8]]>([])
    let linkSecurity: ATTSecurity
    init(security: ATTSecurity = .none) { linkSecurity = security }
    var security: ATTSecurity { linkSecurity }
    var mtu: Int { 23 }
    func notify(handle: UInt16, value: [UInt8]) async throws {
        sent.withLock { $0.append(ATTPDU.handleValueNotification(handle: handle, value: value).bytes) }
    }
    func indicate(handle: UInt16, value: [UInt8]) async throws {
        sent.withLock { $0.append(ATTPDU.handleValueIndication(handle: handle, value: value).bytes) }
    }
}

@MainActor
@Suite("GATT server conformance: notifications and indications (GATT/SR/GAN, GATT/SR/GAI)")
struct ServerPushConformanceTests {
    /// GATT/SR/GAN/BV-01-C Notifications (Part G 4.10; Part F 3.4.7.1): once the CCCD has
    /// bit 0 set, a Handle Value Notification with the value handle; cut to ATT_MTU − 3.
    @Test("GATT/SR/GAN/BV-01-C") func notification() async {
        let server = GATTServer(services: ConformanceDB.services())
        let push = RecordingPush()
        let peer = ATTPeer(id: 0x40)
        await server.peerConnected(peer, push: push)
        #expect(server.response(to: try! ATTPDU.decode([UInt8](hex: "12 1d00 0100")!), from: peer, mtu: 23, security: .none)?.bytes == [0x13])
        #expect(await server.notify(characteristic: 0xA007, value: [0x42]) == [peer])
        #expect(await server.notify(characteristic: 0xA007, value: Array(0..<30)) == [peer])
        #expect(push.sent.withLock { $0 } == [[0x1B, 0x1C, 0x00, 0x42], [0x1B, 0x1C, 0x00] + Array(0..<20)])
    }

    /// Several values queued for one characteristic (`Peripheral.updateValue`'s drain): one
    /// Handle Value Notification each, in order (Part F 3.4.7.1); a value longer than ATT_MTU − 3
    /// (20 at ATT_MTU 23) is left out for that peer, not cut; none to a peer not subscribed.
    @Test func queuedValuesAreNotifiedInOrderAndTooLongOnesLeftOut() async {
        let server = GATTServer(services: ConformanceDB.services())
        let push = RecordingPush(), other = RecordingPush()
        let peer = ATTPeer(id: 0x40)
        await server.peerConnected(peer, push: push)
        await server.peerConnected(ATTPeer(id: 0x41), push: other)
        #expect(server.response(to: try! ATTPDU.decode([UInt8](hex: "12 1d00 0100")!), from: peer, mtu: 23, security: .none)?.bytes == [0x13])
        await server.notify(characteristic: 0xA007, values: [[0x01], Array(0..<21), [0x02, 0x03], Array(0..<20)], toHandles: nil)
        #expect(push.sent.withLock { $0 } == [[0x1B, 0x1C, 0x00, 0x01], [0x1B, 0x1C, 0x00, 0x02, 0x03], [0x1B, 0x1C, 0x00] + Array(0..<20)])
        #expect(other.sent.withLock { $0 }.isEmpty)
    }

    /// GATT/SR/GAI/BV-01-C Indications (Part G 4.11; Part F 3.4.7.2): bit 1 of the CCCD; a
    /// Handle Value Indication with the value handle.
    @Test("GATT/SR/GAI/BV-01-C") func indication() async {
        let server = GATTServer(services: ConformanceDB.services())
        let push = RecordingPush()
        let peer = ATTPeer(id: 0x40)
        await server.peerConnected(peer, push: push)
        #expect(server.response(to: try! ATTPDU.decode([UInt8](hex: "12 1d00 0200")!), from: peer, mtu: 23, security: .none)?.bytes == [0x13])
        #expect(await server.notify(characteristic: 0xA007, value: [0x42]).isEmpty, "notifications are not enabled")
        #expect(await server.indicate(characteristic: 0xA007, value: [0x43]) == [peer])
        #expect(push.sent.withLock { $0 } == [[0x1D, 0x1C, 0x00, 0x43]])
    }

    /// Service Changed (Part G 7.1): after the database changes, an indication of 0x0008 with
    /// the affected range (here 0x0001–0xFFFF) to a client that enabled it.
    @Test("GATT/SR: Service Changed indication (Part G 7.1)") func serviceChanged() async {
        let server = GATTServer(services: ConformanceDB.services())
        let push = RecordingPush()
        let peer = ATTPeer(id: 0x40)
        await server.peerConnected(peer, push: push)
        #expect(server.response(to: try! ATTPDU.decode([UInt8](hex: "12 0900 0200")!), from: peer, mtu: 23, security: .none)?.bytes == [0x13])
        #expect(await server.update(services: []) == [peer])
        #expect(push.sent.withLock { $0 } == [[UInt8](hex: "1d 0800 0100 ffff")!])
    }
}

@MainActor
@Suite("ATT server conformance: PDUs refused per Core Vol 3 Part F")
struct ATTServerConformanceTests {
    /// Part F 3.4.1.1 Table 3.4 and 3.3: a malformed request is Invalid PDU (handle 0); an
    /// unknown request is Request Not Supported; an unknown command is ignored (3.3.1:
    /// "a server ... shall ignore" a command it does not support).
    @Test func malformedAndUnknown() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("0a 01", "01 0a 0000 04"),
            ("12 10", "01 12 0000 04"),
            ("0e 1000", "01 0e 0000 04"),          // Read Multiple needs two handles or more (3.4.4.7)
            ("3f 0102", "01 3f 0000 06"),
            ("7f 01", nil),
            ("18 02", "01 18 0000 04"),            // Execute Write flags other than 0x00/0x01 (3.4.6.3)
        ])
    }

    /// Part F 3.4.3.1, 3.4.4.1, 3.4.4.9: Starting Handle 0x0000 or above the Ending Handle is
    /// Invalid Handle naming the Starting Handle; Read By Group Type of a non-grouping type
    /// is Unsupported Group Type (0x10).
    @Test func handleRanges() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("04 0000 ffff", "01 04 0000 01"),
            ("04 0500 0400", "01 04 0500 01"),
            ("06 0000 ffff 0028 00a0", "01 06 0000 01"),
            ("10 0500 0400 0028", "01 10 0500 01"),
            ("10 0100 ffff 0328", "01 10 0100 10"),
        ])
    }

    /// Part F 3.4.3.3: Find By Type Value compares the value this client would read; a CCCD's
    /// is the client's own (Part G 3.3.3.3: one per client).
    @Test func findByTypeValueComparesTheClientsOwnValue() async {
        let (_, link) = await ConformanceDB.connect()
        await expectExchanges(link, [
            ("06 0100 ffff 0229 0000", "07 0900 0900 1d00 1d00"),
            ("12 1d00 0100", "13"),
            ("06 0100 ffff 0229 0000", "07 0900 0900"),
            ("06 0100 ffff 0229 0100", "07 1d00 1d00"),
        ])
    }

    /// Part F 3.2.8: ATT_MTU is the largest PDU either side sends. A request longer than it is
    /// Invalid PDU (Table 3.4) and not acted on; a longer command is dropped.
    @Test func longerThanATTMTU() async {
        let (_, link) = await ConformanceDB.connect()
        let write24 = "12 1000 " + [UInt8](repeating: 0xEE, count: 21).hex
        let command24 = "52 1000 " + [UInt8](repeating: 0xEE, count: 21).hex
        await expectExchanges(link, [(write24, "01 12 0000 04"), (command24, nil), ("0a 1000", "0b 426c75655a")])
    }
}
