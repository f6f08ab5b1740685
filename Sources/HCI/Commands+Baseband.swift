// Controller & Baseband (OGF 0x03), Informational (OGF 0x04) and Link Control (OGF 0x01)
// commands a BLE host uses. Core Vol 4 Part E 7.1, 7.3, 7.4.

/// Reset (0x0C03).
public struct Reset: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerAndBaseband, ocf: 0x0003)
    public static let name = "Reset"
    public init() {}
}

/// Set Event Mask (0x0C01).
public struct SetEventMask: HCICommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerAndBaseband, ocf: 0x0001)
    public static let name = "Set Event Mask"
    public var eventMask: UInt64
    public init(eventMask: UInt64) { self.eventMask = eventMask }
    public init(parameters r: inout ByteReader) throws(DecodeError) { eventMask = try r.u64("eventMask") }
    public func encodeParameters(into w: inout ByteWriter) { w.u64(eventMask) }
    public var fields: [Field] { [.code("eventMask", eventMask)] }
}

/// Read Local Version Information (0x1001).
public struct ReadLocalVersionInformation: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0001)
    public static let name = "Read Local Version Information"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var hciVersion: UInt8
        public var hciSubversion: UInt16
        public var lmpVersion: UInt8
        public var companyIdentifier: UInt16
        public var lmpSubversion: UInt16

        public init(hciVersion: UInt8, hciSubversion: UInt16, lmpVersion: UInt8, companyIdentifier: UInt16, lmpSubversion: UInt16) {
            self.hciVersion = hciVersion
            self.hciSubversion = hciSubversion
            self.lmpVersion = lmpVersion
            self.companyIdentifier = companyIdentifier
            self.lmpSubversion = lmpSubversion
        }

        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            hciVersion = try r.u8("hciVersion")
            hciSubversion = try r.u16("hciSubversion")
            lmpVersion = try r.u8("lmpVersion")
            companyIdentifier = try r.u16("companyIdentifier")
            lmpSubversion = try r.u16("lmpSubversion")
        }

        public func encode(into w: inout ByteWriter) {
            w.u8(hciVersion); w.u16(hciSubversion); w.u8(lmpVersion); w.u16(companyIdentifier); w.u16(lmpSubversion)
        }

        public var fields: [Field] {
            [.code("hciVersion", hciVersion, note: coreVersionName(hciVersion)),
             .code("hciSubversion", hciSubversion),
             .code("lmpVersion", lmpVersion, note: coreVersionName(lmpVersion)),
             .code("companyIdentifier", companyIdentifier),
             .code("lmpSubversion", lmpSubversion)]
        }
    }
}

/// Read BD_ADDR (0x1009).
public struct ReadBDADDR: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0009)
    public static let name = "Read BD_ADDR"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var address: BDAddress
        public init(address: BDAddress) { self.address = address }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { address = try r.address("bdAddr") }
        public func encode(into w: inout ByteWriter) { w.address(address) }
        public var fields: [Field] { [.address("bdAddr", address)] }
    }
}

/// Disconnect (0x0406): answered by Command Status, then Disconnection Complete.
public struct Disconnect: HCICommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.linkControl, ocf: 0x0006)
    public static let name = "Disconnect"
    public static var completesWithStatus: Bool { true }
    public var connectionHandle: UInt16
    public var reason: HCIStatus

    public init(connectionHandle: UInt16, reason: HCIStatus = .remoteUserTerminated) {
        self.connectionHandle = connectionHandle
        self.reason = reason
    }

    public init(parameters r: inout ByteReader) throws(DecodeError) {
        connectionHandle = try r.u16("connectionHandle")
        reason = HCIStatus(try r.u8("reason"))
    }

    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle); w.u8(reason.rawValue) }

    public var fields: [Field] {
        [.int("connectionHandle", connectionHandle), .code("reason", reason.rawValue, note: reason.name)]
    }
}

/// Bluetooth Core version names used for HCI/LMP/LL version numbers (Assigned Numbers 2.1).
public func coreVersionName(_ v: UInt8) -> String {
    let names = ["1.0b", "1.1", "1.2", "2.0+EDR", "2.1+EDR", "3.0+HS", "4.0", "4.1", "4.2", "5.0", "5.1", "5.2", "5.3", "5.4", "6.0", "6.1"]
    return Int(v) < names.count ? "Bluetooth \(names[Int(v)])" : "Bluetooth (\(v))"
}

