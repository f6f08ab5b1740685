import Foundation
import HCI

// The air view (issue 28): the link-layer account of what the virtual controllers do, handed
// to a sink as `LinkLayerPacket`s (the CLI writes them to a pcap of
// LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR). For each advertising event the PDU it stands for, the
// scan request and response, CONNECT_IND with the parameters the link really uses, a data
// channel PDU for each ACL fragment (split at the link's data length), and the LL control
// PDUs the HCI commands imply (Core v5.4 Vol 6 Part B 2.3, 2.4, 5.1). With the airtime model
// the times are the model's; in instant mode a monotonic clock. Simplifications: one primary
// channel per advertising event (the first of the channel map), no empty PDUs in instant mode
// (the airtime model writes its exchanges whole), no encryption (after LL_START_ENC the
// plaintext is written, flagged decrypted, with no MIC).

/// Where the air view goes (a struct: a bare closure as a `Mutex`'s value is re-wrapped at every access).
struct AirSink { let record: @Sendable (LinkLayerPacket) -> Void }

/// A connection's link-layer state in the air view: link context only.
struct ConnectionLinkLayer {
    var accessAddress: UInt32 = 0
    var crcInit: UInt32 = 0
    /// Channel selection algorithm #1 with every channel used (Vol 6 Part B 4.5.8.2).
    var hop: UInt8 = 5
    var unmappedChannel = 0
    var eventCounter: UInt16 = 0
    /// Whether an event has started (the first event is counter 0).
    var started = false
    /// Sequence numbers of the central's and the peripheral's next PDU; each side's NESN is the
    /// other's SN (every PDU is acknowledged: the virtual link loses none).
    var centralSN = false
    var peripheralSN = false
    /// Airtime mode: the anchor of the last event written.
    var lastAnchor: Double?

    var rfChannel: UInt8 { LinkLayer.rfChannel(channelIndex: unmappedChannel) }

    /// The next connection event: its counter and channel.
    mutating func nextEvent(count: Int = 1) {
        for _ in 0..<max(1, count) {
            if started { eventCounter &+= 1 } else { started = true }
            unmappedChannel = (unmappedChannel + Int(hop)) % 37
        }
    }
}

/// An LL control PDU for `airControl`: its sender, opcode, parameters, and whether it is sent
/// encrypted (nil: as the link is).
typealias AirControlPDU = (from: ControllerState, opcode: LinkLayer.ControlOpcode, parameters: [UInt8], encrypted: Bool?)

/// An advertising event being written: where its answers go.
struct AirAdvertisingEvent {
    var adv: ControllerState.Advertisement
    /// RF channel of the PDU a request answers (the primary channel for legacy PDUs, the
    /// secondary one for extended advertising).
    var channel: UInt8
    var extended: Bool
    /// End of the last packet written, link time.
    var end: Double
    /// Where a connection request answering this event ends (CONNECT_IND, or AUX_CONNECT_REQ
    /// and AUX_CONNECT_RSP, T_IFS apart): the first anchor cannot come before it plus the
    /// transmit window delay (Vol 6 Part B 4.5.3).
    var connectionRequestEnd: Double {
        let request = end + Airtime.tIFS + Airtime.packetTime(payload: 34, phy: .le1M)
        return extended ? request + Airtime.tIFS + Airtime.packetTime(payload: 14, phy: .le1M) : request
    }
}

extension VirtualLink {
    /// Sends the air view to `sink` from now on (nil: stops). The packets come in order, on the
    /// link's context; `date(atLinkTime:)` gives their wall-clock time.
    public func recordAir(_ sink: (@Sendable (LinkLayerPacket) -> Void)?) {
        airSink.withLock { $0 = sink.map(AirSink.init) }
        airRecording.store(sink != nil, ordering: .releasing)
    }

    /// The wall-clock time of link time `t`.
    public func date(atLinkTime t: Double) -> Date { startDate.addingTimeInterval(t) }

    var isRecordingAir: Bool { airRecording.load(ordering: .acquiring) }
}

extension LinkContext {
    /// Link context: writes `packet`, its time made to follow the last one's.
    private func emit(_ packet: LinkLayerPacket) {
        var p = packet
        p.time = max(p.time, lastAirTime + 1e-6)
        lastAirTime = p.time
        link.airSink.withLock { $0 }?.record(p)
    }

