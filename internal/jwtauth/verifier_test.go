package jwtauth

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/golden"
)

const (
	hmacIss  = "https://hmac.example"
	otherIss = "https://other.example"
	typedIss = "https://typed.example"
	hs512Iss = "https://hs512.example"
	keysIss  = "https://keys.example"
)

// testKeys are published by the "keys" issuer in every verification test.
func testKeys() []testKey {
	return []testKey{
		{kid: "rsa-1", private: rsaPrivate()},
		{kid: "rsa-pinned", alg: "RS256", private: rsaOther()},
		{kid: "ec-1", alg: "ES256", private: ecPrivate()},
		{kid: "ec384-1", private: ec384()},
		{kid: "ed-1", alg: "EdDSA", private: edPrivate()},
	}
}

// testSpecs are the issuers of the verification table. The key set issuer
// reads a file, so the table needs no network.
func testSpecs(t testing.TB) []IssuerSpec {
	return []IssuerSpec{
		{Name: "hmac", Issuer: hmacIss, Secret: hmacSecret, Leeway: 30 * time.Second},
		{Name: "hmac-other", Issuer: otherIss, Secret: hmacSecret},
		{Name: "typed", Issuer: typedIss, Secret: hmacSecret, Type: "at+jwt"},
		{Name: "hs512", Issuer: hs512Iss, Secret: hmacSecret, Algorithms: []string{"HS384", "HS512"}},
		{
			Name: "keys", Issuer: keysIss, JWKSFile: writeJWKS(t, jwksDoc(t, testKeys()...)),
			Algorithms: []string{"RS256", "PS256", "ES256", "ES384", "EdDSA"},
		},
	}
}

// rawToken assembles a token from a literal header and payload.
func rawToken(header, payload, sig string) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(header)) + "." + enc.EncodeToString([]byte(payload)) + "." + sig
}

