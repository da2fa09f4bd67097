package extprocauthz_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/testpeers"
)

// front is Envoy with envoy/extproc.yaml's two filters in front of an MCP
// server, made of the test tree's faithful pieces: the ext_authz check
// (envoytest.BuildCheckRequest, ApplyOK, DeniedResponse), the upstream
// call, then the ext_proc stream for the exchange (envoytest.ExtProc) with
// ext_authz's metadata forwarded. POST answers go through ext_proc whole
// (the MCP server ends each POST's stream after its answer); GET and
// DELETE pass after the check.
type front struct {
	t        *testing.T
	f        *fixture
	upstream string
	// processGET sends GET answers through ext_proc as POST answers are
	// (whole, once the upstream ended them), as the recommended filter
	// settings do; otherwise they pass after the check.
	processGET bool
}

func (p *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	resp, err := p.f.authz.Check(r.Context(), envoytest.BuildCheckRequest(r, body, envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}))
	if err != nil {
		http.Error(w, "authz", http.StatusServiceUnavailable)
		return
	}
	if resp.GetStatus().GetCode() != 0 {
		status, h, b := envoytest.DeniedResponse(resp.GetDeniedResponse())
		for k, v := range h {
			w.Header()[k] = v
		}
		w.WriteHeader(status)
		w.Write(b)
		return
	}
	if _, err := envoytest.ApplyOK(r, resp.GetOkResponse()); err != nil {
		p.t.Errorf("ApplyOK: %v", err)
		http.Error(w, "mutation", http.StatusInternalServerError)
		return
	}
	up, _ := http.NewRequestWithContext(r.Context(), r.Method, p.upstream+r.URL.RequestURI(), bytes.NewReader(body))
	up.Header = r.Header.Clone()
	up.Host = r.Host
	uresp, err := http.DefaultClient.Do(up)
	if err != nil {
		http.Error(w, "upstream", http.StatusBadGateway)
		return
	}
	defer uresp.Body.Close()
	if r.Method != http.MethodPost && !(p.processGET && r.Method == http.MethodGet) {
		for k, v := range uresp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(uresp.StatusCode)
		buf := make([]byte, 4096)
		for {
			n, err := uresp.Body.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
		}
	}
	ubody, _ := io.ReadAll(uresp.Body)
	var chunks []string
	if len(ubody) > 0 {
		// Arbitrary data frames: the processor reassembles events.
		for len(ubody) > 0 {
			n := min(len(ubody), 97)
			chunks = append(chunks, string(ubody[:n]))
			ubody = ubody[n:]
		}
	}
	md := &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{extprocauthz.MetadataNamespace: resp.GetDynamicMetadata()}}
	res := envoytest.ExtProc(p.t, p.f.conn, recommended(md), envoytest.ExtProcExchange{
		Request:  envoytest.ExtProcRequest(r.Method, r.Host, r.URL.RequestURI(), r.Header, string(body)),
		Response: envoytest.ExtProcResponse(uresp.StatusCode, uresp.Header, chunks...),
	})
	if res.Err != nil || res.Reset {
		p.t.Errorf("ext_proc: %v (reset %v)", res.Err, res.Reset)
		http.Error(w, "ext_proc", http.StatusInternalServerError)
		return
	}
	for _, h := range res.Downstream.Headers {
		if !strings.HasPrefix(h.Key, ":") && h.Key != "content-length" {
			w.Header().Add(h.Key, h.Value)
		}
	}
	w.WriteHeader(res.Downstream.Status())
	w.Write(res.Downstream.Body())
}

func newFront(t *testing.T, jsonResponse bool) (*fixture, string) {
	return newFrontTo(t, testpeers.NewMCPServer(testpeers.MCPOptions{JSONResponse: jsonResponse}))
}

func newFrontTo(t *testing.T, upstream http.Handler) (*fixture, string) {
	f := newFixture(t)
	up := httptest.NewServer(upstream)
	t.Cleanup(up.Close)
	fr := httptest.NewServer(&front{t: t, f: f, upstream: up.URL})
	t.Cleanup(fr.Close)
	// The MCP server is reached under the route's host.
	return f, fr.URL
}

// hostClient sends every request to the front with Host mcp.example.com.
func hostClient(token, frontURL string) *http.Client {
	return hostClientFor("mcp.example.com", token, frontURL)
}

