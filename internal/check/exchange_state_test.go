package check

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
)

// exchangeFixture is a pipeline with one MCP route whose tools/call are
// exchanged at a test STS; extra is added to the exchange's settings.
func exchangeFixture(t *testing.T, extra string) (*Pipeline, *ststest.Server, func(jwt.MapClaims) string) {
	t.Helper()
	clk := newClock()
	sts := ststest.New(t, ststest.Options{Now: clk.Now, Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_basic", Secret: "sts-secret"}}})
	doc := fmt.Sprintf(`
issuers:
  - {name: dex, issuer: https://dex.example.com, algorithms: [HS256], secret: %[1]s}
exchanges:
  - {name: sts, token_endpoint: %[2]s, %[3]s client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [dex]
    exchange:
      sts: sts
      audience: [https://files.example.com]
      methods: [tools/call]
`, secret, sts.TokenURL, extra)
	env := map[string]string{"STS_SECRET": "sts-secret"}
	pl := newPipeline(t, doc, Deps{Now: clk.Now, Getenv: func(k string) string { return env[k] }, HTTPClient: sts.Client()}, Options{Now: clk.Now})
	_, mint := agentPipeline(t, "", nil)
	return pl, sts, mint
}

const readFileCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"}}`

// TestExchangeCacheBoundPerUser: the exchanged-token cache is keyed by,
// among others, the client-chosen Mcp-Session-Id, so one user making up
// session ids gets a new entry (and an STS call) for each. Each user holds
// at most a bound of entries, a new one beyond it replacing the user's own
// oldest: a flood pushes nobody else's token out (threat model section 6).
func TestExchangeCacheBoundPerUser(t *testing.T) {
	cases := []struct {
		name  string
		extra string
		bound int // bob's entries the cache keeps
		flood int // bob's calls, each in a fresh session of his own
	}{
		{"default bound, bob fills the cache", "cache_size: 16,", 4, 16},
		{"default bound, bob fills it twice over", "cache_size: 16,", 4, 32},
		{"cache_per_subject", "cache_size: 16, cache_per_subject: 2,", 2, 16},
		{"cache_per_subject above a quarter of the cache", "cache_size: 16, cache_per_subject: 10,", 4, 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pl, sts, mint := exchangeFixture(t, c.extra)
			alice, bob := mint(jwt.MapClaims{"sub": "alice"}), mint(jwt.MapClaims{"sub": "bob"})
			// cached runs a call and reports whether the STS was spared.
			cached := func(tok, sid string) bool {
				t.Helper()
				before := sts.Calls()
				if v := pl.Check(context.Background(), call("mcp.example.com", tok, Headers{"mcp-session-id": sid}, readFileCall)); v.Outcome != Allowed {
					t.Fatalf("%v: %s", v.Outcome, v.Description)
				}
				return sts.Calls() == before
			}
			cached(alice, "alice-session")
			if !cached(alice, "alice-session") {
				t.Fatal("alice's second call was not served from the cache")
			}
			for j := range c.flood {
				cached(bob, fmt.Sprint("bob-", j))
			}
			if !cached(alice, "alice-session") {
				t.Fatalf("bob's %d calls, one per made-up session, pushed alice's exchanged token out of the cache", c.flood)
			}
			for j := c.flood - c.bound; j < c.flood; j++ {
				if !cached(bob, fmt.Sprint("bob-", j)) {
					t.Fatalf("bob's session %d, among his newest %d, was not cached", j, c.bound)
				}
			}
			if cached(bob, fmt.Sprint("bob-", c.flood-c.bound-1)) {
				t.Fatalf("bob holds more than %d cached exchanges", c.bound)
			}
		})
	}
}

// TestInvalidateSessionDropsExchangedTokens: InvalidateSession(id) drops
// the exchanged tokens of the session id names, whether it is the grant's
// (the token's session_id or sid claim: an OIDC logout, say) or the MCP
// session they were exchanged in. Otherwise the next call is served the
// token exchanged before, without asking the STS, which now refuses the
// session.
func TestInvalidateSessionDropsExchangedTokens(t *testing.T) {
	pl, sts, mint := exchangeFixture(t, "")
	cases := []struct {
		name, claim string
		mcpSessions []string // the calls' Mcp-Session-Id ("": none)
		byMCP       bool     // invalidate the (first) MCP session id, not the token's
	}{
		{"session_id claim, no MCP session", "session_id", []string{""}, false},
		{"sid claim, no MCP session", "sid", []string{""}, false},
		{"session_id claim, in an MCP session", "session_id", []string{"mcp-1"}, false},
		{"session_id claim, in two MCP sessions", "session_id", []string{"mcp-2", "mcp-3"}, false},
		{"by its MCP session id", "session_id", []string{"mcp-4"}, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sess := fmt.Sprint("oidc-session-", i)
			tok := mint(jwt.MapClaims{"sub": fmt.Sprint("user-", i), c.claim: sess})
			check := func(mcp string) Verdict {
				h := Headers{}
				if mcp != "" {
					h["mcp-session-id"] = mcp
				}
				return pl.Check(context.Background(), call("mcp.example.com", tok, h, readFileCall))
			}
			for _, m := range c.mcpSessions {
				if v := check(m); v.Outcome != Allowed {
					t.Fatalf("%v: %s", v.Outcome, v.Description)
				}
			}
			target := sess
			if c.byMCP {
				target = c.mcpSessions[0]
			}
			d := pl.InvalidateSession(context.Background(), target)
			if d.ExchangedTokens != len(c.mcpSessions) {
				t.Errorf("InvalidateSession(%q) dropped %d exchanged tokens, want %d", target, d.ExchangedTokens, len(c.mcpSessions))
			}
			// The STS refuses the session from now on.
			sts.SetFailure("https://files.example.com", ststest.Failure{Code: "invalid_grant", Description: "session ended"})
			defer sts.SetFailure("https://files.example.com", ststest.Failure{})
			for _, m := range c.mcpSessions {
				if v := check(m); v.Outcome == Allowed {
					t.Fatalf("after InvalidateSession(%q) the call in MCP session %q was allowed with the token exchanged before", target, m)
				}
			}
		})
	}
}

