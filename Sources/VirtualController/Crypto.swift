import COpenSSL

/// AES-128 of one block as HCI LE Encrypt defines it: key, plaintext and result are carried
/// least significant octet first, so they are reversed around OpenSSL's AES-128-ECB.
func aes128LittleEndian(key: [UInt8], block: [UInt8]) -> [UInt8]? {
    guard key.count == 16, block.count == 16, let ctx = EVP_CIPHER_CTX_new() else { return nil }
    defer { EVP_CIPHER_CTX_free(ctx) }
    let k = Array(key.reversed())
    let p = Array(block.reversed())
    var out = [UInt8](repeating: 0, count: 32)
    var n: Int32 = 0
    guard EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nil, k, nil) == 1,
          EVP_CIPHER_CTX_set_padding(ctx, 0) == 1,
          EVP_EncryptUpdate(ctx, &out, &n, p, 16) == 1, n == 16 else { return nil }
    return Array(out[0..<16].reversed())
}
