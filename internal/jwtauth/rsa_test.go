package jwtauth

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// rsaFixture is a 2048-bit key prepared for the fast path, with raw
// signing: sigOf(em) is em^d mod n, so that a test can sign any encoding,
// well formed or not, and see what each verifier makes of it.
type rsaFixture struct {
	priv *rsa.PrivateKey
	mod  *rsaModulus
}

var rsaFix = sync.OnceValue(func() rsaFixture {
	priv := rsaPrivate()
	return rsaFixture{priv: priv, mod: newRSAModulus(&priv.PublicKey)}
})

// sigOf is the signature whose public-key operation gives em, padded to
// the modulus's length as RFC 8017 asks.
func (f rsaFixture) sigOf(em []byte) []byte {
	s := new(big.Int).Exp(new(big.Int).SetBytes(em), f.priv.D, f.priv.N)
	return s.FillBytes(make([]byte, f.priv.Size()))
}

// rs256 is the fixture's RS256 signature over a fixed signing input, with
// the input's digest.
func (f rsaFixture) rs256(tb testing.TB) (digest, sig []byte) {
	d := sha256.Sum256([]byte("header.payload"))
	sig, err := rsa.SignPKCS1v15(rand.Reader, f.priv, crypto.SHA256, d[:])
	if err != nil {
		tb.Fatal(err)
	}
	return d[:], sig
}

// encoding is EMSA-PKCS1-v1_5 with its parts given: block type, padding
// length, separator, DigestInfo prefix, digest and anything after it,
// sized to k bytes by the padding unless pad says otherwise.
func encoding(k int, bt byte, pad int, sep byte, prefix, digest, tail []byte) []byte {
	if pad < 0 {
		pad = k - 3 - len(prefix) - len(digest) - len(tail)
	}
	em := []byte{0, bt}
	em = append(em, bytes.Repeat([]byte{0xff}, pad)...)
	em = append(em, sep)
	em = append(em, prefix...)
	em = append(em, digest...)
	return append(em, tail...)
}

func stdlibVerifies(pub *rsa.PublicKey, h crypto.Hash, digest, sig []byte) bool {
	return rsa.VerifyPKCS1v15(pub, h, digest, sig) == nil
}

