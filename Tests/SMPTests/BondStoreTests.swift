import Foundation
import Synchronization
import Testing
import HCI
@testable import SMP

@Suite struct SMPBondStoreTests {
    static let local = DeviceAddress(BDAddress(be("C0FFEE000001")), type: .random)
    static let peer = DeviceAddress(BDAddress(be("112233445566")), type: .public)

    /// A fresh directory under the system temp dir, removed after `body`.
    static func withDirectory(_ body: (String) throws -> Void) throws {
        let dir = NSTemporaryDirectory() + "smp-bonds-\(getpid())-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try body(dir)
    }

    static func bond(sc: Bool, authenticated: Bool, keySize: Int = 16, peer: DeviceAddress = peer, fill: UInt8 = 1) -> SMPBond {
        SMPBond(peer: peer, keySize: keySize, secureConnections: sc, authenticated: authenticated,
                ltk: [UInt8](repeating: fill, count: 16), ediv: sc ? 0 : 0x1234, rand: sc ? [UInt8](repeating: 0, count: 8) : Array(1...8),
                localLTK: sc ? nil : SMPKeys(ltk: [UInt8](repeating: 9, count: 16), ediv: 7, rand: Array(11...18)),
                peerIRK: Array(repeating: 0x77, count: 16), peerCSRK: Array(repeating: 5, count: 16), signCounter: 3)
    }

    /// Our IRK (privacy) lives in the bond file: generated once, the same in a later run (a new
    /// store object on the same file), kept when the bonds are cleared, 16 octets, mode 0600.
    @Test func localIRKPersists() throws {
        try Self.withDirectory { dir in
            let first = try SMPBondStore(directory: dir, localIdentity: Self.local)
            let irk = try first.localIRK()
            #expect(irk.count == 16 && irk != [UInt8](repeating: 0, count: 16))
            try first.flush()
            let again = try SMPBondStore(directory: dir, localIdentity: Self.local)
            #expect(try again.localIRK() == irk)
            try again.save(Self.bond(sc: true, authenticated: false))
            try again.removeAll()
            #expect(try again.localIRK() == irk)
            try again.flush()
            let mode = try FileManager.default.attributesOfItem(atPath: again.path)[.posixPermissions] as? Int
            #expect(mode == 0o600)
            // Another local identity has its own IRK.
            let other = DeviceAddress(BDAddress(be("C0FFEE000002")), type: .random)
            #expect(try SMPBondStore(directory: dir, localIdentity: other).localIRK() != irk)
        }
    }

    @Test func roundTripModeAndAtomicWrite() throws {
        try Self.withDirectory { dir in
            let store = try SMPBondStore(directory: dir, localIdentity: Self.local)
            #expect(try store.bonds().isEmpty)
            let b = Self.bond(sc: false, authenticated: false)
            try store.save(b)
            #expect(try store.bonds() == [b])
            #expect(try store.bond(for: Self.peer) == b)
            #expect(try store.bond(for: DeviceAddress(Self.peer.address, type: .publicIdentity)) == b)
            #expect(try store.bond(ediv: 0x1234, rand: Array(1...8)) == b)
            #expect(try store.bond(ediv: 0x1234, rand: Array(2...9)) == nil)
            try store.flush()
            // One file per local identity, mode 0600, no temp file left behind.
            let files = try FileManager.default.contentsOfDirectory(atPath: dir)
            #expect(files == ["C0-FF-EE-00-00-01-random.json"])
            var st = stat()
            #expect(stat(store.path, &st) == 0)
            #expect(st.st_mode & 0o777 == 0o600)
            // Keys are hex, LSO first as HCI carries them.
            let text = String(decoding: FileManager.default.contents(atPath: store.path) ?? Data(), as: UTF8.self)
            #expect(text.contains("\"01010101010101010101010101010101\""))
            #expect(text.contains("\"0102030405060708\""))
            // A second store (new process) reads the same.
            #expect(try SMPBondStore(directory: dir, localIdentity: Self.local).bonds() == [b])
            // Replacing keeps one bond per peer; the file is replaced, not edited in place (new inode).
            let inode = st.st_ino
            let newer = Self.bond(sc: false, authenticated: false, fill: 2)
            try store.save(newer)
            #expect(try store.bonds() == [newer])
            try store.flush()
            #expect(stat(store.path, &st) == 0 && st.st_ino != inode && st.st_mode & 0o777 == 0o600)
            try store.remove(Self.peer)
            #expect(try store.bonds().isEmpty)
        }
    }