    private func packetTime(_ pdu: [UInt8]) -> Double { Airtime.packetTime(payload: pdu.count - 2, phy: .le1M) }

    /// Link context: an advertising PDU at `time`, and the time it ends.
    private func emitAdvertising(_ pdu: [UInt8], channel: UInt8, kind: LinkLayerPacket.Kind, at time: Double) -> Double {
        emit(LinkLayerPacket(time: time, rfChannel: channel, kind: kind, accessAddress: LinkLayer.advertisingAccessAddress,
                             crcInit: LinkLayer.advertisingCRCInit, pdu: pdu))
        return max(time, lastAirTime) + packetTime(pdu)
    }

    // MARK: Advertising

    /// Link context: the advertising PDU of one event of `adv` at `time` (now when nil): the
    /// legacy PDU, or ADV_EXT_IND and the AUX_ADV_IND (and AUX_CHAIN_INDs) it points to. Nil when
    /// the air view is off.
    func airAdvertise(_ adv: ControllerState.Advertisement, at time: Double?) -> AirAdvertisingEvent? {
        guard isRecordingAir else { return nil }
        let start = time ?? currentTime()
        let primary = LinkLayer.rfChannel(channelIndex: 37 + min(2, (adv.channelMap & 0x07).trailingZeroBitCount))
        let advA = DeviceAddress(adv.address, type: adv.addressType)
        if adv.legacyPDU {
            let type: LinkLayer.AdvertisingType = switch adv.legacyType {
            case 0: .advInd
            case 1: .advDirectInd
            case 2: .advScanInd
            default: .advNonconnInd
            }
            var payload = LinkLayer.octets(adv.address)
            if type == .advDirectInd { payload += LinkLayer.octets(adv.targetA?.address ?? adv.address) } else { payload += adv.data.prefix(31) }
            let pdu = LinkLayer.advertisingPDU(type, txRandom: LinkLayer.isRandom(adv.addressType),
                                               rxRandom: type == .advDirectInd && LinkLayer.isRandom(adv.targetA?.type ?? .public), payload: payload)
            let end = emitAdvertising(pdu, channel: primary, kind: .advertising, at: start)
            return AirAdvertisingEvent(adv: adv, channel: primary, extended: false, end: end)
        }
        // Extended advertising (Vol 6 Part B 2.3.4, 4.4.2.2): ADV_EXT_IND on the primary channel
        // points (AuxPtr) to AUX_ADV_IND on a secondary one, which carries AdvA and the data,
        // chained (AUX_CHAIN_IND) when it does not fit one PDU.
        let mode: UInt8 = adv.connectable ? 1 : adv.scannable ? 2 : 0
        let adi = (did: dataID(adv.data), sid: adv.sid & 0x0F)
        let secondary = UInt8(Int.random(in: 0...36, using: &airGenerator))
        let indication = LinkLayer.extendedPDU(.advExtInd, mode: mode, header: .init(adi: adi, auxPtr: (secondary, 0)))
        let offset = auxOffset(after: indication)
        var end = emitAdvertising(LinkLayer.extendedPDU(.advExtInd, mode: mode, header: .init(adi: adi, auxPtr: (secondary, offset))),
                                  channel: primary, kind: .advertising, at: start)
        var at = start + Double(offset) * 30e-6
        var channel = secondary
        // AUX_ADV_IND: AdvA, TargetA when directed, ADI; AUX_CHAIN_IND: ADI (Vol 6 Part B 2.3.4.4, 2.3.4.7).
        var header = LinkLayer.ExtendedHeader(advA: advA, targetA: adv.targetA, adi: adi)
        var rest = ArraySlice(adv.data)
        var first = true
        repeat {
            let room = 255 - 1 - (1 + (header.advA == nil ? 0 : 6) + (header.targetA == nil ? 0 : 6) + 2)
            var chunk = rest.prefix(room)
            var next: UInt8?
            if rest.count > room {
                // More to come: an AuxPtr to the next AUX_CHAIN_IND (3 more octets here).
                chunk = rest.prefix(Self.wholeADStructures(rest, fitting: room - 3))
                next = UInt8(Int.random(in: 0...36, using: &airGenerator))
            }
            rest = rest.dropFirst(chunk.count)
            let draft = LinkLayer.extendedPDU(.auxAdvInd, mode: first ? mode : 0, header: header, data: Array(chunk))
            var h = header
            if let next { h.auxPtr = (next, auxOffset(after: draft + [0, 0, 0])) }
            let pdu = LinkLayer.extendedPDU(.auxAdvInd, mode: first ? mode : 0, header: h, data: Array(chunk))
            end = emitAdvertising(pdu, channel: LinkLayer.rfChannel(channelIndex: Int(channel)), kind: .auxiliaryAdvertising, at: at)
            if let next, let p = h.auxPtr {
                at += Double(p.offset) * 30e-6
                channel = next
            }
            first = false
            header = LinkLayer.ExtendedHeader(adi: adi)
        } while !rest.isEmpty
        return AirAdvertisingEvent(adv: adv, channel: LinkLayer.rfChannel(channelIndex: Int(secondary)), extended: true, end: end)
    }

