package check

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/config"
)

// defaultPipeline is the built-in default configuration with JWT_SECRET set
// (a configuration built in code, not a document).
func defaultPipeline(t *testing.T) (*Pipeline, func(claims jwt.MapClaims) string) {
	t.Helper()
	env := map[string]string{"JWT_SECRET": secret}
	getenv := func(k string) string { return env[k] }
	cfg, _, err := config.Default(getenv)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Compile(t.Context(), cfg, Deps{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pl, err := New(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return pl, lineageMint(t)
}

// pipelineFor serves doc; the returned function mints alice's tokens.
func pipelineFor(t *testing.T, doc string) (*Pipeline, func(claims jwt.MapClaims) string) {
	t.Helper()
	return newPipeline(t, doc, Deps{}, Options{}), lineageMint(t)
}

// lineageMint mints HS256 tokens for alice in session sess-42; claims
// override (nil deletes).
func lineageMint(t *testing.T) func(claims jwt.MapClaims) string {
	return func(c jwt.MapClaims) string {
		c2 := jwt.MapClaims{"iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix(), "sub": "alice", "session_id": "sess-42"}
		for k, v := range c {
			if v == nil {
				delete(c2, k)
			} else {
				c2[k] = v
			}
		}
		return testHS(t, c2)
	}
}

func testHS(t *testing.T, c jwt.MapClaims) string {
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func upstream(v Verdict) (map[string]string, []string) {
	m := map[string]string{}
	for _, h := range v.Set {
		m[h.Name] = h.Value
	}
	return m, v.Remove
}

// TestLineageDefaults are the rules for the built-in default.
func TestLineageDefaults(t *testing.T) {
	pl, tok := defaultPipeline(t)
	a2aBody := `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m1","contextId":"ctx-9","role":"user","parts":[]}}}`
	tests := []struct {
		name        string
		claims      jwt.MapClaims
		headers     Headers
		body        string
		want        map[string]string // upstream headers; "" means must be removed
		wantOutcome Outcome
	}{
		{name: "chain root from the token session", want: map[string]string{"x-user-id": "alice", "x-session-id": "sess-42", "x-root-context-id": "sess-42", "x-lineage-depth": "0", "x-parent-context-id": "", "x-actor-chain": ""}},
		{name: "mid-chain keeps root and parent", headers: Headers{"x-root-context-id": "R", "x-parent-context-id": "P"}, want: map[string]string{"x-root-context-id": "R", "x-parent-context-id": "P", "x-lineage-depth": "1"}},
		{name: "legacy parent-only is promoted to root", headers: Headers{"x-parent-context-id": "P"}, want: map[string]string{"x-root-context-id": "P", "x-parent-context-id": "P", "x-lineage-depth": "1"}},
		{name: "depth counts up", headers: Headers{"x-root-context-id": "R", "x-parent-context-id": "P", "x-lineage-depth": "3"}, want: map[string]string{"x-lineage-depth": "4"}},
		{name: "depth above 8 is a runaway loop", headers: Headers{"x-root-context-id": "R", "x-parent-context-id": "P", "x-lineage-depth": "8"}, wantOutcome: TooDeep},
		{name: "A2A context id roots a new chain", body: a2aBody, want: map[string]string{"x-root-context-id": "ctx-9", "x-lineage-depth": "0"}},
		{name: "MCP session id when the token has none", claims: jwt.MapClaims{"session_id": nil}, headers: Headers{"mcp-session-id": "mcp-7"}, want: map[string]string{"x-root-context-id": "mcp-7", "x-session-id": "mcp-7"}},
		{name: "a new id when nothing names the conversation", claims: jwt.MapClaims{"session_id": nil}, want: map[string]string{"x-lineage-depth": "0"}},
		{name: "act chain is the signed truth", claims: jwt.MapClaims{"act": map[string]any{"sub": "agent-b", "act": map[string]any{"sub": "agent-a"}}},
			headers: Headers{"x-root-context-id": "R", "x-parent-context-id": "P", "x-lineage-depth": "0", "x-actor-chain": "mallory"},
			want:    map[string]string{"x-actor-chain": "agent-b,agent-a", "x-lineage-depth": "2"}},
		{name: "malformed depth", headers: Headers{"x-root-context-id": "R", "x-lineage-depth": "-1"}, wantOutcome: Malformed},
		// A workload that trims the ids it reads would take these for "R"
		// and "ctx-9": another conversation than the one the service saw.
		{name: "root id ending in a no-break space", headers: Headers{"x-root-context-id": "R\u00a0", "x-parent-context-id": "P"}, wantOutcome: Malformed},
		{name: "parent id starting with an ideographic space", headers: Headers{"x-root-context-id": "R", "x-parent-context-id": "\u3000P"}, wantOutcome: Malformed},
		{name: "A2A context id ending in a Unicode space", body: strings.Replace(a2aBody, `"ctx-9"`, `"ctx-9\u2005"`, 1), wantOutcome: Malformed},
		{name: "forged identity never survives", headers: Headers{"x-user-id": "mallory", "x-session-id": "evil"}, claims: jwt.MapClaims{"session_id": nil},
			want: map[string]string{"x-user-id": "alice", "x-session-id": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Headers{"authorization": "Bearer " + tok(tt.claims)}
			for k, v := range tt.headers {
				h[k] = v
			}
			req := &Request{Method: "POST", Host: "agent.example.com", Path: "/", Headers: h, Body: []byte(tt.body)}
			v := pl.Check(context.Background(), req)
			want := tt.wantOutcome
			if want == 0 && tt.wantOutcome == Allowed {
				want = Allowed
			}
			if v.Outcome != want {
				t.Fatalf("outcome %v (%s), want %v", v.Outcome, v.Description, want)
			}
			if !v.Outcome.Allow() {
				if v.Status() != tt.wantOutcome.Status() {
					t.Fatalf("status %d", v.Status())
				}
				return
			}
			set, remove := upstream(v)
			for k, w := range tt.want {
				if w == "" {
					if _, ok := set[k]; ok || !has(remove, k) {
						t.Errorf("%s should be removed: set=%v remove=%v", k, set, remove)
					}
					continue
				}
				if set[k] != w {
					t.Errorf("%s = %q, want %q", k, set[k], w)
				}
			}
			for _, name := range remove {
				if _, ok := set[name]; ok {
					t.Errorf("%s both set and removed", name)
				}
			}
			if set["x-root-context-id"] == "" {
				t.Error("no root context")
			}
		})
	}
}

func TestLineageTrust(t *testing.T) {
	doc := `
issuers:
  - {name: users, issuer: https://login.example.com, secret: ` + secret + `, subject_prefix: ""}
  - {name: workloads, issuer: https://workloads.example.com, secret: ` + secret + `}
  - {name: tenant, issuer: https://tenant.example.com, secret: ` + secret + `}
lineage:
  trust: {issuers: [workloads], client_ids: [planner, "tenant:builder"], principals: ["spiffe://cluster.local/ns/agents/*"]}
routes:
  - {name: all, default: true, issuers: [users, workloads, tenant]}
`
	pl, tok := pipelineFor(t, doc)
	inbound := Headers{"x-root-context-id": "R", "x-parent-context-id": "P", "x-lineage-depth": "2"}
	tests := []struct {
		name      string
		claims    jwt.MapClaims
		principal string
		trusted   bool
	}{
		{"user token is not trusted: new chain", jwt.MapClaims{"iss": "https://login.example.com"}, "", false},
		{"workload issuer is trusted", jwt.MapClaims{"iss": "https://workloads.example.com"}, "", true},
		{"trusted client id", jwt.MapClaims{"iss": "https://login.example.com", "azp": "planner"}, "", true},
		{"trusted client id as client_id", jwt.MapClaims{"iss": "https://login.example.com", "client_id": "planner"}, "", true},
		{"other client id", jwt.MapClaims{"iss": "https://login.example.com", "azp": "browser"}, "", false},
		// A client id is its issuer's name for a client, written in its
		// issuer's namespace (users has none): a tenant's identity
		// provider can register a client "planner" too.
		{"the trusted client id of another issuer", jwt.MapClaims{"iss": "https://tenant.example.com", "azp": "planner"}, "", false},
		{"a client id trusted in its issuer's namespace", jwt.MapClaims{"iss": "https://tenant.example.com", "azp": "builder"}, "", true},
		{"that client id from another issuer", jwt.MapClaims{"iss": "https://login.example.com", "azp": "builder"}, "", false},
		{"the whole entry as a client id of an issuer without a namespace", jwt.MapClaims{"iss": "https://login.example.com", "azp": "tenant:builder"}, "", false},
		{"the whole entry as another issuer's client id", jwt.MapClaims{"iss": "https://tenant.example.com", "azp": "tenant:builder"}, "", false},
		{"allow-listed SPIFFE peer", jwt.MapClaims{"iss": "https://login.example.com"}, "spiffe://cluster.local/ns/agents/sa/planner", true},
		{"other SPIFFE peer", jwt.MapClaims{"iss": "https://login.example.com"}, "spiffe://cluster.local/ns/web/sa/ui", false},
		{"token with act is trusted", jwt.MapClaims{"iss": "https://login.example.com", "act": map[string]any{"sub": "agent-a"}}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Headers{"authorization": "Bearer " + tok(tt.claims)}
			for k, v := range inbound {
				h[k] = v
			}
			v := pl.Check(context.Background(), &Request{Method: "GET", Host: "a", Path: "/", Headers: h, SourcePrincipal: tt.principal})
			if v.Outcome != Allowed {
				t.Fatalf("outcome %v %s", v.Outcome, v.Description)
			}
			set, remove := upstream(v)
			if tt.trusted {
				if set["x-root-context-id"] != "R" || set["x-parent-context-id"] != "P" || set["x-lineage-depth"] != "3" {
					t.Fatalf("trusted lineage not kept: %v", set)
				}
				return
			}
			if set["x-root-context-id"] != "sess-42" || set["x-lineage-depth"] != "0" || !has(remove, "x-parent-context-id") {
				t.Fatalf("forged lineage kept: set=%v remove=%v", set, remove)
			}
		})
	}
}

// TestLineageTrustWithoutAct: with trust.act false, a tenant's token with
// an act claim (its identity provider can write any) keeps no inbound
// lineage; the STS's exchanged tokens are trusted by issuer.
func TestLineageTrustWithoutAct(t *testing.T) {
	doc := `
issuers:
  - {name: sts, issuer: https://sts.example.com, secret: ` + secret + `}
  - {name: tenant, issuer: https://tenant.example.com, secret: ` + secret + `}
lineage:
  trust: {issuers: [sts], act: false}
routes:
  - {name: acting, path_prefix: /acting, issuers: [sts, tenant], lineage: {trust: {}}}
  - {name: all, default: true, issuers: [sts, tenant]}
`
	pl, tok := pipelineFor(t, doc)
	act := map[string]any{"sub": "agent-a"}
	tests := []struct {
		name, path string
		claims     jwt.MapClaims
		trusted    bool
	}{
		{"the tenant's token with act", "/", jwt.MapClaims{"iss": "https://tenant.example.com", "act": act}, false},
		{"the STS's exchanged token", "/", jwt.MapClaims{"iss": "https://sts.example.com", "act": act}, true},
		{"a route whose own trust leaves act on", "/acting/x", jwt.MapClaims{"iss": "https://tenant.example.com", "act": act}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Headers{"authorization": "Bearer " + tok(tt.claims), "x-root-context-id": "victim-root"}
			v := pl.Check(context.Background(), &Request{Method: "GET", Host: "a", Path: tt.path, Headers: h})
			if v.Outcome != Allowed {
				t.Fatalf("outcome %v %s", v.Outcome, v.Description)
			}
			set, _ := upstream(v)
			if kept := set["x-root-context-id"] == "victim-root"; kept != tt.trusted {
				t.Fatalf("root %q upstream: kept %v, want %v", set["x-root-context-id"], kept, tt.trusted)
			}
			if got := set["x-actor-chain"]; got != "agent-a" {
				t.Errorf("actor chain %q, want the claim's agent-a", got)
			}
		})
	}
}

func TestKagentPreset(t *testing.T) {
	doc := "issuers: [{name: a, secret: " + secret + "}]\nlineage: {preset: kagent, trust: {all: true}}\nroutes: [{name: r, default: true, issuers: [a]}]\n"
	pl, tok := pipelineFor(t, doc)
	v := pl.Check(context.Background(), &Request{Method: "POST", Path: "/", Headers: Headers{
		"authorization": "Bearer " + tok(nil), "x-kagent-parent-context-id": "caller-ctx", "x-root-context-id": "ignored",
	}})
	set, remove := upstream(v)
	if !has(remove, "x-kagent-parent-context-id") && set["x-kagent-parent-context-id"] == "" {
		t.Fatal("kagent parent neither set nor removed")
	}
	if set["x-kagent-root-context-id"] != "caller-ctx" || set["x-kagent-parent-context-id"] != "caller-ctx" || set["x-user-id"] != "alice" {
		t.Fatalf("kagent names not used: %v", set)
	}
	if _, ok := set["x-root-context-id"]; ok {
		t.Fatalf("default names used under the kagent preset: %v", set)
	}
}

func writeEd25519(t testing.TB, dir string) string {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "lineage.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSignedLineage: hop 1 signs; hop 2 (another service, untrusting)
// accepts the signed token; a tampered token is ignored.
func TestSignedLineage(t *testing.T) {
	dir := t.TempDir()
	key := writeEd25519(t, dir)
	hop1Doc := fmt.Sprintf("issuers: [{name: a, secret: %s}]\nlineage: {trust: {all: true}, signing: {key_file: %s, issuer: https://hop1.example.com}}\nroutes: [{name: r, default: true, issuers: [a], lineage: {sign: true}}]\n", secret, key)
	hop1, tok := pipelineFor(t, hop1Doc)
	jwks := filepath.Join(dir, "hop1-jwks.json")
	if err := os.WriteFile(jwks, hop1.Policy().Signer().JWKS(), 0o600); err != nil {
		t.Fatal(err)
	}
	hop2Doc := fmt.Sprintf("issuers: [{name: a, secret: %s}]\nlineage: {peers: [{issuer: https://hop1.example.com, jwks_file: %s}]}\nroutes: [{name: r, default: true, issuers: [a]}]\n", secret, jwks)
	hop2, _ := pipelineFor(t, hop2Doc)

	v1 := hop1.Check(context.Background(), &Request{Method: "GET", Path: "/", Headers: Headers{"authorization": "Bearer " + tok(nil), "x-root-context-id": "R", "x-parent-context-id": "P", "x-lineage-depth": "2"}})
	set1, _ := upstream(v1)
	signed := set1["x-lineage-token"]
	if signed == "" || set1["x-lineage-depth"] != "3" {
		t.Fatalf("hop 1 did not sign: %v", set1)
	}
	// The next hop's caller forwards only the signed token, and hop 2 trusts
	// no caller's headers.
	tests := []struct {
		name      string
		token     string
		wantRoot  string
		wantDepth string
	}{
		{"signed lineage accepted", signed, "R", "4"},
		{"tampered signature ignored", signed[:len(signed)-4] + "AAAA", "sess-42", "0"},
		{"tampered payload ignored", tamper(signed), "sess-42", "0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := hop2.Check(context.Background(), &Request{Method: "GET", Path: "/", Headers: Headers{"authorization": "Bearer " + tok(nil), "x-lineage-token": tt.token, "x-root-context-id": "forged"}})
			set, _ := upstream(v)
			if v.Outcome != Allowed || set["x-root-context-id"] != tt.wantRoot || set["x-lineage-depth"] != tt.wantDepth {
				t.Fatalf("%v: %v", v.Outcome, set)
			}
			if tt.wantRoot == "R" && set["x-parent-context-id"] == "" {
				t.Fatal("parent lost")
			}
		})
	}
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return tok
	}
	b := []byte(parts[1])
	b[len(b)/2] ^= 1
	parts[1] = string(b)
	return strings.Join(parts, ".")
}

// TestSignedLineageAcrossRoutes: a lineage token the service signed on a
// route that keeps every caller's lineage headers, replayed by the same
// user on a route that keeps no user's, must not bring the headers' word
// there as signed truth.
func TestSignedLineageAcrossRoutes(t *testing.T) {
	key := writeEd25519(t, t.TempDir())
	doc := fmt.Sprintf(`
issuers: [{name: a, secret: %s}]
lineage: {signing: {key_file: %s, issuer: https://gw.example.com}}
routes:
  - {name: open, path_prefix: /open, issuers: [a], lineage: {sign: true, trust: {all: true}}}
  - {name: strict, path_prefix: /strict, issuers: [a], lineage: {trust: {client_ids: [planner]}}}
`, secret, key)
	pl, tok := pipelineFor(t, doc)
	v1 := pl.Check(context.Background(), &Request{Method: "GET", Path: "/open", Headers: Headers{"authorization": "Bearer " + tok(nil), "x-actor-chain": "planner-agent", "x-root-context-id": "R"}})
	set1, _ := upstream(v1)
	signed := set1["x-lineage-token"]
	if signed == "" || set1["x-actor-chain"] != "planner-agent" {
		t.Fatalf("open route: %v %v", v1.Outcome, set1)
	}
	v2 := pl.Check(context.Background(), &Request{Method: "GET", Path: "/strict", Headers: Headers{"authorization": "Bearer " + tok(nil), "x-lineage-token": signed}})
	set2, _ := upstream(v2)
	if v2.Outcome != Allowed {
		t.Fatalf("strict route: %v %s", v2.Outcome, v2.Description)
	}
	if set2["x-actor-chain"] != "" {
		t.Fatalf("strict route took the open route's header actor chain as signed: %v", set2)
	}
}
