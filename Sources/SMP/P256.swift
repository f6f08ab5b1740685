import COpenSSL

// P-256 key pairs and ECDH for LE Secure Connections (Vol 3 Part H 2.3.5.6), through OpenSSL 3's
// EVP_PKEY and EC_POINT APIs. Coordinates and scalars are kept LSO first, as the Pairing Public
// Key PDU carries them (Vol 3 Part H 3.5.6); OpenSSL wants them MSO first.

/// A P-256 key pair: the private scalar and the public key X || Y, each 32 octets LSO first.
public struct SMPKeyPair: Sendable, Equatable {
    public let privateKey: [UInt8]
    /// X || Y, 64 octets, exactly as in the Pairing Public Key PDU.
    public let publicKey: [UInt8]

    /// The key pair of a private scalar (32 octets LSO first); nil if it is not in [1, n-1].
    public init?(privateKey: [UInt8]) {
        guard privateKey.count == 32, let pub = P256.publicKey(ofPrivate: privateKey) else { return nil }
        self.privateKey = privateKey
        self.publicKey = pub
    }

    /// A fresh key pair from OpenSSL's EC key generator (Vol 3 Part H 2.3.5.6.1: a new one per pairing).
    public static func generate() -> SMPKeyPair {
        guard let priv = P256.generatePrivateKey(), let pair = SMPKeyPair(privateKey: priv) else {
            preconditionFailure("OpenSSL failed to generate a P-256 key pair")
        }
        return pair
    }

    /// The debug key pair (Vol 3 Part H 2.3.5.6.1), private key as the spec prints it (MSO first):
    /// 3f49f6d4 a3c55f38 74c9b3e3 d2103f50 4aff607b eb40b799 5899b8a6 cd3c1abd.
    public static let debug: SMPKeyPair = {
        let mso: [UInt8] = [0x3f, 0x49, 0xf6, 0xd4, 0xa3, 0xc5, 0x5f, 0x38, 0x74, 0xc9, 0xb3, 0xe3, 0xd2, 0x10, 0x3f, 0x50,
                            0x4a, 0xff, 0x60, 0x7b, 0xeb, 0x40, 0xb7, 0x99, 0x58, 0x99, 0xb8, 0xa6, 0xcd, 0x3c, 0x1a, 0xbd]
        return SMPKeyPair(privateKey: mso.reversed())!
    }()

    /// Whether a public key (64 octets LSO first) is the spec's debug public key.
    public static func isDebugPublicKey(_ key: [UInt8]) -> Bool { key == debug.publicKey }
}

/// Why a peer's public key was refused.
public enum SMPPublicKeyError: Error, Sendable, Equatable, CustomStringConvertible {
    case wrongLength(Int)
    /// Not a point of P-256 (CVE-2018-5383, invalid curve attack), or the point at infinity.
    case notOnCurve
    /// Equal to our own public key (CVE-2020-26558, reflection).
    case reflected

    public var description: String {
        switch self {
        case .wrongLength(let n): "public key of \(n) octets, not 64"
        case .notOnCurve: "public key is not a point of P-256"
        case .reflected: "peer's public key equals ours (reflection)"
        }
    }
}

extension SMPCrypto {
    /// Checks a peer public key (64 octets LSO first) is a finite point on P-256.
    public static func validatePublicKey(_ key: [UInt8]) throws(SMPPublicKeyError) {
        guard key.count == 64 else { throw .wrongLength(key.count) }
        guard P256.isOnCurve(key) else { throw .notOnCurve }
    }

    /// The DHKey (Vol 3 Part H 2.3.5.6.1): the X coordinate of ECDH(our private key, peer public key),
    /// 32 octets LSO first. The peer key is validated first (on curve, not at infinity, not ours).
    public static func dhKey(_ ours: SMPKeyPair, peerPublicKey: [UInt8]) throws(SMPPublicKeyError) -> [UInt8] {
        try validatePublicKey(peerPublicKey)
        guard peerPublicKey != ours.publicKey else { throw .reflected }
        guard let secret = P256.ecdh(privateKey: ours.privateKey, publicKey: ours.publicKey, peer: peerPublicKey) else {
            throw .notOnCurve
        }
        return secret
    }
}

/// OpenSSL plumbing for P-256.
enum P256 {
    /// 0x04 || X || Y (MSO first): the uncompressed point encoding OpenSSL reads and writes.
    static func uncompressed(_ key: [UInt8]) -> [UInt8] {
        [0x04] + key[0..<32].reversed() + key[32..<64].reversed()
    }

