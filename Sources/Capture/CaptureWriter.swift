import Foundation
import Synchronization
import HCI
#if canImport(Glibc)
import Glibc
#endif

/// Record encoders for the three formats `-w FILE` writes. Pure functions: the file I/O is in
/// `CaptureWriter`, so tests and other writers can reuse the exact bytes.

/// btsnoop, datalink 1002 (H4), as BlueZ writes it. All fields big-endian.
public enum BtsnoopWriter {
    public static let datalinkH4: UInt32 = 1002
    /// Microseconds from btsnoop's epoch (0000-01-01 00:00) to 1970-01-01 00:00. BlueZ writes
    /// `(unix - 946684800 s) + 0x00E03AB44A676000`, i.e. unix time + 0x00DCDDB30F2F8000.
    public static let epochOffsetMicroseconds: Int64 = 0x00DC_DDB3_0F2F_8000

    public static func fileHeader() -> [UInt8] {
        var w = ByteWriter(capacity: 16)
        w.append(Array("btsnoop".utf8) + [0])
        w.u32be(1)
        w.u32be(datalinkH4)
        return w.bytes
    }

    /// Flags: bit 0 received, bit 1 command/event.
    public static func flags(_ packet: HCIPacket, _ direction: Direction) -> UInt32 {
        var f: UInt32 = direction == .received ? 1 : 0
        if packet.type == .command || packet.type == .event { f |= 2 }
        return f
    }

    public static func record(_ packet: HCIPacket, direction: Direction, time: Date) -> [UInt8] {
        let h4 = packet.h4
        var w = ByteWriter(capacity: 24 + h4.count)
        w.u32be(UInt32(h4.count))  // original length
        w.u32be(UInt32(h4.count))  // included length
        w.u32be(flags(packet, direction))
        w.u32be(0)  // cumulative drops
        let micros = Int64((time.timeIntervalSince1970 * 1_000_000).rounded()) + epochOffsetMicroseconds
        w.u64be(UInt64(bitPattern: micros))
        w.append(h4)
        return w.bytes
    }
}

/// pcap, linktype 201 (LINKTYPE_BLUETOOTH_HCI_H4_WITH_PHDR): a 4-byte big-endian direction
/// (0 sent, 1 received) before the H4 packet. Written little-endian, microsecond magic.
public enum PcapWriter {
    public static let linktypeH4WithPhdr: UInt32 = 201

    public static func fileHeader() -> [UInt8] {
        // snaplen: the largest H4 packet plus the direction header.
        fileHeader(snaplen: 65535 + 8, linktype: linktypeH4WithPhdr)
    }

    /// A pcap file header: little-endian, microsecond magic, version 2.4.
    static func fileHeader(snaplen: UInt32, linktype: UInt32) -> [UInt8] {
        var w = ByteWriter(capacity: 24)
        w.u32(0xa1b2_c3d4)
        w.u16(2); w.u16(4)  // version 2.4
        w.u32(0)  // thiszone
        w.u32(0)  // sigfigs
        w.u32(snaplen)
        w.u32(linktype)
        return w.bytes
    }

    /// A record's header (seconds, microseconds, captured and original length: the record is
    /// whole) in a writer with room for the `length` octets that follow.
    static func recordHeader(length: Int, time: Date) -> ByteWriter {
        var w = ByteWriter(capacity: 16 + length)
        let micros = Int64((time.timeIntervalSince1970 * 1_000_000).rounded())
        w.u32(UInt32(truncatingIfNeeded: micros / 1_000_000))
        w.u32(UInt32(truncatingIfNeeded: micros % 1_000_000))
        w.u32(UInt32(length))
        w.u32(UInt32(length))
        return w
    }

    public static func record(_ packet: HCIPacket, direction: Direction, time: Date) -> [UInt8] {
        let h4 = packet.h4
        var w = recordHeader(length: 4 + h4.count, time: time)
        w.u32be(direction == .received ? 1 : 0)
        w.append(h4)
        return w.bytes
    }
}

/// pcapng (draft-ietf-opsawg-pcapng): a Section Header Block and one Interface Description
/// Block (link type 201, LINKTYPE_BLUETOOTH_HCI_H4_WITH_PHDR, microsecond timestamps: no
/// if_tsresol), then one Enhanced Packet Block per packet, each whole block built in memory
/// (so one write(2) each, as the other formats' records). Written in the host's byte order,
/// little-endian, as Wireshark writes it.
public enum PcapngWriter {
    public static let linktypeH4WithPhdr: UInt16 = 201

