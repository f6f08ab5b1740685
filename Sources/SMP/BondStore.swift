import Foundation
import HCI
import Synchronization

// Bond store (CLI.md `--bonds DIR`): one JSON file per local identity address in DIR, mode 0600,
// written atomically (temp file + fsync + rename), bonds keyed by the peer's identity address.

/// One bond with a peer (what Vol 3 Part H 2.4.x says a bonded device keeps).
public struct SMPBond: Sendable, Equatable {
    /// The address the bond is filed under: the peer's identity address, its connection address if
    /// it gave none, or the address it paired from when that is an identity address of its own
    /// (public or static random) and not the one it distributed (see `distributedIdentity`).
    public var peer: DeviceAddress
    /// The identity address the peer distributed (Vol 3 Part H 3.6.5) when the bond is not filed
    /// under it: the peer paired from another public or static random address, and will come
    /// back from that one (so does BlueZ keep such a bond). Look-ups by either address find it.
    public var distributedIdentity: DeviceAddress?
    public var keySize: Int
    public var secureConnections: Bool
    public var authenticated: Bool
    /// The key to encrypt with: SC: the shared LTK; legacy central: the peer's LTK; legacy peripheral: its own.
    public var ltk: [UInt8]
    public var ediv: UInt16
    public var rand: [UInt8]
    /// Legacy: the keys for the other direction (the ones this side does not encrypt with in its role), if any.
    public var localLTK: SMPKeys?
    public var peerIRK: [UInt8]?
    public var peerCSRK: [UInt8]?
    public var signCounter: UInt32
    public var localCSRK: [UInt8]?
    public var localSignCounter: UInt32

    public init(peer: DeviceAddress, keySize: Int, secureConnections: Bool, authenticated: Bool,
                ltk: [UInt8], ediv: UInt16 = 0, rand: [UInt8] = [UInt8](repeating: 0, count: 8),
                localLTK: SMPKeys? = nil, peerIRK: [UInt8]? = nil, peerCSRK: [UInt8]? = nil, signCounter: UInt32 = 0,
                localCSRK: [UInt8]? = nil, localSignCounter: UInt32 = 0, distributedIdentity: DeviceAddress? = nil) {
        self.peer = peer
        self.distributedIdentity = distributedIdentity
        self.keySize = keySize
        self.secureConnections = secureConnections
        self.authenticated = authenticated
        self.ltk = ltk
        self.ediv = ediv
        self.rand = rand
        self.localLTK = localLTK
        self.peerIRK = peerIRK
        self.peerCSRK = peerCSRK
        self.signCounter = signCounter
        self.localCSRK = localCSRK
        self.localSignCounter = localSignCounter
    }

    /// The bond a completed pairing leaves, or nil when it must not be stored (no bonding on either
    /// side, or the debug key was used, Vol 3 Part H 2.3.5.6.1). `peerAddress`: the connection address,
    /// used when the peer distributed no identity address, or another one while pairing from an
    /// identity address of its own.
    public init?(result: SMPPairingResult, role: SMPRole, peerAddress: DeviceAddress) {
        guard result.bonding, !result.debugKey else { return nil }
        // Legacy: the central encrypts with the key the peripheral distributed, the peripheral with its own.
        let (used, other) = result.secureConnections || role == .initiator ? (result.peer, result.local) : (result.local, result.peer)
        guard let ltk = used.ltk else { return nil }
        // A resolvable or non-resolvable private address changes: the identity is what comes back.
        // A public or static random one is what the peer reconnects from, whatever it distributed.
        var filedUnder = result.peer.identityAddress ?? peerAddress
        var distributed: DeviceAddress?
        if let identity = result.peer.identityAddress, !identity.isSameIdentity(as: peerAddress),
           !peerAddress.type.isRandom || peerAddress.address.isRandomStatic {
            filedUnder = peerAddress
            distributed = identity
        }
        self.init(peer: filedUnder, keySize: result.keySize,
                  secureConnections: result.secureConnections, authenticated: result.authenticated,
                  ltk: ltk, ediv: used.ediv, rand: used.rand,
                  localLTK: result.secureConnections || other.ltk == nil ? nil : other,
                  peerIRK: result.peer.irk, peerCSRK: result.peer.csrk, localCSRK: result.local.csrk,
                  distributedIdentity: distributed)
    }

