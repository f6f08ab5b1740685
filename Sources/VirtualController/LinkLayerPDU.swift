import HCI

// The link layer's packets (Core v5.4 Vol 6 Part B 2.1–2.4) as the air view writes them: the
// virtual controller works at the HCI level, and these are the PDUs its work stands for. Only
// encoders: no part of the stack reads link-layer packets (tshark decodes the air captures).

/// One link-layer packet on the air, without its preamble: access address, PDU (header and
/// payload) and the CRC (Vol 6 Part B 2.1, 3.1.1).
public struct LinkLayerPacket: Sendable, Equatable {
    /// What the packet is, as the capture's pseudo-header says it (LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR
    /// flags, bits 7–9): advertising, auxiliary advertising, or data in one direction.
    public enum Kind: UInt8, Sendable { case advertising = 0, auxiliaryAdvertising = 1, centralToPeripheral = 2, peripheralToCentral = 3 }

    /// Link time, seconds: the airtime model's, or a monotonic clock in instant mode.
    public var time: Double
    /// RF channel 0–39 (2402 + 2 × n MHz, Vol 6 Part A 2): advertising channel index 37 is RF
    /// channel 0, 38 is 12, 39 is 39.
    public var rfChannel: UInt8
    public var kind: Kind
    /// Sent after encryption started: the virtual controller does not encrypt, so this is the
    /// plaintext (and no MIC), flagged "decrypted" in the capture.
    public var decrypted: Bool
    /// The PHY as the capture's pseudo-header codes it (flags bits 14–15): 0 LE 1M, 1 LE 2M, 2 LE Coded.
    public var phy: UInt8
    /// Access address (4, little-endian), header, payload, CRC (3).
    public var octets: [UInt8]

    public var accessAddress: UInt32 { UInt32(octets[0]) | UInt32(octets[1]) << 8 | UInt32(octets[2]) << 16 | UInt32(octets[3]) << 24 }

    init(time: Double, rfChannel: UInt8, kind: Kind, decrypted: Bool = false, phy: Airtime.PHY = .le1M,
         accessAddress: UInt32, crcInit: UInt32, pdu: [UInt8]) {
        self.time = time
        self.phy = switch phy { case .le1M: 0; case .le2M: 1; case .codedS2, .codedS8: 2 }
        self.rfChannel = rfChannel
        self.kind = kind
        self.decrypted = decrypted
        var w = ByteWriter(capacity: 4 + pdu.count + 3)
        w.u32(accessAddress)
        w.append(pdu)
        w.append(LinkLayer.crc(pdu, crcInit: crcInit))
        octets = w.bytes
    }
}

/// Link-layer constants and PDU encoders (Core v5.4 Vol 6 Part B).
public enum LinkLayer {
    /// The access address of every advertising channel packet (Vol 6 Part B 2.1.2).
    public static let advertisingAccessAddress: UInt32 = 0x8E89_BED6
    /// CRCInit on the advertising channels (Vol 6 Part B 3.1.1).
    public static let advertisingCRCInit: UInt32 = 0x55_5555

    /// The 24-bit CRC of Vol 6 Part B 3.1.1: the LFSR of x^24 + x^10 + x^9 + x^6 + x^4 + x^3 + x + 1,
    /// preset with CRCInit (its least significant bit in position 0), the PDU shifted in least
    /// significant bit first; sent from position 23 down to 0, so the first octet on the air
    /// holds positions 23…16 with position 23 in its least significant bit.
    public static func crc(_ pdu: [UInt8], crcInit: UInt32) -> [UInt8] {
        var r = crcInit & 0xFF_FFFF
        for octet in pdu {
            for bit in 0..<8 {
                let feedback = (r >> 23 & 1) ^ UInt32(octet >> bit & 1)
                r = (r << 1) & 0xFF_FFFF
                if feedback != 0 { r ^= 0x00_065B }
            }
        }
        return [reversed(UInt8(r >> 16 & 0xFF)), reversed(UInt8(r >> 8 & 0xFF)), reversed(UInt8(r & 0xFF))]
    }

    private static func reversed(_ b: UInt8) -> UInt8 {
        var out: UInt8 = 0
        for i in 0..<8 where b & (1 << i) != 0 { out |= 0x80 >> i }
        return out
    }

