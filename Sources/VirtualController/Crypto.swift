import OpenSSLCrypto

/// AES-128 of one block as HCI LE Encrypt defines it: key, plaintext and result are carried
/// least significant octet first, so they are reversed around AES-128.
func aes128LittleEndian(key: [UInt8], block: [UInt8]) -> [UInt8]? {
    guard key.count == 16, block.count == 16 else { return nil }
    return Array(AES128.encrypt(key: key.reversed(), block: block.reversed()).reversed())
}
