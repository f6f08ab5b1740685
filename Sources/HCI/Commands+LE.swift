// LE Controller commands (OGF 0x08) for controller set-up, connections, encryption, data
// length and PHY. Core Vol 4 Part E 7.8. Advertising and scanning are in
// Commands+LEAdvertising.swift and Commands+LEExtended.swift.

extension HCIOpcode {
    static func leCommand(_ ocf: UInt16) -> HCIOpcode { HCIOpcode(ogf: HCIOpcode.le, ocf: ocf) }
}

/// LE Set Event Mask (0x2001).
public struct LESetEventMask: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0001)
    public static let name = "LE Set Event Mask"
    public var leEventMask: UInt64
    public init(leEventMask: UInt64) { self.leEventMask = leEventMask }
    public init(_ mask: Mask) { leEventMask = mask.rawValue }
    public init(parameters r: inout ByteReader) throws(DecodeError) { leEventMask = try r.u64("leEventMask") }
    public func encodeParameters(into w: inout ByteWriter) { w.u64(leEventMask) }
    public var fields: [Field] { [.code("leEventMask", leEventMask)] }

    /// LE_Event_Mask bits: bit n enables LE subevent n+1 (Core Vol 4 Part E 7.8.1).
    public struct Mask: OptionSet, Sendable, Hashable {
        public var rawValue: UInt64
        public init(rawValue: UInt64) { self.rawValue = rawValue }
        public init(subevent: UInt8) { rawValue = subevent == 0 ? 0 : 1 << UInt64(subevent - 1) }
        public static let connectionComplete = Mask(subevent: 0x01)
        public static let advertisingReport = Mask(subevent: 0x02)
        public static let connectionUpdateComplete = Mask(subevent: 0x03)
        public static let readRemoteFeaturesComplete = Mask(subevent: 0x04)
        public static let longTermKeyRequest = Mask(subevent: 0x05)
        public static let remoteConnectionParameterRequest = Mask(subevent: 0x06)
        public static let dataLengthChange = Mask(subevent: 0x07)
        public static let readLocalP256PublicKeyComplete = Mask(subevent: 0x08)
        public static let generateDHKeyComplete = Mask(subevent: 0x09)
        public static let enhancedConnectionComplete = Mask(subevent: 0x0A)
        public static let directedAdvertisingReport = Mask(subevent: 0x0B)
        public static let phyUpdateComplete = Mask(subevent: 0x0C)
        public static let extendedAdvertisingReport = Mask(subevent: 0x0D)
        public static let scanTimeout = Mask(subevent: 0x11)
        public static let advertisingSetTerminated = Mask(subevent: 0x12)
        public static let scanRequestReceived = Mask(subevent: 0x13)
        public static let channelSelectionAlgorithm = Mask(subevent: 0x14)
        public static let enhancedConnectionCompleteV2 = Mask(subevent: 0x29)
        /// The subevents this stack decodes.
        public static let host: Mask = [.connectionComplete, .advertisingReport, .connectionUpdateComplete,
                                        .readRemoteFeaturesComplete, .longTermKeyRequest, .dataLengthChange,
                                        .enhancedConnectionComplete, .directedAdvertisingReport, .phyUpdateComplete,
                                        .extendedAdvertisingReport, .scanTimeout, .advertisingSetTerminated]
    }
}

/// LE Read Buffer Size [v1] (0x2002).
public struct LEReadBufferSize: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0002)
    public static let name = "LE Read Buffer Size"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        /// 0 means "use Read Buffer Size" (shared BR/EDR buffers).
        public var leACLDataPacketLength: UInt16
        public var totalNumLEACLDataPackets: UInt8
        public init(leACLDataPacketLength: UInt16, totalNumLEACLDataPackets: UInt8) {
            self.leACLDataPacketLength = leACLDataPacketLength
            self.totalNumLEACLDataPackets = totalNumLEACLDataPackets
        }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            leACLDataPacketLength = try r.u16("leACLDataPacketLength")
            totalNumLEACLDataPackets = try r.u8("totalNumLEACLDataPackets")
        }
        public func encode(into w: inout ByteWriter) { w.u16(leACLDataPacketLength); w.u8(totalNumLEACLDataPackets) }
        public var fields: [Field] {
            [.int("leACLDataPacketLength", leACLDataPacketLength), .int("totalNumLEACLDataPackets", totalNumLEACLDataPackets)]
        }
    }
}

