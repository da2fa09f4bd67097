package envoyauthz_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/envoytest"
	"github.com/extauthz/extauthz/internal/exchange/ststest"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

type exchangeFixture struct {
	protoFixture
	sts *ststest.Server
	pl  *check.Pipeline
}

func newExchangeFixture(t testing.TB) *exchangeFixture {
	t.Helper()
	sts := ststest.New(t, ststest.Options{
		Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_basic", Secret: "sts-secret"}},
		Failures: map[string]ststest.Failure{
			"https://consent.example.com": {Code: "consent_required", Description: "the user must consent"},
			"https://nope.example.com":    {Code: "invalid_target"},
		},
	})
	doc := fmt.Sprintf(`
issuers:
  - {name: corp, issuer: https://idp.example.com, algorithms: [HS256], secret: %s}
exchanges:
  - name: sts
    token_endpoint: %s
    client_auth: {method: client_secret_basic, client_id: extauthz, client_secret_env: STS_SECRET}
routes:
  - name: files
    hosts: [mcp.example.com]
    protocol: mcp
    issuers: [corp]
    exchange:
      sts: sts
      audience: [https://files-backend.example.com]
      scope: files
      methods: [tools/call]
      authorize_url: https://idp.example.com/authorize?client_id=files
      tools:
        - {names: ["github_*"], audience: [https://github-proxy.example.com], scope: repo}
        - {names: ["calendar_*"], audience: [https://calendar.example.com], consent: true}
        - {names: ["third_party"], audience: [https://consent.example.com]}
        - {names: ["forbidden_tool"], audience: [https://nope.example.com]}
  - name: agent
    hosts: [agent.example.com]
    protocol: a2a
    issuers: [corp]
    exchange: {sts: sts, audience: [https://consent.example.com], authorize_url: "https://idp.example.com/authorize"}
  - name: plain
    hosts: [plain.example.com]
    protocol: mcp
    issuers: [corp]
`, protoSecret, sts.TokenURL)
	env := map[string]string{"STS_SECRET": "sts-secret"}
	pl := pipelinetest.New(t, doc, check.Deps{Getenv: func(k string) string { return env[k] }, HTTPClient: sts.Client()}, check.Options{})
	return &exchangeFixture{protoFixture: protoFixture{srv: envoyauthz.NewServer(pl)}, sts: sts, pl: pl}
}