extension SetEventMask {
    /// Event_Mask bits (Core Vol 4 Part E 7.3.1) for the events an LE host handles.
    public struct Mask: OptionSet, Sendable, Hashable {
        public var rawValue: UInt64
        public init(rawValue: UInt64) { self.rawValue = rawValue }
        public static let disconnectionComplete = Mask(rawValue: 1 << 4)
        public static let encryptionChange = Mask(rawValue: 1 << 7)
        public static let hardwareError = Mask(rawValue: 1 << 15)
        public static let dataBufferOverflow = Mask(rawValue: 1 << 25)
        public static let encryptionKeyRefreshComplete = Mask(rawValue: 1 << 47)
        public static let leMeta = Mask(rawValue: 1 << 61)
        /// What an LE-only host enables.
        public static let leHost: Mask = [.disconnectionComplete, .encryptionChange, .hardwareError,
                                          .dataBufferOverflow, .encryptionKeyRefreshComplete, .leMeta]
    }
    public init(_ mask: Mask) { self.init(eventMask: mask.rawValue) }
}

/// Read Local Supported Commands (0x1002).
public struct ReadLocalSupportedCommands: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0002)
    public static let name = "Read Local Supported Commands"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        /// 64 octets; bit (octet, bit) set when the command is supported (Core Vol 4 Part E 6.27).
        public var supportedCommands: [UInt8]
        public init(supportedCommands: [UInt8]) {
            self.supportedCommands = Array(supportedCommands.prefix(64)) + Array(repeating: 0, count: Swift.max(0, 64 - supportedCommands.count))
        }
        /// A bitmask claiming every command in `opcodes`.
        public init(supporting opcodes: [HCIOpcode]) {
            var bits = [UInt8](repeating: 0, count: 64)
            for op in opcodes {
                if let p = ReadLocalSupportedCommands.bitPosition(op) { bits[p.octet] |= 1 << p.bit }
            }
            self.init(supportedCommands: bits)
        }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { supportedCommands = try r.bytes(64, "supportedCommands") }
        public func encode(into w: inout ByteWriter) { w.append(supportedCommands) }

        /// True when the bitmask claims `opcode`. Read Local Supported Commands itself is
        /// mandatory and has no bit; an opcode missing from the table answers false.
        public func supports(_ opcode: HCIOpcode) -> Bool {
            if opcode == ReadLocalSupportedCommands.opcode { return true }
            guard let p = ReadLocalSupportedCommands.bitPosition(opcode), p.octet < supportedCommands.count else { return false }
            return supportedCommands[p.octet] & (1 << p.bit) != 0
        }

        public var fields: [Field] { [.bytes("supportedCommands", supportedCommands)] }
    }

    /// Octet and bit of `opcode` in the Supported_Commands bitmask (Core Vol 4 Part E 6.27),
    /// for the commands this stack uses.
    public static func bitPosition(_ opcode: HCIOpcode) -> (octet: Int, bit: Int)? {
        supportedCommandBits[opcode.rawValue]
    }
}

private func bitKey(_ c: any HCICommand.Type) -> UInt16 { c.opcode.rawValue }

