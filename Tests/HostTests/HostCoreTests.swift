import HCI
import Testing
import StackTestSupport
import TestSupport
import Transport
@testable import Host

@Suite struct HostCoreTests {
    @Test func bringUpReadsTheControllerThroughTheScriptedController() async throws {
        let t = FakeTransport.controller(aclLength: 27, aclCount: 4)
        let host = Host(transport: t)
        let info = try await host.start()
        #expect(info.address == BDAddress([0xC0, 0x11, 0x22, 0x33, 0x44, 0x55]))
        #expect(info.aclDataLength == 27)
        #expect(info.aclBufferCount == 4)
        #expect(info.hciVersion == 12)
        let ops = t.sentCommands.map(\.opcode)
        #expect(ops.first == Reset.opcode)
        // v2 is not listed as supported: v1 is used and v2 never sent.
        #expect(ops.contains(LEReadBufferSize.opcode))
        #expect(!ops.contains(LEReadBufferSizeV2.opcode))
        #expect(ops.contains(LESetEventMask.opcode))
        await host.close()
    }

    @Test func commandTimeoutNamesTheCommand() async throws {
        let t = FakeTransport(responder: nil)
        let host = Host(transport: t)
        await host.startReader()
        let clock = ContinuousClock()
        let started = clock.now
        await #expect(throws: HostError.commandTimeout("Reset")) {
            _ = try await host.execute(Reset(), timeout: .milliseconds(150))
        }
        // The given 150 ms was used, not the default (5 s): the bound is the default, so a
        // loaded machine's scheduling delay cannot fail it, while a timeout ignored still does.
        #expect(clock.now - started < HostConfiguration().commandTimeout)
        // The lost credit does not block the next command.
        await #expect(throws: HostError.commandTimeout("Read BD_ADDR")) {
            _ = try await host.execute(ReadBDADDR(), timeout: .milliseconds(100))
        }
        #expect(t.sentCommands.count == 2)
        await host.close()
    }

    @Test func numHCICommandPacketsIsHonoured() async throws {
        let t = FakeTransport(responder: nil)
        let host = Host(transport: t)
        await host.startReader()
        let a = Task { try await host.execute(SetEventMask(eventMask: 1)) }
        let b = Task { try await host.execute(SetEventMask(eventMask: 2)) }
        let c = Task { try await host.execute(ReadBDADDR()) }
        try await t.untilSent(commands: 1)
        try await host.until("the other two commands waiting for a credit") { $0.commandQueue.count == 2 }
        #expect(t.sentCommands.count == 1)  // one credit: the others wait
        // The three tasks race for the one credit: answer whichever went first with success and
        // 2 credits; both remaining commands then go out. Read BD_ADDR always succeeds; a Set
        // Event Mask answered after the first fails, and the failure carries the status name.
        let first = t.sentCommands[0]
        let address = BDAddress([1, 2, 3, 4, 5, 6])
        if first.opcode == ReadBDADDR.opcode {
            t.inject(CommandComplete(ReadBDADDR.self, .init(address: address), numHCICommandPackets: 2))
        } else {
            t.inject(CommandComplete(numHCICommandPackets: 2, opcode: first.opcode, returnParameters: [0]))
        }
        try await t.untilSent(commands: 3)
        for cmd in t.sentCommands.dropFirst() {
            if cmd.opcode == ReadBDADDR.opcode {
                t.inject(CommandComplete(ReadBDADDR.self, .init(address: address)))
            } else {
                t.inject(CommandComplete(numHCICommandPackets: 1, opcode: cmd.opcode, returnParameters: [0x0C]))
            }
        }
        #expect(try await c.value.address == address)
        for (task, mask) in [(a, UInt64(1)), (b, UInt64(2))] {
            let wentFirst = first.parameters == SetEventMask(eventMask: mask).packet.parameters
            do {
                _ = try await task.value
                #expect(wentFirst, "Set Event Mask \(mask) succeeded though answered with Command Disallowed")
            } catch let e as HCIError {
                #expect(!wentFirst)
                #expect(e.status == .commandDisallowed)
                #expect("\(e)".contains("Command Disallowed"))
            }
        }
        await host.close()
    }

    @Test func commandStatusCommandReturnsOnStatusAndFailsOnError() async throws {
        let t = FakeTransport(responder: nil)
        let host = Host(transport: t)
        await host.startReader()
        let ok = Task { try await host.execute(Disconnect(connectionHandle: 1)) }
        try await t.untilSent(commands: 1)
        t.inject(CommandStatus(status: .success, opcode: Disconnect.opcode))
        _ = try await ok.value
        let bad = Task { try await host.execute(Disconnect(connectionHandle: 2)) }
        try await t.untilSent(commands: 2)
        t.inject(CommandStatus(status: .unknownConnectionIdentifier, opcode: Disconnect.opcode))
        await #expect(throws: HCIError(.unknownConnectionIdentifier, opcode: Disconnect.opcode)) { try await bad.value }
        await host.close()
    }

    @Test func transportLossFailsPendingCallsAtOnce() async throws {
        let t = FakeTransport(responder: nil)
        let host = Host(transport: t)
        await host.startReader()
        let pending = Task { try await host.execute(Reset(), timeout: .seconds(30)) }
        try await t.untilSent(commands: 1)
        let clock = ContinuousClock()
        let started = clock.now
        let lost = TransportError(.lost, "peer closed the stream")
        t.inbox.finish(throwing: lost)
        await #expect(throws: HostError.transportLost(lost)) { try await pending.value }
        // The given 150 ms was used, not the default (5 s): the bound is the default, so a
        // loaded machine's scheduling delay cannot fail it, while a timeout ignored still does.
        #expect(clock.now - started < HostConfiguration().commandTimeout)
        var sawLost = false
        for await e in host.events {
            if case .transportLost(let e) = e { sawLost = e == lost }
        }
        #expect(sawLost)
        // Later calls fail at once too.
        await #expect(throws: HostError.transportLost(lost)) { _ = try await host.execute(Reset()) }
    }

    @Test func hardwareErrorFailsEverythingAndIsReported() async throws {
        let t = FakeTransport(responder: nil)
        let host = Host(transport: t)
        await host.startReader()
        let pending = Task { try await host.execute(Reset(), timeout: .seconds(30)) }
        try await t.untilSent(commands: 1)
        t.inject(.event(HCIEventPacket(code: 0x10, parameters: [0x42])))
        await #expect(throws: HostError.hardwareError(0x42)) { try await pending.value }
        var saw = false
        for await e in host.events { if case .hardwareError(0x42) = e { saw = true } }
        #expect(saw)
    }
}

