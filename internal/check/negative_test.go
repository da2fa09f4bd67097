package check

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestInvalidTokenFloodKeepsGrants: an attacker sending many distinct
// invalid tokens fills only the refusals' own bound; every valid caller's
// grant stays cached and is answered without verification.
func TestInvalidTokenFloodKeepsGrants(t *testing.T) {
	f := newFixture(t, "cache: {max_entries: 100, negative_ttl: 5m}")
	counter := &countingVerifier{TokenVerifier: f.pl.Policy().verifier.jwt}
	f.pl.Policy().verifier.jwt = counter
	ctx := context.Background()
	check := func(tok string) Verdict {
		return f.pl.Check(ctx, agentReq(Headers{"authorization": "Bearer " + tok}))
	}
	var valid []string
	for i := range 50 {
		tok := f.hs(t, jwt.MapClaims{"sub": fmt.Sprint("user-", i)})
		if v := check(tok); v.Outcome != Allowed {
			t.Fatalf("valid token %d: %v %s", i, v.Outcome, v.Description)
		}
		valid = append(valid, tok)
	}
	// Ten times the whole cache's bound of distinct badly signed tokens.
	for i := range 1000 {
		bad := f.hs(t, jwt.MapClaims{"sub": fmt.Sprint("mallory-", i)})
		bad = bad[:len(bad)-4] + "AAAA"
		if v := check(bad); v.Outcome != InvalidToken {
			t.Fatalf("forged token %d: %v", i, v.Outcome)
		}
	}
	if got, want := f.pl.refusals.Stats().Size, refusalsSize(100); got != want {
		t.Errorf("refusals hold %d, want their bound %d", got, want)
	}
	before := counter.n.Load()
	for i, tok := range valid {
		if v := check(tok); v.Outcome != Allowed || !v.CacheHit {
			t.Fatalf("valid token %d after the flood: %v hit %v", i, v.Outcome, v.CacheHit)
		}
	}
	if n := counter.n.Load() - before; n != 0 {
		t.Fatalf("%d valid tokens were verified again: the flood evicted grants", n)
	}
	// A refusal that is still cached is answered from the cache, with its
	// reason.
	bad := f.hs(t, jwt.MapClaims{"sub": "eve"})
	bad = bad[:len(bad)-4] + "AAAA"
	first, second := check(bad), check(bad)
	if second.Outcome != InvalidToken || !second.CacheHit || second.Description != first.Description || first.Description == "" {
		t.Fatalf("cached refusal: %+v after %+v", second, first)
	}
}

// BenchmarkRefusalMemory reports the live heap per cached refusal
// (B/refusal): 100,000 distinct invalid tokens.
func BenchmarkRefusalMemory(b *testing.B) {
	const n = 100_000
	reason := "token signature is invalid"
	c, err := cache.NewNegative(n)
	if err != nil {
		b.Fatal(err)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	now := time.Now()
	exp := now.Add(time.Minute)
	for i := range n {
		c.AddAt(cache.NewKey("route/0123456789abcdef", fmt.Sprint("bad-token-", i)), cache.Refusal{Reason: reason, Kind: uint8(InvalidToken)}, exp, now)
	}
	per := float64(int64(heap())-int64(before)) / n
	runtime.KeepAlive(c)
	k := cache.NewKey("route/0123456789abcdef", "bad-token-7")
	for b.Loop() {
		c.GetAt(k, now)
	}
	b.ReportMetric(per, "B/refusal")
}

// TestUnknownKeyRefusalNotCached: a token naming a key its issuer's set does
// not hold is refused, but the refusal is not remembered: the key may be
// one the issuer is rotating in, which the rate-limited refetch has not
// seen yet. A refusal that is a property of the token (a bad signature, an
// expired token) stays cached.
func TestUnknownKeyRefusalNotCached(t *testing.T) {
	k1, k2 := testtoken.RSA(t, "k1"), testtoken.RSA(t, "k2")
	jwksPath := filepath.Join(t.TempDir(), "jwks.json")
	writeKeys := func(keys ...testtoken.Key) {
		t.Helper()
		if err := os.WriteFile(jwksPath, testtoken.JWKS(t, keys...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKeys(k1)
	doc := fmt.Sprintf(`
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [RS256], jwks_file: %s}
routes:
  - {name: r, default: true, issuers: [corp], audiences: [https://files.example.com/mcp]}
cache: {negative_ttl: 5m}
`, jwksPath)
	clk := newClock()
	pl := newPipeline(t, doc, Deps{Now: clk.Now}, Options{Now: clk.Now})
	claims := func(sub string) jwt.MapClaims {
		return jwt.MapClaims{"sub": sub, "iss": "https://idp.example.com", "aud": "https://files.example.com/mcp",
			"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
	}
	check := func(tok string) Verdict { return pl.Check(context.Background(), filesReq(tok)) }
	// unsigned is a token naming kid with a signature nobody made.
	unsigned := func(kid string) string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"RS256","kid":"` + kid + `"}`))
		p := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://idp.example.com","sub":"x","exp":9999999999}`))
		return h + "." + p + ".AAAA"
	}

	t.Run("refusals", func(t *testing.T) {
		badSig := k1.Sign(t, claims("eve"))
		for _, tt := range []struct {
			name   string
			token  string
			cached bool
		}{
			{"bad signature", badSig[:len(badSig)-4] + "AAAA", true},
			{"expired", k1.Sign(t, jwt.MapClaims{"sub": "eve", "iss": "https://idp.example.com", "aud": "https://files.example.com/mcp", "exp": t0.Add(-time.Hour).Unix()}), true},
			{"unknown kid", unsigned("nobody-has-it"), false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				first, second := check(tt.token), check(tt.token)
				if first.Outcome != InvalidToken || second.Outcome != InvalidToken {
					t.Fatalf("outcomes %v, %v; want invalid_token twice", first.Outcome, second.Outcome)
				}
				if second.CacheHit != tt.cached {
					t.Errorf("second refusal answered from the cache: %v, want %v (%s)", second.CacheHit, tt.cached, second.Description)
				}
			})
		}
	})

	t.Run("rotation", func(t *testing.T) {
		if v := check(k1.Sign(t, claims("bob"))); v.Outcome != Allowed {
			t.Fatalf("k1 token: %v %s", v.Outcome, v.Description)
		}
		// The attacker spends the on-demand refetch, then the issuer
		// publishes k2 and alice presents a k2 token before the next one
		// may run: refused, since the set does not have k2 yet.
		clk.Advance(time.Minute)
		check(unsigned("random-1"))
		writeKeys(k1, k2)
		alice := k2.Sign(t, claims("alice"))
		clk.Advance(time.Second)
		if v := check(alice); v.Outcome != InvalidToken || !strings.Contains(v.Description, "unknown") {
			t.Fatalf("k2 token before the set has k2: %v %s, want an unknown-key refusal", v.Outcome, v.Description)
		}
		// Once the refetch interval has passed, the next unknown kid
		// loads k2, and alice's same token is accepted.
		clk.Advance(30 * time.Second)
		check(unsigned("random-2"))
		if v := check(alice); v.Outcome != Allowed {
			t.Errorf("alice's k2 token once the set holds k2: %v (%s, cache hit %v)", v.Outcome, v.Description, v.CacheHit)
		}
	})
}
