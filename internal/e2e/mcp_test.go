package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// TestNginxMCPToolCallSeesIdentity: with a valid token the SDK client's tool
// call succeeds and the tool sees the identity and lineage headers, never
// the token.
func TestNginxMCPToolCallSeesIdentity(t *testing.T) {
	e := start(t, envOptions{})
	tok := token(t, jwt.MapClaims{"session_id": "sess-mcp"})
	tests := []struct {
		name    string
		version string
		// wantRoot is the conversation root: the MCP session when there is
		// one, else the token's session.
		wantRoot func(sessionID string) string
	}{
		{name: "SDK default protocol", wantRoot: func(sid string) string {
			if sid != "" {
				return sid
			}
			return "sess-mcp"
		}},
		{name: "2025-06-18 session flow", version: testpeers.MCPVersion20250618, wantRoot: func(sid string) string { return sid }},
		{name: "2025-11-25 session flow", version: testpeers.MCPVersion20251125, wantRoot: func(sid string) string { return sid }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			cs, err := testpeers.NewMCPClient(ctx, e.url(mcpHost, "/mcp"), e.client(t, tok, nil, nil), &testpeers.MCPClientOptions{ProtocolVersion: tt.version})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			seen, err := testpeers.WhoAmI(ctx, cs)
			if err != nil {
				t.Fatal(err)
			}
			root := tt.wantRoot(cs.ID())
			if root == "" {
				t.Fatal("the session flow gave no session id")
			}
			wantHeaders(t, "the tool", seen, map[string]string{
				"X-User-Id":           "alice",
				"X-Session-Id":        "sess-mcp",
				"X-Root-Context-Id":   root,
				"X-Lineage-Depth":     "0",
				"X-Parent-Context-Id": "",
				"X-Actor-Chain":       "",
			})
		})
	}
}

// TestNginxMCPExpiredToken: an expired token gets 401 with the challenge,
// whose metadata URL answers through nginx, and no call reaches the tool.
func TestNginxMCPExpiredToken(t *testing.T) {
	e := start(t, envOptions{})
	expired := token(t, jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()})
	var log responseLog
	ctx := testContext(t)
	cs, err := testpeers.NewMCPClient(ctx, e.url(mcpHost, "/mcp"), e.client(t, expired, nil, &log), nil)
	if err == nil {
		cs.Close()
		t.Fatal("connected with an expired token")
	}
	seen := log.responses()
	if len(seen) == 0 {
		t.Fatal("no response recorded")
	}
	metadata := e.url(mcpHost, "/.well-known/oauth-protected-resource")
	for _, r := range seen {
		if r.status != http.StatusUnauthorized {
			t.Errorf("%s %s: status %d, want 401", r.method, r.path, r.status)
		}
		for _, part := range []string{`Bearer error="invalid_token"`, `error_description="token is expired"`, `resource_metadata="` + metadata + `"`} {
			if !strings.Contains(r.challenge, part) {
				t.Errorf("%s %s: challenge %q lacks %s", r.method, r.path, r.challenge, part)
			}
		}
	}
	if n := len(e.calls()); n != 0 {
		t.Errorf("%d tool calls reached the server", n)
	}

	// The challenge's metadata URL is served by the service through nginx,
	// naming the resource as the client sees it.
	res, err := e.client(t, "", nil, nil).Get(metadata)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var doc struct {
		Resource string   `json:"resource"`
		Bearer   []string `json:"bearer_methods_supported"`
	}
	body, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(body, &doc); res.StatusCode != 200 || err != nil {
		t.Fatalf("metadata: %d %v %s", res.StatusCode, err, body)
	}
	if doc.Resource != e.url(mcpHost, "") || len(doc.Bearer) != 1 || doc.Bearer[0] != "header" {
		t.Errorf("metadata document %s", body)
	}
}

// TestNginxMCPForgedIdentity: identity headers the client sends never reach
// the tool; the token's identity does.
func TestNginxMCPForgedIdentity(t *testing.T) {
	e := start(t, envOptions{})
	tok := token(t, nil) // no session claim
	forged := http.Header{"X-User-Id": {"mallory"}, "X-Session-Id": {"evil-session"}}
	ctx := testContext(t)
	cs, err := testpeers.NewMCPClient(ctx, e.url(mcpHost, "/mcp"), e.client(t, tok, forged, nil), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	seen, err := testpeers.WhoAmI(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	// The token names no session: the session is the MCP session the
	// service bound to alice, never the forged one.
	wantHeaders(t, "the tool", seen, map[string]string{"X-User-Id": "alice", "X-Session-Id": cs.ID()})
	for _, c := range e.calls() {
		for name, vs := range c.Seen.Headers {
			for _, v := range vs {
				if strings.Contains(v, "mallory") || strings.Contains(v, "evil-session") {
					t.Errorf("the tool saw the forged %s: %q", name, v)
				}
			}
		}
	}
}

// TestNginxMCPSpoofedForwardingHeader: a client that adds another proxy's
// forwarding header to have a public path checked instead of its call gains
// nothing: the nginx convention never reads it, and the call is checked.
func TestNginxMCPSpoofedForwardingHeader(t *testing.T) {
	e := start(t, envOptions{})
	expired := token(t, jwt.MapClaims{"exp": time.Now().Add(-time.Hour).Unix()})
	spoof := http.Header{"X-Forwarded-Uri": {"/.well-known/agent-card.json"}, "X-Forwarded-Method": {"GET"}}
	var log responseLog
	cs, err := testpeers.NewMCPClient(testContext(t), e.url(mcpHost, "/mcp"), e.client(t, expired, spoof, &log), nil)
	if err == nil {
		cs.Close()
		t.Fatal("connected with a spoofed forwarding header")
	}
	if len(log.responses()) == 0 {
		t.Fatal("no response recorded")
	}
	for _, r := range log.responses() {
		if r.status != http.StatusUnauthorized || !strings.Contains(r.challenge, "token is expired") {
			t.Errorf("%s %s: status %d challenge %q, want the expired token's 401", r.method, r.path, r.status, r.challenge)
		}
	}
	if n := len(e.calls()); n != 0 {
		t.Errorf("%d tool calls reached the server", n)
	}
}
