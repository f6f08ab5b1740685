// `ble-hci-bench varied OUT N [SEED]`: a btsnoop capture of N packets in which no exchange is
// repeated, for the dump benchmark (issue 14): sessions of advertising, scanning, connection
// set-up, L2CAP signaling (parameter update, LE credit-based channels), SMP pairing and key
// distribution, encryption, and GATT traffic covering every ATT opcode — MTU exchange,
// discovery of services, characteristics and descriptors (16- and 128-bit UUIDs), reads (plain,
// blob, multiple, multiple variable), writes (request, command, signed, prepared), errors with
// varied codes and handles, notifications, indications, multiple-handle notifications — each
// session with its own connection handle, addresses, database layout, UUIDs and values drawn
// from a seeded generator. Some frames are split into 27-octet ACL fragments.
//
// The bytes are laid out here by hand from the specification (not with our codecs, so the
// capture is a check of the decoder, and `tshark -V` decodes it without "Malformed"):
// HCI packets Core v5.4 Vol 4 Part E 5.4 / 7.7.65; L2CAP Vol 3 Part A 3.1, 4; ATT Vol 3
// Part F 3.4; SMP Vol 3 Part H 3.5–3.6; AD Vol 3 Part C 11.
import Foundation
import HCI
import Capture
import BLE

/// Draws from BLE's SplitMix64 (the same seed gives the same capture).
struct SeededGenerator {
    var source: SplitMix64
    init(state: UInt64) { source = SplitMix64(seed: state) }
    mutating func next() -> UInt64 { source.next() }
    mutating func int(_ range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }
    mutating func u8() -> UInt8 { UInt8(truncatingIfNeeded: next()) }
    mutating func u16(_ range: ClosedRange<Int>) -> UInt16 { UInt16(int(range)) }
    mutating func bytes(_ n: Int) -> [UInt8] { (0..<n).map { _ in u8() } }
    mutating func chance(_ percent: Int) -> Bool { int(1...100) <= percent }
    mutating func pick<T>(_ items: [T]) -> T { items[int(0...items.count - 1)] }
    /// Printable ASCII text of `n` characters (for names and user descriptions).
    mutating func text(_ n: Int) -> [UInt8] { (0..<n).map { _ in UInt8(int(0x61...0x7a)) } }
}

struct VariedCapture {
    var rng: SeededGenerator
    let limit: Int
    var out: [UInt8] = BtsnoopWriter.fileHeader()
    var count = 0
    var micros: Int64 = 0
    var session = 0

    init(seed: UInt64, limit: Int) {
        rng = SeededGenerator(state: seed)
        self.limit = limit
        out.reserveCapacity(limit * 60)
    }

    var full: Bool { count >= limit }

    mutating func emit(_ p: HCIPacket, _ d: Direction) {
        guard !full else { return }
        count += 1
        micros += Int64(rng.int(50...3000))
        out += BtsnoopWriter.record(p, direction: d, time: Date(timeIntervalSince1970: 1_800_000_000 + Double(micros) / 1e6))
    }

    // MARK: HCI

    mutating func command(_ opcode: UInt16, _ params: [UInt8]) {
        emit(.command(HCICommandPacket(opcode: HCIOpcode(rawValue: opcode), parameters: params)), .sent)
    }
    mutating func event(_ code: UInt8, _ params: [UInt8]) {
        emit(.event(HCIEventPacket(code: code, parameters: params)), .received)
    }
    /// Command Complete (Vol 4 Part E 7.7.14) with Status 0 and the command's return parameters.
    mutating func commandComplete(_ opcode: UInt16, _ ret: [UInt8] = []) {
        event(0x0E, [1] + le16(opcode) + [0] + ret)
    }
    /// Command Status (7.7.15).
    mutating func commandStatus(_ opcode: UInt16, status: UInt8 = 0) {
        event(0x0F, [status, 1] + le16(opcode))
    }
    mutating func leMeta(_ subevent: UInt8, _ params: [UInt8]) { event(0x3E, [subevent] + params) }