/// LE Read Buffer Size [v2] (0x2060): adds the ISO buffers.
public struct LEReadBufferSizeV2: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0060)
    public static let name = "LE Read Buffer Size [v2]"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var leACLDataPacketLength: UInt16
        public var totalNumLEACLDataPackets: UInt8
        public var isoDataPacketLength: UInt16
        public var totalNumISODataPackets: UInt8
        public init(leACLDataPacketLength: UInt16, totalNumLEACLDataPackets: UInt8,
                    isoDataPacketLength: UInt16 = 0, totalNumISODataPackets: UInt8 = 0) {
            self.leACLDataPacketLength = leACLDataPacketLength
            self.totalNumLEACLDataPackets = totalNumLEACLDataPackets
            self.isoDataPacketLength = isoDataPacketLength
            self.totalNumISODataPackets = totalNumISODataPackets
        }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            leACLDataPacketLength = try r.u16("leACLDataPacketLength")
            totalNumLEACLDataPackets = try r.u8("totalNumLEACLDataPackets")
            isoDataPacketLength = try r.u16("isoDataPacketLength")
            totalNumISODataPackets = try r.u8("totalNumISODataPackets")
        }
        public func encode(into w: inout ByteWriter) {
            w.u16(leACLDataPacketLength); w.u8(totalNumLEACLDataPackets); w.u16(isoDataPacketLength); w.u8(totalNumISODataPackets)
        }
        public var fields: [Field] {
            [.int("leACLDataPacketLength", leACLDataPacketLength), .int("totalNumLEACLDataPackets", totalNumLEACLDataPackets),
             .int("isoDataPacketLength", isoDataPacketLength), .int("totalNumISODataPackets", totalNumISODataPackets)]
        }
    }
}

/// LE features (Core Vol 6 Part B 4.6): the bits this stack looks at.
public struct LEFeatures: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public static let leEncryption = LEFeatures(rawValue: 1 << 0)
    public static let connectionParametersRequest = LEFeatures(rawValue: 1 << 1)
    public static let extendedRejectIndication = LEFeatures(rawValue: 1 << 2)
    public static let peripheralInitiatedFeaturesExchange = LEFeatures(rawValue: 1 << 3)
    public static let lePing = LEFeatures(rawValue: 1 << 4)
    public static let dataPacketLengthExtension = LEFeatures(rawValue: 1 << 5)
    public static let llPrivacy = LEFeatures(rawValue: 1 << 6)
    public static let extendedScannerFilterPolicies = LEFeatures(rawValue: 1 << 7)
    public static let le2MPHY = LEFeatures(rawValue: 1 << 8)
    public static let leCodedPHY = LEFeatures(rawValue: 1 << 11)
    public static let leExtendedAdvertising = LEFeatures(rawValue: 1 << 12)
    public static let lePeriodicAdvertising = LEFeatures(rawValue: 1 << 13)
    public static let channelSelectionAlgorithm2 = LEFeatures(rawValue: 1 << 14)

    static let names: [(LEFeatures, String)] = [
        (.leEncryption, "LE Encryption"), (.connectionParametersRequest, "Connection Parameters Request Procedure"),
        (.extendedRejectIndication, "Extended Reject Indication"),
        (.peripheralInitiatedFeaturesExchange, "Peripheral-initiated Features Exchange"), (.lePing, "LE Ping"),
        (.dataPacketLengthExtension, "LE Data Packet Length Extension"), (.llPrivacy, "LL Privacy"),
        (.extendedScannerFilterPolicies, "Extended Scanner Filter Policies"), (.le2MPHY, "LE 2M PHY"),
        (.leCodedPHY, "LE Coded PHY"), (.leExtendedAdvertising, "LE Extended Advertising"),
        (.lePeriodicAdvertising, "LE Periodic Advertising"), (.channelSelectionAlgorithm2, "Channel Selection Algorithm #2"),
    ]

    public var description: String {
        let n = Self.names.filter { contains($0.0) }.map(\.1)
        return n.isEmpty ? "none" : n.joined(separator: ", ")
    }
}

