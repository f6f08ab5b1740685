import Testing
@testable import HCI

/// The parameter shapes Tools/pdl/hci.pdl describes beyond fixed fields: per-PHY blocks, a
/// list after parameters, 24-bit intervals and the legacy length-plus-31-octets data.
@Suite struct DescribedShapesTests {
    // Core v5.4 Vol 4 Part E 7.8.64: one block of Scan_Type, Scan_Interval, Scan_Window per bit set
    // in Scanning_PHYs (bit 0 LE 1M, bit 2 LE Coded), lowest bit first.
    @Test func perPHYBlocksFollowTheMask() throws {
        let scan = LESetExtendedScanParameters(scanningPHYs: 0x05, phyParameters: [.init(scanType: 0), .init(scanType: 1, scanInterval: 0x20)])
        #expect(scan.packet.parameters == [0x00, 0x00, 0x05, 0x00, 0x10, 0x00, 0x10, 0x00, 0x01, 0x20, 0x00, 0x10, 0x00])
        guard case .list(let blocks)? = scan.fields.last?.value else { Issue.record("no phys list"); return }
        let phys = blocks.compactMap { block -> String? in
            guard case .object(let fields) = block, case .text(let phy)? = fields.first?.value else { return nil }
            return phy
        }
        #expect(phys == ["LE 1M", "LE Coded"])
        // A block the mask does not account for (built by hand) is shown, its PHY unknown.
        let extra = LESetExtendedScanParameters(scanningPHYs: 0x01, phyParameters: [.init(), .init()])
        guard case .list(let extraBlocks)? = extra.fields.last?.value, case .object(let last)? = extraBlocks.last else {
            Issue.record("no phys list"); return
        }
        #expect(last.first == .text("phy", "?"))
    }

