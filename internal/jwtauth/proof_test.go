package jwtauth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// publicJWK is key's public half as JWK members.
func publicJWK(t testing.TB, key any) map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		pt, err := k.PublicKey.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		n := (len(pt) - 1) / 2
		return map[string]any{"kty": "EC", "crv": k.Curve.Params().Name, "x": b64(pt[1 : 1+n]), "y": b64(pt[1+n:])}
	case *rsa.PrivateKey:
		return map[string]any{"kty": "RSA", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	case ed25519.PrivateKey:
		return map[string]any{"kty": "OKP", "crv": "Ed25519", "x": b64(k.Public().(ed25519.PublicKey))}
	}
	t.Fatalf("no JWK for %T", key)
	return nil
}

func proofWith(t testing.TB, method jwt.SigningMethod, key any, header map[string]any, claims jwt.MapClaims) string {
	h := map[string]any{"typ": "dpop+jwt", "jwk": publicJWK(t, key)}
	for k, v := range header {
		h[k] = v
	}
	return sign(t, method, key, h, claims)
}

func TestVerifyProof(t *testing.T) {
	claims := jwt.MapClaims{"jti": "j1", "htm": "GET", "htu": "https://x/", "iat": 1_900_000_000}
	tests := []struct {
		name  string
		proof func() string
		thumb string // the key expected, "" any
		want  error
	}{
		{name: "ES256", proof: func() string { return proofWith(t, jwt.SigningMethodES256, ecPrivate(), nil, claims) }},
		{name: "EdDSA", proof: func() string { return proofWith(t, jwt.SigningMethodEdDSA, edPrivate(), nil, claims) }},
		{name: "RS256", proof: func() string { return proofWith(t, jwt.SigningMethodRS256, rsaPrivate(), nil, claims) }},
		{name: "PS256", proof: func() string { return proofWith(t, jwt.SigningMethodPS256, rsaPrivate(), nil, claims) }},
		{name: "ES256 over an RSA jwk", proof: func() string {
			return proofWith(t, jwt.SigningMethodES256, ecPrivate(), map[string]any{"jwk": publicJWK(t, rsaPrivate())}, claims)
		}, want: ErrAlgorithm},
		{name: "jwk naming another alg", proof: func() string {
			jwk := publicJWK(t, ecPrivate())
			jwk["alg"] = "ES384"
			return proofWith(t, jwt.SigningMethodES256, ecPrivate(), map[string]any{"jwk": jwk}, claims)
		}, want: ErrProofKey},
		{name: "jwk for encryption", proof: func() string {
			jwk := publicJWK(t, ecPrivate())
			jwk["use"] = "enc"
			return proofWith(t, jwt.SigningMethodES256, ecPrivate(), map[string]any{"jwk": jwk}, claims)
		}, want: ErrProofKey},
		{name: "jwk a string", proof: func() string {
			return proofWith(t, jwt.SigningMethodES256, ecPrivate(), map[string]any{"jwk": "{}"}, claims)
		}, want: ErrProofKey},
		{name: "JWK in another case", proof: func() string {
			return sign(t, jwt.SigningMethodES256, ecPrivate(), map[string]any{"typ": "dpop+jwt", "JWK": publicJWK(t, ecPrivate())}, claims)
		}, want: ErrMalformed},
		{name: "private RSA members", proof: func() string {
			jwk := publicJWK(t, rsaPrivate())
			jwk["p"] = "AQAB"
			return proofWith(t, jwt.SigningMethodRS256, rsaPrivate(), map[string]any{"jwk": jwk}, claims)
		}, want: ErrProofKey},
		{name: "a short RSA key", proof: func() string {
			k, err := rsa.GenerateKey(rand.Reader, 1024)
			if err != nil {
				t.Fatal(err)
			}
			return proofWith(t, jwt.SigningMethodRS256, k, nil, claims)
		}, want: ErrProofKey},
		// A token's owner picks its key at the authorization server, which
		// may bind it to any RSA key: a 16384-bit one costs some 6 ms a
		// verification (a 2048-bit one 30 us), on every request.
		{name: "an RSA key too large to verify cheaply", proof: func() string { return unsignedRSAProof(t, 16384, claims) },
			thumb: bigRSAThumbprint(16384), want: ErrProofKey},
		{name: "a 4096-bit RSA key is verified", proof: func() string { return unsignedRSAProof(t, 4096, claims) },
			thumb: bigRSAThumbprint(4096), want: ErrSignature},
		{name: "typ a number", proof: func() string {
			return proofWith(t, jwt.SigningMethodES256, ecPrivate(), map[string]any{"typ": 1}, claims)
		}, want: ErrType},
		{name: "the key expected", proof: func() string { return proofWith(t, jwt.SigningMethodES256, ecPrivate(), nil, claims) },
			thumb: thumbprint(&ecPrivate().PublicKey)},
		{name: "another key than expected, refused before its signature", proof: func() string {
			p := proofWith(t, jwt.SigningMethodES256, ecPrivate(), nil, claims)
			return p[:strings.LastIndexByte(p, '.')+1] + "AAAA"
		}, thumb: thumbprint(edPrivate().Public()), want: ErrOtherProofKey},
		{name: "payload not an object", proof: func() string {
			p := proofWith(t, jwt.SigningMethodES256, ecPrivate(), nil, claims)
			parts := strings.Split(p, ".")
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`[1]`)) + "." + parts[2]
		}, want: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := VerifyProof(tc.proof(), "dpop+jwt", tc.thumb)
			if !errors.Is(err, tc.want) {
				t.Fatalf("VerifyProof() = %v, want %v", err, tc.want)
			}
			if err == nil && (p.ID != "j1" || p.IssuedAt.Unix() != 1_900_000_000 || p.Thumbprint == "") {
				t.Fatalf("VerifyProof() = %+v", p)
			}
		})
	}
}