func TestVerify(t *testing.T) {
	clk := newClock()
	v := newVerifier(t, clk, testSpecs(t)...)
	if !v.Ready() {
		t.Fatal("a verifier whose key sets are HMAC secrets and files is not ready after New")
	}

	der, err := x509.MarshalPKIXPublicKey(rsaPrivate().Public())
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	hs := func(iss string, extra jwt.MapClaims) string {
		return sign(t, jwt.SigningMethodHS256, hmacSecret, nil, claimsAt(iss, extra))
	}
	withKID := func(kid string) map[string]any { return map[string]any{"kid": kid} }
	valid := hs(hmacIss, nil)
	parts := strings.Split(valid, ".")
	otherPayload := strings.Split(hs(hmacIss, jwt.MapClaims{"sub": "mallory"}), ".")[1]

	tests := []struct {
		name      string
		token     string
		allowed   []string
		audiences []string
		wantErr   error
		wantIss   string // IssuerName on success
	}{
		// Valid tokens, one per algorithm family and key shape.
		{name: "HS256", token: valid, wantIss: "hmac"},
		{name: "HS512", token: sign(t, jwt.SigningMethodHS512, hmacSecret, nil, claimsAt(hs512Iss, nil)), wantIss: "hs512"},
		{name: "RS256", token: sign(t, jwt.SigningMethodRS256, rsaPrivate(), withKID("rsa-1"), claimsAt(keysIss, nil)), wantIss: "keys"},
		{name: "PS256", token: sign(t, jwt.SigningMethodPS256, rsaPrivate(), withKID("rsa-1"), claimsAt(keysIss, nil)), wantIss: "keys"},
		{name: "ES256", token: sign(t, jwt.SigningMethodES256, ecPrivate(), withKID("ec-1"), claimsAt(keysIss, nil)), wantIss: "keys"},
		{name: "ES384", token: sign(t, jwt.SigningMethodES384, ec384(), withKID("ec384-1"), claimsAt(keysIss, nil)), wantIss: "keys"},
		{name: "EdDSA", token: sign(t, jwt.SigningMethodEdDSA, edPrivate(), withKID("ed-1"), claimsAt(keysIss, nil)), wantIss: "keys"},
		{name: "no kid tries every key of the algorithm", token: sign(t, jwt.SigningMethodRS256, rsaOther(), nil, claimsAt(keysIss, nil)), wantIss: "keys"},
		{name: "expired within leeway", token: hs(hmacIss, jwt.MapClaims{"exp": t0.Add(-10 * time.Second).Unix()}), wantIss: "hmac"},
		{name: "iat ahead within leeway", token: hs(hmacIss, jwt.MapClaims{"iat": t0.Add(10 * time.Second).Unix()}), wantIss: "hmac"},
		{name: "nbf ahead within leeway", token: hs(hmacIss, jwt.MapClaims{"nbf": t0.Add(10 * time.Second).Unix()}), wantIss: "hmac"},
		{name: "typ with media type prefix, any case", token: sign(t, jwt.SigningMethodHS256, hmacSecret, map[string]any{"typ": "application/AT+JWT"}, claimsAt(typedIss, nil)), wantIss: "typed"},
		{name: "aud any of", token: hs(hmacIss, jwt.MapClaims{"aud": []string{"x", "api"}}), audiences: []string{"other", "api"}, wantIss: "hmac"},
		{name: "aud as a string", token: hs(hmacIss, jwt.MapClaims{"aud": "api"}), audiences: []string{"api"}, wantIss: "hmac"},
		{name: "route names the issuer", token: valid, allowed: []string{"hmac-other", "hmac"}, wantIss: "hmac"},

		// Algorithm attacks.
		{name: "alg none", token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, nil, claimsAt(hmacIss, nil)), wantErr: ErrAlgorithm},
		{name: "alg none for a key set issuer", token: sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, withKID("rsa-1"), claimsAt(keysIss, nil)), wantErr: ErrAlgorithm},
		{name: "HS256 keyed with the RSA public key PEM", token: sign(t, jwt.SigningMethodHS256, pemKey, withKID("rsa-1"), claimsAt(keysIss, nil)), wantErr: ErrAlgorithm},
		{name: "HS256 keyed with the RSA public key DER", token: sign(t, jwt.SigningMethodHS256, der, withKID("rsa-1"), claimsAt(keysIss, nil)), wantErr: ErrAlgorithm},
		{name: "RS256 for an HMAC issuer", token: sign(t, jwt.SigningMethodRS256, rsaPrivate(), nil, claimsAt(hmacIss, nil)), wantErr: ErrAlgorithm},
		{name: "algorithm outside the allow-list", token: sign(t, jwt.SigningMethodHS384, hmacSecret, nil, claimsAt(hmacIss, nil)), wantErr: ErrAlgorithm},
		{name: "unknown algorithm", token: rawToken(`{"alg":"XX256","typ":"JWT"}`, `{"iss":"`+hmacIss+`"}`, "c2ln"), wantErr: ErrAlgorithm},
		{name: "missing algorithm", token: rawToken(`{"typ":"JWT"}`, `{"iss":"`+hmacIss+`"}`, "c2ln"), wantErr: ErrMalformed},
		{name: "JWK pins RS256, token says PS256", token: sign(t, jwt.SigningMethodPS256, rsaOther(), withKID("rsa-pinned"), claimsAt(keysIss, nil)), wantErr: ErrAlgorithm},
		{name: "ES256 naming an RSA key", token: sign(t, jwt.SigningMethodES256, ecPrivate(), withKID("rsa-1"), claimsAt(keysIss, nil)), wantErr: ErrAlgorithm},
		{name: "ES256 naming a P-384 key", token: sign(t, jwt.SigningMethodES256, ecPrivate(), withKID("ec384-1"), claimsAt(keysIss, nil)), wantErr: ErrAlgorithm},

		// Keys and signatures.
		{name: "unknown kid", token: sign(t, jwt.SigningMethodRS256, rsaPrivate(), withKID("nope"), claimsAt(keysIss, nil)), wantErr: ErrUnknownKey},
		{name: "kid not a string", token: sign(t, jwt.SigningMethodRS256, rsaPrivate(), map[string]any{"kid": 7}, claimsAt(keysIss, nil)), wantErr: ErrMalformed},
		{name: "crit header", token: sign(t, jwt.SigningMethodHS256, hmacSecret, map[string]any{"crit": []string{"exp"}}, claimsAt(hmacIss, nil)), wantErr: ErrMalformed},
		{name: "signed with another secret", token: sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-another"), nil, claimsAt(hmacIss, nil)), wantErr: ErrSignature},
		{name: "payload swapped", token: parts[0] + "." + otherPayload + "." + parts[2], wantErr: ErrSignature},
		{name: "RS256 signed by another key", token: sign(t, jwt.SigningMethodRS256, rsaOther(), withKID("rsa-1"), claimsAt(keysIss, nil)), wantErr: ErrSignature},
		{name: "empty signature", token: parts[0] + "." + parts[1] + ".", wantErr: ErrSignature},

		// Shape.
		{name: "empty", token: "", wantErr: ErrMalformed},
		{name: "two segments", token: parts[0] + "." + parts[1], wantErr: ErrMalformed},
		{name: "truncated", token: valid[:len(parts[0])+5], wantErr: ErrMalformed},
		{name: "100 KB", token: valid + strings.Repeat("A", 100<<10), wantErr: ErrMalformed},
		{name: "non-JSON payload", token: rawToken(`{"alg":"HS256"}`, `not json`, parts[2]), wantErr: ErrMalformed},
		{name: "non-JSON header", token: rawToken(`{alg`, `{}`, parts[2]), wantErr: ErrMalformed},
		{name: "not base64", token: "a$b.c$d.e$f", wantErr: ErrMalformed},

		// Claims.
		{name: "expired", token: hs(hmacIss, jwt.MapClaims{"exp": t0.Add(-time.Hour).Unix()}), wantErr: ErrExpired},
		{name: "expired exactly at leeway", token: hs(hmacIss, jwt.MapClaims{"exp": t0.Add(-30 * time.Second).Unix()}), wantErr: ErrExpired},
		{name: "nbf in the future", token: hs(hmacIss, jwt.MapClaims{"nbf": t0.Add(time.Hour).Unix()}), wantErr: ErrNotYetValid},
		{name: "iat in the future", token: hs(hmacIss, jwt.MapClaims{"iat": t0.Add(time.Hour).Unix()}), wantErr: ErrIssuedInFuture},
		{name: "missing exp", token: hs(hmacIss, jwt.MapClaims{"exp": nil}), wantErr: ErrMissingClaim},
		{name: "exp not a number", token: hs(hmacIss, jwt.MapClaims{"exp": "tomorrow"}), wantErr: ErrMalformed},
		{name: "exp beyond year 9999", token: hs(hmacIss, jwt.MapClaims{"exp": 1e300}), wantErr: ErrMalformed},
		{name: "nbf negative", token: hs(hmacIss, jwt.MapClaims{"nbf": -1e300}), wantErr: ErrMalformed},
		{name: "sub not a string", token: hs(hmacIss, jwt.MapClaims{"sub": 42}), wantErr: ErrMalformed},
		{name: "wrong iss", token: hs("https://evil.example", nil), wantErr: ErrUnknownIssuer},
		{name: "missing iss", token: hs(hmacIss, jwt.MapClaims{"iss": nil}), wantErr: ErrMissingClaim},
		{name: "iss not a string", token: hs(hmacIss, jwt.MapClaims{"iss": 1}), wantErr: ErrMalformed},
		{name: "issuer not allowed on route", token: valid, allowed: []string{"hmac-other"}, wantErr: ErrIssuer},
		{name: "wrong aud", token: hs(hmacIss, jwt.MapClaims{"aud": "elsewhere"}), audiences: []string{"api"}, wantErr: ErrAudience},
		{name: "missing aud", token: valid, audiences: []string{"api"}, wantErr: ErrAudience},
		{name: "aud not strings", token: hs(hmacIss, jwt.MapClaims{"aud": []any{1}}), audiences: []string{"api"}, wantErr: ErrMalformed},
		{name: "wrong typ", token: sign(t, jwt.SigningMethodHS256, hmacSecret, map[string]any{"typ": "JWT"}, claimsAt(typedIss, nil)), wantErr: ErrType},
		{name: "missing typ", token: sign(t, jwt.SigningMethodHS256, hmacSecret, map[string]any{"typ": nil}, claimsAt(typedIss, nil)), wantErr: ErrType},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := v.Verify(context.Background(), tc.token, tc.allowed, tc.audiences)
			if tc.wantErr != nil {
				// Identity, not errors.Is: the sentinel itself is what a
				// client may see, with nothing wrapped around it.
				if err != tc.wantErr {
					t.Fatalf("Verify() error = %v, want %v", err, tc.wantErr)
				}
				if got != nil {
					t.Fatalf("Verify() returned claims with error %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Verify() error = %v", err)
			}
			if got.IssuerName != tc.wantIss || got.Subject != "alice" || claim(got, "sub") != "alice" {
				t.Fatalf("Verify() = issuer %q subject %q raw sub %v, want issuer %q subject alice", got.IssuerName, got.Subject, claim(got, "sub"), tc.wantIss)
			}
		})
	}
}

