package attack

import (
	"net/http"
	"testing"
)

// rulesYAML denies delete_file to everyone without the admin scope.
const rulesYAML = `routes:
  - name: mcp
    default: true
    issuers: [hs, other]
    audiences: [` + audience + `]
    rules:
      - {methods: ["tools/call"], names: ["delete_*"], scopes: [admin]}
`

// TestControl shows the suite can tell an allow from a denial: the allowed
// tool runs with the caller's identity, the forbidden one is refused and
// does not run. Every other family relies on this.
func TestControl(t *testing.T) {
	s := start(t, rulesYAML, options{})
	user := token(t, issuerHS, "mallory", "read")

	status, _, body := s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(user), toolCall(1, "whoami", ""))
	if status != 200 || s.ran("whoami") != 1 {
		t.Fatalf("allowed call: status %d, body %s, ran %d times", status, body, s.ran("whoami"))
	}
	status, _, body = s.viaEnvoy(t, http.MethodPost, "/mcp", bearer(user), toolCall(2, "delete_file", `{"path":"/etc/passwd"}`))
	if status != 403 || s.ran("delete_file") != 0 {
		t.Fatalf("forbidden call: status %d, body %s, ran %d times", status, body, s.ran("delete_file"))
	}

	v := s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + user}, Body: toolCall(3, "delete_file", "{}")})
	v.wantDenied(t, 403)
	if e := v.rpc(t); string(e.ID) != "3" {
		t.Fatalf("JSON-RPC error id %s, want 3", e.ID)
	}
}
