package httpauthz

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUnderscoreNames: Caddy and Traefik pass every client header on, an
// underscore name too, and CGI-style servers read X_User_Id as X-User-Id.
// A name that, read with "-" for "_", is one the service reads or sets is
// refused (400, naming it); any other underscore name passes.
func TestUnderscoreNames(t *testing.T) {
	srv := serve(t, Options{Convention: Forwarded, Now: now})
	tok := token(t, nil)
	for _, tc := range []struct {
		name string
		want int
	}{
		{"X_User_Id", http.StatusBadRequest},
		{"X-User_Id", http.StatusBadRequest},
		{"X_Session_Id", http.StatusBadRequest},
		{"X_Actor_Chain", http.StatusBadRequest},
		{"X_Lineage_Token", http.StatusBadRequest},
		{"X_Extauthz_Dry_Run", http.StatusBadRequest},
		{"Mcp_Session_Id", http.StatusBadRequest},
		{"Mcp_Name", http.StatusBadRequest},
		{"X_Forwarded_Uri", http.StatusBadRequest},
		{"Last_Event_Id", http.StatusBadRequest},
		{"X_Custom_Tag", http.StatusOK},
		{"Trace_Id", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := ask{path: "/check", host: "extauthz", header: http.Header{
				"X-Forwarded-Method": {"GET"}, "X-Forwarded-Uri": {"/mcp"}, "X-Forwarded-Host": {"files.example.com"},
				"Authorization": {"Bearer " + tok}, tc.name: {"mallory"},
			}}.do(t, srv)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want {
				t.Fatalf("%d %s, want %d", res.StatusCode, b, tc.want)
			}
			if tc.want == http.StatusBadRequest && !strings.Contains(string(b), strings.ToLower(tc.name)) && res.Header.Get("X-Extauthz-Answer") == "" {
				t.Errorf("the refusal does not name %s: %s", tc.name, b)
			}
			if tc.want == http.StatusOK && res.Header.Get("X-User-Id") == "" {
				t.Error("allowed without the identity header")
			}
		})
	}
}