func TestVerifyClaims(t *testing.T) {
	clk := newClock()
	v := newVerifier(t, clk, IssuerSpec{Name: "hmac", Issuer: hmacIss, Secret: hmacSecret})
	tok := sign(t, jwt.SigningMethodHS256, hmacSecret, nil, jwt.MapClaims{
		"iss": hmacIss, "sub": "alice", "jti": "id-1", "aud": []string{"a", "b"},
		"exp": t0.Add(time.Hour).Unix(), "nbf": t0.Add(-time.Hour).Unix(), "iat": float64(t0.Add(-time.Minute).Unix()) + 0.5,
		"session_id": "s-1", "n": 1234567,
	})
	got, err := v.Verify(context.Background(), tok, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := Claims{
		IssuerName: "hmac", Issuer: hmacIss, Subject: "alice", ID: "id-1", Audience: []string{"a", "b"},
		ExpiresAt: t0.Add(time.Hour), NotBefore: t0.Add(-time.Hour), IssuedAt: t0.Add(-time.Minute + 500*time.Millisecond),
	}
	if got.IssuerName != want.IssuerName || got.Issuer != want.Issuer || got.Subject != want.Subject || got.ID != want.ID ||
		strings.Join(got.Audience, ",") != "a,b" || !got.ExpiresAt.Equal(want.ExpiresAt) ||
		!got.NotBefore.Equal(want.NotBefore) || !got.IssuedAt.Equal(want.IssuedAt) {
		t.Errorf("Verify() = %+v, want %+v", *got, want)
	}
	if claim(got, "session_id") != "s-1" || claim(got, "n") != float64(1234567) {
		t.Errorf("All() = %v, want session_id and n as decoded", got.All())
	}

	clk.Advance(time.Hour)
	if _, err := v.Verify(context.Background(), tok, nil, nil); err != ErrExpired {
		t.Errorf("Verify() at exp = %v, want ErrExpired", err)
	}
}

func TestIssuerSelection(t *testing.T) {
	secretA := []byte(strings.Repeat("a", 32))
	secretB := []byte(strings.Repeat("b", 32))
	secretDev := []byte(strings.Repeat("d", 32))
	clk := newClock()
	v := newVerifier(t, clk,
		IssuerSpec{Name: "dev", Secret: secretDev}, // catch-all, listed first on purpose
		IssuerSpec{Name: "a", Issuer: hmacIss, Secret: secretA},
		IssuerSpec{Name: "b", Issuer: hmacIss, Secret: secretB},
	)
	tests := []struct {
		name    string
		secret  []byte
		claims  jwt.MapClaims
		allowed []string
		want    string
		wantErr error
	}{
		{name: "exact match before catch-all", secret: secretA, claims: claimsAt(hmacIss, nil), want: "a"},
		{name: "first of two exact matches", secret: secretB, claims: claimsAt(hmacIss, nil), wantErr: ErrSignature},
		{name: "route narrows to the second exact match", secret: secretB, claims: claimsAt(hmacIss, nil), allowed: []string{"b"}, want: "b"},
		{name: "catch-all when the exact ones are not allowed", secret: secretDev, claims: claimsAt(hmacIss, nil), allowed: []string{"dev"}, want: "dev"},
		{name: "catch-all takes unknown iss", secret: secretDev, claims: claimsAt("https://anything.example", nil), want: "dev"},
		{name: "catch-all takes a token without iss", secret: secretDev, claims: claimsAt("", jwt.MapClaims{"iss": nil}), want: "dev"},
		{name: "nothing allowed matches", secret: secretA, claims: claimsAt(hmacIss, nil), allowed: []string{"elsewhere"}, wantErr: ErrIssuer},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := sign(t, jwt.SigningMethodHS256, tc.secret, nil, tc.claims)
			got, err := v.Verify(context.Background(), tok, tc.allowed, nil)
			if err != tc.wantErr {
				t.Fatalf("Verify() error = %v, want %v", err, tc.wantErr)
			}
			if err == nil && got.IssuerName != tc.want {
				t.Fatalf("Verify() issuer = %q, want %q", got.IssuerName, tc.want)
			}
		})
	}
}