    /// One L2CAP B-frame (Vol 3 Part A 3.1) on `handle`, split into 27-octet ACL fragments when
    /// `fragment` is set (first: PB 0b00 host→controller, 0b10 controller→host; then 0b01).
    mutating func l2cap(_ handle: UInt16, _ d: Direction, cid: UInt16, _ payload: [UInt8], fragment: Bool = false) {
        let frame = le16(UInt16(payload.count)) + le16(cid) + payload
        let start: PacketBoundary = d == .sent ? .firstNonFlushable : .first
        guard fragment, frame.count > 27 else {
            emit(.acl(HCIACLPacket(handle: handle, boundary: start, data: frame)), d)
            return
        }
        var offset = 0
        while offset < frame.count {
            let end = min(offset + 27, frame.count)
            emit(.acl(HCIACLPacket(handle: handle, boundary: offset == 0 ? start : .continuing, data: Array(frame[offset..<end]))), d)
            offset = end
        }
    }

    // MARK: One session

    /// An advertiser seen while scanning: LE Advertising Report (Vol 4 Part E 7.7.65.2) with
    /// Flags, a name, service UUIDs, manufacturer data and TX power (Vol 3 Part C 11; CSS A.1).
    mutating func advertisingReport() {
        var ad: [UInt8] = [2, 0x01, UInt8(rng.pick([0x06, 0x05, 0x1a, 0x02]))]
        let name = rng.text(rng.int(3...8))
        ad += [UInt8(name.count + 1), rng.chance(50) ? 0x09 : 0x08] + name
        let uuids = (0..<rng.int(1...2)).map { _ in rng.u16(0x1800...0x183f) }
        ad += [UInt8(2 * uuids.count + 1), 0x03] + uuids.flatMap(le16)
        if ad.count + 8 <= 31 {
            let data = rng.bytes(rng.int(1...(31 - ad.count - 4)))
            ad += [UInt8(data.count + 3), 0xFF] + le16(rng.u16(0x0000...0x0fff)) + data
        }
        if ad.count + 3 <= 31 { ad += [2, 0x0A, rng.u8()] }
        let eventType = UInt8(rng.pick([0, 0, 2, 3]))  // ADV_IND, ADV_SCAN_IND, ADV_NONCONN_IND
        leMeta(0x02, [1, eventType, UInt8(rng.int(0...1))] + rng.bytes(6) + [UInt8(ad.count)] + ad
               + [UInt8(bitPattern: Int8(rng.int(-100 ... -20)))])
    }

    mutating func run() {
        while !full {
            session += 1
            oneSession()
        }
    }

