package check

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/testing/testclock"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

const secret = "test-secret-of-sufficient-length-0123456789"

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

type clock = testclock.Clock

func newClock() *clock { return testclock.New(t0) }

// fixture is a pipeline over a realistic configuration.
type fixture struct {
	pl    *Pipeline
	clock *clock
	rsa   testtoken.Key
}

func newFixture(t testing.TB, extra string) *fixture {
	t.Helper()
	rsaKey := testtoken.RSA(t, "rs1")
	jwks := testtoken.WriteJWKS(t, t.TempDir(), rsaKey)
	doc := fmt.Sprintf(`
issuers:
  - name: dev
    algorithms: [HS256]
    secret: %s
  - name: corp
    issuer: https://idp.example.com
    algorithms: [RS256]
    jwks_file: %s
routes:
  - name: files
    hosts: [files.example.com]
    path_prefix: /mcp
    issuers: [corp]
    audiences: [https://files.example.com/mcp]
    scopes: [files:read]
    resource_metadata: https://files.example.com/.well-known/oauth-protected-resource/mcp
    claim_headers:
      - {claim: email, header: x-user-email}
      - {claim: groups, header: x-user-groups}
  - name: agent
    default: true
    issuers: [dev]
    public_paths: [/.well-known/agent-card.json, /public/*]
    credentials: {header: x-api-token, cookie: at}
%s`, secret, jwks, extra)
	clk := newClock()
	pl := newPipeline(t, doc, Deps{Now: clk.Now}, Options{Now: clk.Now})
	return &fixture{pl: pl, clock: clk, rsa: rsaKey}
}

func (f *fixture) hs(t testing.TB, claims jwt.MapClaims) string {
	base := jwt.MapClaims{"sub": "alice", "session_id": "sess-42", "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return testtoken.HMAC(t, "HS256", secret, base)
}

func (f *fixture) rs(t testing.TB, claims jwt.MapClaims) string {
	base := jwt.MapClaims{"sub": "bob", "iss": "https://idp.example.com", "aud": "https://files.example.com/mcp",
		"scope": "files:read files:write", "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(base, k)
		} else {
			base[k] = v
		}
	}
	return f.rsa.Sign(t, base)
}

func agentReq(headers Headers) *Request {
	h := Headers{":authority": "agent.example.com", ":path": "/a2a", ":method": "POST"}
	for k, v := range headers {
		h[k] = v
	}
	return &Request{Method: "POST", Scheme: "https", Host: "agent.example.com", Path: "/a2a", Headers: h}
}

func filesReq(token string) *Request {
	h := Headers{":authority": "files.example.com", ":path": "/mcp"}
	if token != "" {
		h["authorization"] = "Bearer " + token
	}
	return &Request{Method: "POST", Scheme: "https", Host: "files.example.com", Path: "/mcp", Headers: h}
}

func header(hs []Header, name string) (string, bool) {
	for _, h := range hs {
		if h.Name == name {
			return h.Value, true
		}
	}
	return "", false
}

