import HCI

// The resolving list and address resolution (Core v5.4 Vol 6 Part B 4.7, 6; Vol 4 Part E
// 7.8.38-7.8.41, 7.8.44, 7.8.45, 7.8.77): with address resolution on, a scanner reports an
// advertiser whose resolvable private address one of the list's peer IRKs resolves under that
// peer's identity address, typed Public/Random Identity Address (0x02/0x03, 7.7.65.13), and, in
// Network Privacy Mode (the default), ignores a listed peer with an IRK that advertises from its
// identity address. Own_Address_Type 0x02/0x03 advertises and initiates from an RPA made from
// the local IRK of the entry the command's peer address names (Vol 6 Part B 1.3.2.2), a new one
// every RPA timeout (7.8.45); reported in LE Enhanced Connection Complete (7.7.65.10) and by LE
// Read Local Resolvable Address (7.8.43). Not modelled: resolution of initiators and scanners
// by an advertiser, and connecting to a resolved identity.

extension ControllerState {
    struct ResolvingListEntry {
        /// 0x00 public, 0x01 random (static) identity address.
        var identityType: UInt8
        var identity: BDAddress
        var peerIRK: [UInt8]
        var localIRK: [UInt8]
        var devicePrivacy = false
        /// The RPAs made from `localIRK` and `peerIRK` and when (new ones after the RPA timeout).
        var localRPA: (address: BDAddress, made: ContinuousClock.Instant)?
        var peerRPA: (address: BDAddress, made: ContinuousClock.Instant)?

        var hasPeerIRK: Bool { peerIRK.contains { $0 != 0 } }
    }

    /// What LE Read Resolving List Size reports by default.
    static let defaultResolvingListCapacity = 8

    /// 7.8.38-7.8.40, 7.8.44, 7.8.77: not while address resolution is on and advertising (other
    /// than periodic), scanning or initiating is (Command Disallowed).
    private var resolvingListLocked: Bool {
        addressResolution && (scanEnabled || initiating != nil || isAdvertising)
    }

    private func resolvingListRefused<C: HCICommand>(_ c: C.Type) -> Bool {
        if let status = resolvingListRefusal {
            link.note("controller \(index): \(C.name) refused with \(status) (fault injected)")
            reject(C.self, status)
            return true
        }
        if resolvingListLocked {
            reject(C.self, .commandDisallowed)
            return true
        }
        return false
    }

    private func resolvingListIndex(_ type: UInt8, _ address: BDAddress) -> Int? {
        resolvingList.firstIndex { $0.identityType == type && $0.identity == address }
    }

    package func handle(_ c: LEAddDeviceToResolvingList) {
        guard !resolvingListRefused(LEAddDeviceToResolvingList.self) else { return }
        // The same identity twice is Invalid HCI Command Parameters; no room, Memory Capacity Exceeded (7.8.38).
        guard resolvingListIndex(c.peerIdentityAddressType, c.peerIdentityAddress) == nil else {
            return reject(LEAddDeviceToResolvingList.self, .invalidParameters)
        }
        guard resolvingList.count < resolvingListCapacity else { return reject(LEAddDeviceToResolvingList.self, .memoryCapacityExceeded) }
        resolvingList.append(ResolvingListEntry(identityType: c.peerIdentityAddressType, identity: c.peerIdentityAddress,
                                                peerIRK: c.peerIRK, localIRK: c.localIRK))
        complete(LEAddDeviceToResolvingList.self)
    }

    package func handle(_ c: LERemoveDeviceFromResolvingList) {
        guard !resolvingListRefused(LERemoveDeviceFromResolvingList.self) else { return }
        guard let i = resolvingListIndex(c.peerIdentityAddressType, c.peerIdentityAddress) else {
            return reject(LERemoveDeviceFromResolvingList.self, .unknownConnectionIdentifier)  // not in the list (7.8.39)
        }
        resolvingList.remove(at: i)
        complete(LERemoveDeviceFromResolvingList.self)
    }

    package func handle(_ _: LEClearResolvingList) {
        guard !resolvingListRefused(LEClearResolvingList.self) else { return }
        resolvingList = []
        complete(LEClearResolvingList.self)
    }

