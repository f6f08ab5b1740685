import HCI
import ATT

/// Why a server did not push a value.
public enum GATTPushError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The value does not fit one notification or indication to `peer` (ATT_MTU − 3 octets,
    /// Core v5.4 Vol 3 Part F 3.4.7.1 and 3.4.7.2): nothing was sent.
    case valueTooLong(length: Int, maximum: Int, peer: ATTPeer)

    public var description: String {
        switch self {
        case let .valueTooLong(length, maximum, peer):
            return "a value of \(length) octets does not fit a notification to connection \(hexCode(peer.id, digits: 4)) (at most \(maximum): ATT_MTU − 3; exchange a larger MTU or send less)"
        }
    }
}

/// A service found on a peer.
public struct GATTRemoteService: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var primary: Bool
    public var startHandle: UInt16
    public var endHandle: UInt16
    public init(uuid: BluetoothUUID, primary: Bool = true, startHandle: UInt16, endHandle: UInt16) {
        self.uuid = uuid; self.primary = primary; self.startHandle = startHandle; self.endHandle = endHandle
    }
}

/// A characteristic found on a peer.
public struct GATTRemoteCharacteristic: Sendable, Hashable {
    public var uuid: BluetoothUUID
    /// Handle of the characteristic declaration.
    public var declarationHandle: UInt16
    public var valueHandle: UInt16
    public var properties: GATTCharacteristicProperties
    /// Last handle of the characteristic (its last descriptor).
    public var endHandle: UInt16

    public init(uuid: BluetoothUUID, declarationHandle: UInt16, valueHandle: UInt16,
                properties: GATTCharacteristicProperties, endHandle: UInt16) {
        self.uuid = uuid; self.declarationHandle = declarationHandle; self.valueHandle = valueHandle
        self.properties = properties; self.endHandle = endHandle
    }
}

/// A descriptor found on a peer.
public struct GATTRemoteDescriptor: Sendable, Hashable {
    public var uuid: BluetoothUUID
    public var handle: UInt16
    public init(uuid: BluetoothUUID, handle: UInt16) { self.uuid = uuid; self.handle = handle }
}

/// One discovered service with its characteristics and their descriptors.
public struct GATTRemoteServiceTree: Sendable, Hashable {
    public var service: GATTRemoteService
    public var includedServices: [GATTRemoteService]
    public var characteristics: [Characteristic]
    public struct Characteristic: Sendable, Hashable {
        public var characteristic: GATTRemoteCharacteristic
        public var descriptors: [GATTRemoteDescriptor]
        public init(characteristic: GATTRemoteCharacteristic, descriptors: [GATTRemoteDescriptor]) {
            self.characteristic = characteristic; self.descriptors = descriptors
        }
    }

    public init(service: GATTRemoteService, includedServices: [GATTRemoteService], characteristics: [Characteristic]) {
        self.service = service; self.includedServices = includedServices; self.characteristics = characteristics
    }
}

/// What a client procedure can fail with, besides `ATTError` and the bearer's errors.
public enum GATTClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered with a PDU that doesn't answer the request.
    case unexpectedResponse(ATTOpcode)
    /// The server's response is inconsistent (handles going backwards, echo mismatch, too long).
    case invalidResponse(String)
    /// A value longer than the procedure carries: ATT_MTU − 3 for Write Without Response,
    /// 65535 (the 16-bit value offset) for a long write.
    case valueTooLong(length: Int, maximum: Int)
    /// The characteristic has neither notify nor indicate, or no CCCD.
    case notSubscribable(BluetoothUUID)
    /// A service or characteristic whose handle range starts at 0 or ends before it starts
    /// (Core Vol 3 Part F 3.4.3.1: a range starts at 0x0001 and its start is ≤ its end).
    case invalidHandleRange(start: UInt16, end: UInt16)

    public var description: String {
        switch self {
        case .unexpectedResponse(let op): return "unexpected response \(op)"
        case .invalidResponse(let why): return "invalid response: \(why)"
        case let .valueTooLong(length, maximum): return "value of \(length) octets exceeds the \(maximum) the procedure carries"
        case .notSubscribable(let u): return "characteristic \(u) has no notify/indicate or no CCCD"
        case let .invalidHandleRange(start, end):
            return "handle range \(hexCode(start, digits: 4))...\(hexCode(end, digits: 4)) is empty or starts at 0"
        }
    }
}