    static func withGroup<T>(_ body: (OpaquePointer) -> T?) -> T? {
        guard let group = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1) else { return nil }
        defer { EC_GROUP_free(group) }
        return body(group)
    }

    static func isOnCurve(_ key: [UInt8]) -> Bool {
        withGroup { group -> Bool? in
            guard let point = EC_POINT_new(group) else { return nil }
            defer { EC_POINT_free(point) }
            let octets = uncompressed(key)
            // oct2point rejects coordinates >= p and points off the curve; the explicit checks say why we accept.
            guard EC_POINT_oct2point(group, point, octets, octets.count, nil) == 1 else { return false }
            return EC_POINT_is_at_infinity(group, point) == 0 && EC_POINT_is_on_curve(group, point, nil) == 1
        } ?? false
    }

    /// Public key (64 octets LSO first) of a private scalar (32 octets LSO first), nil if the scalar is 0 or >= n.
    static func publicKey(ofPrivate priv: [UInt8]) -> [UInt8]? {
        withGroup { group -> [UInt8]? in
            let mso = Array(priv.reversed())
            guard let scalar = BN_bin2bn(mso, 32, nil) else { return nil }
            defer { BN_clear_free(scalar) }
            guard BN_is_zero(scalar) == 0, let order = EC_GROUP_get0_order(group), BN_cmp(scalar, order) < 0,
                  let point = EC_POINT_new(group) else { return nil }
            defer { EC_POINT_free(point) }
            guard EC_POINT_mul(group, point, scalar, nil, nil, nil) == 1 else { return nil }
            var out = [UInt8](repeating: 0, count: 65)
            guard EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &out, 65, nil) == 65 else { return nil }
            return out[1..<33].reversed() + out[33..<65].reversed()
        }
    }

    /// EVP_PKEY_generate on P-256; the private scalar, 32 octets LSO first.
    static func generatePrivateKey() -> [UInt8]? {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer? = nil
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_CTX_set_group_name(ctx, "P-256") == 1,
              EVP_PKEY_generate(ctx, &pkey) == 1, let pkey else { return nil }
        defer { EVP_PKEY_free(pkey) }
        var scalar: OpaquePointer? = nil
        guard EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_PRIV_KEY, &scalar) == 1, let scalar else { return nil }
        defer { BN_clear_free(scalar) }
        var mso = [UInt8](repeating: 0, count: 32)
        guard BN_bn2binpad(scalar, &mso, 32) == 32 else { return nil }
        defer { for i in mso.indices { mso[i] = 0 } }
        return mso.reversed()
    }

    /// An EVP_PKEY for P-256 from a public key and, optionally, the private scalar.
    static func makeKey(publicKey: [UInt8], privateKey: [UInt8]?) -> OpaquePointer? {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_fromdata_init(ctx) == 1 else { return nil }
        let params = OSSLParams()
        params.utf8(OSSL_PKEY_PARAM_GROUP_NAME, "P-256")
        params.octets(OSSL_PKEY_PARAM_PUB_KEY, uncompressed(publicKey))
        // OSSL_PARAM_construct_BN takes the integer in native byte order.
        if let privateKey { params.bigNumber(OSSL_PKEY_PARAM_PRIV_KEY, UInt16(1).littleEndian == 1 ? privateKey : privateKey.reversed()) }
        var pkey: OpaquePointer? = nil
        // EVP_PKEY_PUBLIC_KEY / EVP_PKEY_KEYPAIR are compound macros Swift does not import; same bits.
        let publicSelection = OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS | OSSL_KEYMGMT_SELECT_PUBLIC_KEY
        let selection = privateKey == nil ? publicSelection : publicSelection | OSSL_KEYMGMT_SELECT_PRIVATE_KEY
        let ok = params.with { EVP_PKEY_fromdata(ctx, &pkey, Int32(selection), $0) == 1 }
        return ok ? pkey : nil
    }

    /// ECDH shared secret X coordinate, LSO first.
    static func ecdh(privateKey: [UInt8], publicKey: [UInt8], peer: [UInt8]) -> [UInt8]? {
        guard let ours = makeKey(publicKey: publicKey, privateKey: privateKey) else { return nil }
        defer { EVP_PKEY_free(ours) }
        guard let theirs = makeKey(publicKey: peer, privateKey: nil) else { return nil }
        defer { EVP_PKEY_free(theirs) }
        guard let ctx = EVP_PKEY_CTX_new(ours, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: 32)
        var length = 32
        // derive_set_peer validates the peer key again (OpenSSL's own public key check).
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_derive_set_peer(ctx, theirs) == 1,
              EVP_PKEY_derive(ctx, &out, &length) == 1, length == 32 else { return nil }
        return out.reversed()
    }
}

/// An OSSL_PARAM array whose keys and values stay allocated as long as it lives (OSSL_PARAM only
/// points at them; Swift's String-to-pointer bridging would leave them dangling). Zeroed when freed.
final class OSSLParams {
    private var buffers: [(UnsafeMutableRawPointer, Int)] = []
    private var params: [OSSL_PARAM] = []

    private func copy(_ bytes: [UInt8]) -> UnsafeMutablePointer<UInt8> {
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        p.initialize(from: bytes, count: bytes.count)
        buffers.append((UnsafeMutableRawPointer(p), bytes.count))
        return p
    }
    private func cString(_ s: String) -> UnsafeMutablePointer<CChar> {
        UnsafeMutableRawPointer(copy(Array(s.utf8) + [0])).assumingMemoryBound(to: CChar.self)
    }

    func utf8(_ key: String, _ value: String) {
        params.append(OSSL_PARAM_construct_utf8_string(cString(key), cString(value), value.utf8.count))
    }
    func octets(_ key: String, _ value: [UInt8]) {
        params.append(OSSL_PARAM_construct_octet_string(cString(key), copy(value), value.count))
    }
    /// An unsigned integer in native byte order.
    func bigNumber(_ key: String, _ nativeOrder: [UInt8]) {
        params.append(OSSL_PARAM_construct_BN(cString(key), copy(nativeOrder), nativeOrder.count))
    }

    func with<T>(_ body: (UnsafeMutablePointer<OSSL_PARAM>) -> T) -> T {
        var all = params + [OSSL_PARAM_construct_end()]
        return all.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
    }

    deinit {
        for (p, n) in buffers {
            p.initializeMemory(as: UInt8.self, repeating: 0, count: n)
            p.deallocate()
        }
    }
}
