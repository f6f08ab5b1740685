// LE Controller commands (OGF 0x08) for controller set-up, connections, encryption, data
// length and PHY. Core Vol 4 Part E 7.8. The extended advertising data fragments are in
// Commands+LEExtended.swift; the other commands are described in Tools/pdl/hci.pdl.

extension LESetEventMask {
    public init(_ mask: Mask) { self.init(leEventMask: mask.rawValue) }

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

/// The Address_Type of the filter accept list commands for anonymous advertisements (Core Vol 4 Part E 7.8.16).
public let filterAcceptListAnonymous: UInt8 = 0xFF

/// Return parameters of commands that answer with just the Connection_Handle.
public struct ConnectionHandleReturn: HCIReturnParameters, Equatable {
    public var connectionHandle: UInt16
    public init(connectionHandle: UInt16) { self.connectionHandle = connectionHandle }
    public init(returnParameters r: inout ByteReader) throws(DecodeError) { connectionHandle = try r.handle() }
    public func encode(into w: inout ByteWriter) { w.u16(connectionHandle) }
    public var fields: [Field] { [.handle(connectionHandle)] }
}