    package func handle(_ _: LEReadResolvingListSize) {
        if let status = resolvingListRefusal { return reject(LEReadResolvingListSize.self, status) }
        complete(LEReadResolvingListSize.self, .init(resolvingListSize: UInt8(clamping: resolvingListCapacity)))
    }

    package func handle(_ c: LESetAddressResolutionEnable) {
        if let status = resolvingListRefusal { return reject(LESetAddressResolutionEnable.self, status) }
        guard !(scanEnabled || initiating != nil || isAdvertising) else { return reject(LESetAddressResolutionEnable.self, .commandDisallowed) }
        addressResolution = c.addressResolutionEnable
        complete(LESetAddressResolutionEnable.self)
    }

    package func handle(_ c: LESetResolvablePrivateAddressTimeout) {
        if let status = resolvingListRefusal { return reject(LESetResolvablePrivateAddressTimeout.self, status) }
        rpaTimeout = c.rpaTimeout
        complete(LESetResolvablePrivateAddressTimeout.self)
    }

    package func handle(_ c: LESetPrivacyMode) {
        guard !resolvingListRefused(LESetPrivacyMode.self) else { return }
        guard let i = resolvingListIndex(c.peerIdentityAddressType, c.peerIdentityAddress) else {
            return reject(LESetPrivacyMode.self, .unknownConnectionIdentifier)  // not in the list (7.8.77)
        }
        resolvingList[i].devicePrivacy = c.privacyMode == 1
        complete(LESetPrivacyMode.self)
    }

    package func handle(_ c: LEReadLocalResolvableAddress) {
        if let status = resolvingListRefusal { return reject(LEReadLocalResolvableAddress.self, status) }
        guard resolvingListIndex(c.peerIdentityAddressType, c.peerIdentityAddress) != nil else {
            return reject(LEReadLocalResolvableAddress.self, .unknownConnectionIdentifier)  // not in the list (7.8.43)
        }
        let rpa = localRPA(peerType: c.peerIdentityAddressType, peer: c.peerIdentityAddress) ?? .zero
        complete(LEReadLocalResolvableAddress.self, .init(localResolvableAddress: rpa))
    }

    /// Our RPA towards the listed peer `peer` while address resolution is on and its entry has a
    /// local IRK: prand of 22 random bits under 0b01, hash = ah(local IRK, prand) (Vol 6 Part B
    /// 1.3.2.2, Vol 3 Part H 2.2.2), kept for the RPA timeout (7.8.45).
    func localRPA(peerType: UInt8, peer: BDAddress, now: ContinuousClock.Instant = .now) -> BDAddress? {
        guard addressResolution, let i = resolvingListIndex(peerType, peer), resolvingList[i].localIRK.contains(where: { $0 != 0 }) else {
            return nil
        }
        if let current = resolvingList[i].localRPA, now - current.made < .seconds(Int(rpaTimeout)) { return current.address }
        guard let rpa = Self.makeRPA(resolvingList[i].localIRK) else { return nil }
        resolvingList[i].localRPA = (rpa, now)
        link.note("controller \(index): new resolvable private address \(rpa) from the local IRK for \(peer)")
        return rpa
    }

    /// The listed peer's RPA made from its IRK, for TargetA of directed advertising with
    /// Own_Address_Type 0x02/0x03 (7.8.5), kept for the RPA timeout; nil without a peer IRK.
    func peerRPA(peerType: UInt8, peer: BDAddress, now: ContinuousClock.Instant = .now) -> BDAddress? {
        guard addressResolution, let i = resolvingListIndex(peerType, peer), resolvingList[i].hasPeerIRK else { return nil }
        if let current = resolvingList[i].peerRPA, now - current.made < .seconds(Int(rpaTimeout)) { return current.address }
        guard let rpa = Self.makeRPA(resolvingList[i].peerIRK) else { return nil }
        resolvingList[i].peerRPA = (rpa, now)
        return rpa
    }

