package app

import (
	"strings"
	"testing"
)

// TestExampleRequests: the example requests next to the quick start decide
// as the README says, with no configuration and no JWT_SECRET (they are
// signed with the public development secret).
func TestExampleRequests(t *testing.T) {
	tests := []struct {
		file     string
		wantCode int
		want     []string
	}{
		{"../../examples/requests/allowed.json", 0, []string{"decision allowed: 200 allowed", `"key": "x-user-id", "value": "alice"`, `"key": "x-session-id", "value": "sess-42"`}},
		{"../../examples/requests/denied.json", 1, []string{"decision denied: 401 missing_token", `"key": "www-authenticate", "value": "Bearer resource_metadata=`, `\"jsonrpc\":\"2.0\",\"id\":1,\"error\"`}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			code, out, errOut := runCmd(t, nil, "check", tt.file)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tt.wantCode, out, errOut)
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, w := range tt.want {
				if !strings.Contains(flat, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "mallory") {
				t.Error("the forged x-user-id reached the upstream")
			}
		})
	}
}