/// LE Read Local Supported Features (0x2003).
public struct LEReadLocalSupportedFeatures: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0003)
    public static let name = "LE Read Local Supported Features"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var leFeatures: LEFeatures
        public init(leFeatures: LEFeatures) { self.leFeatures = leFeatures }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { leFeatures = LEFeatures(rawValue: try r.u64("leFeatures")) }
        public func encode(into w: inout ByteWriter) { w.u64(leFeatures.rawValue) }
        public var fields: [Field] { [.code("leFeatures", leFeatures.rawValue, note: leFeatures.description)] }
    }
}

/// LE Read Supported States (0x201C): which combinations of advertising, scanning, initiating
/// and connection roles the controller can be in at once. Linux asks for it while it sets up an
/// adapter and gives up on the adapter without an answer.
public struct LEReadSupportedStates: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x001C)
    public static let name = "LE Read Supported States"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        /// LE_States: bit n set = state combination n supported (Core Vol 4 Part E 7.8.27).
        public var leStates: UInt64
        public init(leStates: UInt64) { self.leStates = leStates }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { leStates = try r.u64("leStates") }
        public func encode(into w: inout ByteWriter) { w.u64(leStates) }
        public var fields: [Field] { [.code("leStates", leStates)] }
    }
}

/// LE Set Random Address (0x2005).
public struct LESetRandomAddress: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0005)
    public static let name = "LE Set Random Address"
    public var randomAddress: BDAddress
    public init(randomAddress: BDAddress) { self.randomAddress = randomAddress }
    public init(parameters r: inout ByteReader) throws(DecodeError) { randomAddress = try r.address("randomAddress") }
    public func encodeParameters(into w: inout ByteWriter) { w.address(randomAddress) }
    public var fields: [Field] { [.address("randomAddress", randomAddress, type: .random)] }
}

/// LE Create Connection (0x200D): Command Status, then LE (Enhanced) Connection Complete.
public struct LECreateConnection: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x000D)
    public static let name = "LE Create Connection"
    public static var completesWithStatus: Bool { true }
    public var leScanInterval: UInt16
    public var leScanWindow: UInt16
    public var initiatorFilterPolicy: UInt8
    public var peerAddressType: AddressType
    public var peerAddress: BDAddress
    public var ownAddressType: AddressType
    public var connectionIntervalMin: UInt16
    public var connectionIntervalMax: UInt16
    public var maxLatency: UInt16
    public var supervisionTimeout: UInt16
    public var minCELength: UInt16
    public var maxCELength: UInt16

    public init(leScanInterval: UInt16 = 0x0060, leScanWindow: UInt16 = 0x0060, initiatorFilterPolicy: UInt8 = 0,
                peerAddressType: AddressType, peerAddress: BDAddress, ownAddressType: AddressType = .public,
                connectionIntervalMin: UInt16 = 0x0018, connectionIntervalMax: UInt16 = 0x0028, maxLatency: UInt16 = 0,
                supervisionTimeout: UInt16 = 0x002A, minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.leScanInterval = leScanInterval; self.leScanWindow = leScanWindow
        self.initiatorFilterPolicy = initiatorFilterPolicy; self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress; self.ownAddressType = ownAddressType
        self.connectionIntervalMin = connectionIntervalMin; self.connectionIntervalMax = connectionIntervalMax
        self.maxLatency = maxLatency; self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength; self.maxCELength = maxCELength
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        leScanInterval = try r.u16("leScanInterval")
        leScanWindow = try r.u16("leScanWindow")
        initiatorFilterPolicy = try r.u8("initiatorFilterPolicy")
        peerAddressType = try r.addressType("peerAddressType")
        peerAddress = try r.address("peerAddress")
        ownAddressType = try r.addressType("ownAddressType")
        connectionIntervalMin = try r.u16("connectionIntervalMin")
        connectionIntervalMax = try r.u16("connectionIntervalMax")
        maxLatency = try r.u16("maxLatency")
        supervisionTimeout = try r.u16("supervisionTimeout")
        minCELength = try r.u16("minCELength")
        maxCELength = try r.u16("maxCELength")
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.u16(leScanInterval); w.u16(leScanWindow); w.u8(initiatorFilterPolicy); w.u8(peerAddressType.rawValue)
        w.address(peerAddress); w.u8(ownAddressType.rawValue); w.u16(connectionIntervalMin); w.u16(connectionIntervalMax)
        w.u16(maxLatency); w.u16(supervisionTimeout); w.u16(minCELength); w.u16(maxCELength)
    }

    public var fields: [Field] {
        [.interval("leScanInterval", leScanInterval, unitMicroseconds: 625),
         .interval("leScanWindow", leScanWindow, unitMicroseconds: 625),
         .code("initiatorFilterPolicy", initiatorFilterPolicy, note: initiatorFilterPolicy == 0 ? "peer address" : "filter accept list"),
         .addressType("peerAddressType", peerAddressType),
         .address("peerAddress", peerAddress, type: peerAddressType),
         .addressType("ownAddressType", ownAddressType),
         .interval("connectionIntervalMin", connectionIntervalMin, unitMicroseconds: 1250),
         .interval("connectionIntervalMax", connectionIntervalMax, unitMicroseconds: 1250),
         .int("maxLatency", maxLatency),
         .interval("supervisionTimeout", supervisionTimeout, unitMicroseconds: 10_000),
         .interval("minCELength", minCELength, unitMicroseconds: 625),
         .interval("maxCELength", maxCELength, unitMicroseconds: 625)]
    }
}

