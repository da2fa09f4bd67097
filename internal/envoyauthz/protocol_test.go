package envoyauthz_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/check"
	"github.com/extauthz/extauthz/internal/envoyauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/fixtures"
	"github.com/extauthz/extauthz/internal/testing/pipelinetest"
)

// The shared protocol fixture: ProtocolConfig and its tokens.
const protocolConfig = pipelinetest.ProtocolConfig

type protoFixture struct {
	srv *envoyauthz.Server
}

func newProtoFixture(t *testing.T) *protoFixture {
	t.Helper()
	pl := pipelinetest.New(t, protocolConfig, check.Deps{}, check.Options{})
	return &protoFixture{srv: envoyauthz.NewServer(pl)}
}

func token(t testing.TB, sub string, extra jwt.MapClaims) string {
	return pipelinetest.ProtocolToken(t, sub, extra)
}

// result is what Envoy would do with the answer.
type result struct {
	status   int
	header   http.Header // client response headers (denied)
	body     []byte
	upstream http.Header // upstream request headers (allowed)
	metadata map[string]any
}

// send replays an HTTP request through the Envoy-like builder and the server.
func (f *protoFixture) send(t *testing.T, r *http.Request, body []byte, opts envoytest.BuildOptions) result {
	t.Helper()
	if body != nil && !opts.WithBody {
		opts.WithBody, opts.MaxRequestBytes = true, 1<<20
	}
	req := envoytest.BuildCheckRequest(r, body, opts)
	resp, err := f.srv.Check(context.Background(), req)
	if err != nil {
		t.Fatalf("gRPC error for a decision: %v", err)
	}
	res := result{metadata: resp.GetDynamicMetadata().AsMap()}
	if ok := resp.GetOkResponse(); ok != nil && resp.GetStatus().GetCode() == 0 {
		if _, err := envoytest.ApplyOK(r, ok); err != nil {
			t.Fatalf("Envoy would reject the answer: %v", err)
		}
		res.status, res.upstream = 200, r.Header
		return res
	}
	res.status, res.header, res.body = envoytest.DeniedResponse(resp.GetDeniedResponse())
	return res
}

// replay sends a recording with a real token in place of the placeholder.
func (f *protoFixture) replay(t *testing.T, rec fixtures.Recording, host, tok string, edit func(*http.Request)) result {
	t.Helper()
	r := rec.HTTPRequest(host)
	if tok == "" {
		r.Header.Del("Authorization")
	} else {
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	if edit != nil {
		edit(r)
	}
	var body []byte
	if len(rec.Body) > 0 {
		body = rec.Body
	}
	return f.send(t, r, body, envoytest.BuildOptions{})
}

type rpcError struct {
	ID    json.RawMessage `json:"id"`
	Error struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Status int    `json:"status"`
			Error  string `json:"error"`
			Scope  string `json:"scope"`
		} `json:"data"`
	} `json:"error"`
}

func decodeRPC(t *testing.T, body []byte) rpcError {
	t.Helper()
	var e rpcError
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("body is not JSON-RPC: %q", body)
	}
	return e
}

// TestMCPRecordings replays what the official MCP Go SDK client sends, in the
// 2025-06-18 session flow and the 2026-07-28 sessionless flow.
func TestMCPRecordings(t *testing.T) {
	f := newProtoFixture(t)
	alice := token(t, "alice", nil)
	recs, err := fixtures.MCP()
	if err != nil {
		t.Fatal(err)
	}
	// What alice (scope files:read, no groups) may do.
	want := map[string]struct {
		status int
		code   int
		method string
	}{
		"mcp-01-initialize":                      {200, 0, "initialize"},
		"mcp-02-get-sse":                         {200, 0, ""},
		"mcp-03-notifications-initialized":       {200, 0, "notifications/initialized"},
		"mcp-04-tools-list":                      {200, 0, "tools/list"},
		"mcp-05-tools-call-whoami":               {200, 0, "tools/call"},
		"mcp-06-tools-call-echo":                 {200, 0, "tools/call"},
		"mcp-07-tools-call-delete-file":          {403, -32000, "tools/call"},
		"mcp-08-resources-read":                  {403, -32000, "resources/read"},
		"mcp-09-delete-session":                  {200, 0, ""},
		"mcp-20260728-01-server-discover":        {200, 0, "server/discover"},
		"mcp-20260728-02-tools-list":             {200, 0, "tools/list"},
		"mcp-20260728-03-tools-call-whoami":      {200, 0, "tools/call"},
		"mcp-20260728-04-tools-call-echo":        {200, 0, "tools/call"},
		"mcp-20260728-05-tools-call-delete-file": {403, -32000, "tools/call"},
		"mcp-20260728-06-resources-read":         {403, -32000, "resources/read"},
	}
	seen := 0
	for _, rec := range recs {
		w, ok := want[rec.Name]
		if !ok {
			t.Errorf("recording %s has no expectation", rec.Name)
			continue
		}
		seen++
		t.Run(rec.Name, func(t *testing.T) {
			res := f.replay(t, rec, "mcp.example.com", alice, nil)
			if res.status != w.status {
				t.Fatalf("status %d, want %d: %s", res.status, w.status, res.body)
			}
			if got, _ := res.metadata["method"].(string); got != w.method {
				t.Errorf("metadata method %q, want %q", got, w.method)
			}
			if res.status == 200 {
				if got := res.upstream.Get("X-User-Id"); got != "alice" {
					t.Errorf("x-user-id %q", got)
				}
				if res.upstream.Get("Authorization") != "" {
					t.Error("authorization forwarded")
				}
				return
			}
			e := decodeRPC(t, res.body)
			var recID struct {
				ID json.RawMessage `json:"id"`
			}
			json.Unmarshal(rec.Body, &recID)
			if e.Error.Code != w.code || !bytes.Equal(e.ID, recID.ID) {
				t.Errorf("error %+v, want code %d and id %s", e, w.code, recID.ID)
			}
		})
	}
	if seen != len(want) {
		t.Errorf("replayed %d of %d expected recordings", seen, len(want))
	}
}

