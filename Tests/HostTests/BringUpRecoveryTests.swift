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
