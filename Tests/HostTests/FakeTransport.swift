import HCI
import Synchronization
import TestSupport
import Transport
@testable import Host

/// An in-memory transport: records what the host sends, lets a test inject packets, and can
/// answer commands automatically (a scripted controller).
final class FakeTransport: HCITransport, @unchecked Sendable {
    struct State: Sendable {
        var sent: [HCIPacket] = []
        var aclInFlight = 0
        var maxACLInFlight = 0
        var closed = false
    }

    /// What the host sent: a test awaits it (`untilSent`) instead of polling.
    let state = Watched(State())
    let inbox = PacketInbox()
    let name = "fake"
    /// Answers to a command (packets injected right after it was sent); nil: no answer.
    let responder: (@Sendable (HCICommandPacket) -> [HCIPacket])?

    init(responder: (@Sendable (HCICommandPacket) -> [HCIPacket])?) {
        self.responder = responder
    }

    func send(_ packet: HCIPacket) throws(TransportError) {
        let closed = state.withLock { s -> Bool in
            if s.closed { return true }
            s.sent.append(packet)
            if case .acl = packet {
                s.aclInFlight += 1
                s.maxACLInFlight = max(s.maxACLInFlight, s.aclInFlight)
            }
            return false
        }
        if closed { throw TransportError(.closed, "fake transport closed") }
        if case .command(let c) = packet, let responder {
            for p in responder(c) { inbox.deliver(p) }
        }
    }

    func close() {
        state.withLock { $0.closed = true }
        inbox.finish()
    }

    func inject(_ packet: HCIPacket) { inbox.deliver(packet) }
    func inject(_ e: some HCIEventParameters) { inbox.deliver(.event(e.packet)) }
    func inject(le e: some LEMetaEventParameters) { inbox.deliver(.event(e.packet)) }

    /// Frees `n` ACL buffers of `handle` with Number Of Completed Packets.
    func complete(_ handle: UInt16, _ n: Int) {
        state.withLock { $0.aclInFlight -= n }
        inject(NumberOfCompletedPackets(entries: [.init(connectionHandle: handle, numCompletedPackets: UInt16(n))]))
    }

    var sentACL: [HCIACLPacket] {
        state.withLock { s in s.sent.compactMap { if case .acl(let a) = $0 { a } else { nil } } }
    }

    var sentCommands: [HCICommandPacket] {
        state.withLock { s in s.sent.compactMap { if case .command(let c) = $0 { c } else { nil } } }
    }

    var maxACLInFlight: Int { state.withLock { $0.maxACLInFlight } }

    /// Returns once the host has sent at least `count` commands.
    func untilSent(commands count: Int) async throws {
        try await state.until("\(count) command(s) sent") { s in
            s.sent.count(where: { if case .command = $0 { true } else { false } }) >= count
        }
    }

    /// Returns once the host has sent at least `count` ACL packets.
    func untilSent(acl count: Int) async throws {
        try await state.until("\(count) ACL packet(s) sent") { s in
            s.sent.count(where: { if case .acl = $0 { true } else { false } }) >= count
        }
    }

    /// A scripted controller good enough for bring-up: LE ACL buffers `count`×`length`.
    static func controller(aclLength: UInt16 = 27, aclCount: UInt8 = 4,
                           address: BDAddress = BDAddress([0xC0, 0x11, 0x22, 0x33, 0x44, 0x55])) -> FakeTransport {
        FakeTransport { c in
            func ok(_ ret: [UInt8] = []) -> [HCIPacket] {
                [.event(CommandComplete(numHCICommandPackets: 1, opcode: c.opcode, returnParameters: [0] + ret).packet)]
            }
            func enc(_ p: some HCIReturnParameters) -> [UInt8] { var w = ByteWriter(); p.encode(into: &w); return w.bytes }
            switch c.opcode {
            case ReadLocalVersionInformation.opcode:
                return ok(enc(ReadLocalVersionInformation.ReturnParameters(hciVersion: 12, hciSubversion: 1, lmpVersion: 12,
                                                                           companyIdentifier: 0xFFFF, lmpSubversion: 2)))
            case ReadLocalSupportedCommands.opcode:
                return ok(enc(ReadLocalSupportedCommands.ReturnParameters(supporting: [
                    Reset.opcode, ReadLocalSupportedFeatures.opcode, LEReadLocalSupportedFeatures.opcode,
                    LEReadBufferSize.opcode, ReadBDADDR.opcode, SetEventMask.opcode, LESetEventMask.opcode,
                    Disconnect.opcode,
                ])))
            case ReadLocalSupportedFeatures.opcode:
                return ok(enc(ReadLocalSupportedFeatures.ReturnParameters(lmpFeatures: 1 << 38)))
            case LEReadLocalSupportedFeatures.opcode:
                return ok(enc(LEReadLocalSupportedFeatures.ReturnParameters(leFeatures: [.leEncryption])))
            case LEReadBufferSize.opcode:
                return ok(enc(LEReadBufferSize.ReturnParameters(leACLDataPacketLength: aclLength, totalNumLEACLDataPackets: aclCount)))
            case ReadBDADDR.opcode:
                return ok(enc(ReadBDADDR.ReturnParameters(address: address)))
            case Disconnect.opcode:
                return [.event(CommandStatus(status: .success, opcode: c.opcode).packet)]
            default:
                return ok()
            }
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ d: String) { description = d }
}

func connectionComplete(_ handle: UInt16, role: UInt8 = 0, peer: BDAddress = BDAddress([0xC1, 1, 2, 3, 4, 5])) -> LEConnectionComplete {
    LEConnectionComplete(status: .success, connectionHandle: handle, role: role, peerAddressType: .random,
                         peerAddress: peer, connectionInterval: 24, peripheralLatency: 0, supervisionTimeout: 42)
}

/// An L2CAP frame with basic header: length, CID 0x0040, then `payloadLength` counting octets.
func l2capFrame(_ payloadLength: Int, cid: UInt16 = 0x0040, seed: UInt8 = 0) -> [UInt8] {
    var w = ByteWriter(capacity: payloadLength + 4)
    w.u16(UInt16(payloadLength)); w.u16(cid)
    for i in 0..<payloadLength { w.u8(UInt8(truncatingIfNeeded: i) &+ seed) }
    return w.bytes
}
