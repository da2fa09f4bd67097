package loadtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"go.yaml.in/yaml/v3"

	"github.com/extauthz/extauthz/internal/config"
)

var (
	keysOnce sync.Once
	testKeys *Keys
	keysErr  error
)

// sharedKeys generates the (slow) RSA key once for all tests.
func sharedKeys(t testing.TB) *Keys {
	t.Helper()
	keysOnce.Do(func() { testKeys, keysErr = GenerateKeys([]byte("test-secret")) })
	if keysErr != nil {
		t.Fatal(keysErr)
	}
	return testKeys
}

var fixedNow = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func fixedClock() time.Time { return fixedNow }

func TestWriteSetup(t *testing.T) {
	keys := sharedKeys(t)
	dir := t.TempDir()
	s, err := WriteSetup(dir, keys)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(s.ConfigFile)
	if err != nil {
		t.Fatal(err)
	}

	// Strictly decoded, the file says what the brief of the service asks.
	var got benchConfig
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("config does not decode strictly: %v\n%s", err, raw)
	}
	want := benchConfig{
		Issuers: []benchIssuer{
			{Name: "dev", Algorithms: []string{"HS256"}, SecretEnv: "JWT_SECRET"},
			{Name: "bench-rsa", Issuer: "https://bench.invalid/rsa", Algorithms: []string{"RS256"}, JWKSFile: s.JWKSFile},
			{Name: "bench-ec", Issuer: "https://bench.invalid/ec", Algorithms: []string{"ES256"}, JWKSFile: s.JWKSFile},
		},
		Cache:  benchCache{MaxEntries: 100_000},
		Routes: []benchRoute{{Name: "bench", Default: true, Issuers: []string{"dev", "bench-rsa", "bench-ec"}}},
	}
	if !equalJSON(t, got, want) {
		t.Errorf("config:\n%s", raw)
	}
	if !filepath.IsAbs(s.JWKSFile) || filepath.Dir(s.JWKSFile) != s.Dir {
		t.Errorf("jwks_file %q is not an absolute path in the setup directory", s.JWKSFile)
	}

	// And the service's own loader accepts it.
	if _, err := config.Parse(raw); err != nil {
		t.Errorf("the service rejects the generated config: %v\n%s", err, raw)
	}

	for name, mode := range map[string]os.FileMode{rsaKeyFileName: 0o600, ecKeyFileName: 0o600, JWKSFileName: 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s mode %v, want %v", name, fi.Mode().Perm(), mode)
		}
	}

	loaded, err := LoadKeys(dir, keys.HMAC)
	if err != nil {
		t.Fatal(err)
	}
	if !loaded.RSA.Equal(keys.RSA) || !loaded.EC.Equal(keys.EC) {
		t.Error("LoadKeys did not give back the written keys")
	}
	if _, err := LoadKeys(t.TempDir(), keys.HMAC); err == nil {
		t.Error("LoadKeys of an empty directory succeeded")
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("got  %s\nwant %s", ja, jb)
		return false
	}
	return true
}

// publicKeysFromJWKS decodes the JWKS by hand, as a verifier would.
func publicKeysFromJWKS(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(doc, &set); err != nil {
		t.Fatal(err)
	}
	b64 := func(s string) []byte {
		b, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("not base64url without padding: %q", s)
		}
		return b
	}
	out := map[string]any{}
	for _, k := range set.Keys {
		if k.Use != "sig" {
			t.Errorf("kid %s: use %q", k.Kid, k.Use)
		}
		switch k.Kty {
		case "RSA":
			out[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(b64(k.N)), E: int(new(big.Int).SetBytes(b64(k.E)).Int64())}
		case "EC":
			x, y := b64(k.X), b64(k.Y)
			if k.Crv != "P-256" || len(x) != 32 || len(y) != 32 {
				t.Fatalf("kid %s: crv %s, x %d bytes, y %d bytes", k.Kid, k.Crv, len(x), len(y))
			}
			pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
			if err != nil {
				t.Fatal(err)
			}
			out[k.Kid] = pub
		default:
			t.Errorf("unexpected kty %q", k.Kty)
		}
	}
	return out
}

func TestMinterTokensVerifyAgainstJWKS(t *testing.T) {
	keys := sharedKeys(t)
	doc, err := JWKS(keys)
	if err != nil {
		t.Fatal(err)
	}
	pub := publicKeysFromJWKS(t, doc)
	if len(pub) != 2 {
		t.Fatalf("JWKS has %d keys, want 2", len(pub))
	}
	m := NewMinter(keys, fixedClock)
	tests := []struct {
		alg     Alg
		wantKID string
		wantIss string
	}{
		{HS256, "", ""},
		{RS256, "rs1", "https://bench.invalid/rsa"},
		{ES256, "es1", "https://bench.invalid/ec"},
	}
	for _, tt := range tests {
		t.Run(string(tt.alg), func(t *testing.T) {
			raw, err := m.Token(tt.alg, 42)
			if err != nil {
				t.Fatal(err)
			}
			var c claims
			tok, err := jwt.ParseWithClaims(raw, &c, func(tok *jwt.Token) (any, error) {
				if tt.alg == HS256 {
					return keys.HMAC, nil
				}
				return pub[tok.Header["kid"].(string)], nil
			}, jwt.WithValidMethods([]string{string(tt.alg)}), jwt.WithTimeFunc(fixedClock), jwt.WithIssuedAt())
			if err != nil {
				t.Fatalf("token does not verify: %v", err)
			}
			kid, _ := tok.Header["kid"].(string)
			if kid != tt.wantKID {
				t.Errorf("kid %q, want %q", kid, tt.wantKID)
			}
			if c.Subject != "user-42" || c.SessionID != "session-42" || c.Issuer != tt.wantIss {
				t.Errorf("sub %q session_id %q iss %q", c.Subject, c.SessionID, c.Issuer)
			}
			if !c.IssuedAt.Equal(fixedNow) || !c.ExpiresAt.Equal(fixedNow.Add(time.Hour)) {
				t.Errorf("iat %v exp %v, want %v and an hour later", c.IssuedAt, c.ExpiresAt, fixedNow)
			}
		})
	}
	if _, err := m.Token("none", 1); err == nil {
		t.Error("minting with alg none succeeded")
	}
}

func TestMinterTokensInOrderAndDistinct(t *testing.T) {
	m := NewMinter(sharedKeys(t), fixedClock)
	for _, alg := range []Alg{HS256, ES256} {
		toks, err := m.Tokens(alg, 100, 37)
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) != 37 {
			t.Fatalf("%s: %d tokens, want 37", alg, len(toks))
		}
		for i, raw := range toks {
			var c claims
			if _, _, err := jwt.NewParser().ParseUnverified(raw, &c); err != nil {
				t.Fatal(err)
			}
			if want := "user-" + strconv.Itoa(100+i); c.Subject != want {
				t.Errorf("%s token %d: sub %q, want %q", alg, i, c.Subject, want)
			}
		}
		if len(slices.Compact(slices.Sorted(slices.Values(toks)))) != 37 {
			t.Errorf("%s: tokens are not distinct", alg)
		}
	}
}

func BenchmarkMintES256(b *testing.B) {
	m := NewMinter(sharedKeys(b), time.Now)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := m.Token(ES256, i); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMintRS256(b *testing.B) {
	m := NewMinter(sharedKeys(b), time.Now)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := m.Token(RS256, i); err != nil {
			b.Fatal(err)
		}
	}
}