// bigRSA is an RSA public key of bits bits (not a product of primes: only
// its size matters), the same for each size.
func bigRSA(bits int) *rsa.PublicKey {
	n := new(big.Int).Lsh(big.NewInt(1), uint(bits-1))
	n.SetBit(n, 0, 1)
	return &rsa.PublicKey{N: n, E: 65537}
}

func bigRSAThumbprint(bits int) string { return thumbprint(bigRSA(bits)) }

// unsignedRSAProof is a proof carrying bigRSA(bits) with a signature of
// the right size that does not verify.
func unsignedRSAProof(t testing.TB, bits int, claims jwt.MapClaims) string {
	k := bigRSA(bits)
	b64 := base64.RawURLEncoding.EncodeToString
	jwk := map[string]any{"kty": "RSA", "n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes())}
	h, err := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "RS256", "jwk": jwk})
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, k.Size())
	sig[len(sig)-1] = 1
	return b64(h) + "." + b64(c) + "." + b64(sig)
}

// FuzzVerifyProof holds VerifyProof to golang-jwt: a proof it accepts,
// golang-jwt verifies with the key of its header, decoded by jwkset, and
// reads the same jti. It never panics, and fails only with sentinels.
func FuzzVerifyProof(f *testing.F) {
	claims := jwt.MapClaims{"jti": "j1", "iat": 1_900_000_000}
	for _, s := range []string{
		proofWith(f, jwt.SigningMethodES256, ecPrivate(), nil, claims),
		proofWith(f, jwt.SigningMethodEdDSA, edPrivate(), nil, claims),
		proofWith(f, jwt.SigningMethodES256, ecPrivate(), map[string]any{"crit": []string{"x"}}, claims),
		rawToken(`{"typ":"dpop+jwt","alg":"ES256","jwk":{"kty":"EC"}}`, `{}`, "x"),
		"", "a.b.c",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, proof string) {
		p, err := VerifyProof(proof, "dpop+jwt", "")
		if err != nil {
			for _, s := range append(sentinels, ErrProofKey, ErrOtherProofKey) {
				if errors.Is(err, s) {
					return
				}
			}
			t.Fatalf("VerifyProof() error %v is not a sentinel", err)
		}
		parsed, err := jwt.Parse(proof, func(tok *jwt.Token) (any, error) {
			raw, err := json.Marshal(tok.Header["jwk"])
			if err != nil {
				return nil, err
			}
			var m jwkset.JWKMarshal
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, err
			}
			jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
			if err != nil {
				return nil, err
			}
			return jwk.Key(), nil
		}, jwt.WithoutClaimsValidation())
		if err != nil {
			t.Fatalf("VerifyProof accepted %q, golang-jwt refuses it: %v", proof, err)
		}
		if jti, _ := parsed.Claims.(jwt.MapClaims)["jti"].(string); jti != p.ID {
			t.Fatalf("jti %q, golang-jwt reads %q", p.ID, jti)
		}
	})
}
