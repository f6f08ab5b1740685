// LE Controller commands (OGF 0x08) for controller set-up, connections, encryption, data
// length and PHY. Core Vol 4 Part E 7.8. The commands themselves are described in
// Tools/pdl/hci.pdl; this file adds what a description does not say (typed masks, shared return parameters).

extension LESetEventMask {
    /// The bits: Tools/pdl/hci-codes.pdl (Generated/Codes.swift).
    public typealias Mask = LEEventMask
    public init(_ mask: Mask) { self.init(leEventMask: mask.rawValue) }
}

extension LEEventMask {
    /// The subevents this stack decodes.
    public static let host: LEEventMask = [.connectionComplete, .advertisingReport, .connectionUpdateComplete,
                                           .readRemoteFeaturesComplete, .longTermKeyRequest, .dataLengthChange,
                                           .enhancedConnectionComplete, .directedAdvertisingReport, .phyUpdateComplete,
                                           .extendedAdvertisingReport, .periodicAdvertisingSyncEstablished,
                                           .periodicAdvertisingReport, .periodicAdvertisingSyncLost,
                                           .periodicAdvertisingSyncTransferReceived,
                                           .scanTimeout, .advertisingSetTerminated]
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