    /// Whether this is the bond of the peer at `address` (filed under it, or its distributed identity).
    public func belongs(to address: DeviceAddress) -> Bool {
        peer.isSameIdentity(as: address) || distributedIdentity?.isSameIdentity(as: address) == true
    }

    /// Whether `self` and `other` are bonds of the same peer (one replaces the other).
    func isSamePeer(as other: SMPBond) -> Bool {
        belongs(to: other.peer) || other.distributedIdentity.map(belongs(to:)) == true
    }

    /// Whether replacing `self` by `new` would lose protection (authentication, SC, key size).
    func isWeakened(by new: SMPBond) -> Bool {
        (authenticated && !new.authenticated) || (secureConnections && !new.secureConnections)
            || ((authenticated || secureConnections) && new.keySize < keySize)
    }
}

public enum SMPBondStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be parsed; it is left untouched.
    case corruptFile(path: String, reason: String)
    /// An existing authenticated / SC bond would be replaced by a weaker one (remove it first, or allowDowngrade).
    case downgradeRefused(peer: DeviceAddress, existing: String, new: String)
    case io(path: String, errno: Int32)

    public var description: String {
        switch self {
        case .corruptFile(let p, let r): "bond file \(p) is corrupt (\(r)); left as it is"
        case .downgradeRefused(let peer, let old, let new):
            "refusing to replace the \(old) bond of \(peer) with a \(new) one"
        case .io(let p, let e): "bond file \(p): \(String(cString: strerror(e)))"
        }
    }
}

/// One JSON file per local identity address; thread-safe.
///
/// Held in memory: the file is read once (at the first look-up) and every look-up, save and
/// removal works on that copy, so none does file I/O on the caller's thread (the host's loop
/// verifies Signed Write Commands and answers LTK requests with it). Changes are written by a
/// writer of the store's own, off the caller's thread, whole (temp file, fsync, rename, then the
/// directory fsynced): after a kill at any moment the file holds the old or the new bonds,
/// never half. Saves that come while a write runs are written together by the next one.
/// `flush()` waits until everything saved so far is on disk and throws the last write's error.
/// The store owns its file while it lives: changes made by another process meanwhile are not
/// read (and are replaced by its next write).
public final class SMPBondStore: Sendable {
    public let path: String
    public let localIdentity: DeviceAddress
    private let directory: String

    private struct Memory {
        /// The bonds as last read or saved; nil until read (or while the file cannot be read).
        var file: BondFile?
        /// Bumped by every change; `written` is the last one on disk.
        var version: UInt64 = 0
        var written: UInt64 = 0
        var writeScheduled = false
        /// Why the last write failed (nil when it succeeded); thrown by `flush`.
        var writeError: SMPBondStoreError?
    }
    private let memory = Mutex(Memory())
    private let writer: DispatchQueue
    /// Told of every failed write (the caller's `save` has returned by then).
    private let writeFailed: (@Sendable (SMPBondStoreError) -> Void)?

    /// `writer`: the queue the file is written on (a serial queue of its own by default; tests
    /// pass one they hold suspended). `writeFailed` hears each write that failed.
    public init(directory: String, localIdentity: DeviceAddress, writer: DispatchQueue? = nil,
                writeFailed: (@Sendable (SMPBondStoreError) -> Void)? = nil) throws {
        self.localIdentity = localIdentity
        let name = localIdentity.address.description.replacingOccurrences(of: ":", with: "-")
            + "-" + localIdentity.type.simple + ".json"
        path = (directory as NSString).appendingPathComponent(name)
        self.directory = directory
        self.writer = writer ?? DispatchQueue(label: "ble-hci bond store \(name)")
        self.writeFailed = writeFailed
        do {
            // Keys live here: the directory is private to the user too.
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw SMPBondStoreError.io(path: directory, errno: (error as NSError).code == NSFileWriteNoPermissionError ? EACCES : EIO)
        }
    }

