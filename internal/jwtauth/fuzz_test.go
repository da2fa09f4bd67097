package jwtauth

import (
	"context"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var sentinels = []error{
	ErrMalformed, ErrUnknownIssuer, ErrIssuer, ErrAlgorithm, ErrUnknownKey, ErrSignature, ErrExpired,
	ErrNotYetValid, ErrIssuedInFuture, ErrAudience, ErrType, ErrMissingClaim, ErrKeysUnavailable,
}

// FuzzVerify feeds arbitrary strings to Verify: it must not panic, must
// return claims exactly when it returns no error, and must only ever return
// the package's sentinels.
func FuzzVerify(f *testing.F) {
	clk := newClock()
	v := newVerifier(f, clk, testSpecs(f)...)
	seeds := []string{
		"",
		"a.b.c",
		"..",
		sign(f, jwt.SigningMethodHS256, hmacSecret, nil, claimsAt(hmacIss, nil)),
		sign(f, jwt.SigningMethodHS256, hmacSecret, nil, claimsAt(hmacIss, jwt.MapClaims{"aud": []any{"x", 1}, "exp": "soon"})),
		sign(f, jwt.SigningMethodHS256, hmacSecret, map[string]any{"crit": []string{"b64"}, "typ": 3}, claimsAt(typedIss, nil)),
		sign(f, jwt.SigningMethodES256, ecPrivate(), map[string]any{"kid": "ec-1"}, claimsAt(keysIss, nil)),
		sign(f, jwt.SigningMethodEdDSA, edPrivate(), map[string]any{"kid": []any{"ed-1"}}, claimsAt(keysIss, nil)),
		sign(f, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil, claimsAt(hmacIss, nil)),
		rawToken(`{"alg":"HS256"}`, `[]`, "x"),
		rawToken(`{"alg":"RS256","kid":"rsa-1"}`, `{"iss":"`+keysIss+`","exp":1e400}`, ""),
		rawToken(`null`, `null`, ""),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		claims, err := v.Verify(ctx, token, nil, nil)
		if (err == nil) != (claims != nil) {
			t.Fatalf("Verify() = %v, %v: claims must come exactly without error", claims, err)
		}
		if err == nil {
			if claims.ExpiresAt.IsZero() || claims.IssuerName == "" {
				t.Fatalf("Verify() accepted claims %+v without exp or issuer", claims)
			}
			return
		}
		for _, s := range sentinels {
			if err == s {
				return
			}
		}
		t.Fatalf("Verify() returned a non-sentinel error %q", err)
	})
}

// FuzzParseKeySet feeds arbitrary documents to the JWK set parser, which
// reads what a remote endpoint serves.
func FuzzParseKeySet(f *testing.F) {
	f.Add(jwksDoc(f, testKeys()...))
	f.Add([]byte(`{"keys":[{"kty":"RSA","n":"AQAB","e":"AQAB","alg":"RS256"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"EC","crv":"P-256","x":"","y":""},{"kty":"OKP","crv":"X25519","x":"AAAA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0","use":"sig"}]}`))
	f.Add([]byte(`{"keys":null}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		set, _, err := parseKeySet(doc)
		if err != nil {
			return
		}
		if set.size() == 0 {
			t.Fatal("parseKeySet() returned an empty set without error")
		}
		for _, k := range set.all {
			if k.algs == 0 || k.key == nil {
				t.Fatalf("parseKeySet() kept an unusable key %+v", k)
			}
			for _, a := range supportedAlgorithms {
				if k.algs&a.bit != 0 && a.family == familyHMAC {
					t.Fatal("parseKeySet() kept a key for an HMAC algorithm")
				}
			}
		}
	})
}