@Suite struct ACLFlowTests {
    /// A started host on a scripted controller with `count` buffers of 27 octets and links `handles`.
    func makeHost(count: UInt8 = 4, handles: [UInt16]) async throws -> (Host, FakeTransport) {
        let t = FakeTransport.controller(aclLength: 27, aclCount: count)
        let host = Host(transport: t)
        _ = try await host.start()
        for h in handles { t.inject(le: connectionComplete(h)) }
        // (An `await host` runs after the host has handled what was injected before it.)
        #expect(await host.connections.count == handles.count)
        return (host, t)
    }

    @Test func fragmentsWithBoundaryFlagsAndNeverExceedsBuffers() async throws {
        let (host, t) = try await makeHost(count: 4, handles: [0x40])
        let frame = l2capFrame(300)  // 304 octets → 12 fragments of ≤ 27
        let send = Task { try await host.sendL2CAP(frame, on: 0x40) }
        var completed = 0
        while completed < 12 {
            try await t.untilSent(acl: completed + 1)
            try await host.settled()  // every fragment the free buffers allow has gone out
            let inFlight = t.sentACL.count - completed
            #expect(inFlight <= 4)
            t.complete(0x40, inFlight)
            completed += inFlight
        }
        try await send.value
        let packets = t.sentACL
        #expect(packets.count == 12)
        #expect(packets.first?.boundary == .firstNonFlushable)
        #expect(packets.dropFirst().allSatisfy { $0.boundary == .continuing })
        #expect(packets.allSatisfy { $0.data.count <= 27 && $0.handle == 0x40 })
        #expect(packets.flatMap(\.data) == frame)
        #expect(t.maxACLInFlight == 4)
        #expect(await host.aclStatus.free == 4)  // the last completions handled
        await host.close()
    }

