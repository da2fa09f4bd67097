package check

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/testing/ststest"
)

// TestPerAgentExchangeAudience: an exchange override keyed by the calling agent (azp or
// client_id, an act subject, an mTLS principal) wins over the tool's.
func TestPerAgentExchangeAudience(t *testing.T) {
	clk := newClock()
	sts := ststest.New(t, ststest.Options{Now: clk.Now, Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_basic", Secret: "sts-secret"}}})
	doc := fmt.Sprintf(`
issuers:
  - {name: dex, issuer: https://dex.example.com, algorithms: [HS256], secret: %[1]s}
  - {name: tenant, issuer: https://tenant.example.com, algorithms: [HS256], secret: %[1]s}
exchanges:
  - {name: sts, token_endpoint: %[2]s, client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [dex, tenant]
    exchange:
      sts: sts
      audience: [https://files.example.com]
      scope: files
      methods: [tools/call]
      tools:
        - {names: ["github_*"], audience: [https://github-proxy.example.com], scope: repo}
      agents:
        - {client_ids: ["dex:research-agent"], audience: [https://research-files.example.com]}
        - {act_subjects: ["dex:planner-agent"], audience: [https://planner-files.example.com], scope: plan}
        - {principals: ["spiffe://mesh.example.com/ns/agents/*"], audience: [https://mesh-files.example.com]}
`, secret, sts.TokenURL)
	env := map[string]string{"STS_SECRET": "sts-secret"}
	pl := newPipeline(t, doc, Deps{Now: clk.Now, Getenv: func(k string) string { return env[k] }, HTTPClient: sts.Client()}, Options{Now: clk.Now})
	_, mint := agentPipeline(t, "", nil) // same issuer and secret
	tests := []struct {
		name      string
		claims    jwt.MapClaims
		principal string
		tool      string
		audience  string
		scope     string
	}{
		{"route default", nil, "", "read_file", "https://files.example.com", "files"},
		{"tool override", nil, "", "github_issue", "https://github-proxy.example.com", "repo"},
		{"agent by azp beats the tool", jwt.MapClaims{"azp": "research-agent"}, "", "github_issue", "https://research-files.example.com", "repo"},
		{"agent by client_id", jwt.MapClaims{"client_id": "research-agent"}, "", "read_file", "https://research-files.example.com", "files"},
		{"agent by act subject", jwt.MapClaims{"act": map[string]any{"sub": "planner-agent"}}, "", "github_issue", "https://planner-files.example.com", "plan"},
		// Only the current actor counts (RFC 8693 section 4.1): prior
		// actors nested inside it are informational.
		{"the act subject acting, another before it", jwt.MapClaims{"act": map[string]any{"sub": "planner-agent", "act": map[string]any{"sub": "helper-agent"}}}, "", "read_file", "https://planner-files.example.com", "plan"},
		{"the act subject before the one acting", jwt.MapClaims{"act": map[string]any{"sub": "helper-agent", "act": map[string]any{"sub": "planner-agent"}}}, "", "read_file", "https://files.example.com", "files"},
		{"agent by SPIFFE principal", nil, "spiffe://mesh.example.com/ns/agents/sa/writer", "read_file", "https://mesh-files.example.com", "files"},
		{"a principal outside the prefix", nil, "spiffe://mesh.example.com/ns/agents-evil/sa/x", "read_file", "https://files.example.com", "files"},
		// Client ids and act subjects are their issuer's names: another
		// identity provider on the route can issue the same ones.
		{"another issuer's client of the same id", jwt.MapClaims{"iss": "https://tenant.example.com", "azp": "research-agent"}, "", "read_file", "https://files.example.com", "files"},
		{"another issuer's act subject of the same name", jwt.MapClaims{"iss": "https://tenant.example.com", "act": map[string]any{"sub": "planner-agent"}}, "", "github_issue", "https://github-proxy.example.com", "repo"},
		{"another issuer's client named as the entry", jwt.MapClaims{"iss": "https://tenant.example.com", "azp": "dex:research-agent"}, "", "read_file", "https://files.example.com", "files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := call("mcp.example.com", mint(tt.claims), nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"`+tt.tool+`"}}`)
			req.SourcePrincipal = tt.principal
			_, steps := pl.Explain(context.Background(), req)
			if st, _ := explained(steps, "exchange"); !strings.Contains(st.Detail, tt.audience) {
				t.Fatalf("Explain's exchange step %+v does not name %s", st, tt.audience)
			}
			v := pl.Check(context.Background(), req)
			if v.Outcome != Allowed {
				t.Fatalf("%v: %s", v.Outcome, v.Description)
			}
			if v.ExchangeAudience != tt.audience {
				t.Errorf("the verdict (and its audit record) names audience %q, want %s", v.ExchangeAudience, tt.audience)
			}
			auth, _ := header(v.Set, "authorization")
			claims, err := sts.Verify(strings.TrimPrefix(auth, "Bearer "))
			if err != nil {
				t.Fatalf("upstream token not from the STS: %v", err)
			}
			if aud := fmt.Sprint(claims["aud"]); aud != tt.audience && aud != "["+tt.audience+"]" {
				t.Fatalf("aud %v, want %s", claims["aud"], tt.audience)
			}
			if claims["scope"] != tt.scope {
				t.Fatalf("scope %v, want %s", claims["scope"], tt.scope)
			}
		})
	}
}

func TestPerAgentExchangeConfig(t *testing.T) {
	for _, agents := range []string{
		`[{audience: [https://a.example.com]}]`,
		`[{principals: ["spiffe://x/*/y"], audience: [https://a.example.com]}]`,
		`[{client_ids: [a], audience: [""]}]`,
	} {
		doc := `
issuers: [{name: dex, algorithms: [HS256], secret: ` + secret + `}]
exchanges: [{name: sts, token_endpoint: "https://sts.example.com/token", client_auth: {method: none, client_id: x}}]
routes: [{name: r, default: true, issuers: [dex], exchange: {sts: sts, audience: [https://d.example.com], agents: ` + agents + `}}]
`
		cfg, err := config.Parse([]byte(doc))
		if err != nil {
			continue // refused at validation: fine
		}
		if p, err := Compile(t.Context(), cfg, Deps{}); err == nil {
			p.Close()
			t.Errorf("agents %s compiled", agents)
		}
	}
}
