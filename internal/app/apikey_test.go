package app

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/testing/redistest"
)

// TestAPIKeyNew: the printed key works with the printed entry, and the
// entry does not hold the key.
func TestAPIKeyNew(t *testing.T) {
	code, out, errOut := runCmd(t, nil, "apikey", "new", "--subject", "billing-agent", "--scopes", "tools.call, read", "--id", "billing-1", "--routes", "billing")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	key, entry, _ := strings.Cut(out, "\n")
	if !apikey.WellFormed(key) || strings.Contains(entry, key) {
		t.Fatalf("output:\n%s", out)
	}
	path := filepath.Join(t.TempDir(), "keys.yaml")
	if err := os.WriteFile(path, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := apikey.Open(path, apikey.Options{Name: "keys"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Lookup(t.Context(), key, "billing")
	if err != nil || c.Subject != "billing-agent" || c.ID != "billing-1" || c.Raw["scope"] != "tools.call read" {
		t.Fatalf("lookup: %+v, %v", c, err)
	}
	if _, err := s.Lookup(t.Context(), key, "other"); err == nil {
		t.Error("the key works on a route it is not limited to")
	}
	if code, _, _ := runCmd(t, nil, "apikey", "rotate"); code != 2 {
		t.Errorf("unknown subcommand: exit %d, want 2", code)
	}
}

// TestAPIKeyRevokedAcrossReplicas: `admin revoke-api-key` on one replica
// refuses the key on the other (shared Redis), and only that key.
func TestAPIKeyRevokedAcrossReplicas(t *testing.T) {
	rd := redistest.Start(t)
	revoked, kept := mustNewKey(t), mustNewKey(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys.yaml")
	if err := os.WriteFile(keys, fmt.Appendf(nil, "keys:\n  - {id: billing-1, subject: billing-agent, hash: %s}\n  - {id: billing-2, subject: billing-agent, hash: %s}\n",
		apikey.SHA256Hash(revoked), apikey.SHA256Hash(kept)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `
issuers: [{name: keys, api_keys: {file: %s}}]
redis: {addrs: [%s], op_timeout: 100ms}
routes: [{name: mcp, default: true, protocol: mcp, issuers: [keys]}]
`, keys, rd.Addr), 0o600); err != nil {
		t.Fatal(err)
	}
	a, b := startServerWith(t, nil, ServeOptions{ConfigFile: cfg}), startServerWith(t, nil, ServeOptions{ConfigFile: cfg})
	for _, s := range []*server{a, b} {
		if got := httpStatus(s.call(t, revoked, "", "tools/list", `{}`)); got != 200 {
			t.Fatalf("before the revocation: %d", got)
		}
	}
	code, out := runCmd3(t, nil, "admin", "--addr", a.adminAddr, "revoke-api-key", "--issuer", "keys", "billing-1")
	if code != 0 || !strings.Contains(out, "API key keys billing-1 revoked until") || strings.Contains(out, "note:") {
		t.Fatalf("revoke-api-key on A: exit %d\n%s", code, out)
	}
	if strings.Contains(out, revoked) {
		t.Fatal("the key is in the output")
	}
	if code, out := runCmd3(t, nil, "admin", "--addr", a.adminAddr, "revoke-api-key", "--issuer", "nobody", "billing-1"); code == 0 || !strings.Contains(out, "InvalidArgument") {
		t.Errorf("an unknown issuer: exit %d\n%s", code, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for httpStatus(b.call(t, revoked, "", "tools/list", `{}`)) != 401 {
		if time.Now().After(deadline) {
			t.Fatal("B still accepts the key after the revocation on A")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, s := range map[string]*server{"A": a, "B": b} {
		if got := httpStatus(s.call(t, revoked, "", "tools/list", `{}`)); got != 401 {
			t.Errorf("the revoked key on %s: %d", name, got)
		}
		if got := httpStatus(s.call(t, kept, "", "tools/list", `{}`)); got != 200 {
			t.Errorf("another key of the same subject on %s: %d", name, got)
		}
	}
}

func mustNewKey(t *testing.T) string {
	t.Helper()
	k, err := apikey.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
