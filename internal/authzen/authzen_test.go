package authzen

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/oauthclient"
	"github.com/extauthz/extauthz/internal/testing/authzenpdp"
	"github.com/extauthz/extauthz/internal/testing/testclock"
)

// todoPolicy follows the specification's examples: alice may read todo 1.
func todoPolicy(r authzenpdp.Request) (bool, map[string]any) {
	if r.Subject.Type == "user" && r.Subject.ID == "alice@acmecorp.com" && r.Action.Name == "can_read" && r.Resource.Type == "todo" {
		return true, nil
	}
	return false, map[string]any{"id": "0", "reason_admin": map[string]any{"en": "Request failed policy C076E82F"}, "reason_user": map[string]any{"en-403": "Insufficient privileges."}}
}

func aliceReads() Request {
	return Request{
		Subject:  Subject{Type: "user", ID: "alice@acmecorp.com", Properties: map[string]any{"department": "Sales"}},
		Action:   Action{Name: "can_read"},
		Resource: Resource{Type: "todo", ID: "1"},
		Context:  map[string]any{"time": "1985-10-26T01:22-07:00"},
	}
}

func newClient(t *testing.T, c Config, clock *testclock.Clock) *Client {
	t.Helper()
	o := Options{HTTPClient: &http.Client{}} // one that follows redirects: the client must not
	if clock != nil {
		o.Now = clock.Now
	}
	cl, err := New(c, o)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestEvaluate(t *testing.T) {
	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	c := newClient(t, Config{Endpoint: pdp.Endpoint(), CacheTTL: -1}, nil)
	tests := []struct {
		name   string
		req    func(*Request)
		want   bool
		reason string
	}{
		{"the specification's example", func(*Request) {}, true, ""},
		{"another user", func(r *Request) { r.Subject.ID = "bob@acmecorp.com" }, false, "Request failed policy C076E82F"},
		{"another action", func(r *Request) { r.Action.Name = "can_delete" }, false, "Request failed policy C076E82F"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := aliceReads()
			tt.req(&r)
			d, err := c.Evaluate(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed != tt.want || d.Reason != tt.reason || d.Cached {
				t.Errorf("Evaluate = %+v, want allowed %v reason %q", d, tt.want, tt.reason)
			}
		})
	}
	// The PDP received the request as sent.
	got := pdp.Requests()[0]
	if got.Subject.Type != "user" || got.Subject.ID != "alice@acmecorp.com" || got.Subject.Properties["department"] != "Sales" ||
		got.Action.Name != "can_read" || got.Resource.Type != "todo" || got.Resource.ID != "1" || got.Context["time"] != "1985-10-26T01:22-07:00" {
		t.Errorf("PDP received %+v", got)
	}
}

func TestCache(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	c := newClient(t, Config{Endpoint: pdp.Endpoint(), CacheTTL: time.Minute}, clock)
	ctx := context.Background()
	eval := func() Decision {
		t.Helper()
		d, err := c.Evaluate(ctx, aliceReads())
		if err != nil || !d.Allowed {
			t.Fatalf("Evaluate = %+v, %v", d, err)
		}
		return d
	}
	eval()
	if d := eval(); !d.Cached || pdp.Calls.Load() != 1 {
		t.Fatalf("second evaluation: cached %v, PDP calls %d", d.Cached, pdp.Calls.Load())
	}
	// Another context is another request: the PDP decides it.
	r := aliceReads()
	r.Context = map[string]any{"arguments": map[string]any{"path": "/etc"}}
	if _, err := c.Evaluate(ctx, r); err != nil || pdp.Calls.Load() != 2 {
		t.Fatalf("other context: %v, PDP calls %d", err, pdp.Calls.Load())
	}
	clock.Advance(time.Minute + time.Second)
	if d := eval(); d.Cached || pdp.Calls.Load() != 3 {
		t.Fatalf("after the TTL: cached %v, PDP calls %d", d.Cached, pdp.Calls.Load())
	}
	// Denials are cached as well.
	r = aliceReads()
	r.Subject.ID = "mallory"
	for range 2 {
		if d, err := c.Evaluate(ctx, r); err != nil || d.Allowed {
			t.Fatalf("mallory: %+v, %v", d, err)
		}
	}
	if pdp.Calls.Load() != 4 {
		t.Errorf("PDP calls %d, want 4", pdp.Calls.Load())
	}
	if s := c.Stats(); s.Calls != 4 || s.Hits != 2 {
		t.Errorf("Stats = %+v", s)
	}
}

func TestCacheControl(t *testing.T) {
	tests := []struct {
		header string
		ttl    time.Duration
		want   time.Duration
	}{
		{"", time.Minute, time.Minute},
		{"max-age=10", time.Minute, 10 * time.Second},
		{"public, max-age=600", time.Minute, time.Minute},
		{"max-age=0", time.Minute, 0},
		{"no-store", time.Minute, 0},
		{"No-Cache", time.Minute, 0},
		{"max-age=x", time.Minute, 0},
		{"max-age=-1", time.Minute, 0},
		{"max-age=99999999999999999", time.Minute, time.Minute},
		{"", -1, 0},
	}
	for _, tt := range tests {
		var h []string
		if tt.header != "" {
			h = []string{tt.header}
		}
		if got := cacheTTL(tt.ttl, h); got != tt.want {
			t.Errorf("cacheTTL(%v, %q) = %v, want %v", tt.ttl, tt.header, got, tt.want)
		}
	}

	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	noStore := "no-store"
	pdp.CacheControl.Store(&noStore)
	c := newClient(t, Config{Endpoint: pdp.Endpoint(), CacheTTL: time.Hour}, nil)
	for range 2 {
		if _, err := c.Evaluate(context.Background(), aliceReads()); err != nil {
			t.Fatal(err)
		}
	}
	if pdp.Calls.Load() != 2 {
		t.Errorf("with no-store the PDP was called %d times, want 2", pdp.Calls.Load())
	}
}

func TestSingleFlight(t *testing.T) {
	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	pdp.Hold = make(chan struct{})
	c := newClient(t, Config{Endpoint: pdp.Endpoint()}, nil)
	const n = 16
	var wg sync.WaitGroup
	results := make(chan error, n)
	for range n {
		wg.Go(func() {
			d, err := c.Evaluate(context.Background(), aliceReads())
			if err == nil && !d.Allowed {
				err = errors.New("denied")
			}
			results <- err
		})
	}
	// Let the first call reach the PDP, then release it.
	for pdp.Calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(pdp.Hold)
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Error(err)
		}
	}
	if got := pdp.Calls.Load(); got != 1 {
		t.Errorf("PDP calls = %d, want 1", got)
	}
}

