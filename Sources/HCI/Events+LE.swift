// LE Meta subevents about connections, encryption, data length, PHY and advertising sets.
// Core Vol 4 Part E 7.7.65. Advertising reports are in Events+Advertising.swift.

/// LE Enhanced Connection Complete [v1] (subevent 0x0A) and [v2] (0x29, adds the advertising and sync handles).
public struct LEEnhancedConnectionComplete: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x0A
    public static let name = "LE Enhanced Connection Complete"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    public var role: UInt8
    public var peerAddressType: AddressType
    public var peerAddress: BDAddress
    public var localResolvablePrivateAddress: BDAddress
    public var peerResolvablePrivateAddress: BDAddress
    public var connectionInterval: UInt16
    public var peripheralLatency: UInt16
    public var supervisionTimeout: UInt16
    public var centralClockAccuracy: UInt8

    public init(status: HCIStatus, connectionHandle: UInt16, role: UInt8, peerAddressType: AddressType, peerAddress: BDAddress,
                localResolvablePrivateAddress: BDAddress = .zero, peerResolvablePrivateAddress: BDAddress = .zero,
                connectionInterval: UInt16, peripheralLatency: UInt16, supervisionTimeout: UInt16, centralClockAccuracy: UInt8 = 0) {
        self.status = status; self.connectionHandle = connectionHandle; self.role = role
        self.peerAddressType = peerAddressType; self.peerAddress = peerAddress
        self.localResolvablePrivateAddress = localResolvablePrivateAddress
        self.peerResolvablePrivateAddress = peerResolvablePrivateAddress
        self.connectionInterval = connectionInterval; self.peripheralLatency = peripheralLatency
        self.supervisionTimeout = supervisionTimeout; self.centralClockAccuracy = centralClockAccuracy
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status"))
        connectionHandle = try r.handle()
        role = try r.u8("role")
        peerAddressType = try r.addressType("peerAddressType")
        peerAddress = try r.address("peerAddress")
        localResolvablePrivateAddress = try r.address("localResolvablePrivateAddress")
        peerResolvablePrivateAddress = try r.address("peerResolvablePrivateAddress")
        connectionInterval = try r.u16("connectionInterval")
        peripheralLatency = try r.u16("peripheralLatency")
        supervisionTimeout = try r.u16("supervisionTimeout")
        centralClockAccuracy = try r.u8("centralClockAccuracy")
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(status.rawValue); w.u16(connectionHandle); w.u8(role); w.u8(peerAddressType.rawValue); w.address(peerAddress)
        w.address(localResolvablePrivateAddress); w.address(peerResolvablePrivateAddress)
        w.u16(connectionInterval); w.u16(peripheralLatency); w.u16(supervisionTimeout); w.u8(centralClockAccuracy)
    }

    public var fields: [Field] {
        [.status(status), .handle(connectionHandle), .code("role", role, note: roleNote(role)),
         .addressType("peerAddressType", peerAddressType), .address("peerAddress", peerAddress, type: peerAddressType),
         .address("localResolvablePrivateAddress", localResolvablePrivateAddress),
         .address("peerResolvablePrivateAddress", peerResolvablePrivateAddress),
         .interval("connectionInterval", connectionInterval, unitMicroseconds: 1250),
         .int("peripheralLatency", peripheralLatency),
         .interval("supervisionTimeout", supervisionTimeout, unitMicroseconds: 10_000),
         .code("centralClockAccuracy", centralClockAccuracy)]
    }
}