/// LE Create Connection Cancel (0x200E).
public struct LECreateConnectionCancel: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x000E)
    public static let name = "LE Create Connection Cancel"
    public init() {}
}

/// LE Read Filter Accept List Size (0x200F).
public struct LEReadFilterAcceptListSize: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x000F)
    public static let name = "LE Read Filter Accept List Size"
    public init() {}
    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var filterAcceptListSize: UInt8
        public init(filterAcceptListSize: UInt8) { self.filterAcceptListSize = filterAcceptListSize }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { filterAcceptListSize = try r.u8("filterAcceptListSize") }
        public func encode(into w: inout ByteWriter) { w.u8(filterAcceptListSize) }
        public var fields: [Field] { [.int("filterAcceptListSize", filterAcceptListSize)] }
    }
}

/// LE Clear Filter Accept List (0x2010).
public struct LEClearFilterAcceptList: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0010)
    public static let name = "LE Clear Filter Accept List"
    public init() {}
}

/// LE Connection Update (0x2013): Command Status, then LE Connection Update Complete.
public struct LEConnectionUpdate: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0013)
    public static let name = "LE Connection Update"
    public static var completesWithStatus: Bool { true }
    public var connectionHandle: UInt16
    public var connectionIntervalMin: UInt16
    public var connectionIntervalMax: UInt16
    public var maxLatency: UInt16
    public var supervisionTimeout: UInt16
    public var minCELength: UInt16
    public var maxCELength: UInt16

    public init(connectionHandle: UInt16, connectionIntervalMin: UInt16, connectionIntervalMax: UInt16,
                maxLatency: UInt16, supervisionTimeout: UInt16, minCELength: UInt16 = 0, maxCELength: UInt16 = 0) {
        self.connectionHandle = connectionHandle
        self.connectionIntervalMin = connectionIntervalMin; self.connectionIntervalMax = connectionIntervalMax
        self.maxLatency = maxLatency; self.supervisionTimeout = supervisionTimeout
        self.minCELength = minCELength; self.maxCELength = maxCELength
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.handle()
        connectionIntervalMin = try r.u16("connectionIntervalMin")
        connectionIntervalMax = try r.u16("connectionIntervalMax")
        maxLatency = try r.u16("maxLatency")
        supervisionTimeout = try r.u16("supervisionTimeout")
        minCELength = try r.u16("minCELength")
        maxCELength = try r.u16("maxCELength")
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u16(connectionHandle); w.u16(connectionIntervalMin); w.u16(connectionIntervalMax)
        w.u16(maxLatency); w.u16(supervisionTimeout); w.u16(minCELength); w.u16(maxCELength)
    }
    public var fields: [Field] {
        [.handle(connectionHandle),
         .interval("connectionIntervalMin", connectionIntervalMin, unitMicroseconds: 1250),
         .interval("connectionIntervalMax", connectionIntervalMax, unitMicroseconds: 1250),
         .int("maxLatency", maxLatency),
         .interval("supervisionTimeout", supervisionTimeout, unitMicroseconds: 10_000),
         .interval("minCELength", minCELength, unitMicroseconds: 625),
         .interval("maxCELength", maxCELength, unitMicroseconds: 625)]
    }
}

