package app

import (
	"fmt"
	"net/http"
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

	"github.com/extauthz/extauthz/internal/envoytest"
	"github.com/extauthz/extauthz/internal/extprocauthz"
	"github.com/extauthz/extauthz/internal/testtoken"
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
