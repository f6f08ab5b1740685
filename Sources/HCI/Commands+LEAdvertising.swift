// Legacy LE advertising and scanning commands. Core Vol 4 Part E 7.8.5-7.8.11.

/// Legacy advertising or scan response data: a length octet and always 31 data octets.
func decodeLegacyData(_ r: inout ByteReader, _ what: String) throws(DecodeError) -> [UInt8] {
    let n = Int(try r.u8("dataLength"))
    let all = try r.bytes(31, "data")
    guard n <= 31 else { throw .invalid("\(what) length \(n) exceeds 31") }
    return Array(all.prefix(n))
}

/// LE Set Advertising Data (0x2008).
public struct LESetAdvertisingData: HCICommand, Equatable {
    /// The significant part (at most 31 octets); the command pads it to 31.
    public var advertisingData: [UInt8]
    public init(advertisingData: [UInt8]) { self.advertisingData = Array(advertisingData.prefix(31)) }
    public init(parameters r: inout ByteReader) throws(DecodeError) { advertisingData = try decodeLegacyData(&r, "advertising data") }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(UInt8(Swift.min(advertisingData.count, 31))); w.padded(advertisingData, to: 31)
    }
    public var fields: [Field] {
        [.int("advertisingDataLength", advertisingData.count), .bytes("advertisingData", advertisingData)]
    }
}

/// LE Set Scan Response Data (0x2009).
public struct LESetScanResponseData: HCICommand, Equatable {
    public var scanResponseData: [UInt8]
    public init(scanResponseData: [UInt8]) { self.scanResponseData = Array(scanResponseData.prefix(31)) }
    public init(parameters r: inout ByteReader) throws(DecodeError) { scanResponseData = try decodeLegacyData(&r, "scan response data") }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(UInt8(Swift.min(scanResponseData.count, 31))); w.padded(scanResponseData, to: 31)
    }
    public var fields: [Field] {
        [.int("scanResponseDataLength", scanResponseData.count), .bytes("scanResponseData", scanResponseData)]
    }
}