    /// An RPA of `irk`: prand of 22 random bits under 0b01, hash = ah(IRK, prand) (Vol 6 Part B 1.3.2.2).
    static func makeRPA(_ irk: [UInt8]) -> BDAddress? {
        var prand = (0..<3).map { _ in UInt8.random(in: 0...255) }
        prand[2] = prand[2] & 0x3F | 0x40
        return ah(irk, prand: prand).map { BDAddress(littleEndian: $0 + prand) }
    }

    /// Whether `rpa` is an RPA that `irk` resolves (ah, Vol 3 Part H 2.2.2).
    static func resolves(_ rpa: BDAddress, irk: [UInt8]) -> Bool {
        guard rpa.bytes[0] & 0xC0 == 0x40, irk.contains(where: { $0 != 0 }) else { return false }
        let le = Array(rpa.bytes.reversed())  // hash (3 octets) then prand (3), LSO first
        return ah(irk, prand: Array(le[3..<6])) == Array(le[0..<3])
    }

    /// TargetA of directed advertising: the peer's identity (`peerType` 0x00/0x01), or with
    /// Own_Address_Type 0x02/0x03 and the peer listed with an IRK, its RPA (7.8.5, 7.8.53).
    func directedTarget(own: AddressType, peerType: UInt8, peer: BDAddress) -> DeviceAddress {
        if own == .publicIdentity || own == .randomIdentity, let rpa = peerRPA(peerType: peerType, peer: peer) {
            return DeviceAddress(rpa, type: .random)
        }
        return DeviceAddress(peer, type: peerType == 0 ? .public : .random)
    }

    /// Whether a directed PDU with `target` in TargetA is for this device, which uses `own`:
    /// TargetA is its address, or, with address resolution on, an RPA one of its local IRKs
    /// resolves (Vol 6 Part B 4.4.2, 6); others ignore the PDU.
    func isAddressed(by target: DeviceAddress, own: DeviceAddress) -> Bool {
        if target.address == own.address && target.type.simple == own.type.simple { return true }
        guard addressResolution, target.type == .random else { return false }
        return resolvingList.contains { Self.resolves(target.address, irk: $0.localIRK) }
    }

    /// The address a scanner reports `adv` under (Vol 6 Part B 6.2, 4.7): the identity of the
    /// listed peer whose IRK resolves its RPA, typed 0x02/0x03; nil when Network Privacy Mode
    /// drops it (a listed peer with an IRK advertising from its identity address).
    func reportedAddress(of adv: Advertisement) -> DeviceAddress? {
        let own = DeviceAddress(adv.address, type: adv.addressType)
        guard addressResolution else { return own }
        if adv.addressType == .random, adv.address.bytes[0] & 0xC0 == 0x40 {
            if let e = resolvingList.first(where: { Self.resolves(adv.address, irk: $0.peerIRK) }) {
                return DeviceAddress(e.identity, type: e.identityType == 0 ? .publicIdentity : .randomIdentity)
            }
            return own
        }
        let type: UInt8 = adv.addressType.simple == "public" ? 0 : 1
        if let e = resolvingList.first(where: { $0.identityType == type && $0.identity == adv.address }), e.hasPeerIRK, !e.devicePrivacy {
            return nil
        }
        return own
    }

    /// ah(k, r) = e(k, r') mod 2^24, r' = 104 zero bits || r (Vol 3 Part H 2.2.2), LSO first.
    static func ah(_ irk: [UInt8], prand: [UInt8]) -> [UInt8]? {
        aes128LittleEndian(key: irk, block: prand + [UInt8](repeating: 0, count: 13)).map { Array($0.prefix(3)) }
    }
}

extension VirtualController {
    /// Makes the resolving list hold `capacity` entries (0: every Add is Memory Capacity
    /// Exceeded), or refuse every resolving-list command with `refusing` (Unknown HCI Command
    /// would be what a controller without them says): for tests of a host's fallback.
    public func setResolvingList(capacity: Int, refusing: HCIStatus? = nil) {
        runOnLink { state in
            state.resolvingListCapacity = max(0, capacity)
            state.resolvingListRefusal = refusing
        }
    }
}
