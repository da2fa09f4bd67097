package check

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/testing/introspecttest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// credFixture is a pipeline whose routes accept JWTs, opaque tokens and API
// keys in several combinations.
type credFixture struct {
	pl                  *Pipeline
	p                   *Policy
	as                  *introspecttest.Server
	clock               *clock
	key, routedKey, bad string
	// audKey names the audienced route's audience, otherAudKey another.
	audKey, otherAudKey string
}

func newCredFixture(t testing.TB) *credFixture {
	t.Helper()
	clk := newClock()
	as := introspecttest.New(t, introspecttest.Options{Now: clk.Now})
	key, routedKey, bad := mustGenerate(t), mustGenerate(t), mustGenerate(t)
	audKey, otherAudKey := mustGenerate(t), mustGenerate(t)
	keys := filepath.Join(t.TempDir(), "keys.yaml")
	human, err := apikey.Argon2idHash(humanSecret)
	if err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf("keys:\n  - {id: billing, subject: billing-agent, scopes: [tools.call], hash: %s}\n  - {id: routed, subject: routed-agent, hash: %s, routes: [tools]}\n  - {id: alice-cli, subject: alice, hash: '%s'}\n"+
		"  - {id: files-agent, subject: files-agent, hash: %s, claims: {aud: https://files.example.com/mcp}}\n"+
		"  - {id: billing-only, subject: billing-agent, hash: %s, claims: {aud: [https://billing.example.com/mcp]}}\n",
		apikey.SHA256Hash(key), apikey.SHA256Hash(routedKey), human, apikey.SHA256Hash(audKey), apikey.SHA256Hash(otherAudKey))
	if err := os.WriteFile(keys, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgDoc := fmt.Sprintf(`
issuers:
  - name: dev
    algorithms: [HS256]
    secret: %s
  - name: opaque
    issuer: %s
    introspection:
      endpoint: %s
      client_auth: {method: client_secret_basic, client_id: %s, client_secret_env: AS_SECRET}
  - name: keys
    api_keys: {file: %s, header: x-api-key}
  - name: opaque-always
    issuer: %s/always
    introspection:
      endpoint: %s
      always: true
      client_auth: {method: client_secret_basic, client_id: %s, client_secret_env: AS_SECRET}
routes:
  - name: strict
    hosts: [strict.example.com]
    issuers: [dev, opaque-always, keys]
  - name: tools
    hosts: [tools.example.com]
    issuers: [dev, opaque, keys]
  - name: keyed
    hosts: [keyed.example.com]
    issuers: [keys]
  - name: audienced
    hosts: [files.example.com]
    issuers: [keys]
    audiences: [https://files.example.com/mcp]
  - name: jwt-only
    default: true
    issuers: [dev]
`, secret, as.URL, as.IntrospectURL, introspecttest.ClientID, keys, as.URL, as.IntrospectURL, introspecttest.ClientID)
	f, err := config.Parse([]byte(cfgDoc))
	if err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string {
		if k == "AS_SECRET" {
			return introspecttest.ClientSecret
		}
		return ""
	}
	p, err := Compile(t.Context(), f, Deps{Now: clk.Now, Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pl, err := New(p, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return &credFixture{pl: pl, p: p, as: as, clock: clk, key: key, routedKey: routedKey, bad: bad, audKey: audKey, otherAudKey: otherAudKey}
}

// humanSecret is the human-chosen secret of key alice-cli, presented as
// "alice-cli." followed by it.
const humanSecret = "Tr0ub4dor-and-3-more-words"

// TestHumanKeyNeverIntrospected: a key without the ek_ prefix (a
// human-chosen <id>.<secret>) is verified by the route's key issuer, on a
// route that also introspects opaque tokens, and never sent to the
// introspection endpoint: neither with a wrong secret for its id, nor
// whatever is read from the API-key header, which holds keys or JWTs
// verified here. The same token may be refused in that header and valid
// in Authorization: neither verdict is served for the other.
func TestHumanKeyNeverIntrospected(t *testing.T) {
	f := newCredFixture(t)
	f.as.Set("opaque-erin", map[string]any{"sub": "erin"})
	hs := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()})
	bearer := func(tok string) Headers { return Headers{"authorization": "Bearer " + tok} }
	keyHeader := func(tok string) Headers { return Headers{"x-api-key": tok} }
	tests := []struct {
		name    string
		host    string
		h       Headers
		want    Outcome
		subject string
		calls   int // introspections of the token the step presents, after it
	}{
		{"the key", "tools.example.com", bearer("alice-cli." + humanSecret), Allowed, "keys:alice", 0},
		{"the key in its header", "tools.example.com", keyHeader("alice-cli." + humanSecret), Allowed, "keys:alice", 0},
		{"its id, a wrong secret", "tools.example.com", bearer("alice-cli.Tr0ub4dor-and-3-more-word"), InvalidToken, "", 0},
		{"its id, an empty secret", "tools.example.com", bearer("alice-cli."), InvalidToken, "", 0},
		{"a mistyped id in the key header", "tools.example.com", keyHeader("alice-ci." + humanSecret), InvalidToken, "", 0},
		{"an opaque token in the key header", "tools.example.com", keyHeader("opaque-erin"), InvalidToken, "", 0},
		{"the opaque token in Authorization: not the header's refusal", "tools.example.com", bearer("opaque-erin"), Allowed, "opaque:erin", 1},
		{"the opaque token in the key header again: not Authorization's grant", "tools.example.com", keyHeader("opaque-erin"), InvalidToken, "", 1},
		{"a JWT in the key header, verified here", "tools.example.com", keyHeader(hs), Allowed, "dev:alice", 0},
		{"a JWT in the key header of a route that introspects JWTs", "strict.example.com", keyHeader(hs), InvalidToken, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := f.pl.Check(t.Context(), hostReq(tt.host, tt.h))
			if v.Outcome != tt.want || (tt.want == Allowed && v.Grant.Subject != tt.subject) {
				t.Fatalf("%v (%s), grant %+v; want %v as %q", v.Outcome, v.Description, v.Grant, tt.want, tt.subject)
			}
			for _, tok := range tt.h {
				tok = strings.TrimPrefix(tok, "Bearer ")
				if n := f.as.Calls(tok); n != tt.calls {
					t.Errorf("the token was introspected %d times, want %d", n, tt.calls)
				}
				if strings.Contains(v.Description, tok) {
					t.Errorf("the denial shows the credential: %s", v.Description)
				}
			}
		})
	}
}

func mustGenerate(t testing.TB) string {
	k, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func hostReq(host string, h Headers) *Request {
	hs := Headers{":authority": host, ":path": "/mcp", ":method": "GET"}
	for k, v := range h {
		hs[k] = v
	}
	return &Request{Method: "GET", Scheme: "https", Host: host, Path: "/mcp", Headers: hs}
}

func TestCredentialKinds(t *testing.T) {
	f := newCredFixture(t)
	f.as.Set("opaque-carol", map[string]any{"sub": "carol", "scope": "read", "client_id": "cli", "exp": float64(t0.Add(time.Hour).Unix())})
	f.as.Set("opaque-2", map[string]any{"sub": "dave"})
	hs := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()})
	bearer := func(tok string) Headers { return Headers{"authorization": "Bearer " + tok} }

	tests := []struct {
		name      string
		req       *Request
		want      Outcome
		wantUser  string
		desc      string
		wantCalls int // introspection calls made so far, after this case
	}{
		{"JWT on a route with every kind", hostReq("tools.example.com", bearer(hs)), Allowed, "dev:alice", "", 0},
		{"opaque token, introspected", hostReq("tools.example.com", bearer("opaque-carol")), Allowed, "opaque:carol", "", 1},
		{"opaque token again: cached", hostReq("tools.example.com", bearer("opaque-carol")), Allowed, "opaque:carol", "", 1},
		{"inactive opaque token", hostReq("tools.example.com", bearer("revoked-token")), InvalidToken, "", "token is not active", 2},
		{"API key as bearer", hostReq("tools.example.com", bearer(f.key)), Allowed, "keys:billing-agent", "", 2},
		{"API key in its header", hostReq("keyed.example.com", Headers{"x-api-key": f.key}), Allowed, "keys:billing-agent", "", 2},
		{"unknown API key", hostReq("keyed.example.com", bearer(f.bad)), InvalidToken, "", "API key is not valid", 2},
		{"API key on a route without API-key issuers", hostReq("jwt.example.com", bearer(f.key)), InvalidToken, "", "API key is not valid", 2},
		{"API key limited to another route", hostReq("keyed.example.com", bearer(f.routedKey)), InvalidToken, "", "not accepted on this route", 2},
		{"API key limited to this route", hostReq("tools.example.com", bearer(f.routedKey)), Allowed, "keys:routed-agent", "", 2},
		{"API key naming the route's audience", hostReq("files.example.com", bearer(f.audKey)), Allowed, "keys:files-agent", "", 2},
		{"API key naming another audience: refused as a token would be", hostReq("files.example.com", bearer(f.otherAudKey)), InvalidToken, "", "audience", 2},
		{"API key naming another audience, in its header", hostReq("files.example.com", Headers{"x-api-key": f.otherAudKey}), InvalidToken, "", "audience", 2},
		{"API key naming no audience on a route with audiences: the operator's grant", hostReq("files.example.com", bearer(f.key)), Allowed, "keys:billing-agent", "", 2},
		{"API key naming an audience on a route with none", hostReq("keyed.example.com", bearer(f.otherAudKey)), Allowed, "keys:billing-agent", "", 2},
		{"opaque token on an API-key route: never introspected, never a key", hostReq("keyed.example.com", bearer("opaque-2")), InvalidToken, "", "malformed", 2},
		{"opaque token on a JWT route: never introspected", hostReq("jwt.example.com", bearer("opaque-2")), InvalidToken, "", "malformed", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := f.pl.Check(t.Context(), tc.req)
			if v.Outcome != tc.want {
				t.Fatalf("outcome = %v (%s), want %v", v.Outcome, v.Description, tc.want)
			}
			if tc.wantUser != "" {
				if got, _ := header(v.Set, "x-user-id"); got != tc.wantUser {
					t.Errorf("x-user-id = %q, want %q", got, tc.wantUser)
				}
			}
			if tc.desc != "" && !strings.Contains(v.Description, tc.desc) {
				t.Errorf("description = %q, want %q", v.Description, tc.desc)
			}
			if n := f.as.Total(); n != tc.wantCalls {
				t.Errorf("introspection calls = %d, want %d", n, tc.wantCalls)
			}
			if v.Outcome == Allowed && tc.req.Headers["x-api-key"] != "" && !has(v.Remove, "x-api-key") {
				t.Errorf("the API key header goes upstream: remove = %v", v.Remove)
			}
		})
	}
}