// TestUnavailable: whatever goes wrong with the PDP, nothing is allowed and
// the error asks the client to retry.
func TestUnavailable(t *testing.T) {
	tests := []struct {
		name  string
		setup func(*authzenpdp.PDP)
	}{
		// A 4xx is a refusal, a denial: TestBreakerCountsOnlyPDPFailures.
		{"server error", func(p *authzenpdp.PDP) { p.Status.Store(500) }},
		{"rate limited", func(p *authzenpdp.PDP) { p.Status.Store(429) }},
		{"redirect", func(p *authzenpdp.PDP) {
			// To a PDP that allows everything: not followed.
			other := authzenpdp.Start(func(authzenpdp.Request) (bool, map[string]any) { return true, nil })
			t.Cleanup(other.Close)
			loc := other.Endpoint()
			p.Location.Store(&loc)
			p.Status.Store(http.StatusTemporaryRedirect)
		}},
		{"no decision", func(p *authzenpdp.PDP) { body(p, `{"context": {}}`) }},
		{"null decision", func(p *authzenpdp.PDP) { body(p, `{"decision": null}`) }},
		{"string decision", func(p *authzenpdp.PDP) { body(p, `{"decision": "true"}`) }},
		{"number decision", func(p *authzenpdp.PDP) { body(p, `{"decision": 1}`) }},
		{"not JSON", func(p *authzenpdp.PDP) { body(p, `<html>allow</html>`) }},
		{"an array", func(p *authzenpdp.PDP) { body(p, `[{"decision": true}]`) }},
		{"too large", func(p *authzenpdp.PDP) {
			body(p, `{"decision": true, "context": {"x": "`+strings.Repeat("a", DefaultMaxResponseBytes)+`"}}`)
		}},
		{"too slow", func(p *authzenpdp.PDP) { p.Hold = make(chan struct{}) }},
		{"down", func(p *authzenpdp.PDP) { p.Close() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pdp := authzenpdp.Start(func(authzenpdp.Request) (bool, map[string]any) { return true, nil })
			tt.setup(pdp)
			defer func() {
				if pdp.Hold != nil {
					close(pdp.Hold)
				}
				pdp.Close()
			}()
			c := newClient(t, Config{Endpoint: pdp.Endpoint(), Timeout: 50 * time.Millisecond}, nil)
			d, err := c.Evaluate(context.Background(), aliceReads())
			var ue *UnavailableError
			if d.Allowed || !errors.As(err, &ue) {
				t.Fatalf("Evaluate = %+v, %v; want unavailable", d, err)
			}
			if ue.RetryAfter < time.Second {
				t.Errorf("RetryAfter = %v", ue.RetryAfter)
			}
			// Failures are not cached.
			if s := c.Stats(); s.Hits != 0 || s.Failures != 1 {
				t.Errorf("Stats = %+v", s)
			}
		})
	}
}

