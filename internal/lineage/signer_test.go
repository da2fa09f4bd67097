package lineage

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
)

// sampleResult is a mid-chain lineage with everything set.
var sampleResult = Result{
	Root: "conv-1", Parent: "agent-ctx-1", Context: "tool-ctx-2", Depth: 2,
	ActorChain: []string{"agent-b", "agent-a"},
}

func TestSignGolden(t *testing.T) {
	s := testSigner(t, newClock(), "https://gw.example/lineage")
	tok, err := s.Sign(&sampleResult, "alice", "sess-42")
	if err != nil {
		t.Fatal(err)
	}
	// Ed25519 signatures are deterministic, so the whole token is.
	matchGolden(t, "ed25519.token.golden", []byte(tok))
	matchGolden(t, "ed25519.jwks.golden", s.JWKS())

	parts := strings.Split(tok, ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	matchGolden(t, "ed25519.header.golden", header)
	matchGolden(t, "ed25519.payload.golden", payload)
}

// The token must verify with a general JWT library and the published key,
// for both algorithms.
func TestSignVerifiesWithJWTLibrary(t *testing.T) {
	tests := []struct {
		name    string
		keyFile string
		alg     string
	}{
		{"Ed25519 PKCS #8", filepath.Join("testdata", "ed25519.pem"), "EdDSA"},
		{"P-256 PKCS #8", filepath.Join("testdata", "es256.pem"), "ES256"},
		{"P-256 SEC 1 after EC PARAMETERS", filepath.Join("testdata", "es256-sec1.pem"), "ES256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newClock()
			s, err := NewSigner(SignerOptions{KeyFile: tt.keyFile, Issuer: "gw", Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			tok, err := s.Sign(&sampleResult, `al"ice\`, "sess-\u00e9\n")
			if err != nil {
				t.Fatal(err)
			}
			var set jwkset.JWKSMarshal
			if err := json.Unmarshal(s.JWKS(), &set); err != nil {
				t.Fatal(err)
			}
			storage, err := set.ToStorage()
			if err != nil {
				t.Fatal(err)
			}
			var claims jwt.MapClaims
			parsed, err := jwt.ParseWithClaims(tok, &claims, func(tk *jwt.Token) (any, error) {
				jwk, err := storage.KeyRead(t.Context(), tk.Header["kid"].(string))
				if err != nil {
					return nil, err
				}
				return jwk.Key(), nil
			}, jwt.WithTimeFunc(clock.Now), jwt.WithValidMethods([]string{tt.alg}))
			if err != nil {
				t.Fatalf("token does not verify: %v", err)
			}
			if parsed.Header["typ"] != SignedType || parsed.Header["kid"] != s.KeyID() {
				t.Errorf("header = %v", parsed.Header)
			}
			want := jwt.MapClaims{
				"iss": "gw", "sub": `al"ice\`, "sid": "sess-\u00e9\n",
				"iat": float64(epoch.Unix()), "exp": float64(epoch.Add(DefaultSignedTTL).Unix()),
				"root": "conv-1", "parent": "agent-ctx-1", "ctx": "tool-ctx-2", "depth": float64(2),
				"actors": []any{"agent-b", "agent-a"},
			}
			gotJSON, _ := json.Marshal(claims)
			wantJSON, _ := json.Marshal(want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("claims = %s\nwant     %s", gotJSON, wantJSON)
			}
		})
	}
}

func TestSignOmitsEmptyClaims(t *testing.T) {
	s := testSigner(t, newClock(), "gw")
	tok, err := s.Sign(&Result{Root: "R"}, "", "")
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
	want := `{"iss":"gw","iat":1767323045,"exp":1767323105,"root":"R","depth":0}`
	if string(payload) != want {
		t.Errorf("payload = %s, want %s", payload, want)
	}
}

// TestSignLeavesOutHeaderActors: only an act claim or a verified token
// vouches for an actor chain in a signed token; a trusted caller's header
// goes upstream as a header only.
func TestSignLeavesOutHeaderActors(t *testing.T) {
	s := testSigner(t, newClock(), "gw")
	for _, tt := range []struct {
		name       string
		facts      Facts
		wantActors bool
	}{
		{"header chain", Facts{MCPSessionID: "m"}, false},
		{"act chain wins over the header", Facts{MCPSessionID: "m", ActChain: []string{"agent-a"}}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Derive(Inbound{ActorChain: "planner-agent"}, tt.facts, Options{Trusted: true})
			if err != nil || len(r.ActorChain) != 1 {
				t.Fatalf("Derive() = %+v, %v", r, err)
			}
			tok, err := s.Sign(&r, "alice", "")
			if err != nil {
				t.Fatal(err)
			}
			payload, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[1])
			if got := strings.Contains(string(payload), `"actors"`); got != tt.wantActors {
				t.Errorf("payload = %s, want actors: %v", payload, tt.wantActors)
			}
		})
	}
}