func hostClientFor(host, token, frontURL string) *http.Client {
	return testpeers.NewHTTPClient(token, nil, hostRewrite{host: host, front: strings.TrimPrefix(frontURL, "http://")})
}

type hostRewrite struct{ host, front string }

func (h hostRewrite) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Host = h.host
	r.URL.Host = h.front
	return http.DefaultTransport.RoundTrip(r)
}

// TestSDKListsFiltered: the official MCP Go SDK client, through the front,
// lists only the tools its user may call; the admin lists them all; the
// session the initialize answer created is its user's alone.
func TestSDKListsFiltered(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		name := map[bool]string{false: "event stream", true: "json"}[jsonResponse]
		t.Run(name, func(t *testing.T) {
			_, url := newFront(t, jsonResponse)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, tc := range []struct {
				user  string
				scope string
				want  []string
			}{
				{"alice", "files:read", []string{testpeers.ToolEcho, testpeers.ToolWhoAmI}},
				{"root", "files:read files:write", []string{testpeers.ToolDeleteFile, testpeers.ToolEcho, testpeers.ToolWhoAmI}},
			} {
				tok := token(t, tc.user, jwt.MapClaims{"scope": tc.scope})
				cs, err := testpeers.NewMCPClient(ctx, url+"/mcp", hostClient(tok, url),
					&testpeers.MCPClientOptions{ProtocolVersion: testpeers.MCPVersion20251125, DisableStandaloneSSE: true})
				if err != nil {
					t.Fatal(err)
				}
				res, err := cs.ListTools(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, tool := range res.Tools {
					got = append(got, tool.Name)
				}
				slices.Sort(got)
				if !slices.Equal(got, tc.want) {
					t.Fatalf("%s lists %v, want %v", tc.user, got, tc.want)
				}
				// The session is bound at birth: another user is refused it,
				// an id nobody created is unknown (404).
				sid := cs.ID()
				if sid == "" {
					t.Fatal("no session")
				}
				mallory := hostClient(token(t, "mallory", nil), url)
				for id, want := range map[string]int{sid: 403, "never-created": 404} {
					req, _ := http.NewRequest("POST", url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"tools/list"}`))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Accept", "application/json, text/event-stream")
					req.Header.Set("Mcp-Session-Id", id)
					req.Header.Set("Mcp-Protocol-Version", testpeers.MCPVersion20251125)
					resp, err := mallory.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != want {
						t.Fatalf("session %q for another user: %d, want %d", id, resp.StatusCode, want)
					}
				}
				cs.Close()
			}
		})
	}
}

// TestSDKReauthorizationOn401: when the MCP server behind an exchanging
// route refuses the exchanged token (401), the SDK client's tool call gets
// the in-session re-authorization answer (the isError result carrying the
// authorization URL, since this client declared no URL elicitation), not a
// transport error; the next call exchanges a fresh token.
func TestSDKReauthorizationOn401(t *testing.T) {
	mcpServer := testpeers.NewMCPServer(testpeers.MCPOptions{})
	refuse := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) && bytes.Contains(body, []byte(`"echo"`)) {
			w.Header().Set("Www-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "token expired", http.StatusUnauthorized)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mcpServer.ServeHTTP(w, r)
	}
	f, url := newFrontTo(t, http.HandlerFunc(refuse))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := testpeers.NewMCPClient(ctx, url+"/mcp", hostClientFor("backend.example.com", token(t, "alice", nil), url),
		&testpeers.MCPClientOptions{ProtocolVersion: testpeers.MCPVersion20251125, DisableStandaloneSSE: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	calls := f.sts.Calls()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: testpeers.ToolEcho, Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatalf("the client got a transport error, not the re-authorization answer: %v", err)
	}
	text := ""
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text += tc.Text
		}
	}
	if !res.IsError || !strings.Contains(text, "https://idp.example.com/authorize") {
		t.Fatalf("tool result %+v: %s", res, text)
	}
	if f.counted.get(extprocauthz.ActionReauthorized) != 1 {
		t.Fatal("the re-authorization is not counted")
	}
	// The next call exchanges again: the refused token was dropped.
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: testpeers.ToolWhoAmI}); err != nil {
		t.Fatal(err)
	}
	if got := f.sts.Calls(); got != calls+2 {
		t.Fatalf("STS calls %d, want %d (each call after the refusal exchanges afresh)", got, calls+2)
	}
}
