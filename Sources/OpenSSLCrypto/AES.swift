import COpenSSL

/// AES-128 and AES-CMAC through OpenSSL's libcrypto, shared by SMP (e, f4–f6, g2, h6, h7),
/// GATT (Database Hash) and the virtual controller (HCI LE Encrypt). Byte strings are in the
/// order AES and RFC 4493 use (most significant octet first); callers that carry values least
/// significant octet first (SMP PDUs, HCI) reverse around these calls.
public enum AES128 {
    /// AES-128-ECB of one 16-octet block with a 16-octet key.
    public static func encrypt(key: [UInt8], block: [UInt8]) -> [UInt8] {
        precondition(key.count == 16 && block.count == 16, "AES-128 needs a 16-octet key and block")
        guard let ctx = EVP_CIPHER_CTX_new() else { preconditionFailure("EVP_CIPHER_CTX_new failed") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: 32)
        var n: Int32 = 0
        let ok = EVP_EncryptInit_ex(ctx, EVP_aes_128_ecb(), nil, key, nil) == 1
            && EVP_CIPHER_CTX_set_padding(ctx, 0) == 1
            && EVP_EncryptUpdate(ctx, &out, &n, block, 16) == 1 && n == 16
        precondition(ok, "AES-128 failed in OpenSSL")
        return Array(out[0..<16])
    }

    /// AES-CMAC with a 16-octet key (RFC 4493) through OpenSSL 3's EVP_MAC.
    public static func cmac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        precondition(key.count == 16, "AES-CMAC key of \(key.count) octets")
        guard let mac = EVP_MAC_fetch(nil, "CMAC", nil) else { preconditionFailure("OpenSSL has no CMAC") }
        defer { EVP_MAC_free(mac) }
        guard let ctx = EVP_MAC_CTX_new(mac) else { preconditionFailure("EVP_MAC_CTX_new failed") }
        defer { EVP_MAC_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: 16)
        var outLength = 0
        // The parameter strings must outlive EVP_MAC_init: both stay inside these closures.
        let ok: Bool = "AES-128-CBC".withCString { cipher in
            "cipher".withCString { name in
                var params = [
                    OSSL_PARAM_construct_utf8_string(name, UnsafeMutablePointer(mutating: cipher), 0),
                    OSSL_PARAM_construct_end(),
                ]
                return EVP_MAC_init(ctx, key, 16, &params) == 1
                    && (message.isEmpty || EVP_MAC_update(ctx, message, message.count) == 1)
                    && EVP_MAC_final(ctx, &out, &outLength, 16) == 1
            }
        }
        precondition(ok && outLength == 16, "AES-CMAC failed in OpenSSL")
        return out
    }
}
