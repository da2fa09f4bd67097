package check

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/ratelimit"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// limitedConfig is an MCP route with a per-user limit and a per-user-and-tool
// limit on one rule.
func limitedConfig(routeBurst int) string {
	return fmt.Sprintf(`issuers: [{name: dev, algorithms: [HS256], secret: %s}]
routes:
- name: tools
  default: true
  issuers: [dev]
  protocol: mcp
  limits: [{key: subject, requests: 60, per: 1m, burst: %d}]
  rules:
  - {name: deploy, methods: [tools/call], names: [deploy], limits: [{key: subject_tool, requests: 1, per: 1h}]}
  - {name: no-delete, methods: [tools/call], names: [delete_*], action: deny}
  - {name: everything, methods: ["*"]}
`, secret, routeBurst)
}

// rateObserver counts rate limit decisions by route, key and result.
type rateObserver struct {
	mu     sync.Mutex
	counts map[string]int
}

func (o *rateObserver) Checked(string, Outcome, time.Duration) {}
func (o *rateObserver) SessionConflict(string)                 {}
func (o *rateObserver) RateLimitDecided(route, key string, limited bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.counts[fmt.Sprint(route, "/", key, "/", limited)]++
}

func newLimited(t *testing.T, clk *clock, obs Observer) (*Pipeline, func(string) *Policy) {
	t.Helper()
	compile := func(doc string) *Policy {
		cfg, err := config.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		p, err := Compile(t.Context(), cfg, Deps{Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pl, err := New(compile(limitedConfig(3)), Options{Now: clk.Now, Observer: obs,
		RateLimiter: ratelimit.New(ratelimit.Options{Clock: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Policy().Close() })
	return pl, compile
}

func toolCall(tok string, id int, tool string) *Request {
	return call("mcp.example.com", tok, nil, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q}}`, id, tool))
}

// TestRateLimits: the route's limit counts each user's requests, the rule's
// only the calls it decided; beyond a limit the answer is 429 with
// Retry-After and a JSON-RPC error carrying the request's id; counts are
// by route and key kind; a reload keeps the counts and applies new numbers.
func TestRateLimits(t *testing.T) {
	clk := newClock()
	obs := &rateObserver{counts: map[string]int{}}
	pl, compile := newLimited(t, clk, obs)
	f := &fixture{pl: pl, clock: clk}
	alice, bob := f.hs(t, nil), f.hs(t, map[string]any{"sub": "bob"})

	steps := []struct {
		name    string
		req     *Request
		outcome Outcome
		limit   string
	}{
		{"first deploy", toolCall(alice, 1, "deploy"), Allowed, ""},
		{"second deploy: the rule's limit", toolCall(alice, 2, "deploy"), RateLimited, "tools/rules[0]/limits[0]"},
		{"search: another rule, no tool limit", toolCall(alice, 3, "search"), Allowed, ""},
		{"bob's deploy: his own count", toolCall(bob, 4, "deploy"), Allowed, ""},
		{"alice beyond the route's burst of 3", toolCall(alice, 5, "search"), RateLimited, "tools/limits[0]"},
	}
	for _, s := range steps {
		v := pl.Check(context.Background(), s.req)
		if v.Outcome != s.outcome || v.RateLimit != s.limit {
			t.Fatalf("%s: %v (limit %q), want %v (%q)", s.name, v.Outcome, v.RateLimit, s.outcome, s.limit)
		}
		if s.outcome != RateLimited {
			continue
		}
		if v.Status() != 429 {
			t.Errorf("%s: status %d", s.name, v.Status())
		}
		if ra, ok := header(v.ResponseHeaders, "retry-after"); !ok || ra == "0" {
			t.Errorf("%s: retry-after %q", s.name, ra)
		}
		var body struct {
			ID    int `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					Error string `json:"error"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(v.Body, &body); err != nil || body.Error.Code != -32000 || body.Error.Data.Error != "rate_limited" {
			t.Errorf("%s: body %s (%v)", s.name, v.Body, err)
		}
		if want := map[string]int{"tools/rules[0]/limits[0]": 2, "tools/limits[0]": 5}[s.limit]; body.ID != want {
			t.Errorf("%s: JSON-RPC id %d, want %d", s.name, body.ID, want)
		}
	}
	// The route's limit refills at its rate: one request a second.
	clk.Advance(time.Second)
	if v := pl.Check(context.Background(), toolCall(alice, 6, "search")); v.Outcome != Allowed {
		t.Errorf("after a second: %v", v.Outcome)
	}
	// A reload with a bigger burst keeps the count (same place in the
	// configuration) and applies the new numbers.
	swap(t, pl, compile(limitedConfig(10))).Close()
	if v := pl.Check(context.Background(), toolCall(alice, 7, "search")); v.Outcome != Allowed {
		t.Errorf("after the reload: %v", v.Outcome)
	}
	if v := pl.Check(context.Background(), toolCall(alice, 8, "deploy")); v.Outcome != RateLimited {
		t.Errorf("the reload forgot the deploy count: %v", v.Outcome)
	}
	// Explain counts nothing.
	for range 20 {
		pl.Explain(context.Background(), toolCall(bob, 9, "search"))
	}
	if v := pl.Check(context.Background(), toolCall(bob, 10, "search")); v.Outcome != Allowed {
		t.Errorf("explain used bob's budget: %v", v.Outcome)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	for k, want := range map[string]int{"tools/subject_tool/true": 2, "tools/subject/true": 1, "tools/subject_tool/false": 2} {
		if obs.counts[k] != want {
			t.Errorf("count %s = %d, want %d (all: %v)", k, obs.counts[k], want, obs.counts)
		}
	}
}

// TestRateLimitsWithoutInjectedLimiter: a pipeline given no limiter
// still enforces the configured limits, on this replica alone: a wiring
// mistake must not turn limits off.
func TestRateLimitsWithoutInjectedLimiter(t *testing.T) {
	clk := newClock()
	cfg, err := config.Parse([]byte(limitedConfig(1)))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(t.Context(), cfg, Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := New(p, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	f := &fixture{pl: pl, clock: clk}
	tok := f.hs(t, nil)
	var limited int
	for i := range 5 {
		if v := pl.Check(context.Background(), toolCall(tok, i, "deploy")); v.Outcome == RateLimited {
			limited++
		}
	}
	if limited == 0 {
		t.Fatal("five requests against a burst of one: none refused")
	}
}

// TestRateLimitsRedisKilled: two replicas share one budget through a real
// redis-server; when it is killed mid-run every check is still answered
// (allowed or 429, never an error or an unavailable), the limit holding
// per replica.
func TestRateLimitsRedisKilled(t *testing.T) {
	srv := redistest.Start(t)
	clk := newClock()
	replica := func() *Pipeline {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rdb.Close() })
		pl, _ := newLimitedWith(t, clk, ratelimit.New(ratelimit.Options{Clock: clk.Now, Redis: rdb, Timeout: time.Second, Backoff: time.Hour}))
		return pl
	}
	a, b := replica(), replica()
	f := &fixture{pl: a, clock: clk}
	tok := f.hs(t, nil)
	outcomes := func(n int) (allowed, limited int) {
		for i := range n {
			pl := a
			if i%2 == 1 {
				pl = b
			}
			switch v := pl.Check(context.Background(), toolCall(tok, i, "search")); v.Outcome {
			case Allowed:
				allowed++
			case RateLimited:
				limited++
			default:
				t.Fatalf("check %d: %v (%s)", i, v.Outcome, v.Description)
			}
		}
		return allowed, limited
	}
	if allowed, _ := outcomes(10); allowed != 3 {
		t.Errorf("with redis the two replicas allowed %d, want the one burst of 3", allowed)
	}
	srv.Kill()
	// Each replica's local count saw half the traffic (its burst of 3 is
	// gone after its first 3 of 5): nothing more passes, nothing fails.
	if allowed, limited := outcomes(10); allowed != 0 || limited != 10 {
		t.Errorf("after the kill: %d allowed, %d limited; want 0 and 10", allowed, limited)
	}
	clk.Advance(2 * time.Second) // two requests' worth on each replica
	if allowed, _ := outcomes(10); allowed != 4 {
		t.Errorf("after the kill and 2s: %d allowed, want 2 per replica", allowed)
	}
}

// compileLimited compiles limitedConfig(burst) on clk's time, closed when
// the test ends.
func compileLimited(t *testing.T, clk *clock, burst int) *Policy {
	t.Helper()
	return compileOn(t, clk, limitedConfig(burst))
}

// compileOn compiles doc on clk's time, closed when the test ends.
func compileOn(t *testing.T, clk *clock, doc string) *Policy {
	t.Helper()
	cfg, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(t.Context(), cfg, Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// newLimitedWith is newLimited with a given limiter.
func newLimitedWith(t *testing.T, clk *clock, l *ratelimit.Limiter) (*Pipeline, func(string) *Policy) {
	t.Helper()
	p := compileLimited(t, clk, 3)
	pl, err := New(p, Options{Now: clk.Now, RateLimiter: l})
	if err != nil {
		t.Fatal(err)
	}
	return pl, nil
}

// TestRateLimitClientIsPerIssuer: a client id names a client of one
// issuer; another issuer's token carrying the same azp (a tenant's own
// identity provider, a partner's) is another client and must not spend its
// budget. Issuers that share one subject space share their clients too.
func TestRateLimitClientIsPerIssuer(t *testing.T) {
	doc := fmt.Sprintf(`
issuers:
  - {name: a, issuer: https://a.example.com, algorithms: [HS256], secret: %[1]s}
  - {name: b, issuer: https://b.example.com, algorithms: [HS256], secret: %[1]s}
  - {name: a2, issuer: https://a2.example.com, algorithms: [HS256], secret: %[1]s, subject_prefix: "a:"}
routes:
  - name: tools
    default: true
    protocol: mcp
    issuers: [a, b, a2]
    limits: [{key: client, requests: 1, per: 1h}]
`, secret)
	clk := newClock()
	pl := newPipeline(t, doc, Deps{Now: clk.Now}, Options{Now: clk.Now})
	mint := func(iss, sub string) string {
		return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": iss, "sub": sub, "azp": "web",
			"iat": t0.Unix(), "exp": t0.Add(time.Hour).Unix()})
	}
	steps := []struct {
		name, tok string
		want      Outcome
	}{
		{"a's web client", mint("https://a.example.com", "alice"), Allowed},
		{"b's client named web: another client", mint("https://b.example.com", "mallory"), Allowed},
		{"a's web client again", mint("https://a.example.com", "carol"), RateLimited},
		{"b's web client again", mint("https://b.example.com", "mallory"), RateLimited},
		{"a2 shares a's subjects, so its clients", mint("https://a2.example.com", "dave"), RateLimited},
	}
	for i, s := range steps {
		if v := pl.Check(context.Background(), toolCall(s.tok, i, "search")); v.Outcome != s.want {
			t.Errorf("%s: %v (%s), want %v", s.name, v.Outcome, v.Description, s.want)
		}
	}
}

// TestRateLimitToolFlood: a subject_tool limit keeps a caller's count of
// the tool it is limited on, however many made-up tools the caller calls
// (its tools beyond the limiter's MaxTools share one count), and the
// limiter's table full of counts still limiting their keys refuses a new
// key with a 429 saying so, never by forgetting one of them.
func TestRateLimitToolFlood(t *testing.T) {
	doc := fmt.Sprintf(`issuers: [{name: dev, algorithms: [HS256], secret: %s}]
routes:
- name: tools
  default: true
  issuers: [dev]
  protocol: mcp
  limits: [{key: subject_tool, requests: 1, per: 1h}]
`, secret)
	const maxKeys, maxTools = 8 * 16, 4 // 8 counts in each of the limiter's 16 shards
	tests := []struct {
		name string
		run  func(t *testing.T, f *fixture, check func(tok, tool string) Verdict)
	}{
		{"made-up tools leave deploy limited", func(t *testing.T, f *fixture, check func(tok, tool string) Verdict) {
			mallory := f.hs(t, map[string]any{"sub": "mallory"})
			if v := check(mallory, "deploy"); v.Outcome != Allowed {
				t.Fatalf("first deploy: %v %s", v.Outcome, v.Description)
			}
			for i := range 1000 {
				check(mallory, fmt.Sprint("junk-", i))
				f.clock.Advance(time.Second)
			}
			if v := check(mallory, "deploy"); v.Outcome != RateLimited || v.Description != "rate limit exceeded" {
				t.Errorf("deploy after 1,000 made-up tools within the hour: %v %q, want limited", v.Outcome, v.Description)
			}
		}},
		{"made-up tools share one count", func(t *testing.T, f *fixture, check func(tok, tool string) Verdict) {
			mallory := f.hs(t, map[string]any{"sub": "mallory"})
			allowed := 0
			for i := range 100 {
				if check(mallory, fmt.Sprint("junk-", i)).Outcome == Allowed {
					allowed++
				}
			}
			if allowed != maxTools+1 {
				t.Errorf("%d of 100 made-up tools allowed at 1 an hour each, want %d counted apart and 1 in the shared count", allowed, maxTools+1)
			}
		}},
		{"a full table refuses a new key, saying so", func(t *testing.T, f *fixture, check func(tok, tool string) Verdict) {
			var full Verdict
			for u := 0; u < 200 && full.Outcome != RateLimited; u++ {
				tok := f.hs(t, map[string]any{"sub": fmt.Sprint("user-", u)})
				for i := range maxTools {
					if v := check(tok, fmt.Sprint("tool-", i)); v.Outcome != Allowed {
						full = v
						break
					}
				}
			}
			if full.Outcome != RateLimited {
				t.Fatal("800 counts fit in a table of 128")
			}
			if full.Status() != 429 || full.Description != "rate limit: too many requests are being counted to count this one; retry later" {
				t.Errorf("full table: %d %q", full.Status(), full.Description)
			}
			if ra, ok := header(full.ResponseHeaders, "retry-after"); !ok || ra == "0" {
				t.Errorf("full table: retry-after %q", ra)
			}
			if v := check(f.hs(t, map[string]any{"sub": "user-0"}), "tool-0"); v.Outcome != RateLimited || v.Description != "rate limit exceeded" {
				t.Errorf("user-0's tool-0 again within the hour: %v %q, want its count kept", v.Outcome, v.Description)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			pl := newPipeline(t, doc, Deps{Now: clk.Now}, Options{Now: clk.Now,
				RateLimiter: ratelimit.New(ratelimit.Options{Clock: clk.Now, MaxKeys: maxKeys, MaxTools: maxTools})})
			f := &fixture{pl: pl, clock: clk}
			n := 0
			tc.run(t, f, func(tok, tool string) Verdict {
				n++
				return pl.Check(context.Background(), toolCall(tok, n, tool))
			})
		})
	}
}

// TestSubjectToolLimitOnAResourceIgnoresItsQuery: a subject_tool limit on
// a resource counts its URI without the query, which a file or object
// server ignores: ?x=0, ?x=1, ... read the same resource on one budget.
func TestSubjectToolLimitOnAResourceIgnoresItsQuery(t *testing.T) {
	clk := newClock()
	p := compileOn(t, clk, fmt.Sprintf(`issuers: [{name: dev, algorithms: [HS256], secret: %s}]
routes:
- name: files
  default: true
  issuers: [dev]
  protocol: mcp
  rules:
  - name: reports
    methods: [resources/read, skills/get]
    names: ["https://files.example.com/*"]
    limits: [{key: subject_tool, requests: 1, per: 1h}]
`, secret))
	pl, err := New(p, Options{Now: clk.Now, RateLimiter: ratelimit.New(ratelimit.Options{Clock: clk.Now})})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pl: pl, clock: clk}
	tok := f.hs(t, nil)
	read := func(method, uri string) Outcome {
		return pl.Check(context.Background(), call("files.example.com", tok, nil,
			`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"uri":"`+uri+`"}}`)).Outcome
	}
	for _, tc := range []struct {
		name, method, uri string
		want              Outcome
	}{
		{"the first read", "resources/read", "https://files.example.com/payroll.pdf", Allowed},
		{"the second", "resources/read", "https://files.example.com/payroll.pdf", RateLimited},
		{"with a made-up query", "resources/read", "https://files.example.com/payroll.pdf?x=0", RateLimited},
		{"with another", "resources/read", "https://files.example.com/payroll.pdf?x=1&y=2", RateLimited},
		{"another resource", "resources/read", "https://files.example.com/budget.pdf", Allowed},
		{"a skill, with a query", "skills/get", "https://files.example.com/s/SKILL.md?v=1", Allowed},
		{"the skill again, with another", "skills/get", "https://files.example.com/s/SKILL.md?v=2", RateLimited},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := read(tc.method, tc.uri); got != tc.want {
				t.Fatalf("%v, want %v", got, tc.want)
			}
		})
	}
}
