import Foundation
import Synchronization
import Testing
import TestSupport
import StackTestSupport
import HCI
import Host
import Capture
import VirtualController

/// Issue 28: the air view of two of our hosts on the virtual link, written as the CLI writes
/// it (pcap, linktype 256) and read by tshark: extended advertising and the LL control
/// procedures the hosts' HCI commands imply, with the values the controllers reported over HCI.
@Suite(.timeLimit(.minutes(1))) struct AirViewTests {
    /// In instant mode and with the airtime model (whose connection events write empty PDUs too).
    @Test(arguments: [false, true])
    func extendedAdvertisingAndControlProcedures(airtime: Bool) async throws {
        let (link, transports) = VirtualLink.inProcess(count: 2, aclDataLength: 251, airtime: airtime ? Airtime.Configuration() : nil)
        let recorded = Mutex<[LinkLayerPacket]>([])
        link.recordAir { p in recorded.withLock { $0.append(p) } }
        let peripheral = Host(transport: transports[0])
        let central = Host(transport: transports[1])
        let pInfo = try await peripheral.start()
        _ = try await central.start()

        // 300 octets: more than a legacy PDU holds (31) and than one AUX_ADV_IND (Vol 6 Part B 2.3.4.9).
        var ad = AdvertisingData()
        ad.addLocalName("air-view")
        ad.addManufacturerData(company: 0xFFFF, data: [UInt8](repeating: 0xA5, count: 200))
        ad.addManufacturerData(company: 0xFFFF, data: Array(0..<80))
        let advertised = ad.bytes
        #expect(advertised.count > 245)
        try await peripheral.startAdvertising(AdvertisingParameters(data: advertised))
        try await central.startScanning()
        var seen: AdvertisingReportValue?
        for await e in central.events {
            if case .advertisement(let r) = e, r.address.address == pInfo.address, r.data.count == advertised.count { seen = r; break }
        }
        let report = try #require(seen)
        try await central.stopScanning()
        let connection = try await central.connect(to: report.address)
        var accepted: LEConnection?
        for await e in peripheral.events {
            if case .connected(let c) = e { accepted = c; break }
        }
        let atPeripheral = try #require(accepted)

        // An L2CAP frame of 100 octets before the data length grows: PDUs of 27 octets.
        let frame = [96, 0, 0x40, 0] + [UInt8](repeating: 0x5A, count: 96)
        try await central.sendL2CAP(frame, on: connection.handle)
        for await f in atPeripheral.frames { #expect(f == frame); break }  // over the air (airtime: at its connection event)
        try await central.setDataLength(handle: connection.handle, txOctets: 251, txTime: 2120)
        let phy = try await central.setPHY(handle: connection.handle, tx: 0x02, rx: 0x02)
        let updated = try await central.updateConnection(handle: connection.handle, intervalMin: 40, intervalMax: 40,
                                                         supervisionTimeout: 400)
        _ = try await central.disconnect(handle: connection.handle)
        try await central.settled()
        try await peripheral.settled()
        link.recordAir(nil)

        let path = FileManager.default.temporaryDirectory.appendingPathComponent("air-view-\(UUID().uuidString).pcap").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = try CaptureWriter(path: path, format: .linkLayer)
        for p in recorded.withLock({ $0 }) {
            writer.write(record: LinkLayerPcapWriter.record(rfChannel: p.rfChannel, signalPower: -50, pduType: p.kind.rawValue, phy: p.phy,
                                                            decrypted: p.decrypted, packet: p.octets, time: link.date(atLinkTime: p.time)))
        }
        writer.close()
        let frames = try Tshark.frames(path)
        expectSoundAirCapture(frames)

        // ADV_EXT_IND (7) on a primary channel (RF 0, 12 or 39) with an AuxPtr, then AUX_ADV_IND
        // with AdvA and AUX_CHAIN_IND on secondary channels: their AdvData, joined, is the host's.
        let first = try #require(frames.first)
        #expect(first.int("btle.advertising_header.pdu_type") == 7 && [0, 12, 39].contains(first.int("btle_rf.channel") ?? -1))
        #expect(first.has("btle.extended_advertising.aux_pointer"))
        var joined: [UInt8] = []
        var index = 1
        // (Until the next advertising event: the next packet on a primary channel, pseudo-header PDU type 0.)
        while index < frames.count, frames[index].int("btle_rf.pdu_type") == 1, frames[index].int("btle.advertising_header.pdu_type") == 7,
              let length = frames[index].int("btle.advertising_header.length"),
              let extended = frames[index].int("btle.extended_advertising_header.length") {
            // Pseudo-header 10, access address 4, header 2, extended header length and AdvMode 1.
            joined += frames[index].raw[(17 + extended)..<(16 + length)]
            index += 1
        }
        #expect(index >= 3, "AUX_ADV_IND and at least one AUX_CHAIN_IND")
        #expect(frames[1].first("btle.advertising_address") == pInfo.address.description.lowercased())
        #expect(joined == advertised)

        // AUX_CONNECT_REQ (CONNECT_IND's code 0b0101, on a secondary channel: auxiliary) with the
        // connection's interval, then AUX_CONNECT_RSP (0b1000), Vol 6 Part B 2.3, Table 2.3; 2.3.3.2, 2.3.2.2.
        let request = try #require(frames.firstIndex { $0.int("btle.advertising_header.pdu_type") == 5 })
        #expect(frames[request].int("btle_rf.pdu_type") == 1)
        #expect(frames[request].int("btle.link_layer_data.interval") == Int(connection.parameters.interval))
        #expect(frames[request + 1].int("btle.advertising_header.pdu_type") == 8)

        let control = frames.filter { $0.has("btle.control_opcode") }
        func pdu(_ opcode: Int) -> Tshark.Frame? { control.first { $0.int("btle.control_opcode") == opcode } }
        // LL_LENGTH_REQ (0x14) from the central with the host's 251 octets; LL_LENGTH_RSP (0x15).
        #expect(pdu(0x14)?.int("btle.control.max_tx_octets") == 251 && pdu(0x14)?.int("btle_rf.pdu_type") == 2)
        #expect(pdu(0x15)?.int("btle_rf.pdu_type") == 3)
        // LL_PHY_REQ, LL_PHY_RSP, LL_PHY_UPDATE_IND to the PHY of LE PHY Update Complete (2M, mask 0x02).
        #expect(phy == (tx: 2, rx: 2))
        #expect(pdu(0x16) != nil && pdu(0x17) != nil)
        #expect(pdu(0x18)?.int("btle.control.m_to_s_phy") == 0x02)
        // LL_CONNECTION_UPDATE_IND (0x00) with LE Connection Update Complete's parameters.
        #expect(pdu(0x00)?.int("btle.control.interval") == Int(updated.interval))
        #expect(pdu(0x00)?.int("btle.control.timeout") == Int(updated.supervisionTimeout))
        // LL_TERMINATE_IND (0x02) with Remote User Terminated Connection (0x13), the host's reason.
        #expect(control.last?.int("btle.control_opcode") == 0x02 && control.last?.int("btle.control.error_code") == 0x13)

        // The 100-octet frame: a start PDU (LLID 0b10) then continuations (0b01), 27 octets at most.
        let data = frames.filter { $0.int("btle_rf.pdu_type") == 2 && [1, 2].contains($0.int("btle.data_header.llid") ?? 0)
            && $0.int("btle.data_header.length") != 0 }
        let lengths = data.prefix(4).compactMap { $0.int("btle.data_header.length") }
        #expect(data.prefix(4).map { $0.int("btle.data_header.llid") } == [2, 1, 1, 1])
        #expect(lengths == [27, 27, 27, 19])
        if airtime {
            // The model's times: one exchange per PDU in one connection event, each the central's
            // 27-octet PDU, T_IFS, the peripheral's empty PDU, T_IFS: (1 + 4 + 2 + 27 + 3) × 8 µs
            // + 150 + (1 + 4 + 2 + 3) × 8 + 150 = 676 µs on LE 1M (Vol 6 Part B 2.1, 4.1.1, 4.5.6).
            let times = data.prefix(4).compactMap { Double($0.first("frame.time_epoch") ?? "") }
            for (a, b) in zip(times, times.dropFirst()) { #expect(abs(b - a - 676e-6) < 2e-6, "\(b - a) s between exchanges") }
            let empty = frames.filter { $0.int("btle_rf.pdu_type") == 3 && $0.int("btle.data_header.llid") == 1 && $0.int("btle.data_header.length") == 0 }
            #expect(empty.count >= 4, "the peripheral's empty PDUs")
        }
        // Packets after the PHY update say LE 2M in the pseudo-header (flags bits 14-15: 1).
        let afterUpdate = frames.drop { $0.int("btle.control_opcode") != 0x18 }.dropFirst()
        #expect(!afterUpdate.isEmpty && afterUpdate.allSatisfy { $0.int("btle_rf.phy") == 1 })
    }
}
