import HCI
import Transport

/// Why the controller's resolving list is not used.
struct ResolvingListRefusal: Error { var reason: String }

/// A bonded peer for the controller's resolving list (Core v5.4 Vol 6 Part B 4.7, 6).
public struct ResolvingListEntry: Sendable, Equatable {
    /// The peer's identity address (public or random static).
    public var identity: DeviceAddress
    /// Its IRK, LSO first as SMP distributes it and HCI carries it.
    public var peerIRK: [UInt8]
    /// Our IRK when we use privacy (nil: none, sent as zeros).
    public var localIRK: [UInt8]?

    /// Peer_Identity_Address_Type: 0x00 public, 0x01 random (static).
    var identityType: UInt8 { identity.type.simple == "public" ? 0x00 : 0x01 }

    public init(identity: DeviceAddress, peerIRK: [UInt8], localIRK: [UInt8]? = nil) {
        self.identity = identity
        self.peerIRK = peerIRK
        self.localIRK = localIRK
    }
}

extension Host {
    /// Loads `entries` into the controller's resolving list and turns address resolution on
    /// (LE Clear Resolving List, LE Read Resolving List Size, LE Add Device To Resolving List and
    /// LE Set Privacy Mode per entry, LE Set Address Resolution Enable: Core v5.4 Vol 4 Part E
    /// 7.8.38-7.8.44, 7.8.77). Each peer is put in Device Privacy Mode, so it is still heard when
    /// it advertises from its identity address (Network Privacy Mode would drop it, Vol 6 Part B
    /// 4.7). Call it while not scanning, advertising or connecting (else Command Disallowed).
    /// Returns nil when the list holds them all and resolution is on; otherwise why not, the
    /// list then left empty and resolution off: the caller resolves addresses itself.
    public func loadResolvingList(_ entries: [ResolvingListEntry]) async -> String? {
        guard !entries.isEmpty else { return nil }
        let refusal = await loadResolvingListEntries(entries)
        resolvingListLoaded = refusal.map { .failure(ResolvingListRefusal(reason: $0)) } ?? .success(())
        return refusal
    }

    private func loadResolvingListEntries(_ entries: [ResolvingListEntry]) async -> String? {
        guard let info = try? self.info else { return "the host is not started" }
        let needed: [any HCICommand.Type] = [LESetAddressResolutionEnable.self, LEClearResolvingList.self, LEReadResolvingListSize.self,
                                             LEAddDeviceToResolvingList.self, LESetPrivacyMode.self]
        if let missing = needed.first(where: { !info.supports($0.opcode) }) {
            return "\(missing.opcode.name) is not among the controller's supported commands"
        }
        do {
            _ = try await execute(LESetAddressResolutionEnable(addressResolutionEnable: false))
            _ = try await execute(LEClearResolvingList())
            let size = try await execute(LEReadResolvingListSize()).resolvingListSize
            guard entries.count <= Int(size) else {
                return "the controller's resolving list holds \(size) devices and \(entries.count) bonds have an IRK"
            }
            for e in entries { try await addResolvingListEntry(e) }
            _ = try await execute(LESetAddressResolutionEnable(addressResolutionEnable: true))
            return nil
        } catch {
            _ = try? await execute(LEClearResolvingList())
            return "\(error)"
        }
    }
}