func TestSignRefusesIncompleteResult(t *testing.T) {
	s := testSigner(t, newClock(), "gw")
	for name, r := range map[string]Result{
		"no root":        {},
		"negative depth": {Root: "R", Depth: -1},
		"bad root":       {Root: "R\n"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.Sign(&r, "alice", ""); err == nil {
				t.Error("Sign() succeeded")
			}
		})
	}
}

func TestNewSignerErrors(t *testing.T) {
	rsaLike := pemOf("RSA PRIVATE KEY", []byte("not really"))
	tests := []struct {
		name    string
		opts    SignerOptions
		wantErr string
	}{
		{"no issuer", SignerOptions{KeyFile: filepath.Join("testdata", "ed25519.pem")}, "issuer is required"},
		{"negative TTL", SignerOptions{KeyFile: filepath.Join("testdata", "ed25519.pem"), Issuer: "gw", TTL: -time.Second}, "negative TTL"},
		{"missing file", SignerOptions{KeyFile: filepath.Join("testdata", "missing.pem"), Issuer: "gw"}, "no such file"},
		{"P-384", SignerOptions{KeyFile: filepath.Join("testdata", "p384.pem"), Issuer: "gw"}, "only P-256"},
		{"not PEM", SignerOptions{KeyFile: writeFile(t, "k.pem", []byte("hello")), Issuer: "gw"}, "no PEM private key"},
		{"public key only", SignerOptions{KeyFile: writeFile(t, "k.pem", pemOf("PUBLIC KEY", []byte("x"))), Issuer: "gw"}, "no PEM private key"},
		{"RSA key", SignerOptions{KeyFile: writeFile(t, "k.pem", rsaLike), Issuer: "gw"}, "RSA PRIVATE KEY"},
		{"real RSA key is not Ed25519 or P-256", SignerOptions{KeyFile: writeFile(t, "k.pem", realRSA(t)), Issuer: "gw"}, "use Ed25519 or ECDSA P-256"},
		{"broken PKCS #8", SignerOptions{KeyFile: writeFile(t, "k.pem", pemOf("PRIVATE KEY", []byte("x"))), Issuer: "gw"}, "parse PRIVATE KEY"},
		{"huge file", SignerOptions{KeyFile: writeFile(t, "k.pem", make([]byte, maxKeyFileSize+1)), Issuer: "gw"}, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSigner(tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("NewSigner() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func pemOf(typ string, b []byte) []byte {
	return []byte("-----BEGIN " + typ + "-----\n" + base64.StdEncoding.EncodeToString(b) + "\n-----END " + typ + "-----\n")
}

func jwksKIDs(t *testing.T, doc []byte) []string {
	t.Helper()
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	var kids []string
	for _, k := range set.Keys {
		if k.D != "" {
			t.Fatalf("JWK set publishes private key material")
		}
		kids = append(kids, k.KID)
	}
	return kids
}

func TestSignerKeyRotation(t *testing.T) {
	clock := newClock()
	var logs logBuffer
	keyA, keyB := newKeyPEM(t, "ed25519"), newKeyPEM(t, "es256")
	path := writeFile(t, "lineage.pem", keyA)
	s, err := NewSigner(SignerOptions{KeyFile: path, Issuer: "gw", TTL: time.Minute, Now: clock.Now, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	kidA := s.KeyID()
	tokA, err := s.Sign(&sampleResult, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := NewSignedVerifier(VerifierOptions{Local: s, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer verifier.Close()

	steps := []struct {
		name     string
		do       func()
		wantKID  string // "" for kidA; "B" for the second key
		wantJWKS []string
	}{
		{
			name:     "replaced file is not looked at within the second",
			do:       func() { replaceFile(t, path, keyB); clock.Advance(999 * time.Millisecond) },
			wantKID:  "A",
			wantJWKS: []string{"A"},
		},
		{
			name:     "after a second the new key signs and the old one stays published",
			do:       func() { clock.Advance(time.Millisecond) },
			wantKID:  "B",
			wantJWKS: []string{"B", "A"},
		},
		{
			name:     "an unusable replacement keeps the current key",
			do:       func() { replaceFile(t, path, []byte("garbage")); clock.Advance(time.Second) },
			wantKID:  "B",
			wantJWKS: []string{"B", "A"},
		},
		{
			name:     "a missing file keeps the current key",
			do:       func() { _ = os.Remove(path); clock.Advance(time.Second) },
			wantKID:  "B",
			wantJWKS: []string{"B", "A"},
		},
		{
			name:     "the old key is dropped once its tokens have expired",
			do:       func() { clock.Advance(time.Minute + retiredSlack) },
			wantKID:  "B",
			wantJWKS: []string{"B"},
		},
		{
			name:     "rotating back publishes each key once",
			do:       func() { replaceFile(t, path, keyA); clock.Advance(time.Second) },
			wantKID:  "A",
			wantJWKS: []string{"A", "B"},
		},
	}
	var kidB string
	name := func(k string) string {
		switch k {
		case kidA:
			return "A"
		case kidB:
			return "B"
		}
		return k
	}
	for i, st := range steps {
		st.do()
		got := s.KeyID()
		if i == 1 {
			kidB = got
		}
		if name(got) != st.wantKID {
			t.Fatalf("%s: key %s, want %s", st.name, name(got), st.wantKID)
		}
		var names []string
		for _, k := range jwksKIDs(t, s.JWKS()) {
			names = append(names, name(k))
		}
		if !slices.Equal(names, st.wantJWKS) {
			t.Fatalf("%s: JWK set has %v, want %v", st.name, names, st.wantJWKS)
		}
		if i == 1 {
			// The token signed with the replaced key still verifies.
			if _, err := verifier.Verify(t.Context(), tokA, "alice"); err != nil {
				t.Fatalf("%s: old token: %v", st.name, err)
			}
			tokB, err := s.Sign(&sampleResult, "alice", "")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := verifier.Verify(t.Context(), tokB, "alice"); err != nil {
				t.Fatalf("%s: new token: %v", st.name, err)
			}
		}
	}
	out := logs.String()
	for _, want := range []string{"lineage signing key rotated", "unusable", "unreadable"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, out)
		}
	}
	for _, secret := range []string{string(keyA[30:60]), string(keyB[30:60])} {
		if strings.Contains(out, secret) {
			t.Error("logs contain key material")
		}
	}
}

func TestSignerHandler(t *testing.T) {
	s := testSigner(t, newClock(), "gw")
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	tests := []struct {
		method     string
		wantStatus int
		wantBody   bool
	}{
		{http.MethodGet, http.StatusOK, true},
		{http.MethodHead, http.StatusOK, false},
		{http.MethodPost, http.StatusMethodNotAllowed, false},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if !tt.wantBody {
				if tt.method == http.MethodHead && len(body) != 0 {
					t.Error("HEAD has a body")
				}
				return
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if string(body) != string(s.JWKS()) {
				t.Errorf("body %s, want the JWK set", body)
			}
		})
	}
}

func TestThumbprintRFC7638(t *testing.T) {
	// RFC 8037 appendix A.3: the thumbprint of the example Ed25519 key.
	jwk := jwkset.JWKMarshal{KTY: jwkset.KtyOKP, CRV: jwkset.CrvEd25519, X: "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
	if got, want := thumbprint(jwk), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"; got != want {
		t.Errorf("thumbprint = %s, want %s", got, want)
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain", `q"b\s`, "ctl\x00\x01\x1f\x7f", "nl\n\r\t", "é日本", "bad\xff\xfeutf8", "\u2028"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q encodes to invalid JSON %s: %v", s, got, err)
		}
		std, _ := json.Marshal(s)
		var want string
		_ = json.Unmarshal(std, &want)
		if back != want {
			t.Errorf("%q round-trips to %q, want %q", s, back, want)
		}
	}
}

// keyOf returns the private key a test signer uses.
func keyOf(t testing.TB, s *Signer) any {
	t.Helper()
	k := s.current().key
	if k.ed != nil {
		return k.ed
	}
	return k.ec
}

// Signing, publishing and verifying go on while the key file is replaced.
// Run with -race.
func TestSignerConcurrentRotation(t *testing.T) {
	clock := newClock()
	path := writeFile(t, "lineage.pem", newKeyPEM(t, "ed25519"))
	s, err := NewSigner(SignerOptions{KeyFile: path, Issuer: "gw", TTL: time.Minute, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := NewSignedVerifier(VerifierOptions{Local: s, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer verifier.Close()

	const workers, rounds = 4, 100
	errs := make(chan error, workers)
	done := make(chan struct{})
	for range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for range rounds {
				tok, err := s.Sign(&sampleResult, "alice", "")
				if err == nil {
					_, err = verifier.Verify(t.Context(), tok, "alice")
				}
				if err != nil {
					errs <- err
					return
				}
				if len(s.JWKS()) == 0 {
					errs <- errors.New("empty JWK set")
					return
				}
			}
		}()
	}
	keys := [][]byte{newKeyPEM(t, "es256"), newKeyPEM(t, "ed25519")}
	for i := range 10 {
		replaceFile(t, path, keys[i%2])
		clock.Advance(time.Second)
	}
	for range workers {
		<-done
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func realRSA(t *testing.T) []byte {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
}