    public func bonds() throws -> [SMPBond] {
        try memory.withLock { m in try loaded(&m).bonds }
    }

    public func bond(for peer: DeviceAddress) throws -> SMPBond? {
        try bonds().first { $0.belongs(to: peer) }
    }

    public func bond(ediv: UInt16, rand: [UInt8]) throws -> SMPBond? {
        try bonds().first { $0.ediv == ediv && $0.rand == rand }
    }

    /// Stores a bond, replacing the one of the same peer. Throws `.downgradeRefused` if that one was
    /// authenticated or SC and the new one is weaker, unless `allowDowngrade`. Returns once the
    /// store holds it; the file is written after (`flush` waits for it).
    public func save(_ bond: SMPBond, allowDowngrade: Bool = false) throws {
        try change { file in
            if let old = file.bonds.first(where: { $0.isSamePeer(as: bond) }), !allowDowngrade, old.isWeakened(by: bond) {
                throw SMPBondStoreError.downgradeRefused(peer: bond.peer, existing: Self.strength(old), new: Self.strength(bond))
            }
            file.bonds.removeAll { $0.isSamePeer(as: bond) }
            file.bonds.append(bond)
        }
    }

    public func remove(_ peer: DeviceAddress) throws {
        try change { file in file.bonds.removeAll { $0.belongs(to: peer) } }
    }

    /// Removes every bond (keeps our IRK); a corrupt file is replaced by an empty one, and the
    /// temporary files of writes a dead process left are removed (they hold keys too).
    public func removeAll() throws {
        memory.withLock { m in
            Self.recoverTemporaryFiles(of: path, localIdentity)
            if m.file == nil { m.file = try? Self.read(path, localIdentity) }
            var file = m.file ?? BondFile(localIdentity: CodableAddress(localIdentity), bonds: [])
            file.bonds = []
            file.generation = (file.generation ?? 0) + 1
            m.file = file
            scheduleWrite(&m)
        }
    }

    /// The bond whose peer IRK resolves this resolvable private address (ah, Vol 3 Part H 2.2.2).
    public func resolve(_ rpa: BDAddress) throws -> SMPBond? {
        try bonds().first { bond in bond.peerIRK.map { SMPPrivacy.resolves(rpa, irk: $0) } ?? false }
    }

    /// Our identity resolving key for this local identity: the stored one, or a new random one
    /// stored now (Core Vol 3 Part H 2.4.2.1: an IRK is random, and stays as long as the identity).
    public func localIRK() throws -> [UInt8] {
        var irk: [UInt8] = []
        try change { file in
            if let hex = file.localIRK, let stored = [UInt8](hex: hex), stored.count == 16 {
                irk = stored
                throw Unchanged()
            }
            irk = SMPCrypto.randomBytes(16)
            file.localIRK = irk.hex
        }
        return irk
    }

    /// Waits until every change made so far is on disk (or its write failed: throws why).
    /// Blocks the calling thread: call it off the host's loop (at exit, in `bonds`, in tests).
    public func flush() throws {
        try writer.sync { try memory.withLock { m in if let e = m.writeError { throw e } } }
    }

