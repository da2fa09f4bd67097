package jwtauth

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
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

// FuzzVerifyDifferential holds Verify to the reference verifier
// (reference_test.go: golang-jwt and encoding/json): for a header and a
// payload signed with the test HMAC secret or EC key (mode 0 and 1), or
// for the header taken as a whole token (mode 2), both must agree on
// acceptance and, when they accept, on every claim.
func FuzzVerifyDifferential(f *testing.F) {
	clk := newClock()
	v := newVerifier(f, clk, testSpecs(f)...)
	exp, iat := t0.Add(time.Hour).Unix(), t0.Add(-time.Minute).Unix()
	claims := func(extra string) string {
		return fmt.Sprintf(`{"iss":%q,"sub":"alice","exp":%d,"iat":%d%s}`, hmacIss, exp, iat, extra)
	}
	hs := `{"alg":"HS256","typ":"JWT"}`
	for _, seed := range []struct {
		header, payload string
		mode            uint8
	}{
		{hs, claims(""), 0},
		{hs, claims(`,"aud":["a","b"],"scope":"read write","n":1.5e3,"act":{"sub":"x","act":{"sub":"y"}}`), 0},
		{hs, claims(`,"sub":"mallory"`), 0},
		{`{"alg":"HS256","alg":"none"}`, claims(""), 0},
		{hs, claims(`,"big":1e400`), 0},
		{hs, claims(`,"s\u0075b":"x"`), 0},
		{hs, claims(`,"em\u0061il":"a@example.com","t\u00e9nant":"x","scp":["a"]`), 0},
		{hs, `{"iss":"\u0068ttps://hmac.example","sub":"\u00e9\ud83d\ude00","exp":` + fmt.Sprint(exp) + `}`, 0},
		{hs, claims(`,"aud":[1]`), 0},
		{hs, claims(`,"x":"\ud800"`), 0},
		{hs, `null`, 0},
		{`{"alg":"ES256","kid":"ec-1"}`, strings.Replace(claims(""), hmacIss, keysIss, 1), 1},
		{`{"alg":"ES256","kid":"ec-1","crit":["exp"]}`, strings.Replace(claims(""), hmacIss, keysIss, 1), 1},
		{"eyJhbGciOiJIUzI1NiJ9.e30.\nAAAA", "", 2},
	} {
		f.Add(seed.header, seed.payload, seed.mode)
	}
	ec := ecPrivate()
	f.Fuzz(func(t *testing.T, header, payload string, mode uint8) {
		enc := base64.RawURLEncoding
		input := enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload))
		var token string
		switch mode % 3 {
		case 0:
			m := hmac.New(sha256.New, hmacSecret)
			m.Write([]byte(input))
			token = input + "." + enc.EncodeToString(m.Sum(nil))
		case 1:
			sig, err := jwt.SigningMethodES256.Sign(input, ec)
			if err != nil {
				t.Fatal(err)
			}
			token = input + "." + enc.EncodeToString(sig)
		default:
			token = header
		}
		compareWithReference(t, v, token)
	})
}