// TestReauthorizationDropsTheCallersTokens: an upstream refusal answered
// with re-authorization drops the caller's exchanged tokens of the call's
// MCP session, or of none without one (A2A, stateless MCP), locally and in
// the shared tier, so the retry gets a fresh one. On a route without
// session binding anybody may name any session id: nobody else's tokens in
// that session are dropped.
func TestReauthorizationDropsTheCallersTokens(t *testing.T) {
	srv := redistest.Start(t)
	sts := ststest.New(t, ststest.Options{Now: func() time.Time { return t0 }, Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_basic", Secret: "sts-secret"}}})
	doc := fmt.Sprintf(`
issuers: [{name: a, secret: %s}]
exchanges:
  - {name: sts, token_endpoint: %s, client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [a]
    response_path: true
    mcp: {session_binding: false}
    exchange: {sts: sts, audience: [https://files.example.com], methods: [tools/call], authorize_url: "https://idp.example.com/authorize"}
`, secret, sts.TokenURL)
	// Two replicas on one Redis: b's local cache is empty, so what it
	// serves comes from the shared tier.
	replica := func() *Pipeline {
		st, err := shared.New(t.Context(), shared.Config{Addrs: []string{srv.Addr}, OpTimeout: time.Second, EncryptionKey: []byte("0123456789abcdef0123456789abcdef")}, shared.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		pl, _ := responsePipelineWith(t, doc, Deps{Getenv: func(string) string { return "sts-secret" }, HTTPClient: sts.Client(), Shared: st}, st)
		return mustLoad(t, pl)
	}
	ctx := context.Background()
	cases := []struct {
		name          string
		owner, caller string
		session       string
		dropped       bool // the owner's token is gone from both tiers
	}{
		{"the caller's own, in an MCP session", "alice-1", "alice-1", "s-1", true},
		{"the caller's own, without an MCP session", "alice-2", "alice-2", "", true},
		{"another user's, in the session the caller names", "alice-3", "mallory", "s-3", false},
		{"another user's, without an MCP session", "alice-4", "mallory", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := replica(), replica()
			owner := responseToken(t, c.owner, nil)
			h := Headers{}
			if c.session != "" {
				h["mcp-session-id"] = c.session
			}
			const toolCall = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file"}}`
			// stsCalled runs the owner's call on pl and reports whether it
			// asked the STS.
			stsCalled := func(pl *Pipeline) bool {
				t.Helper()
				before := sts.Calls()
				if v := pl.Check(ctx, call("mcp.example.com", owner, h, toolCall)); v.Outcome != Allowed {
					t.Fatalf("%v: %s", v.Outcome, v.Description)
				}
				return sts.Calls() != before
			}
			if !stsCalled(a) {
				t.Fatal("the first call did not exchange")
			}
			x, err := a.ForResponse(ctx, call("mcp.example.com", responseToken(t, c.caller, nil), h, toolCall), &Identity{Route: "files", Outcome: "allowed", Subject: c.caller, Issuer: "a"})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := x.Reauthorization(ctx); !ok {
				t.Fatal("no re-authorization answer")
			}
			if c.dropped {
				// A local miss looks in the shared tier first: an STS call
				// says both dropped the token.
				if !stsCalled(a) {
					t.Error("the retry was served the token exchanged before")
				}
				return
			}
			if stsCalled(b) {
				t.Error("the owner's token was dropped from the shared tier")
			}
			if stsCalled(a) {
				t.Error("the owner's token was dropped from the replica's cache")
			}
		})
	}
}