    /// RF channel of advertising channel index 37, 38 or 39, or of data channel index 0–36
    /// (Vol 6 Part B 1.4.1).
    static func rfChannel(channelIndex k: Int) -> UInt8 {
        switch k {
        case 37: 0
        case 38: 12
        case 39: 39
        case 0...10: UInt8(k + 1)
        default: UInt8(k + 2)
        }
    }

    /// Whether `aa` may be a connection's access address (Vol 6 Part B 2.1.2): not the
    /// advertising one nor one bit from it, no more than six equal bits in a row, at most 24
    /// transitions, at least two transitions in the six most significant bits, and not all four
    /// octets equal.
    static func isValidAccessAddress(_ aa: UInt32) -> Bool {
        guard aa != advertisingAccessAddress, (aa ^ advertisingAccessAddress).nonzeroBitCount != 1 else { return false }
        let octets = (0..<4).map { UInt8(truncatingIfNeeded: aa >> (8 * $0)) }
        guard Set(octets).count > 1 else { return false }
        var run = 1, transitions = 0
        for i in 1..<32 {
            if (aa >> i & 1) == (aa >> (i - 1) & 1) {
                run += 1
                if run > 6 { return false }
            } else {
                run = 1
                transitions += 1
            }
        }
        guard transitions <= 24 else { return false }
        let top = aa >> 26
        let topTransitions = (1..<6).filter { (top >> $0 & 1) != (top >> ($0 - 1) & 1) }.count
        return topTransitions >= 2
    }

    // MARK: Advertising channel PDUs (Vol 6 Part B 2.3)

    /// Advertising PDU types (Vol 6 Part B 2.3, Table 2.3).
    enum AdvertisingType: UInt8 {
        case advInd = 0b0000, advDirectInd = 0b0001, advNonconnInd = 0b0010, scanReq = 0b0011, scanRsp = 0b0100
        case connectInd = 0b0101, advScanInd = 0b0110, advExtInd = 0b0111, auxConnectRsp = 0b1000
        /// AUX_SCAN_REQ and AUX_CONNECT_REQ share the codes of SCAN_REQ and CONNECT_IND, on a secondary channel.
        static let auxScanReq = scanReq, auxConnectReq = connectInd
        /// AUX_ADV_IND, AUX_SCAN_RSP and AUX_CHAIN_IND share ADV_EXT_IND's code, on a secondary channel.
        static let auxAdvInd = advExtInd
    }

    /// Header (PDU Type, ChSel, TxAdd, RxAdd, Length) and payload.
    static func advertisingPDU(_ type: AdvertisingType, txRandom: Bool = false, rxRandom: Bool = false, payload: [UInt8]) -> [UInt8] {
        var h0 = type.rawValue & 0x0F
        if txRandom { h0 |= 0x40 }
        if rxRandom { h0 |= 0x80 }
        return [h0, UInt8(truncatingIfNeeded: payload.count)] + payload
    }

    /// A device address as the link layer sends it: least significant octet first.
    static func octets(_ a: BDAddress) -> [UInt8] { a.bytes.reversed() }

    static func isRandom(_ t: AddressType) -> Bool { t == .random || t == .randomIdentity }

    /// The connection parameters CONNECT_IND and AUX_CONNECT_REQ carry (LLData, Vol 6 Part B 2.3.3.1).
    struct ConnectionData {
        var accessAddress: UInt32
        var crcInit: UInt32
        /// transmitWindowSize and transmitWindowOffset, 1.25 ms units.
        var windowSize: UInt8
        var windowOffset: UInt16
        var interval: UInt16
        var latency: UInt16
        var timeout: UInt16
        /// 37 bits, one per data channel: all used here.
        var channelMap: UInt64 = 0x1F_FFFF_FFFF
        var hop: UInt8
        /// Sleep clock accuracy code (0: 251–500 ppm).
        var sca: UInt8 = 0

        var octets: [UInt8] {
            var w = ByteWriter(capacity: 22)
            w.u32(accessAddress)
            w.u24(crcInit)
            w.append([windowSize])
            w.u16(windowOffset)
            w.u16(interval)
            w.u16(latency)
            w.u16(timeout)
            for i in 0..<5 { w.append([UInt8(truncatingIfNeeded: channelMap >> (8 * UInt64(i)))]) }
            w.append([hop & 0x1F | sca << 5])
            return w.bytes
        }
    }