    mutating func oneSession() {
        // Scanning (7.8.10, 7.8.11) with a few reports.
        command(0x200B, [UInt8(rng.int(0...1))] + le16(rng.u16(0x0010...0x0100)) + le16(0x0010) + [0, 0])
        commandComplete(0x200B)
        command(0x200C, [1, UInt8(rng.int(0...1))])
        commandComplete(0x200C)
        for _ in 0..<rng.int(2...6) { advertisingReport() }
        command(0x200C, [0, 0])
        commandComplete(0x200C)
        if rng.chance(30) {
            // Advertising ourselves (7.8.5, 7.8.7, 7.8.9).
            let interval = rng.u16(0x0020...0x0400)
            command(0x2006, le16(interval) + le16(interval + 0x10) + [0, 0, 0] + [UInt8](repeating: 0, count: 6) + [7, 0])
            commandComplete(0x2006)
            let name = rng.text(rng.int(3...20))
            var data = [2, 0x01, 0x06, UInt8(name.count + 1), 0x09] + name
            let length = UInt8(data.count)
            data += [UInt8](repeating: 0, count: 31 - data.count)
            command(0x2008, [length] + data)
            commandComplete(0x2008)
            command(0x200A, [1]); commandComplete(0x200A)
            command(0x200A, [0]); commandComplete(0x200A)
        }

        // Connection (7.8.12, 7.7.65.1); a handle of its own.
        let handle = UInt16(0x0001 + (session * 37 + rng.int(0...36)) % 0x0EFF)
        let peer = rng.bytes(6)
        let peerType = UInt8(rng.int(0...1))
        let interval = rng.u16(0x0006...0x0C80), latency = rng.u16(0...4), timeout = rng.u16(0x0100...0x0C80)
        command(0x200D, le16(0x0060) + le16(0x0030) + [0, peerType] + peer + [0] + le16(interval) + le16(interval)
                + le16(latency) + le16(timeout) + le16(0) + le16(0))
        commandStatus(0x200D)
        let central = rng.chance(70)  // our role: central (GATT client) or peripheral (GATT server)
        leMeta(0x01, [0] + le16(handle) + [central ? 0 : 1, peerType] + peer + le16(interval) + le16(latency) + le16(timeout) + [UInt8(rng.int(0...7))])
        // Remote features (7.8.21, 7.7.65.4) and data length (7.8.33, 7.7.65.7).
        command(0x2016, le16(handle)); commandStatus(0x2016)
        leMeta(0x04, [0] + le16(handle) + rng.bytes(8))
        if rng.chance(60) {
            let tx = rng.u16(27...251)
            command(0x2022, le16(handle) + le16(tx) + le16(0x0148 + tx * 8))
            commandComplete(0x2022, le16(handle))
            leMeta(0x07, le16(handle) + le16(tx) + le16(0x0148 + tx * 8) + le16(rng.u16(27...251)) + le16(rng.u16(0x0148...0x4290)))
        }

        signaling(handle, central: central)
        if rng.chance(60) { pairing(handle, central: central) }
        gatt(handle, client: central ? .sent : .received)
        if rng.chance(40) { creditBasedChannel(handle) }

        // Completed packets (7.7.19) and disconnection (7.1.6, 7.7.5).
        event(0x13, [1] + le16(handle) + le16(rng.u16(1...20)))
        let reason = UInt8(rng.pick([0x13, 0x16, 0x08, 0x3B, 0x05]))
        if rng.chance(50) {
            command(0x0406, le16(handle) + [0x13]); commandStatus(0x0406)
            event(0x05, [0] + le16(handle) + [0x16])
        } else {
            event(0x05, [0] + le16(handle) + [reason])
        }
    }

    // MARK: L2CAP signaling (Vol 3 Part A 4)

    mutating func signal(_ handle: UInt16, _ d: Direction, code: UInt8, _ data: [UInt8]) {
        l2cap(handle, d, cid: 0x0005, [code, UInt8(rng.int(1...255))] + le16(UInt16(data.count)) + data)
    }

    mutating func signaling(_ handle: UInt16, central: Bool) {
        // Connection Parameter Update Request/Response (4.20, 4.21): from the peripheral.
        let minI = rng.u16(6...400), maxI = minI + rng.u16(0...400)
        let fromPeripheral: Direction = central ? .received : .sent
        let fromCentral: Direction = central ? .sent : .received
        signal(handle, fromPeripheral, code: 0x12, le16(minI) + le16(maxI) + le16(rng.u16(0...10)) + le16(rng.u16(100...3200)))
        let accepted = rng.chance(80)
        signal(handle, fromCentral, code: 0x13, le16(accepted ? 0 : 1))
        if accepted && central {
            command(0x2013, le16(handle) + le16(minI) + le16(maxI) + le16(0) + le16(rng.u16(100...3200)) + le16(0) + le16(0))
            commandStatus(0x2013)
            leMeta(0x03, [0] + le16(handle) + le16(maxI) + le16(0) + le16(rng.u16(100...3200)))
        }
        if rng.chance(20) {
            // Command Reject "Command not understood" (4.1) of an unknown code.
            signal(handle, fromCentral, code: 0x01, le16(0))
        }
    }