func TestExplainNamesTheKind(t *testing.T) {
	f := newCredFixture(t)
	f.as.Set("opaque-carol", map[string]any{"sub": "carol"})
	for tok, want := range map[string]string{f.key: "issuer keys (kind api_keys)", "opaque-carol": "issuer opaque (kind introspection)"} {
		v, steps := f.pl.Explain(t.Context(), hostReq("tools.example.com", Headers{"authorization": "Bearer " + tok}))
		if v.Outcome != Allowed || !strings.Contains(fmt.Sprint(steps), want) {
			t.Errorf("Explain: %v, steps %v; want %q", v.Outcome, steps, want)
		}
	}
}

func TestIntrospectionOutage(t *testing.T) {
	f := newCredFixture(t)
	f.as.Set("known", map[string]any{"sub": "carol"})
	f.as.Set("new", map[string]any{"sub": "dave"})
	bearer := func(tok string) Headers { return Headers{"authorization": "Bearer " + tok} }
	if v := f.pl.Check(t.Context(), hostReq("tools.example.com", bearer("known"))); v.Outcome != Allowed {
		t.Fatalf("before the outage: %v %s", v.Outcome, v.Description)
	}
	f.as.Close()
	v := f.pl.Check(t.Context(), hostReq("tools.example.com", bearer("new")))
	if v.Outcome != Unavailable || !strings.Contains(v.Description, "introspection endpoint unreachable") {
		t.Errorf("unknown token during the outage: %v %q, want unavailable naming the endpoint", v.Outcome, v.Description)
	}
	if ra, _ := header(v.ResponseHeaders, "retry-after"); ra != "1" {
		t.Errorf("Retry-After = %q, want 1", ra)
	}
	if v := f.pl.Check(t.Context(), hostReq("tools.example.com", bearer("known"))); v.Outcome != Allowed {
		t.Errorf("cached token during the outage: %v %s", v.Outcome, v.Description)
	}
	if n := f.p.DropIntrospections("carol"); n != 1 {
		t.Errorf("DropIntrospections = %d, want 1", n)
	}
}