/// GATT client procedures (Core Vol 3 Part G 4) over any `ATTRequester`, with a per-peer cache
/// of the discovered database invalidated by Service Changed and by a Database Hash change.
///
/// Plain state, not `Sendable`: it lives where its requester does (a link's client: in its
/// host's isolation, reached with `Host.run`), and its procedures run in the caller's
/// isolation (`nonisolated(nonsending)`), so a request is sent and answered with no hop.
public final class GATTClient {
    public let requester: any ATTRequester
    /// Largest value a long read will assemble (an ATT value offset is 16-bit).
    public static let maximumLongValue = 65_535

    private var cache: [GATTRemoteServiceTree]? = nil
    private var cachedHash: [UInt8]? = nil
    /// Where received values go: the subscribers by value handle.
    private var subscribers = Subscribers()
    /// One subscription's receiver: `value` for each notified value, in order; `indication`
    /// for each indicated one (the confirmation waits for it); `end` once when the
    /// subscription is replaced, removed or the client goes away. A class: a notification
    /// takes it out of the lock as one reference, not three closures.
    private final class Subscriber: Sendable {
        let value: @Sendable ([UInt8]) -> Void
        let indication: @Sendable ([UInt8]) async -> Void
        let end: @Sendable () -> Void
        init(value: @escaping @Sendable ([UInt8]) -> Void, indication: @escaping @Sendable ([UInt8]) async -> Void,
             end: @escaping @Sendable () -> Void) {
            self.value = value; self.indication = indication; self.end = end
        }
    }
    /// The subscribers by value handle: a short array in handle order, searched by halves
    /// (a notification looks its subscriber up without hashing its handle).
    private struct Subscribers {
        private var entries: [(handle: UInt16, subscriber: Subscriber)] = []
        /// Where `handle` is, or would go.
        private func position(_ handle: UInt16) -> Int {
            var low = 0, high = entries.count
            while low < high {
                let mid = (low + high) / 2
                if entries[mid].handle < handle { low = mid + 1 } else { high = mid }
            }
            return low
        }
        subscript(handle: UInt16) -> Subscriber? {
            let i = position(handle)
            return i < entries.count && entries[i].handle == handle ? entries[i].subscriber : nil
        }
        /// Sets the subscriber of `handle`; returns the one it replaces.
        mutating func replace(_ handle: UInt16, with subscriber: Subscriber) -> Subscriber? {
            let i = position(handle)
            guard i < entries.count, entries[i].handle == handle else {
                entries.insert((handle, subscriber), at: i)
                return nil
            }
            defer { entries[i].subscriber = subscriber }
            return entries[i].subscriber
        }
        mutating func remove(_ handle: UInt16) -> Subscriber? {
            let i = position(handle)
            guard i < entries.count, entries[i].handle == handle else { return nil }
            return entries.remove(at: i).subscriber
        }
        var all: [Subscriber] { entries.map(\.subscriber) }
    }
    private var serviceChangedHandle: UInt16?
    private let changes: AsyncStream<ClosedRange<UInt16>>.Continuation
    /// Ranges the server reported changed (Service Changed indications), after the cache was updated.
    public let serviceChanges: AsyncStream<ClosedRange<UInt16>>

    public init(requester: any ATTRequester) {
        self.requester = requester
        (serviceChanges, changes) = AsyncStream.makeStream(of: ClosedRange<UInt16>.self, bufferingPolicy: .bufferingNewest(16))
    }

    deinit {
        changes.finish()
        for c in subscribers.all { c.end() }
    }

    private nonisolated(nonsending) func request(_ pdu: ATTPDU) async throws -> ATTPDU {
        let r = try await requester.request(pdu)
        if case let .errorResponse(op, handle, code) = r { throw ATTError(code, requestOpcode: op, handle: handle) }
        guard r.opcode == pdu.opcode.responseOpcode else { throw GATTClientError.unexpectedResponse(r.opcode) }
        return r
    }

    /// The handles of `service` as a range; throws when they form none (a peer's bad handles
    /// are refused where they are received, so this guards values built by hand).
    private func handles(of service: GATTRemoteService) throws -> ClosedRange<UInt16> {
        guard service.startHandle != 0, service.startHandle <= service.endHandle else {
            throw GATTClientError.invalidHandleRange(start: service.startHandle, end: service.endHandle)
        }
        return service.startHandle...service.endHandle
    }

    /// Runs a discovery step, mapping Attribute Not Found (the end of a search) to nil.
    private nonisolated(nonsending) func step(_ pdu: ATTPDU) async throws -> ATTPDU? {
        do { return try await request(pdu) } catch let e as ATTError where e.code == .attributeNotFound { return nil }
    }

