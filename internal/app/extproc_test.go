package app

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/mcpresponse"
	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestExtProcListener: the gRPC listener serves the response path next to
// ext_authz, with one health status: a tools/list checked by ext_authz
// comes back filtered through ext_proc, and the filtering is counted.
func TestExtProcListener(t *testing.T) {
	const secret = "extproc-app-secret-extproc-app-secret-0123"
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(`issuers: [{name: a, secret_env: S}]
routes:
  - name: files
    default: true
    protocol: mcp
    issuers: [a]
    response_path: true
    rules: [{methods: [tools/call], names: ["delete_*"], scopes: [files:write]}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, map[string]string{"S": secret}, cfg)
	ctx := t.Context()
	hc, err := healthpb.NewHealthClient(s.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: extprocv3.ExternalProcessor_ServiceDesc.ServiceName})
	if err != nil || hc.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hc, err)
	}
	tok := testtoken.HMAC(t, "HS256", secret, map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	r, _ := http.NewRequest("POST", "http://mcp.example.com/mcp", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := s.client.Check(ctx, envoytest.BuildCheckRequest(r, []byte(body), envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20}))
	if err != nil || resp.GetStatus().GetCode() != 0 {
		t.Fatalf("ext_authz: %v %v", resp, err)
	}
	result := `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read_file"},{"name":"delete_file"}]}}`
	res := envoytest.ExtProc(t, s.conn, envoytest.ExtProcConfig{
		Mode:              &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED},
		AllowModeOverride: true,
		MessageTimeout:    5 * time.Second,
		Metadata:          &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{extprocauthz.MetadataNamespace: resp.GetDynamicMetadata()}},
	}, envoytest.ExtProcExchange{
		Request:  envoytest.ExtProcRequest("POST", "mcp.example.com", "/mcp", http.Header{"Content-Type": {"application/json"}}, body),
		Response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"application/json"}, "Content-Length": {fmt.Sprint(len(result))}}, result),
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	if got, want := string(res.Downstream.Body()), `{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"read_file"}]}}`; got != want {
		t.Fatalf("client got %s", got)
	}
	if _, metrics := httpGet(t, "http://"+s.opsAddr+"/metrics"); !strings.Contains(metrics, `extauthz_response_path_total{action="filtered",route="files"} 1`) {
		t.Fatal("the filtering is not counted")
	}
}