func body(p *authzenpdp.PDP, s string) { p.Body.Store(&s) }

func TestCallerGivesUp(t *testing.T) {
	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	pdp.Hold = make(chan struct{})
	c := newClient(t, Config{Endpoint: pdp.Endpoint()}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := c.Evaluate(ctx, aliceReads())
	var ue *UnavailableError
	if d.Allowed || !errors.As(err, &ue) {
		t.Fatalf("Evaluate = %+v, %v; want unavailable", d, err)
	}
	close(pdp.Hold)
	// The call went on without the caller; its decision serves the next.
	for range 1000 {
		if c.Stats().Calls == 1 && pdp.Calls.Load() == 1 {
			if d, err := c.Evaluate(context.Background(), aliceReads()); err == nil && d.Allowed {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Error("the abandoned call's decision never served a later request")
}

func TestBreaker(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	pdp.Status.Store(503)
	c := newClient(t, Config{Endpoint: pdp.Endpoint(), BreakerThreshold: 2, BreakerCooldown: 30 * time.Second}, clock)
	ctx := context.Background()
	for range 2 {
		if _, err := c.Evaluate(ctx, aliceReads()); err == nil {
			t.Fatal("want unavailable")
		}
	}
	_, err := c.Evaluate(ctx, aliceReads())
	var ue *UnavailableError
	if !errors.As(err, &ue) || ue.RetryAfter != 30*time.Second {
		t.Fatalf("open breaker: %v", err)
	}
	if pdp.Calls.Load() != 2 || c.Stats().Rejected != 1 {
		t.Errorf("PDP calls %d, rejected %d; want 2, 1", pdp.Calls.Load(), c.Stats().Rejected)
	}
	// After the cooldown one probe goes out; the PDP is back.
	pdp.Status.Store(0)
	clock.Advance(31 * time.Second)
	if d, err := c.Evaluate(ctx, aliceReads()); err != nil || !d.Allowed {
		t.Fatalf("after the cooldown: %+v, %v", d, err)
	}
}

func TestClientAuth(t *testing.T) {
	const secret = "s3cret-value"
	tests := []struct {
		name    string
		cfg     Config
		require string
		ok      bool
	}{
		{"basic", Config{ClientAuth: oauthclient.Config{ClientID: "extauthz", ClientSecret: secret}}, "Basic ZXh0YXV0aHo6czNjcmV0LXZhbHVl", true},
		{"wrong secret", Config{ClientAuth: oauthclient.Config{ClientID: "extauthz", ClientSecret: "other"}}, "Basic ZXh0YXV0aHo6czNjcmV0LXZhbHVl", false},
		{"none", Config{}, "Basic ZXh0YXV0aHo6czNjcmV0LXZhbHVl", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pdp := authzenpdp.Start(todoPolicy)
			defer pdp.Close()
			pdp.Token = tt.require
			tt.cfg.Endpoint = pdp.Endpoint()
			c := newClient(t, tt.cfg, nil)
			d, err := c.Evaluate(context.Background(), aliceReads())
			if tt.ok != (err == nil && d.Allowed) {
				t.Fatalf("Evaluate = %+v, %v", d, err)
			}
			if err != nil && strings.Contains(err.Error(), secret) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no endpoint", Config{}, "absolute http(s) URL"},
		{"relative", Config{Endpoint: "/access/v1/evaluation"}, "absolute http(s) URL"},
		{"plain http elsewhere", Config{Endpoint: "http://pdp.example.com/access/v1/evaluation"}, "must use https"},
		{"credentials in the URL", Config{Endpoint: "https://u:p@pdp.example.com/x"}, "must not carry credentials"},
		{"form client auth", Config{Endpoint: "https://pdp.example.com/x", ClientAuth: oauthclient.Config{Method: oauthclient.ClientSecretPost, ClientID: "a", ClientSecret: "b"}}, "form body"},
		{"negative timeout", Config{Endpoint: "https://pdp.example.com/x", Timeout: -1}, "timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), "u:p") {
				t.Errorf("the error shows the credentials: %v", err)
			}
		})
	}
	for _, ok := range []string{"https://pdp.example.com/access/v1/evaluation", "http://127.0.0.1:8181/access/v1/evaluation", "http://localhost/x", "http://[::1]/x"} {
		if _, err := (Config{Endpoint: ok}).Validate(); err != nil {
			t.Errorf("Validate(%s) = %v", ok, err)
		}
	}
}

// BenchmarkCachedDecision is a rule's cost on a cache hit: encoding the
// request and hashing it.
func BenchmarkCachedDecision(b *testing.B) {
	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	c, err := New(Config{Endpoint: pdp.Endpoint()}, Options{})
	if err != nil {
		b.Fatal(err)
	}
	r := aliceReads()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if d, err := c.Evaluate(ctx, r); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// TestEvaluateNoStore: an evaluation without storing asks the PDP each
// time, keeps no decision and moves no counter; a decision Evaluate cached
// is read without a call.
func TestEvaluateNoStore(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	c := newClient(t, Config{Endpoint: pdp.Endpoint(), CacheTTL: time.Minute}, clock)
	ctx := context.Background()
	steps := []struct {
		name       string
		eval       func(context.Context, Request) (Decision, error)
		cached     bool
		wantCalls  int64
		wantCounts Stats
	}{
		{"no store asks", c.EvaluateNoStore, false, 1, Stats{}},
		{"no store asks again", c.EvaluateNoStore, false, 2, Stats{}},
		{"evaluate asks: nothing was kept", c.Evaluate, false, 3, Stats{Calls: 1}},
		{"no store reads the cached decision", c.EvaluateNoStore, true, 3, Stats{Calls: 1}},
	}
	for _, s := range steps {
		d, err := s.eval(ctx, aliceReads())
		if err != nil || !d.Allowed || d.Cached != s.cached {
			t.Fatalf("%s: %+v, %v", s.name, d, err)
		}
		if n := pdp.Calls.Load(); n != s.wantCalls {
			t.Fatalf("%s: PDP calls %d, want %d", s.name, n, s.wantCalls)
		}
		if st := c.Stats(); st != s.wantCounts {
			t.Fatalf("%s: stats %+v, want %+v", s.name, st, s.wantCounts)
		}
	}
	// A failing PDP is unavailable to it too, and the breaker learns
	// nothing.
	pdp.Status.Store(500)
	if _, err := c.EvaluateNoStore(ctx, Request{Subject: Subject{Type: "user", ID: "bob"}}); !errors.As(err, new(*UnavailableError)) {
		t.Fatalf("PDP failing: %v", err)
	}
	if st := c.Stats(); st.Failures != 0 {
		t.Fatalf("stats %+v", st)
	}
}