/// LE Enhanced Connection Complete [v2] (subevent 0x29). The v1 fields read through (`e.peerAddress`).
@dynamicMemberLookup
public struct LEEnhancedConnectionCompleteV2: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x29
    public static let name = "LE Enhanced Connection Complete [v2]"
    public var base: LEEnhancedConnectionComplete
    /// The advertising set that made the connection (0xFF when not advertising-initiated).
    public var advertisingHandle: UInt8
    public var syncHandle: UInt16

    public init(_ base: LEEnhancedConnectionComplete, advertisingHandle: UInt8 = 0xFF, syncHandle: UInt16 = 0xFFFF) {
        self.base = base; self.advertisingHandle = advertisingHandle; self.syncHandle = syncHandle
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        base = try LEEnhancedConnectionComplete(parameters: &r)
        advertisingHandle = try r.u8("advertisingHandle")
        syncHandle = try r.u16("syncHandle")
    }
    public func encodeParameters(into w: inout ByteWriter) { base.encodeParameters(into: &w); w.u8(advertisingHandle); w.u16(syncHandle) }
    public subscript<T>(dynamicMember keyPath: KeyPath<LEEnhancedConnectionComplete, T>) -> T { base[keyPath: keyPath] }
    public var fields: [Field] { base.fields + [.int("advertisingHandle", advertisingHandle), .code("syncHandle", syncHandle)] }
}

/// LE Connection Update Complete (subevent 0x03).
public struct LEConnectionUpdateComplete: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x03
    public static let name = "LE Connection Update Complete"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    public var connectionInterval: UInt16
    public var peripheralLatency: UInt16
    public var supervisionTimeout: UInt16
    public init(status: HCIStatus = .success, connectionHandle: UInt16, connectionInterval: UInt16,
                peripheralLatency: UInt16, supervisionTimeout: UInt16) {
        self.status = status; self.connectionHandle = connectionHandle; self.connectionInterval = connectionInterval
        self.peripheralLatency = peripheralLatency; self.supervisionTimeout = supervisionTimeout
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status")); connectionHandle = try r.handle()
        connectionInterval = try r.u16("connectionInterval"); peripheralLatency = try r.u16("peripheralLatency")
        supervisionTimeout = try r.u16("supervisionTimeout")
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(status.rawValue); w.u16(connectionHandle); w.u16(connectionInterval); w.u16(peripheralLatency); w.u16(supervisionTimeout)
    }
    public var fields: [Field] {
        [.status(status), .handle(connectionHandle),
         .interval("connectionInterval", connectionInterval, unitMicroseconds: 1250),
         .int("peripheralLatency", peripheralLatency),
         .interval("supervisionTimeout", supervisionTimeout, unitMicroseconds: 10_000)]
    }
}

/// LE Read Remote Features Complete (subevent 0x04).
public struct LEReadRemoteFeaturesComplete: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x04
    public static let name = "LE Read Remote Features Complete"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    public var leFeatures: LEFeatures
    public init(status: HCIStatus = .success, connectionHandle: UInt16, leFeatures: LEFeatures) {
        self.status = status; self.connectionHandle = connectionHandle; self.leFeatures = leFeatures
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status")); connectionHandle = try r.handle()
        leFeatures = LEFeatures(rawValue: try r.u64("leFeatures"))
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(status.rawValue); w.u16(connectionHandle); w.u64(leFeatures.rawValue) }
    public var fields: [Field] {
        [.status(status), .handle(connectionHandle), .code("leFeatures", leFeatures.rawValue, note: leFeatures.description)]
    }
}

/// LE Long Term Key Request (subevent 0x05): the peripheral's controller asks the host for the LTK.
public struct LELongTermKeyRequest: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x05
    public static let name = "LE Long Term Key Request"
    public var connectionHandle: UInt16
    public var randomNumber: UInt64
    public var encryptedDiversifier: UInt16
    public init(connectionHandle: UInt16, randomNumber: UInt64 = 0, encryptedDiversifier: UInt16 = 0) {
        self.connectionHandle = connectionHandle; self.randomNumber = randomNumber; self.encryptedDiversifier = encryptedDiversifier
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.handle(); randomNumber = try r.u64("randomNumber"); encryptedDiversifier = try r.u16("encryptedDiversifier")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle); w.u64(randomNumber); w.u16(encryptedDiversifier) }
    public var fields: [Field] {
        [.handle(connectionHandle), .code("randomNumber", randomNumber), .code("encryptedDiversifier", encryptedDiversifier)]
    }
}

