package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/apikey"
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
