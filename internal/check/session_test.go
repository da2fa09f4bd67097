package check

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// sessionCounter counts session refusals (SessionObserver).
type sessionCounter struct {
	observerFunc
	refused map[string]int
}

func (c *sessionCounter) SessionRefused(route string) { c.refused[route]++ }

func TestSessionRefusedWhenFull(t *testing.T) {
	doc := "issuers: [{name: a, secret: " + secret + "}]\nroutes: [{name: r, default: true, issuers: [a]}]\nsessions: {max_entries: 2, max_per_subject: 1, idle_timeout: 1m}\n"
	clk := newClock()
	obs := &sessionCounter{observerFunc: func(string, Outcome) {}, refused: map[string]int{}}
	pl := newPipeline(t, doc, Deps{Now: clk.Now}, Options{Now: clk.Now, Observer: obs})
	use := func(sub, sid string) Verdict {
		tok := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": sub, "exp": t0.Add(time.Hour).Unix()})
		return pl.Check(context.Background(), agentReq(Headers{"authorization": "Bearer " + tok, "mcp-session-id": sid}))
	}
	steps := []struct {
		name    string
		advance time.Duration
		sub     string
		sid     string
		want    Outcome
		retry   string
	}{
		{"alice binds", 0, "alice", "s-a", Allowed, ""},
		{"bob binds", 20 * time.Second, "bob", "s-b", Allowed, ""},
		{"carol is refused: the store is full", 0, "carol", "s-c", Unavailable, "40"},
		{"alice's second session replaces her first", 0, "alice", "s-a2", Allowed, ""},
		{"alice's first went (her own bound), the store is still full", 0, "carol", "s-a", Unavailable, "60"},
		{"once bob's binding expired, carol binds", time.Minute, "carol", "s-c", Allowed, ""},
	}
	for _, st := range steps {
		clk.Advance(st.advance)
		v := use(st.sub, st.sid)
		if v.Outcome != st.want {
			t.Fatalf("%s: %v (%s), want %v", st.name, v.Outcome, v.Description, st.want)
		}
		if st.retry != "" {
			if got, _ := header(v.ResponseHeaders, "retry-after"); got != st.retry {
				t.Fatalf("%s: Retry-After %q, want %q", st.name, got, st.retry)
			}
		}
	}
	if obs.refused["r"] != 2 {
		t.Fatalf("refusals counted %v, want 2 on route r", obs.refused)
	}
}

func TestPolicyUser(t *testing.T) {
	f := newFixture(t, "")
	p := f.pl.Policy()
	tests := []struct {
		issuer, subject, want string
		ok                    bool
	}{
		{"dev", "alice", "dev:alice", true},
		{"corp", "alice", "corp:alice", true},
		{"https://idp.example.com", "alice", "corp:alice", true},
		{"nope", "alice", "", false},
		{"", "alice", "", false},
		{"dev", "", "", false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.issuer, tc.subject), func(t *testing.T) {
			got, err := p.User(tc.issuer, tc.subject)
			if (err == nil) != tc.ok || got != tc.want {
				t.Fatalf("User = %q, %v; want %q (ok %v)", got, err, tc.want, tc.ok)
			}
		})
	}
}
