import Testing
import HCI
@testable import BLE

@Suite struct BandProtocolTests {
    @Test func crcMatchesTheStandardCheckValue() {
        // CRC-16/CCITT-FALSE of "123456789" is 0x29B1 (the catalogue's check value).
        #expect(crc16CCITT(Array("123456789".utf8)) == 0x29B1)
    }

    @Test func frameRoundTripAndCRCCheck() throws {
        let f = BandProtocol.totalStepsRequest(BandProtocol.Day(year: 2026, month: 11, day: 30))
        #expect(f.bytes.prefix(4) == [0xBA, 0x01, 0x04, 0x00])
        #expect(try BandProtocol.Frame.decode(f.bytes) == f)
        var corrupt = f.bytes
        corrupt[5] ^= 0x01
        #expect(throws: DecodeError.self) { try BandProtocol.Frame.decode(corrupt) }
    }

    @Test func recordPacksKindInTopTwoBits() throws {
        let r = BandProtocol.Record(kind: .sleep, count: 0x3FFF, hour: 2, minutes: 55, heartRate: 50, intensity: 1)
        #expect(r.bytes == [0x7F, 0xFF, 2, 55, 50, 1])
        #expect(try BandProtocol.Record(r.bytes[...]) == r)
        #expect(throws: DecodeError.self) { try BandProtocol.Record([0xC0, 0, 0, 0, 0, 0][...]) }
    }

    @Test func historyIsDeterministicAndReassemblesFromTwentyOctetChunks() throws {
        let day = BandProtocol.Day("2026-02-28")!
        let response = BandProtocol.respond(to: BandProtocol.historyRequest(day, days: 3))
        #expect(response.bytes.count > 512)
        #expect(response.chunks.allSatisfy { $0.count <= 20 })
        var reassembler = BandProtocol.Reassembler()
        var frames: [BandProtocol.Frame] = []
        for chunk in response.chunks { if let f = try reassembler.push(chunk) { frames.append(f) } }
        #expect(frames == [response])
        guard case .history(let start, let records) = try BandProtocol.parseResponse(frames[0]) else {
            Issue.record("not a history response"); return
        }
        #expect(start == day)
        #expect(records.count == 3 * 32)
        #expect(Array(records.prefix(32)) == BandProtocol.records(for: day))
        // Day after 2026-02-28 is 2026-03-01.
        #expect(Array(records[32..<64]) == BandProtocol.records(for: BandProtocol.Day("2026-03-01")!))
        #expect(BandProtocol.records(for: day) == BandProtocol.records(for: day))
    }

    @Test func badRequestsAreRefused() throws {
        let bad = BandProtocol.Frame(command: 0x02, payload: [0xEA, 0x07, 13, 1, 1])
        #expect(try BandProtocol.parseResponse(BandProtocol.respond(to: bad)) == .refused(command: 0x02, reason: 0x01))
        let unknown = BandProtocol.Frame(command: 0x33, payload: [])
        #expect(try BandProtocol.parseResponse(BandProtocol.respond(to: unknown)) == .refused(command: 0x33, reason: 0x02))
    }

    @Test func reassemblerRejectsGarbageAndOversize() {
        var r = BandProtocol.Reassembler()
        #expect(throws: DecodeError.self) { try r.push([0x00, 0x01]) }
        #expect(throws: DecodeError.self) { try r.push([0xBA, 0x02, 0xFF, 0xFF]) }
        #expect(!r.isPending)
    }

    @Test func datesAreValidated() {
        #expect(BandProtocol.Day("2026-02-29") == nil)
        #expect(BandProtocol.Day("2024-02-29") != nil)
        #expect(BandProtocol.Day("2026-13-01") == nil)
        #expect(BandProtocol.Day("26-01-01") == nil)
    }
}
