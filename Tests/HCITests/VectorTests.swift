import Testing
@testable import HCI

/// Byte vectors written out from the Core specification's parameter tables and checked against
/// Bumble's encoder (bumble 0.0.236, `bytes(HCI_..._Command(...))`).
@Suite struct VectorTests {
    @Test func leSetAdvertisingParameters() throws {
        // ADV_IND, 1.28 s interval (0x0800), own public, all three channels: as BlueZ sends it.
        let cmd = LESetAdvertisingParameters(advertisingIntervalMin: 0x0800, advertisingIntervalMax: 0x0800)
        let h4: [UInt8] = [0x01, 0x06, 0x20, 0x0F, 0x00, 0x08, 0x00, 0x08, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00]
        #expect(HCIPacket.command(cmd.packet).h4 == h4)
        #expect(try LESetAdvertisingParameters.decode(Array(h4.dropFirst(4))) == cmd)
        #expect(cmd.fields[0].note == "1280.00 ms")
        #expect(cmd.fields[2].note == "ADV_IND")
    }

    @Test func commandsAnsweredWithCommandStatus() {
        // Core Vol 4 Part E 7.1.6, 7.8.12, 7.8.18, 7.8.21, 7.8.24, 7.8.49, 7.8.66, 7.8.67: the controller answers these
        // with Command Status (the result comes in a later event); every other command with Command Complete.
        var status: Set<UInt16> = []
        for t in allCommandTypes where t.completesWithStatus { status.insert(t.opcode.rawValue) }
        #expect(status == [0x0406, 0x200D, 0x2013, 0x2016, 0x2019, 0x2032, 0x2043, 0x2044])
    }

    @Test func startUpCommandsLinuxSendsMatchBumble() throws {
        // H4 bytes from bumble's encoder; layouts in Core Vol 4 Part E 7.8.15-7.8.17, 7.3.12, 7.3.69.
        let add = LEAddDeviceToFilterAcceptList(addressType: 0x00, address: BDAddress([0x01, 0x02, 0x03, 0x04, 0x05, 0x06]))
        #expect(HCIPacket.command(add.packet).h4 == [0x01, 0x11, 0x20, 0x07, 0x00, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01])
        let remove = LERemoveDeviceFromFilterAcceptList(addressType: 0x01, address: BDAddress([0xC1, 0x02, 0x03, 0x04, 0x05, 0x06]))
        #expect(HCIPacket.command(remove.packet).h4 == [0x01, 0x12, 0x20, 0x07, 0x01, 0x06, 0x05, 0x04, 0x03, 0x02, 0xC1])
        #expect(try LERemoveDeviceFromFilterAcceptList.decode(Array(HCIPacket.command(remove.packet).h4.dropFirst(4))) == remove)
        #expect(HCIPacket.command(LEClearFilterAcceptList().packet).h4 == [0x01, 0x10, 0x20, 0x00])
        #expect(HCIPacket.command(ReadLocalName().packet).h4 == [0x01, 0x14, 0x0C, 0x00])
        let page2 = SetEventMaskPage2(eventMaskPage2: 0x0000_0000_0000_8000)
        #expect(HCIPacket.command(page2.packet).h4 == [0x01, 0x63, 0x0C, 0x08, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00])
        // Supported_Commands bits (Core Vol 4 Part E 6.27; bumble's HCI_SUPPORTED_COMMANDS_MASKS).
        #expect(ReadLocalSupportedCommands.bitPosition(ReadLocalName.opcode).map { [$0.octet, $0.bit] } == [7, 1])
        #expect(ReadLocalSupportedCommands.bitPosition(SetEventMaskPage2.opcode).map { [$0.octet, $0.bit] } == [22, 2])
        #expect(ReadLocalSupportedCommands.bitPosition(LEAddDeviceToFilterAcceptList.opcode).map { [$0.octet, $0.bit] } == [27, 0])
        #expect(ReadLocalSupportedCommands.bitPosition(LERemoveDeviceFromFilterAcceptList.opcode).map { [$0.octet, $0.bit] } == [27, 1])
        // Read Local Name's return: 248 octets, the name then zeros (7.3.12).
        let name = ReadLocalName.ReturnParameters(name: "ble-hci")
        var w = ByteWriter()
        name.encode(into: &w)
        #expect(w.bytes.count == 248 && Array(w.bytes.prefix(8)) == Array("ble-hci".utf8) + [0])
        #expect(name.fields == [Field("localName", .text("ble-hci"))])
    }

