import HCI

// The filter accept list (Core Vol 6 Part B 4.3; Vol 4 Part E 7.8.14-7.8.17): the devices the
// advertising, scanning and initiating filter policies let through.
extension ControllerState {
    /// One entry. Address_Type 0x00 public, 0x01 random, 0xFF anonymous advertisements (the
    /// address is then ignored, so all such entries are one).
    struct FilterAcceptListEntry: Hashable {
        var addressType: UInt8
        var address: BDAddress
        init(addressType: UInt8, address: BDAddress) {
            self.addressType = addressType
            self.address = addressType == filterAcceptListAnonymous ? .zero : address
        }
        /// An advertiser's or a scanner's/initiator's address (identity types match their base type).
        init(_ a: DeviceAddress) {
            self.init(addressType: a.type.simple == "public" ? 0x00 : 0x01, address: a.address)
        }
    }

    /// What LE Read Filter Accept List Size reports.
    static let filterAcceptListCapacity = 8

    func filterAcceptListContains(_ a: DeviceAddress) -> Bool { filterAcceptList.contains(FilterAcceptListEntry(a)) }

    /// True while a filter policy uses the list, which may then not change (Core Vol 4 Part E
    /// 7.8.15-7.8.17): advertising enabled with a policy other than 0x00, scanning enabled with
    /// policy 0x01 or 0x03, or a create connection pending with initiator filter policy 0x01.
    var filterAcceptListInUse: Bool {
        (scanEnabled && scanFilterPolicy & 0x01 != 0)
            || initiating?.useFilterAcceptList == true
            || currentAdvertisements().contains { $0.filterPolicy != 0 }
    }

    /// Scanner filter policy (Vol 6 Part B 4.3.3): with 0x01/0x03 only advertisers in the list are reported.
    func scannerAccepts(_ adv: Advertisement) -> Bool {
        scanFilterPolicy & 0x01 == 0 || filterAcceptListContains(DeviceAddress(adv.address, type: adv.addressType))
    }

    /// Advertising filter policy (Vol 6 Part B 4.3.2): bit 0 limits scan requests, bit 1
    /// connection requests, to devices in this advertiser's list.
    func advertiser(_ adv: Advertisement, acceptsScanRequestFrom scanner: DeviceAddress) -> Bool {
        adv.filterPolicy & 0x01 == 0 || filterAcceptListContains(scanner)
    }

    func advertiser(_ adv: Advertisement, acceptsConnectionFrom initiator: DeviceAddress) -> Bool {
        adv.filterPolicy & 0x02 == 0 || filterAcceptListContains(initiator)
    }

    /// Initiator filter policy (Vol 6 Part B 4.3.4): 0x01 connects to any advertiser in the list
    /// and ignores the peer address; 0x00 only to the peer address.
    func initiatorAccepts(_ adv: Advertisement, _ i: Initiating) -> Bool {
        if let target = adv.targetA, !isAddressed(by: target, own: i.ownAddress) { return false }  // not for us (Vol 6 Part B 4.4.2, 6)
        if i.useFilterAcceptList { return filterAcceptListContains(DeviceAddress(adv.address, type: adv.addressType)) }
        if adv.address == i.address && adv.addressType.simple == i.type.simple { return true }
        // With address resolution on, a peer's identity reaches it behind its RPA (Vol 6 Part B 6.2).
        guard addressResolution, let resolved = reportedAddress(of: adv) else { return false }
        return resolved.address == i.address && resolved.type.simple == i.type.simple
    }

    /// LE Clear / Add Device To / Remove Device From Filter Accept List.
    func changeFilterAcceptList<C: HCICommand>(_ c: C.Type, add: FilterAcceptListEntry?, remove: FilterAcceptListEntry?) where C.ReturnParameters == NoReturnParameters {
        guard !filterAcceptListInUse else { return reject(C.self, .commandDisallowed) }
        for e in [add, remove].compactMap({ $0 }) where e.addressType > 0x01 && e.addressType != filterAcceptListAnonymous {
            return reject(C.self, .invalidParameters)
        }
        if let e = add {
            // Already there: success without a second entry (7.8.16); full: Memory Capacity Exceeded.
            guard filterAcceptList.contains(e) || filterAcceptList.count < ControllerState.filterAcceptListCapacity else {
                return reject(C.self, .memoryCapacityExceeded)
            }
            filterAcceptList.insert(e)
        } else if let e = remove {
            filterAcceptList.remove(e)
        } else {
            filterAcceptList = []
        }
        complete(C.self)
    }
}