    // MARK: Discovery

    /// Primary services: all (Read By Group Type 0x2800) or those with `uuid` (Find By Type Value).
    public nonisolated(nonsending) func discoverServices(uuid: BluetoothUUID? = nil, in range: ClosedRange<UInt16> = 1...0xFFFF) async throws -> [GATTRemoteService] {
        var out: [GATTRemoteService] = []
        var start = range.lowerBound
        while start <= range.upperBound, start != 0 {
            var lastEnd: UInt16
            if let uuid {
                guard case let .findByTypeValueResponse(list)? = try await step(.findByTypeValueRequest(
                    startHandle: start, endHandle: range.upperBound, attributeType: 0x2800,
                    attributeValue: uuid.littleEndianFor16Or128)) else { break }
                lastEnd = start
                for e in list {
                    // Each group starts in the range asked for, after the previous one, and ends
                    // at or after its start (Core Vol 3 Part F 3.4.3.4; Part G 4.4.2).
                    guard e.foundAttributeHandle >= start, e.foundAttributeHandle <= range.upperBound,
                          e.groupEndHandle >= e.foundAttributeHandle,
                          out.last.map({ e.foundAttributeHandle > $0.endHandle }) ?? true else {
                        throw GATTClientError.invalidResponse("service \(e.foundAttributeHandle)...\(e.groupEndHandle) out of range or order")
                    }
                    out.append(GATTRemoteService(uuid: uuid, startHandle: e.foundAttributeHandle, endHandle: e.groupEndHandle))
                    lastEnd = e.groupEndHandle
                }
            } else {
                guard case let .readByGroupTypeResponse(list)? = try await step(.readByGroupTypeRequest(
                    startHandle: start, endHandle: range.upperBound, type: GATTUUID.primaryService)) else { break }
                lastEnd = start
                for e in list {
                    // As above (Core Vol 3 Part F 3.4.4.10; Part G 4.4.1).
                    guard e.handle >= start, e.handle <= range.upperBound, e.endGroupHandle >= e.handle,
                          out.last.map({ e.handle > $0.endHandle }) ?? true,
                          let u = BluetoothUUID(littleEndian: e.value) else {
                        throw GATTClientError.invalidResponse("bad service entry at \(e.handle)")
                    }
                    out.append(GATTRemoteService(uuid: u, startHandle: e.handle, endHandle: e.endGroupHandle))
                    lastEnd = e.endGroupHandle
                }
            }
            if lastEnd == 0xFFFF { break }
            start = lastEnd + 1
        }
        return out
    }

    /// Included services of `service` (Read By Type 0x2802; a 128-bit UUID is read from the
    /// included service's declaration).
    public nonisolated(nonsending) func discoverIncludedServices(of service: GATTRemoteService) async throws -> [GATTRemoteService] {
        var out: [GATTRemoteService] = []
        for e in try await readAllByType(GATTUUID.include, try handles(of: service)) {
            // Core Vol 3 Part G 3.2: handle, end group handle, then a 16-bit UUID or none.
            guard e.value.count == 4 || e.value.count == 6 else {
                throw GATTClientError.invalidResponse("include declaration at \(e.handle) of \(e.value.count) octets (4 or 6 expected)")
            }
            var r = ByteReader(e.value)
            let s = try r.u16("includedServiceHandle"), end = try r.u16("endGroupHandle")
            // A peer's range is checked before it is used as one (Core v5.4 Vol 3 Part G 3.2: an
            // Include declaration names handles start ≤ end; handle 0 is invalid, Part F 3.2.2).
            guard s != 0, s <= end else {
                throw GATTClientError.invalidResponse("included service range \(s)...\(end) at \(e.handle) is empty or starts at 0")
            }
            var uuid: BluetoothUUID
            if r.remaining == 2 {
                uuid = BluetoothUUID(try r.u16("uuid"))
            } else {
                guard case let .readResponse(v) = try await request(.readRequest(handle: s)),
                      let u = BluetoothUUID(littleEndian: v) else {
                    throw GATTClientError.invalidResponse("included service \(s) has no UUID")
                }
                uuid = u
            }
            out.append(GATTRemoteService(uuid: uuid, primary: false, startHandle: s, endHandle: end))
        }
        return out
    }

