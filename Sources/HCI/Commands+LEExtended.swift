// LE Set Extended Advertising Data and LE Set Extended Scan Response Data (Core Vol 4 Part E
// 7.8.54, 7.8.55): the same fragment parameters, which the virtual controller applies as one
// ExtendedDataParameters. The other extended advertising, scanning and connection commands are
// described in Tools/pdl/hci.pdl (Generated/HCI.swift).

/// Shared shape of LE Set Extended Advertising Data and LE Set Extended Scan Response Data.
public struct ExtendedDataParameters: Sendable, Equatable {
    public var advertisingHandle: UInt8
    public var operation: UInt8
    public var fragmentPreference: UInt8
    public var data: [UInt8]

    init(advertisingHandle: UInt8, operation: UInt8, fragmentPreference: UInt8, data: [UInt8]) {
        self.advertisingHandle = advertisingHandle; self.operation = operation
        self.fragmentPreference = fragmentPreference; self.data = Array(data.prefix(251))
    }
    init(_ r: inout ByteReader) throws(DecodeError) {
        advertisingHandle = try r.u8("advertisingHandle")
        operation = try r.u8("operation")
        fragmentPreference = try r.u8("fragmentPreference")
        // At most 251 octets in one fragment (Core Vol 4 Part E 7.8.54).
        data = try r.lengthPrefixed(max: 251, "dataLength", "data")
    }
    func encode(into w: inout ByteWriter) {
        w.u8(advertisingHandle); w.u8(operation); w.u8(fragmentPreference); w.lengthPrefixed(data, max: 251)
    }
    func fields(_ dataName: String) -> [Field] {
        [.int("advertisingHandle", advertisingHandle),
         .code("operation", operation, note: extendedDataOperationName(operation)),
         .code("fragmentPreference", fragmentPreference),
         .int(dataName + "Length", data.count), .bytes(dataName, data)]
    }
}

/// LE Set Extended Advertising Data and LE Set Extended Scan Response Data: the same parameters,
/// coded once here; each command names its data.
public protocol ExtendedDataCommand: HCICommand {
    var parameters: ExtendedDataParameters { get }
    init(extendedData: ExtendedDataParameters)
    /// The data's parameter name ("advertisingData", "scanResponseData").
    static var dataName: String { get }
}

extension ExtendedDataCommand {
    public var advertisingHandle: UInt8 { parameters.advertisingHandle }
    public init(parameters r: inout ByteReader) throws(DecodeError) { self.init(extendedData: try ExtendedDataParameters(&r)) }
    public func encodeParameters(into w: inout ByteWriter) { parameters.encode(into: &w) }
    public var fields: [Field] { parameters.fields(Self.dataName) }
}

/// LE Set Extended Advertising Data (0x2037).
public struct LESetExtendedAdvertisingData: ExtendedDataCommand, Equatable {
    public static let dataName = "advertisingData"
    public var parameters: ExtendedDataParameters
    public var advertisingData: [UInt8] { parameters.data }
    public init(extendedData: ExtendedDataParameters) { parameters = extendedData }
    public init(advertisingHandle: UInt8, operation: UInt8 = 0x03, fragmentPreference: UInt8 = 0x01, advertisingData: [UInt8]) {
        parameters = ExtendedDataParameters(advertisingHandle: advertisingHandle, operation: operation,
                                            fragmentPreference: fragmentPreference, data: advertisingData)
    }
}

/// LE Set Extended Scan Response Data (0x2038).
public struct LESetExtendedScanResponseData: ExtendedDataCommand, Equatable {
    public static let dataName = "scanResponseData"
    public var parameters: ExtendedDataParameters
    public var scanResponseData: [UInt8] { parameters.data }
    public init(extendedData: ExtendedDataParameters) { parameters = extendedData }
    public init(advertisingHandle: UInt8, operation: UInt8 = 0x03, fragmentPreference: UInt8 = 0x01, scanResponseData: [UInt8]) {
        parameters = ExtendedDataParameters(advertisingHandle: advertisingHandle, operation: operation,
                                            fragmentPreference: fragmentPreference, data: scanResponseData)
    }
}
