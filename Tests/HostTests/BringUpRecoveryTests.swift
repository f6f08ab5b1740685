import HCI
import Synchronization
import Testing
import TestSupport
import Transport
@testable import Host

/// Issue 27: a controller an earlier host left scanning or advertising, and that HCI_Reset did
/// not stop (Bumble's controller keeps both going; Core v5.4 Vol 4 Part E 7.3.2 says Reset
/// should), refuses new parameters with Command Disallowed (0x0C, 7.8.10 and 7.8.5: not while
/// scanning / advertising is enabled). The host turns the enable off and retries, once.
@Suite struct BringUpRecoveryTests {
    /// The scripted controller of FakeTransport, but left scanning and advertising by the last
    /// host, across Reset: the parameters commands are refused until the matching enable is off.
    static func leftRunning() -> FakeTransport {
        let base = FakeTransport.controller()
        let running = Mutex((scanning: true, advertising: true))
        return FakeTransport { c in
            func answer(_ status: HCIStatus) -> [HCIPacket] {
                [.event(CommandComplete(numHCICommandPackets: 1, opcode: c.opcode, returnParameters: [status.rawValue]).packet)]
            }
            switch c.opcode {
            case LESetScanParameters.opcode:
                return answer(running.withLock { $0.scanning } ? .commandDisallowed : .success)
            case LESetAdvertisingParameters.opcode:
                return answer(running.withLock { $0.advertising } ? .commandDisallowed : .success)
            case LESetScanEnable.opcode:
                running.withLock { $0.scanning = c.parameters.first == 0x01 }
                return answer(.success)
            case LESetAdvertisingEnable.opcode:
                running.withLock { $0.advertising = c.parameters.first == 0x01 }
                return answer(.success)
            default:
                return base.responder!(c)
            }
        }
    }

    /// The parameters and enables sent, as (opcode, first parameter octet for the enables).
    func trail(_ t: FakeTransport, _ opcodes: [HCIOpcode]) -> [String] {
        t.sentCommands.filter { opcodes.contains($0.opcode) }.map { c in
            c.opcode.name + (c.opcode == LESetScanEnable.opcode || c.opcode == LESetAdvertisingEnable.opcode ? " \(c.parameters.first ?? 0xFF)" : "")
        }
    }

    @Test func scanningLeftOnIsTurnedOffAndTheParametersRetried() async throws {
        let t = Self.leftRunning()
        let host = Host(transport: t)
        _ = try await host.start()
        try await host.startScanning()
        #expect(await host.isScanning)
        #expect(trail(t, [LESetScanParameters.opcode, LESetScanEnable.opcode]) == [
            LESetScanParameters.opcode.name, "\(LESetScanEnable.opcode.name) 0",
            LESetScanParameters.opcode.name, "\(LESetScanEnable.opcode.name) 1",
        ])
        await host.close()
    }

    @Test func advertisingLeftOnIsTurnedOffAndTheParametersRetried() async throws {
        let t = Self.leftRunning()
        let host = Host(transport: t)
        _ = try await host.start()
        try await host.startAdvertising(AdvertisingParameters(kind: .nonConnectable, data: [UInt8]()))
        #expect(await host.isAdvertising)
        #expect(trail(t, [LESetAdvertisingParameters.opcode, LESetAdvertisingEnable.opcode]) == [
            LESetAdvertisingParameters.opcode.name, "\(LESetAdvertisingEnable.opcode.name) 0",
            LESetAdvertisingParameters.opcode.name, "\(LESetAdvertisingEnable.opcode.name) 1",
        ])
        await host.close()
    }

    /// A refusal that disabling does not cure is reported, not retried forever.
    @Test func aRefusalThatStaysIsReported() async throws {
        let base = FakeTransport.controller()
        let t = FakeTransport { c in
            guard c.opcode == LESetScanParameters.opcode else { return base.responder!(c) }
            return [.event(CommandComplete(numHCICommandPackets: 1, opcode: c.opcode, returnParameters: [HCIStatus.commandDisallowed.rawValue]).packet)]
        }
        let host = Host(transport: t)
        _ = try await host.start()
        await #expect(throws: HCIError(.commandDisallowed, opcode: LESetScanParameters.opcode)) { try await host.startScanning() }
        #expect(t.sentCommands.filter { $0.opcode == LESetScanParameters.opcode }.count == 2)
        await host.close()
    }
}

/// Issue 27 (`scan --phy coded`): a controller with the LE Coded PHY feature (bit 11, Core v5.4
/// Vol 6 Part B 4.6.12) scans on LE Coded as well as LE 1M: LE Set Extended Scan Parameters with
/// Scanning_PHYs 0x05 and one parameter block per PHY, in bit order (Vol 4 Part E 7.8.64).
@Suite struct CodedScanningTests {
    static func controller(leFeatures: LEFeatures) -> FakeTransport {
        let base = FakeTransport.controller()
        return FakeTransport { c in
            func ok(_ ret: [UInt8]) -> [HCIPacket] {
                [.event(CommandComplete(numHCICommandPackets: 1, opcode: c.opcode, returnParameters: [0] + ret).packet)]
            }
            func enc(_ p: some HCIReturnParameters) -> [UInt8] { var w = ByteWriter(); p.encode(into: &w); return w.bytes }
            switch c.opcode {
            case ReadLocalSupportedCommands.opcode:
                return ok(enc(ReadLocalSupportedCommands.ReturnParameters(supporting: [
                    Reset.opcode, ReadLocalSupportedFeatures.opcode, LEReadLocalSupportedFeatures.opcode, LEReadBufferSize.opcode,
                    ReadBDADDR.opcode, SetEventMask.opcode, LESetEventMask.opcode, LESetExtendedScanParameters.opcode, LESetExtendedScanEnable.opcode,
                ])))
            case LEReadLocalSupportedFeatures.opcode:
                return ok(enc(LEReadLocalSupportedFeatures.ReturnParameters(leFeatures: leFeatures)))
            default:
                return base.responder!(c)
            }
        }
    }

    /// The command's parameters: Own_Address_Type, Scanning_Filter_Policy, Scanning_PHYs, then
    /// per PHY Scan_Type, Scan_Interval, Scan_Window (16-bit little-endian).
    @Test(arguments: [(LEFeatures([.leEncryption, .leCodedPHY]), UInt8(0x05), 2), (LEFeatures([.leEncryption]), UInt8(0x01), 1)])
    func scanningPHYsFollowTheControllersFeatures(_ features: LEFeatures, _ phys: UInt8, _ blocks: Int) async throws {
        let t = Self.controller(leFeatures: features)
        let host = Host(transport: t)
        _ = try await host.start()
        try await host.startScanning(ScanParameters(active: true, interval: 0x0060, window: 0x0030))
        let sent = try #require(t.sentCommands.first { $0.opcode == LESetExtendedScanParameters.opcode })
        let block: [UInt8] = [0x01, 0x60, 0x00, 0x30, 0x00]
        var expected: [UInt8] = [phys]
        for _ in 0..<blocks { expected += block }
        let got = Array(sent.parameters.dropFirst(2))
        #expect(got == expected)
        await host.close()
    }
}