    @Test func roundRobinBetweenTwoLinks() async throws {
        let (host, t) = try await makeHost(count: 2, handles: [0x40, 0x41])
        // Use up both credits on 0x40, then queue two frames on each link.
        try await host.sendL2CAP(l2capFrame(50), on: 0x40)  // 54 octets → 2 fragments, fast path
        #expect(t.sentACL.count == 2)
        // Each send is queued before the next starts: unstructured tasks have no start order,
        // and the per-link order checked below is the order the frames were handed over.
        var tasks: [Task<Void, any Error>] = []
        for (i, (seed, handle)) in [(0, 0x40), (10, 0x41), (1, 0x40), (11, 0x41)].enumerated() {
            tasks.append(Task { try await host.sendL2CAP(l2capFrame(50, seed: UInt8(seed)), on: UInt16(handle)) })
            try await host.until("send \(i + 1) queued") { $0.queuedFrameCount(0x40) + $0.queuedFrameCount(0x41) == i + 1 }
        }
        var inFlight: [UInt16: Int] = [0x40: 2]
        while t.sentACL.count < 10 {
            let before = t.sentACL.count
            for (h, n) in inFlight where n > 0 { t.complete(h, n) }
            inFlight = [:]
            try await host.settled()  // the completions handled: what they allow has gone out
            guard t.sentACL.count > before else { Issue.record("nothing sent after buffers came back"); break }
            for p in t.sentACL[before...] { inFlight[p.handle, default: 0] += 1 }
            #expect(t.sentACL.count - before <= 2)
        }
        let order = t.sentACL.dropFirst(2).map(\.handle)
        // Strict alternation, one fragment per link in turn.
        for i in 1..<order.count { #expect(order[i] != order[i - 1], "not round-robin: \(order)") }
        for task in tasks { try await task.value }
        #expect(t.maxACLInFlight <= 2)
        // Each link's fragments reassemble into its frames in order.
        var r = L2CAPReassembler()
        var frames41: [[UInt8]] = []
        for p in t.sentACL where p.handle == 0x41 {
            if case .frame(let f) = r.push(p.data, start: p.boundary.isStart) { frames41.append(f) }
        }
        #expect(frames41 == [l2capFrame(50, seed: 10), l2capFrame(50, seed: 11)])
        await host.close()
    }

    @Test func disconnectionFailsQueuedSendsAndReturnsCredits() async throws {
        let (host, t) = try await makeHost(count: 2, handles: [0x40, 0x41])
        try await host.sendL2CAP(l2capFrame(50), on: 0x40)  // both credits now in flight on 0x40
        let queued = Task { try await host.sendL2CAP(l2capFrame(100), on: 0x40) }
        let other = Task { try await host.sendL2CAP(l2capFrame(10), on: 0x41) }
        try await host.until("one frame queued on each link") { $0.queuedFrameCount(0x40) == 1 && $0.queuedFrameCount(0x41) == 1 }
        t.inject(DisconnectionComplete(connectionHandle: 0x40, reason: .remoteUserTerminated))
        await #expect(throws: HostError.disconnected(handle: 0x40, reason: .remoteUserTerminated)) { try await queued.value }
        // The credits held by 0x40 are freed: 0x41's frame goes out without any NOCP.
        try await other.value
        #expect(t.sentACL.last?.handle == 0x41)
        await #expect(throws: HostError.unknownConnection(0x40)) { try await host.sendL2CAP(l2capFrame(1), on: 0x40) }
        var sawDisconnect = false
        for await e in host.events {
            if case .disconnected(0x40, .remoteUserTerminated) = e { sawDisconnect = true; break }
        }
        #expect(sawDisconnect)
        await host.close()
    }

    @Test func incomingFragmentsReassembleAndBadOnesAreReported() async throws {
        let (host, t) = try await makeHost(handles: [0x40])
        guard let link = await host.connection(0x40) else { Issue.record("no link"); return }
        let frame = l2capFrame(60)
        t.inject(.acl(HCIACLPacket(handle: 0x40, boundary: .continuing, data: [1, 2, 3])))  // orphan
        t.inject(.acl(HCIACLPacket(handle: 0x40, boundary: .first, data: Array(frame[0..<27]))))
        t.inject(.acl(HCIACLPacket(handle: 0x40, boundary: .continuing, data: Array(frame[27..<54]))))
        t.inject(.acl(HCIACLPacket(handle: 0x40, boundary: .continuing, data: Array(frame[54...]))))
        t.inject(.acl(HCIACLPacket(handle: 0x99, boundary: .first, data: frame)))  // unknown handle
        var it = link.frames.makeAsyncIterator()
        #expect(await it.next() == frame)
        var warnings: [String] = []
        for await e in host.events {
            if case .warning(let w) = e { warnings.append(w) }
            if warnings.count == 2 { break }
        }
        #expect(warnings.contains { $0.contains("without a start") })
        #expect(warnings.contains { $0.contains("unknown connection handle 0x0099") })
        t.inject(DisconnectionComplete(connectionHandle: 0x40, reason: .connectionTimeout))
        #expect(await it.next() == nil)  // frames finish at disconnection
        await host.close()
    }
}

@Suite struct AdvertisingReportTests {
    @Test func legacyAndExtendedReportsAreNormalised() async throws {
        let t = FakeTransport.controller()
        let host = Host(transport: t)
        _ = try await host.start()
        let addr = BDAddress([0xC3, 1, 2, 3, 4, 5])
        t.inject(le: LEAdvertisingReport(reports: [
            .init(eventType: 0x04, addressType: .random, address: addr, data: [2, 1, 6], rssi: -40)]))
        t.inject(le: LEExtendedAdvertisingReport(reports: [
            .init(eventType: .advInd, addressType: 0x00, address: addr, advertisingSID: 0xFF, txPower: -4, rssi: 127,
                  periodicAdvertisingInterval: 0, directAddressType: 0, directAddress: .zero, data: [3, 9, 0x41, 0x42])]))
        var reports: [AdvertisingReportValue] = []
        for await e in host.events {
            if case .advertisement(let r) = e { reports.append(r) }
            if reports.count == 2 { break }
        }
        #expect(reports[0] == AdvertisingReportValue(address: DeviceAddress(addr, type: .random),
                                                     kind: [.legacy, .scanResponse], rssi: -40, txPower: nil, data: [2, 1, 6]))
        #expect(reports[1].address == DeviceAddress(addr, type: .public))
        #expect(reports[1].kind == [.legacy, .connectable, .scannable])
        #expect(reports[1].rssi == nil)  // 127: not available
        #expect(reports[1].txPower == -4)
        #expect(reports[1].data == [3, 9, 0x41, 0x42])
        await host.close()
    }
}

