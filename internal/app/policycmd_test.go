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

// policyConfig has a rule expression on the arguments, on a route that
// reads the body and on one that does not.
const policyConfig = `issuers:
  - {name: dev, algorithms: [HS256], secret_env: JWT_SECRET}
routes:
  - name: mcp
    hosts: [mcp.example.com]
    issuers: [dev]
    protocol: mcp
    rules:
      - name: own workspace
        methods: [tools/call]
        names: [read_file]
        when: cleanPath(mcp.arguments.path).startsWith("/workspace/" + identity.subject + "/")
  - name: headers
    hosts: [headers.example.com]
    issuers: [dev]
    protocol: mcp
    request_body: none
    upstream_validates_mcp_headers: true
    rules:
      - name: own workspace
        methods: [tools/call]
        when: cleanPath(mcp.arguments.path).startsWith("/workspace/")
`

// TestCheckCommandShowsRuleExpressions: extauthz check shows each rule
// expression tried, its source, the values it read and its result; validate
// warns about the rule that can never see the arguments.
func TestCheckCommandShowsRuleExpressions(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(policyConfig), 0o600)
	vars := map[string]string{"JWT_SECRET": reloadSecret}

	code, out, errOut := runCmd(t, vars, "validate", "--config", cfg)
	if code != 0 || !strings.Contains(errOut, "warning: line 22: routes[1] (headers).rules[0] (own workspace).when: reads mcp.arguments") {
		t.Errorf("validate: exit %d\n%s%s", code, out, errOut)
	}

	tok := testtoken.HMAC(t, "HS256", reloadSecret, map[string]any{"sub": "alice", "exp": time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()})
	for _, tt := range []struct {
		name, path string
		code       int
		want       []string
	}{
		{"own file", "/workspace/alice/notes.txt", 0, []string{"allowed: 200 allowed", `=> true; read: mcp.arguments.path = "/workspace/alice/notes.txt", identity.subject = "alice"`}},
		{"another's file", "/workspace/alice/../bob/notes.txt", 1, []string{"denied: 403 forbidden", "when cleanPath(mcp.arguments.path)", "=> false"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := envoyRequest(map[string]string{"authorization": "Bearer " + tok, "content-type": "application/json"})
			req.Attributes.Request.Http.Body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"` + tt.path + `"}}}`
			b, _ := protojson.Marshal(req)
			path := filepath.Join(dir, "req.json")
			os.WriteFile(path, b, 0o600)
			code, out, errOut := runCmd(t, vars, "check", "--config", cfg, path)
			if code != tt.code {
				t.Fatalf("exit %d\n%s%s", code, out, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