    /// `flush()` without blocking a thread of the concurrency pool.
    public func flushed() async throws {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<Void, any Error>) in
            writer.async { c.resume(with: Result { try self.memory.withLock { m in if let e = m.writeError { throw e } } }) }
        }
    }

    /// `body` thrown out of by a change that turned out to change nothing.
    private struct Unchanged: Error {}

    /// Applies `body` to the bonds in memory and has the file written.
    private func change(_ body: (inout BondFile) throws -> Void) throws {
        try memory.withLock { m in
            var file = try loaded(&m)
            do { try body(&file) } catch is Unchanged { return }
            file.generation = (file.generation ?? 0) + 1
            m.file = file
            scheduleWrite(&m)
        }
    }

    /// The bonds in memory, read from the file the first time (and again after a failed read).
    private func loaded(_ m: inout Memory) throws -> BondFile {
        if let file = m.file { return file }
        Self.recoverTemporaryFiles(of: path, localIdentity)
        let file = try Self.read(path, localIdentity)
        m.file = file
        return file
    }

    /// Queues a write of the bonds in memory unless one is queued already (it will write the
    /// newest bonds: saves in a burst cost one write). Caller holds `memory`.
    private func scheduleWrite(_ m: inout Memory) {
        m.version += 1
        guard !m.writeScheduled else { return }
        m.writeScheduled = true
        writer.async { self.writeNewest() }
    }

    /// On the writer: writes what memory holds now.
    private func writeNewest() {
        let (file, version): (BondFile?, UInt64) = memory.withLock { m in
            m.writeScheduled = false
            return (m.file, m.version)
        }
        guard let file else { return }
        var failure: SMPBondStoreError?
        do { try Self.write(file, to: path, directory: directory) } catch {
            failure = error as? SMPBondStoreError ?? .io(path: path, errno: EIO)
        }
        memory.withLock { m in
            m.writeError = failure
            if failure == nil { m.written = max(m.written, version) }
        }
        if let failure { writeFailed?(failure) }
    }

    // MARK: File

    private struct BondFile: Codable {
        var version = 1
        /// Counts the writes of this file (absent in files written before it was kept): tells
        /// which of the file and a temporary file a killed write left is the newer.
        var generation: UInt64?
        var localIdentity: CodableAddress
        /// Our IRK (hex), kept so bonded peers still resolve our RPAs in a later run (privacy).
        var localIRK: String?
        var bonds: [SMPBond]
    }

    private static func strength(_ b: SMPBond) -> String {
        "\(b.secureConnections ? "Secure Connections" : "legacy") \(b.authenticated ? "authenticated" : "unauthenticated") \(b.keySize)-octet"
    }

    private static func read(_ path: String, _ localIdentity: DeviceAddress) throws -> BondFile {
        guard let data = FileManager.default.contents(atPath: path) else {
            if access(path, F_OK) != 0 && errno == ENOENT { return BondFile(localIdentity: CodableAddress(localIdentity), bonds: []) }
            throw SMPBondStoreError.io(path: path, errno: access(path, R_OK) == 0 ? EIO : errno)
        }
        do {
            return try JSONDecoder().decode(BondFile.self, from: data)
        } catch {
            throw SMPBondStoreError.corruptFile(path: path, reason: Self.describe(error))
        }
    }

    /// The temporary files a write leaves when the process dies between creating the file and
    /// renaming it (`PATH.tmp-PID`, holding a whole new bond file once fsynced). One of a
    /// process that is gone is either complete and of a later write than the bond file (its
    /// `generation`), so put in its place (it holds the last bonds saved), or removed. A live
    /// process's is left to it.
    static func recoverTemporaryFiles(of path: String, _ localIdentity: DeviceAddress) {
        let directory = (path as NSString).deletingLastPathComponent
        let prefix = (path as NSString).lastPathComponent + ".tmp-"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names where name.hasPrefix(prefix) {
            let tmp = (directory as NSString).appendingPathComponent(name)
            if let pid = Int32(name.dropFirst(prefix.count)), pid != getpid(), kill(pid, 0) == 0 || errno == EPERM { continue }
            // Newer: a later write (file times are too coarse to tell writes apart).
            if let pending = try? read(tmp, localIdentity),
               (pending.generation ?? 0) > ((try? read(path, localIdentity))?.generation ?? 0),
               rename(tmp, path) == 0 { continue }
            unlink(tmp)
        }
    }

    private static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let c): c.debugDescription
        case DecodingError.keyNotFound(let k, _): "missing \(k.stringValue)"
        case DecodingError.typeMismatch(_, let c), DecodingError.valueNotFound(_, let c):
            "\(c.codingPath.map(\.stringValue).joined(separator: ".")): \(c.debugDescription)"
        default: "\(error)"
        }
    }

    /// Temp file (mode 0600 from creation), fsync, rename over the old file: a crash leaves the old or the new file, never half.
    private static func write(_ file: BondFile, to path: String, directory: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        if let failure = AtomicFile.write(try encoder.encode(file), to: path, directory: directory) {
            throw SMPBondStoreError.io(path: failure.path, errno: failure.errno)
        }
    }
}

