package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestFreshReplicaWaitsForRevocations: a replica started while Redis is
// down knows of no revocation the others made. It is not ready (/readyz,
// gRPC health) and answers an identified caller 503 with the JSON-RPC
// error of an unavailable dependency, rather than admit a revoked user,
// even though redis.required_for_ready is off. Once Redis is back it reads
// the revocations by itself, becomes ready, refuses the revoked user and
// admits the others.
func TestFreshReplicaWaitsForRevocations(t *testing.T) {
	rd := redistest.StartPersistent(t)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
issuers: [{name: idp, secret: %s}]
redis: {addrs: [%s], op_timeout: 100ms}
routes: [{name: mcp, default: true, protocol: mcp, issuers: [idp]}]
`, reloadSecret, rd.Addr), 0o600); err != nil {
		t.Fatal(err)
	}
	mint := func(sub string) string {
		return testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": sub, "iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	carol, alice := mint("carol"), mint("alice")
	a := startServerWith(t, nil, ServeOptions{ConfigFile: cfg})
	if code, out := runCmd3(t, nil, "admin", "--addr", a.adminAddr, "revoke-subject", "--issuer", "idp", "carol"); code != 0 {
		t.Fatalf("revoke on A: %s", out)
	}
	rd.Kill()

	b := startServerWith(t, nil, ServeOptions{ConfigFile: cfg})
	health := func() healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		hc, err := healthpb.NewHealthClient(b.conn).Check(ctx, &healthpb.HealthCheckRequest{Service: authv3.Authorization_ServiceDesc.ServiceName})
		if err != nil {
			t.Fatalf("health: %v", err)
		}
		return hc.GetStatus()
	}
	if code, body := httpGet(t, "http://"+b.opsAddr+"/readyz"); code != 503 {
		t.Errorf("/readyz before the revocations are read: %d %s", code, body)
	}
	if st := health(); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("gRPC health before the revocations are read: %v", st)
	}
	for _, tc := range []struct{ name, tok string }{{"the revoked user", carol}, {"another user", alice}} {
		resp := b.call(t, tc.tok, "", "tools/list", `{}`)
		d := resp.GetDeniedResponse()
		headers := map[string]string{}
		for _, h := range d.GetHeaders() {
			headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
		}
		if got := httpStatus(resp); got != 503 || !strings.Contains(d.GetBody(), `"id":1`) || !strings.Contains(d.GetBody(), "revocations") || headers["retry-after"] == "" {
			t.Errorf("%s before the revocations are read: %d %v %s; want 503 with a JSON-RPC error and Retry-After", tc.name, got, headers, d.GetBody())
		}
	}

	if err := rd.Restart(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := httpGet(t, "http://"+b.opsAddr+"/readyz")
		if code == 200 && health() == healthpb.HealthCheckResponse_SERVING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready 10s after Redis came back: /readyz %d", code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := httpStatus(b.call(t, carol, "", "tools/list", `{}`)); got != 401 {
		t.Errorf("the revoked user once the revocations are read: %d, want 401", got)
	}
	if got := httpStatus(b.call(t, alice, "", "tools/list", `{}`)); got != 200 {
		t.Errorf("another user once the revocations are read: %d, want 200", got)
	}
}
