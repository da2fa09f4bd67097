package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnvoyCheckCommand(t *testing.T) {
	b, err := os.ReadFile("../../deploy/envoy-gateway/securitypolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(t.TempDir(), "open.yaml")
	os.WriteFile(broken, []byte(strings.Replace(string(b), "failOpen: false", "failOpen: true", 1)), 0o600)
	tests := []struct {
		name     string
		args     []string
		wantCode int
		stdout   []string
		stderr   []string
	}{
		{"shipped files", []string{"../../envoy/envoy.yaml", "../../deploy/istio/meshconfig.yaml", "../../deploy/envoy-gateway/securitypolicies.yaml"}, 0,
			[]string{"envoy.yaml: ok\n  needs Envoy 1.31 or later", "meshconfig.yaml: ok\n", "securitypolicies.yaml: ok\n  needs Envoy Gateway 1.8 or later (extAuth.statusOnError)"}, nil},
		{"a policy failing open", []string{"../../envoy/envoy.yaml", broken}, 1,
			[]string{"envoy.yaml: ok"}, []string{"open.yaml:\n  line 28: SecurityPolicy files-mcp-extauthz: spec.extAuth: failOpen: true", "1 file of 2 failed"}},
		{"a missing file", []string{"nothing.yaml"}, 1, nil, []string{"no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, nil, append([]string{"envoy-check"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d:\n%s%s", code, tt.wantCode, out, errOut)
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out, w) {
					t.Errorf("stdout lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.stderr {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		})
	}
}