    /// Characteristics of `service` (Read By Type 0x2803), optionally only those with `uuid`.
    public nonisolated(nonsending) func discoverCharacteristics(of service: GATTRemoteService, uuid: BluetoothUUID? = nil) async throws -> [GATTRemoteCharacteristic] {
        var out: [GATTRemoteCharacteristic] = []
        for e in try await readAllByType(GATTUUID.characteristic, try handles(of: service)) {
            // The value follows its declaration inside the service (Core Vol 3 Part G 3.3), and
            // before the next declaration.
            guard let d = try? GATTCharacteristicDeclaration(value: e.value), d.valueHandle > e.handle,
                  d.valueHandle <= service.endHandle else {
                throw GATTClientError.invalidResponse("bad characteristic declaration at \(e.handle)")
            }
            if let last = out.indices.last {
                guard e.handle > out[last].valueHandle else {
                    throw GATTClientError.invalidResponse("characteristic declaration at \(e.handle) inside the previous characteristic")
                }
                out[last].endHandle = e.handle - 1
            }
            out.append(GATTRemoteCharacteristic(uuid: d.uuid, declarationHandle: e.handle, valueHandle: d.valueHandle,
                                                properties: d.properties, endHandle: service.endHandle))
        }
        return uuid.map { u in out.filter { $0.uuid == u } } ?? out
    }

    /// Descriptors of `characteristic` (Find Information after its value handle).
    public nonisolated(nonsending) func discoverDescriptors(of characteristic: GATTRemoteCharacteristic) async throws -> [GATTRemoteDescriptor] {
        guard characteristic.valueHandle < characteristic.endHandle else { return [] }
        var out: [GATTRemoteDescriptor] = []
        var start = characteristic.valueHandle + 1
        while start <= characteristic.endHandle {
            guard case let .findInformationResponse(_, list)? = try await step(
                .findInformationRequest(startHandle: start, endHandle: characteristic.endHandle)) else { break }
            var last = start
            for e in list {
                guard e.handle >= start, e.handle <= characteristic.endHandle else {
                    throw GATTClientError.invalidResponse("descriptor handle \(e.handle) out of range")
                }
                out.append(GATTRemoteDescriptor(uuid: e.uuid, handle: e.handle))
                last = e.handle
            }
            if last == 0xFFFF { break }
            start = last + 1
        }
        return out
    }

    /// Read By Type over a range until Attribute Not Found, with progress checks.
    private nonisolated(nonsending) func readAllByType(_ type: BluetoothUUID, _ range: ClosedRange<UInt16>) async throws -> [ATTHandleValue] {
        var out: [ATTHandleValue] = []
        var start = range.lowerBound
        while start <= range.upperBound {
            guard case let .readByTypeResponse(list)? = try await step(
                .readByTypeRequest(startHandle: start, endHandle: range.upperBound, type: type)) else { break }
            var last = start
            for e in list {
                guard e.handle >= start, e.handle <= range.upperBound else {
                    throw GATTClientError.invalidResponse("handle \(e.handle) outside \(start)...\(range.upperBound)")
                }
                // Callers rely on ascending handles (a declaration ends where the next begins).
                if let previous = out.last?.handle, e.handle <= previous {
                    throw GATTClientError.invalidResponse("handle \(e.handle) after \(previous): handles out of order")
                }
                out.append(e)
                last = e.handle
            }
            if last == 0xFFFF { break }
            start = last + 1
        }
        return out
    }

    /// The whole database (services, included services, characteristics, descriptors), from
    /// the cache when valid. Also reads the Database Hash, when the server has one, for `validateCache`.
    public nonisolated(nonsending) func discoverDatabase() async throws -> [GATTRemoteServiceTree] {
        if let cache { return cache }
        let tree = try await discoverTrees(in: 1...0xFFFF)
        cache = tree
        noteServiceChanged(in: tree)
        cachedHash = try? await readDatabaseHash()
        return tree
    }

    /// The cached database, if any.
    public var cachedDatabase: [GATTRemoteServiceTree]? { cache }

    /// Drops the cache (the next `discoverDatabase` rediscovers).
    public func invalidateCache() { cache = nil; cachedHash = nil }

    /// Reads the Database Hash; drops the cache when it differs from the one read at discovery.
    /// Returns whether the cache is (still) valid.
    @discardableResult
    public nonisolated(nonsending) func validateCache() async throws -> Bool {
        guard cache != nil else { return false }
        let hash = try? await readDatabaseHash()
        if hash == nil || hash != cachedHash { invalidateCache(); return false }
        return true
    }