    /// SHB (section length unknown: -1) with shb_userappl "ble-hci", then the IDB.
    public static func fileHeader() -> [UInt8] {
        var w = ByteWriter(capacity: 64)
        let app = Array("ble-hci".utf8)
        let appPadded = (app.count + 3) & ~3
        let shbLength = 28 + 4 + appPadded + 4  // + shb_userappl option + opt_endofopt
        w.u32(0x0a0d_0d0a)
        w.u32(UInt32(shbLength))
        w.u32(0x1a2b_3c4d)  // byte-order magic
        w.u16(1); w.u16(0)  // version 1.0
        w.u64(UInt64.max)  // section length: not given
        w.u16(4); w.u16(UInt16(app.count)); w.append(app); w.append([UInt8](repeating: 0, count: appPadded - app.count))
        w.u16(0); w.u16(0)  // opt_endofopt
        w.u32(UInt32(shbLength))
        // IDB: link type(2) reserved(2) snaplen(4), no options.
        w.u32(1)
        w.u32(20)
        w.u16(linktypeH4WithPhdr); w.u16(0)
        w.u32(65535 + 8)
        w.u32(20)
        return w.bytes
    }

    /// One Enhanced Packet Block: interface 0, timestamp in microseconds since 1970 (high and
    /// low 32 bits), captured and original length, the 4-octet big-endian direction (0 sent,
    /// 1 received) and the H4 packet, padded to 32 bits, the block length again.
    public static func record(_ packet: HCIPacket, direction: Direction, time: Date) -> [UInt8] {
        let h4 = packet.h4
        let captured = 4 + h4.count
        let padded = (captured + 3) & ~3
        let length = 32 + padded
        var w = ByteWriter(capacity: length)
        let micros = UInt64(max(0, Int64((time.timeIntervalSince1970 * 1_000_000).rounded())))
        w.u32(6)
        w.u32(UInt32(length))
        w.u32(0)
        w.u32(UInt32(truncatingIfNeeded: micros >> 32))
        w.u32(UInt32(truncatingIfNeeded: micros))
        w.u32(UInt32(captured))
        w.u32(UInt32(captured))
        w.u32be(direction == .received ? 1 : 0)
        w.append(h4)
        w.append([UInt8](repeating: 0, count: padded - captured))
        w.u32(UInt32(length))
        return w.bytes
    }
}

/// pcap, linktype 256 (LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR): the air view of the virtual
/// controller. Each record is a 10-octet pseudo-header (RF channel, signal power, noise power,
/// access address offenses, reference access address, flags; multi-octet fields little-endian),
/// then the link-layer packet without its preamble (access address, PDU, CRC). Written
/// little-endian, microsecond magic.
public enum LinkLayerPcapWriter {
    public static let linktypeLELinkLayerWithPhdr: UInt32 = 256

    /// Pseudo-header flags (tcpdump.org's LINKTYPE_BLUETOOTH_LE_LL_WITH_PHDR).
    public static let dewhitened: UInt16 = 0x0001
    public static let signalPowerValid: UInt16 = 0x0002
    public static let decrypted: UInt16 = 0x0008
    public static let referenceAccessAddressValid: UInt16 = 0x0010

    public static func fileHeader() -> [UInt8] {
        // snaplen: the pseudo-header and the longest LE packet.
        PcapWriter.fileHeader(snaplen: 10 + 4 + 2 + 255 + 3, linktype: linktypeLELinkLayerWithPhdr)
    }

    /// One record. `pduType` is the flags' bits 7–9 (0 advertising, 1 auxiliary advertising,
    /// 2 data central → peripheral, 3 peripheral → central), `phy` bits 14–15 (0 1M, 1 2M, 2
    /// Coded). The CRC is left for the reader to check (flags "CRC checked" clear).
    public static func record(rfChannel: UInt8, signalPower: Int8, pduType: UInt8, phy: UInt8, decrypted isDecrypted: Bool,
                              packet: [UInt8], time: Date) -> [UInt8] {
        var w = PcapWriter.recordHeader(length: 10 + packet.count, time: time)
        w.append([rfChannel, UInt8(bitPattern: signalPower), 0, 0])
        // The reference access address is the packet's own (its first four octets).
        w.append(packet.prefix(4))
        var flags = dewhitened | signalPowerValid | referenceAccessAddressValid | UInt16(pduType & 0x07) << 7 | UInt16(phy & 0x03) << 14
        if isDecrypted { flags |= decrypted }
        w.u16(flags)
        w.append(packet)
        return w.bytes
    }
}