func (f *exchangeFixture) mcp(t *testing.T, tok, method, params string, headers map[string]string) result {
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"` + method + `","params":` + params + `}`)
	r, _ := http.NewRequest("POST", "http://mcp.example.com/mcp", bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return f.send(t, r, body, envoytest.BuildOptions{})
}

func TestTokenExchange(t *testing.T) {
	f := newExchangeFixture(t)
	tok := token(t, "alice", jwt.MapClaims{"session_id": "sess-1"})

	// tools/list is not marked for exchange: the inbound token is removed,
	// nothing is exchanged.
	res := f.mcp(t, tok, "tools/list", `{}`, nil)
	if res.status != 200 || res.upstream.Get("Authorization") != "" || f.sts.Calls() != 0 {
		t.Fatalf("tools/list: %d auth=%q sts=%d", res.status, res.upstream.Get("Authorization"), f.sts.Calls())
	}

	tests := []struct {
		name     string
		tool     string
		audience string
		scope    string
	}{
		{"route default audience", "read_file", "https://files-backend.example.com", "files"},
		{"per-tool override", "github_create_issue", "https://github-proxy.example.com", "repo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := f.mcp(t, tok, "tools/call", `{"name":"`+tt.tool+`"}`, nil)
			if res.status != 200 {
				t.Fatalf("status %d: %s", res.status, res.body)
			}
			got := strings.TrimPrefix(res.upstream.Get("Authorization"), "Bearer ")
			if got == "" || got == tok {
				t.Fatal("the inbound token reached the upstream (token passthrough)")
			}
			claims, err := f.sts.Verify(got)
			if err != nil {
				t.Fatalf("upstream token not issued by the STS: %v", err)
			}
			if fmt.Sprint(claims["aud"]) != tt.audience && fmt.Sprint(claims["aud"]) != "["+tt.audience+"]" {
				t.Errorf("aud %v, want %s", claims["aud"], tt.audience)
			}
			if claims["scope"] != tt.scope || claims["sub"] != "alice" {
				t.Errorf("claims %v", claims)
			}
		})
	}
	calls := f.sts.Calls()
	for range 5 {
		f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, nil)
	}
	if f.sts.Calls() != calls {
		t.Fatalf("cached exchange called the STS again: %d -> %d", calls, f.sts.Calls())
	}
	last, _ := f.sts.Last()
	if last.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" || last.AuthMethod != "client_secret_basic" {
		t.Fatalf("STS request %+v", last)
	}

	// An STS refusal of the target is a 403.
	if res := f.mcp(t, tok, "tools/call", `{"name":"forbidden_tool"}`, nil); res.status != 403 {
		t.Fatalf("invalid_target: %d", res.status)
	}
	// The STS down is a 503 with Retry-After.
	f.sts.SetFault(ststest.Fault{Status: 503, Body: `{"error":"temporarily_unavailable"}`})
	res = f.mcp(t, token(t, "bob", nil), "tools/call", `{"name":"read_file"}`, nil)
	if res.status != 503 || res.header.Get("Retry-After") == "" {
		t.Fatalf("STS down: %d retry-after=%q", res.status, res.header.Get("Retry-After"))
	}
}

// TestReauthorization: the answers MCP and A2A clients understand when the
// user must authorize a third party first.
func TestReauthorization(t *testing.T) {
	f := newExchangeFixture(t)
	tok := token(t, "alice", nil)
	urlCaps := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":{}}}}`
	mcpHeaders := func(name string) map[string]string {
		return map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": name, "MCP-Protocol-Version": "2026-07-28"}
	}

	t.Run("client with URL elicitation gets -32042", func(t *testing.T) {
		res := f.mcp(t, tok, "tools/call", `{"name":"third_party",`+urlCaps+`}`, mcpHeaders("third_party"))
		if res.status != 200 || res.upstream != nil {
			t.Fatalf("want a direct 200 answer, got %d: %s", res.status, res.body)
		}
		var body struct {
			ID    int `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					Elicitations []struct{ Mode, ElicitationID, URL, Message string } `json:"elicitations"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil {
			t.Fatal(err)
		}
		e := body.Error.Data.Elicitations
		if body.ID != 42 || body.Error.Code != -32042 || len(e) != 1 || e[0].Mode != "url" || e[0].ElicitationID == "" || e[0].Message == "" {
			t.Fatalf("body %s", res.body)
		}
		u, _ := url.Parse(e[0].URL)
		if id, _, _ := strings.Cut(u.Query().Get("state"), "."); id != e[0].ElicitationID || u.Query().Get("client_id") != "files" {
			t.Fatalf("authorization URL %s", e[0].URL)
		}
	})

	t.Run("client without URL elicitation gets an isError tool result", func(t *testing.T) {
		res := f.mcp(t, tok, "tools/call", `{"name":"third_party"}`, nil)
		var body struct {
			Result struct {
				IsError bool `json:"isError"`
				Content []struct{ Type, Text string }
				Meta    struct {
					AuthRequired struct {
						URL           string `json:"url"`
						ElicitationID string `json:"elicitation_id"`
						Type          string `json:"type"`
					} `json:"auth_required"`
				} `json:"_meta"`
			} `json:"result"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil || res.status != 200 {
			t.Fatalf("%d %s", res.status, res.body)
		}
		r := body.Result
		if !r.IsError || len(r.Content) == 0 || !strings.Contains(r.Content[0].Text, r.Meta.AuthRequired.URL) ||
			r.Meta.AuthRequired.Type != "oauth2" || r.Meta.AuthRequired.ElicitationID == "" {
			t.Fatalf("body %s", res.body)
		}
	})

	t.Run("A2A client gets a JSON-RPC error", func(t *testing.T) {
		body := []byte(`{"jsonrpc":"2.0","id":"a1","method":"message/send","params":{"message":{"messageId":"m","contextId":"c","role":"user","parts":[]}}}`)
		r, _ := http.NewRequest("POST", "http://agent.example.com/", bytes.NewReader(body))
		r.Header.Set("Authorization", "Bearer "+tok)
		res := f.send(t, r, body, envoytest.BuildOptions{})
		var e struct {
			ID    string `json:"id"`
			Error struct {
				Code int `json:"code"`
				Data struct {
					URL           string `json:"url"`
					ElicitationID string `json:"elicitationId"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(res.body, &e); err != nil || e.ID != "a1" || e.Error.Code == 0 || e.Error.Data.URL == "" {
			t.Fatalf("%d %s", res.status, res.body)
		}
	})

	t.Run("consent check: elicitation, completion, then the call goes through", func(t *testing.T) {
		before := f.sts.Calls()
		res := f.mcp(t, tok, "tools/call", `{"name":"calendar_add",`+urlCaps+`}`, mcpHeaders("calendar_add"))
		var body struct {
			Error struct {
				Code int `json:"code"`
				Data struct {
					Elicitations []struct {
						ElicitationID string
						URL           string `json:"url"`
					} `json:"elicitations"`
				} `json:"data"`
			} `json:"error"`
		}
		json.Unmarshal(res.body, &body)
		if body.Error.Code != -32042 || len(body.Error.Data.Elicitations) != 1 {
			t.Fatalf("%s", res.body)
		}
		id := body.Error.Data.Elicitations[0].ElicitationID
		if f.sts.Calls() != before {
			t.Fatal("the STS was called before consent")
		}
		u, err := url.Parse(body.Error.Data.Elicitations[0].URL)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.pl.CompleteElicitation(t.Context(), id, ""); !errors.Is(err, elicit.ErrStateMissing) {
			t.Fatalf("completion by id alone: %v", err)
		}
		if p, err := f.pl.CompleteElicitation(t.Context(), id, u.Query().Get("state")); err != nil || p.Subject != "alice" {
			t.Fatalf("complete: %+v %v", p, err)
		}
		res = f.mcp(t, tok, "tools/call", `{"name":"calendar_add"}`, nil)
		if res.status != 200 || !strings.HasPrefix(res.upstream.Get("Authorization"), "Bearer ") {
			t.Fatalf("after consent: %d %s", res.status, res.body)
		}
		// Consent is per user.
		if res := f.mcp(t, token(t, "bob", nil), "tools/call", `{"name":"calendar_add"}`, nil); res.upstream != nil {
			t.Fatal("alice's consent let bob through")
		}
	})
}

// TestInitializeCapabilityRemembered: a 2025-11-25 client declares URL
// elicitation at initialize (before it has a session id); the session it
// then uses gets -32042 answers.
func TestInitializeCapabilityRemembered(t *testing.T) {
	f := newExchangeFixture(t)
	tok := token(t, "carol", nil)
	init := `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{"url":{}}},"clientInfo":{"name":"c","version":"1"}}`
	if res := f.mcp(t, tok, "initialize", init, nil); res.status != 200 {
		t.Fatalf("initialize: %d", res.status)
	}
	sess := map[string]string{"Mcp-Session-Id": "s-init", "MCP-Protocol-Version": "2025-11-25"}
	if res := f.mcp(t, tok, "notifications/initialized", `{}`, sess); res.status != 200 {
		t.Fatalf("initialized: %d", res.status)
	}
	res := f.mcp(t, tok, "tools/call", `{"name":"third_party"}`, sess)
	var body struct {
		Error struct{ Code int } `json:"error"`
	}
	if json.Unmarshal(res.body, &body); body.Error.Code != -32042 {
		t.Fatalf("want -32042 for a session whose client declared URL elicitation: %s", res.body)
	}
	// A client that declared form mode only gets the tool result.
	other := token(t, "dave", nil)
	f.mcp(t, other, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{"elicitation":{}},"clientInfo":{"name":"c","version":"1"}}`, nil)
	sess2 := map[string]string{"Mcp-Session-Id": "s-form", "MCP-Protocol-Version": "2025-11-25"}
	f.mcp(t, other, "notifications/initialized", `{}`, sess2)
	res = f.mcp(t, other, "tools/call", `{"name":"third_party"}`, sess2)
	if !strings.Contains(string(res.body), `"isError":true`) {
		t.Fatalf("form-only client: %s", res.body)
	}
}

// TestSessionEndDropsExchangedTokens: DELETE of an MCP session drops the
// tokens exchanged for it.
func TestSessionEndDropsExchangedTokens(t *testing.T) {
	f := newExchangeFixture(t)
	tok := token(t, "alice", nil)
	sess := map[string]string{"Mcp-Session-Id": "s-9"}
	f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, sess)
	f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, sess)
	if f.sts.Calls() != 1 {
		t.Fatalf("calls %d", f.sts.Calls())
	}
	r, _ := http.NewRequest("DELETE", "http://mcp.example.com/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Mcp-Session-Id", "s-9")
	if res := f.send(t, r, nil, envoytest.BuildOptions{}); res.status != 200 {
		t.Fatalf("delete: %d", res.status)
	}
	f.mcp(t, tok, "tools/call", `{"name":"read_file"}`, sess)
	if f.sts.Calls() != 2 {
		t.Fatalf("the ended session's exchanged token was reused: %d calls", f.sts.Calls())
	}
}

// BenchmarkCheckExchanged compares a cache-hit tools/call on a route that
// exchanges the token (exchanged token cached) with the same call on a
// route that does not.
func BenchmarkCheckExchanged(b *testing.B) {
	f := newExchangeFixture(b)
	tok := token(b, "alice", jwt.MapClaims{"session_id": "sess-1"})
	body := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"read_file"}}`)
	for _, host := range []string{"plain.example.com", "mcp.example.com"} {
		name := map[string]string{"plain.example.com": "no-exchange", "mcp.example.com": "exchanged"}[host]
		b.Run(name, func(b *testing.B) {
			r, _ := http.NewRequest("POST", "http://"+host+"/mcp", bytes.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+tok)
			req := envoytest.BuildCheckRequest(r, body, envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 16})
			ctx := b.Context()
			if resp, _ := f.srv.Check(ctx, req); resp.GetStatus().GetCode() != 0 {
				b.Fatalf("denied: %v", resp)
			}
			b.ReportAllocs()
			for b.Loop() {
				f.srv.Check(ctx, req)
			}
		})
	}
}
