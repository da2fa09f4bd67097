package introspect_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/introspect"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/oauthclient"
	"github.com/extauthz/extauthz/internal/testing/introspecttest"
	"github.com/extauthz/extauthz/internal/testing/testclock"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

var epoch = time.Unix(1_800_000_000, 0)

func basicAuth() oauthclient.Config {
	return oauthclient.Config{Method: oauthclient.ClientSecretBasic, ClientID: introspecttest.ClientID, ClientSecret: introspecttest.ClientSecret}
}

// newIntrospector returns an Introspector for as on clock c; edit adjusts
// the config.
func newIntrospector(t testing.TB, as *introspecttest.Server, c *testclock.Clock, edit func(*introspect.Config)) *introspect.Introspector {
	t.Helper()
	cfg := introspect.Config{Name: "opaque", Endpoint: as.IntrospectURL, Issuer: as.URL, Auth: basicAuth()}
	if edit != nil {
		edit(&cfg)
	}
	in, err := introspect.New(cfg, introspect.Options{Now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	return in
}

func TestIntrospect(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	in := newIntrospector(t, as, c, nil)
	exp := epoch.Add(time.Minute).Unix()
	full := map[string]any{
		"sub": "alice", "scope": "read write", "client_id": "agent-1", "aud": []any{"mcp", "other"},
		"exp": float64(exp), "iat": float64(epoch.Unix() - 10), "iss": as.URL, "jti": "j-1",
		"act": map[string]any{"sub": "agent-1"}, "tenant": "acme",
	}
	as.Set("full", full)
	as.Set("no-exp", map[string]any{"sub": "bob"})
	as.Set("long-exp", map[string]any{"sub": "carol", "exp": float64(epoch.Add(24 * time.Hour).Unix())})
	as.Set("expired", map[string]any{"sub": "dave", "exp": float64(epoch.Unix() - 1)})
	as.Set("future-nbf", map[string]any{"sub": "dave", "nbf": float64(epoch.Unix() + 3600)})
	as.Set("refresh-type", map[string]any{"sub": "erin", "token_type": "refresh_token"})
	as.Set("refresh-use", map[string]any{"sub": "erin", "token_use": "refresh_token"})
	as.Set("bearer-type", map[string]any{"sub": "frank", "token_type": "Bearer"})
	as.Set("other-iss", map[string]any{"sub": "mallory", "iss": "https://elsewhere.example"})
	as.Set("bad-sub", map[string]any{"sub": 42})
	as.Set("bad-exp", map[string]any{"sub": "x", "exp": "tomorrow"})

	tests := []struct {
		name      string
		token     string
		audiences []string
		wantErr   error
		wantSub   string
		wantExp   time.Time
		wantCalls int
	}{
		{"active with every member", "full", []string{"mcp"}, nil, "alice", time.Unix(exp, 0), 1},
		{"no exp is capped by the cache TTL", "no-exp", nil, nil, "bob", epoch.Add(introspect.DefaultCacheTTL), 1},
		{"a later exp is capped by the cache TTL", "long-exp", nil, nil, "carol", epoch.Add(introspect.DefaultCacheTTL), 1},
		{"bearer token_type", "bearer-type", nil, nil, "frank", epoch.Add(introspect.DefaultCacheTTL), 1},
		{"inactive", "unknown", nil, introspect.ErrInactive, "", time.Time{}, 1},
		{"active but expired", "expired", nil, jwtauth.ErrExpired, "", time.Time{}, 1},
		{"not yet valid", "future-nbf", nil, jwtauth.ErrNotYetValid, "", time.Time{}, 1},
		{"refresh token by token_type", "refresh-type", nil, jwtauth.ErrType, "", time.Time{}, 1},
		{"refresh token by token_use", "refresh-use", nil, jwtauth.ErrType, "", time.Time{}, 1},
		{"another issuer", "other-iss", nil, jwtauth.ErrIssuer, "", time.Time{}, 1},
		{"audience not accepted", "full", []string{"billing"}, jwtauth.ErrAudience, "", time.Time{}, 1},
		{"sub not a string", "bad-sub", nil, introspect.ErrUnavailable, "", time.Time{}, 1},
		{"exp not a number", "bad-exp", nil, introspect.ErrUnavailable, "", time.Time{}, 1},
		{"empty token", "", nil, jwtauth.ErrMalformed, "", time.Time{}, 0},
		{"token with a space", "a b", nil, jwtauth.ErrMalformed, "", time.Time{}, 0},
		{"token with a newline", "a\nb", nil, jwtauth.ErrMalformed, "", time.Time{}, 0},
		{"token too long", strings.Repeat("x", jwtauth.MaxTokenSize+1), nil, jwtauth.ErrMalformed, "", time.Time{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := in.Introspect(t.Context(), tc.token, tc.audiences)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if n := as.Calls(tc.token); n != tc.wantCalls {
				t.Errorf("endpoint calls = %d, want %d", n, tc.wantCalls)
			}
			if tc.wantErr != nil {
				return
			}
			if got.Subject != tc.wantSub || !got.ExpiresAt.Equal(tc.wantExp) || got.IssuerName != "opaque" || got.Issuer != as.URL {
				t.Errorf("claims = %+v, want sub %q expiring %v from issuer opaque (%s)", got, tc.wantSub, tc.wantExp, as.URL)
			}
		})
	}

	t.Run("every member is in Raw", func(t *testing.T) {
		got, err := in.Introspect(t.Context(), "full", nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"active": true}
		for k, v := range full {
			want[k] = v
		}
		if !reflect.DeepEqual(got.Raw, want) {
			t.Errorf("Raw = %v\nwant %v", got.Raw, want)
		}
		if !reflect.DeepEqual(got.Audience, []string{"mcp", "other"}) || got.ID != "j-1" || !got.IssuedAt.Equal(time.Unix(epoch.Unix()-10, 0)) {
			t.Errorf("claims = %+v", got)
		}
	})
}

// TestCache: each step says whether the answer came from the cache (a hit)
// or from the endpoint, counted on both sides. An answer is kept per token,
// until the CacheTTL or the token's exp, whichever comes first; an inactive
// one for the NegativeTTL; Drop forgets one subject's answers only.
func TestCache(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	in := newIntrospector(t, as, c, func(cfg *introspect.Config) { cfg.CacheTTL = time.Minute; cfg.NegativeTTL = 5 * time.Second })
	as.Set("tok", map[string]any{"sub": "alice", "exp": float64(epoch.Add(time.Hour).Unix())})
	steps := []struct {
		name      string
		do        func()
		token     string
		wantErr   error
		wantCalls int  // the endpoint's calls for token, in all
		hit       bool // answered from the cache
	}{
		{"first use calls", nil, "tok", nil, 1, false},
		{"second use is cached", nil, "tok", nil, 1, true},
		{"another token of nobody is not tok's answer", nil, "other", introspect.ErrInactive, 1, false},
		{"still cached just before the TTL", func() { c.Advance(59 * time.Second) }, "tok", nil, 1, true},
		{"revoked at the server: cached until the TTL", func() { as.Revoke("tok") }, "tok", nil, 1, true},
		{"after the TTL the revocation shows", func() { c.Advance(time.Second) }, "tok", introspect.ErrInactive, 2, false},
		{"inactive is cached", nil, "tok", introspect.ErrInactive, 2, true},
		{"re-activated: inactive until the negative TTL", func() { as.Set("tok", map[string]any{"sub": "alice"}) }, "tok", introspect.ErrInactive, 2, true},
		{"after the negative TTL it is asked again", func() { c.Advance(5 * time.Second) }, "tok", nil, 3, false},
		{"Drop forgets the subject's answers", func() {
			if n := in.Drop("alice"); n != 1 {
				t.Errorf("Drop = %d, want 1", n)
			}
		}, "tok", nil, 4, false},
		{"Drop of another subject keeps it", func() {
			if n := in.Drop("bob"); n != 0 {
				t.Errorf("Drop(bob) = %d, want 0", n)
			}
		}, "tok", nil, 4, true},
		{"a token expiring before the TTL", func() {
			as.Set("short", map[string]any{"sub": "carol", "exp": float64(c.Now().Add(10 * time.Second).Unix())})
		}, "short", nil, 1, false},
		{"is cached until its exp", func() { c.Advance(9 * time.Second) }, "short", nil, 1, true},
		{"and not after it", func() { c.Advance(time.Second) }, "short", jwtauth.ErrExpired, 2, false},
	}
	for _, s := range steps {
		if s.do != nil {
			s.do()
		}
		before := in.Stats()
		if _, err := in.Introspect(t.Context(), s.token, nil); !errors.Is(err, s.wantErr) {
			t.Fatalf("%s: err = %v, want %v", s.name, err, s.wantErr)
		}
		if n := as.Calls(s.token); n != s.wantCalls {
			t.Fatalf("%s: endpoint calls = %d, want %d", s.name, n, s.wantCalls)
		}
		after := in.Stats()
		if hit := after.Hits == before.Hits+1 && after.Misses == before.Misses; hit != s.hit ||
			after.Hits+after.Misses != before.Hits+before.Misses+1 {
			t.Fatalf("%s: stats %+v -> %+v, want a hit: %v", s.name, before, after, s.hit)
		}
	}
}

func TestEndpointFailures(t *testing.T) {
	tests := []struct {
		name      string
		fault     introspecttest.Fault
		hold      bool
		closed    bool
		wantRetry time.Duration
		wantText  string
	}{
		{"503 with Retry-After", introspecttest.Unavailable, false, false, 7 * time.Second, "status 503"},
		{"garbage", introspecttest.Garbage, false, false, time.Second, "not a JSON object"},
		{"no active member", introspecttest.NoActive, false, false, time.Second, "no boolean active"},
		{"too large", introspecttest.Huge, false, false, time.Second, "reading the introspection response failed"},
		{"redirect not followed", introspecttest.Redirect, false, false, time.Second, "status 307"},
		{"slow", introspecttest.None, true, false, time.Second, "timed out"},
		{"down", introspecttest.None, false, true, time.Second, "unreachable"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testclock.New(epoch)
			as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
			as.Set("known", map[string]any{"sub": "alice"})
			as.Set("unknown-yet", map[string]any{"sub": "bob"})
			// A generous timeout, so that a busy machine does not time out the
			// first call; only the held endpoint is waited out.
			timeout := 5 * time.Second
			if tc.hold {
				timeout = time.Second
			}
			in := newIntrospector(t, as, c, func(cfg *introspect.Config) { cfg.Timeout = timeout })
			if _, err := in.Introspect(t.Context(), "known", nil); err != nil {
				t.Fatal(err)
			}
			as.SetFault(tc.fault)
			if tc.hold {
				as.Hold()
			}
			if tc.closed {
				as.Close()
			}
			_, err := in.Introspect(t.Context(), "unknown-yet", nil)
			var ue *introspect.UnavailableError
			if !errors.Is(err, introspect.ErrUnavailable) || !errors.As(err, &ue) {
				t.Fatalf("err = %v, want unavailable", err)
			}
			if ue.RetryAfter != tc.wantRetry || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err = %q retry %v, want %q retry %v", err, ue.RetryAfter, tc.wantText, tc.wantRetry)
			}
			if strings.Contains(err.Error(), "unknown-yet") || strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), introspecttest.ClientSecret) {
				t.Errorf("error text leaks: %q", err)
			}
			if got, err := in.Introspect(t.Context(), "known", nil); err != nil || got.Subject != "alice" {
				t.Errorf("cached token during the outage: %v, %v", got, err)
			}
			if tc.closed {
				return
			}
			as.Release()
			as.SetFault(introspecttest.None)
			if got, err := in.Introspect(t.Context(), "unknown-yet", nil); err != nil || got.Subject != "bob" {
				t.Errorf("after the outage: %v, %v (a failure must not be cached)", got, err)
			}
		})
	}
}

