// Address types as events carry them. Core Vol 4 Part E 7.7.

extension AddressType {
    /// Decodes an address type octet; values the spec reserves are malformed input.
    public static func decode(_ v: UInt8) throws(DecodeError) -> AddressType {
        guard let t = AddressType(rawValue: v) else { throw .invalid("reserved address type \(hexCode(v))") }
        return t
    }
}