// TestElicitationCompleteAcrossReplicas: two replicas, one Redis. The
// client's GET stream of a session born through ext_proc is open on A; the
// user completes the authorization through B's admin API; A injects
// notifications/elicitation/complete into the stream.
func TestElicitationCompleteAcrossReplicas(t *testing.T) {
	rd := redistest.Start(t)
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: "sts-secret"}}})
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`
issuers: [{name: idp, secret: %s}]
redis: {addrs: [%s], encryption_key_env: TOKEN_KEY, op_timeout: 500ms}
elicitations: {state_key_env: STATE_KEY}
exchanges:
  - {name: sts, token_endpoint: %s, client_auth: {method: client_secret_post, client_id: extauthz, client_secret_env: STS_SECRET}}
routes:
  - name: mcp
    default: true
    protocol: mcp
    issuers: [idp]
    response_path: true
    exchange:
      sts: sts
      audience: [https://backend.example.com]
      methods: [tools/call]
      authorize_url: https://idp.example.com/authorize
      tools: [{names: ["calendar_*"], audience: [https://calendar.example.com], consent: true}]
`, reloadSecret, rd.Addr, sts.TokenURL)), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"TOKEN_KEY": base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef")),
		"STS_SECRET": "sts-secret", "STATE_KEY": "replicas-share-this-state-key-0123456789"}
	a := startServerWith(t, vars, ServeOptions{ConfigFile: cfg})
	b := startServerWith(t, vars, ServeOptions{ConfigFile: cfg})
	alice := testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": "alice", "exp": time.Now().Add(time.Hour).Unix()})

	// The session is born on A, of the initialize answer.
	initialize := `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	md := checkThrough(t, a, "POST", alice, "", initialize)
	res := envoytest.ExtProc(t, a.conn, envoytest.ExtProcConfig{
		Mode:              &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED},
		AllowModeOverride: true, MessageTimeout: 5 * time.Second, Metadata: md,
	}, envoytest.ExtProcExchange{
		Request:  envoytest.ExtProcRequest("POST", "mcp.example.com", "/mcp", http.Header{"Content-Type": {"application/json"}}, initialize),
		Response: envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"application/json"}, "Mcp-Session-Id": {"s-1"}}, `{"jsonrpc":"2.0","id":0,"result":{}}`),
	})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	// A tool that needs the user's consent: the answer names the
	// elicitation and carries its signed state.
	resp := a.call(t, alice, "s-1", "tools/call", `{"name":"calendar_add"}`)
	var body struct {
		Result struct {
			Meta struct {
				AuthRequired struct {
					ElicitationID string `json:"elicitation_id"`
					URL           string `json:"url"`
				} `json:"auth_required"`
			} `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(resp.GetDeniedResponse().GetBody()), &body); err != nil || body.Result.Meta.AuthRequired.ElicitationID == "" {
		t.Fatalf("no elicitation: %s", resp.GetDeniedResponse().GetBody())
	}
	id := body.Result.Meta.AuthRequired.ElicitationID

	// The client's GET stream on A, in full duplex; the server's first
	// byte comes a while later.
	md = checkThrough(t, a, "GET", alice, "s-1", "")
	done := make(chan envoytest.ExtProcResult, 1)
	go func() {
		done <- envoytest.ExtProc(t, a.conn, envoytest.ExtProcConfig{
			Mode: &filterv3.ProcessingMode{RequestBodyMode: filterv3.ProcessingMode_BUFFERED,
				ResponseBodyMode: filterv3.ProcessingMode_FULL_DUPLEX_STREAMED, ResponseTrailerMode: filterv3.ProcessingMode_SEND},
			MessageTimeout: 5 * time.Second, StreamIdleTimeout: 20 * time.Second, Metadata: md,
		}, envoytest.ExtProcExchange{
			Request:        envoytest.ExtProcRequest("GET", "mcp.example.com", "/mcp", http.Header{"Accept": {"text/event-stream"}, "Mcp-Session-Id": {"s-1"}}),
			Response:       envoytest.ExtProcResponse(200, http.Header{"Content-Type": {"text/event-stream"}}, "id: p0\ndata:\n\n"),
			FirstByteDelay: 3 * time.Second,
		})
	}()
	waitMetric(t, a, `extauthz_response_path_total{action="stream_opened",route="mcp"} 1`)

	u, err := url.Parse(body.Result.Meta.AuthRequired.URL)
	if err != nil {
		t.Fatal(err)
	}
	done2, err := http.PostForm("http://"+b.adminAddr+"/elicitations/"+id+"/complete", url.Values{"state": {u.Query().Get("state")}})
	if err != nil || done2.StatusCode != http.StatusNoContent {
		t.Fatalf("completion on B: %v %v", done2, err)
	}
	done2.Body.Close()
	got := <-done
	if got.Err != nil {
		t.Fatal(got.Err)
	}
	if want := string(mcpresponse.ElicitationCompleteEvent(id)); !strings.Contains(string(got.Downstream.Body()), want) {
		t.Fatalf("the stream on A carried %q, not the completion", got.Downstream.Body())
	}
}

// checkThrough runs a request through s's ext_authz and returns the
// metadata Envoy forwards to ext_proc.
func checkThrough(t *testing.T, s *server, method, tok, session, body string) *corev3.Metadata {
	t.Helper()
	r, _ := http.NewRequest(method, "http://mcp.example.com/mcp", strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if session != "" {
		r.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := s.client.Check(t.Context(), envoytest.BuildCheckRequest(r, []byte(body), envoytest.BuildOptions{WithBody: body != "", MaxRequestBytes: 1 << 20}))
	if err != nil || resp.GetStatus().GetCode() != 0 {
		t.Fatalf("ext_authz %s: %v %v", method, resp, err)
	}
	return &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{extprocauthz.MetadataNamespace: resp.GetDynamicMetadata()}}
}

// waitMetric waits (at most 10s) until s's metrics show line.
func waitMetric(t *testing.T, s *server, line string) {
	t.Helper()
	for range 200 {
		if _, m := httpGet(t, "http://"+s.opsAddr+"/metrics"); strings.Contains(m, line) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("metrics never showed %s", line)
}