/// Writing a file whole or not at all: a temp file (`PATH.tmp-PID`, `mode` from creation),
/// fsync, rename over `path`, then the directory fsynced. After a kill at any moment the file
/// holds the old or the new contents (bond files, OOB data).
public enum AtomicFile {
    /// Nil when written; else the path that failed and errno.
    public static func write(_ data: Data, to path: String, directory: String, mode: mode_t = 0o600) -> (path: String, errno: Int32)? {
        let tmp = path + ".tmp-\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { return (tmp, errno) }
        var ok = data.withUnsafeBytes { buf -> Bool in
            var offset = 0
            while offset < buf.count {
                let n = Foundation.write(fd, buf.baseAddress! + offset, buf.count - offset)
                if n < 0 { if errno == EINTR { continue }; return false }
                offset += n
            }
            return true
        }
        ok = ok && fchmod(fd, mode) == 0 && fsync(fd) == 0
        let err = errno
        close(fd)
        guard ok, rename(tmp, path) == 0 else {
            let e = ok ? errno : err
            unlink(tmp)
            return (path, e)
        }
        // Make the rename itself durable.
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            fsync(dirFD)
            close(dirFD)
        }
        return nil
    }
}

extension DeviceAddress {
    /// Same address and same public/random kind (HCI's "identity" address types count as their base type).
    public func isSameIdentity(as other: DeviceAddress) -> Bool {
        address == other.address && type.isRandom == other.type.isRandom
    }
}

// MARK: Codable (DeviceAddress lives in HCI without Codable: encoded here as "AA:BB:..", "public"/"random").

struct CodableAddress: Codable, Equatable {
    var address: String
    var type: String
    init(_ a: DeviceAddress) {
        address = a.address.description
        type = a.type.simple
    }
    var deviceAddress: DeviceAddress? {
        guard let bd = BDAddress(string: address), type == "public" || type == "random" else { return nil }
        return DeviceAddress(bd, type: type == "public" ? .public : .random)
    }
}

private extension KeyedDecodingContainer {
    func address(_ key: Key) throws -> DeviceAddress {
        let c = try decode(CodableAddress.self, forKey: key)
        guard let a = c.deviceAddress else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "bad address \(c.address)/\(c.type)")
        }
        return a
    }
    func addressIfPresent(_ key: Key) throws -> DeviceAddress? {
        contains(key) ? try address(key) : nil
    }
    /// A key of exactly `count` octets, written as hex (see `encodeOctets`).
    func octets(_ key: Key, _ count: Int) throws -> [UInt8] {
        let text = try decode(String.self, forKey: key)
        let digits = Array(text.utf8)
        guard digits.count == 2 * count else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "\(digits.count) hex digits, not \(2 * count)")
        }
        return try stride(from: 0, to: digits.count, by: 2).map { i in
            guard let v = UInt8(String(decoding: digits[i...i + 1], as: UTF8.self), radix: 16) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "not hex: \(text)")
            }
            return v
        }
    }
    func octetsIfPresent(_ key: Key, _ count: Int) throws -> [UInt8]? {
        contains(key) ? try octets(key, count) : nil
    }
}

private extension KeyedEncodingContainer {
    /// Keys as hex strings, octets in the order HCI and SMP carry them (least significant first),
    /// like BlueZ's bond files: readable, and a wrong length is visible.
    mutating func encodeOctets(_ value: [UInt8], forKey key: Key) throws {
        try encode(value.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined(), forKey: key)
    }
    mutating func encodeOctetsIfPresent(_ value: [UInt8]?, forKey key: Key) throws {
        if let value { try encodeOctets(value, forKey: key) }
    }
}

