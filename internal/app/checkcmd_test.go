package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

func TestCheckCommandOnCaptures(t *testing.T) {
	caps, err := envoytest.Captures()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	vars := map[string]string{"JWT_SECRET": reloadSecret}
	for _, c := range caps {
		t.Run(c.Name, func(t *testing.T) {
			b, err := protojson.Marshal(c.Request)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, c.Name+".json")
			os.WriteFile(path, b, 0o600)
			code, out, errOut := runCmd(t, vars, "check", path)
			if code != 1 {
				t.Fatalf("exit %d for a denied capture: %s %s", code, out, errOut)
			}
			for _, want := range []string{"decision  ", "STEP ", "\nroute ", "verdict", `"deniedResponse"`} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestCheckCommandAllowed(t *testing.T) {
	dir := t.TempDir()
	tok := testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": "alice", "session_id": "s1", "exp": time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()})
	req := envoyRequest(map[string]string{"authorization": "Bearer " + tok})
	b, _ := protojson.Marshal(req)
	path := filepath.Join(dir, "req.json")
	os.WriteFile(path, b, 0o600)
	vars := map[string]string{"JWT_SECRET": reloadSecret}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string
	}{
		{"allowed", []string{"check", path}, 0, []string{"decision allowed: 200 allowed", "identity alice issuer default", `"x-user-id"`, "lineage derived"}},
		{"allowed as JSON", []string{"check", "--json", path}, 0, []string{`"allowed": true`, `"httpStatus": 200`, `"x-user-id"`}},
		{"expired as of a later time", []string{"check", "--time", "2031-01-01T00:00:00Z", path}, 1, []string{"decision denied: 401 invalid_token", "description token is expired"}},
		{"no file", []string{"check"}, 2, nil},
		{"bad time", []string{"check", "--time", "yesterday", path}, 2, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, vars, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.wantCode, out, errOut)
			}
			flat := strings.Join(strings.Fields(out), " ") // table columns vary in width
			for _, w := range tt.want {
				if !strings.Contains(flat, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