// TestEncoding: how verdicts reach Envoy. The decisions themselves are
// check's tables (internal/check/decisions_test.go); here each kind of
// verdict is read back the way Envoy applies it.
func TestEncoding(t *testing.T) {
	f := newProtoFixture(t)
	reader := token(t, "rita", nil)
	invoker := token(t, "ivan", jwt.MapClaims{"scope": "agent:invoke"})
	call := func(method, params string) []byte {
		return []byte(`{"jsonrpc":"2.0","id":"req-1","method":"` + method + `","params":` + params + `}`)
	}
	tests := []struct {
		name     string
		method   string
		url      string
		body     []byte
		headers  map[string]string
		opts     envoytest.BuildOptions
		status   int
		header   map[string]string // client response headers (substring)
		upstream map[string]string // upstream request headers ("" absent)
		metadata map[string]any
	}{
		{name: "allowed: identity set, credential removed, call in the metadata", url: "http://mcp.example.com/mcp", body: call("tools/call", `{"name":"echo"}`),
			headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Session-Id": "s-1", "X-User-Id": "forged"}, status: 200,
			upstream: map[string]string{"X-User-Id": "rita", "Authorization": ""},
			metadata: map[string]any{"route": "files", "outcome": "allowed", "protocol": "mcp", "method": "tools/call", "name": "echo", "mcp_session": "s-1"}},
		{name: "A2A call in the metadata", url: "http://agent.example.com/", headers: map[string]string{"Authorization": "Bearer " + invoker},
			body:   []byte(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","contextId":"ctx-9","role":"ROLE_USER","parts":[]}}}`),
			status: 200, metadata: map[string]any{"protocol": "a2a", "method": "SendMessage", "a2a_context_id": "ctx-9"}},
		{name: "denied: challenge header and JSON-RPC body", url: "http://mcp.example.com/mcp", body: call("tools/list", `{}`), status: 401,
			header:   map[string]string{"Www-Authenticate": `Bearer resource_metadata="http://mcp.example.com/.well-known/oauth-protected-resource/mcp"`, "Content-Type": "application/json"},
			metadata: map[string]any{"outcome": "missing_token"}},
		{name: "direct answer: the metadata document", method: "GET", url: "https://mcp.example.com/.well-known/oauth-protected-resource/mcp", status: 200,
			header: map[string]string{"Content-Type": "application/json"}},
		// Marked partial, the cut body is refused on a route that binds
		// tasks (the default), even for a call its headers name as allowed.
		{name: "a partial body is marked as such: refused", url: "http://mcp.example.com/mcp", body: call("tools/call", `{"name":"echo"}`),
			opts:    envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 30, AllowPartial: true},
			headers: map[string]string{"Authorization": "Bearer " + reader, "Mcp-Method": "tools/call", "Mcp-Name": "echo"}, status: 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			method := cmp.Or(tt.method, "POST")
			r, _ := http.NewRequest(method, tt.url, bytes.NewReader(tt.body))
			for k, v := range tt.headers {
				r.Header.Set(k, v)
			}
			res := f.send(t, r, tt.body, tt.opts)
			if res.status != tt.status {
				t.Fatalf("status %d, want %d: %s", res.status, tt.status, res.body)
			}
			for k, v := range tt.header {
				if !strings.Contains(res.header.Get(k), v) {
					t.Errorf("response %s = %q, want it to contain %q", k, res.header.Get(k), v)
				}
			}
			for k, v := range tt.upstream {
				if got := res.upstream.Get(k); got != v {
					t.Errorf("upstream %s = %q, want %q", k, got, v)
				}
			}
			for k, v := range tt.metadata {
				if res.metadata[k] != v {
					t.Errorf("metadata %s = %v, want %v (all: %v)", k, res.metadata[k], v, res.metadata)
				}
			}
		})
	}
}

// TestCapturesDecide runs every real Envoy capture through the server: each
// gets a decision (never a gRPC error) with an explicit status.
func TestCapturesDecide(t *testing.T) {
	f := newProtoFixture(t)
	caps, err := envoytest.Captures()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps {
		t.Run(c.Name, func(t *testing.T) {
			resp, err := f.srv.Check(context.Background(), c.Request)
			if err != nil {
				t.Fatal(err)
			}
			// None of the captures carries a token we accept.
			d := resp.GetDeniedResponse()
			if resp.GetStatus().GetCode() == 0 || d == nil || d.GetStatus().GetCode() == 0 {
				t.Fatalf("capture was not denied with a status: %v", resp)
			}
			if code := int(d.GetStatus().GetCode()); code != 401 && code != 400 {
				t.Fatalf("status %d: %s", code, d.GetBody())
			}
		})
	}
}
