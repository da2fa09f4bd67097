package jwtauth

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"math/big"
	"testing"
)

// TestAppendASN1Signature holds the ASN.1 form of a JWS ECDSA signature to
// ecdsa.Verify with big integers, what golang-jwt does: same answer for
// valid signatures, tampered ones, and r or s with leading zero bytes, a
// high bit set, zero, or the group order.
func TestAppendASN1Signature(t *testing.T) {
	for _, alg := range []string{"ES256", "ES384", "ES512"} {
		a := algorithmsByName[alg]
		key, err := ecdsa.GenerateKey(a.curve, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		size := (a.curve.Params().BitSize + 7) / 8
		digest := sha256.Sum256([]byte(alg))
		r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		valid := make([]byte, 2*size)
		r.FillBytes(valid[:size])
		s.FillBytes(valid[size:])
		order := a.curve.Params().N.FillBytes(make([]byte, size))
		cases := map[string][]byte{"valid": valid}
		flip := append([]byte(nil), valid...)
		flip[size+3] ^= 1
		cases["tampered"] = flip
		zeroR := append(make([]byte, size), valid[size:]...)
		cases["r zero"] = zeroR
		small := append(append(make([]byte, size-1), 1), valid[size:]...)
		cases["r one, leading zeros"] = small
		high := append([]byte(nil), valid...)
		high[0] |= 0x80
		cases["r with the high bit"] = high
		cases["s the group order"] = append(append([]byte(nil), valid[:size]...), order...)
		for i := range 50 {
			random := make([]byte, 2*size)
			_, _ = rand.Read(random)
			random[0], random[size] = byte(i), byte(i*5)
			cases["random "+string(rune('a'+i%26))+string(rune('a'+i/26))] = random
		}
		var sc scratch
		for name, sig := range cases {
			want := ecdsa.Verify(&key.PublicKey, digest[:], new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:]))
			got := sc.verifyWith(a, &verificationKey{key: &key.PublicKey}, "", digest[:], sig)
			if got != want {
				t.Errorf("%s %s: verifyWith = %v, ecdsa.Verify = %v", alg, name, got, want)
			}
			if name == "valid" && !got {
				t.Errorf("%s: a valid signature does not verify", alg)
			}
		}
	}
}
