package jwtauth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rsa"
	"hash"
	"strings"
	"sync"
)

// The JWS compact serialization is read here without golang-jwt: the
// token is split in place, its header decoded into the four members the
// verifier reads, the signature checked with pooled hashers, and the
// payload validated once and kept for on-demand reads (claims.go). A cache
// miss then costs a handful of allocations beyond the signature's own
// arithmetic.

// splitToken splits a compact JWS into its three segments. Every byte must
// be of the base64url alphabet or one of exactly two dots: the base64
// decoder would skip CR and LF, which would give one signed token several
// spellings. A token longer than MaxTokenSize is not one.
func splitToken(token string) (header, payload, sig string, ok bool) {
	if len(token) > MaxTokenSize {
		return "", "", "", false
	}
	// One pass without branches, four bytes at a time on independent
	// sums: each sum counts dots and gains badByte for any byte outside
	// the alphabet. A token is at most MaxTokenSize bytes, so dots never
	// add up to badByte and the sums cannot wrap.
	var s0, s1, s2, s3 uint32
	i := 0
	for ; i+4 <= len(token); i += 4 {
		b := token[i : i+4]
		s0 += tokenBytes[b[0]]
		s1 += tokenBytes[b[1]]
		s2 += tokenBytes[b[2]]
		s3 += tokenBytes[b[3]]
	}
	for ; i < len(token); i++ {
		s0 += tokenBytes[token[i]]
	}
	if s0+s1+s2+s3 != 2 {
		return "", "", "", false
	}
	h := strings.IndexByte(token, '.')
	p := h + 1 + strings.IndexByte(token[h+1:], '.')
	return token[:h], token[h+1 : p], token[p+1:], true
}

// badByte is what a byte outside the base64url alphabet and the dot adds
// to splitToken's sum: more than any count of dots in a token.
const badByte = MaxTokenSize + 1

// tokenBytes classifies the bytes of a compact JWS for splitToken: 0 for
// the base64url alphabet (no padding), 1 for a dot, badByte for the rest.
var tokenBytes = func() (t [256]uint32) {
	for c := range t {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		case c == '.':
			t[c] = 1
		default:
			t[c] = badByte
		}
	}
	return t
}()

// scratch is one verification's reusable memory (pooled): the header and
// signature are decoded into it, and the signing input is copied into it
// for the primitives that take bytes.
type scratch struct {
	in  []byte // the signing input, for primitives that take bytes
	out []byte // decoded header, then signature
	sum [64]byte
	der [2*(2+1+66) + 3]byte // an ECDSA signature in ASN.1, P-521 at most

	objects objectReader
	// members indexes the header: in headerInline, or in the largest
	// array a header of more members needed, kept for the next one.
	members      []member
	headerInline [8]member
}

var scratches = sync.Pool{New: func() any {
	s := new(scratch)
	s.members = s.headerInline[:0]
	return s
}}

// decode decodes seg into s.out after what it holds; the result stays
// valid until the scratch goes back to the pool.
func (s *scratch) decode(seg string) ([]byte, bool) {
	start := len(s.out)
	need := start + decodedLen(len(seg))
	if cap(s.out) < need {
		// Earlier results stay valid: they keep the old array.
		s.out = make([]byte, start, max(need, 2*cap(s.out)))
	}
	n, ok := decodeSegment(s.out[start:need], seg)
	if !ok {
		return nil, false
	}
	s.out = s.out[:start+n]
	return s.out[start : start+n : start+n], true
}

// bytesOf copies str into s.in, for primitives that take a []byte.
func (s *scratch) bytesOf(str string) []byte {
	s.in = append(s.in[:0], str...)
	return s.in
}

// open splits a compact JWS (splitToken) and reads its header into h; the
// payload and signature segments are the caller's to decode.
func (s *scratch) open(token string) (h joseHeader, payloadSeg, sigSeg string, err error) {
	headerSeg, payloadSeg, sigSeg, ok := splitToken(token)
	if !ok {
		return h, "", "", ErrMalformed
	}
	headerDoc, ok := s.decode(headerSeg)
	if !ok {
		return h, "", "", ErrMalformed
	}
	h, err = s.parseHeader(headerDoc)
	return h, payloadSeg, sigSeg, err
}

// payload decodes a payload segment into c and validates and indexes it
// (parsePayload). The payload outlives the call (Claims reads it on
// demand): it is decoded into memory of its own.
func (s *scratch) payload(c *Claims, seg string) (payloadClaims, error) {
	payload := make([]byte, decodedLen(len(seg)))
	n, ok := decodeSegment(payload, seg)
	if !ok {
		return payloadClaims{}, ErrMalformed
	}
	return parsePayload(&s.objects, c, payload[:n:n])
}

// joseHeader holds the raw values of the header members the verifier
// reads; nil when absent.
type joseHeader struct {
	alg, kid, typ []byte
	// jwk is the key a proof carries (VerifyProof); an access token's is
	// never read: its keys are its issuer's.
	jwk  []byte
	crit bool
}

