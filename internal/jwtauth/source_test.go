package jwtauth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const kidInterval = 30 * time.Second

func keyA() testKey { return testKey{kid: "a", alg: "ES256", private: ecPrivate()} }
func keyB() testKey { return testKey{kid: "b", private: rsaPrivate()} }

// esToken and rsToken are valid tokens for keysIss signed by keyA and keyB.
func esToken(t testing.TB, kid string) string {
	return sign(t, jwt.SigningMethodES256, ecPrivate(), map[string]any{"kid": kid}, claimsAt(keysIss, nil))
}

func rsToken(t testing.TB, kid string) string {
	return sign(t, jwt.SigningMethodRS256, rsaPrivate(), map[string]any{"kid": kid}, claimsAt(keysIss, nil))
}

func urlSpec(srv *jwksServer) IssuerSpec {
	return IssuerSpec{Name: "keys", Issuer: keysIss, JWKSURL: srv.keysURL(), UnknownKIDInterval: kidInterval}
}

func verify(v *Verifier, tok string) error {
	_, err := v.Verify(context.Background(), tok, nil, nil)
	return err
}

func TestJWKSURL(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA(), keyB()))
	v := newVerifier(t, newClock(), urlSpec(srv))
	waitReady(t, v)
	for name, tok := range map[string]string{"ES256": esToken(t, "a"), "RS256": rsToken(t, "b")} {
		if err := verify(v, tok); err != nil {
			t.Errorf("%s: Verify() = %v", name, err)
		}
	}
}

func TestJWKSFile(t *testing.T) {
	path := writeJWKS(t, jwksDoc(t, keyA()))
	clk := newClock()
	v := newVerifier(t, clk, IssuerSpec{Name: "keys", Issuer: keysIss, JWKSFile: path, UnknownKIDInterval: kidInterval})
	if !v.Ready() {
		t.Fatal("Ready() = false right after New with a readable JWKS file")
	}
	if err := verify(v, esToken(t, "a")); err != nil {
		t.Fatalf("Verify() = %v", err)
	}
	// A rotated file is picked up by the first token naming the new key.
	if err := os.WriteFile(path, jwksDoc(t, keyA(), keyB()), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := verify(v, rsToken(t, "b")); err != nil {
		t.Fatalf("Verify() after rotation = %v", err)
	}
}

func TestJWKSFileMissing(t *testing.T) {
	v := newVerifier(t, newClock(), IssuerSpec{Name: "keys", Issuer: keysIss, JWKSFile: t.TempDir() + "/absent.json"})
	if v.Ready() {
		t.Fatal("Ready() = true with a missing JWKS file")
	}
	if err := verify(v, esToken(t, "a")); err != ErrKeysUnavailable {
		t.Fatalf("Verify() = %v, want ErrKeysUnavailable", err)
	}
}

func TestDiscovery(t *testing.T) {
	tests := []struct {
		name     string
		path     string // issuer path
		metadata func(srv *jwksServer, issuer string)
		wantOK   bool
	}{
		{
			name: "openid-configuration",
			metadata: func(srv *jwksServer, issuer string) {
				srv.serveMetadata(t, "/.well-known/openid-configuration", issuer)
			},
			wantOK: true,
		},
		{
			name: "openid-configuration under an issuer path",
			path: "/realms/a",
			metadata: func(srv *jwksServer, issuer string) {
				srv.serveMetadata(t, "/realms/a/.well-known/openid-configuration", issuer)
			},
			wantOK: true,
		},
		{
			name: "RFC 8414 fallback with path insertion",
			path: "/tenant",
			metadata: func(srv *jwksServer, issuer string) {
				srv.serveMetadata(t, "/.well-known/oauth-authorization-server/tenant", issuer)
			},
			wantOK: true,
		},
		{
			name: "metadata naming another issuer",
			metadata: func(srv *jwksServer, issuer string) {
				srv.serveMetadata(t, "/.well-known/openid-configuration", "https://impostor.example")
			},
		},
		{
			name:     "no metadata",
			metadata: func(*jwksServer, string) {},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newJWKSServer(t, jwksDoc(t, keyA()))
			issuer := srv.URL + tc.path
			tc.metadata(srv, issuer)
			v := newVerifier(t, newClock(), IssuerSpec{Name: "oidc", Issuer: issuer, Discovery: true})
			tok := sign(t, jwt.SigningMethodES256, ecPrivate(), map[string]any{"kid": "a"}, claimsAt(issuer, nil))
			if !tc.wantOK {
				// The verify-triggered load fails like the background one.
				if err := verify(v, tok); err != ErrKeysUnavailable {
					t.Fatalf("Verify() = %v, want ErrKeysUnavailable", err)
				}
				if v.Ready() {
					t.Fatal("Ready() = true without a key set")
				}
				return
			}
			waitReady(t, v)
			if err := verify(v, tok); err != nil {
				t.Fatalf("Verify() = %v", err)
			}
		})
	}
}