    @Test func leCreateConnection() throws {
        let params: [UInt8] = [0x60, 0x00, 0x30, 0x00, 0x00, 0x01, 0xF5, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0, 0x00,
                               0x18, 0x00, 0x28, 0x00, 0x00, 0x00, 0x2A, 0x00, 0x00, 0x00, 0x00, 0x00]
        let c = try LECreateConnection.decode(params)
        #expect(c.leScanInterval == 0x60 && c.leScanWindow == 0x30)
        #expect(c.peerAddressType == .random && c.peerAddress == addrA)
        #expect(c.connectionIntervalMin == 0x18 && c.connectionIntervalMax == 0x28 && c.supervisionTimeout == 0x2A)
        #expect(c.packet.parameters == params)
        #expect(LECreateConnection.completesWithStatus)
        #expect(c.fields.first { $0.name == "connectionIntervalMin" }?.note == "30.00 ms")
        #expect(c.fields.first { $0.name == "supervisionTimeout" }?.note == "420.00 ms")
    }

    @Test func leAdvertisingReportWithTwoReports() throws {
        let body: [UInt8] = [0x3E, 0x1D, 0x02, 0x02,
            // ADV_IND, random, F0:F1:F2:F3:F4:F5, 3 octets flags, RSSI -60
            0x00, 0x01, 0xF5, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0, 0x03, 0x02, 0x01, 0x06, 0xC4,
            // SCAN_RSP, public, C0:11:22:33:44:55, name "AB", RSSI -70
            0x04, 0x00, 0x55, 0x44, 0x33, 0x22, 0x11, 0xC0, 0x04, 0x03, 0x09, 0x41, 0x42, 0xBA]
        guard case .event(let p) = try HCIPacket(type: .event, body: body) else { Issue.record("not an event"); return }
        let meta = try #require(try HCIEvents.decode(p) as? LEMetaEvent)
        let rep = try #require(meta.subevent as? LEAdvertisingReport)
        #expect(rep.reports.count == 2)
        #expect(rep.reports[0] == .init(eventType: 0, addressType: .random, address: addrA, data: [0x02, 0x01, 0x06], rssi: -60))
        #expect(rep.reports[1] == .init(eventType: 4, addressType: .public, address: addrB, data: [0x03, 0x09, 0x41, 0x42], rssi: -70))
        #expect(rep.reports[1].isScanResponse && rep.reports[0].isConnectable)
        #expect(meta.packet == p)
        guard case .list(let items)? = rep.fields.first(where: { $0.name == "reports" })?.value,
              case .object(let first)? = items.first else { Issue.record("no reports list"); return }
        #expect(first.first { $0.name == "eventType" }?.note == "ADV_IND")
        #expect(first.first { $0.name == "rssi" }?.note == "-60 dBm")
    }

    @Test func leExtendedAdvertisingReport() throws {
        // One legacy ADV_IND report as Bumble's controller sends it: event type 0x0013, random address,
        // 1M primary, no secondary, no ADI (SID 0xFF), tx power 127 (n/a), RSSI -50, no periodic, 3 octets.
        let params: [UInt8] = [0x0D, 0x01,
            0x13, 0x00, 0x01, 0xF5, 0xF4, 0xF3, 0xF2, 0xF1, 0xF0, 0x01, 0x00, 0xFF, 0x7F, 0xCE, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x02, 0x01, 0x06]
        let meta = try #require(try HCIEvents.decode(HCIEventPacket(code: 0x3E, parameters: params)) as? LEMetaEvent)
        let rep = try #require(meta.subevent as? LEExtendedAdvertisingReport).reports
        #expect(rep.count == 1)
        let r = try #require(rep.first)
        #expect(r.eventType.isLegacy && r.eventType.isConnectable && r.eventType.isScannable && !r.eventType.isScanResponse)
        #expect(r.eventType.description == "ADV_IND")
        #expect(r.deviceAddressType == .random && r.address == addrA)
        #expect(r.primaryPHY == 1 && r.secondaryPHY == 0 && r.advertisingSID == 0xFF)
        #expect(r.txPower == 127 && r.rssi == -50 && r.data == [0x02, 0x01, 0x06])
        #expect(meta.packet.parameters == params)

        // An extended (non-legacy) report: connectable, incomplete-truncated, anonymous.
        let t = ExtendedAdvertisingEventType(rawValue: 0x0041)
        #expect(t.isConnectable && !t.isLegacy && t.dataStatus == 2)
        #expect(t.description == "connectable, incomplete, truncated")
        #expect(ExtendedAdvertisingEventType.scanRspToAdvInd.isScanResponse)
    }

