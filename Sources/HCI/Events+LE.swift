// LE Meta subevents written by hand (irregular layouts); the regular ones are described in
// Tools/pdl/hci.pdl. Core Vol 4 Part E 7.7.65. Advertising reports are in Events+Advertising.swift.

/// LE Enhanced Connection Complete [v2] (subevent 0x29). The v1 fields read through (`e.peerAddress`).
@dynamicMemberLookup
public struct LEEnhancedConnectionCompleteV2: LEMetaEventParameters, Equatable {
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
