package check

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testjwks"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// keysPipeline compiles one JWKS issuer and a default route on a real clock
// with a key source pool whose removed kids go to the pipeline.
func keysPipeline(t *testing.T, jwksURL, extra string) (*Pipeline, *atomic.Int64) {
	t.Helper()
	doc := fmt.Sprintf(`
issuers: [{name: idp, issuer: https://idp.example.com, algorithms: [RS256], jwks_url: %s, refresh_interval: 20ms, unknown_kid_interval: 1ms}]
routes: [{name: r, default: true, issuers: [idp]}]
limits: {check_deadline: 100ms}
%s`, jwksURL, extra)
	var (
		pl      atomic.Pointer[Pipeline]
		dropped atomic.Int64
	)
	sources := jwtauth.NewSources(t.Context(), jwtauth.Options{OnKeysRemoved: func(issuer string, keyIDs []string) {
		if p := pl.Load(); p != nil {
			dropped.Add(int64(p.DropKeys(issuer, keyIDs)))
		}
	}})
	p := compileDoc(t, doc, Deps{KeySources: sources})
	t.Cleanup(p.Close)
	deadline := time.Now().Add(5 * time.Second)
	for !p.Ready() {
		if time.Now().After(deadline) {
			t.Fatal("keys never loaded")
		}
		time.Sleep(5 * time.Millisecond)
	}
	x, err := New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	pl.Store(x)
	return x, &dropped
}

func signed(t *testing.T, k testtoken.Key) string {
	return k.Sign(t, jwt.MapClaims{"sub": "alice", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()})
}

// checkWithin runs a check and fails the test if it outlives bound: the
// check deadline must answer long before a hung dependency would.
func checkWithin(t *testing.T, pl *Pipeline, tok string, bound time.Duration) Verdict {
	t.Helper()
	done := make(chan Verdict, 1)
	go func() { done <- pl.Check(context.Background(), agentReq(Headers{"authorization": "Bearer " + tok})) }()
	select {
	case v := <-done:
		return v
	case <-time.After(bound):
		t.Fatalf("the check waited longer than %s on a hung dependency", bound)
		return Verdict{}
	}
}

// TestCheckDeadline: against a hung JWKS, a token naming an unknown kid is
// answered 401 once the check deadline is spent, and cached tokens keep
// being allowed.
func TestCheckDeadline(t *testing.T) {
	k1, k2 := testtoken.RSA(t, "k1"), testtoken.RSA(t, "k2")
	jw := testjwks.New(t, k1)
	pl, _ := keysPipeline(t, jw.URL, "")
	cachedTok := signed(t, k1)
	if v := checkWithin(t, pl, cachedTok, 5*time.Second); v.Outcome != Allowed {
		t.Fatalf("before the outage: %v %s", v.Outcome, v.Description)
	}
	jw.Hang(true)
	defer jw.Hang(false)
	v := checkWithin(t, pl, signed(t, k2), 3*time.Second)
	if v.Outcome != InvalidToken || v.Status() != 401 {
		t.Fatalf("unknown kid against a hung JWKS: %v %d %s, want 401", v.Outcome, v.Status(), v.Description)
	}
	if v := checkWithin(t, pl, cachedTok, 3*time.Second); v.Outcome != Allowed || !v.CacheHit {
		t.Fatalf("cached token during the outage: %v hit=%v", v.Outcome, v.CacheHit)
	}
}