func TestBreaker(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	in := newIntrospector(t, as, c, func(cfg *introspect.Config) { cfg.BreakerFailures = 2; cfg.BreakerCooldown = 10 * time.Second })
	as.SetFault(introspecttest.Garbage)
	for i := range 2 {
		if _, err := in.Introspect(t.Context(), fmt.Sprint("t", i), nil); !errors.Is(err, introspect.ErrUnavailable) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	_, err := in.Introspect(t.Context(), "t2", nil)
	var ue *introspect.UnavailableError
	if !errors.As(err, &ue) || ue.RetryAfter != 10*time.Second || as.Total() != 2 {
		t.Fatalf("open breaker: err %v, endpoint calls %d; want an unavailable without a call", err, as.Total())
	}
	if !in.Stats().BreakerOpen || in.Stats().Rejected != 1 {
		t.Errorf("stats = %+v", in.Stats())
	}
	as.SetFault(introspecttest.None)
	as.Set("t2", map[string]any{"sub": "alice"})
	c.Advance(10 * time.Second)
	if _, err := in.Introspect(t.Context(), "t2", nil); err != nil || in.Stats().BreakerOpen {
		t.Fatalf("probe: %v, stats %+v", err, in.Stats())
	}
}

// TestFlood sends many distinct unknown tokens, each by several requests at
// once: the endpoint sees each token once, and what is kept stays within
// the configured bounds.
// TestFlood: callers of one token asking at once make one call (single
// flight), even for tokens the endpoint does not know; a flood of distinct
// unknown tokens is remembered as inactive up to NegativeSize, the oldest
// forgotten first, and never evicts a valid caller's answer from the other
// cache.
func TestFlood(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	as.Set("good", map[string]any{"sub": "alice"})
	const negSize, cacheSize = 100, 10
	in := newIntrospector(t, as, c, func(cfg *introspect.Config) { cfg.NegativeSize = negSize; cfg.CacheSize = cacheSize })
	if _, err := in.Introspect(t.Context(), "good", nil); err != nil {
		t.Fatal(err)
	}

	// Single flight: the endpoint holds its answers until every caller
	// has missed the cache, so that none can be answered from it.
	const tokens, perToken = 20, 4
	as.Hold()
	var wg sync.WaitGroup
	errs := make(chan error, tokens*perToken)
	for i := range tokens {
		tok := fmt.Sprintf("unknown-%d", i)
		for range perToken {
			wg.Go(func() {
				if _, err := in.Introspect(context.Background(), tok, nil); !errors.Is(err, introspect.ErrInactive) {
					errs <- err
				}
			})
		}
	}
	want := uint64(1 + tokens*perToken)
	for i := 0; i < 5000 && in.Stats().Misses < want; i++ {
		time.Sleep(time.Millisecond)
	}
	if got := in.Stats().Misses; got != want {
		as.Release()
		wg.Wait()
		t.Fatalf("%d misses, want %d: the callers did not all ask", got, want)
	}
	as.Release()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("flood answer: %v", err)
	}
	if n, total := as.MaxCallsPerToken(), as.Total(); n != 1 || total != 1+tokens {
		t.Errorf("%d callers per token made %d calls for one token, %d in all; want one per token, %d", perToken, n, total, 1+tokens)
	}

	// The negative cache: full, bounded, the latest remembered, the
	// oldest forgotten.
	const flood = 600
	for i := range flood {
		if _, err := in.Introspect(t.Context(), fmt.Sprintf("flood-%d", i), nil); !errors.Is(err, introspect.ErrInactive) {
			t.Fatalf("flood-%d: %v", i, err)
		}
	}
	if st := in.Stats(); st.Inactive != negSize || st.Active != 1 {
		t.Errorf("cached answers %+v, want %d inactive (the bound) and the one active", st, negSize)
	}
	latest, oldest := fmt.Sprintf("flood-%d", flood-1), "flood-0"
	for _, tok := range []string{latest, oldest} {
		if _, err := in.Introspect(t.Context(), tok, nil); !errors.Is(err, introspect.ErrInactive) {
			t.Fatalf("%s again: %v", tok, err)
		}
	}
	if as.Calls(latest) != 1 || as.Calls(oldest) != 2 {
		t.Errorf("calls: the latest token %d (want 1, remembered), the oldest %d (want 2, forgotten)", as.Calls(latest), as.Calls(oldest))
	}
	if got, err := in.Introspect(t.Context(), "good", nil); err != nil || got.Subject != "alice" || as.Calls("good") != 1 {
		t.Errorf("the valid caller's answer was evicted by the flood: %v, %v, calls %d", got, err, as.Calls("good"))
	}
}