    /// How many octets of `data` to put in one PDU of at most `room`: whole AD structures
    /// (Core Supplement Part A 1), which a decoder can read fragment by fragment, unless the
    /// first alone is longer (then `room`: a controller may fragment the data anywhere, Vol 6
    /// Part B 4.4.2.12).
    static func wholeADStructures(_ data: ArraySlice<UInt8>, fitting room: Int) -> Int {
        var end = data.startIndex
        while end < data.endIndex {
            let next = end + 1 + Int(data[end])
            guard next - data.startIndex <= room else { break }
            end = next
        }
        return end == data.startIndex ? room : end - data.startIndex
    }

    /// AuxOffset in 30 µs units: the auxiliary packet starts at least T_MAFS (300 µs) after the
    /// end of the packet pointing to it (Vol 6 Part B 4.4.2.2.3, 2.3.4.5).
    private func auxOffset(after pdu: [UInt8]) -> UInt16 {
        UInt16(((packetTime(pdu) + 300e-6) / 30e-6).rounded(.up))
    }

    /// Advertising Data ID: changes when the data does (Vol 6 Part B 4.4.2.11).
    private func dataID(_ data: [UInt8]) -> UInt16 {
        var h: UInt16 = UInt16(truncatingIfNeeded: data.count)
        for b in data { h = (h &* 31 &+ UInt16(b)) }
        return h & 0x0FFF
    }

    /// Link context: a scanner's request and the advertiser's response, T_IFS apart, after the
    /// advertising PDU (SCAN_REQ/SCAN_RSP, or AUX_SCAN_REQ/AUX_SCAN_RSP on the secondary channel).
    func airScan(_ event: inout AirAdvertisingEvent?, scanner: DeviceAddress) {
        guard var e = event else { return }
        let adv = e.adv
        let request = LinkLayer.advertisingPDU(.scanReq, txRandom: LinkLayer.isRandom(scanner.type),
                                               rxRandom: LinkLayer.isRandom(adv.addressType),
                                               payload: LinkLayer.octets(scanner.address) + LinkLayer.octets(adv.address))
        let kind: LinkLayerPacket.Kind = e.extended ? .auxiliaryAdvertising : .advertising
        e.end = emitAdvertising(request, channel: e.channel, kind: kind, at: e.end + Airtime.tIFS)
        let response: [UInt8]
        if e.extended {
            response = LinkLayer.extendedPDU(.auxAdvInd, mode: 0, header: .init(advA: DeviceAddress(adv.address, type: adv.addressType),
                                                                                adi: (dataID(adv.scanResponse), adv.sid & 0x0F)),
                                             data: Array(adv.scanResponse.prefix(255 - 10)))
        } else {
            response = LinkLayer.advertisingPDU(.scanRsp, txRandom: LinkLayer.isRandom(adv.addressType),
                                                payload: LinkLayer.octets(adv.address) + adv.scanResponse.prefix(31))
        }
        e.end = emitAdvertising(response, channel: e.channel, kind: kind, at: e.end + Airtime.tIFS)
        event = e
    }

