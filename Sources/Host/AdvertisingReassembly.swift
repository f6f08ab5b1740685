import HCI

/// Reassembles the data of LE Extended Advertising Reports (Core v5.4 Vol 4 Part E 7.7.65.13)
/// and, keyed by sync handle, of LE Periodic Advertising Reports (7.7.65.15: the same Data_Status
/// values).
/// A controller that cannot fit an advertiser's data in one report sends it over several:
/// Data_Status (Event_Type bits 5-6) 0b01 "incomplete, more data to come" on every report but
/// the last, which carries 0b00 "complete" or 0b10 "incomplete, data truncated, no more to
/// come". Fragments are joined per advertiser (address, address type, SID) and kind
/// (advertising data or scan response) before anything parses them, so no AD structure is
/// split. Memory is bounded: at most `maxDataLength` octets per advertiser and
/// `maxAdvertisers` reassemblies at a time.
struct ReportReassembler<K: Hashable> {
    typealias Key = K

    /// The largest advertising data a controller can hold for a set: Max_Advertising_Data_Length
    /// ranges up to 0x0672 = 1650 octets (Vol 4 Part E 7.8.57). More is a controller fault.
    static var maxDataLength: Int { 1650 }
    /// Advertisers whose data are being reassembled at once; a new one beyond this evicts the oldest.
    static var maxAdvertisers: Int { 32 }

    private struct Partial {
        var data: [UInt8]
        var overflowed: Bool
    }
    private var partial: [Key: Partial] = [:]
    private var order: [Key] = []

    /// What `add` makes of a report.
    enum Outcome: Equatable {
        /// Nothing to report yet (more data to come).
        case pending
        /// The whole data; `dataStatus` 0 complete, 2 truncated (the controller said so, the
        /// data exceeded `maxDataLength`, or a Data_Status of 0b11, reserved, ended it).
        case complete(data: [UInt8], dataStatus: UInt8)
    }

    /// Adds one report's fragment. `evicted` is set when an older reassembly had to be dropped.
    mutating func add(_ key: Key, fragment: [UInt8], dataStatus: UInt8, evicted: inout Key?) -> Outcome {
        evicted = nil
        var p = partial.removeValue(forKey: key) ?? Partial(data: [], overflowed: false)
        if let i = order.firstIndex(of: key) { order.remove(at: i) }
        let room = Self.maxDataLength - p.data.count
        if fragment.count > room { p.overflowed = true }
        p.data += fragment.prefix(max(0, room))
        if dataStatus == 0b01 {
            if partial.count >= Self.maxAdvertisers, let oldest = order.first {
                order.removeFirst()
                partial[oldest] = nil
                evicted = oldest
            }
            partial[key] = p
            order.append(key)
            return .pending
        }
        let truncated = dataStatus != 0b00 || p.overflowed
        return .complete(data: p.data, dataStatus: truncated ? 0b10 : 0b00)
    }

    /// Forgets every partial reassembly (scanning stopped).
    mutating func reset() {
        partial = [:]
        order = []
    }

    /// Forgets the partial reassembly of `key` (its sync ended).
    mutating func reset(_ key: Key) {
        partial[key] = nil
        order.removeAll { $0 == key }
    }

    var pendingCount: Int { partial.count }
}

/// An advertiser's data or scan response in extended advertising reports.
struct AdvertisingReportKey: Hashable {
    var address: BDAddress
    var addressType: UInt8
    var sid: UInt8
    var scanResponse: Bool
}
typealias AdvertisingReportReassembler = ReportReassembler<AdvertisingReportKey>