extension Host {
    /// Prepares the controller to make our RPA itself (Own_Address_Type 0x02/0x03, Core v5.4
    /// Vol 4 Part E 7.8.5): it must have LL Privacy (Vol 6 Part B 4.6.5) and take LE Set
    /// Resolvable Private Address Timeout (7.8.45), set to `rotation` (1 s to 1 hour). Returns
    /// nil when it does; otherwise why not: the caller then makes its RPA itself.
    public func prepareControllerPrivacy(rotation: Duration) async -> String? {
        if let missing = controllerPrivacyMissing { return missing }
        let seconds = UInt16(clamping: Swift.min(Swift.max(rotation.components.seconds, 1), 3600))
        do {
            _ = try await execute(LESetResolvablePrivateAddressTimeout(rpaTimeout: seconds))
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// What the controller lacks to make our RPA (nil: nothing as far as it says).
    public var controllerPrivacyMissing: String? {
        guard let info = try? self.info else { return "the host is not started" }
        guard LEFeatures(rawValue: info.leFeatures).contains(.llPrivacy) else { return "the controller does not list LL Privacy among its LE features" }
        guard info.supports(LESetResolvablePrivateAddressTimeout.opcode) else {
            return "\(LESetResolvablePrivateAddressTimeout.opcode.name) is not among the controller's supported commands"
        }
        return nil
    }
}

extension Host {
    /// Puts a peer bonded during the run into the controller's resolving list (the first one
    /// loads the list as `loadResolvingList` does), at once when the controller is idle, else
    /// before the next advertising, scan or connect: LE Add Device To Resolving List is Command
    /// Disallowed while address resolution is on and advertising, scanning or initiating is
    /// (Core v5.4 Vol 4 Part E 7.8.38). Not when the list was refused at start (the host then
    /// resolves addresses itself). A failure is logged; the host's resolution covers the peer.
    public func addToResolvingList(_ entry: ResolvingListEntry) async {
        if queueResolvingListEntry(entry) { await flushResolvingListWhenIdle() }
    }

    /// The synchronous half of `addToResolvingList`: the entry waits for the next advertising,
    /// scan or connect (or `flushResolvingListWhenIdle`). False when the list is not used.
    @discardableResult
    public func queueResolvingListEntry(_ entry: ResolvingListEntry) -> Bool {
        if case .failure = resolvingListLoaded { return false }
        pendingResolvingList.removeAll { $0.identity == entry.identity }
        pendingResolvingList.append(entry)
        return true
    }

    /// Adds the entries waiting unless the controller advertises, scans or initiates.
    public func flushResolvingListWhenIdle() async {
        await flushResolvingList(sending: !connectBusy)
    }

    /// Whether the controller's resolving list holds the bonds (loaded and not refused).
    public var usesResolvingList: Bool { if case .success = resolvingListLoaded { true } else { false } }

    /// Adds the entries waiting, when neither advertising nor scanning (the caller holds the
    /// initiator or knows it is free).
    /// `sending` false (another task holds the initiator): only waits for a flush under way.
    func flushResolvingList(sending: Bool = true) async {
        // One flush at a time, and an advertising, scan or connect start waits for the one
        // under way: the host is reentrant at each command's await, and a start enabled between
        // them would make the rest Command Disallowed (7.8.38, 7.8.44).
        while let running = resolvingListFlush { await running.value }
        guard sending, !pendingResolvingList.isEmpty, !advertising, !scanning else { return }
        let entries = pendingResolvingList
        pendingResolvingList = []
        // The task clears itself, so whoever waits on it finds it gone when it ends.
        let flush = Task {
            await sendResolvingList(entries)
            resolvingListFlush = nil
        }
        resolvingListFlush = flush
        await flush.value
    }

    private func sendResolvingList(_ entries: [ResolvingListEntry]) async {
        guard usesResolvingList else {
            if let refusal = await loadResolvingList(entries) {
                warn("controller resolving list not used (\(refusal)); the host resolves bonded peers' private addresses itself")
            }
            return
        }
        for e in entries {
            // A peer bonded again replaces its entry (a second Add is Invalid HCI Command Parameters, 7.8.38).
            _ = try? await execute(LERemoveDeviceFromResolvingList(peerIdentityAddressType: e.identityType, peerIdentityAddress: e.identity.address))
            do { try await addResolvingListEntry(e) } catch {
                warn("\(e.identity) not added to the controller's resolving list (\(error)); the host resolves its private addresses itself")
            }
        }
    }

    /// LE Add Device To Resolving List, then LE Set Privacy Mode: Device Privacy (7.8.38, 7.8.77).
    private func addResolvingListEntry(_ e: ResolvingListEntry) async throws {
        _ = try await execute(LEAddDeviceToResolvingList(peerIdentityAddressType: e.identityType, peerIdentityAddress: e.identity.address,
                                                         peerIRK: e.peerIRK, localIRK: e.localIRK ?? [UInt8](repeating: 0, count: 16)))
        _ = try await execute(LESetPrivacyMode(peerIdentityAddressType: e.identityType, peerIdentityAddress: e.identity.address, privacyMode: 1))
    }
}