// TestRSAPKCS1v15Encodings signs, raw, each way an encoding can be wrong
// (the forgeries lenient PKCS #1 parsers have accepted: garbage after the
// digest, short padding, a DigestInfo without its NULL, another hash's
// prefix) and each way the signature's bytes can be: only the one correct
// encoding verifies, by the fast path and by crypto/rsa alike.
func TestRSAPKCS1v15Encodings(t *testing.T) {
	f := rsaFix()
	if f.mod == nil {
		t.Fatal("a 2048-bit key with e = 65537 was not prepared")
	}
	k := f.priv.Size()
	d256 := sha256.Sum256([]byte("header.payload"))
	d := d256[:]
	p := sha256DigestInfo
	noNull := append(append([]byte{0x30, 0x2f}, p[2:13]...), 0x04, 0x20) // parameters omitted
	valid := f.sigOf(encoding(k, 1, -1, 0, p, d, nil))
	n := f.priv.N.FillBytes(make([]byte, k))
	tests := []struct {
		name string
		hash crypto.Hash
		sig  []byte
		want bool
	}{
		{"valid", crypto.SHA256, valid, true},
		{"block type 2", crypto.SHA256, f.sigOf(encoding(k, 2, -1, 0, p, d, nil)), false},
		{"leading byte not zero", crypto.SHA256, f.sigOf(append([]byte{1}, encoding(k, 1, -1, 0, p, d, nil)[1:]...)), false},
		{"separator not zero", crypto.SHA256, f.sigOf(encoding(k, 1, -1, 0xff, p, d, nil)), false},
		{"zero inside the padding", crypto.SHA256, f.sigOf(func() []byte {
			em := encoding(k, 1, -1, 0, p, d, nil)
			em[40] = 0
			return em
		}()), false},
		{"garbage after the digest", crypto.SHA256, f.sigOf(encoding(k, 1, -1, 0, p, d, bytes.Repeat([]byte{0x5a}, 64))), false},
		{"padding of seven bytes", crypto.SHA256, f.sigOf(encoding(k, 1, 7, 0, p, d, make([]byte, k-3-7-len(p)-len(d)))), false},
		{"DigestInfo without NULL", crypto.SHA256, f.sigOf(encoding(k, 1, -1, 0, noNull, d, nil)), false},
		{"SHA-512 prefix for SHA-256", crypto.SHA256, f.sigOf(encoding(k, 1, -1, 0, sha512DigestInfo[:len(sha512DigestInfo)-1], append([]byte{0x20}, d...), nil)), false},
		{"another digest", crypto.SHA256, f.sigOf(encoding(k, 1, -1, 0, p, bytes.Repeat([]byte{1}, 32), nil)), false},
		{"no DigestInfo", crypto.SHA256, f.sigOf(encoding(k, 1, -1, 0, nil, d, nil)), false},
		{"SHA-256 signature checked as SHA-384", crypto.SHA384, valid, false},
		{"one byte short", crypto.SHA256, valid[1:], false},
		{"one byte long", crypto.SHA256, append([]byte{0}, valid...), false},
		{"the modulus", crypto.SHA256, n, false},
		{"the signature plus the modulus", crypto.SHA256, new(big.Int).Add(new(big.Int).SetBytes(valid), f.priv.N).FillBytes(make([]byte, k+1))[1:], false},
		{"zero", crypto.SHA256, make([]byte, k), false},
		{"one", crypto.SHA256, append(make([]byte, k-1), 1), false},
		{"all ones", crypto.SHA256, bytes.Repeat([]byte{0xff}, k), false},
		{"empty", crypto.SHA256, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			digest := d
			if tc.hash == crypto.SHA384 {
				s := sha512.Sum384([]byte("header.payload"))
				digest = s[:]
			}
			std := stdlibVerifies(&f.priv.PublicKey, tc.hash, digest, tc.sig)
			got := f.mod.verifyPKCS1v15(tc.hash, digest, tc.sig)
			if got != std || got != tc.want {
				t.Errorf("verifyPKCS1v15 = %v, crypto/rsa = %v, want %v", got, std, tc.want)
			}
		})
	}
}

// TestRSAPKCS1v15Hashes verifies real signatures of every RS* hash and
// refuses each under the others.
func TestRSAPKCS1v15Hashes(t *testing.T) {
	f := rsaFix()
	msg := []byte("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9")
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512} {
		hh := h.New()
		hh.Write(msg)
		digest := hh.Sum(nil)
		sig, err := rsa.SignPKCS1v15(rand.Reader, f.priv, h, digest)
		if err != nil {
			t.Fatal(err)
		}
		for _, as := range []crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512} {
			d := digest
			if as != h {
				d = make([]byte, as.Size())
				copy(d, digest)
			}
			if got, want := f.mod.verifyPKCS1v15(as, d, sig), as == h; got != want {
				t.Errorf("%v signature checked as %v: %v, want %v", h, as, got, want)
			}
		}
		if f.mod.verifyPKCS1v15(crypto.SHA1, digest[:20], sig) {
			t.Errorf("%v signature verified as SHA-1", h)
		}
	}
}