private let supportedCommandBits: [UInt16: (octet: Int, bit: Int)] = [
    bitKey(Disconnect.self): (0, 5),
    bitKey(SetEventMask.self): (5, 6),
    bitKey(Reset.self): (5, 7),
    bitKey(ReadLocalVersionInformation.self): (14, 3),
    bitKey(ReadLocalSupportedFeatures.self): (14, 5),
    bitKey(ReadBufferSize.self): (14, 7),
    bitKey(ReadBDADDR.self): (15, 1),
    bitKey(ReadRSSI.self): (15, 5),
    bitKey(ReadEncryptionKeySize.self): (20, 4),
    bitKey(WriteLEHostSupport.self): (24, 6),
    bitKey(LESetEventMask.self): (25, 0),
    bitKey(LEReadBufferSize.self): (25, 1),
    bitKey(LEReadLocalSupportedFeatures.self): (25, 2),
    bitKey(LEReadSupportedStates.self): (28, 3),
    bitKey(LESetRandomAddress.self): (25, 4),
    bitKey(LESetAdvertisingParameters.self): (25, 5),
    bitKey(LEReadAdvertisingPhysicalChannelTxPower.self): (25, 6),
    bitKey(LESetAdvertisingData.self): (25, 7),
    bitKey(LESetScanResponseData.self): (26, 0),
    bitKey(LESetAdvertisingEnable.self): (26, 1),
    bitKey(LESetScanParameters.self): (26, 2),
    bitKey(LESetScanEnable.self): (26, 3),
    bitKey(LECreateConnection.self): (26, 4),
    bitKey(LECreateConnectionCancel.self): (26, 5),
    bitKey(LEReadFilterAcceptListSize.self): (26, 6),
    bitKey(LEClearFilterAcceptList.self): (26, 7),
    bitKey(LEConnectionUpdate.self): (27, 2),
    bitKey(LEReadRemoteFeatures.self): (27, 5),
    bitKey(LEEncrypt.self): (27, 6),
    bitKey(LERand.self): (27, 7),
    bitKey(LEEnableEncryption.self): (28, 0),
    bitKey(LELongTermKeyRequestReply.self): (28, 1),
    bitKey(LELongTermKeyRequestNegativeReply.self): (28, 2),
    bitKey(LESetDataLength.self): (33, 6),
    bitKey(LEReadSuggestedDefaultDataLength.self): (33, 7),
    bitKey(LEWriteSuggestedDefaultDataLength.self): (34, 0),
    bitKey(LEReadMaximumDataLength.self): (35, 3),
    bitKey(LEReadPHY.self): (35, 4),
    bitKey(LESetDefaultPHY.self): (35, 5),
    bitKey(LESetPHY.self): (35, 6),
    bitKey(LESetAdvertisingSetRandomAddress.self): (36, 1),
    bitKey(LESetExtendedAdvertisingParameters.self): (36, 2),
    bitKey(LESetExtendedAdvertisingData.self): (36, 3),
    bitKey(LESetExtendedScanResponseData.self): (36, 4),
    bitKey(LESetExtendedAdvertisingEnable.self): (36, 5),
    bitKey(LEReadMaximumAdvertisingDataLength.self): (36, 6),
    bitKey(LEReadNumberOfSupportedAdvertisingSets.self): (36, 7),
    bitKey(LERemoveAdvertisingSet.self): (37, 0),
    bitKey(LEClearAdvertisingSets.self): (37, 1),
    bitKey(LESetExtendedScanParameters.self): (37, 5),
    bitKey(LESetExtendedScanEnable.self): (37, 6),
    bitKey(LEExtendedCreateConnection.self): (37, 7),
    bitKey(LEReadBufferSizeV2.self): (41, 5),
]

/// Read Local Supported Features (0x1003): the LMP feature mask (BR/EDR features plus "LE Supported").
public struct ReadLocalSupportedFeatures: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0003)
    public static let name = "Read Local Supported Features"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var lmpFeatures: UInt64
        public init(lmpFeatures: UInt64) { self.lmpFeatures = lmpFeatures }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) { lmpFeatures = try r.u64("lmpFeatures") }
        public func encode(into w: inout ByteWriter) { w.u64(lmpFeatures) }
        /// Octet 4 bit 6: "LE Supported (Controller)" (Core Vol 2 Part C 3.3).
        public var leSupportedController: Bool { lmpFeatures & (1 << 38) != 0 }
        /// Octet 4 bit 5: "BR/EDR Not Supported".
        public var brEDRNotSupported: Bool { lmpFeatures & (1 << 37) != 0 }
        public var fields: [Field] {
            [.code("lmpFeatures", lmpFeatures, note: leSupportedController ? "LE supported" : "LE not supported")]
        }
    }
}