    private nonisolated(nonsending) func readDatabaseHash() async throws -> [UInt8]? {
        let r = try await request(.readByTypeRequest(startHandle: 1, endHandle: 0xFFFF, type: GATTUUID.databaseHash))
        guard case let .readByTypeResponse(list) = r, let v = list.first?.value, v.count == 16 else { return nil }
        return v
    }

    private nonisolated(nonsending) func discoverTrees(in range: ClosedRange<UInt16>) async throws -> [GATTRemoteServiceTree] {
        var trees: [GATTRemoteServiceTree] = []
        for s in try await discoverServices(in: range) {
            let included = try await discoverIncludedServices(of: s)
            var chars: [GATTRemoteServiceTree.Characteristic] = []
            for c in try await discoverCharacteristics(of: s) {
                chars.append(.init(characteristic: c, descriptors: try await discoverDescriptors(of: c)))
            }
            trees.append(GATTRemoteServiceTree(service: s, includedServices: included, characteristics: chars))
        }
        return trees
    }

    private func noteServiceChanged(in tree: [GATTRemoteServiceTree]) {
        for t in tree where t.service.uuid == GATTUUID.genericAttribute {
            for c in t.characteristics where c.characteristic.uuid == GATTUUID.serviceChanged {
                serviceChangedHandle = c.characteristic.valueHandle
            }
        }
    }

    // MARK: Reading

    /// Reads a value; when it fills ATT_MTU − 1 octets, reads the rest with Read Blob.
    ///
    /// Nonisolated (no cache involved): the request goes straight to the requester.
    public nonisolated(nonsending) func read(handle: UInt16) async throws -> [UInt8] {
        let first = try Self.readValue(await request(.readRequest(handle: handle)))
        let mtu = requester.mtu
        guard first.count >= mtu - 1 else { return first }
        return try await readRest(handle: handle, after: first, length: nil)
    }

    /// `read(handle:)` begun without an await: its Read Request sent now (in the client's
    /// isolation), with the ATT_MTU it goes under, for a caller that waits for the answer where
    /// it is (`ATTBearer.Transaction.wait`), reads it with `readValue` and finishes a long
    /// value with `readRest`; what failed goes to `requester.recover`. Nil when the requester
    /// has no synchronous first step.
    package func beginRead(handle: UInt16) throws -> (transaction: ATTBearer.Transaction, mtu: Int)? {
        guard let t = try requester.begin(.readRequest(handle: handle)) else { return nil }
        return (t, requester.mtu)
    }

    /// The value a Read Request's answer carries.
    package static func readValue(_ response: ATTPDU) throws -> [UInt8] {
        guard case let .readResponse(value) = response else { throw GATTClientError.unexpectedResponse(.readResponse) }
        return value
    }

    /// Reads the rest of a value with Read Blob from `value.count` (Core Vol 3 Part G 4.8.3):
    /// up to `length` octets when known, else until a part shorter than ATT_MTU − 1.
    package nonisolated(nonsending) func readRest(handle: UInt16, after first: [UInt8], length: Int?) async throws -> [UInt8] {
        let mtu = requester.mtu
        var value = first
        while length.map({ value.count < $0 }) ?? true {
            guard value.count < Self.maximumLongValue else {
                throw GATTClientError.invalidResponse("value longer than \(Self.maximumLongValue) octets")
            }
            let part: [UInt8]
            do {
                guard case let .readBlobResponse(v) = try await request(
                    .readBlobRequest(handle: handle, offset: UInt16(value.count))) else { break }
                part = v
            } catch let e as ATTError where length == nil && (e.code == .attributeNotLong || e.code == .invalidOffset) {
                break  // the value was exactly a multiple of ATT_MTU − 1 long
            }
            value += part
            if part.count < mtu - 1 { break }
        }
        if let length, value.count != length {
            throw GATTClientError.invalidResponse("value of handle \(handle) is \(value.count) octets, its length said \(length)")
        }
        return value
    }

    public nonisolated(nonsending) func read(_ characteristic: GATTRemoteCharacteristic) async throws -> [UInt8] {
        try await read(handle: characteristic.valueHandle)
    }

    /// Read Using Characteristic UUID: every value with `uuid` in `range` (each as long as fits).
    public nonisolated(nonsending) func readByUUID(_ uuid: BluetoothUUID, in range: ClosedRange<UInt16> = 1...0xFFFF) async throws -> [ATTHandleValue] {
        guard case let .readByTypeResponse(list) = try await request(
            .readByTypeRequest(startHandle: range.lowerBound, endHandle: range.upperBound, type: uuid)) else {
            throw GATTClientError.unexpectedResponse(.readByTypeResponse)
        }
        return list
    }