// parseHeader validates a JOSE header (one JSON object, no member twice:
// RFC 7515 section 4 asks to refuse or to take the last, and parsers
// disagree, so it is refused) and picks out its members.
func (s *scratch) parseHeader(doc []byte) (joseHeader, error) {
	var h joseHeader
	members, err := readObject(&s.objects, doc, s.members[:0], headerMembers, func(m member, name []byte) bool {
		v := m.value(doc)
		switch string(name) {
		case "alg":
			h.alg = v
		case "kid":
			h.kid = v
		case "typ":
			h.typ = v
		case "jwk":
			h.jwk = v
		case "crit":
			h.crit = true
		default:
			return false
		}
		return true
	})
	if cap(members) > cap(s.members) {
		s.members = members[:0]
	}
	return h, err
}

// headerMembers are the header members the verifier reads.
var headerMembers = newFoldSet("alg", "kid", "typ", "jwk", "crit")

// hashIndex numbers the hashes JWS algorithms use, for the pools.
func hashIndex(h crypto.Hash) int {
	switch h {
	case crypto.SHA384:
		return 1
	case crypto.SHA512:
		return 2
	}
	return 0
}

// digester is a pooled hash with room to feed it a string without
// converting it: hash.Hash has no WriteString.
type digester struct {
	h   hash.Hash
	buf [512]byte
}

func (d *digester) writeString(s string) {
	for len(s) > 0 {
		n := copy(d.buf[:], s)
		d.h.Write(d.buf[:n])
		s = s[n:]
	}
}

// hashPools hold SHA-256, -384 and -512 digesters (by hashIndex).
var hashPools [3]sync.Pool

func init() {
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512} {
		hashPools[hashIndex(h)].New = func() any { return &digester{h: h.New()} }
	}
}

// digest hashes input with h into s.sum.
func (s *scratch) digest(h crypto.Hash, input string) []byte {
	return s.sumPooled(&hashPools[hashIndex(h)], input)
}

// sumPooled hashes input into s.sum with a digester from pool.
func (s *scratch) sumPooled(pool *sync.Pool, input string) []byte {
	d := pool.Get().(*digester)
	d.h.Reset()
	d.writeString(input)
	sum := d.h.Sum(s.sum[:0])
	pool.Put(d)
	return sum
}

// hmacPools are an HMAC issuer's keyed hashers, one pool per hash: keying
// an HMAC costs two block computations and four allocations, and a
// Reset hasher starts from the keyed state.
type hmacPools [3]sync.Pool

func newHMACPools(secret []byte) *hmacPools {
	p := new(hmacPools)
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512} {
		p[hashIndex(h)].New = func() any { return &digester{h: hmac.New(h.New, secret)} }
	}
	return p
}

// verifyHMAC checks an HS* signature in constant time.
func (s *scratch) verifyHMAC(p *hmacPools, h crypto.Hash, input string, sig []byte) bool {
	return hmac.Equal(s.sumPooled(&p[hashIndex(h)], input), sig)
}

// pssVerify is what golang-jwt accepts for PS*: any salt length, since
// some signers do not use the hash length RFC 7518 asks for.
var pssVerify = &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthAuto}

// verifyWith checks sig over input with one public key of alg's family.
// digest is input hashed with alg's hash (unused for EdDSA).
func (s *scratch) verifyWith(alg *algorithm, k *verificationKey, input string, digest, sig []byte) bool {
	switch alg.family {
	case familyRSA:
		pub, ok := k.key.(*rsa.PublicKey)
		if !ok {
			return false
		}
		switch {
		case alg.pss:
			return rsa.VerifyPSS(pub, alg.hash, digest, sig, pssVerify) == nil
		case k.rsa != nil:
			return k.rsa.verifyPKCS1v15(alg.hash, digest, sig)
		}
		return rsa.VerifyPKCS1v15(pub, alg.hash, digest, sig) == nil
	case familyEC:
		pub, ok := k.key.(*ecdsa.PublicKey)
		if !ok || pub.Curve != alg.curve {
			return false
		}
		size := (alg.curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return false
		}
		der, ok := appendASN1Signature(s.der[:0], sig[:size], sig[size:])
		return ok && ecdsa.VerifyASN1(pub, digest, der)
	case familyEdDSA:
		pub, ok := k.key.(ed25519.PublicKey)
		if !ok || len(pub) != ed25519.PublicKeySize {
			return false
		}
		return ed25519.Verify(pub, s.bytesOf(input), sig)
	}
	return false
}

// appendASN1Signature encodes the JWS form of an ECDSA signature (r and s
// as fixed-size big-endian integers, RFC 7518 section 3.4) as the ASN.1
// SEQUENCE crypto/ecdsa verifies, exactly as ecdsa.Verify does with
// big.Ints: ok is false when r or s is zero.
func appendASN1Signature(dst, r, s []byte) ([]byte, bool) {
	r, s = bytes.TrimLeft(r, "\x00"), bytes.TrimLeft(s, "\x00")
	if len(r) == 0 || len(s) == 0 || len(r) > 100 || len(s) > 100 {
		return nil, false
	}
	intLen := func(x []byte) int {
		if x[0]&0x80 != 0 {
			return len(x) + 1
		}
		return len(x)
	}
	body := 2 + intLen(r) + 2 + intLen(s)
	dst = append(dst, 0x30)
	if body >= 0x80 {
		dst = append(dst, 0x81)
	}
	dst = append(dst, byte(body))
	for _, x := range [][]byte{r, s} {
		dst = append(dst, 0x02, byte(intLen(x)))
		if x[0]&0x80 != 0 {
			dst = append(dst, 0)
		}
		dst = append(dst, x...)
	}
	return dst, true
}
