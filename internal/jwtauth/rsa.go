package jwtauth

import (
	"crypto"
	"crypto/fips140"
	"crypto/rsa"
	"crypto/subtle"

	"filippo.io/bigmod"
)

// rsaModulus is an RSA public key's modulus in the form its arithmetic
// needs, made once when the key is loaded. crypto/rsa makes it again on
// every verification (R² mod N, some 10 µs of a 30 µs RS256 check at 2048
// bits): this is that same computation kept. The arithmetic is the
// standard library's own constant-time big-number package, published on
// its own as filippo.io/bigmod; verification is then RFC 8017 section
// 8.2.2 exactly as crypto/rsa does it, held to crypto/rsa by
// FuzzRSAPKCS1v15.
type rsaModulus struct {
	n *bigmod.Modulus
	e uint
}

// newRSAModulus prepares pub for PKCS #1 v1.5 verification, or returns nil
// to leave pub to crypto/rsa: a key crypto/rsa would refuse (an even
// modulus, an exponent below 3, even or beyond 2³¹-1, fewer than
// minRSABits bits) and every key when the process runs in FIPS 140-3 mode,
// whose validated module must do the verifying.
func newRSAModulus(pub *rsa.PublicKey) *rsaModulus {
	if fips140.Enabled() || pub.N == nil || pub.N.BitLen() < minRSABits || pub.N.Bit(0) == 0 ||
		pub.E < 3 || pub.E&1 == 0 || pub.E > 1<<31-1 {
		return nil
	}
	n, err := bigmod.NewModulus(pub.N.Bytes())
	if err != nil {
		return nil
	}
	return &rsaModulus{n: n, e: uint(pub.E)}
}

// The DER encodings of a DigestInfo up to the digest (RFC 8017 section
// 9.2, note 1), for the hashes RS256, RS384 and RS512 sign.
var (
	sha256DigestInfo = []byte{0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20}
	sha384DigestInfo = []byte{0x30, 0x41, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30}
	sha512DigestInfo = []byte{0x30, 0x51, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40}
)

func digestInfoPrefix(h crypto.Hash) ([]byte, bool) {
	switch h {
	case crypto.SHA256:
		return sha256DigestInfo, true
	case crypto.SHA384:
		return sha384DigestInfo, true
	case crypto.SHA512:
		return sha512DigestInfo, true
	}
	return nil, false
}

// verifyPKCS1v15 reports whether sig is an RSASSA-PKCS1-v1_5 signature of
// digest (hashed with h) under the key: the signature, exactly the
// modulus's length and below it, raised to e must be the one encoding of
// the digest, 0x00 0x01 FF…FF 0x00 DigestInfo, byte for byte. Comparing the
// whole encoding leaves nothing to parse, so nothing to parse leniently.
func (k *rsaModulus) verifyPKCS1v15(h crypto.Hash, digest, sig []byte) bool {
	prefix, ok := digestInfoPrefix(h)
	size := k.n.Size()
	if !ok || len(digest) != h.Size() || len(sig) != size {
		return false
	}
	tLen := len(prefix) + len(digest)
	if size < tLen+11 {
		return false
	}
	s, err := bigmod.NewNat().SetBytes(sig, k.n)
	if err != nil { // not below the modulus
		return false
	}
	em := bigmod.NewNat().ExpShortVarTime(s, k.e, k.n).Bytes(k.n)
	ps := em[2 : size-tLen-1]
	good := subtle.ConstantTimeByteEq(em[0], 0) & subtle.ConstantTimeByteEq(em[1], 1) &
		subtle.ConstantTimeByteEq(em[size-tLen-1], 0) &
		subtle.ConstantTimeCompare(em[size-tLen:size-len(digest)], prefix) &
		subtle.ConstantTimeCompare(em[size-len(digest):], digest)
	for _, b := range ps {
		good &= subtle.ConstantTimeByteEq(b, 0xff)
	}
	return good == 1
}