    /// Extended header fields in the order of Vol 6 Part B 2.3.4 (Common Extended Advertising
    /// Payload Format): AdvA, TargetA, ADI, AuxPtr, TxPower.
    struct ExtendedHeader {
        var advA: DeviceAddress?
        var targetA: DeviceAddress?
        /// Advertising Data Info: DID (12 bits), SID (4 bits).
        var adi: (did: UInt16, sid: UInt8)?
        /// AuxPtr: the secondary channel index and the offset (30 µs units) of the auxiliary packet, on LE 1M.
        var auxPtr: (channel: UInt8, offset: UInt16)?
        var txPower: Int8?
    }

    /// An extended advertising PDU (ADV_EXT_IND, AUX_ADV_IND, AUX_SCAN_RSP, AUX_CHAIN_IND,
    /// AUX_CONNECT_RSP): extended header length and AdvMode (0 non-connectable non-scannable,
    /// 1 connectable, 2 scannable), flags, the fields present, then AdvData.
    static func extendedPDU(_ type: AdvertisingType, mode: UInt8, header: ExtendedHeader, data: [UInt8] = []) -> [UInt8] {
        var flags: UInt8 = 0
        var fields: [UInt8] = []
        if let a = header.advA { flags |= 0x01; fields += octets(a.address) }
        if let t = header.targetA { flags |= 0x02; fields += octets(t.address) }
        if let adi = header.adi {
            let v = adi.did & 0x0FFF | UInt16(adi.sid & 0x0F) << 12
            flags |= 0x08; fields += [UInt8(v & 0xFF), UInt8(v >> 8)]
        }
        if let p = header.auxPtr {
            // Channel Index (6 bits), CA (0: 51–500 ppm), Offset Units (0: 30 µs), AUX Offset (13 bits), AUX PHY (0: LE 1M).
            let offset = p.offset & 0x1FFF
            flags |= 0x10; fields += [p.channel & 0x3F, UInt8(offset & 0xFF), UInt8(offset >> 8)]
        }
        if let tx = header.txPower { flags |= 0x40; fields.append(UInt8(bitPattern: tx)) }
        let extended = fields.isEmpty && flags == 0 ? [] : [flags] + fields
        let payload = [UInt8(extended.count) & 0x3F | mode << 6] + extended + data
        return advertisingPDU(type, txRandom: header.advA.map { isRandom($0.type) } ?? false,
                              rxRandom: header.targetA.map { isRandom($0.type) } ?? false, payload: payload)
    }

    // MARK: Data channel PDUs (Vol 6 Part B 2.4)

    /// LLID: 0b01 continuation of an L2CAP message (or an empty PDU), 0b10 start (or a complete
    /// message), 0b11 LL control PDU.
    enum LLID: UInt8 { case continuation = 0b01, start = 0b10, control = 0b11 }

    /// Header (LLID, NESN, SN, MD, CP 0, Length) and payload.
    static func dataPDU(_ llid: LLID, nesn: Bool, sn: Bool, md: Bool, payload: [UInt8]) -> [UInt8] {
        var h0 = llid.rawValue
        if nesn { h0 |= 0x04 }
        if sn { h0 |= 0x08 }
        if md { h0 |= 0x10 }
        return [h0, UInt8(truncatingIfNeeded: payload.count)] + payload
    }

    /// LL control PDU opcodes (Vol 6 Part B 2.4.2) the virtual controller's HCI commands imply.
    enum ControlOpcode: UInt8 {
        case connectionUpdateInd = 0x00, encReq = 0x03, encRsp = 0x04, startEncReq = 0x05, startEncRsp = 0x06
        case featureReq = 0x08, featureRsp = 0x09, pauseEncReq = 0x0A, pauseEncRsp = 0x0B, versionInd = 0x0C
        case rejectInd = 0x0D, peripheralFeatureReq = 0x0E, connectionParamReq = 0x0F, rejectExtInd = 0x11
        case lengthReq = 0x14, lengthRsp = 0x15, phyReq = 0x16, phyRsp = 0x17, phyUpdateInd = 0x18
        case terminateInd = 0x02
    }
}
