import Testing
import HCI
@testable import VirtualController

/// The virtual controller refuses what the Core specification (v5.4) says a controller must
/// refuse, with the specification's status. Commands are sent as raw octets in the layout of
/// the section each test cites; the status is read from the Command Complete or Command Status.
@Suite struct StrictCommandTests {
    /// Sends `parameters` with `opcode` and returns the status of its Command Complete or Command Status.
    func status(_ p: Pair, _ h: RecordingHost, _ opcode: UInt16, _ parameters: [UInt8]) -> HCIStatus? {
        h.controller.receive(fromHost: .command(HCICommandPacket(opcode: HCIOpcode(rawValue: opcode), parameters: parameters)))
        p.link.runUntilIdle()
        for e in h.events() {
            if let cc = e as? CommandComplete, cc.opcode.rawValue == opcode { return cc.status }
            if let cs = e as? CommandStatus, cs.opcode.rawValue == opcode { return cs.status }
        }
        return nil
    }

    static func u16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8)] }

    /// LE Create Connection (0x200D) parameters, Core v5.4 Vol 4 Part E 7.8.12: LE_Scan_Interval,
    /// LE_Scan_Window, Initiator_Filter_Policy, Peer_Address_Type, Peer_Address, Own_Address_Type,
    /// Connection_Interval_Min, Connection_Interval_Max, Max_Latency, Supervision_Timeout,
    /// Min_CE_Length, Max_CE_Length.
    static func createConnection(peer: BDAddress, scanInterval: UInt16 = 0x0060, scanWindow: UInt16 = 0x0030,
                                 min: UInt16 = 0x0018, max: UInt16 = 0x0028, latency: UInt16 = 0,
                                 timeout: UInt16 = 0x002A) -> [UInt8] {
        u16(scanInterval) + u16(scanWindow) + [0x00, 0x00] + peer.littleEndian + [0x00]
            + u16(min) + u16(max) + u16(latency) + u16(timeout) + u16(0) + u16(0)
    }

    /// LE Extended Create Connection (0x2043) with LE 1M only, Core v5.4 Vol 4 Part E 7.8.66:
    /// Initiator_Filter_Policy, Own_Address_Type, Peer_Address_Type, Peer_Address, Initiating_PHYs,
    /// then Scan_Interval, Scan_Window, Connection_Interval_Min/Max, Max_Latency,
    /// Supervision_Timeout, Min/Max_CE_Length for the one PHY.
    static func extendedCreateConnection(peer: BDAddress, scanInterval: UInt16 = 0x0060, scanWindow: UInt16 = 0x0030,
                                         min: UInt16 = 0x0018, max: UInt16 = 0x0028, latency: UInt16 = 0,
                                         timeout: UInt16 = 0x002A) -> [UInt8] {
        [0x00, 0x00, 0x00] + peer.littleEndian + [0x01] + u16(scanInterval) + u16(scanWindow)
            + u16(min) + u16(max) + u16(latency) + u16(timeout) + u16(0) + u16(0)
    }

    /// The connection-parameter refusals shared by 7.8.12, 7.8.18 and 7.8.66: each set is refused
    /// with Invalid HCI Command Parameters (0x12). Connection_Interval 0x0006-0x0C80, min <= max;
    /// Max_Latency 0x0000-0x01F3; Supervision_Timeout 0x000A-0x0C80 and in milliseconds larger
    /// than (1 + Max_Latency) × Connection_Interval_Max × 2.
    static let badConnectionParameters: [(min: UInt16, max: UInt16, latency: UInt16, timeout: UInt16)] = [
        (0x0005, 0x0028, 0, 0x0100), (0x0006, 0x0C81, 0, 0x0C80), (0x0030, 0x0020, 0, 0x0100),
        (0x0018, 0x0028, 0x01F4, 0x0C80), (0x0006, 0x0006, 0, 0x0009), (0x0018, 0x0028, 0, 0x0C81),
        // Interval max 0x0028 = 50 ms: 2 × 50 ms = 100 ms is not below 0x000A × 10 ms = 100 ms.
        (0x0018, 0x0028, 0, 0x000A),
        // Latency 1: (1 + 1) × 50 ms × 2 = 200 ms is not below 0x0014 × 10 ms.
        (0x0018, 0x0028, 1, 0x0014),
    ]

    @Test func leCreateConnectionRefusesParametersOutOfRange() {
        // Core v5.4 Vol 4 Part E 7.8.12: LE_Scan_Interval and LE_Scan_Window 0x0004-0x4000, the
        // window not larger than the interval, and the connection parameters above.
        let p = Pair()
        let peer = p.b.controller.publicAddress
        let op: UInt16 = 0x200D
        #expect(status(p, p.a, op, Self.createConnection(peer: peer, scanInterval: 0x0003, scanWindow: 0x0003)) == .invalidParameters)
        #expect(status(p, p.a, op, Self.createConnection(peer: peer, scanInterval: 0x4001, scanWindow: 0x0010)) == .invalidParameters)
        #expect(status(p, p.a, op, Self.createConnection(peer: peer, scanInterval: 0x0010, scanWindow: 0x0020)) == .invalidParameters)
        for b in Self.badConnectionParameters {
            #expect(status(p, p.a, op, Self.createConnection(peer: peer, min: b.min, max: b.max, latency: b.latency,
                                                             timeout: b.timeout)) == .invalidParameters, "\(b)")
        }
        // Just above the floor: 0x000B × 10 ms = 110 ms > 100 ms; 0x0015 × 10 ms > 200 ms with latency 1.
        #expect(status(p, p.a, op, Self.createConnection(peer: peer, scanInterval: 0x4000, scanWindow: 0x4000,
                                                         timeout: 0x000B)) == .success)
        #expect(p.run(p.a, LECreateConnectionCancel())?.status == .success)
        #expect(status(p, p.a, op, Self.createConnection(peer: peer, scanInterval: 0x0004, scanWindow: 0x0004,
                                                         latency: 1, timeout: 0x0015)) == .success)
    }

    @Test func leExtendedCreateConnectionRefusesParametersOutOfRange() {
        // Core v5.4 Vol 4 Part E 7.8.66: Scan_Interval and Scan_Window from 0x0004, the window not
        // larger than the interval, and the connection parameters above, per initiating PHY.
        let p = Pair()
        let peer = p.b.controller.publicAddress
        let op: UInt16 = 0x2043
        #expect(status(p, p.a, op, Self.extendedCreateConnection(peer: peer, scanInterval: 0x0003, scanWindow: 0x0003)) == .invalidParameters)
        #expect(status(p, p.a, op, Self.extendedCreateConnection(peer: peer, scanInterval: 0x0010, scanWindow: 0x0020)) == .invalidParameters)
        for b in Self.badConnectionParameters {
            #expect(status(p, p.a, op, Self.extendedCreateConnection(peer: peer, min: b.min, max: b.max, latency: b.latency,
                                                                     timeout: b.timeout)) == .invalidParameters, "\(b)")
        }
        #expect(status(p, p.a, op, Self.extendedCreateConnection(peer: peer, timeout: 0x000B)) == .success)
    }

    @Test func leConnectionUpdateRefusesParametersOutOfRange() {
        // Core v5.4 Vol 4 Part E 7.8.18: Connection_Handle, Connection_Interval_Min/Max,
        // Max_Latency, Supervision_Timeout, Min/Max_CE_Length; the same ranges as 7.8.12.
        let p = Pair()
        let (central, _) = p.connect()
        func update(_ min: UInt16, _ max: UInt16, _ latency: UInt16, _ timeout: UInt16) -> [UInt8] {
            Self.u16(central) + Self.u16(min) + Self.u16(max) + Self.u16(latency) + Self.u16(timeout) + Self.u16(0) + Self.u16(0)
        }
        for b in Self.badConnectionParameters {
            #expect(status(p, p.a, 0x2013, update(b.min, b.max, b.latency, b.timeout)) == .invalidParameters, "\(b)")
        }
        #expect(status(p, p.a, 0x2013, update(0x0018, 0x0028, 0, 0x000B)) == .success)
    }

    @Test func leSetRandomAddressRefusedWhileInitiating() {
        // Core v5.4 Vol 4 Part E 7.8.4: while advertising (legacy), scanning or initiating is
        // enabled, LE Set Random Address (0x2005, Random_Address) gets Command Disallowed (0x0C).
        let p = Pair()
        let random: [UInt8] = [0x01, 0x02, 0x03, 0x04, 0x05, 0xC6]
        #expect(status(p, p.a, 0x200D, Self.createConnection(peer: p.b.controller.publicAddress)) == .success)
        #expect(status(p, p.a, 0x2005, random) == .commandDisallowed)
        #expect(p.run(p.a, LECreateConnectionCancel())?.status == .success)
        #expect(status(p, p.a, 0x2005, random) == .success)
    }

    @Test func advertisingIntervalsOutsideTheSupportedRangeAreUnsupportedValues() {
        // Core v5.4 Vol 4 Part E 7.8.5 and 7.8.53: an advertising interval range outside the one the
        // Controller supports gets Unsupported Feature or Parameter Value (0x11), not 0x12 (found
        // by RootcanalDifferentialTests: Rootcanal answers so). Min above max stays 0x12.
        let p = Pair()
        func legacy(_ min: UInt16, _ max: UInt16) -> [UInt8] {
            // Advertising_Interval_Min/Max, ADV_IND, public, peer public 0, all channels, no filter.
            Self.u16(min) + Self.u16(max) + [0x00, 0x00, 0x00] + [UInt8](repeating: 0, count: 6) + [0x07, 0x00]
        }
        #expect(status(p, p.a, 0x2006, legacy(0x001F, 0x0800)) == .unsupportedParameterValue)
        #expect(status(p, p.a, 0x2006, legacy(0x0800, 0x4001)) == .unsupportedParameterValue)
        #expect(status(p, p.a, 0x2006, legacy(0x0900, 0x0800)) == .invalidParameters)
        #expect(status(p, p.a, 0x2006, legacy(0x0020, 0x4000)) == .success)
        let q = Pair()
        func extended(_ interval: UInt32) -> [UInt8] {
            // Handle 0, legacy ADV_IND properties 0x0013, Primary_Advertising_Interval_Min/Max (3 octets
            // each), all channels, public, peer public 0, no filter, no TX power preference, LE 1M,
            // max skip 0, LE 1M, SID 0, no scan request notifications.
            let i = [UInt8(interval & 0xFF), UInt8((interval >> 8) & 0xFF), UInt8(interval >> 16)]
            return [0x00, 0x13, 0x00] + i + i + [0x07, 0x00, 0x00] + [UInt8](repeating: 0, count: 6)
                + [0x00, 0x7F, 0x01, 0x00, 0x01, 0x00, 0x00]
        }
        #expect(status(q, q.a, 0x2036, extended(0x00001F)) == .unsupportedParameterValue)
        #expect(status(q, q.a, 0x2036, extended(0x000800)) == .success)
    }

    @Test func leSetAdvertisingEnableRefusesReservedValues() {
        // Core v5.4 Vol 4 Part E 7.8.9: Advertising_Enable 0x00 or 0x01, all other values reserved:
        // Invalid HCI Command Parameters (0x12).
        let p = Pair()
        #expect(status(p, p.a, 0x200A, [0x02]) == .invalidParameters)
        #expect(status(p, p.a, 0x200A, [0xFF]) == .invalidParameters)
        #expect(!p.a.controller.isAdvertising)
        #expect(status(p, p.a, 0x200A, [0x01]) == .success)
        #expect(p.a.controller.isAdvertising)
        #expect(status(p, p.a, 0x200A, [0x00]) == .success)
    }

    @Test func leSetScanEnableRefusesReservedValues() {
        // Core v5.4 Vol 4 Part E 7.8.11: LE_Scan_Enable and Filter_Duplicates 0x00 or 0x01 each, all
        // other values reserved: Invalid HCI Command Parameters (0x12).
        let p = Pair()
        #expect(status(p, p.a, 0x200C, [0x02, 0x00]) == .invalidParameters)
        #expect(status(p, p.a, 0x200C, [0x01, 0x02]) == .invalidParameters)
        #expect(!p.a.controller.isScanning)
        #expect(status(p, p.a, 0x200C, [0x01, 0x01]) == .success)
        #expect(p.a.controller.isScanning)
    }

    @Test func directedAdvertisingRefusesReservedPeerAddressType() {
        // Core v5.4 Vol 4 Part E 7.8.5: Advertising_Interval_Min/Max, Advertising_Type (0x04:
        // low duty cycle directed), Own_Address_Type, Peer_Address_Type (0x00 public, 0x01 random,
        // all other values reserved), Peer_Address, Advertising_Channel_Map, Advertising_Filter_Policy.
        let p = Pair()
        func parameters(peerType: UInt8) -> [UInt8] {
            Self.u16(0x0800) + Self.u16(0x0800) + [0x04, 0x00, peerType] + p.b.controller.publicAddress.littleEndian + [0x07, 0x00]
        }
        #expect(status(p, p.a, 0x2006, parameters(peerType: 0x02)) == .invalidParameters)
        #expect(status(p, p.a, 0x2006, parameters(peerType: 0x03)) == .invalidParameters)
        #expect(status(p, p.a, 0x2006, parameters(peerType: 0x01)) == .success)
        #expect(status(p, p.a, 0x2006, parameters(peerType: 0x00)) == .success)
    }

    @Test func legacyAndExtendedAdvertisingCommandsAreNotMixedWithoutReset() {
        // Core v5.4 Vol 4 Part E 3.1.1: after a legacy advertising (scanning, initiating) command an
        // extended one, and after an extended one a legacy one, gets Command Disallowed (0x0C)
        // until HCI_Reset.
        let p = Pair()
        let peer = p.b.controller.publicAddress
        // LE Set Scan Parameters (7.8.10): LE_Scan_Type, LE_Scan_Interval, LE_Scan_Window,
        // Own_Address_Type, Scanning_Filter_Policy.
        let scanParameters: [UInt8] = [0x01] + Self.u16(0x0010) + Self.u16(0x0010) + [0x00, 0x00]
        #expect(status(p, p.a, 0x200B, scanParameters) == .success)
        // LE Read Number of Supported Advertising Sets (7.8.58), LE Set Extended Scan Enable
        // (7.8.65: Enable, Filter_Duplicates, Duration, Period), LE Extended Create Connection.
        #expect(status(p, p.a, 0x203B, []) == .commandDisallowed)
        #expect(status(p, p.a, 0x2042, [0x00, 0x00] + Self.u16(0) + Self.u16(0)) == .commandDisallowed)
        #expect(status(p, p.a, 0x2043, Self.extendedCreateConnection(peer: peer)) == .commandDisallowed)
        // Legacy ones still go.
        #expect(status(p, p.a, 0x200C, [0x00, 0x00]) == .success)
        #expect(status(p, p.a, 0x0C03, []) == .success)  // HCI_Reset
        // Now extended first: legacy ones are refused.
        #expect(status(p, p.a, 0x203B, []) == .success)
        #expect(status(p, p.a, 0x200B, scanParameters) == .commandDisallowed)
        #expect(status(p, p.a, 0x200A, [0x00]) == .commandDisallowed)
        #expect(status(p, p.a, 0x200D, Self.createConnection(peer: peer)) == .commandDisallowed)
        #expect(status(p, p.a, 0x2042, [0x00, 0x00] + Self.u16(0) + Self.u16(0)) == .success)
        #expect(status(p, p.a, 0x0C03, []) == .success)
        #expect(status(p, p.a, 0x200B, scanParameters) == .success)
    }
}

extension VirtualController {
    /// Its state as the link's context holds it (manual-mode tests, between runs).
    var isAdvertising: Bool { link.context.withLock { $0.controllers[index].isAdvertising } }
    var isScanning: Bool { link.context.withLock { $0.controllers[index].isScanning } }
}
