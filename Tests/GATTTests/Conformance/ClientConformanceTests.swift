import Testing
import HCI
import ATT
@testable import GATT

// Our GATT client against scripted peers: every request it sends must be the octets the
// procedure of Core v5.4 Vol 3 Part G 4 prescribes (in order), and the answers are the
// spec's encodings (Part F 3.4). Organised by GATT.TS client case identifiers, cross-checked
// with BlueZ unit/test-gatt.c (/TP/<group>/CL/<id>). ATT_MTU is 23.

@Suite("GATT client conformance (GATT/CL/...)", .timeLimit(.minutes(1)))
struct ClientConformanceTests {
    /// GATT/CL/GAD/BV-01-C Discover All Primary Services (Part G 4.4.1): Read By Group Type
    /// 0x2800 from 0x0001, then from one past the last End Group Handle, until Attribute Not
    /// Found.
    @Test("GATT/CL/GAD/BV-01-C") func discoverAllPrimaryServices() async throws {
        let peer = ScriptedServer([
            ("10 0100 ffff 0028", "11 06 0100 0500 0018 0600 0900 0118"),
            ("10 0a00 ffff 0028", "11 14 0a00 1000 " + ConformanceDB.u128LE),
            ("10 1100 ffff 0028", "01 10 1100 0a"),
        ])
        let services = try await GATTClient(requester: peer).discoverServices()
        #expect(services == [GATTRemoteService(uuid: 0x1800, startHandle: 1, endHandle: 5),
                             GATTRemoteService(uuid: 0x1801, startHandle: 6, endHandle: 9),
                             GATTRemoteService(uuid: ConformanceDB.u128, startHandle: 0x0A, endHandle: 0x10)])
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAD/BV-02-C Discover Primary Service by Service UUID (Part G 4.4.2): Find By
    /// Type Value 0x2800 with the UUID, continuing after each Group End Handle.
    @Test("GATT/CL/GAD/BV-02-C") func discoverPrimaryServiceByUUID() async throws {
        let peer = ScriptedServer([
            ("06 0100 ffff 0028 0d18", "07 0100 0700"),
            ("06 0800 ffff 0028 0d18", "01 06 0800 0a"),
        ])
        #expect(try await GATTClient(requester: peer).discoverServices(uuid: 0x180D)
                == [GATTRemoteService(uuid: 0x180D, startHandle: 1, endHandle: 7)])
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAD/BV-03-C Find Included Services (Part G 4.5.1): Read By Type 0x2802 over the
    /// service; an include without a UUID (4 octets) names a 128-bit service, whose UUID is
    /// read from its declaration with a Read Request.
    @Test("GATT/CL/GAD/BV-03-C") func findIncludedServices() async throws {
        let peer = ScriptedServer([
            ("08 0100 0f00 0228", "09 06 0200 0800 0f00"),
            ("08 0300 0f00 0228", "01 08 0300 0a"),
            ("0a 0800", "0b " + ConformanceDB.u128LE),
        ])
        let included = try await GATTClient(requester: peer).discoverIncludedServices(
            of: GATTRemoteService(uuid: 0x180A, startHandle: 1, endHandle: 0x0F))
        #expect(included == [GATTRemoteService(uuid: ConformanceDB.u128, primary: false, startHandle: 8, endHandle: 0x0F)])
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAD/BV-04-C Discover All Characteristics of a Service (Part G 4.6.1): Read By
    /// Type 0x2803, continuing after the last declaration handle; each characteristic ends
    /// before the next declaration, the last at the service's end.
    @Test("GATT/CL/GAD/BV-04-C") func discoverAllCharacteristics() async throws {
        let peer = ScriptedServer([
            ("08 0100 0600 0328", "09 07 0200 02 0300 002a 0400 12 0500 012a"),
            ("08 0500 0600 0328", "01 08 0500 0a"),
        ])
        let chars = try await GATTClient(requester: peer).discoverCharacteristics(
            of: GATTRemoteService(uuid: 0x1800, startHandle: 1, endHandle: 6))
        #expect(chars == [
            GATTRemoteCharacteristic(uuid: 0x2A00, declarationHandle: 2, valueHandle: 3, properties: .read, endHandle: 3),
            GATTRemoteCharacteristic(uuid: 0x2A01, declarationHandle: 4, valueHandle: 5, properties: [.read, .notify], endHandle: 6),
        ])
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAD/BV-06-C Discover All Characteristic Descriptors (Part G 4.7.1): Find
    /// Information from the value handle + 1 to the characteristic's end.
    @Test("GATT/CL/GAD/BV-06-C") func discoverAllDescriptors() async throws {
        let peer = ScriptedServer([("04 0600 0700", "05 01 0600 0229 0700 0129")])
        let c = GATTRemoteCharacteristic(uuid: 0x2A01, declarationHandle: 4, valueHandle: 5, properties: .notify, endHandle: 7)
        #expect(try await GATTClient(requester: peer).discoverDescriptors(of: c)
                == [GATTRemoteDescriptor(uuid: 0x2902, handle: 6), GATTRemoteDescriptor(uuid: 0x2901, handle: 7)])
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAR/BV-01-C Read Characteristic Value; GATT/CL/GAR/BI-01-C, BI-02-C: the
    /// server's Error Response reaches the caller with its code and handle unchanged.
    @Test("GATT/CL/GAR/BV-01-C, BI-01-C, BI-02-C") func read() async throws {
        let peer = ScriptedServer([
            ("0a 0300", "0b 010203"),
            ("0a 0000", "01 0a 0000 01"),
            ("0a 0300", "01 0a 0300 02"),
        ])
        let client = GATTClient(requester: peer)
        #expect(try await client.read(handle: 3) == [1, 2, 3])
        await #expect(throws: ATTError(.invalidHandle, requestOpcode: .readRequest, handle: 0)) { _ = try await client.read(handle: 0) }
        await #expect(throws: ATTError(.readNotPermitted, requestOpcode: .readRequest, handle: 3)) { _ = try await client.read(handle: 3) }
    }

    /// GATT/CL/GAR/BV-04-C Read Long Characteristic Values (Part G 4.8.3): a Read Response of
    /// ATT_MTU − 1 octets is followed by Read Blob Requests at the octets read so far, until
    /// a part shorter than ATT_MTU − 1.
    @Test("GATT/CL/GAR/BV-04-C") func readLong() async throws {
        let v = ConformanceDB.long45
        let peer = ScriptedServer([
            ("0a 0300", "0b " + Array(v[0..<22]).hex),
            ("0c 0300 1600", "0d " + Array(v[22..<44]).hex),
            ("0c 0300 2c00", "0d 2c"),
        ])
        #expect(try await GATTClient(requester: peer).read(handle: 3) == v)
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAR/BV-05-C Read Multiple Characteristic Values (Part G 4.8.4).
    @Test("GATT/CL/GAR/BV-05-C") func readMultiple() async throws {
        let peer = ScriptedServer([("0e 0300 0700", "0f 010203")])
        #expect(try await GATTClient(requester: peer).readMultiple(handles: [3, 7]) == [1, 2, 3])
    }

    /// Read Multiple Variable Length Characteristic Values (Part G 4.8.5; Part F 3.4.4.12): a
    /// value cut at ATT_MTU (its Value Length 45 says so) is completed with Read Blob from the
    /// octets received; a handle the response had no room for is read on its own.
    @Test("GATT/CL/GAR: Read Multiple Variable (Part G 4.8.5)") func readMultipleVariable() async throws {
        let v = ConformanceDB.long45
        let peer = ScriptedServer([
            ("20 0300 0500", "21 2d00 " + Array(v[0..<20]).hex),
            ("0c 0300 1400", "0d " + Array(v[20..<42]).hex),
            ("0c 0300 2a00", "0d " + Array(v[42..<45]).hex),
            ("0a 0500", "0b 0102"),
        ])
        #expect(try await GATTClient(requester: peer).readMultipleVariable(handles: [3, 5]) == [v, [1, 2]])
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAW/BV-01-C Write Without Response (Part G 4.9.1): a Write Command, no answer.
    @Test("GATT/CL/GAW/BV-01-C") func writeWithoutResponse() async throws {
        let peer = ScriptedServer([("52 0700 010203", "")])
        try await GATTClient(requester: peer).writeWithoutResponse([1, 2, 3], handle: 7)
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAW/BV-03-C Write Characteristic Value; GATT/CL/GAW/BI-03-C Write Not Permitted
    /// reaches the caller unchanged (Part G 4.9.3).
    @Test("GATT/CL/GAW/BV-03-C, BI-03-C") func write() async throws {
        let peer = ScriptedServer([("12 0700 010203", "13"), ("12 0700 010203", "01 12 0700 03")])
        let client = GATTClient(requester: peer)
        try await client.write([1, 2, 3], handle: 7)
        await #expect(throws: ATTError(.writeNotPermitted, requestOpcode: .writeRequest, handle: 7)) {
            try await client.write([1, 2, 3], handle: 7)
        }
    }

    /// GATT/CL/GAW/BV-05-C Write Long Characteristic Values (Part G 4.9.4): Prepare Write
    /// Requests of ATT_MTU − 5 octets at increasing offsets, each echo checked, then Execute
    /// Write 0x01.
    @Test("GATT/CL/GAW/BV-05-C") func writeLong() async throws {
        let v: [UInt8] = Array(0..<30)
        let peer = ScriptedServer([
            ("16 0700 0000 " + Array(v[0..<18]).hex, "17 0700 0000 " + Array(v[0..<18]).hex),
            ("16 0700 1200 " + Array(v[18..<30]).hex, "17 0700 1200 " + Array(v[18..<30]).hex),
            ("18 01", "19"),
        ])
        try await GATTClient(requester: peer).write(v, handle: 7)
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAW/BI-26-C Write Long – Write Not Permitted: the error reaches the caller and
    /// the prepared writes are cancelled (Execute Write 0x00).
    @Test("GATT/CL/GAW/BI-26-C") func writeLongRefused() async throws {
        let v: [UInt8] = Array(0..<30)
        let peer = ScriptedServer([
            ("16 0700 0000 " + Array(v[0..<18]).hex, "01 16 0700 03"),
            ("18 00", "19"),
        ])
        await #expect(throws: ATTError(.writeNotPermitted, requestOpcode: .prepareWriteRequest, handle: 7)) {
            try await GATTClient(requester: peer).write(v, handle: 7)
        }
        #expect(peer.unused == 0)
    }

    /// A Prepare Write Response that does not echo the request aborts the write and cancels
    /// the queue (Part G 4.9.5: the client checks the echoed value).
    @Test("GATT/CL/GAW: Reliable Writes echo check (Part G 4.9.5)") func reliableWriteEchoMismatch() async throws {
        let peer = ScriptedServer([
            ("16 0700 0000 0102", "17 0700 0000 0103"),
            ("18 00", "19"),
        ])
        await #expect(throws: GATTClientError.self) { try await GATTClient(requester: peer).reliableWrite([(7, [1, 2])]) }
        #expect(peer.unused == 0)
    }

    /// GATT/CL/GAN/BV-01-C, GATT/CL/GAI/BV-01-C Notifications and Indications (Part G 4.10,
    /// 4.11; 3.3.3.3): the CCCD is written 0x0001 / 0x0002, then values of the value handle
    /// reach the subscriber; other handles do not.
    @Test("GATT/CL/GAN/BV-01-C, GATT/CL/GAI/BV-01-C") func notificationsAndIndications() async throws {
        let peer = ScriptedServer([("12 0600 0100", "13"), ("12 0900 0200", "13")])
        let client = GATTClient(requester: peer)
        let notifying = GATTRemoteCharacteristic(uuid: 0x2A37, declarationHandle: 4, valueHandle: 5, properties: .notify, endHandle: 6)
        let indicating = GATTRemoteCharacteristic(uuid: 0x2A05, declarationHandle: 7, valueHandle: 8, properties: .indicate, endHandle: 9)
        let n = Values(try await client.subscribe(notifying, cccdHandle: 6))
        let i = Values(try await client.subscribe(indicating, cccdHandle: 9))
        await client.received(try ATTPDU.decode([UInt8](hex: "1b 0700 ff")!))   // not subscribed: dropped
        await client.received(try ATTPDU.decode([UInt8](hex: "1b 0500 0102")!))
        #expect(try await next(n) == [1, 2])
        // The indication is handed on while `received` waits for the application to take it.
        let taken = Task { try await next(i) }
        await client.received(try ATTPDU.decode([UInt8](hex: "1d 0800 03")!))
        #expect(try await taken.value == [3])
        #expect(peer.unused == 0)
    }
}
