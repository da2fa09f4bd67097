package jwtauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

func TestKeySet(t *testing.T) {
	ec := testKey{kid: "a", private: ecPrivate()}
	file := writeJWKS(t, jwksDoc(t, ec))
	srv := newJWKSServer(t, jwksDoc(t, ec))
	sources := NewSources(t.Context(), Options{HTTPClient: srv.Client(), Logger: discardLogger(), Now: newClock().Now})

	for _, tc := range []struct {
		name string
		spec IssuerSpec
	}{
		{"file", IssuerSpec{Name: "f", Issuer: "f", JWKSFile: file}},
		{"URL", IssuerSpec{Name: "u", Issuer: "u", JWKSURL: srv.keysURL()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ks, err := sources.KeySet(t.Context(), tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			defer ks.Close()
			tests := []struct {
				name    string
				kid     string
				hasKID  bool
				alg     string
				wantErr error
			}{
				{name: "known kid", kid: "a", hasKID: true, alg: "ES256"},
				{name: "no kid", alg: "ES256"},
				{name: "unknown kid", kid: "zz", hasKID: true, alg: "ES256", wantErr: ErrUnknownKey},
				{name: "algorithm the key cannot verify", kid: "a", hasKID: true, alg: "RS256", wantErr: ErrAlgorithm},
				{name: "HMAC algorithm", kid: "a", hasKID: true, alg: "HS256", wantErr: ErrAlgorithm},
				{name: "unknown algorithm", kid: "a", hasKID: true, alg: "none", wantErr: ErrAlgorithm},
			}
			for _, k := range tests {
				ctx, cancel := context.WithTimeout(t.Context(), fetchTimeout)
				key, err := ks.Key(ctx, k.kid, k.hasKID, k.alg)
				cancel()
				if !errors.Is(err, k.wantErr) {
					t.Fatalf("%s: Key() error = %v, want %v", k.name, err, k.wantErr)
				}
				if k.wantErr == nil {
					if pub, ok := key.(*ecdsa.PublicKey); !ok || !pub.Equal(ec.public()) {
						t.Fatalf("%s: Key() = %T, want the published EC key", k.name, key)
					}
				}
			}
			if !ks.Ready() {
				t.Fatal("Ready() = false after a key was served")
			}
		})
	}
}

func TestKeySetErrors(t *testing.T) {
	sources := NewSources(t.Context(), Options{HTTPClient: http.DefaultClient, Logger: discardLogger()})
	tests := []struct {
		name    string
		spec    IssuerSpec
		wantErr string
	}{
		{"secret", IssuerSpec{Name: "s", Secret: []byte(strings.Repeat("k", 32))}, "no secret"},
		{"no source", IssuerSpec{Name: "n"}, "exactly one"},
		{"missing file", IssuerSpec{Name: "m", JWKSFile: "/nonexistent/jwks.json"}, "no such file"},
		{"file without usable key", IssuerSpec{Name: "e", JWKSFile: writeJWKS(t, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`))}, "no usable"},
		{"URL not http", IssuerSpec{Name: "x", JWKSURL: "ftp://keys.example/"}, "not an http(s) URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ks, err := sources.KeySet(t.Context(), tc.spec)
			if err == nil {
				ks.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("KeySet() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	if n := sources.Len(); n != 0 {
		t.Fatalf("%d key sources live after failed KeySet calls", n)
	}
}

// A JWK set URL configured with credentials (userinfo, a query key) never
// shows them in the logs or errors of a failing load.
func TestKeySetLogsNoCredentials(t *testing.T) {
	srv := newJWKSServer(t, []byte(`not json`))
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	sources := NewSources(t.Context(), Options{HTTPClient: srv.Client(), Logger: log, Now: newClock().Now})
	u := strings.Replace(srv.keysURL(), "http://", "http://client:pa55word@", 1) + "?api_key=pa55word"
	ks, err := sources.KeySet(t.Context(), IssuerSpec{Name: "u", Issuer: "u", JWKSURL: u})
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	if _, err := ks.Key(t.Context(), "a", true, "ES256"); !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("Key() = %v, want ErrKeysUnavailable", err)
	}
	mu.Lock()
	got := logs.String()
	mu.Unlock()
	if !strings.Contains(got, "key set load failed") {
		t.Fatalf("no failed load logged:\n%s", got)
	}
	if strings.Contains(got, "pa55word") {
		t.Fatalf("logs show a credential:\n%s", got)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestKeySetReload(t *testing.T) {
	a, b := testKey{kid: "a", private: ecPrivate()}, testKey{kid: "b", private: edPrivate()}
	file := writeJWKS(t, jwksDoc(t, a))
	sources := NewSources(t.Context(), Options{Logger: discardLogger(), Now: newClock().Now})
	ks, err := sources.KeySet(t.Context(), IssuerSpec{Name: "f", Issuer: "f", JWKSFile: file, Algorithms: []string{"ES256", "EdDSA"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	if err := os.WriteFile(file, jwksDoc(t, b), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ks.Reload(t.Context()); err != nil {
		t.Fatalf("Reload() = %v", err)
	}
	if _, err := ks.Key(t.Context(), "b", true, "EdDSA"); err != nil {
		t.Fatalf("Key(b) after Reload = %v", err)
	}
	if err := os.WriteFile(file, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := ks.Reload(t.Context()); err == nil {
		t.Fatal("Reload() of an unusable file = nil")
	}
	if _, err := ks.Key(t.Context(), "b", true, "EdDSA"); err != nil {
		t.Fatalf("Key(b) after a failed Reload = %v, want the previous keys kept", err)
	}
}

// refThumbprint is the RFC 7638 thumbprint of pub as the JWK jwkset
// publishes it: the required members, sorted by encoding/json.
func refThumbprint(t testing.TB, pub crypto.PublicKey) string {
	t.Helper()
	jwk, err := jwkset.NewJWKFromKey(pub, jwkset.JWKOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := jwk.Marshal()
	members := map[string]string{"kty": string(m.KTY)}
	switch m.KTY {
	case jwkset.KtyRSA:
		members["n"], members["e"] = m.N, m.E
	case jwkset.KtyEC:
		members["crv"], members["x"], members["y"] = string(m.CRV), m.X, m.Y
	case jwkset.KtyOKP:
		members["crv"], members["x"] = string(m.CRV), m.X
	}
	doc, err := json.Marshal(members)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(doc)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// TestKeyThumbprint: a key set key's id, which a token it verifies records
// and its removal reports, is its RFC 7638 thumbprint, published with a kid
// or without, and a token naming no kid records it too.
func TestKeyThumbprint(t *testing.T) {
	// RFC 7638, section 3.1.
	const rfcKey = `{"keys":[{"kty":"RSA","e":"AQAB","alg":"RS256","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"}]}`
	set, _, err := parseKeySet([]byte(rfcKey))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := set.all[0].id, "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"; got != want {
		t.Fatalf("RFC 7638 example: id %q, want %q", got, want)
	}

	keys := []testKey{
		{kid: "rsa", private: rsaPrivate()},
		{kid: "p256", private: ecPrivate()},
		{kid: "p384", private: ec384()},
		{kid: "", alg: "EdDSA", private: edPrivate()},
	}
	set, _, err = parseKeySet(jwksDoc(t, keys...))
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got, want := set.all[i].id, refThumbprint(t, k.public()); got != want {
			t.Errorf("key %q: id %q, want %q", k.kid, got, want)
		}
	}

	srv := newJWKSServer(t, jwksDoc(t, keyA(), keyB()))
	v := pooledVerifier(t, newPool(t, newClock(), Options{}), urlSpec(srv))
	waitReady(t, v)
	for _, tc := range []struct {
		name, token string
		key         crypto.PublicKey
	}{
		{"kid", rsToken(t, "b"), keyB().public()},
		{"no kid", sign(t, jwt.SigningMethodRS256, rsaPrivate(), nil, claimsAt(keysIss, nil)), keyB().public()},
		{"no kid, other key", sign(t, jwt.SigningMethodES256, ecPrivate(), nil, claimsAt(keysIss, nil)), keyA().public()},
	} {
		c, err := v.Verify(t.Context(), tc.token, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if want := refThumbprint(t, tc.key); c.KeyID != want {
			t.Errorf("%s: KeyID %q, want %q", tc.name, c.KeyID, want)
		}
	}
}

// TestRemovedKeys: a refresh reports a key of the old set as removed, by
// its thumbprint, when the new set lacks its material or allows it fewer
// algorithms; a kid moved to other material reports the old material.
func TestRemovedKeys(t *testing.T) {
	rsa := func(alg string) testKey { return testKey{kid: "r", alg: alg, private: rsaPrivate()} }
	ec := testKey{kid: "e", alg: "ES256", private: ecPrivate()}
	rsID, ecID := refThumbprint(t, rsaPrivate().Public()), refThumbprint(t, ecPrivate().Public())
	tests := []struct {
		name      string
		old, next []testKey
		want      []string
	}{
		{"nothing changed", []testKey{rsa(""), ec}, []testKey{rsa(""), ec}, nil},
		{"a key gone", []testKey{rsa(""), ec}, []testKey{ec}, []string{rsID}},
		{"a key without kid gone", []testKey{{alg: "ES256", private: ecPrivate()}, rsa("")}, []testKey{rsa("")}, []string{ecID}},
		{"its kid moved to other material", []testKey{rsa("")}, []testKey{{kid: "r", alg: "ES256", private: ecPrivate()}}, []string{rsID}},
		{"the same key under a new kid", []testKey{rsa("")}, []testKey{{kid: "r2", private: rsaPrivate()}}, nil},
		{"its algorithms narrowed", []testKey{rsa("")}, []testKey{rsa("PS256")}, []string{rsID}},
		{"its algorithms widened", []testKey{rsa("RS256")}, []testKey{rsa("")}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old, _, err := parseKeySet(jwksDoc(t, tc.old...))
			if err != nil {
				t.Fatal(err)
			}
			next, _, err := parseKeySet(jwksDoc(t, tc.next...))
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := removedKeys(old, next); !slices.Equal(got, tc.want) {
				t.Fatalf("removed = %v, want %v", got, tc.want)
			}
		})
	}
}