func TestDiscovery(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	as.Set("tok", map[string]any{"sub": "alice"})
	in := newIntrospector(t, as, c, func(cfg *introspect.Config) { cfg.Endpoint = "" })
	if got, err := in.Introspect(t.Context(), "tok", nil); err != nil || got.Subject != "alice" {
		t.Fatalf("discovered endpoint: %v, %v", got, err)
	}

	other := introspecttest.New(t, introspecttest.Options{})
	other.Close()
	bad := newIntrospector(t, other, c, func(cfg *introspect.Config) { cfg.Endpoint = "" })
	if _, err := bad.Introspect(t.Context(), "tok", nil); !errors.Is(err, introspect.ErrUnavailable) || !strings.Contains(err.Error(), "discovery") {
		t.Fatalf("failed discovery: %v", err)
	}
}

func TestClientAuthAndHint(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	as.Set("tok", map[string]any{"sub": "alice"})
	tests := []struct {
		name     string
		auth     oauthclient.Config
		hint     string
		wantErr  error
		wantHint string
	}{
		{"basic, default hint", basicAuth(), "", nil, "access_token"},
		{"post, no hint", oauthclient.Config{Method: oauthclient.ClientSecretPost, ClientID: introspecttest.ClientID, ClientSecret: introspecttest.ClientSecret}, "-", nil, ""},
		{"other hint", basicAuth(), "refresh_token", nil, "refresh_token"},
		{"wrong secret", oauthclient.Config{ClientID: introspecttest.ClientID, ClientSecret: "wrong"}, "", introspect.ErrUnavailable, "access_token"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := newIntrospector(t, as, c, func(cfg *introspect.Config) { cfg.Auth = tc.auth; cfg.TokenTypeHint = tc.hint })
			_, err := in.Introspect(t.Context(), "tok", nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "wrong") {
				t.Errorf("error text leaks the secret: %q", err)
			}
			if h := as.Hints(); err == nil && h[len(h)-1] != tc.wantHint {
				t.Errorf("token_type_hint = %q, want %q", h[len(h)-1], tc.wantHint)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		cfg  introspect.Config
		want string
	}{
		{"no name", introspect.Config{Endpoint: "https://as.example/i"}, "name is required"},
		{"no endpoint nor issuer", introspect.Config{Name: "x"}, "endpoint or an issuer"},
		{"endpoint not http", introspect.Config{Name: "x", Endpoint: "ftp://as.example/i"}, "endpoint"},
		{"bad client auth", introspect.Config{Name: "x", Endpoint: "https://as.example/i", Auth: oauthclient.Config{Method: "tls_client_auth"}}, "unknown client authentication method"},
		{"JWT responses without issuer", introspect.Config{Name: "x", Endpoint: "https://as.example/i", Auth: basicAuth(), ResponseKeys: staticKeys{}}, "need the issuer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := introspect.New(tc.cfg, introspect.Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// staticKeys is one public key.
type staticKeys struct{ k testtoken.Key }

func (s staticKeys) Key(_ context.Context, kid string, _ bool, alg string) (any, error) {
	if kid != s.k.KID || alg != s.k.Alg {
		return nil, jwtauth.ErrUnknownKey
	}
	return s.k.Private.Public(), nil
}

func TestJWTResponse(t *testing.T) {
	c := testclock.New(epoch)
	key := testtoken.EC(t, "as-1")
	signed := introspecttest.New(t, introspecttest.Options{Now: c.Now, Key: &key})
	signed.Set("tok", map[string]any{"sub": "alice", "scope": "read"})
	plain := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	plain.Set("tok", map[string]any{"sub": "alice"})
	sources := jwtauth.NewSources(t.Context(), jwtauth.Options{})
	keySet, err := sources.KeySet(t.Context(), jwtauth.IssuerSpec{Name: "as", Issuer: signed.URL, JWKSFile: testtoken.WriteJWKS(t, t.TempDir(), key)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(keySet.Close)
	wrongKey := staticKeys{testtoken.EC(t, "as-1")}

	tests := []struct {
		name    string
		as      *introspecttest.Server
		keys    introspect.KeyLookup
		fault   introspecttest.Fault
		advance time.Duration
		wantErr error
	}{
		{"signed, verified with the key set", signed, keySet, introspecttest.None, 0, nil},
		{"signed, inactive", signed, keySet, introspecttest.None, 0, nil},
		{"signed by another key", signed, wrongKey, introspecttest.None, 0, introspect.ErrUnavailable},
		{"plain JSON when a JWT was asked for", plain, keySet, introspecttest.None, 0, introspect.ErrUnavailable},
		{"a JWT nobody asked for", signed, nil, introspecttest.WrongType, 0, introspect.ErrUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.as.SetFault(tc.fault)
			defer tc.as.SetFault(introspecttest.None)
			in := newIntrospector(t, tc.as, c, func(cfg *introspect.Config) {
				cfg.Endpoint = tc.as.IntrospectURL
				cfg.Issuer = tc.as.URL
				if tc.keys != nil {
					cfg.ResponseKeys = tc.keys
				}
			})
			tok := "tok"
			if strings.Contains(tc.name, "inactive") {
				tok = "nobody"
			}
			got, err := in.Introspect(t.Context(), tok, nil)
			if tok == "nobody" {
				if !errors.Is(err, introspect.ErrInactive) {
					t.Fatalf("err = %v, want inactive", err)
				}
				return
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && (got.Subject != "alice" || got.Raw["scope"] != "read") {
				t.Errorf("claims = %+v", got)
			}
		})
	}
}

// TestWaitEndsWithContext: a caller whose request ends stops waiting; the
// call goes on and its answer is cached for the next caller.
func TestWaitEndsWithContext(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	as.Set("tok", map[string]any{"sub": "alice"})
	in := newIntrospector(t, as, c, nil)
	as.Hold()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := in.Introspect(ctx, "tok", nil); !errors.Is(err, introspect.ErrUnavailable) {
		t.Fatalf("err = %v, want unavailable", err)
	}
	as.Release()
	for range 100 { // bounded: the flight finishes in well under a second
		if in.Stats().Active == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := in.Introspect(t.Context(), "tok", nil); err != nil || as.Calls("tok") != 1 {
		t.Fatalf("after the late answer: %v, calls %d", err, as.Calls("tok"))
	}
}

// TestIntrospectNoStore: introspecting without storing asks the endpoint
// each time, keeps no answer (active or inactive) and moves no counter;
// an answer Introspect cached is read without a call.
func TestIntrospectNoStore(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	in := newIntrospector(t, as, c, func(cfg *introspect.Config) { cfg.CacheTTL = time.Minute; cfg.NegativeTTL = time.Minute })
	as.Set("tok", map[string]any{"sub": "alice", "exp": float64(epoch.Add(time.Hour).Unix())})
	steps := []struct {
		name      string
		store     bool
		token     string
		wantErr   error
		wantCalls int
	}{
		{"no store asks", false, "tok", nil, 1},
		{"no store asks again", false, "tok", nil, 2},
		{"inactive, no store", false, "gone", introspect.ErrInactive, 1},
		{"inactive, no store, again", false, "gone", introspect.ErrInactive, 2},
		{"introspect asks: nothing was kept", true, "tok", nil, 3},
		{"no store reads the cached answer", false, "tok", nil, 3},
	}
	for _, s := range steps {
		before := in.Stats()
		ask := in.IntrospectNoStore
		if s.store {
			ask = in.Introspect
		}
		claims, err := ask(t.Context(), s.token, nil)
		if !errors.Is(err, s.wantErr) || (err == nil && claims.Subject != "alice") {
			t.Fatalf("%s: %v, %v", s.name, claims, err)
		}
		if n := as.Calls(s.token); n != s.wantCalls {
			t.Fatalf("%s: endpoint calls %d, want %d", s.name, n, s.wantCalls)
		}
		if !s.store && in.Stats() != before {
			t.Fatalf("%s: stats moved %+v -> %+v", s.name, before, in.Stats())
		}
	}
}

// TestFullSlotsAnswerAtOnce: with every call slot taken by a hung
// endpoint, another token is answered unavailable at once instead of
// waiting in line, and the endpoint is not asked about it.
func TestFullSlotsAnswerAtOnce(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	as.Set("held", map[string]any{"sub": "alice"})
	as.Set("next", map[string]any{"sub": "bob"})
	in := newIntrospector(t, as, c, func(cfg *introspect.Config) { cfg.MaxConcurrent = 1; cfg.Timeout = 5 * time.Second })
	as.Hold()
	defer as.Release()
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the caller leaves; its flight holds the one slot
	_, _ = in.Introspect(ctx, "held", nil)
	for range 100 { // bounded: the flight reaches the endpoint at once
		if as.Calls("held") == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	_, err := in.Introspect(t.Context(), "next", nil)
	if !errors.Is(err, introspect.ErrUnavailable) || as.Calls("next") != 0 {
		t.Fatalf("err = %v, calls %d: want unavailable without a call", err, as.Calls("next"))
	}
	if waited := time.Since(start); waited >= 5*time.Second {
		t.Fatalf("waited %v for a slot", waited)
	}
}

// TestDPoPTokenType: an authorization server reports a DPoP-bound token's
// token_type as "DPoP" (RFC 9449 registers it as an access token type) next
// to its cnf.jkt, which the binding stage then holds the request to. Such a
// token is an access token like a Bearer one; a "DPoP" token without the
// jkt it is bound to could be checked against nothing and is refused.
func TestDPoPTokenType(t *testing.T) {
	c := testclock.New(epoch)
	as := introspecttest.New(t, introspecttest.Options{Now: c.Now})
	in := newIntrospector(t, as, c, nil)
	jkt := map[string]any{"jkt": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}
	tests := []struct {
		name    string
		answer  map[string]any
		wantErr error
	}{
		{name: "DPoP with its jkt", answer: map[string]any{"sub": "alice", "token_type": "DPoP", "cnf": jkt}},
		{name: "dpop in lower case", answer: map[string]any{"sub": "alice", "token_type": "dpop", "cnf": jkt}},
		{name: "Bearer with a jkt", answer: map[string]any{"sub": "alice", "token_type": "Bearer", "cnf": jkt}},
		{name: "DPoP without cnf", answer: map[string]any{"sub": "alice", "token_type": "DPoP"}, wantErr: jwtauth.ErrType},
		{name: "DPoP bound to a certificate only", answer: map[string]any{"sub": "alice", "token_type": "DPoP",
			"cnf": map[string]any{"x5t#S256": "0ZcOCORZNYy-DWpqq30jZyJGHTN0d2HglBV3uiguA4I"}}, wantErr: jwtauth.ErrType},
		{name: "DPoP with a jkt not a string", answer: map[string]any{"sub": "alice", "token_type": "DPoP", "cnf": map[string]any{"jkt": 1}},
			wantErr: jwtauth.ErrType},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			token := fmt.Sprint("dpop-", i)
			as.Set(token, tc.answer)
			got, err := in.Introspect(t.Context(), token, nil)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if err == nil && !reflect.DeepEqual(got.Raw["cnf"], tc.answer["cnf"]) {
				t.Fatalf("cnf = %v, want %v", got.Raw["cnf"], tc.answer["cnf"])
			}
		})
	}
}