/// Why a capture file could not be written or read.
public struct CaptureError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Writes a capture file. Each record is built in memory and written with one write(2), so
/// the file always ends on a whole record as far as the kernel is concerned: a process killed
/// with SIGKILL leaves a file readable to its last complete record, and a write that fails
/// part-way (disk full) is cut back to the last whole record. Thread-safe.
public final class CaptureWriter: Sendable {
    /// `linkLayer`: pcap of LE link-layer packets (linktype 256), written with `write(linkLayerRecord:)`.
    public enum Format: Sendable, Equatable { case btsnoop, pcap, pcapng, linkLayer }

    public let path: String
    public let format: Format
    private struct File {
        var fd: Int32
        /// File length up to the end of the last whole record.
        var wholeLength: off_t = 0
        /// The first write error; later writes are skipped (the capture is incomplete from there).
        var failure: CaptureError?
    }
    /// One record written at a time, whole, in the order the writers got the lock.
    private let file: Mutex<File>

    /// The first write error; later writes were skipped (the capture is incomplete from there).
    public var failure: CaptureError? { file.withLock { $0.failure } }

    /// `*.pcap` → pcap (linktype 201); `*.pcapng` → pcapng (link type 201); anything else →
    /// btsnoop (datalink 1002).
    public static func open(path: String) throws(CaptureError) -> CaptureWriter {
        try CaptureWriter(path: path, format: format(forPath: path))
    }

    /// The format `open(path:)` writes for `path`, by its extension.
    public static func format(forPath path: String) -> Format {
        let p = path.lowercased()
        return p.hasSuffix(".pcap") ? .pcap : p.hasSuffix(".pcapng") ? .pcapng : .btsnoop
    }

    public init(path: String, format: Format) throws(CaptureError) {
        self.path = path
        self.format = format
        let fd = Glibc.open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let e = errno
            throw CaptureError("cannot create capture file \(path): \(String(cString: strerror(e)))")
        }
        let header: [UInt8]
        switch format {
        case .pcap: header = PcapWriter.fileHeader()
        case .pcapng: header = PcapngWriter.fileHeader()
        case .btsnoop: header = BtsnoopWriter.fileHeader()
        case .linkLayer: header = LinkLayerPcapWriter.fileHeader()
        }
        if let e = Self.writeAll(header, to: fd, path: path) {
            Glibc.close(fd)
            throw e
        }
        file = Mutex(File(fd: fd, wholeLength: off_t(header.count)))
    }

    public func write(_ packet: HCIPacket, direction: Direction, time: Date = Date()) {
        let record: [UInt8]
        switch format {
        case .pcap: record = PcapWriter.record(packet, direction: direction, time: time)
        case .pcapng: record = PcapngWriter.record(packet, direction: direction, time: time)
        case .btsnoop: record = BtsnoopWriter.record(packet, direction: direction, time: time)
        case .linkLayer:
            assertionFailure("an HCI packet written to the link-layer capture \(path)")
            return
        }
        write(record: record)
    }

    /// Writes one whole record built by one of the record encoders (a `linkLayer` capture's:
    /// `LinkLayerPcapWriter.record`).
    public func write(record: [UInt8]) {
        file.withLock { f in
            guard f.fd >= 0, f.failure == nil else { return }
            f.failure = Self.writeAll(record, to: f.fd, path: path)
            if f.failure == nil {
                f.wholeLength += off_t(record.count)
            } else {
                _ = ftruncate(f.fd, f.wholeLength)
            }
        }
    }

    public func close() {
        file.withLock { f in
            if f.fd >= 0 { Glibc.close(f.fd); f.fd = -1 }
        }
    }

    deinit { close() }

    private static func writeAll(_ bytes: [UInt8], to fd: Int32, path: String) -> CaptureError? {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n > 0 { offset += n; continue }
            let e = errno
            if n < 0 && e == EINTR { continue }
            return CaptureError("writing capture file \(path) failed: \(n < 0 ? String(cString: strerror(e)) : "nothing written")")
        }
        return nil
    }
}
