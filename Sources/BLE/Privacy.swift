import Synchronization
import HCI
import Host
import SMP

/// LE privacy of our own device (Core v5.4 Vol 3 Part C 10.7, Vol 6 Part B 1.3.2.2): advertise,
/// scan and connect from a resolvable private address made from our IRK, changed periodically.
/// Bonded peers' IRKs, with ours, go into the controller's resolving list when it has room
/// (`Host.loadResolvingList`); the controller then makes our RPA (Own_Address_Type 0x03) when
/// it can (`Host.prepareControllerPrivacy`), else the host does; `PeerResolver` resolves peers
/// when the list is not used.
public struct PrivacyOptions: Sendable {
    /// How long one resolvable private address is used (T_GAP(private_addr_int), Vol 3 Part C
    /// Appendix A: 15 minutes recommended).
    public var rotation: Duration
    public init(rotation: Duration = .seconds(15 * 60)) { self.rotation = rotation }
}

/// Our identity (IRK + identity address) and the resolvable private address in use.
final class LocalPrivacy: Sendable {
    let identity: SMPIdentity
    let rotation: Duration
    private let current = Mutex<(address: BDAddress, made: ContinuousClock.Instant)?>(nil)
    /// A bonded peer whose resolving list entry holds our IRK, once the controller makes our
    /// RPA itself (Own_Address_Type 0x03 naming it): every entry holds the same local IRK.
    let controllerEntry = Mutex<DeviceAddress?>(nil)

    /// The own address for advertising, scanning and connecting: the controller's RPA (with
    /// ours as its fallback) when it makes one, else ours.
    func ownAddress(_ rpa: BDAddress) -> OwnAddress {
        controllerEntry.withLock { $0 }.map { .controllerResolvable(peer: $0, fallback: rpa) } ?? .resolvablePrivate(rpa)
    }

    init(identity: SMPIdentity, rotation: Duration) {
        self.identity = identity
        self.rotation = rotation
    }

    /// The RPA to use now: a new one once `rotation` has passed since the last one was made.
    func address(now: ContinuousClock.Instant = .now) -> BDAddress {
        current.withLock { c in
            if let c, now - c.made < rotation { return c.address }
            let a = SMPPrivacy.resolvablePrivateAddress(irk: identity.irk)
            c = (a, now)
            return a
        }
    }

    /// The RPA in use, without rotating it (the controller refuses a new random address while
    /// it scans, Core Vol 4 Part E 7.8.4).
    func currentAddress() -> BDAddress {
        current.withLock { $0?.address } ?? address()
    }

    /// Whether the address in use has lived its `rotation` (advertising must move to a new one).
    func isDue(now: ContinuousClock.Instant = .now) -> Bool {
        current.withLock { c in c.map { now - $0.made >= rotation } ?? true }
    }
}

/// The identity behind an advertiser's address, from the bonds: an RPA resolved with the IRKs
/// of the bonds (ah, Vol 3 Part H 2.2.2), so a bonded peer is recognised under any RPA; or the
/// identity address a peer distributed while pairing from the public or static random address it
/// advertises from (`SMPBond.distributedIdentity`). Results are cached per address for a few
/// seconds (bounded): a new or removed bond changes them.
final class PeerResolver: Sendable {
    private let bonds: @Sendable () -> SMPBondStore?
    private struct Entry { var identity: DeviceAddress?; var until: ContinuousClock.Instant }
    private let cache = Mutex<[DeviceAddress: Entry]>([:])
    private static let capacity = 1024
    private static let lifetime: Duration = .seconds(5)

    init(bonds: @escaping @Sendable () -> SMPBondStore?) { self.bonds = bonds }

    /// The identity address of the bonded peer behind `address`, when it is not `address` itself.
    func identity(of address: DeviceAddress, now: ContinuousClock.Instant = .now) -> DeviceAddress? {
        if let hit = cache.withLock({ $0[address] }), now < hit.until { return hit.identity }
        let identity: DeviceAddress?
        if address.type == .random, address.address.isResolvablePrivate {
            identity = (try? bonds()?.resolve(address.address))?.peer
        } else {
            identity = (try? bonds()?.bond(for: address))?.distributedIdentity
        }
        cache.withLock { table in
            if table.count >= Self.capacity { table.removeAll(keepingCapacity: true) }
            table[address] = Entry(identity: identity, until: now + Self.lifetime)
        }
        return identity
    }
}