    /// An LE credit-based channel (4.22–4.24): connect, two K-frames (3.4), credits, disconnect.
    mutating func creditBasedChannel(_ handle: UInt16) {
        let spsm = rng.u16(0x0080...0x00ff), scid = rng.u16(0x0040...0x007f), dcid = rng.u16(0x0040...0x007f)
        let mtu = rng.u16(64...512), mps = rng.u16(23...247)
        signal(handle, .sent, code: 0x14, le16(spsm) + le16(scid) + le16(mtu) + le16(mps) + le16(rng.u16(1...10)))
        signal(handle, .received, code: 0x15, le16(dcid) + le16(mtu) + le16(mps) + le16(rng.u16(1...10)) + le16(0))
        for _ in 0..<2 {
            let sdu = rng.bytes(rng.int(1...min(Int(mps) - 2, 40)))
            l2cap(handle, .sent, cid: dcid, le16(UInt16(sdu.count)) + sdu)
        }
        signal(handle, .received, code: 0x16, le16(dcid) + le16(rng.u16(1...20)))
        signal(handle, .sent, code: 0x06, le16(dcid) + le16(scid))
        signal(handle, .received, code: 0x07, le16(dcid) + le16(scid))
    }

    // MARK: SMP (Vol 3 Part H 3.5, 3.6) and encryption (Vol 4 Part E 7.8.24, 7.7.8)

    mutating func smp(_ handle: UInt16, _ d: Direction, _ pdu: [UInt8], fragment: Bool = false) {
        l2cap(handle, d, cid: 0x0006, pdu, fragment: fragment)
    }

    mutating func pairing(_ handle: UInt16, central: Bool) {
        let toPeripheral: Direction = central ? .sent : .received, toCentral: Direction = central ? .received : .sent
        if rng.chance(30) { smp(handle, toCentral, [0x0B, UInt8(rng.pick([0x01, 0x05, 0x09, 0x0D, 0x2D]))]) }
        let sc = rng.chance(50)
        let auth = UInt8(0x01 | (rng.chance(50) ? 0x04 : 0) | (sc ? 0x08 : 0))
        smp(handle, toPeripheral, [0x01, UInt8(rng.int(0...4)), 0, auth, UInt8(rng.int(7...16)), UInt8(rng.int(0...7)), UInt8(rng.int(0...7))])
        if rng.chance(10) {
            smp(handle, toCentral, [0x05, UInt8(rng.pick([0x03, 0x05, 0x06, 0x08, 0x09]))])  // Pairing Failed
            return
        }
        smp(handle, toCentral, [0x02, UInt8(rng.int(0...4)), 0, auth, 16, UInt8(rng.int(0...7)), UInt8(rng.int(0...7))])
        if sc {
            smp(handle, toPeripheral, [0x0C] + rng.bytes(64), fragment: true)
            smp(handle, toCentral, [0x0C] + rng.bytes(64), fragment: true)
            if rng.chance(30) { smp(handle, toCentral, [0x0E, UInt8(rng.int(0...4))]) }  // Keypress
            smp(handle, toCentral, [0x03] + rng.bytes(16))
            smp(handle, toPeripheral, [0x04] + rng.bytes(16))
            smp(handle, toCentral, [0x04] + rng.bytes(16))
            if rng.chance(10) { smp(handle, toCentral, [0x05, 0x0B]); return }  // DHKey Check Failed
            smp(handle, toPeripheral, [0x0D] + rng.bytes(16))
            smp(handle, toCentral, [0x0D] + rng.bytes(16))
        } else {
            smp(handle, toPeripheral, [0x03] + rng.bytes(16))
            smp(handle, toCentral, [0x03] + rng.bytes(16))
            smp(handle, toPeripheral, [0x04] + rng.bytes(16))
            if rng.chance(10) { smp(handle, toCentral, [0x05, 0x04]); return }  // Confirm Value Failed
            smp(handle, toCentral, [0x04] + rng.bytes(16))
        }
        // Encryption: the central starts it, the peripheral's controller asks its host for the key.
        let rand = rng.bytes(8), ediv = rng.bytes(2), ltk = rng.bytes(16)
        if central {
            command(0x2019, le16(handle) + rand + ediv + ltk); commandStatus(0x2019)
        } else {
            leMeta(0x05, le16(handle) + rand + ediv)
            command(0x201A, le16(handle) + ltk); commandComplete(0x201A, le16(handle))
        }
        event(0x08, [0] + le16(handle) + [1])  // Encryption_Enabled: on (AES-CCM)
        // Key distribution (3.6): LTK + EDIV/Rand (legacy), IRK + identity address, CSRK.
        for d in [toCentral, toPeripheral] {
            if !sc { smp(handle, d, [0x06] + rng.bytes(16)); smp(handle, d, [0x07] + rng.bytes(10)) }
            smp(handle, d, [0x08] + rng.bytes(16))
            smp(handle, d, [0x09, UInt8(rng.int(0...1))] + rng.bytes(6))
            if rng.chance(50) { smp(handle, d, [0x0A] + rng.bytes(16)) }
        }
    }