    /// Link context: the initiator's CONNECT_IND (or AUX_CONNECT_REQ and the advertiser's
    /// AUX_CONNECT_RSP) for the new connection `conn`, with the parameters it uses.
    func airConnect(_ event: AirAdvertisingEvent?, initiator: DeviceAddress, conn: VirtualConnection) {
        guard let e = event else { return }
        let adv = e.adv
        let requestStart = e.end + Airtime.tIFS
        // The transmit window starts 1.25 ms after the end of CONNECT_IND (+ the offset, Vol 6
        // Part B 4.5.3); the airtime model has placed the first anchor, instant mode at once.
        let connectEnd = requestStart + Airtime.packetTime(payload: 34, phy: .le1M)
        var windowOffset: UInt16 = 0
        if airtime != nil {
            let offset = conn.air.nextAnchor - connectEnd - Airtime.transmitWindowDelay
            windowOffset = UInt16(clamping: max(0, Int((offset / 1.25e-3).rounded(.down))))
            conn.ll.lastAnchor = conn.air.nextAnchor
        }
        let data = LinkLayer.ConnectionData(accessAddress: conn.ll.accessAddress, crcInit: conn.ll.crcInit, windowSize: 1,
                                            windowOffset: windowOffset, interval: conn.interval, latency: conn.latency,
                                            timeout: conn.timeout, hop: conn.ll.hop)
        let request = LinkLayer.advertisingPDU(.connectInd, txRandom: LinkLayer.isRandom(initiator.type),
                                               rxRandom: LinkLayer.isRandom(adv.addressType),
                                               payload: LinkLayer.octets(initiator.address) + LinkLayer.octets(adv.address) + data.octets)
        let kind: LinkLayerPacket.Kind = e.extended ? .auxiliaryAdvertising : .advertising
        let end = emitAdvertising(request, channel: e.channel, kind: kind, at: requestStart)
        if e.extended {
            // AUX_CONNECT_RSP: AdvA and TargetA, the initiator (Vol 6 Part B 2.3.2.2).
            let response = LinkLayer.extendedPDU(.auxConnectRsp, mode: 0,
                                                 header: .init(advA: DeviceAddress(adv.address, type: adv.addressType), targetA: initiator))
            _ = emitAdvertising(response, channel: e.channel, kind: kind, at: end + Airtime.tIFS)
        }
    }

    // MARK: Connections

    /// Link context: a new connection's access address, CRCInit and hop increment (Vol 6 Part B
    /// 2.1.2, 3.1.1, 4.5.8.2: hop 5–16), drawn from the air view's own generator.
    func drawConnectionLinkLayer() -> ConnectionLinkLayer {
        var ll = ConnectionLinkLayer()
        repeat { ll.accessAddress = UInt32.random(in: .min ... .max, using: &airGenerator) } while !LinkLayer.isValidAccessAddress(ll.accessAddress)
        ll.crcInit = UInt32.random(in: 0...0xFF_FFFF, using: &airGenerator)
        ll.hop = UInt8.random(in: 5...16, using: &airGenerator)
        return ll
    }

    /// Link context: one data channel PDU from `sender` on `conn` in the current event.
    private func emitData(_ conn: VirtualConnection, from sender: ControllerState, llid: LinkLayer.LLID, md: Bool,
                          payload: [UInt8], encrypted: Bool, at time: Double) {
        let central = conn.isCentral(sender)
        let sn = central ? conn.ll.centralSN : conn.ll.peripheralSN
        let nesn = central ? conn.ll.peripheralSN : conn.ll.centralSN
        if central { conn.ll.centralSN.toggle() } else { conn.ll.peripheralSN.toggle() }
        let pdu = LinkLayer.dataPDU(llid, nesn: nesn, sn: sn, md: md, payload: payload)
        emit(LinkLayerPacket(time: time, rfChannel: conn.ll.rfChannel, kind: central ? .centralToPeripheral : .peripheralToCentral,
                             decrypted: encrypted, phy: conn.phy, accessAddress: conn.ll.accessAddress, crcInit: conn.ll.crcInit, pdu: pdu))
    }