func has(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestCheck(t *testing.T) {
	f := newFixture(t, "")
	bearer := func(tok string) Headers { return Headers{"authorization": "Bearer " + tok} }
	tests := []struct {
		name      string
		req       func(t *testing.T) *Request
		want      Outcome
		set       map[string]string // headers that must be set upstream
		remove    []string          // headers that must be removed
		challenge string            // substring of WWW-Authenticate
		desc      string            // substring of the description
	}{
		{
			name:   "valid default-route token sets identity",
			req:    func(t *testing.T) *Request { return agentReq(bearer(f.hs(t, nil))) },
			want:   Allowed,
			set:    map[string]string{"x-user-id": "dev:alice", "x-session-id": "sess-42"},
			remove: []string{"authorization"},
		},
		{
			name: "forged x-user-id is overwritten and x-session-id stripped",
			req: func(t *testing.T) *Request {
				h := bearer(f.hs(t, jwt.MapClaims{"session_id": nil}))
				h["x-user-id"] = "mallory"
				h["x-session-id"] = "x"
				return agentReq(h)
			},
			want:   Allowed,
			set:    map[string]string{"x-user-id": "dev:alice"},
			remove: []string{"x-session-id", "authorization"},
		},
		{
			name:      "missing token: challenge without error",
			req:       func(t *testing.T) *Request { return agentReq(nil) },
			want:      MissingToken,
			challenge: `Bearer resource_metadata="https://agent.example.com/.well-known/oauth-protected-resource"`,
		},
		{
			name: "expired",
			req: func(t *testing.T) *Request {
				return agentReq(bearer(f.hs(t, jwt.MapClaims{"exp": t0.Add(-time.Hour).Unix()})))
			},
			want:      InvalidToken,
			challenge: `error="invalid_token", error_description="token is expired"`,
		},
		{
			name: "nbf in the future",
			req: func(t *testing.T) *Request {
				return agentReq(bearer(f.hs(t, jwt.MapClaims{"nbf": t0.Add(time.Hour).Unix()})))
			},
			want: InvalidToken,
			desc: "not valid yet",
		},
		{
			name: "bad signature",
			req: func(t *testing.T) *Request {
				return agentReq(bearer(testtoken.HMAC(t, "HS256", "another-secret-another-secret-another", jwt.MapClaims{"sub": "a", "exp": t0.Add(time.Hour).Unix()})))
			},
			want: InvalidToken,
			desc: "signature",
		},
		{
			name: "CR LF in sub is never a header",
			req: func(t *testing.T) *Request {
				return agentReq(bearer(f.hs(t, jwt.MapClaims{"sub": "alice\r\nx-user-id: root"})))
			},
			want: InvalidToken,
			desc: "control characters",
		},
		{
			name: "space after sub is never trimmed into another user",
			req: func(t *testing.T) *Request {
				return agentReq(bearer(f.hs(t, jwt.MapClaims{"sub": "alice "})))
			},
			want: InvalidToken,
			desc: "starts or ends with white space",
		},
		{
			name: "NUL in session",
			req:  func(t *testing.T) *Request { return agentReq(bearer(f.hs(t, jwt.MapClaims{"session_id": "a\x00b"}))) },
			want: InvalidToken,
		},
		{
			name: "oversized claim",
			req: func(t *testing.T) *Request {
				return agentReq(bearer(f.hs(t, jwt.MapClaims{"session_id": strings.Repeat("s", 2000)})))
			},
			want: InvalidToken,
			desc: "too long",
		},
		{
			name: "object sub",
			req: func(t *testing.T) *Request {
				return agentReq(bearer(f.hs(t, jwt.MapClaims{"sub": map[string]any{"a": 1}})))
			},
			want: InvalidToken,
		},
		{
			name: "no sub",
			req:  func(t *testing.T) *Request { return agentReq(bearer(f.hs(t, jwt.MapClaims{"sub": nil}))) },
			want: InvalidToken,
			desc: "no sub claim",
		},
		{
			name: "malformed authorization",
			req:  func(t *testing.T) *Request { return agentReq(Headers{"authorization": "Bearer a b"}) },
			want: InvalidToken,
		},
		{
			name: "truncated token",
			req:  func(t *testing.T) *Request { tok := f.hs(t, nil); return agentReq(bearer(tok[:len(tok)-10])) },
			want: InvalidToken,
		},
		{
			name: "100 KB token",
			req:  func(t *testing.T) *Request { return agentReq(bearer(strings.Repeat("a", 100<<10))) },
			want: InvalidToken,
		},
		{
			name: "token from alternative header",
			req:  func(t *testing.T) *Request { return agentReq(Headers{"x-api-token": f.hs(t, nil)}) },
			want: Allowed,
			set:  map[string]string{"x-user-id": "dev:alice"},
		},
		{
			name: "token from cookie",
			req:  func(t *testing.T) *Request { return agentReq(Headers{"cookie": "a=b; at=" + f.hs(t, nil)}) },
			want: Allowed,
		},
		{
			name: "public path needs no token and strips identity",
			req: func(t *testing.T) *Request {
				r := agentReq(Headers{"x-user-id": "mallory"})
				r.Method, r.Path = "GET", "/.well-known/agent-card.json"
				return r
			},
			want:   Public,
			remove: []string{"x-user-id", "x-session-id", "authorization"},
		},
		{
			// A POST without a Content-Length may carry a body (HTTP/2)
			// the proxy did not send, which may be a call.
			name: "public path with a body not given needs a token",
			req: func(t *testing.T) *Request {
				r := agentReq(nil)
				r.Path = "/.well-known/agent-card.json"
				return r
			},
			want: MissingToken,
		},
		{
			name: "public path, POST with an empty body",
			req: func(t *testing.T) *Request {
				r := agentReq(Headers{"content-length": "0"})
				r.Path = "/public/x"
				return r
			},
			want: Public,
		},
		{
			name: "public prefix",
			req:  func(t *testing.T) *Request { r := agentReq(nil); r.Method, r.Path = "GET", "/public/x?y=1"; return r },
			want: Public,
		},
		{
			name: "rs256 route with claim headers",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"email": "bob@example.com", "groups": []any{"eng", "admins"}}))
			},
			want:   Allowed,
			set:    map[string]string{"x-user-id": "corp:bob", "x-user-email": "bob@example.com", "x-user-groups": "eng,admins"},
			remove: []string{"x-session-id", "authorization"},
		},
		{
			name: "comma inside one group is never two groups",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"groups": []any{"eng,admins"}}))
			},
			want: InvalidToken,
			desc: "claim groups cannot be carried in a header",
		},
		{
			name: "space around a claim is never trimmed into another value",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"email": " bob@example.com"}))
			},
			want: InvalidToken,
			desc: "claim email starts or ends with white space",
		},
		{
			name: "Unicode space after sub is never trimmed into another user",
			req: func(t *testing.T) *Request {
				return agentReq(bearer(f.hs(t, jwt.MapClaims{"sub": "alice\u00a0"})))
			},
			want: InvalidToken,
			desc: "starts or ends with white space",
		},
		{
			name: "Unicode space around a claim is never trimmed into another value",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"email": "bob@example.com\u2005"}))
			},
			want: InvalidToken,
			desc: "claim email starts or ends with white space",
		},
		{
			name: "Unicode space around one group is never trimmed into another group",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"groups": []any{"eng", "\u3000admins"}}))
			},
			want: InvalidToken,
			desc: "claim groups cannot be carried in a header",
		},
		{
			name: "space around one group is never trimmed into another group",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"groups": []any{"eng", " admins"}}))
			},
			want: InvalidToken,
			desc: "claim groups cannot be carried in a header",
		},
		{
			name: "wrong audience",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"aud": "https://other.example.com"}))
			},
			want:      InvalidToken,
			challenge: `scope="files:read", resource_metadata="https://files.example.com/.well-known/oauth-protected-resource/mcp"`,
		},
		{
			name: "wrong issuer",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"iss": "https://evil.example.com"}))
			},
			want: InvalidToken,
		},
		{
			name: "dev token on corp route",
			req:  func(t *testing.T) *Request { return filesReq(f.hs(t, nil)) },
			want: InvalidToken,
		},
		{
			name:      "missing scope",
			req:       func(t *testing.T) *Request { return filesReq(f.rs(t, jwt.MapClaims{"scope": "files:write"})) },
			want:      InsufficientScope,
			challenge: `error="insufficient_scope"`,
		},
		{
			name: "scp list satisfies scope",
			req: func(t *testing.T) *Request {
				return filesReq(f.rs(t, jwt.MapClaims{"scope": nil, "scp": []any{"files:read"}}))
			},
			want: Allowed,
		},
		{
			name: "context extension names the route",
			req: func(t *testing.T) *Request {
				r := agentReq(bearer(f.rs(t, nil)))
				r.ContextExtensions = map[string]string{"route": "files"}
				return r
			},
			want: Allowed,
			set:  map[string]string{"x-user-id": "corp:bob"},
		},
		{
			name: "context extension naming an unknown route",
			req: func(t *testing.T) *Request {
				r := agentReq(bearer(f.hs(t, nil)))
				r.ContextExtensions = map[string]string{"route": "nope"}
				return r
			},
			want: NoRoute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := f.pl.Check(context.Background(), tt.req(t))
			if v.Outcome != tt.want {
				t.Fatalf("outcome = %v (%s), want %v", v.Outcome, v.Description, tt.want)
			}
			for k, want := range tt.set {
				if got, ok := header(v.Set, k); !ok || got != want {
					t.Errorf("set %s = %q, %v; want %q", k, got, ok, want)
				}
			}
			for _, k := range tt.remove {
				if !has(v.Remove, k) {
					t.Errorf("%s not removed: %v", k, v.Remove)
				}
			}
			for _, h := range v.Set {
				if has(v.Remove, h.Name) {
					t.Errorf("%s both set and removed", h.Name)
				}
			}
			if tt.challenge != "" {
				if got, _ := header(v.ResponseHeaders, "www-authenticate"); !strings.Contains(got, tt.challenge) {
					t.Errorf("challenge %q does not contain %q", got, tt.challenge)
				}
			}
			if tt.desc != "" && !strings.Contains(v.Description, tt.desc) {
				t.Errorf("description %q does not contain %q", v.Description, tt.desc)
			}
			if !v.Outcome.Allow() {
				if v.Status() < 400 || len(v.Body) == 0 {
					t.Errorf("denial without status or body: %d %q", v.Status(), v.Body)
				}
				if _, ok := header(v.ResponseHeaders, "content-type"); !ok {
					t.Error("denial without content-type")
				}
			}
		})
	}
}