    // MARK: GATT over ATT (Vol 3 Part F 3.4, Part G 4)

    struct Characteristic {
        var declaration: UInt16
        var valueHandle: UInt16
        var uuid: [UInt8]  // little-endian, 2 or 16 octets
        var properties: UInt8
        var descriptors: [(handle: UInt16, uuid: UInt16)]
        var end: UInt16 { descriptors.last?.handle ?? valueHandle }
    }
    struct Service {
        var start: UInt16
        var end: UInt16
        var uuid: [UInt8]
        var characteristics: [Characteristic]
    }

    /// A database of its own: 2–6 services at a random base handle, 16-bit (SIG) or 128-bit
    /// UUIDs, 1–4 characteristics each, some with a CCCD (0x2902) or user description (0x2901).
    mutating func database() -> [Service] {
        var h = rng.u16(1...64)
        var services: [Service] = []
        for _ in 0..<rng.int(2...6) {
            let start = h
            let uuid = rng.chance(50) ? le16(rng.u16(0x1800...0x183f)) : rng.bytes(16)
            h += 1
            var chars: [Characteristic] = []
            for _ in 0..<rng.int(1...4) {
                // 128-bit characteristic UUIDs, so tshark shows values as bytes (a SIG 16-bit
                // characteristic would make it decode the value by type).
                var c = Characteristic(declaration: h, valueHandle: h + 1, uuid: rng.bytes(16),
                                       properties: 0x02 | 0x08 | 0x04 | (rng.chance(60) ? 0x10 : 0) | (rng.chance(40) ? 0x20 : 0) | (rng.chance(20) ? 0x40 : 0),
                                       descriptors: [])
                h += 2
                if c.properties & 0x30 != 0 { c.descriptors.append((h, 0x2902)); h += 1 }
                if rng.chance(30) { c.descriptors.append((h, 0x2901)); h += 1 }
                chars.append(c)
            }
            services.append(Service(start: start, end: h - 1 + UInt16(rng.int(0...3)), uuid: uuid, characteristics: chars))
            h = services.last!.end + 1 + UInt16(rng.int(0...8))
        }
        return services
    }

    mutating func att(_ handle: UInt16, _ d: Direction, _ pdu: [UInt8]) {
        l2cap(handle, d, cid: 0x0004, pdu, fragment: pdu.count > 23 && rng.chance(30))
    }