/// Read Buffer Size (0x1005): the controller's ACL buffers (used for LE when LE Read Buffer Size reports 0).
public struct ReadBufferSize: HCIParameterlessCommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.informational, ocf: 0x0005)
    public static let name = "Read Buffer Size"
    public init() {}

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var aclDataPacketLength: UInt16
        public var synchronousDataPacketLength: UInt8
        public var totalNumACLDataPackets: UInt16
        public var totalNumSynchronousDataPackets: UInt16
        public init(aclDataPacketLength: UInt16, synchronousDataPacketLength: UInt8 = 0,
                    totalNumACLDataPackets: UInt16, totalNumSynchronousDataPackets: UInt16 = 0) {
            self.aclDataPacketLength = aclDataPacketLength
            self.synchronousDataPacketLength = synchronousDataPacketLength
            self.totalNumACLDataPackets = totalNumACLDataPackets
            self.totalNumSynchronousDataPackets = totalNumSynchronousDataPackets
        }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            aclDataPacketLength = try r.u16("aclDataPacketLength")
            synchronousDataPacketLength = try r.u8("synchronousDataPacketLength")
            totalNumACLDataPackets = try r.u16("totalNumACLDataPackets")
            totalNumSynchronousDataPackets = try r.u16("totalNumSynchronousDataPackets")
        }
        public func encode(into w: inout ByteWriter) {
            w.u16(aclDataPacketLength); w.u8(synchronousDataPacketLength)
            w.u16(totalNumACLDataPackets); w.u16(totalNumSynchronousDataPackets)
        }
        public var fields: [Field] {
            [.int("aclDataPacketLength", aclDataPacketLength), .int("synchronousDataPacketLength", synchronousDataPacketLength),
             .int("totalNumACLDataPackets", totalNumACLDataPackets), .int("totalNumSynchronousDataPackets", totalNumSynchronousDataPackets)]
        }
    }
}

/// Read RSSI (0x1405).
public struct ReadRSSI: HCICommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.statusParameters, ocf: 0x0005)
    public static let name = "Read RSSI"
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public init(parameters r: inout ByteReader) throws(DecodeError) { connectionHandle = try r.handle() }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle) }
    public var fields: [Field] { [.handle(connectionHandle)] }

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var connectionHandle: UInt16
        public var rssi: Int8
        public init(connectionHandle: UInt16, rssi: Int8) { self.connectionHandle = connectionHandle; self.rssi = rssi }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            connectionHandle = try r.handle(); rssi = try r.i8("rssi")
        }
        public func encode(into w: inout ByteWriter) { w.u16(connectionHandle); w.i8(rssi) }
        public var fields: [Field] { [.handle(connectionHandle), .dBm("rssi", rssi)] }
    }
}

/// Read Encryption Key Size (0x1408, Core Vol 4 Part E 7.5.7): the key size of an encrypted link.
public struct ReadEncryptionKeySize: HCICommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.statusParameters, ocf: 0x0008)
    public static let name = "Read Encryption Key Size"
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public init(parameters r: inout ByteReader) throws(DecodeError) { connectionHandle = try r.handle() }
    public func encodeParameters(into w: inout ByteWriter) { w.u16(connectionHandle) }
    public var fields: [Field] { [.handle(connectionHandle)] }

    public struct ReturnParameters: HCIReturnParameters, Equatable {
        public var connectionHandle: UInt16
        /// Octets (1...16).
        public var keySize: UInt8
        public init(connectionHandle: UInt16, keySize: UInt8) { self.connectionHandle = connectionHandle; self.keySize = keySize }
        public init(returnParameters r: inout ByteReader) throws(DecodeError) {
            connectionHandle = try r.handle(); keySize = try r.u8("keySize")
        }
        public func encode(into w: inout ByteWriter) { w.u16(connectionHandle); w.u8(keySize) }
        public var fields: [Field] { [.handle(connectionHandle), .int("keySize", keySize)] }
    }
}

/// Write LE Host Support (0x0C6D).
public struct WriteLEHostSupport: HCICommand, Equatable {
    public static let opcode = HCIOpcode(ogf: HCIOpcode.controllerAndBaseband, ocf: 0x006D)
    public static let name = "Write LE Host Support"
    public var leSupportedHost: UInt8
    /// Simultaneous_LE_Host: reserved since Core 5.1, must be 0x00.
    public var unused: UInt8
    public init(leSupportedHost: UInt8 = 1, unused: UInt8 = 0) { self.leSupportedHost = leSupportedHost; self.unused = unused }
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        leSupportedHost = try r.u8("leSupportedHost"); unused = try r.u8("unused")
    }
    public func encodeParameters(into w: inout ByteWriter) { w.u8(leSupportedHost); w.u8(unused) }
    public var fields: [Field] { [.code("leSupportedHost", leSupportedHost), .code("unused", unused)] }
}