/// Issue 13 defect 7: LE Extended Advertising Report data split over several reports (Data_Status
/// 0b01 "incomplete, more data to come" on all but the last, Core v5.4 Vol 4 Part E 7.7.65.13) is
/// joined per advertiser before it is reported; 0b10 "incomplete, data truncated" ends it.
/// Before the fix every fragment was reported on its own (the first as a whole advertisement,
/// the next starting inside an AD structure).
@Suite struct ExtendedReportReassemblyTests {
    static let a = BDAddress([0xC3, 1, 2, 3, 4, 5])
    static let b = BDAddress([0xC3, 1, 2, 3, 4, 6])
    /// Event_Type: connectable, extended (legacy bit clear), Data_Status in bits 5-6.
    static func report(_ address: BDAddress, _ data: [UInt8], status: UInt16, sid: UInt8 = 1) -> LEExtendedAdvertisingReport.Report {
        .init(eventType: ExtendedAdvertisingEventType(rawValue: 0x01 | status << 5), addressType: 0x01, address: address,
              advertisingSID: sid, txPower: 127, rssi: -60, periodicAdvertisingInterval: 0, directAddressType: 0,
              directAddress: .zero, data: data)
    }
    /// A legacy report from an unrelated advertiser marks the end of what a test injected.
    static let sentinel = BDAddress([0xC3, 9, 9, 9, 9, 9])

    func reports(after inject: (FakeTransport) -> Void) async throws -> [AdvertisingReportValue] {
        let t = FakeTransport.controller()
        let host = Host(transport: t)
        _ = try await host.start()
        inject(t)
        t.inject(le: LEAdvertisingReport(reports: [.init(eventType: 0x03, addressType: .random, address: Self.sentinel, data: [], rssi: -40)]))
        var out: [AdvertisingReportValue] = []
        for await e in host.events {
            guard case .advertisement(let r) = e else { continue }
            if r.address.address == Self.sentinel { break }
            out.append(r)
        }
        await host.close()
        return out
    }