    /// Read Multiple: the concatenated values (the caller knows their lengths).
    public nonisolated(nonsending) func readMultiple(handles: [UInt16]) async throws -> [UInt8] {
        guard case let .readMultipleResponse(v) = try await request(.readMultipleRequest(handles: handles)) else {
            throw GATTClientError.unexpectedResponse(.readMultipleResponse)
        }
        return v
    }

    /// Read Multiple Variable Length Characteristic Values (Core Vol 3 Part G 4.8.5): one whole
    /// value per handle. The response is cut at ATT_MTU − 1 octets (Vol 3 Part F 3.4.4.12): a
    /// value cut short (its Value Length says how long it is) is completed with Read Blob, and
    /// the values the response had no room for are read one by one.
    public nonisolated(nonsending) func readMultipleVariable(handles: [UInt16]) async throws -> [[UInt8]] {
        guard case let .readMultipleVariableResponse(tuples) = try await request(.readMultipleVariableRequest(handles: handles)) else {
            throw GATTClientError.unexpectedResponse(.readMultipleVariableResponse)
        }
        guard tuples.count <= handles.count else {
            throw GATTClientError.invalidResponse("\(tuples.count) values for \(handles.count) handles")
        }
        var values: [[UInt8]] = []
        for (i, t) in tuples.enumerated() {
            // Only the last tuple can be cut (the decoder takes what is left for it).
            values.append(t.isTruncated ? try await readRest(handle: handles[i], after: t.value, length: Int(t.length)) : t.value)
        }
        for h in handles.dropFirst(tuples.count) { values.append(try await read(handle: h)) }
        return values
    }

    // MARK: Writing

    /// Write with response; a value longer than ATT_MTU − 3 goes as a long write (Prepare/Execute).
    public nonisolated(nonsending) func write(_ value: [UInt8], handle: UInt16) async throws {
        let mtu = requester.mtu
        if value.count <= mtu - 3 {
            guard case .writeResponse = try await request(.writeRequest(handle: handle, value: value)) else {
                throw GATTClientError.unexpectedResponse(.writeResponse)
            }
            return
        }
        try await reliableWrite([(handle, value)])
    }

    public nonisolated(nonsending) func write(_ value: [UInt8], to characteristic: GATTRemoteCharacteristic) async throws {
        try await write(value, handle: characteristic.valueHandle)
    }

    /// Reliable write: every value through Prepare Write (each echo checked), then Execute; on
    /// any failure the queue is cancelled and the error thrown.
    public nonisolated(nonsending) func reliableWrite(_ writes: [(handle: UInt16, value: [UInt8])]) async throws {
        if let long = writes.first(where: { $0.value.count > Self.maximumLongValue }) {
            throw GATTClientError.valueTooLong(length: long.value.count, maximum: Self.maximumLongValue)
        }
        let chunkSize = requester.mtu - 5
        do {
            for w in writes {
                var offset = 0
                repeat {
                    let part = Array(w.value[offset..<min(w.value.count, offset + chunkSize)])
                    let sent = ATTPDU.prepareWriteResponse(handle: w.handle, offset: UInt16(offset), value: part)
                    let echo = try await request(.prepareWriteRequest(handle: w.handle, offset: UInt16(offset), value: part))
                    guard echo == sent else { throw GATTClientError.invalidResponse("Prepare Write echo differs") }
                    offset += part.count
                } while offset < w.value.count
            }
        } catch {
            _ = try? await requester.request(.executeWriteRequest(flags: .cancel))
            throw error
        }
        guard case .executeWriteResponse = try await request(.executeWriteRequest(flags: .write)) else {
            throw GATTClientError.unexpectedResponse(.executeWriteResponse)
        }
    }

    /// Write Without Response (Write Command); returns once handed to the link.
    public nonisolated(nonsending) func writeWithoutResponse(_ value: [UInt8], handle: UInt16) async throws {
        let max = requester.mtu - 3
        guard value.count <= max else { throw GATTClientError.valueTooLong(length: value.count, maximum: max) }
        try await requester.command(.writeCommand(handle: handle, value: value))
    }