    /// Link context, instant mode: the data PDUs of one ACL fragment `sender`'s host gave, in an
    /// event of their own: the fragment's LLID on the first (0b10 start, 0b01 continuation),
    /// then continuations, each at most the sender's data length (Vol 6 Part B 2.4, 4.5.10).
    func airData(_ conn: VirtualConnection, from sender: ControllerState, acl: HCIACLPacket) {
        guard isRecordingAir else { return }
        conn.ll.nextEvent()
        let maxOctets = Int(conn.isCentral(sender) ? conn.centralTxOctets : conn.peripheralTxOctets)
        var rest = ArraySlice(acl.data)
        var llid: LinkLayer.LLID = acl.boundary == .continuing ? .continuation : .start
        var time = currentTime()
        repeat {
            let chunk = rest.prefix(maxOctets)
            rest = rest.dropFirst(chunk.count)
            emitData(conn, from: sender, llid: llid, md: !rest.isEmpty, payload: Array(chunk), encrypted: conn.encrypted, at: time)
            time = lastAirTime + Airtime.packetTime(payload: chunk.count, phy: conn.phy) + Airtime.tIFS
            llid = .continuation
        } while !rest.isEmpty
    }

    /// Link context, airtime mode: a connection event starts at `anchor`.
    func airConnectionEvent(_ conn: VirtualConnection, at anchor: Double) {
        guard isRecordingAir else { return }
        let count = conn.ll.lastAnchor.map { Int((((anchor - $0) / conn.intervalSeconds)).rounded()) } ?? 1
        conn.ll.nextEvent(count: conn.ll.started ? count : 1)
        conn.ll.lastAnchor = anchor
    }

    /// Link context, airtime mode: the PDU one side sends in an exchange at `time`: the next
    /// part of its first queued packet, or an empty PDU (LLID 0b01, length 0).
    func airExchangePDU(_ conn: VirtualConnection, toPeripheral: Bool, at time: Double) {
        guard isRecordingAir else { return }
        let sender = toPeripheral ? conn.central : conn.peripheral
        let queue = toPeripheral ? conn.air.toPeripheral : conn.air.toCentral
        let maxOctets = Int(toPeripheral ? conn.centralTxOctets : conn.peripheralTxOctets)
        guard !queue.isEmpty else {
            return emitData(conn, from: sender, llid: .continuation, md: false, payload: [], encrypted: conn.encrypted, at: time)
        }
        let p = queue.first
        let sent = p.out.data.count - p.remaining
        let chunk = Array(p.out.data[sent..<(sent + min(p.remaining, maxOctets))])
        let llid: LinkLayer.LLID = sent == 0 && p.out.boundary != .continuing ? .start : .continuation
        emitData(conn, from: sender, llid: llid, md: queue.count > 1 || p.remaining > maxOctets, payload: chunk,
                 encrypted: conn.encrypted, at: time)
    }

    /// Link context: LL control PDUs on `conn`, in one connection event of their own, in turn,
    /// T_IFS apart.
    func airControl(_ conn: VirtualConnection, _ pdus: [AirControlPDU]) {
        guard isRecordingAir, !pdus.isEmpty else { return }
        conn.ll.nextEvent()
        var time = currentTime()
        for (sender, opcode, parameters, encrypted) in pdus {
            emitData(conn, from: sender, llid: .control, md: false, payload: [opcode.rawValue] + parameters,
                     encrypted: encrypted ?? conn.encrypted, at: time)
            time = lastAirTime + Airtime.packetTime(payload: 1 + parameters.count, phy: conn.phy) + Airtime.tIFS
        }
    }

    /// Link context: `n` octets from the air view's generator (SKD and IV halves of LL_ENC_REQ/RSP).
    func airRandom(_ n: Int) -> [UInt8] {
        (0..<n).map { _ in UInt8.random(in: .min ... .max, using: &airGenerator) }
    }

    /// The connection event counter some events ahead: the instant of an update (Vol 6 Part B 5.1.1:
    /// at least 6 events ahead is what controllers use).
    func airInstant(_ conn: VirtualConnection) -> [UInt8] {
        let instant = conn.ll.eventCounter &+ 6
        return [UInt8(instant & 0xFF), UInt8(instant >> 8)]
    }
}

/// Little-endian octets of a value (LL control PDU parameters).
func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
func le64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * UInt64($0))) } }