// TestNewRSAModulus leaves to crypto/rsa every key it would refuse, so
// that the fast path never accepts what crypto/rsa would not.
func TestNewRSAModulus(t *testing.T) {
	pub := rsaPrivate().PublicKey
	with := func(edit func(k *rsa.PublicKey)) *rsa.PublicKey {
		k := &rsa.PublicKey{N: new(big.Int).Set(pub.N), E: pub.E}
		edit(k)
		return k
	}
	tests := []struct {
		name     string
		key      *rsa.PublicKey
		prepared bool
	}{
		{"2048 bits, e = 65537", &pub, true},
		{"e = 3", with(func(k *rsa.PublicKey) { k.E = 3 }), true},
		{"even modulus", with(func(k *rsa.PublicKey) { k.N.SetBit(k.N, 0, 0) }), false},
		{"e = 1", with(func(k *rsa.PublicKey) { k.E = 1 }), false},
		{"even e", with(func(k *rsa.PublicKey) { k.E = 65536 }), false},
		{"e beyond 2^31-1", with(func(k *rsa.PublicKey) { k.E = 1 << 31 }), false},
		{"1024 bits", &rsa.PublicKey{N: new(big.Int).Rsh(pub.N, 1024), E: 65537}, false},
		{"no modulus", &rsa.PublicKey{E: 65537}, false},
	}
	for _, tc := range tests {
		if got := newRSAModulus(tc.key) != nil; got != tc.prepared {
			t.Errorf("%s: prepared %v, want %v", tc.name, got, tc.prepared)
		}
	}
}

// FuzzRSAPKCS1v15 holds the fast path to crypto/rsa: the fuzzer edits a
// correct encoding (XOR masks at chosen places), signs the result raw and
// both must agree; raw signature bytes are tried as they come too.
func FuzzRSAPKCS1v15(f *testing.F) {
	f.Add([]byte("header.payload"), uint8(0), []byte{}, []byte{})
	f.Add([]byte("header.payload"), uint8(0), []byte{2, 0x03}, []byte{})
	f.Add([]byte("header.payload"), uint8(1), []byte{200, 0xff}, []byte{})
	f.Add([]byte("x"), uint8(2), []byte{255, 0x01, 10, 0x80}, []byte{})
	f.Add([]byte("x"), uint8(0), []byte{}, []byte{0, 1, 2})
	fx := rsaFix()
	hashes := []crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512}
	f.Fuzz(func(t *testing.T, msg []byte, which uint8, edits, raw []byte) {
		h := hashes[int(which)%len(hashes)]
		hh := h.New()
		hh.Write(msg)
		digest := hh.Sum(nil)
		prefix, _ := digestInfoPrefix(h)
		k := fx.priv.Size()
		em := encoding(k, 1, -1, 0, prefix, digest, nil)
		for i := 0; i+1 < len(edits); i += 2 {
			em[int(edits[i])*k/256] ^= edits[i+1]
		}
		sigs := [][]byte{raw}
		if new(big.Int).SetBytes(em).Cmp(fx.priv.N) < 0 {
			sigs = append(sigs, fx.sigOf(em))
		}
		for _, sig := range sigs {
			std := stdlibVerifies(&fx.priv.PublicKey, h, digest, sig)
			if got := fx.mod.verifyPKCS1v15(h, digest, sig); got != std {
				t.Fatalf("verifyPKCS1v15 = %v, crypto/rsa = %v for %x", got, std, sig)
			}
		}
	})
}

// BenchmarkRSAVerify is one RS256 signature check, digest given, by
// crypto/rsa and by a prepared key: what preparing the modulus once saves.
func BenchmarkRSAVerify(b *testing.B) {
	f := rsaFix()
	digest, sig := f.rs256(b)
	b.Run("crypto-rsa", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !stdlibVerifies(&f.priv.PublicKey, crypto.SHA256, digest, sig) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("prepared", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !f.mod.verifyPKCS1v15(crypto.SHA256, digest, sig) {
				b.Fatal("refused")
			}
		}
	})
}