    /// Connection Complete (Core v5.4 Vol 4 Part E 7.7.3): Status, Connection_Handle (12 bits),
    /// BD_ADDR (little-endian), Link_Type (0x01: ACL), Encryption_Enabled; 11 octets.
    @Test func connectionCompleteOfABREDRLink() throws {
        let bytes: [UInt8] = [0x03, 0x0B, 0x00, 0x0B, 0x00, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x01, 0x00]
        let e = try #require(try HCIEvents.decode(HCIEventPacket(code: bytes[0], parameters: Array(bytes[2...]))) as? ConnectionComplete)
        #expect(e == ConnectionComplete(status: .success, connectionHandle: 0x000B, bdAddr: BDAddress(string: "11:22:33:44:55:66")!,
                                        linkType: 0x01, encryptionEnabled: 0x00))
        #expect(e.packet.parameters == Array(bytes[2...]))
    }

    @Test func numberOfCompletedPacketsWithTwoHandles() throws {
        // Each handle followed by its count: (0x0040, 1), (0x0041, 2).
        let p = HCIEventPacket(code: 0x13, parameters: [0x02, 0x40, 0x00, 0x01, 0x00, 0x41, 0x00, 0x02, 0x00])
        let e = try #require(try HCIEvents.decode(p) as? NumberOfCompletedPackets)
        #expect(e.entries == [.init(connectionHandle: 0x40, numCompletedPackets: 1), .init(connectionHandle: 0x41, numCompletedPackets: 2)])
        #expect(e.packet == p)
    }

    @Test func commandCompleteLEReadBufferSize() throws {
        // 1 command packet, opcode 0x2002, Success, 251-octet buffers, 15 of them.
        let body: [UInt8] = [0x0E, 0x07, 0x01, 0x02, 0x20, 0x00, 0xFB, 0x00, 0x0F]
        guard case .event(let p) = try HCIPacket(type: .event, body: body) else { Issue.record("not an event"); return }
        let cc = try #require(try HCIEvents.decode(p) as? CommandComplete)
        let r = try cc.result(LEReadBufferSize.self)
        #expect(r.leACLDataPacketLength == 251 && r.totalNumLEACLDataPackets == 15)
        #expect(cc.fields.map(\.name) == ["numHCICommandPackets", "commandOpcode", "status", "leACLDataPacketLength", "totalNumLEACLDataPackets"])
        #expect(CommandComplete(LEReadBufferSize.self, r).packet == p)
        // A failed command throws HCIError with the status.
        let failed = CommandComplete(opcode: LEReadBufferSize.opcode, returnParameters: [0x01])
        #expect(throws: HCIError(.unknownCommand, opcode: LEReadBufferSize.opcode)) { try failed.result(LEReadBufferSize.self) }
    }

    @Test func extendedCommandsMatchBumble() throws {
        // Parameters from bumble's encoder (header stripped).
        let params = [UInt8](hex: "011300300000400000070100000000000000007f0100010000")!
        let c = try LESetExtendedAdvertisingParameters.decode(params)
        #expect(c == LESetExtendedAdvertisingParameters(advertisingHandle: 1, advertisingEventProperties: [.connectable, .scannable, .legacy],
                                                         primaryAdvertisingIntervalMin: 0x30, primaryAdvertisingIntervalMax: 0x40,
                                                         ownAddressType: .random))
        #expect(c.packet.parameters == params)

        let create = [UInt8](hex: "000001f5f4f3f2f1f005600030001800280000002a0000000000610031001900290001002b0000000000")!
        let cc = try LEExtendedCreateConnection.decode(create)
        #expect(cc.initiatingPHYs == 0x05 && cc.phyParameters.count == 2)
        #expect(cc.phyParameters[1] == .init(scanInterval: 0x61, scanWindow: 0x31, connectionIntervalMin: 0x19, connectionIntervalMax: 0x29,
                                             maxLatency: 1, supervisionTimeout: 0x2B))
        #expect(cc.packet.parameters == create)

        let scan = [UInt8](hex: "00000501100008000020001000")!
        let sp = try LESetExtendedScanParameters.decode(scan)
        #expect(sp.phyParameters == [.init(scanType: 1, scanInterval: 0x10, scanWindow: 0x08), .init(scanType: 0, scanInterval: 0x20, scanWindow: 0x10)])
        #expect(sp.packet.parameters == scan)

        let enable = [UInt8](hex: "01020100000002640005")!
        let en = try LESetExtendedAdvertisingEnable.decode(enable)
        #expect(en.sets == [.init(advertisingHandle: 1), .init(advertisingHandle: 2, duration: 100, maxExtendedAdvertisingEvents: 5)])
        #expect(en.packet.parameters == enable)
    }

    @Test func supportedCommandsBitmask() throws {
        // Octet 25 bit 0 is LE Set Event Mask, octet 26 bit 3 LE Set Scan Enable (Core Vol 4 Part E 6.27).
        var bits = [UInt8](repeating: 0, count: 64)
        bits[25] = 0x01
        let r = ReadLocalSupportedCommands.ReturnParameters(supportedCommands: bits)
        #expect(r.supports(LESetEventMask.opcode))
        #expect(!r.supports(LESetScanEnable.opcode))
        #expect(r.supports(ReadLocalSupportedCommands.opcode))
        #expect(!r.supports(HCIOpcode(rawValue: 0xFC01)))
        let all = ReadLocalSupportedCommands.ReturnParameters(supporting: allCommandTypes.map { $0.opcode })
        #expect(all.supportedCommands[26] & 0x08 != 0)
        for t in allCommandTypes { #expect(all.supports(t.opcode), "\(t.name)") }
        // Every registered command but the mandatory one has a distinct bit.
        let positions = allCommandTypes.filter { $0.opcode != ReadLocalSupportedCommands.opcode }.compactMap {
            ReadLocalSupportedCommands.bitPosition($0.opcode).map { $0.octet * 8 + $0.bit }
        }
        #expect(positions.count == allCommandTypes.count - 1)
        #expect(Set(positions).count == positions.count)
    }

    @Test func eventMasks() {
        #expect(LESetEventMask.Mask.connectionComplete.rawValue == 0x01)
        #expect(LESetEventMask.Mask.extendedAdvertisingReport.rawValue == 1 << 12)
        #expect(LESetEventMask.Mask.enhancedConnectionCompleteV2.rawValue == 1 << 40)
        #expect(SetEventMask.Mask.leMeta.rawValue == 0x2000_0000_0000_0000)
        #expect(SetEventMask(.leHost).packet.parameters == [0x90, 0x80, 0x00, 0x02, 0x00, 0x80, 0x00, 0x20])
    }

    @Test func leFeatureNames() throws {
        let r = try LEReadLocalSupportedFeatures.ReturnParameters(returnParameters: &ReaderBox([0x01, 0x19, 0, 0, 0, 0, 0, 0]).reader)
        #expect(r.leFeatures.contains(.leEncryption) && r.leFeatures.contains(.le2MPHY))
        #expect(r.leFeatures.contains(.leCodedPHY) && r.leFeatures.contains(.leExtendedAdvertising))
        #expect(!r.leFeatures.contains(.llPrivacy))
        #expect(r.leFeatures.description == "LE Encryption, LE 2M PHY, LE Coded PHY, LE Extended Advertising")
    }
}

/// Lets a test pass a fresh reader inout in one expression.
final class ReaderBox { var reader: ByteReader; init(_ b: [UInt8]) { reader = ByteReader(b) } }