/// LE Read Remote Features (0x2016): Command Status, then LE Read Remote Features Complete.
public struct LEReadRemoteFeatures: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0016)
    public static let name = "LE Read Remote Features"
    public static var completesWithStatus: Bool { true }
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public init(parameters r: inout ByteReader) throws(DecodeError) { connectionHandle = try r.handle() }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle) }
    public var fields: [Field] { [.handle(connectionHandle)] }
}

/// LE Encrypt (0x2017): AES-128 in the controller. Key and plaintext most significant octet last (as on HCI).
public struct LEEncrypt: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0017)
    public static let name = "LE Encrypt"
    public var key: [UInt8]
    public var plaintextData: [UInt8]
    public init(key: [UInt8], plaintextData: [UInt8]) { self.key = key; self.plaintextData = plaintextData }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        key = try r.block16("key"); plaintextData = try r.block16("plaintextData")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.padded(key, to: 16); w.padded(plaintextData, to: 16) }
    public var fields: [Field] { [.bytes("key", key), .bytes("plaintextData", plaintextData)] }

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var encryptedData: [UInt8]
        public init(encryptedData: [UInt8]) { self.encryptedData = encryptedData }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { encryptedData = try r.block16("encryptedData") }
        public func encode(into w: inout ByteWriter) { w.padded(encryptedData, to: 16) }
        public var fields: [Field] { [.bytes("encryptedData", encryptedData)] }
    }
}

/// LE Rand (0x2018).
public struct LERand: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0018)
    public static let name = "LE Rand"
    public init() {}
    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var randomNumber: UInt64
        public init(randomNumber: UInt64) { self.randomNumber = randomNumber }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { randomNumber = try r.u64("randomNumber") }
        public func encode(into w: inout ByteWriter) { w.u64(randomNumber) }
        public var fields: [Field] { [.code("randomNumber", randomNumber)] }
    }
}

/// LE Enable Encryption (0x2019; "LE Start Encryption" before Core 5.3): Command Status,
/// then Encryption Change or Encryption Key Refresh Complete.
public struct LEEnableEncryption: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0019)
    public static let name = "LE Enable Encryption"
    public static var completesWithStatus: Bool { true }
    public var connectionHandle: UInt16
    public var randomNumber: UInt64
    public var encryptedDiversifier: UInt16
    public var longTermKey: [UInt8]
    public init(connectionHandle: UInt16, randomNumber: UInt64 = 0, encryptedDiversifier: UInt16 = 0, longTermKey: [UInt8]) {
        self.connectionHandle = connectionHandle; self.randomNumber = randomNumber
        self.encryptedDiversifier = encryptedDiversifier; self.longTermKey = longTermKey
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.handle()
        randomNumber = try r.u64("randomNumber")
        encryptedDiversifier = try r.u16("encryptedDiversifier")
        longTermKey = try r.block16("longTermKey")
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u16(connectionHandle); w.u64(randomNumber); w.u16(encryptedDiversifier); w.padded(longTermKey, to: 16)
    }
    public var fields: [Field] {
        [.handle(connectionHandle), .code("randomNumber", randomNumber), .code("encryptedDiversifier", encryptedDiversifier),
         .bytes("longTermKey", longTermKey)]
    }
}

/// LE Long Term Key Request Reply (0x201A).
public struct LELongTermKeyRequestReply: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x001A)
    public static let name = "LE Long Term Key Request Reply"
    public typealias ReturnParameters = ConnectionHandleReturn
    public var connectionHandle: UInt16
    public var longTermKey: [UInt8]
    public init(connectionHandle: UInt16, longTermKey: [UInt8]) { self.connectionHandle = connectionHandle; self.longTermKey = longTermKey }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.handle(); longTermKey = try r.block16("longTermKey")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle); w.padded(longTermKey, to: 16) }
    public var fields: [Field] { [.handle(connectionHandle), .bytes("longTermKey", longTermKey)] }
}

/// LE Long Term Key Request Negative Reply (0x201B).
public struct LELongTermKeyRequestNegativeReply: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x001B)
    public static let name = "LE Long Term Key Request Negative Reply"
    public typealias ReturnParameters = ConnectionHandleReturn
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public init(parameters r: inout ByteReader) throws(DecodeError) { connectionHandle = try r.handle() }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle) }
    public var fields: [Field] { [.handle(connectionHandle)] }
}