/// LE Data Length Change (subevent 0x07).
public struct LEDataLengthChange: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x07
    public static let name = "LE Data Length Change"
    public var connectionHandle: UInt16
    public var maxTxOctets: UInt16
    public var maxTxTime: UInt16
    public var maxRxOctets: UInt16
    public var maxRxTime: UInt16
    public init(connectionHandle: UInt16, maxTxOctets: UInt16, maxTxTime: UInt16, maxRxOctets: UInt16, maxRxTime: UInt16) {
        self.connectionHandle = connectionHandle; self.maxTxOctets = maxTxOctets; self.maxTxTime = maxTxTime
        self.maxRxOctets = maxRxOctets; self.maxRxTime = maxRxTime
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.handle(); maxTxOctets = try r.u16("maxTxOctets"); maxTxTime = try r.u16("maxTxTime")
        maxRxOctets = try r.u16("maxRxOctets"); maxRxTime = try r.u16("maxRxTime")
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u16(connectionHandle); w.u16(maxTxOctets); w.u16(maxTxTime); w.u16(maxRxOctets); w.u16(maxRxTime)
    }
    public var fields: [Field] {
        [.handle(connectionHandle), .int("maxTxOctets", maxTxOctets), .int("maxTxTime", maxTxTime, note: "\(maxTxTime) µs"),
         .int("maxRxOctets", maxRxOctets), .int("maxRxTime", maxRxTime, note: "\(maxRxTime) µs")]
    }
}

/// LE PHY Update Complete (subevent 0x0C).
public struct LEPHYUpdateComplete: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x0C
    public static let name = "LE PHY Update Complete"
    public var status: HCIStatus
    public var connectionHandle: UInt16
    public var txPHY: UInt8
    public var rxPHY: UInt8
    public init(status: HCIStatus = .success, connectionHandle: UInt16, txPHY: UInt8, rxPHY: UInt8) {
        self.status = status; self.connectionHandle = connectionHandle; self.txPHY = txPHY; self.rxPHY = rxPHY
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status")); connectionHandle = try r.handle(); txPHY = try r.u8("txPHY"); rxPHY = try r.u8("rxPHY")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(status.rawValue); w.u16(connectionHandle); w.u8(txPHY); w.u8(rxPHY) }
    public var fields: [Field] { [.status(status), .handle(connectionHandle), .phy("txPHY", txPHY), .phy("rxPHY", rxPHY)] }
}

/// LE Scan Timeout (subevent 0x11): extended scanning ended because its duration elapsed.
public struct LEScanTimeout: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x11
    public static let name = "LE Scan Timeout"
    public init() {}
    public init(parameters r: inout ByteReader) throws(DecodeError) {}
    public func encodeParameters(into w: inout ByteWriter) {}
    public var fields: [Field] { [] }
}

/// LE Advertising Set Terminated (subevent 0x12).
public struct LEAdvertisingSetTerminated: LEMetaEventParameters, Equatable {
    public static let subeventCode: UInt8 = 0x12
    public static let name = "LE Advertising Set Terminated"
    public var status: HCIStatus
    public var advertisingHandle: UInt8
    /// Valid when status is Success: the connection that ended advertising.
    public var connectionHandle: UInt16
    public var numCompletedExtendedAdvertisingEvents: UInt8
    public init(status: HCIStatus = .success, advertisingHandle: UInt8, connectionHandle: UInt16, numCompletedExtendedAdvertisingEvents: UInt8 = 0) {
        self.status = status; self.advertisingHandle = advertisingHandle; self.connectionHandle = connectionHandle
        self.numCompletedExtendedAdvertisingEvents = numCompletedExtendedAdvertisingEvents
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        status = HCIStatus(try r.u8("status")); advertisingHandle = try r.u8("advertisingHandle")
        connectionHandle = try r.handle(); numCompletedExtendedAdvertisingEvents = try r.u8("numCompletedExtendedAdvertisingEvents")
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(status.rawValue); w.u8(advertisingHandle); w.u16(connectionHandle); w.u8(numCompletedExtendedAdvertisingEvents)
    }
    public var fields: [Field] {
        [.status(status), .int("advertisingHandle", advertisingHandle), .handle(connectionHandle),
         .int("numCompletedExtendedAdvertisingEvents", numCompletedExtendedAdvertisingEvents)]
    }
}