func TestNoRouteWithoutDefault(t *testing.T) {
	doc := "issuers: [{name: a, secret: " + secret + "}]\nroutes: [{name: r, hosts: [x.example.com], issuers: [a]}]\n"
	pl := newPipeline(t, doc, Deps{}, Options{})
	v := pl.Check(context.Background(), &Request{Host: "y.example.com", Path: "/", Headers: Headers{}})
	if v.Outcome != NoRoute || v.Status() != 403 {
		t.Fatalf("got %v %d", v.Outcome, v.Status())
	}
}

// countingVerifier counts the verifications that reach the real verifier.
type countingVerifier struct {
	TokenVerifier
	n atomic.Int64
}

func (c *countingVerifier) Verify(ctx context.Context, tok string, iss, aud []string) (*jwtauth.Claims, error) {
	c.n.Add(1)
	return c.TokenVerifier.Verify(ctx, tok, iss, aud)
}

func TestCache(t *testing.T) {
	f := newFixture(t, "cache: {max_entries: 2, negative_ttl: 5s}")
	counter := &countingVerifier{TokenVerifier: f.pl.Policy().verifier.jwt}
	f.pl.Policy().verifier.jwt = counter
	ctx := context.Background()

	good := f.hs(t, jwt.MapClaims{"exp": t0.Add(10 * time.Minute).Unix()})
	expired := f.hs(t, jwt.MapClaims{"exp": t0.Add(-time.Minute).Unix()})
	check := func(tok string) Verdict {
		return f.pl.Check(ctx, agentReq(Headers{"authorization": "Bearer " + tok}))
	}
	steps := []struct {
		name     string
		do       func() Verdict
		want     Outcome
		wantHit  bool
		verifies int64 // total verifications after this step
	}{
		{"first use verifies", func() Verdict { return check(good) }, Allowed, false, 1},
		{"second use is a hit and skips verification", func() Verdict { return check(good) }, Allowed, true, 1},
		{"invalid token verified once", func() Verdict { return check(expired) }, InvalidToken, false, 2},
		{"invalid token cached negatively", func() Verdict { return check(expired) }, InvalidToken, true, 2},
		{"negative entry expires", func() Verdict { f.clock.Set(t0.Add(6 * time.Second)); return check(expired) }, InvalidToken, false, 3},
		{"grant never outlives exp", func() Verdict { f.clock.Set(t0.Add(10 * time.Minute)); return check(good) }, Allowed, false, 4},
		{"expired past the leeway", func() Verdict { f.clock.Set(t0.Add(11 * time.Minute)); return check(good) }, InvalidToken, false, 5},
	}
	for _, s := range steps {
		v := s.do()
		if v.Outcome != s.want || v.CacheHit != s.wantHit || counter.n.Load() != s.verifies {
			t.Fatalf("%s: outcome %v hit %v verifies %d; want %v %v %d", s.name, v.Outcome, v.CacheHit, counter.n.Load(), s.want, s.wantHit, s.verifies)
		}
	}

	// Eviction at the bound: three distinct valid tokens in a cache of two.
	f.clock.Set(t0)
	var toks []string
	for i := range 3 {
		toks = append(toks, f.hs(t, jwt.MapClaims{"sub": fmt.Sprint("user-", i)}))
	}
	for _, tok := range toks {
		check(tok)
	}
	before := counter.n.Load()
	if v := check(toks[0]); v.CacheHit {
		t.Fatal("evicted entry answered from cache")
	}
	if counter.n.Load() != before+1 {
		t.Fatal("evicted entry did not re-verify")
	}
	if s := f.pl.cache.Stats(); s.Size > 2 || s.Evictions == 0 {
		t.Fatalf("cache stats %+v", s)
	}
}