func TestPeerRoutes(t *testing.T) {
	doc := fmt.Sprintf(`
issuers:
  - name: dev
    algorithms: [HS256]
    secret: %s
  - name: mesh
    peer:
      trust_domains: [cluster.local]
      paths: ["/ns/agents/sa/*"]
      subject: "{{index .Segments 1}}.{{index .Segments 3}}"
      xfcc_from: [10.0.0.0/24]
routes:
  - name: mesh-only
    hosts: [mesh.example.com]
    issuers: [mesh]
  - name: user-and-agent
    hosts: [both.example.com]
    issuers: [dev, mesh]
  - name: jwt-only
    default: true
    issuers: [dev]
`, secret)
	f, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	clk := newClock()
	p, err := Compile(t.Context(), f, Deps{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pl, err := New(p, Options{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"sub": "alice", "exp": t0.Add(time.Hour).Unix()})
	const billing = "spiffe://cluster.local/ns/agents/sa/billing"
	req := func(host, principal, token string) *Request {
		h := Headers{}
		if token != "" {
			h["authorization"] = "Bearer " + token
		}
		r := hostReq(host, h)
		r.SourcePrincipal = principal
		return r
	}
	xfcc := func(from, header string) *Request {
		r := hostReq("mesh.example.com", Headers{"x-forwarded-client-cert": header})
		r.PeerAddr = netip.MustParseAddr(from)
		return r
	}
	tests := []struct {
		name     string
		req      *Request
		want     Outcome
		wantUser string
		desc     string
	}{
		{"workload on a peer route", req("mesh.example.com", billing, ""), Allowed, "mesh:agents.billing", ""},
		{"again: cached", req("mesh.example.com", billing, ""), Allowed, "mesh:agents.billing", ""},
		{"no certificate", req("mesh.example.com", "", ""), InvalidToken, "", "no peer identity"},
		{"another trust domain", req("mesh.example.com", "spiffe://evil.example/ns/agents/sa/billing", ""), InvalidToken, "", "trust domain"},
		{"a path not allowed", req("mesh.example.com", "spiffe://cluster.local/ns/default/sa/x", ""), InvalidToken, "", "not accepted"},
		{"a token does not stand in for the workload", req("mesh.example.com", "", hs), InvalidToken, "", "no peer identity"},
		{"user and agent: both", req("both.example.com", billing, hs), Allowed, "dev:alice", ""},
		{"user and agent: no agent", req("both.example.com", "", hs), InvalidToken, "", "no peer identity"},
		{"user and agent: no user", req("both.example.com", billing, ""), MissingToken, "", ""},
		{"a principal means nothing on a JWT route", req("jwt.example.com", billing, ""), MissingToken, "", ""},
		{"forward-auth: XFCC from the trusted proxy", xfcc("10.0.0.7", "Hash=ab;URI="+billing), Allowed, "mesh:agents.billing", ""},
		{"forward-auth: XFCC spoofed by an untrusted peer", xfcc("192.0.2.9", "Hash=ab;URI="+billing), InvalidToken, "", "untrusted peer"},
		{"forward-auth: the nearest proxy's element counts", xfcc("10.0.0.7", "URI="+billing+",URI=spiffe://cluster.local/ns/default/sa/x"), InvalidToken, "", "not accepted"},
		{"ext_authz: XFCC without a principal is not read", func() *Request {
			r := req("mesh.example.com", "", "")
			r.Headers["x-forwarded-client-cert"] = "URI=" + billing
			return r
		}(), InvalidToken, "", "no peer identity"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := pl.Check(t.Context(), tc.req)
			if v.Outcome != tc.want {
				t.Fatalf("outcome = %v (%s), want %v", v.Outcome, v.Description, tc.want)
			}
			if tc.wantUser != "" {
				if got, _ := header(v.Set, "x-user-id"); got != tc.wantUser {
					t.Errorf("x-user-id = %q, want %q", got, tc.wantUser)
				}
			}
			if tc.desc != "" && !strings.Contains(v.Description, tc.desc) {
				t.Errorf("description = %q, want %q", v.Description, tc.desc)
			}
		})
	}
	// The workload acting for the user is the grant's outermost actor, per
	// workload: the same token from another workload is another grant.
	const search = "spiffe://cluster.local/ns/agents/sa/search"
	for _, who := range []string{billing, search, billing} {
		v := pl.Check(t.Context(), req("both.example.com", who, hs))
		if v.Outcome != Allowed || v.Grant == nil || len(v.Grant.Actors) == 0 || v.Grant.Actors[0] != who {
			t.Fatalf("user and agent %s: %v, actors %v", who, v.Outcome, v.Grant)
		}
	}
	v, steps := pl.Explain(t.Context(), req("mesh.example.com", billing, ""))
	if v.Outcome != Allowed || !strings.Contains(fmt.Sprint(steps), "kind peer") {
		t.Errorf("Explain does not show the peer: %v %v", v.Outcome, steps)
	}
}