// TestVerifyPreparedRSA verifies RS256, RS384 and RS512 tokens through a
// key set, whose RSA keys are prepared when it is read, and refuses each
// with its signature's last byte changed; PS256 stays with crypto/rsa.
func TestVerifyPreparedRSA(t *testing.T) {
	doc := jwksDoc(t, testKey{kid: "rsa-1", private: rsaPrivate()})
	set, _, err := parseKeySet(doc)
	if err != nil {
		t.Fatal(err)
	}
	if set.all[0].rsa == nil {
		t.Fatal("the key set's RSA key was not prepared")
	}
	v := newVerifier(t, newClock(), IssuerSpec{
		Name: "keys", Issuer: keysIss, JWKSFile: writeJWKS(t, doc),
		Algorithms: []string{"RS256", "RS384", "RS512", "PS256"},
	})
	ctx := context.Background()
	for _, m := range []jwt.SigningMethod{jwt.SigningMethodRS256, jwt.SigningMethodRS384, jwt.SigningMethodRS512, jwt.SigningMethodPS256} {
		tok := sign(t, m, rsaPrivate(), map[string]any{"kid": "rsa-1"}, claimsAt(keysIss, nil))
		if _, err := v.Verify(ctx, tok, nil, nil); err != nil {
			t.Errorf("%s: %v", m.Alg(), err)
		}
		sig, err := base64.RawURLEncoding.DecodeString(tok[strings.LastIndexByte(tok, '.')+1:])
		if err != nil {
			t.Fatal(err)
		}
		sig[len(sig)-1] ^= 1
		forged := tok[:strings.LastIndexByte(tok, '.')+1] + base64.RawURLEncoding.EncodeToString(sig)
		if _, err := v.Verify(ctx, forged, nil, nil); !errors.Is(err, ErrSignature) {
			t.Errorf("%s with a changed signature: %v, want %v", m.Alg(), err, ErrSignature)
		}
	}
}

// TestRSAKeySizes holds the fast path to crypto/rsa on moduli whose length
// is not a whole number of bytes (2,049 bits: the encoding's first byte
// carries a single bit of the modulus) and on larger ones.
func TestRSAKeySizes(t *testing.T) {
	for _, bits := range []int{2049, 2056, 3072} {
		priv, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			t.Fatal(err)
		}
		mod := newRSAModulus(&priv.PublicKey)
		if mod == nil {
			t.Fatalf("%d bits: not prepared", bits)
		}
		digest := sha256.Sum256([]byte("header.payload"))
		sig, err := rsa.SignPKCS1v15(rand.Reader, priv, crypto.SHA256, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		sigs := map[string][]byte{"valid": sig}
		for i := range 20 {
			s := bytes.Clone(sig)
			s[i*len(s)/20] ^= 1 << (i % 8)
			sigs["flipped "+string(rune('a'+i))] = s
		}
		random := make([]byte, len(sig))
		_, _ = rand.Read(random)
		random[0] = 0
		sigs["random"] = random
		for name, s := range sigs {
			std := stdlibVerifies(&priv.PublicKey, crypto.SHA256, digest[:], s)
			if got := mod.verifyPKCS1v15(crypto.SHA256, digest[:], s); got != std || got != (name == "valid") {
				t.Errorf("%d bits, %s: verifyPKCS1v15 = %v, crypto/rsa = %v", bits, name, got, std)
			}
		}
	}
}

// TestVerifyAllocationsRS256 bounds an RS256 verification the same way,
// plus the one allocation of the prepared RSA check (its result): crypto/rsa
// would add nine, rebuilding the key on every call.
func TestVerifyAllocationsRS256(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	token := sign(t, jwt.SigningMethodRS256, rsaPrivate(), map[string]any{"kid": "rsa-1"}, claimsAt(keysIss, jwt.MapClaims{"aud": "api"}))
	if n := verifyAllocs(t, token, "api"); n > 3 {
		t.Errorf("Verify() allocates %v times, want at most 3", n)
	}
}

// TestPreparedRSAConcurrent verifies with one prepared key from several
// goroutines at once (under the race detector in CI): the modulus is
// shared by every check of its key and must only ever be read.
func TestPreparedRSAConcurrent(t *testing.T) {
	f := rsaFix()
	digest, sig := f.rs256(t)
	forged := bytes.Clone(sig)
	forged[len(forged)/2] ^= 1
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				s, want := sig, true
				if (g+i)%2 == 1 {
					s, want = forged, false
				}
				if got := f.mod.verifyPKCS1v15(crypto.SHA256, digest, s); got != want {
					errs <- "a check answered another's signature"
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}