// TestUnknownKIDFlood sends 100 tokens with random kids at once: they must
// cost one refetch, not 100.
func TestUnknownKIDFlood(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA()))
	v := newVerifier(t, newClock(), urlSpec(srv))
	waitReady(t, v)
	if got := srv.hits.Load(); got != 1 {
		t.Fatalf("JWKS fetched %d times by the initial load, want 1", got)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for range 100 {
		kid := make([]byte, 8)
		_, _ = rand.Read(kid)
		tok := esToken(t, hex.EncodeToString(kid))
		wg.Go(func() { errs <- verify(v, tok) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != ErrUnknownKey {
			t.Fatalf("Verify(random kid) = %v, want ErrUnknownKey", err)
		}
	}
	if got := srv.hits.Load(); got != 2 {
		t.Fatalf("JWKS fetched %d times, want 2 (initial load and one refetch)", got)
	}
	// Known keys are unaffected.
	if err := verify(v, esToken(t, "a")); err != nil {
		t.Fatalf("Verify(known kid) = %v", err)
	}
}

// TestRotationAfterInterval: a key published after a refetch was spent is
// found by the first token naming it once the interval has passed.
func TestRotationAfterInterval(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA()))
	clk := newClock()
	v := newVerifier(t, clk, urlSpec(srv))
	waitReady(t, v)

	steps := []struct {
		name     string
		rotate   bool
		advance  time.Duration
		wantErr  error
		wantHits int64
	}{
		{name: "not yet published: refetch spent", wantErr: ErrUnknownKey, wantHits: 2},
		{name: "published, within the interval", rotate: true, wantErr: ErrUnknownKey, wantHits: 2},
		{name: "just short of the interval", advance: kidInterval - time.Second, wantErr: ErrUnknownKey, wantHits: 2},
		{name: "interval passed", advance: time.Second, wantHits: 3},
		{name: "now known, no fetch", wantHits: 3},
	}
	for _, s := range steps {
		if s.rotate {
			srv.setDoc(jwksDoc(t, keyA(), keyB()))
		}
		clk.Advance(s.advance)
		if err := verify(v, rsToken(t, "b")); err != s.wantErr {
			t.Fatalf("%s: Verify() = %v, want %v", s.name, err, s.wantErr)
		}
		if got := srv.hits.Load(); got != s.wantHits {
			t.Fatalf("%s: JWKS fetched %d times, want %d", s.name, got, s.wantHits)
		}
	}
}

