package jwtauth

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
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
