// AES-128 (LE Encrypt, SMP's e/c1/s1), AES-CMAC (SMP's f4/f5/f6/g2, GATT Database Hash)
// and P-256 ECDH come from OpenSSL's libcrypto; nothing here is hand-rolled.
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/ec.h>
#include <openssl/rand.h>
#include <openssl/err.h>