// TestLastGoodKeySet: while the endpoint fails or publishes garbage, the
// last good key set keeps serving.
func TestLastGoodKeySet(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA()))
	clk := newClock()
	v := newVerifier(t, clk, urlSpec(srv))
	waitReady(t, v)

	breakages := []struct {
		name  string
		apply func()
	}{
		{name: "500", apply: func() { srv.status.Store(http.StatusInternalServerError) }},
		{name: "not JSON", apply: func() { srv.status.Store(0); srv.setDoc([]byte("<html>")) }},
		{name: "no usable key", apply: func() { srv.setDoc([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`)) }},
		{name: "empty set", apply: func() { srv.setDoc([]byte(`{"keys":[]}`)) }},
		{name: "oversized", apply: func() { srv.setDoc([]byte(`{"keys":[],"x":"` + strings.Repeat("x", maxDocumentSize) + `"}`)) }},
	}
	for _, b := range breakages {
		t.Run(b.name, func(t *testing.T) {
			b.apply()
			clk.Advance(kidInterval)
			before := srv.hits.Load()
			// An unknown kid forces a refetch, which fails.
			if err := verify(v, esToken(t, "unknown")); err != ErrUnknownKey {
				t.Fatalf("Verify(unknown kid) = %v, want ErrUnknownKey", err)
			}
			if srv.hits.Load() != before+1 {
				t.Fatal("unknown kid did not refetch")
			}
			if err := verify(v, esToken(t, "a")); err != nil {
				t.Fatalf("Verify(known kid) = %v, want the last good set to serve", err)
			}
			if !v.Ready() {
				t.Fatal("Ready() = false after having loaded once")
			}
		})
	}
}

// TestKeysUnavailable covers the never-loaded state and the Ready
// transition when the endpoint recovers.
func TestKeysUnavailable(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA()))
	srv.status.Store(http.StatusServiceUnavailable)
	clk := newClock()
	v := newVerifier(t, clk, urlSpec(srv), IssuerSpec{Name: "hmac", Issuer: hmacIss, Secret: hmacSecret})

	if v.Ready() {
		t.Fatal("Ready() = true before the key set loaded")
	}
	err := verify(v, esToken(t, "a"))
	if !errors.Is(err, ErrKeysUnavailable) {
		t.Fatalf("Verify() = %v, want ErrKeysUnavailable", err)
	}
	// HMAC issuers are unaffected by another issuer's outage.
	if err := verify(v, sign(t, jwt.SigningMethodHS256, hmacSecret, nil, claimsAt(hmacIss, nil))); err != nil {
		t.Fatalf("Verify(HMAC) = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := v.waitReady(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("waitReady(cancelled) = %v, want context.Canceled", err)
	}

	srv.status.Store(0)
	clk.Advance(kidInterval)
	if err := verify(v, esToken(t, "a")); err != nil {
		t.Fatalf("Verify() after recovery = %v", err)
	}
	if !v.Ready() {
		t.Fatal("Ready() = false after the key set loaded")
	}
}

// TestNewDoesNotBlock: New returns while the JWKS endpoint hangs, and
// Verify waits for a refetch no longer than its context.
func TestNewDoesNotBlock(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	v, err := New(context.Background(), []IssuerSpec{{Name: "keys", Issuer: keysIss, JWKSURL: srv.URL}}, Options{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close() // must cancel the hanging fetches and return
	if v.Ready() {
		t.Fatal("Ready() = true while the endpoint hangs")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := v.Verify(ctx, esToken(t, "a"), nil, nil); err != ErrKeysUnavailable {
		t.Fatalf("Verify() = %v, want ErrKeysUnavailable", err)
	}
}

// TestBackgroundRefresh drives a key source's loop directly with a fake
// fetch: failures are retried, and a refresh swaps in a rotated set.
func TestBackgroundRefresh(t *testing.T) {
	docs := [][]byte{nil, nil, jwksDoc(t, keyA()), jwksDoc(t, keyB())} // nil: fail
	calls, proceed := make(chan int), make(chan struct{})
	var (
		mu sync.Mutex
		n  int
	)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	s := &keySource{
		issuerName:         "keys",
		location:           "test",
		refreshInterval:    time.Millisecond,
		unknownKIDInterval: kidInterval,
		now:                newClock().Now,
		log:                discardLogger(),
		loaded:             make(chan struct{}),
		lifetime:           ctx,
		wg:                 &wg,
		fetch: func(ctx context.Context) ([]byte, error) {
			mu.Lock()
			i := n
			n++
			mu.Unlock()
			// Report the call, then wait for the test to let it proceed, so
			// the test sees exactly the results of the calls before it.
			select {
			case calls <- i:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			select {
			case <-proceed:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			doc := docs[min(i, len(docs)-1)]
			if doc == nil {
				return nil, errors.New("unavailable")
			}
			return doc, nil
		},
	}
	wg.Go(s.run)
	defer func() { cancel(); wg.Wait() }()

	// Each call waits for proceed, so when call i reports, calls 0..i-1
	// have finished and nothing else is running.
	for want := 0; want <= 4; want++ {
		select {
		case got := <-calls:
			if got != want {
				t.Fatalf("fetch call %d, want %d", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("fetch call %d never came", want)
		}
		switch want {
		case 2:
			if s.current() != nil {
				t.Fatal("key set present after failed loads only")
			}
		case 3:
			if _, err := s.current().find("a", true, algorithmsByName["ES256"]); err != nil {
				t.Fatalf("first good load: %v", err)
			}
		case 4:
			if _, err := s.current().find("b", true, algorithmsByName["RS256"]); err != nil {
				t.Fatalf("refreshed set lacks the rotated key: %v", err)
			}
			if _, err := s.current().find("a", true, algorithmsByName["ES256"]); !errors.Is(err, errNoSuchKey) {
				t.Fatalf("refreshed set still has the retired key: %v", err)
			}
		}
		proceed <- struct{}{}
	}
	select {
	case <-s.loaded:
	default:
		t.Fatal("loaded not closed after a successful load")
	}
}

func TestClose(t *testing.T) {
	srv := newJWKSServer(t, jwksDoc(t, keyA()))
	v, err := New(context.Background(), []IssuerSpec{urlSpec(srv)}, Options{Now: newClock().Now})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(t, v)
	v.Close()
	v.Close() // idempotent
	if err := verify(v, esToken(t, "a")); err != nil {
		t.Fatalf("Verify() after Close = %v, want loaded keys to keep serving", err)
	}
	hits := srv.hits.Load()
	if err := verify(v, esToken(t, "unknown")); err != ErrUnknownKey {
		t.Fatalf("Verify(unknown kid) after Close = %v", err)
	}
	if srv.hits.Load() != hits {
		t.Fatal("a closed verifier fetched keys")
	}
}