    /// Signed Write Command (Core v5.4 Vol 3 Part G 4.9.2, Part F 3.4.5.4): `sign` turns the
    /// signed part (opcode || handle || value) into the 12-octet Authentication Signature (it
    /// holds the CSRK and its SignCounter: SMP sits above GATT). Returns once handed to the link.
    public nonisolated(nonsending) func signedWrite(_ value: [UInt8], handle: UInt16,
                                        sign: ([UInt8]) throws -> [UInt8]) async throws {
        let max = requester.mtu - 15
        guard value.count <= max else { throw GATTClientError.valueTooLong(length: value.count, maximum: max) }
        let message = [ATTOpcode.signedWriteCommand.rawValue, UInt8(handle & 0xFF), UInt8(handle >> 8)] + value
        try await requester.command(.signedWriteCommand(handle: handle, value: value, signature: try sign(message)))
    }

    // MARK: Notifications and indications

    /// Writes the CCCD (0x0001 notifications, or 0x0002 indications when `indications` or when
    /// the characteristic can only indicate) and returns the stream of values received.
    /// Subscribing again replaces (finishes) the previous stream.
    public nonisolated(nonsending) func subscribe(_ characteristic: GATTRemoteCharacteristic, cccdHandle: UInt16? = nil,
                          indications: Bool = false) async throws -> GATTNotificationStream {
        let (stream, continuation) = GATTNotificationStream.makeStream()
        try await subscribe(characteristic, cccdHandle: cccdHandle, indications: indications,
                            onValue: { continuation.yield($0) },
                            onIndication: { await continuation.deliverIndication($0) },
                            onEnd: { continuation.finish() })
        return stream
    }

    /// `subscribe` with callbacks instead of a stream: `onValue` is called with each value, in
    /// order (for notifications, in the client's isolation as they arrive: keep it short, e.g. a
    /// stream yield); `onEnd` once, when the subscription is replaced or removed (`unsubscribe`,
    /// a later `subscribe` of the same characteristic, a failed CCCD write) or the client goes
    /// away. Neither is called if this throws before registering (no CCCD). `onIndication`,
    /// when given, receives indicated values instead of `onValue`; the Handle Value
    /// Confirmation is sent after it returns, so it returns once the application has the value.
    public nonisolated(nonsending) func subscribe(_ characteristic: GATTRemoteCharacteristic, cccdHandle: UInt16? = nil,
                          indications: Bool = false,
                          onValue: @escaping @Sendable ([UInt8]) -> Void,
                          onIndication: (@Sendable ([UInt8]) async -> Void)? = nil,
                          onEnd: @escaping @Sendable () -> Void) async throws {
        let p = characteristic.properties
        let useIndications = indications ? p.contains(.indicate) : !p.contains(.notify) && p.contains(.indicate)
        guard p.contains(.notify) || p.contains(.indicate) else { throw GATTClientError.notSubscribable(characteristic.uuid) }
        let handle = try await cccd(of: characteristic, given: cccdHandle)
        let key = characteristic.valueHandle
        let subscriber = Subscriber(value: onValue, indication: onIndication ?? { onValue($0) }, end: onEnd)
        let previous = subscribers.replace(key, with: subscriber)
        previous?.end()
        do {
            try await write(useIndications ? [0x02, 0x00] : [0x01, 0x00], handle: handle)
        } catch {
            // Only this subscription ends: another `subscribe` of the value may have replaced it
            // while the write was under way, and keeps its own.
            if subscribers[key] === subscriber { removeSubscriber(key) }
            throw error
        }
    }

    /// Whether the characteristic's value reaches a subscriber now: from `subscribe` until
    /// `unsubscribe`, a replacing subscription, a failed CCCD write or the client going away.
    public func isSubscribed(_ characteristic: GATTRemoteCharacteristic) -> Bool {
        subscribers[characteristic.valueHandle] != nil
    }

    /// Writes 0x0000 to the CCCD and finishes the stream.
    public nonisolated(nonsending) func unsubscribe(_ characteristic: GATTRemoteCharacteristic, cccdHandle: UInt16? = nil) async throws {
        let handle = try await cccd(of: characteristic, given: cccdHandle)
        // Once per subscription: leaving its loop unsubscribes, and a `stopNotifications`
        // after that (or racing it) writes the CCCD no second time; it returns when that write
        // is answered, as it would for its own.
        let key = characteristic.valueHandle
        if removeSubscriber(key) {
            let writing = writeZero(handle)
            unsubscribing[key] = writing
            // (Only this write's entry: a subscribe and unsubscribe in between put theirs.)
            defer { if unsubscribing[key] == writing { unsubscribing[key] = nil } }
            try await writing.value
        } else if let writing = unsubscribing[key] {
            try await writing.value
        }
    }