    mutating func gatt(_ handle: UInt16, client: Direction) {
        let server: Direction = client == .sent ? .received : .sent
        let services = database()
        let chars = services.flatMap(\.characteristics)

        // MTU exchange (3.4.2).
        let clientMTU = rng.u16(23...517), serverMTU = rng.u16(23...517)
        att(handle, client, [0x02] + le16(clientMTU))
        att(handle, server, [0x03] + le16(serverMTU))
        let mtu = Int(min(clientMTU, serverMTU))

        // Primary services (Part G 4.4.1): runs of one UUID size per response.
        var start: UInt16 = 1
        var i = 0
        while i < services.count {
            att(handle, client, [0x10] + le16(start) + le16(0xFFFF) + le16(0x2800))
            let size = services[i].uuid.count
            var list: [UInt8] = []
            while i < services.count, services[i].uuid.count == size, 2 + list.count + 4 + size <= mtu {
                list += le16(services[i].start) + le16(services[i].end) + services[i].uuid
                i += 1
            }
            att(handle, server, [0x11, UInt8(4 + size)] + list)
            start = services[i - 1].end + 1
        }
        att(handle, client, [0x10] + le16(start) + le16(0xFFFF) + le16(0x2800))
        att(handle, server, [0x01, 0x10] + le16(start) + [0x0A])

        // One service by UUID (4.4.2) when it is a 16-bit one.
        if let s = services.first(where: { $0.uuid.count == 2 }) {
            att(handle, client, [0x06] + le16(1) + le16(0xFFFF) + le16(0x2800) + s.uuid)
            att(handle, server, [0x07] + le16(s.start) + le16(s.end))
        }

        // Characteristics (4.6.1), then descriptors (4.7.1), per service.
        for s in services {
            var from = s.start
            var k = 0
            while k < s.characteristics.count {
                att(handle, client, [0x08] + le16(from) + le16(s.end) + le16(0x2803))
                var list: [UInt8] = []
                while k < s.characteristics.count, 2 + list.count + 21 <= mtu {
                    let c = s.characteristics[k]
                    list += le16(c.declaration) + [c.properties] + le16(c.valueHandle) + c.uuid
                    k += 1
                }
                att(handle, server, [0x09, 21] + list)
                from = s.characteristics[k - 1].valueHandle + 1
            }
            att(handle, client, [0x08] + le16(from) + le16(s.end) + le16(0x2803))
            att(handle, server, [0x01, 0x08] + le16(from) + [0x0A])
            for c in s.characteristics where !c.descriptors.isEmpty {
                att(handle, client, [0x04] + le16(c.valueHandle + 1) + le16(c.end))
                att(handle, server, [0x05, 0x01] + c.descriptors.flatMap { le16($0.handle) + le16($0.uuid) })
            }
        }

        // Reads (4.8): plain, blob, multiple, multiple variable; descriptor reads.
        for c in chars {
            let value = rng.bytes(rng.int(0...min(mtu - 1, 40)))
            att(handle, client, [0x0A] + le16(c.valueHandle))
            att(handle, server, [0x0B] + value)
            if value.count == mtu - 1 {
                att(handle, client, [0x0C] + le16(c.valueHandle) + le16(UInt16(value.count)))
                att(handle, server, [0x0D] + rng.bytes(rng.int(0...min(mtu - 1, 20))))
            }
            for d in c.descriptors where d.uuid == 0x2901 {
                att(handle, client, [0x0A] + le16(d.handle))
                att(handle, server, [0x0B] + rng.text(rng.int(1...min(mtu - 1, 20))))
            }
        }
        if chars.count >= 2 {
            let a = chars[0].valueHandle, b = chars[chars.count - 1].valueHandle
            att(handle, client, [0x0E] + le16(a) + le16(b))
            att(handle, server, [0x0F] + rng.bytes(rng.int(2...min(mtu - 1, 30))))
            att(handle, client, [0x20] + le16(b) + le16(a))
            let va = rng.bytes(rng.int(0...8)), vb = rng.bytes(rng.int(0...8))
            att(handle, server, [0x21] + le16(UInt16(va.count)) + va + le16(UInt16(vb.count)) + vb)
        }

        // Errors (3.4.1.1, codes 3.4.1.1 table 3.4): varied handles, requests and codes.
        for _ in 0..<rng.int(2...5) {
            let h = rng.u16(1...0xFFFF)
            switch rng.int(0...3) {
            case 0:
                att(handle, client, [0x0A] + le16(h))
                att(handle, server, [0x01, 0x0A] + le16(h) + [UInt8(rng.pick([0x01, 0x02, 0x05, 0x08, 0x0C, 0x0F, 0x80, 0x9F]))])
            case 1:
                att(handle, client, [0x12] + le16(h) + rng.bytes(rng.int(1...8)))
                att(handle, server, [0x01, 0x12] + le16(h) + [UInt8(rng.pick([0x01, 0x03, 0x05, 0x0D, 0x0F, 0x11, 0xFC, 0xFD]))])
            case 2:
                att(handle, client, [0x0C] + le16(h) + le16(rng.u16(1...600)))
                att(handle, server, [0x01, 0x0C] + le16(h) + [UInt8(rng.pick([0x07, 0x0B, 0x02]))])
            default:
                att(handle, client, [0x08] + le16(h) + le16(h) + le16(rng.u16(0x2A00...0x2AFF)))
                att(handle, server, [0x01, 0x08] + le16(h) + [UInt8(rng.pick([0x0A, 0x06, 0x08]))])
            }
        }

        // Writes (4.9): request, command, signed command, prepared (long) write.
        for c in chars {
            for d in c.descriptors where d.uuid == 0x2902 {
                att(handle, client, [0x12] + le16(d.handle) + le16(c.properties & 0x10 != 0 ? (rng.chance(80) ? 1 : 3) : 2))
                att(handle, server, [0x13])
            }
            att(handle, client, [0x12] + le16(c.valueHandle) + rng.bytes(rng.int(1...min(mtu - 3, 20))))
            att(handle, server, [0x13])
            att(handle, client, [0x52] + le16(c.valueHandle) + rng.bytes(rng.int(0...min(mtu - 3, 20))))
            if c.properties & 0x40 != 0 {
                att(handle, client, [0xD2] + le16(c.valueHandle) + rng.bytes(rng.int(0...min(mtu - 15, 10))) + rng.bytes(12))
            }
        }
        if let c = chars.randomElement(using: &rng) {
            var offset: UInt16 = 0
            for _ in 0..<rng.int(1...3) {
                let part = rng.bytes(rng.int(1...min(mtu - 5, 18)))
                att(handle, client, [0x16] + le16(c.valueHandle) + le16(offset) + part)
                att(handle, server, [0x17] + le16(c.valueHandle) + le16(offset) + part)
                offset += UInt16(part.count)
            }
            let commit = rng.chance(80)
            att(handle, client, [0x18, commit ? 1 : 0])
            att(handle, server, [0x19])
        }

        // Notifications, indications (4.10, 4.11), multiple-handle notifications (4.10.2).
        let notifying = chars.filter { $0.properties & 0x30 != 0 }
        if !notifying.isEmpty {
            for _ in 0..<rng.int(20...120) {
                let c = rng.pick(notifying)
                let value = rng.bytes(rng.int(0...min(mtu - 3, 60)))
                if c.properties & 0x10 != 0 {
                    att(handle, server, [0x1B] + le16(c.valueHandle) + value)
                } else {
                    att(handle, server, [0x1D] + le16(c.valueHandle) + value)
                    att(handle, client, [0x1E])
                }
                if rng.chance(3) { event(0x13, [1] + le16(handle) + le16(rng.u16(1...8))) }
            }
            if notifying.count >= 2, mtu >= 23 {
                let a = rng.bytes(rng.int(0...6)), b = rng.bytes(rng.int(0...6))
                att(handle, server, [0x23] + le16(notifying[0].valueHandle) + le16(UInt16(a.count)) + a
                    + le16(notifying[1].valueHandle) + le16(UInt16(b.count)) + b)
            }
        }
    }
}

extension SeededGenerator: RandomNumberGenerator {}

func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xff), UInt8(v >> 8)] }

/// Writes the varied capture of `count` packets from `seed` to `output`.
func makeVariedCapture(output: String, count: Int, seed: UInt64) throws {
    var capture = VariedCapture(seed: seed, limit: count)
    capture.run()
    guard FileManager.default.createFile(atPath: output, contents: Data(capture.out)) else {
        throw CaptureError("cannot write \(output)")
    }
    print("capture=\(output) packets=\(capture.count) sessions=\(capture.session) bytes=\(capture.out.count)")
}
