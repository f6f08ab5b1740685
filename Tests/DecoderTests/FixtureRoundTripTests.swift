import Testing
import HCI
import Capture
import L2CAP
import ATT
import SMP

/// Every packet of real captures made with Bumble's own host and controller (and of the demo
/// capture our stack wrote) goes through our typed codecs and back to the same bytes: HCI
/// commands and events, L2CAP frames (reassembled from ACL fragments), ATT, signaling and SMP PDUs.
@Suite struct FixtureRoundTripTests {
    struct Counts { var commands = 0, events = 0, att = 0, signaling = 0, smp = 0 }

    func roundTrip(_ name: String) throws -> Counts {
        var reader = try CaptureReader(path: fixturePath(name))
        let (records, error) = reader.readAll()
        #expect(error == nil)
        var counts = Counts()
        var pending: [String: [UInt8]] = [:]
        for record in records {
            guard case .success(let packet)? = record.packet else {
                Issue.record("record \(record.number) of \(name) is not a packet")
                continue
            }
            switch packet {
            case .command(let c):
                guard let typed = try HCICommands.decode(c) else { continue }  // a command we have no type for
                #expect(typed.packet == c, "command \(c.opcode.name) in record \(record.number)")
                counts.commands += 1
            case .event(let e):
                let typed = try HCIEvents.decode(e)
                if typed is UnknownEvent { continue }
                #expect(typed.packet == e, "event \(typed.name) in record \(record.number)")
                counts.events += 1
            case .acl(let a):
                let key = "\(a.handle)/\(record.direction.map { "\($0)" } ?? "?")"
                var buffer = a.boundary.isStart ? [] : (pending[key] ?? [])
                buffer += a.data
                guard buffer.count >= 4 else { pending[key] = buffer; continue }
                let total = 4 + (Int(buffer[0]) | Int(buffer[1]) << 8)
                guard buffer.count >= total else { pending[key] = buffer; continue }
                pending[key] = nil
                let frame = try L2CAPFrame.decode(buffer)
                #expect(frame.bytes == buffer)
                switch frame.cid.rawValue {
                case 0x0004:
                    let pdu = try ATTPDU.decode(frame.payload)
                    #expect(pdu.bytes == frame.payload, "ATT \(pdu.opcode) in record \(record.number)")
                    counts.att += 1
                case 0x0005:
                    let command = try SignalingCommand.decode(frame.payload)
                    #expect(command.bytes == frame.payload)
                    counts.signaling += 1
                case 0x0006:
                    let pdu = try SMPPDU.decode(frame.payload)
                    #expect(pdu.bytes == frame.payload)
                    counts.smp += 1
                default:
                    break
                }
            case .sco, .iso:
                break
            }
        }
        return counts
    }

    /// Each fixture with the fewest HCI commands its bring-up sends (our demo's host sends fewer
    /// than Bumble's).
    @Test(arguments: [("bumble-central.btsnoop", 15), ("bumble-peripheral.btsnoop", 15), ("ble-hci-demo.pcap", 10)])
    func everyPacketRoundTrips(_ name: String, commands: Int) throws {
        let counts = try roundTrip(name)
        // The fixtures hold a whole session: bring-up, scan, connect, GATT, disconnect.
        #expect(counts.commands >= commands)
        #expect(counts.events >= 30)
        #expect(counts.att >= 40)
    }
}
