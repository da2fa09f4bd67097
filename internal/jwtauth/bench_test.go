package jwtauth

import (
	"context"
	"fmt"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

// BenchmarkVerify measures a full verification, as on every cache miss, per
// algorithm family. Key sets come from a file, so no network is involved.
func BenchmarkVerify(b *testing.B) {
	v := newVerifier(b, newClock(), testSpecs(b)...)
	aud := []string{"api"}
	extra := jwt.MapClaims{"aud": "api", "session_id": "s-1", "scope": "read write"}
	tokens := []struct {
		name  string
		token string
	}{
		{"HS256", sign(b, jwt.SigningMethodHS256, hmacSecret, nil, claimsAt(hmacIss, extra))},
		{"RS256", sign(b, jwt.SigningMethodRS256, rsaPrivate(), map[string]any{"kid": "rsa-1"}, claimsAt(keysIss, extra))},
		{"ES256", sign(b, jwt.SigningMethodES256, ecPrivate(), map[string]any{"kid": "ec-1"}, claimsAt(keysIss, extra))},
		{"EdDSA", sign(b, jwt.SigningMethodEdDSA, edPrivate(), map[string]any{"kid": "ed-1"}, claimsAt(keysIss, extra))},
	}
	ctx := context.Background()
	for _, tc := range tokens {
		b.Run(tc.name, func(b *testing.B) {
			if _, err := v.Verify(ctx, tc.token, nil, aud); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tc.token, nil, aud); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkVerifyReject measures cheap rejections: what a flood of junk or
// foreign tokens costs.
func BenchmarkVerifyReject(b *testing.B) {
	v := newVerifier(b, newClock(), testSpecs(b)...)
	tokens := []struct {
		name  string
		token string
		want  error
	}{
		{"malformed", "not-a-token", ErrMalformed},
		{"unknown issuer", sign(b, jwt.SigningMethodHS256, hmacSecret, nil, claimsAt("https://evil.example", nil)), ErrUnknownIssuer},
		{"bad HS256 signature", sign(b, jwt.SigningMethodHS256, []byte("another-secret-another-secret-another"), nil, claimsAt(hmacIss, nil)), ErrSignature},
	}
	ctx := context.Background()
	for _, tc := range tokens {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := v.Verify(ctx, tc.token, nil, nil); err != tc.want {
					b.Fatalf("Verify() = %v, want %v", err, tc.want)
				}
			}
		})
	}
}

// BenchmarkVerifyFresh measures what a cache miss costs: every call
// verifies a token the loop has not verified in the last 999 calls
// (distinct sub, session and jti), with the claims a typical access token
// carries, so that neither the CPU's caches nor any memo of a previous
// token flatter the number.
func BenchmarkVerifyFresh(b *testing.B) {
	v := newVerifier(b, newClock(), testSpecs(b)...)
	aud := []string{"api"}
	const n = 1000
	tokens := make([]string, n)
	for i := range tokens {
		tokens[i] = sign(b, jwt.SigningMethodHS256, hmacSecret, nil, claimsAt(hmacIss, jwt.MapClaims{
			"sub":        fmt.Sprintf("user-%06d", i),
			"session_id": fmt.Sprintf("sess-%08x", i*7919),
			"jti":        fmt.Sprintf("%016x", i*104729),
			"aud":        "api",
			"scope":      "openid profile read:tools write:tools",
			"client_id":  "mcp-gateway",
			"tenant":     "acme",
		}))
	}
	ctx := context.Background()
	for _, tok := range tokens {
		if _, err := v.Verify(ctx, tok, nil, aud); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := v.Verify(ctx, tokens[i], nil, aud); err != nil {
			b.Fatal(err)
		}
		if i++; i == n {
			i = 0
		}
	}
}
