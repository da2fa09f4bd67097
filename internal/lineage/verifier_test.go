package lineage

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const peerIssuer = "https://gw-a.example/lineage"

// jwksServer publishes s's keys on 127.0.0.1, as a peer's admin listener
// would.
func jwksServer(t *testing.T, s *Signer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func newVerifier(t *testing.T, o VerifierOptions) *SignedVerifier {
	t.Helper()
	v, err := NewSignedVerifier(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

// Three hops behind three proxies: each derives, signs for its upstream, and
// the next one accepts the signed lineage although it does not trust the
// caller's plain headers.
func TestSignedLineageAcrossHops(t *testing.T) {
	clock := newClock()
	signerA := testSigner(t, clock, peerIssuer)
	srv := jwksServer(t, signerA)
	verifier := newVerifier(t, VerifierOptions{
		Peers:  []Peer{{Issuer: peerIssuer, JWKSURL: srv.URL}},
		Client: srv.Client(),
		Now:    clock.Now,
	})

	// Hop 1, the UI calls the planner agent: a new chain.
	hop1, err := Derive(Inbound{}, Facts{ContextID: "ctx-1", TokenSessionID: "sess-42"}, Options{Trusted: true})
	if err != nil {
		t.Fatal(err)
	}
	if hop1.Signed, err = signerA.Sign(&hop1, "alice", "sess-42"); err != nil {
		t.Fatal(err)
	}

	// Hop 2, the planner calls a sub-agent with headers it made up itself
	// and the signed token it was given.
	forged := Inbound{Root: "forged", Parent: "forged", Depth: "0", Signed: hop1.Signed}
	carried, err := verifier.Verify(t.Context(), forged.Signed, "alice")
	if err != nil {
		t.Fatalf("Verify() = %v", err)
	}
	if carried.Issuer != peerIssuer || carried.User != "alice" || carried.Session != "sess-42" || !carried.Expires.Equal(epoch.Add(time.Minute)) {
		t.Errorf("carried = %+v", carried)
	}
	hop2, err := Derive(forged, Facts{ContextID: "ctx-2"}, Options{Trusted: false, Signed: &carried})
	if err != nil {
		t.Fatal(err)
	}
	want2 := Result{Root: "ctx-1", Parent: "ctx-1", Depth: 1, Context: "ctx-2", Trusted: true, FromSigned: true}
	if !equalResult(hop2, want2) {
		t.Fatalf("hop 2 = %+v, want %+v", hop2, want2)
	}
	if hop2.Signed, err = signerA.Sign(&hop2, "alice", "sess-42"); err != nil {
		t.Fatal(err)
	}

	// Hop 3, the sub-agent calls an MCP tool.
	clock.Advance(10 * time.Second)
	carried, err = verifier.Verify(t.Context(), hop2.Signed, "alice")
	if err != nil {
		t.Fatalf("Verify() = %v", err)
	}
	hop3, err := Derive(Inbound{}, Facts{MCPSessionID: "mcp-3", ActChain: []string{"sub-agent"}}, Options{Signed: &carried})
	if err != nil {
		t.Fatal(err)
	}
	want3 := Result{Root: "ctx-1", Parent: "ctx-2", Depth: 2, Context: "mcp-3", Trusted: true, FromSigned: true, ActorChain: []string{"sub-agent"}}
	if !equalResult(hop3, want3) {
		t.Fatalf("hop 3 = %+v, want %+v", hop3, want3)
	}
}

// forge signs arbitrary claims with key and header fields, to build tokens
// Signer would never make.
func forge(t *testing.T, method jwt.SigningMethod, key any, header map[string]any, claims jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	for k, v := range header {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerifyRejects(t *testing.T) {
	clock := newClock()
	signer := testSigner(t, clock, peerIssuer)
	srv := jwksServer(t, signer)
	verifier := newVerifier(t, VerifierOptions{
		Peers:  []Peer{{Issuer: peerIssuer, JWKSURL: srv.URL}},
		Client: srv.Client(),
		Now:    clock.Now,
	})
	good, err := signer.Sign(&sampleResult, "alice", "sess-42")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(t.Context(), good, "alice"); err != nil {
		t.Fatalf("the untampered token: %v", err)
	}

	otherKey, err := NewSigner(SignerOptions{KeyFile: writeFile(t, "k.pem", newKeyPEM(t, "ed25519")), Issuer: peerIssuer, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	otherIssuer := testSigner(t, clock, "https://elsewhere.example")
	longLived, err := NewSigner(SignerOptions{KeyFile: filepath.Join("testdata", "ed25519.pem"), Issuer: peerIssuer, TTL: time.Hour, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(s *Signer, r Result, user string) string {
		tok, err := s.Sign(&r, user, "")
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	key := keyOf(t, signer)
	hdr := map[string]any{"kid": signer.KeyID(), "typ": SignedType}
	claims := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := jwt.MapClaims{"iss": peerIssuer, "sub": "alice", "iat": epoch.Unix(), "exp": epoch.Add(time.Minute).Unix(), "root": "R", "depth": 1}
		edit(c)
		return c
	}
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	lowered := strings.Replace(string(payload), `"depth":2`, `"depth":0`, 1)
	if lowered == string(payload) {
		t.Fatal("sample payload has no depth 2")
	}
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(lowered)) + "." + parts[2]
	corrupted := parts[0] + "." + parts[1][:10] + "AAAA" + parts[1][14:] + "." + parts[2]

	tests := []struct {
		name    string
		token   string
		subject string
		before  func()
	}{
		{name: "tampered payload: depth lowered", token: tampered},
		{name: "corrupted payload", token: corrupted},
		{name: "signature swapped from another token", token: parts[0] + "." + parts[1] + "." + strings.Split(sign(signer, Result{Root: "X"}, "alice"), ".")[2]},
		{name: "unknown key", token: sign(otherKey, sampleResult, "alice")},
		{name: "issuer not a peer", token: sign(otherIssuer, sampleResult, "alice")},
		{name: "minted for another user", token: good, subject: "mallory"},
		{name: "no user but one expected", token: sign(signer, sampleResult, ""), subject: "alice"},
		{name: "lifetime too long", token: sign(longLived, sampleResult, "alice")},
		{name: "not a JWT", token: "not-a-jwt"},
		{name: "empty", token: ""},
		{name: "too large", token: strings.Repeat("a", maxSignedSize+1)},
		{name: "alg none", token: forge(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, hdr, claims(func(jwt.MapClaims) {}))},
		{name: "HMAC", token: forge(t, jwt.SigningMethodHS256, []byte("shared-secret"), hdr, claims(func(jwt.MapClaims) {}))},
		{name: "access token type", token: forge(t, jwt.SigningMethodEdDSA, key, map[string]any{"kid": signer.KeyID(), "typ": "JWT"}, claims(func(jwt.MapClaims) {}))},
		{name: "no exp", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{name: "no iat", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { delete(c, "iat") }))},
		{name: "issued in the future", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["iat"] = epoch.Add(time.Minute).Unix() }))},
		{name: "no root", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { delete(c, "root") }))},
		{name: "bad root", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["root"] = "R\n" }))},
		{name: "bad parent", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["parent"] = "a,b" }))},
		{name: "bad ctx", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["ctx"] = strings.Repeat("c", 300) }))},
		{name: "no depth", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { delete(c, "depth") }))},
		{name: "negative depth", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["depth"] = -1 }))},
		{name: "fractional depth", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["depth"] = 1.5 }))},
		{name: "huge depth", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["depth"] = 1 << 40 }))},
		{name: "bad actor", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["actors"] = []string{"a\x00"} }))},
		{name: "too many actors", token: forge(t, jwt.SigningMethodEdDSA, key, hdr, claims(func(c jwt.MapClaims) { c["actors"] = make([]string, MaxActors+1) }))},
		{name: "expired", token: good, before: func() { clock.Advance(time.Minute + DefaultSignedLeeway + time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.before != nil {
				tt.before()
			}
			subject := tt.subject
			if subject == "" {
				subject = "alice"
			}
			_, err := verifier.Verify(t.Context(), tt.token, subject)
			if !errors.Is(err, ErrSignedInvalid) {
				t.Fatalf("Verify() = %v, want ErrSignedInvalid", err)
			}
		})
	}
}

