// Legacy LE advertising and scanning commands. Core Vol 4 Part E 7.8.5-7.8.11.

/// LE Set Advertising Data and LE Set Scan Response Data: a length octet and always 31 data
/// octets (zero-padded), coded once here; each command names its data.
public protocol LegacyDataCommand: HCICommand {
    /// The significant part (at most 31 octets); the command pads it to 31.
    var data: [UInt8] { get }
    init(legacyData: [UInt8])
    /// The data's parameter name ("advertisingData", "scanResponseData") and its words in errors.
    static var dataName: String { get }
    static var dataWords: String { get }
}

extension LegacyDataCommand {
    public init(parameters r: inout ByteReader) throws(DecodeError) {
        let n = Int(try r.u8("dataLength"))
        let all = try r.bytes(31, "data")
        guard n <= 31 else { throw .invalid("\(Self.dataWords) length \(n) exceeds 31") }
        self.init(legacyData: Array(all.prefix(n)))
    }
    public func encodeParameters(into w: inout ByteWriter) {
        w.u8(UInt8(Swift.min(data.count, 31))); w.padded(data, to: 31)
    }
    public var fields: [Field] { [.int(Self.dataName + "Length", data.count), .bytes(Self.dataName, data)] }
}

/// LE Set Advertising Data (0x2008).
public struct LESetAdvertisingData: LegacyDataCommand, Equatable {
    public static let dataName = "advertisingData"
    public static let dataWords = "advertising data"
    public var advertisingData: [UInt8]
    public var data: [UInt8] { advertisingData }
    public init(legacyData: [UInt8]) { advertisingData = Array(legacyData.prefix(31)) }
    public init(advertisingData: [UInt8]) { self.init(legacyData: advertisingData) }
}

/// LE Set Scan Response Data (0x2009).
public struct LESetScanResponseData: LegacyDataCommand, Equatable {
    public static let dataName = "scanResponseData"
    public static let dataWords = "scan response data"
    public var scanResponseData: [UInt8]
    public var data: [UInt8] { scanResponseData }
    public init(legacyData: [UInt8]) { scanResponseData = Array(legacyData.prefix(31)) }
    public init(scanResponseData: [UInt8]) { self.init(legacyData: scanResponseData) }
}
