package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// TestAdminAPI drives the admin gRPC API of a running service through the
// extauthz admin command, over the admin listener.
func TestAdminAPI(t *testing.T) {
	vars := map[string]string{"JWT_SECRET": reloadSecret}
	s := startServer(t, vars, "")
	issued := time.Now().Add(-time.Minute)
	mint := func(sub, session string, iat time.Time) string {
		return testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": sub, "session_id": session, "iat": iat.Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	alice, bob := mint("alice", "s-a", issued), mint("bob", "s-b", issued)
	admin := func(args ...string) (int, string) {
		code, out, errOut := runCmd(t, vars, append([]string{"admin", "--addr", s.adminAddr}, args...)...)
		return code, out + errOut
	}
	for _, tok := range []string{alice, bob} {
		if code, _ := s.statusOf(t, tok); code != 200 {
			t.Fatalf("before: %d", code)
		}
	}

	code, out := admin("stats")
	if code != 0 || !strings.Contains(out, "verdicts") {
		t.Fatalf("stats: %d %s", code, out)
	}

	code, out = admin("invalidate-session", "s-b")
	if code != 0 || !strings.Contains(out, "1") {
		t.Fatalf("invalidate-session: %d %s", code, out)
	}
	if code, _ := s.statusOf(t, bob); code != 200 {
		t.Fatal("invalidating a session's cache entries must not deny a valid token")
	}

	code, out = admin("revoke-subject", "--issuer", "default", "alice")
	if code != 0 {
		t.Fatalf("revoke-subject: %d %s", code, out)
	}
	if code, _ := s.statusOf(t, alice); code != 401 {
		t.Fatalf("revoked subject's old token: %d, want 401", code)
	}
	if code, _ := s.statusOf(t, bob); code != 200 {
		t.Fatal("revocation of alice affected bob")
	}
	if code, _ := s.statusOf(t, mint("alice", "s-a2", time.Now().Add(2*time.Second))); code != 200 {
		t.Fatal("a token issued after the revocation is refused")
	}

	req := filepath.Join(t.TempDir(), "req.json")
	b, _ := protojson.Marshal(envoyRequest(map[string]string{"authorization": "Bearer " + bob}))
	os.WriteFile(req, b, 0o600)
	if code, out := admin("explain", req); code != 0 || !strings.Contains(out, "allowed") || !strings.Contains(out, "identity") {
		t.Fatalf("explain: %d %s", code, out)
	}
	b, _ = protojson.Marshal(envoyRequest(map[string]string{"authorization": "Bearer " + alice}))
	os.WriteFile(req, b, 0o600)
	if code, out := admin("explain", req); code != 1 || !strings.Contains(out, "revoked") {
		t.Fatalf("explain of a revoked token: %d %s", code, out)
	}
	if code, _ := admin("invalidate-session"); code != 2 {
		t.Fatalf("usage error exit %d", code)
	}

	// The admin API is never served on the ext_authz port.
	code, out = runCmd3(t, vars, "admin", "--addr", s.grpcAddr, "--timeout", "2s", "stats")
	if code == 0 {
		t.Fatalf("admin API answered on the ext_authz port: %s", out)
	}
}

func runCmd3(t *testing.T, vars map[string]string, args ...string) (int, string) {
	code, out, errOut := runCmd(t, vars, args...)
	return code, out + errOut
}