func TestNewRejectsInvalidSpecs(t *testing.T) {
	file := writeJWKS(t, jwksDoc(t, testKey{kid: "k", private: ecPrivate()}))
	tests := []struct {
		name  string
		specs []IssuerSpec
		want  string // in the error
	}{
		{name: "no issuers", specs: nil, want: "no issuers"},
		{name: "no name", specs: []IssuerSpec{{Issuer: hmacIss, Secret: hmacSecret}}, want: "name is required"},
		{name: "duplicate name", specs: []IssuerSpec{{Name: "x", Secret: hmacSecret}, {Name: "x", Secret: hmacSecret}}, want: `"x": name is used twice`},
		{name: "no key source", specs: []IssuerSpec{{Name: "x", Issuer: hmacIss}}, want: `"x": exactly one`},
		{name: "two key sources", specs: []IssuerSpec{{Name: "x", Secret: hmacSecret, JWKSFile: file}}, want: `"x": exactly one`},
		{name: "none", specs: []IssuerSpec{{Name: "x", Secret: hmacSecret, Algorithms: []string{"none"}}}, want: `"x": algorithm "none" is not supported`},
		{name: "unknown algorithm", specs: []IssuerSpec{{Name: "x", JWKSFile: file, Algorithms: []string{"RS1"}}}, want: `"x": algorithm "RS1"`},
		{name: "HMAC algorithm for a key set", specs: []IssuerSpec{{Name: "x", JWKSFile: file, Algorithms: []string{"RS256", "HS256"}}}, want: `"x": algorithm HS256 needs a secret`},
		{name: "asymmetric algorithm for a secret", specs: []IssuerSpec{{Name: "x", Secret: hmacSecret, Algorithms: []string{"RS256"}}}, want: `"x": algorithm RS256 needs a key set`},
		{name: "short secret", specs: []IssuerSpec{{Name: "x", Secret: []byte("short")}}, want: `"x": secret is 5 bytes`},
		{name: "negative leeway", specs: []IssuerSpec{{Name: "x", Secret: hmacSecret, Leeway: -time.Second}}, want: `"x": leeway`},
		{name: "negative refresh", specs: []IssuerSpec{{Name: "x", JWKSFile: file, RefreshInterval: -time.Second}}, want: `"x": refresh`},
		{name: "JWKS URL not http", specs: []IssuerSpec{{Name: "x", JWKSURL: "file:///keys"}}, want: `"x": JWKS URL`},
		{name: "JWKS URL without host", specs: []IssuerSpec{{Name: "x", JWKSURL: "https:///keys"}}, want: `"x": JWKS URL`},
		{name: "discovery without issuer", specs: []IssuerSpec{{Name: "x", Discovery: true}}, want: `"x": discovery needs`},
		{name: "discovery issuer not a URL", specs: []IssuerSpec{{Name: "x", Discovery: true, Issuer: "acme"}}, want: `"x": discovery: issuer`},
		{name: "every problem reported", specs: []IssuerSpec{{Name: "x"}, {Name: "y", Secret: []byte("s")}}, want: `"y": secret`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, err := New(context.Background(), tc.specs, Options{})
			if err == nil {
				v.Close()
				t.Fatalf("New() succeeded, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New() error = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestSignHMAC(t *testing.T) {
	clk := newClock()
	v := newVerifier(t, clk, IssuerSpec{Name: "hmac", Issuer: hmacIss, Secret: hmacSecret, Algorithms: []string{"HS256", "HS384", "HS512"}})
	for _, alg := range []string{"HS256", "HS384", "HS512"} {
		t.Run(alg, func(t *testing.T) {
			tok, err := SignHMAC(alg, hmacSecret, claimsAt(hmacIss, nil))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v.Verify(context.Background(), tok, nil, nil); err != nil {
				t.Fatalf("Verify(SignHMAC(%s)) = %v", alg, err)
			}
		})
	}
	for _, tc := range []struct {
		name, alg string
		secret    []byte
	}{
		{name: "asymmetric", alg: "RS256", secret: hmacSecret},
		{name: "none", alg: "none", secret: hmacSecret},
		{name: "short secret", alg: "HS256", secret: []byte("short")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := SignHMAC(tc.alg, tc.secret, claimsAt(hmacIss, nil)); err == nil {
				t.Fatal("SignHMAC() succeeded, want error")
			}
		})
	}
}

// TestErrorTexts pins what a client can be shown: every sentinel's text,
// compared to a golden file.
func TestErrorTexts(t *testing.T) {
	sentinels := []struct {
		name string
		err  error
	}{
		{"ErrMalformed", ErrMalformed}, {"ErrUnknownIssuer", ErrUnknownIssuer}, {"ErrIssuer", ErrIssuer},
		{"ErrAlgorithm", ErrAlgorithm}, {"ErrUnknownKey", ErrUnknownKey}, {"ErrSignature", ErrSignature},
		{"ErrExpired", ErrExpired}, {"ErrNotYetValid", ErrNotYetValid}, {"ErrIssuedInFuture", ErrIssuedInFuture},
		{"ErrAudience", ErrAudience}, {"ErrType", ErrType}, {"ErrMissingClaim", ErrMissingClaim},
		{"ErrKeysUnavailable", ErrKeysUnavailable},
	}
	var b strings.Builder
	for _, s := range sentinels {
		fmt.Fprintf(&b, "%s: %s\n", s.name, s.err)
		for _, other := range sentinels {
			if other.name != s.name && errors.Is(s.err, other.err) {
				t.Errorf("%s matches %s", s.name, other.name)
			}
		}
	}
	golden.Check(t, filepath.Join("testdata", "error_texts.golden"), []byte(b.String()))
}

// claim is c.Claim(name)'s value, nil when absent.
func claim(c *Claims, name string) any {
	v, _ := c.Claim(name)
	return v
}

// TestClaimStringsOutliveLaterVerifications: the strings read from a
// verified token's claims are its payload's own bytes (no copy): they must
// stay what they were while other tokens, of other users, are verified
// (nothing of a payload is pooled or reused), including a claim with an
// escape (decoded into memory of its own) and a payload too large for the
// Claims' inline buffer.
func TestClaimStringsOutliveLaterVerifications(t *testing.T) {
	clk := newClock()
	v := newVerifier(t, clk, IssuerSpec{Name: "hmac", Issuer: hmacIss, Secret: hmacSecret})
	mint := func(user string, pad int) string {
		return sign(t, jwt.SigningMethodHS256, hmacSecret, nil, jwt.MapClaims{
			"iss": hmacIss, "sub": user, "exp": t0.Add(time.Hour).Unix(), "jti": "jti-" + user,
			"email": user + "@example.com", "quoted": `say "` + user + `"`, "pad": strings.Repeat("p", pad),
		})
	}
	type read struct{ sub, jti, email, quoted, boxed string }
	readAll := func(c *Claims) read {
		email, _ := c.ClaimString("email")
		quoted, _ := c.ClaimString("quoted")
		boxed, _ := c.Claim("email")
		return read{c.Subject, c.ID, email, quoted, boxed.(string)}
	}
	for _, pad := range []int{0, 2000} {
		first, err := v.Verify(context.Background(), mint("alice", pad), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := read{"alice", "jti-alice", "alice@example.com", `say "alice"`, "alice@example.com"}
		got := readAll(first)
		for i := range 50 {
			if _, err := v.Verify(context.Background(), mint(fmt.Sprintf("mallory%02d", i), pad), nil, nil); err != nil {
				t.Fatal(err)
			}
		}
		if got != want || readAll(first) != want {
			t.Fatalf("pad %d: first token's claims read %+v, then %+v, want %+v", pad, got, readAll(first), want)
		}
	}
}
