package attack

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/testing/envoytest"
)

// tenantRulesYAML denies one tenant by a header a rule reads.
const tenantRulesYAML = `routes:
  - name: tenants
    default: true
    issuers: [hs]
    rules:
      - name: blocked tenant
        methods: [tools/call]
        action: deny
        when: request.headers["x-tenant"] == "blocked"
      - {methods: [tools/call]}
`

// TestRepeatedRuleHeader: a user of the blocked tenant sends its header
// twice, or beside another tenant's. The rule would read the values
// joined ("blocked,blocked", which is not "blocked") while the MCP server
// reads one of them: the request is refused wherever the front end is
// given the header lines (forward-auth, Envoy's raw header map), and the
// tool runs only for the one other tenant's call. Through Envoy's merged header map the repeat cannot be
// told from one value holding a comma; the shipped configurations set
// encode_raw_headers.
func TestRepeatedRuleHeader(t *testing.T) {
	repeats := []struct {
		name    string
		tenants []string
		status  int
	}{
		{"one header, the blocked tenant", []string{"blocked"}, http.StatusForbidden},
		{"one header, another tenant", []string{"acme"}, http.StatusOK},
		{"the blocked tenant twice", []string{"blocked", "blocked"}, http.StatusBadRequest},
		{"another tenant, then the blocked one", []string{"acme", "blocked"}, http.StatusBadRequest},
		{"the blocked tenant, then another", []string{"blocked", "acme"}, http.StatusBadRequest},
	}
	fronts := []struct {
		name string
		o    options
		ask  func(s *suite, t *testing.T, h http.Header, body string) (int, string)
	}{
		{"ext_authz, raw header map", options{Build: &envoytest.BuildOptions{WithBody: true, MaxRequestBytes: 1 << 20, EncodeRawHeaders: true}},
			func(s *suite, t *testing.T, h http.Header, body string) (int, string) {
				status, _, b := s.viaEnvoy(t, http.MethodPost, "/mcp", h, body)
				return status, b
			}},
		{"forward-auth", options{},
			func(s *suite, t *testing.T, h http.Header, body string) (int, string) {
				status, _, b := s.forwardAuth(t, fwd{Header: h, Body: body})
				return status, b
			}},
	}
	for _, fr := range fronts {
		t.Run(fr.name, func(t *testing.T) {
			s := start(t, tenantRulesYAML, fr.o)
			user := token(t, issuerHS, "mallory", "read")
			for i, tt := range repeats {
				t.Run(tt.name, func(t *testing.T) {
					h := bearer(user)
					h["X-Tenant"] = tt.tenants
					status, body := fr.ask(s, t, h, toolCall(i+1, "whoami", ""))
					if status != tt.status {
						t.Fatalf("status %d, body %s; want %d", status, body, tt.status)
					}
					if status == http.StatusBadRequest && !strings.Contains(body, "x-tenant") {
						t.Errorf("the refusal does not name the header: %s", body)
					}
					if status == http.StatusBadRequest && !strings.Contains(body, fmt.Sprintf(`"id":%d`, i+1)) {
						t.Errorf("the refusal is no JSON-RPC error with the request id: %s", body)
					}
				})
			}
			if n := s.ran("whoami"); fr.o.Build != nil && n != 1 {
				t.Errorf("the tool ran %d times, want once (another tenant's own call)", n)
			}
		})
	}
}