func TestKeysUnavailable(t *testing.T) {
	jwksDown := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	defer jwksDown.Close()
	doc := "issuers: [{name: a, issuer: https://idp.example.com, algorithms: [RS256], jwks_url: " + jwksDown.URL + "}]\nroutes: [{name: r, default: true, issuers: [a]}]\n"
	pl := newPipeline(t, doc, Deps{}, Options{})
	if pl.Policy().Ready() {
		t.Fatal("ready without keys")
	}
	key := testtoken.RSA(t, "k")
	tok := key.Sign(t, jwt.MapClaims{"sub": "a", "iss": "https://idp.example.com", "exp": time.Now().Add(time.Hour).Unix()})
	for range 2 { // the 503 must not be cached
		v := pl.Check(context.Background(), agentReq(Headers{"authorization": "Bearer " + tok}))
		if v.Outcome != Unavailable || v.Status() != 503 || v.CacheHit {
			t.Fatalf("got %v %d hit=%v", v.Outcome, v.Status(), v.CacheHit)
		}
		if ra, _ := header(v.ResponseHeaders, "retry-after"); ra == "" {
			t.Fatal("503 without Retry-After")
		}
	}
}

func TestCancelledCheckFailsClosed(t *testing.T) {
	f := newFixture(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v := f.pl.Check(ctx, agentReq(Headers{"authorization": "Bearer " + f.hs(t, nil)}))
	if v.Outcome.Allow() {
		t.Fatal("cancelled check allowed")
	}
}

func TestReloadKeepsOnlyUnchangedRoutes(t *testing.T) {
	clk := newClock()
	compile := func(agentExtra string) *Policy {
		doc := "issuers: [{name: dev, algorithms: [HS256], secret: " + secret + "}]\n" +
			"routes:\n- {name: other, hosts: [other.example.com], issuers: [dev]}\n- {name: agent, default: true, issuers: [dev]" + agentExtra + "}\n"
		return compileDoc(t, doc, Deps{Now: clk.Now})
	}
	pl, err := New(compile(""), Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pl: pl, clock: clk}
	req := agentReq(Headers{"authorization": "Bearer " + f.hs(t, nil)})
	if v := pl.Check(context.Background(), req); v.CacheHit || v.Outcome != Allowed {
		t.Fatalf("first check: %+v", v)
	}
	swap(t, pl, compile("")).Close()
	if v := pl.Check(context.Background(), req); !v.CacheHit {
		t.Fatal("unchanged route lost its cache entries on reload")
	}
	swap(t, pl, compile(", scopes: [x]")).Close()
	if v := pl.Check(context.Background(), req); v.CacheHit || v.Outcome != InsufficientScope {
		t.Fatalf("changed route answered from the old cache: %v hit=%v", v.Outcome, v.CacheHit)
	}
}

// TestReloadAfterSecretRotation: an HMAC secret read from a file is
// rotated by replacing the file and reloading (a leaked secret). The
// configuration did not change, but what the route's grants depend on
// did: a token signed with the old secret is refused from then on, cached
// or not, and one signed with the new secret is accepted.
func TestReloadAfterSecretRotation(t *testing.T) {
	const rotated = "another-secret-of-sufficient-length-0123456789"
	clk := newClock()
	file := filepath.Join(t.TempDir(), "hmac")
	doc := "issuers: [{name: dev, algorithms: [HS256], secret_file: " + file + "}]\n" +
		"routes:\n- {name: agent, default: true, issuers: [dev]}\n"
	compile := func(secret string) *Policy {
		if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return compileDoc(t, doc, Deps{Now: clk.Now})
	}
	pl, err := New(compile(secret), Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	claims := jwt.MapClaims{"sub": "alice", "iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()}
	leaked := agentReq(Headers{"authorization": "Bearer " + testtoken.HMAC(t, "HS256", secret, claims)})
	for range 2 {
		if v := pl.Check(t.Context(), leaked); v.Outcome != Allowed {
			t.Fatalf("before the rotation: %v %s", v.Outcome, v.Description)
		}
	}
	swap(t, pl, compile(rotated)).Close()
	if v := pl.Check(t.Context(), leaked); v.Outcome != InvalidToken {
		t.Fatalf("a token of the rotated-out secret: %v (cache hit %v), want invalid_token", v.Outcome, v.CacheHit)
	}
	fresh := agentReq(Headers{"authorization": "Bearer " + testtoken.HMAC(t, "HS256", rotated, claims)})
	if v := pl.Check(t.Context(), fresh); v.Outcome != Allowed {
		t.Fatalf("a token of the new secret: %v %s", v.Outcome, v.Description)
	}
}

func TestExplainHasNoSideEffects(t *testing.T) {
	f := newFixture(t, "")
	counter := &countingVerifier{TokenVerifier: f.pl.Policy().verifier.jwt}
	f.pl.Policy().verifier.jwt = counter
	tok := f.hs(t, nil)
	req := func(sess string) *Request {
		return agentReq(Headers{"authorization": "Bearer " + tok, "mcp-session-id": sess})
	}
	for range 2 {
		v, steps := f.pl.Explain(context.Background(), req("s-1"))
		if v.Outcome != Allowed {
			t.Fatalf("explain: %v", v.Outcome)
		}
		names := []string{}
		for _, s := range steps {
			names = append(names, s.Name)
		}
		want := "route credential identity session lineage verdict"
		if got := strings.Join(names, " "); !strings.Contains(got, "route") || !strings.HasSuffix(got, "verdict") || !strings.Contains(got, "identity") {
			t.Fatalf("steps %q, want like %q", got, want)
		}
	}
	if counter.n.Load() != 2 {
		t.Fatalf("explain verified %d times; it must not fill the cache", counter.n.Load())
	}
	if f.pl.state.sessions.Len() != 0 {
		t.Fatal("explain bound a session")
	}
	// A real check binds; explaining another user's use then reports the conflict.
	f.pl.Check(context.Background(), req("s-1"))
	other := agentReq(Headers{"authorization": "Bearer " + f.hs(t, jwt.MapClaims{"sub": "bob"}), "mcp-session-id": "s-1"})
	if v, _ := f.pl.Explain(context.Background(), other); v.Outcome != SessionConflict {
		t.Fatalf("explain of a hijack: %v", v.Outcome)
	}
	if b, _ := f.pl.state.sessions.Lookup(bindingKey(bindSession, "s-1")); b.Subject != "dev:alice" {
		t.Fatal("explain changed the binding")
	}
}

func TestDryRun(t *testing.T) {
	doc := "issuers: [{name: a, secret: " + secret + "}]\nroutes: [{name: r, default: true, issuers: [a], scopes: [x], dry_run: true}]\n"
	var seen []Outcome
	obs := observerFunc(func(route string, o Outcome) { seen = append(seen, o) })
	pl := newPipeline(t, doc, Deps{}, Options{Observer: obs})
	now := func(c jwt.MapClaims) string {
		base := jwt.MapClaims{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()}
		for k, v := range c {
			base[k] = v
		}
		return testHS(t, base)
	}
	tests := []struct {
		name    string
		headers Headers
		real    Outcome
		header  string
		user    string
	}{
		{"would deny a missing token", Headers{"x-user-id": "mallory"}, MissingToken, "would deny: missing_token (401)", ""},
		{"would deny a missing scope", Headers{"authorization": "Bearer " + now(nil)}, InsufficientScope, "would deny: insufficient_scope (403): the token lacks a required scope", ""},
		{"allowed passes as usual", Headers{"authorization": "Bearer " + now(jwt.MapClaims{"scope": "x"})}, Allowed, "allowed", "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen = nil
			v := pl.Check(context.Background(), &Request{Method: "GET", Path: "/", Headers: tt.headers})
			if !v.Outcome.Allow() {
				t.Fatalf("dry run denied: %v", v.Outcome)
			}
			if len(seen) != 1 || seen[0] != tt.real {
				t.Fatalf("counted %v, want the real outcome %v", seen, tt.real)
			}
			set, remove := upstream(v)
			if set[DryRunHeader] != tt.header {
				t.Errorf("%s = %q, want %q", DryRunHeader, set[DryRunHeader], tt.header)
			}
			if set["x-user-id"] != tt.user || (tt.user == "" && !has(remove, "x-user-id")) {
				t.Errorf("identity on a would-deny request: set=%v remove=%v", set, remove)
			}
		})
	}
}

type observerFunc func(route string, o Outcome)

func (f observerFunc) Checked(route string, o Outcome, _ time.Duration) { f(route, o) }
func (f observerFunc) SessionConflict(string)                           {}