extension SMPIdentity: Codable {
    enum CodingKeys: String, CodingKey { case irk, address }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(irk: try c.octets(.irk, 16), address: try c.address(.address))
    }
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeOctets(irk, forKey: .irk)
        try c.encode(CodableAddress(address), forKey: .address)
    }
}

extension SMPKeys: Codable {
    enum CodingKeys: String, CodingKey { case ltk, ediv, rand, irk, identityAddress, csrk }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(ltk: try c.octetsIfPresent(.ltk, 16), ediv: try c.decode(UInt16.self, forKey: .ediv),
                  rand: try c.octets(.rand, 8), irk: try c.octetsIfPresent(.irk, 16),
                  identityAddress: try c.addressIfPresent(.identityAddress), csrk: try c.octetsIfPresent(.csrk, 16))
    }
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeOctetsIfPresent(ltk, forKey: .ltk)
        try c.encode(ediv, forKey: .ediv)
        try c.encodeOctets(rand, forKey: .rand)
        try c.encodeOctetsIfPresent(irk, forKey: .irk)
        try c.encodeIfPresent(identityAddress.map(CodableAddress.init), forKey: .identityAddress)
        try c.encodeOctetsIfPresent(csrk, forKey: .csrk)
    }
}

extension SMPBond: Codable {
    enum CodingKeys: String, CodingKey {
        case peer, keySize, secureConnections, authenticated, ltk, ediv, rand, localLTK, peerIRK, peerCSRK,
             signCounter, localCSRK, localSignCounter, distributedIdentity
    }
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let keySize = try c.decode(Int.self, forKey: .keySize)
        guard (7...16).contains(keySize) else {
            throw DecodingError.dataCorruptedError(forKey: .keySize, in: c, debugDescription: "key size \(keySize) not 7–16")
        }
        self.init(peer: try c.address(.peer), keySize: keySize,
                  secureConnections: try c.decode(Bool.self, forKey: .secureConnections),
                  authenticated: try c.decode(Bool.self, forKey: .authenticated),
                  ltk: try c.octets(.ltk, 16), ediv: try c.decode(UInt16.self, forKey: .ediv), rand: try c.octets(.rand, 8),
                  localLTK: try c.decodeIfPresent(SMPKeys.self, forKey: .localLTK),
                  peerIRK: try c.octetsIfPresent(.peerIRK, 16), peerCSRK: try c.octetsIfPresent(.peerCSRK, 16),
                  signCounter: try c.decode(UInt32.self, forKey: .signCounter),
                  localCSRK: try c.octetsIfPresent(.localCSRK, 16),
                  localSignCounter: try c.decode(UInt32.self, forKey: .localSignCounter),
                  distributedIdentity: try c.addressIfPresent(.distributedIdentity))
    }
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(CodableAddress(peer), forKey: .peer)
        try c.encode(keySize, forKey: .keySize)
        try c.encode(secureConnections, forKey: .secureConnections)
        try c.encode(authenticated, forKey: .authenticated)
        try c.encodeOctets(ltk, forKey: .ltk)
        try c.encode(ediv, forKey: .ediv)
        try c.encodeOctets(rand, forKey: .rand)
        try c.encodeIfPresent(localLTK, forKey: .localLTK)
        try c.encodeOctetsIfPresent(peerIRK, forKey: .peerIRK)
        try c.encodeOctetsIfPresent(peerCSRK, forKey: .peerCSRK)
        try c.encode(signCounter, forKey: .signCounter)
        try c.encodeOctetsIfPresent(localCSRK, forKey: .localCSRK)
        try c.encode(localSignCounter, forKey: .localSignCounter)
        try c.encodeIfPresent(distributedIdentity.map(CodableAddress.init), forKey: .distributedIdentity)
    }
}