func TestVerifyWithoutSubjectBinding(t *testing.T) {
	clock := newClock()
	signer := testSigner(t, clock, peerIssuer)
	verifier := newVerifier(t, VerifierOptions{Local: signer, Now: clock.Now})
	tok, err := signer.Sign(&sampleResult, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(t.Context(), tok, ""); err != nil {
		t.Errorf("Verify() without subject = %v", err)
	}
}

func TestVerifyLeeway(t *testing.T) {
	clock := newClock()
	signer := testSigner(t, clock, peerIssuer)
	verifier := newVerifier(t, VerifierOptions{Local: signer, Now: clock.Now})
	tok, err := signer.Sign(&sampleResult, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute + DefaultSignedLeeway - time.Second)
	if _, err := verifier.Verify(t.Context(), tok, "alice"); err != nil {
		t.Errorf("Verify() just past exp, within the leeway = %v", err)
	}
}

func TestVerifyFilePeerRotation(t *testing.T) {
	clock := newClock()
	var logs logBuffer
	signerA := testSigner(t, clock, peerIssuer)
	signerB, err := NewSigner(SignerOptions{KeyFile: writeFile(t, "b.pem", newKeyPEM(t, "es256")), Issuer: peerIssuer, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, "peer.jwks.json", signerA.JWKS())
	verifier := newVerifier(t, VerifierOptions{Peers: []Peer{{Issuer: peerIssuer, JWKSFile: path}}, Now: clock.Now, Logger: logs.Logger()})

	tokA, _ := signerA.Sign(&sampleResult, "alice", "")
	tokB, _ := signerB.Sign(&sampleResult, "alice", "")

	steps := []struct {
		name         string
		do           func()
		wantA, wantB bool
	}{
		{"initial keys", func() {}, true, false},
		{"replaced file not looked at within the second", func() { replaceFile(t, path, signerB.JWKS()); clock.Advance(500 * time.Millisecond) }, true, false},
		{"replaced file read after a second", func() { clock.Advance(500 * time.Millisecond) }, false, true},
		{"unusable replacement keeps the keys", func() { replaceFile(t, path, []byte(`{"keys":[]}`)); clock.Advance(time.Second) }, false, true},
	}
	for _, st := range steps {
		st.do()
		_, errA := verifier.Verify(t.Context(), tokA, "alice")
		_, errB := verifier.Verify(t.Context(), tokB, "alice")
		if (errA == nil) != st.wantA || (errB == nil) != st.wantB {
			t.Fatalf("%s: key A accepted %v (%v), key B accepted %v (%v); want %v, %v", st.name, errA == nil, errA, errB == nil, errB, st.wantA, st.wantB)
		}
	}
	if !strings.Contains(logs.String(), "key set load failed") {
		t.Errorf("logs lack the unusable file:\n%s", logs.String())
	}
}

// A peer that rotated is picked up when a token names the new key, without
// waiting for the refresh interval.
func TestVerifyURLPeerRefetchesUnknownKey(t *testing.T) {
	clock := newClock()
	keyPath := writeFile(t, "peer.pem", newKeyPEM(t, "ed25519"))
	peer, err := NewSigner(SignerOptions{KeyFile: keyPath, Issuer: peerIssuer, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := jwksServer(t, peer)
	verifier := newVerifier(t, VerifierOptions{
		Peers:  []Peer{{Issuer: peerIssuer, JWKSURL: srv.URL}},
		Client: srv.Client(),
		Now:    clock.Now,
	})
	replaceFile(t, keyPath, newKeyPEM(t, "es256"))
	clock.Advance(time.Second)
	tok, err := peer.Sign(&sampleResult, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(t.Context(), tok, "alice"); err != nil {
		t.Fatalf("Verify() with the rotated key = %v", err)
	}
}

func TestVerifyJWKSTooLarge(t *testing.T) {
	clock := newClock()
	signer := testSigner(t, clock, peerIssuer)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Valid JSON, but only after more white space than we read.
		_, _ = w.Write([]byte(strings.Repeat(" ", 1<<20))) // the JWK set limit
		_, _ = w.Write(signer.JWKS())
	}))
	t.Cleanup(srv.Close)
	verifier := newVerifier(t, VerifierOptions{
		Peers:  []Peer{{Issuer: peerIssuer, JWKSURL: srv.URL}},
		Client: srv.Client(),
		Now:    clock.Now,
	})
	tok, _ := signer.Sign(&sampleResult, "alice", "")
	if _, err := verifier.Verify(t.Context(), tok, "alice"); !errors.Is(err, ErrSignedInvalid) {
		t.Fatalf("Verify() = %v, want ErrSignedInvalid", err)
	}
}

func TestVerifyPeerDownAtStart(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	clock := newClock()
	var logs logBuffer
	verifier := newVerifier(t, VerifierOptions{
		Peers:  []Peer{{Issuer: peerIssuer, JWKSURL: url}},
		Client: http.DefaultClient,
		Now:    clock.Now,
		Logger: logs.Logger(),
	})
	tok, _ := testSigner(t, clock, peerIssuer).Sign(&sampleResult, "alice", "")
	if _, err := verifier.Verify(t.Context(), tok, "alice"); !errors.Is(err, ErrSignedInvalid) {
		t.Fatalf("Verify() = %v, want ErrSignedInvalid", err)
	}
	if !strings.Contains(logs.String(), "key set load failed") {
		t.Errorf("logs lack the failed fetch:\n%s", logs.String())
	}
}

func TestNewSignedVerifierErrors(t *testing.T) {
	jwks := writeFile(t, "jwks.json", testSigner(t, newClock(), "x").JWKS())
	tests := []struct {
		name    string
		opts    VerifierOptions
		wantErr string
	}{
		{"no peers", VerifierOptions{}, "no peers"},
		{"no issuer", VerifierOptions{Peers: []Peer{{JWKSFile: jwks}}}, "issuer is required"},
		{"no key source", VerifierOptions{Peers: []Peer{{Issuer: "a"}}}, "exactly one"},
		{"two key sources", VerifierOptions{Peers: []Peer{{Issuer: "a", JWKSFile: jwks, JWKSURL: "http://127.0.0.1:1/"}}}, "exactly one"},
		{"URL without client", VerifierOptions{Peers: []Peer{{Issuer: "a", JWKSURL: "http://127.0.0.1:1/"}}}, "HTTP client is required"},
		{"bad URL", VerifierOptions{Peers: []Peer{{Issuer: "a", JWKSURL: "::"}}, Client: http.DefaultClient}, "parse"},
		{"issuer twice", VerifierOptions{Peers: []Peer{{Issuer: "a", JWKSFile: jwks}, {Issuer: "a", JWKSFile: jwks}}}, "listed twice"},
		{"missing file", VerifierOptions{Peers: []Peer{{Issuer: "a", JWKSFile: jwks + ".missing"}}}, "no such file"},
		{"file without keys", VerifierOptions{Peers: []Peer{{Issuer: "a", JWKSFile: writeFile(t, "j", []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`))}}}, "no usable"},
		{"file not JSON", VerifierOptions{Peers: []Peer{{Issuer: "a", JWKSFile: writeFile(t, "j", []byte(`keys`))}}}, "decode"},
		{"negative leeway", VerifierOptions{Leeway: -time.Second, Peers: []Peer{{Issuer: "a", JWKSFile: jwks}}}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := NewSignedVerifier(tt.opts)
			if err == nil {
				v.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewSignedVerifier() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