/// Return parameters of commands that answer with just the Connection_Handle.
public struct ConnectionHandleReturn: HCIReturnParameters, Equatable {
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public init(returnParameters r: inout ByteReader) throws(DecodeError) { connectionHandle = try r.handle() }
    public func encode(into w: inout ByteWriter) { w.u16(connectionHandle) }
    public var fields: [Field] { [.handle(connectionHandle)] }
}

/// LE Set Data Length (0x2022).
public struct LESetDataLength: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0022)
    public static let name = "LE Set Data Length"
    public typealias ReturnParameters = ConnectionHandleReturn
    public var connectionHandle: UInt16
    public var txOctets: UInt16
    public var txTime: UInt16
    public init(connectionHandle: UInt16, txOctets: UInt16 = 251, txTime: UInt16 = 2120) {
        self.connectionHandle = connectionHandle; self.txOctets = txOctets; self.txTime = txTime
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.handle(); txOctets = try r.u16("txOctets"); txTime = try r.u16("txTime")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle); w.u16(txOctets); w.u16(txTime) }
    public var fields: [Field] {
        [.handle(connectionHandle), .int("txOctets", txOctets), .int("txTime", txTime, note: "\(txTime) µs")]
    }
}

/// Suggested/maximum data lengths: octets and microseconds.
private func dataLengthFields(_ prefix: String, _ octets: UInt16, _ time: UInt16) -> [Field] {
    [.int(prefix + "Octets", octets), .int(prefix + "Time", time, note: "\(time) µs")]
}

/// LE Read Suggested Default Data Length (0x2023).
public struct LEReadSuggestedDefaultDataLength: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0023)
    public static let name = "LE Read Suggested Default Data Length"
    public init() {}
    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var suggestedMaxTxOctets: UInt16
        public var suggestedMaxTxTime: UInt16
        public init(suggestedMaxTxOctets: UInt16, suggestedMaxTxTime: UInt16) {
            self.suggestedMaxTxOctets = suggestedMaxTxOctets; self.suggestedMaxTxTime = suggestedMaxTxTime
        }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            suggestedMaxTxOctets = try r.u16("suggestedMaxTxOctets"); suggestedMaxTxTime = try r.u16("suggestedMaxTxTime")
        }
        public func encode(into w: inout ByteWriter) { w.u16(suggestedMaxTxOctets); w.u16(suggestedMaxTxTime) }
        public var fields: [Field] { dataLengthFields("suggestedMaxTx", suggestedMaxTxOctets, suggestedMaxTxTime) }
    }
}

/// LE Write Suggested Default Data Length (0x2024).
public struct LEWriteSuggestedDefaultDataLength: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0024)
    public static let name = "LE Write Suggested Default Data Length"
    public var suggestedMaxTxOctets: UInt16
    public var suggestedMaxTxTime: UInt16
    public init(suggestedMaxTxOctets: UInt16, suggestedMaxTxTime: UInt16) {
        self.suggestedMaxTxOctets = suggestedMaxTxOctets; self.suggestedMaxTxTime = suggestedMaxTxTime
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        suggestedMaxTxOctets = try r.u16("suggestedMaxTxOctets"); suggestedMaxTxTime = try r.u16("suggestedMaxTxTime")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(suggestedMaxTxOctets); w.u16(suggestedMaxTxTime) }
    public var fields: [Field] { dataLengthFields("suggestedMaxTx", suggestedMaxTxOctets, suggestedMaxTxTime) }
}

/// LE Read Maximum Data Length (0x202F).
public struct LEReadMaximumDataLength: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x002F)
    public static let name = "LE Read Maximum Data Length"
    public init() {}
    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var supportedMaxTxOctets: UInt16
        public var supportedMaxTxTime: UInt16
        public var supportedMaxRxOctets: UInt16
        public var supportedMaxRxTime: UInt16
        public init(supportedMaxTxOctets: UInt16, supportedMaxTxTime: UInt16, supportedMaxRxOctets: UInt16, supportedMaxRxTime: UInt16) {
            self.supportedMaxTxOctets = supportedMaxTxOctets; self.supportedMaxTxTime = supportedMaxTxTime
            self.supportedMaxRxOctets = supportedMaxRxOctets; self.supportedMaxRxTime = supportedMaxRxTime
        }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            supportedMaxTxOctets = try r.u16("supportedMaxTxOctets"); supportedMaxTxTime = try r.u16("supportedMaxTxTime")
            supportedMaxRxOctets = try r.u16("supportedMaxRxOctets"); supportedMaxRxTime = try r.u16("supportedMaxRxTime")
        }
        public func encode(into w: inout ByteWriter) {
            w.u16(supportedMaxTxOctets); w.u16(supportedMaxTxTime); w.u16(supportedMaxRxOctets); w.u16(supportedMaxRxTime)
        }
        public var fields: [Field] {
            dataLengthFields("supportedMaxTx", supportedMaxTxOctets, supportedMaxTxTime)
                + dataLengthFields("supportedMaxRx", supportedMaxRxOctets, supportedMaxRxTime)
        }
    }
}

