package jwtauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testclock"
)

// t0 is "now" for every test clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is an injectable, advanceable clock, safe for the goroutines the
// verifier starts.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(t0) }

// testKey is a signing key with the JWK metadata it is published under.
type testKey struct {
	kid     string
	alg     string // published JWK "alg"; "" publishes none
	private crypto.Signer
}

func (k testKey) public() crypto.PublicKey { return k.private.Public() }

// Keys are generated once per test binary: RSA generation is slow.
var (
	rsaPrivate = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	rsaOther   = sync.OnceValue(func() *rsa.PrivateKey { return must(rsa.GenerateKey(rand.Reader, 2048)) })
	ecPrivate  = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) })
	ec384      = sync.OnceValue(func() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader)) })
	edPrivate  = sync.OnceValue(func() ed25519.PrivateKey {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// jwksDoc publishes the public halves of keys as a JWK set document.
func jwksDoc(t testing.TB, keys ...testKey) []byte {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		jwk, err := jwkset.NewJWKFromKey(k.public(), jwkset.JWKOptions{
			Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: jwkset.ALG(k.alg), USE: jwkset.UseSig},
		})
		if err != nil {
			t.Fatalf("JWK for %s: %v", k.kid, err)
		}
		set.Keys = append(set.Keys, jwk.Marshal())
	}
	doc, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// writeJWKS writes a JWK set file and returns its path.
func writeJWKS(t testing.TB, doc []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sign makes a token; header entries override or, when nil, delete the
// defaults jwt sets ("alg", "typ").
func sign(t testing.TB, method jwt.SigningMethod, key any, header map[string]any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		if v == nil {
			delete(tok.Header, k)
			continue
		}
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatalf("sign: %v", err)
	}
	return s
}

// claimsAt returns registered claims valid at t0 for iss, plus extra.
func claimsAt(iss string, extra jwt.MapClaims) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss": iss,
		"sub": "alice",
		"exp": t0.Add(time.Hour).Unix(),
		"iat": t0.Add(-time.Minute).Unix(),
	}
	for k, v := range extra {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

// jwksServer is an httptest server publishing a JWK set that a test can
// replace, break, and count requests to. It also serves discovery metadata
// when configured.
type jwksServer struct {
	*httptest.Server
	doc    atomic.Pointer[[]byte]
	status atomic.Int32 // 0 serves the document
	hits   atomic.Int64 // requests to the JWK set path
	// hang, when set, holds requests to the JWK set until it is closed or
	// the client gives up: an endpoint that accepts and never answers.
	hang     atomic.Pointer[chan struct{}]
	metadata atomic.Pointer[map[string][]byte]
}

const jwksPath = "/keys"

func newJWKSServer(t testing.TB, doc []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.setDoc(doc)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != jwksPath {
			if md := s.metadata.Load(); md != nil {
				if body, ok := (*md)[r.URL.Path]; ok {
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(body)
					return
				}
			}
			http.NotFound(w, r)
			return
		}
		s.hits.Add(1)
		if h := s.hang.Load(); h != nil {
			select {
			case <-*h:
			case <-r.Context().Done():
				return
			}
		}
		if code := s.status.Load(); code != 0 {
			http.Error(w, "unavailable", int(code))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*s.doc.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) setDoc(doc []byte) { s.doc.Store(&doc) }

func (s *jwksServer) keysURL() string { return s.URL + jwksPath }

// serveMetadata serves a discovery document at path naming issuer and this
// server's JWK set.
func (s *jwksServer) serveMetadata(t testing.TB, path, issuer string) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"issuer": issuer, "jwks_uri": s.keysURL()})
	if err != nil {
		t.Fatal(err)
	}
	md := map[string][]byte{}
	if old := s.metadata.Load(); old != nil {
		for k, v := range *old {
			md[k] = v
		}
	}
	md[path] = body
	s.metadata.Store(&md)
}

// newVerifier builds a verifier on clk and closes it with the test.
func newVerifier(t testing.TB, clk *clock, specs ...IssuerSpec) *Verifier {
	t.Helper()
	v, err := New(context.Background(), specs, Options{Now: clk.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(v.Close)
	return v
}

// waitReady waits for the verifier's key sets; the bound only stops a
// broken test from hanging.
func waitReady(t testing.TB, v *Verifier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := v.waitReady(ctx); err != nil {
		t.Fatalf("waitReady: %v", err)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

var hmacSecret = []byte("0123456789abcdef0123456789abcdef-test")

// waitReady blocks until Ready would return true or ctx ends, returning
// ctx's error in the latter case.
func (v *Verifier) waitReady(ctx context.Context) error {
	for _, s := range v.sources {
		select {
		case <-s.loaded:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
