package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDevelopmentSecretRules: token and check follow serve's rules for the
// built-in default: a JWT_SECRET shorter than 32 bytes is refused, and
// running without one says so loudly.
func TestDevelopmentSecretRules(t *testing.T) {
	req := filepath.Join(t.TempDir(), "req.json")
	os.WriteFile(req, []byte(`{"attributes":{"request":{"http":{"method":"GET","host":"a.example.com","path":"/","headers":{":authority":"a.example.com",":path":"/",":method":"GET"}}}}}`), 0o600)
	long := strings.Repeat("k", 32)
	tests := []struct {
		name     string
		secret   string
		args     []string
		wantCode int
		stderr   string // "" means stderr must be empty
	}{
		{"token, good secret", long, []string{"token", "--sub", "a"}, 0, ""},
		{"token, short secret", "short", []string{"token", "--sub", "a"}, 1, "secret is 5 bytes, at least 32 are required"},
		{"token, development secret", "", []string{"token", "--sub", "a"}, 0, "INSECURE DEFAULT: JWT_SECRET is not set"},
		{"check, short secret", "short", []string{"check", req}, 1, "secret is 5 bytes, at least 32 are required"},
		{"check, development secret", "", []string{"check", req}, 1, "INSECURE DEFAULT: JWT_SECRET is not set"},
		{"check, good secret", long, []string{"check", req}, 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{}
			if tt.secret != "" {
				vars["JWT_SECRET"] = tt.secret
			}
			code, out, errOut := runCmd(t, vars, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %s%s", code, tt.wantCode, out, errOut)
			}
			if tt.stderr == "" && errOut != "" || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("stderr %q, want %q", errOut, tt.stderr)
			}
		})
	}
}