// TestExchangeDeadline: a new token needing an exchange at an STS slower
// than the check deadline gets 503 with Retry-After within the deadline.
func TestExchangeDeadline(t *testing.T) {
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "x", Method: "client_secret_basic", Secret: "s"}}})
	doc := fmt.Sprintf(`
issuers: [{name: dev, algorithms: [HS256], secret: %s}]
exchanges: [{name: sts, token_endpoint: %s, client_auth: {method: client_secret_basic, client_id: x, client_secret_env: S}}]
routes: [{name: r, default: true, issuers: [dev], exchange: {sts: sts, audience: [https://up.example.com]}}]
limits: {check_deadline: 100ms}
`, secret, sts.TokenURL)
	pl := newPipeline(t, doc, Deps{Getenv: func(string) string { return "s" }, HTTPClient: sts.Client()}, Options{})
	release := sts.Pause()
	defer release()
	tok := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	v := checkWithin(t, pl, tok, 3*time.Second)
	if v.Outcome != Unavailable || v.Status() != 503 {
		t.Fatalf("slow STS: %v %d %s", v.Outcome, v.Status(), v.Description)
	}
	if ra, _ := header(v.ResponseHeaders, "retry-after"); ra == "" {
		t.Fatal("503 without Retry-After")
	}
}

// signedNoKID signs like signed but names no kid: the verifier tries the
// issuer's keys.
func signedNoKID(t *testing.T, k testtoken.Key) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.GetSigningMethod(k.Alg), jwt.MapClaims{"sub": "alice", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()})
	s, err := tok.SignedString(k.Private)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRemovedKeyDropsVerdicts: when a refresh of the JWKS no longer lists
// a key, the cached verdicts of tokens it verified go, and those tokens are
// refused from then on. The verdict goes with the key that verified the
// token, not with the kid the token names: a token naming no kid (its key
// published with a kid or without), and a token naming a kid the set now
// gives to other key material, lose their verdicts too.
func TestRemovedKeyDropsVerdicts(t *testing.T) {
	tests := []struct {
		name       string
		publishKID bool // the keys are published with their kids
		sign       func(t *testing.T, k testtoken.Key) string
		// after is the key set once the issuer removed k2, which signed
		// the revoked token.
		after func(t *testing.T, k1, k2 testtoken.Key) []testtoken.Key
	}{
		{"the kid the token names is gone", true, signed, func(_ *testing.T, k1, _ testtoken.Key) []testtoken.Key { return []testtoken.Key{k1} }},
		{"token names no kid", true, signedNoKID, func(_ *testing.T, k1, _ testtoken.Key) []testtoken.Key { return []testtoken.Key{k1} }},
		{"keys published without kids", false, signedNoKID, func(_ *testing.T, k1, _ testtoken.Key) []testtoken.Key { return []testtoken.Key{k1} }},
		{"kid now names another key", true, signed, func(t *testing.T, k1, k2 testtoken.Key) []testtoken.Key {
			return []testtoken.Key{k1, testtoken.RSA(t, k2.KID)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k1, k2 := testtoken.RSA(t, "k1"), testtoken.RSA(t, "k2")
			if !tt.publishKID {
				k1.KID, k2.KID = "", ""
			}
			jw := testjwks.New(t, k1, k2)
			pl, dropped := keysPipeline(t, jw.URL, "")
			keep, revoke := tt.sign(t, k1), tt.sign(t, k2)
			for _, tok := range []string{keep, revoke, revoke} {
				if v := checkWithin(t, pl, tok, 5*time.Second); v.Outcome != Allowed {
					t.Fatalf("before rotation: %v %s", v.Outcome, v.Description)
				}
			}
			jw.SetKeys(tt.after(t, k1, k2)...) // k2 compromised: the issuer drops it
			deadline := time.Now().Add(5 * time.Second)
			for dropped.Load() == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the removal of k2 never dropped its cached verdict")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if n := dropped.Load(); n != 1 {
				t.Fatalf("%d verdicts dropped, want 1 (only k2's)", n)
			}
			if v := checkWithin(t, pl, revoke, 5*time.Second); v.Outcome != InvalidToken || v.CacheHit {
				t.Fatalf("token of the removed key: %v hit=%v, want a fresh 401", v.Outcome, v.CacheHit)
			}
			if v := checkWithin(t, pl, keep, 5*time.Second); v.Outcome != Allowed || !v.CacheHit {
				t.Fatalf("token of the kept key: %v hit=%v, want a cached allow", v.Outcome, v.CacheHit)
			}
		})
	}
}