    /// Issue 24: look-ups and saves work on the store's copy in memory and leave the file to
    /// its writer, so none does file I/O on the caller's thread (the host's loop). With the
    /// writer held, saves return and are seen at once while the file is untouched; let go, one
    /// write puts the newest bonds on disk, read back by a new store (a later process).
    @Test func savesAndLookUpsLeaveTheFileToTheWriter() throws {
        try Self.withDirectory { dir in
            let writer = DispatchQueue(label: "held writer")
            writer.suspend()
            let store = try SMPBondStore(directory: dir, localIdentity: Self.local, writer: writer)
            var b = Self.bond(sc: true, authenticated: false)
            for counter in 0..<100 as Range<UInt32> {
                b.signCounter = counter
                try store.save(b, allowDowngrade: true)
                #expect(try store.bond(for: Self.peer)?.signCounter == counter)
            }
            #expect(!FileManager.default.fileExists(atPath: store.path), "a save wrote the file on the caller's thread")
            writer.resume()
            try store.flush()
            #expect(try SMPBondStore(directory: dir, localIdentity: Self.local).bonds() == [b])
            // The file was written whole, and only the newest state: no temp file left.
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["C0-FF-EE-00-00-01-random.json"])
        }
    }

    /// A write that fails after its save returned is reported (to `writeFailed` and by
    /// `flush`), naming the file; the bonds stay in memory.
    @Test func failedWriteIsReportedWithTheFile() throws {
        try Self.withDirectory { dir in
            let reported = Mutex<[SMPBondStoreError]>([])
            let store = try SMPBondStore(directory: dir, localIdentity: Self.local,
                                         writeFailed: { e in reported.withLock { $0.append(e) } })
            #expect(try store.bonds().isEmpty)
            try FileManager.default.removeItem(atPath: dir)  // nowhere to write the temp file
            let b = Self.bond(sc: true, authenticated: false)
            try store.save(b)
            #expect(throws: SMPBondStoreError.self) { try store.flush() }
            let errors = reported.withLock { $0 }
            #expect(errors.count == 1)
            #expect(errors.first.map { "\($0)" }?.contains(store.path) == true)
            #expect(try store.bonds() == [b])
        }
    }

    /// Issue 31: a temporary file left by a process killed between writing it and renaming it
    /// (`FILE.tmp-PID`, holding keys) is not left lying: a complete one newer than the bond
    /// file holds the last bonds saved and takes its place; a partial one is removed; and
    /// `removeAll` (`ble-hci bonds clear`) removes them too. A live process's is left alone.
    @Test func temporaryFilesOfADeadWriterAreRecoveredOrRemoved() throws {
        try Self.withDirectory { dir in
            let writer = try SMPBondStore(directory: dir, localIdentity: Self.local)
            let old = Self.bond(sc: true, authenticated: false, fill: 1), new = Self.bond(sc: true, authenticated: false, fill: 2)
            try writer.save(old)
            try writer.flush()
            let oldFile = try #require(FileManager.default.contents(atPath: writer.path))
            try writer.save(new)
            try writer.flush()
            let newFile = try #require(FileManager.default.contents(atPath: writer.path))
            // The state a kill after the temp file's fsync, before the rename, leaves: the old
            // file, and the new one under the temp name of a process that is gone (no PID is
            // this large: pid_max is at most 2^22, proc(5)).
            let deadTemp = writer.path + ".tmp-2147483646"
            #expect(FileManager.default.createFile(atPath: writer.path, contents: oldFile))
            #expect(FileManager.default.createFile(atPath: deadTemp, contents: newFile))
            // A live process's (ours is alive) is its own: left.
            let liveTemp = writer.path + ".tmp-1"  // init, always alive
            #expect(FileManager.default.createFile(atPath: liveTemp, contents: Data("{".utf8)))
            let later = try SMPBondStore(directory: dir, localIdentity: Self.local)
            #expect(try later.bonds() == [new])
            #expect(!FileManager.default.fileExists(atPath: deadTemp))
            #expect(FileManager.default.fileExists(atPath: liveTemp))
            try FileManager.default.removeItem(atPath: liveTemp)
            // Cut short (the kill came mid-write): removed, the bond file stands.
            #expect(FileManager.default.createFile(atPath: deadTemp, contents: newFile.prefix(40)))
            #expect(try SMPBondStore(directory: dir, localIdentity: Self.local).bonds() == [new])
            #expect(!FileManager.default.fileExists(atPath: deadTemp))
            // `removeAll` on a store that has read its file already still clears them.
            #expect(FileManager.default.createFile(atPath: deadTemp, contents: newFile))
            try later.removeAll()
            try later.flush()
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["C0-FF-EE-00-00-01-random.json"])
            #expect(try SMPBondStore(directory: dir, localIdentity: Self.local).bonds().isEmpty)
        }
    }

    @Test func corruptFileIsNamedAndKept() throws {
        try Self.withDirectory { dir in
            let other = try SMPBondStore(directory: dir, localIdentity: DeviceAddress(BDAddress(be("001122334455")), type: .public))
            try other.save(Self.bond(sc: true, authenticated: true))
            let store = try SMPBondStore(directory: dir, localIdentity: Self.local)
            let garbage = Data("{\"version\":1,\"bonds\":[{\"peer\":".utf8)
            #expect(FileManager.default.createFile(atPath: store.path, contents: garbage))
            do {
                _ = try store.bonds()
                Issue.record("corrupt file accepted")
            } catch let SMPBondStoreError.corruptFile(path, _) {
                #expect(path == store.path)
            }
            // Saving does not overwrite what it cannot read; the file and the other identity's file are intact.
            #expect(throws: SMPBondStoreError.self) { try store.save(Self.bond(sc: false, authenticated: false)) }
            #expect(FileManager.default.contents(atPath: store.path) == garbage)
            #expect(try other.bonds().count == 1)
            // A wrong key length is corrupt too, not silently accepted.
            let badKey = #"{"version":1,"localIdentity":{"address":"C0:FF:EE:00:00:01","type":"random"},"bonds":[{"peer":{"address":"11:22:33:44:55:66","type":"public"},"keySize":16,"secureConnections":true,"authenticated":true,"ltk":[1,2,3],"ediv":0,"rand":[0,0,0,0,0,0,0,0],"signCounter":0,"localSignCounter":0}]}"#
            #expect(FileManager.default.createFile(atPath: store.path, contents: Data(badKey.utf8)))
            #expect(throws: SMPBondStoreError.self) { try store.bonds() }
        }
    }

    @Test func weakerPairingDoesNotReplaceStrongerBond() throws {
        try Self.withDirectory { dir in
            let store = try SMPBondStore(directory: dir, localIdentity: Self.local)
            let strong = Self.bond(sc: true, authenticated: true)
            try store.save(strong)
            for weaker in [Self.bond(sc: true, authenticated: false), Self.bond(sc: false, authenticated: true),
                           Self.bond(sc: true, authenticated: true, keySize: 7)] {
                #expect(throws: SMPBondStoreError.self) { try store.save(weaker) }
            }
            #expect(try store.bonds() == [strong])
            // Equal or stronger replaces; an explicit downgrade is allowed.
            let again = Self.bond(sc: true, authenticated: true, fill: 3)
            try store.save(again)
            #expect(try store.bonds() == [again])
            let weak = Self.bond(sc: false, authenticated: false)
            try store.save(weak, allowDowngrade: true)
            #expect(try store.bonds() == [weak])
            // An unauthenticated legacy bond may be replaced by anything.
            try store.save(Self.bond(sc: false, authenticated: false, keySize: 7))
            #expect(try store.bonds().first?.keySize == 7)
        }
    }

    @Test func resolvesPeerRPA() throws {
        try Self.withDirectory { dir in
            let store = try SMPBondStore(directory: dir, localIdentity: Self.local)
            let b = Self.bond(sc: true, authenticated: false)
            try store.save(b)
            var second = Self.bond(sc: true, authenticated: false, peer: DeviceAddress(BDAddress(be("665544332211")), type: .public))
            second.peerIRK = Array(repeating: 0x88, count: 16)
            try store.save(second)
            #expect(try store.resolve(SMPPrivacy.resolvablePrivateAddress(irk: b.peerIRK!))?.peer == Self.peer)
            #expect(try store.resolve(SMPPrivacy.resolvablePrivateAddress(irk: second.peerIRK!))?.peer == second.peer)
            #expect(try store.resolve(SMPPrivacy.resolvablePrivateAddress(irk: Array(repeating: 0x78, count: 16))) == nil)
            try store.removeAll()
            #expect(try store.bonds().isEmpty)
        }
    }

    @Test func bondFromPairingResult() throws {
        let keys = SMPKeys(ltk: Array(repeating: 1, count: 16))
        var result = SMPPairingResult(method: .justWorks, secureConnections: true, authenticated: false, bonding: true,
                                      keySize: 16, debugKey: false, local: keys, peer: keys)
        let bond = try #require(SMPBond(result: result, role: .responder, peerAddress: Self.peer))
        #expect(bond.ltk == keys.ltk && bond.peer == Self.peer && bond.secureConnections && bond.localLTK == nil)
        result.debugKey = true
        #expect(SMPBond(result: result, role: .responder, peerAddress: Self.peer) == nil)
        result.debugKey = false
        result.bonding = false
        #expect(SMPBond(result: result, role: .responder, peerAddress: Self.peer) == nil)
    }

    /// Issue 29: where a bond is filed when the peer distributes an identity address (Identity
    /// Address Information, Core v5.4 Vol 3 Part H 3.6.5) that is not the one it paired from.
    /// An RPA (Vol 6 Part B 1.3.2.2, top bits 0b01) changes, so the identity is the key; a public
    /// or static random address (top bits 0b11, 1.3.2.1) is what the peer comes back from, so the
    /// bond stays under it (as BlueZ keeps it) and is found by either address.
    @Test func bondOfAPeerThatDistributedAnotherIdentity() throws {
        let identity = DeviceAddress(BDAddress(be("0011223344AA")), type: .public)
        var peerKeys = SMPKeys(ltk: Array(repeating: 1, count: 16))
        peerKeys.identityAddress = identity
        peerKeys.irk = Array(repeating: 0x42, count: 16)
        let result = SMPPairingResult(method: .justWorks, secureConnections: true, authenticated: false, bonding: true,
                                      keySize: 16, debugKey: false, local: SMPKeys(ltk: peerKeys.ltk), peer: peerKeys)
        let staticRandom = DeviceAddress(BDAddress(be("C1D2E3F40506")), type: .random)
        let kept = try #require(SMPBond(result: result, role: .responder, peerAddress: staticRandom))
        #expect(kept.peer == staticRandom && kept.distributedIdentity == identity)
        let rpa = DeviceAddress(BDAddress(be("4A0B0C0D0E0F")), type: .random)
        let resolved = try #require(SMPBond(result: result, role: .responder, peerAddress: rpa))
        #expect(resolved.peer == identity && resolved.distributedIdentity == nil)
        let same = try #require(SMPBond(result: result, role: .responder, peerAddress: identity))
        #expect(same.peer == identity && same.distributedIdentity == nil)

        try Self.withDirectory { dir in
            let store = try SMPBondStore(directory: dir, localIdentity: Self.local)
            try store.save(kept)
            try store.flush()
            // Read back from the file by a second store: both addresses find it, no other does.
            let reread = try SMPBondStore(directory: dir, localIdentity: Self.local)
            #expect(try reread.bond(for: staticRandom) == kept)
            #expect(try reread.bond(for: identity) == kept)
            #expect(try reread.bond(for: DeviceAddress(identity.address, type: .random)) == nil)
            // A new pairing of the same peer (under either address) replaces it, not adds to it.
            try reread.save(resolved)
            #expect(try reread.bonds() == [resolved])
            try reread.remove(identity)
            #expect(try reread.bonds().isEmpty)
        }
    }
}