    /// Writes 0x0000 to the CCCD `handle` in a task in the caller's isolation (the client's: it
    /// stays in one), which later unsubscriptions of the same value handle wait for too.
    private func writeZero(_ handle: UInt16, isolation: isolated (any Actor)? = #isolation) -> Task<Void, any Error> {
        Task { _ = isolation; try await self.write([0x00, 0x00], handle: handle) }
    }

    /// The CCCD writes of unsubscriptions under way, by value handle.
    private var unsubscribing: [UInt16: Task<Void, any Error>] = [:]

    /// Ends the subscription of value handle `key`; false when there was none.
    @discardableResult
    private func removeSubscriber(_ key: UInt16) -> Bool {
        guard let subscriber = subscribers.remove(key) else { return false }
        subscriber.end()
        return true
    }

    private nonisolated(nonsending) func cccd(of c: GATTRemoteCharacteristic, given: UInt16?) async throws -> UInt16 {
        if let given { return given }
        if let d = cache?.lazy.flatMap(\.characteristics).first(where: { $0.characteristic == c })?
            .descriptors.first(where: { $0.uuid == GATTUUID.clientCharacteristicConfiguration }) {
            return d.handle
        }
        guard let d = try await discoverDescriptors(of: c).first(where: { $0.uuid == GATTUUID.clientCharacteristicConfiguration }) else {
            throw GATTClientError.notSubscribable(c.uuid)
        }
        return d.handle
    }

    /// Called by the bearer for Handle Value Notification / Indication / Multiple Handle Value
    /// Notification (it confirms an indication after this returns, so this returns once the
    /// subscriber has handed an indicated value to the application). A Service Changed
    /// indication updates the cache in the background (rediscovery needs the bearer this call
    /// is blocking).
    public nonisolated(nonsending) func received(_ pdu: ATTPDU) async {
        switch pdu {
        case let .handleValueNotification(h, v):
            deliver(h, v)?.value(v)
        case let .handleValueIndication(h, v):
            await deliver(h, v)?.indication(v)
        case let .multipleHandleValueNotification(list):
            for e in list { deliver(e.handle, e.value)?.value(e.value) }
        default:
            break
        }
    }

    /// The bearer's notification fast path (`ATTBearer.setNotificationFastHandler`): hands a
    /// Handle Value Notification / Multiple Handle Value Notification to the subscribers at
    /// once, on the caller's context. Returns false (the PDU then goes through `received`)
    /// for anything else and for values of the Service Changed characteristic.
    public func deliverNotification(_ pdu: ATTPDU) -> Bool {
        switch pdu {
        case let .handleValueNotification(h, v):
            guard h != serviceChangedHandle else { return false }
            subscribers[h]?.value(v)
            return true
        case let .multipleHandleValueNotification(list):
            if let sc = serviceChangedHandle, list.contains(where: { $0.handle == sc }) { return false }
            for e in list { subscribers[e.handle]?.value(e.value) }
            return true
        default:
            return false
        }
    }

    /// Notes a Service Changed value; returns the value's subscriber.
    private func deliver(_ handle: UInt16, _ value: [UInt8], isolation: isolated (any Actor)? = #isolation) -> Subscriber? {
        if handle == serviceChangedHandle, value.count == 4 {
            let start = UInt16(value[0]) | UInt16(value[1]) << 8
            let end = UInt16(value[2]) | UInt16(value[3]) << 8
            if start != 0, start <= end {
                handleServiceChanged(start...end)
            }
        }
        return subscribers[handle]
    }

    private func handleServiceChanged(_ range: ClosedRange<UInt16>, isolation: isolated (any Actor)? = #isolation) {
        cachedHash = nil
        guard var tree = cache else { changes.yield(range); return }
        tree.removeAll { $0.service.startHandle <= range.upperBound && $0.service.endHandle >= range.lowerBound }
        cache = nil
        // The rediscovery runs where this client lives (its requester's isolation, the host's),
        // handed over as an isolated parameter: the bearer's requests trap anywhere else.
        Task { await self.rediscover(range, keeping: tree, on: isolation) }
    }

    private func rediscover(_ range: ClosedRange<UInt16>, keeping kept: [GATTRemoteServiceTree], on isolation: isolated (any Actor)?) async {
        if let fresh = try? await discoverTrees(in: range) {
            let merged = (kept + fresh).sorted { $0.service.startHandle < $1.service.startHandle }
            cache = merged
            noteServiceChanged(in: merged)
            cachedHash = try? await readDatabaseHash()
        }
        changes.yield(range)
    }
}