    @Test func fragmentsAreJoinedPerAdvertiser() async throws {
        // A Complete Local Name "abcdef" (length 7) split inside the structure, with a second
        // advertiser's fragments interleaved.
        let got = try await reports { t in
            t.inject(le: LEExtendedAdvertisingReport(reports: [Self.report(Self.a, [0x02, 0x01, 0x06, 0x07, 0x09, 0x61], status: 0b01)]))
            t.inject(le: LEExtendedAdvertisingReport(reports: [Self.report(Self.b, [0x03, 0x09], status: 0b01)]))
            t.inject(le: LEExtendedAdvertisingReport(reports: [Self.report(Self.a, [0x62, 0x63], status: 0b01),
                                                               Self.report(Self.b, [0x78, 0x79], status: 0b00)]))
            t.inject(le: LEExtendedAdvertisingReport(reports: [Self.report(Self.a, [0x64, 0x65, 0x66], status: 0b00)]))
        }
        #expect(got.count == 2)
        #expect(got.first?.address == DeviceAddress(Self.b, type: .random))
        #expect(got.first?.data == [0x03, 0x09, 0x78, 0x79])
        #expect(got.first?.dataStatus == 0)
        #expect(got.last?.address == DeviceAddress(Self.a, type: .random))
        #expect(got.last?.data == [0x02, 0x01, 0x06, 0x07, 0x09, 0x61, 0x62, 0x63, 0x64, 0x65, 0x66])
        #expect(got.last?.dataStatus == 0)
        #expect(got.last?.sid == 1)
    }

    @Test func truncatedDataIsReportedOnceAsTruncated() async throws {
        let got = try await reports { t in
            t.inject(le: LEExtendedAdvertisingReport(reports: [Self.report(Self.a, [0x02, 0x01, 0x06, 0x07, 0x09, 0x61], status: 0b01)]))
            t.inject(le: LEExtendedAdvertisingReport(reports: [Self.report(Self.a, [0x62], status: 0b10)]))
        }
        #expect(got.count == 1)
        #expect(got.first?.data == [0x02, 0x01, 0x06, 0x07, 0x09, 0x61, 0x62])
        #expect(got.first?.dataStatus == 0b10)
        // The parser keeps the whole Flags structure and names the cut one.
        let parsed = AdvertisingData(parsing: got.first?.data ?? [])
        #expect(parsed.structures == [ADStructure(type: .flags, data: [0x06])])
        #expect(parsed.problems == [.lengthOverrun(offset: 3, length: 7, available: 3)])
    }

    @Test func oneAdvertiserCannotHoldMoreThanTheLargestAdvertisingData() async throws {
        // 8 fragments of 229 octets (1832) exceed the 1650 octets a controller can hold for a
        // set (Max_Advertising_Data_Length ≤ 0x0672, Vol 4 Part E 7.8.57): kept to 1650, truncated.
        let got = try await reports { t in
            for i in 0..<8 {
                t.inject(le: LEExtendedAdvertisingReport(reports: [Self.report(Self.a, [UInt8](repeating: UInt8(i), count: 229),
                                                                                   status: i == 7 ? 0b00 : 0b01)]))
            }
        }
        #expect(got.count == 1)
        #expect(got.first?.data.count == 1650)
        #expect(got.first?.dataStatus == 0b10)
    }

    @Test func partialReassembliesAreBounded() {
        var r = AdvertisingReportReassembler()
        var evicted: AdvertisingReportReassembler.Key?
        var first: AdvertisingReportReassembler.Key?
        for i in 0..<(AdvertisingReportReassembler.maxAdvertisers + 1) {
            let key = AdvertisingReportReassembler.Key(address: BDAddress([0xC3, 0, 0, 0, UInt8(i >> 8), UInt8(i & 0xFF)]),
                                                       addressType: 1, sid: 0, scanResponse: false)
            if first == nil { first = key }
            #expect(r.add(key, fragment: [1, 2, 3], dataStatus: 0b01, evicted: &evicted) == .pending)
        }
        #expect(r.pendingCount == AdvertisingReportReassembler.maxAdvertisers)
        #expect(evicted == first)
    }
}