/// LE Read PHY (0x2030).
public struct LEReadPHY: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0030)
    public static let name = "LE Read PHY"
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public init(parameters r: inout ByteReader) throws(DecodeError) { connectionHandle = try r.handle() }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle) }
    public var fields: [Field] { [.handle(connectionHandle)] }

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var connectionHandle: UInt16
        public var txPHY: UInt8
        public var rxPHY: UInt8
        public init(connectionHandle: UInt16, txPHY: UInt8, rxPHY: UInt8) {
            self.connectionHandle = connectionHandle; self.txPHY = txPHY; self.rxPHY = rxPHY
        }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            connectionHandle = try r.handle(); txPHY = try r.u8("txPHY"); rxPHY = try r.u8("rxPHY")
        }
        public func encode(into w: inout ByteWriter) { w.u16(connectionHandle); w.u8(txPHY); w.u8(rxPHY) }
        public var fields: [Field] { [.handle(connectionHandle), .phy("txPHY", txPHY), .phy("rxPHY", rxPHY)] }
    }
}

/// LE Set Default PHY (0x2031). PHY masks: bit 0 1M, bit 1 2M, bit 2 Coded.
public struct LESetDefaultPHY: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0031)
    public static let name = "LE Set Default PHY"
    public var allPHYs: UInt8
    public var txPHYs: UInt8
    public var rxPHYs: UInt8
    public init(allPHYs: UInt8 = 0, txPHYs: UInt8, rxPHYs: UInt8) { self.allPHYs = allPHYs; self.txPHYs = txPHYs; self.rxPHYs = rxPHYs }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        allPHYs = try r.u8("allPHYs"); txPHYs = try r.u8("txPHYs"); rxPHYs = try r.u8("rxPHYs")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(allPHYs); w.u8(txPHYs); w.u8(rxPHYs) }
    public var fields: [Field] {
        [.code("allPHYs", allPHYs), .code("txPHYs", txPHYs, note: phyMaskNote(txPHYs)), .code("rxPHYs", rxPHYs, note: phyMaskNote(rxPHYs))]
    }
}

/// LE Set PHY (0x2032): Command Status, then LE PHY Update Complete.
public struct LESetPHY: HCICommand, Equatable {
    public static let opcode = HCIOpcode.leCommand(0x0032)
    public static let name = "LE Set PHY"
    public static var completesWithStatus: Bool { true }
    public var connectionHandle: UInt16
    public var allPHYs: UInt8
    public var txPHYs: UInt8
    public var rxPHYs: UInt8
    public var phyOptions: UInt16
    public init(connectionHandle: UInt16, allPHYs: UInt8 = 0, txPHYs: UInt8, rxPHYs: UInt8, phyOptions: UInt16 = 0) {
        self.connectionHandle = connectionHandle; self.allPHYs = allPHYs; self.txPHYs = txPHYs
        self.rxPHYs = rxPHYs; self.phyOptions = phyOptions
    }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.handle(); allPHYs = try r.u8("allPHYs"); txPHYs = try r.u8("txPHYs")
        rxPHYs = try r.u8("rxPHYs"); phyOptions = try r.u16("phyOptions")
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u16(connectionHandle); w.u8(allPHYs); w.u8(txPHYs); w.u8(rxPHYs); w.u16(phyOptions)
    }
    public var fields: [Field] {
        [.handle(connectionHandle), .code("allPHYs", allPHYs), .code("txPHYs", txPHYs, note: phyMaskNote(txPHYs)),
         .code("rxPHYs", rxPHYs, note: phyMaskNote(rxPHYs)), .code("phyOptions", phyOptions)]
    }
}
