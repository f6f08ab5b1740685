import Foundation
import Testing
import HCI
import Capture
@testable import Decoder

/// The repository root, from this file's path (`<root>/Tests/DecoderTests/Support.swift`).
let repoRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

func fixturePath(_ name: String) -> String { repoRoot.appendingPathComponent("Tests/Fixtures/\(name)").path }

/// Decodes every record of a capture with one decoder.
func decodeCapture(_ path: String) throws -> [DecodedPacket] {
    var reader = try CaptureReader(path: path)
    let (records, error) = reader.readAll()
    if let error { throw error }
    let decoder = PacketDecoder()
    return records.map { decoder.decode($0) }
}

/// Every value of fields called `name`, at any depth.
func values(named name: String, in fields: [Field]) -> [FieldValue] {
    var out: [FieldValue] = []
    func walk(_ fs: [Field]) {
        for f in fs {
            if f.name == name { out.append(f.value) }
            walkValue(f.value)
        }
    }
    func walkValue(_ v: FieldValue) {
        switch v {
        case .object(let inner): walk(inner)
        case .list(let items): items.forEach(walkValue)
        default: break
        }
    }
    walk(fields)
    return out
}

func field(_ name: String, _ fields: [Field]?) -> FieldValue? { fields?.first { $0.name == name }?.value }

/// "0x0c03" / 12 → Int.
func intValue(_ v: FieldValue?) -> Int? {
    switch v {
    case .int(let i)?: return i
    case .code(let s)?: return Int(s.dropFirst(2), radix: 16)
    default: return nil
    }
}

func packet(_ type: HCIPacketType, _ body: [UInt8]) -> Result<HCIPacket, DecodeError> {
    Result { () throws(DecodeError) in try HCIPacket(type: type, body: body) }
}

/// An ACL packet body: handle + PB flag, length, data.
func aclBody(handle: UInt16 = 0x0040, pb: UInt8, _ data: [UInt8]) -> [UInt8] {
    let hf = handle | UInt16(pb) << 12
    return [UInt8(hf & 0xff), UInt8(hf >> 8), UInt8(data.count & 0xff), UInt8(data.count >> 8)] + data
}

/// An L2CAP B-frame: length, CID, payload.
func l2cap(cid: UInt16, _ payload: [UInt8]) -> [UInt8] {
    [UInt8(payload.count & 0xff), UInt8(payload.count >> 8), UInt8(cid & 0xff), UInt8(cid >> 8)] + payload
}

let t0 = CaptureTime(seconds: 1_800_000_000, nanoseconds: 123_456_000)

extension PacketDecoder {
    func acl(_ direction: Direction, handle: UInt16 = 0x0040, pb: UInt8, _ data: [UInt8]) -> DecodedPacket {
        let body = aclBody(handle: handle, pb: pb, data)
        return decode(direction: direction, packet: packet(.acl, body), raw: [0x02] + body, time: t0)
    }
    func event(_ code: UInt8, _ params: [UInt8]) -> DecodedPacket {
        let body = [code, UInt8(params.count)] + params
        return decode(direction: .received, packet: packet(.event, body), raw: [0x04] + body, time: t0)
    }
}