    @Test func perPHYBlocksShortOfTheMaskThrowNamingTheField() {
        // Scanning_PHYs 0x05 announces two blocks; only one follows.
        #expect(throws: DecodeError.truncated(field: "scanType", needed: 1, available: 0)) {
            try LESetExtendedScanParameters.decode([0x00, 0x00, 0x05, 0x01, 0x10, 0x00, 0x10, 0x00])
        }
        // Every bit set and nothing after: the first block's first field is missing.
        #expect(throws: DecodeError.truncated(field: "scanInterval", needed: 2, available: 0)) {
            try LEExtendedCreateConnection.decode([0x00, 0x00, 0x00, 1, 2, 3, 4, 5, 6, 0xFF])
        }
    }

    // Core v5.4 Vol 4 Part E 7.8.53: Primary_Advertising_Interval_Min/Max are 3 octets.
    @Test func twentyFourBitIntervalsKeepThreeOctets() {
        let p = LESetExtendedAdvertisingParameters(primaryAdvertisingIntervalMin: 0x0100_0800, primaryAdvertisingIntervalMax: 0x00FF_FFFF)
        #expect(p.primaryAdvertisingIntervalMin == 0x0800)
        #expect(Array(p.packet.parameters[3..<9]) == [0x00, 0x08, 0x00, 0xFF, 0xFF, 0xFF])
    }

    // Core v5.4 Vol 4 Part E 7.8.7: Advertising_Data_Length 0x00-0x1F, then always 31 octets of
    // Advertising_Data (the significant part first).
    @Test func legacyDataIsALengthAndThirtyOneOctets() throws {
        let c = LESetAdvertisingData(advertisingData: [0x02, 0x01, 0x06])
        #expect(c.packet.parameters == [0x03, 0x02, 0x01, 0x06] + Array(repeating: 0, count: 28))
        #expect(try LESetAdvertisingData.decode(c.packet.parameters) == c)
        #expect(LESetScanResponseData(scanResponseData: Array(repeating: 7, count: 40)).scanResponseData.count == 31)
        #expect(throws: DecodeError.invalid("advertisingDataLength 32 exceeds 31")) {
            try LESetAdvertisingData.decode([32] + Array(repeating: 0, count: 31))
        }
        #expect(throws: DecodeError.truncated(field: "scanResponseData", needed: 31, available: 2)) {
            try LESetScanResponseData.decode([2, 0x01, 0x02])
        }
    }

    // Core v5.4 Vol 4 Part E 7.8.56: Enable, Num_Sets, then each set's three parameters.
    @Test func listAfterParameters() throws {
        let c = try LESetExtendedAdvertisingEnable.decode([0x01, 0x01, 0x02, 0x64, 0x00, 0x05])
        #expect(c == LESetExtendedAdvertisingEnable(enable: true, sets: [.init(advertisingHandle: 2, duration: 100, maxExtendedAdvertisingEvents: 5)]))
        #expect(throws: DecodeError.truncated(field: "advertisingHandle/duration/maxExtendedAdvertisingEvents", needed: 12, available: 4)) {
            try LESetExtendedAdvertisingEnable.decode([0x01, 0x03, 0x02, 0x64, 0x00, 0x05])
        }
    }

    // Core v5.4 Vol 4 Part E 7.3.1 (Event_Mask) and 7.8.1 (LE_Event_Mask: bit n, subevent n+1),
    // now code tables in hci-codes.pdl: the same bits under the spec's names.
    @Test func eventMasksAreTheSpecBits() {
        #expect(SetEventMask.Mask.leHost.rawValue == 1 << 4 | 1 << 7 | 1 << 15 | 1 << 25 | 1 << 47 | 1 << 61)
        #expect(EventMask.leMeta.description == "LE Meta")
        #expect(LESetEventMask.Mask.scanTimeout.rawValue == 1 << (0x11 - 1))
        #expect(LEEventMask([.connectionComplete, .longTermKeyRequest]).description == "LE Connection Complete, LE Long Term Key Request")
    }

    // Core v5.4 Vol 4 Part E 7.7.65.2: each report's Data_Length, then that many octets of Data;
    // 7.8.54: an extended advertising data fragment carries at most 251 octets.
    @Test func lengthPrefixedDataNamesItsFields() {
        // One report whose Data_Length (5) runs past what follows (2 octets and RSSI).
        #expect(throws: DecodeError.truncated(field: "data", needed: 5, available: 3)) {
            try HCIEvents.decode(HCIEventPacket(code: 0x3E, parameters: [0x02, 0x01, 0x00, 0x01, 1, 2, 3, 4, 5, 6, 0x05, 0xAA, 0xBB, 0xC4]))
        }
        let report = LEAdvertisingReport.Report(eventType: 0, addressType: .random, address: .zero, data: Array(repeating: 1, count: 300), rssi: -60)
        #expect(report.data.count == 255)
        // The error names the parameter as 7.8.54 does (Advertising_Data_Length).
        #expect(throws: DecodeError.invalid("advertisingDataLength 252 exceeds 251")) {
            try LESetExtendedAdvertisingData.decode([0x01, 0x03, 0x01, 252] + Array(repeating: 0, count: 252))
        }
        let fragment = LESetExtendedAdvertisingData(advertisingHandle: 1, advertisingData: Array(repeating: 2, count: 260))
        #expect(fragment.packet.parameters.count == 4 + 251 && fragment.packet.parameters[3] == 251)
    }

    // Core v5.4 Vol 4 Part E 7.8.55: Advertising_Handle, Operation, Fragment_Preference,
    // Scan_Response_Data_Length, Scan_Response_Data (the layout of 7.8.54 under its own names).
    @Test func extendedScanResponseFragmentNamesItsData() throws {
        let c = LESetExtendedScanResponseData(advertisingHandle: 2, operation: 0x01, scanResponseData: [0x03, 0x09, 0x41, 0x42])
        #expect(c.packet.parameters == [0x02, 0x01, 0x01, 0x04, 0x03, 0x09, 0x41, 0x42])
        #expect(try LESetExtendedScanResponseData.decode(c.packet.parameters) == c)
        #expect(c.fields.map(\.name) == ["advertisingHandle", "operation", "fragmentPreference",
                                         "scanResponseDataLength", "scanResponseData"])
        #expect(throws: DecodeError.invalid("scanResponseDataLength 252 exceeds 251")) {
            try LESetExtendedScanResponseData.decode([0x01, 0x03, 0x01, 252] + Array(repeating: 0, count: 252))
        }
    }
}
