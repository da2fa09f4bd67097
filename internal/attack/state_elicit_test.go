package attack

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/extauthz/extauthz/internal/app"
	"github.com/extauthz/extauthz/internal/testing/ststest"
)

// Threat model class 6 for pending elicitations and consents: an attacker
// starting elicitations (or giving consents) for made-up consent tools,
// calendar_0, calendar_1, ..., each its own, must not push out the
// victim's, and a store full of other users' refuses rather than forgets.

// startElicitBounds runs the control-plane routes with a deliberately small
// elicitation store: 8 in all, at most 2 per user.
func startElicitBounds(t *testing.T) *suite {
	t.Helper()
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: stsSecret}}})
	tokenFile := writeFile(t, "admin-token", adminToken+"\n")
	routes := strings.Replace(controlPlaneRoutes(sts.TokenURL), "elicitations: {state_key_env: ATTACK_STATE_KEY}",
		"elicitations: {state_key_env: ATTACK_STATE_KEY, max_entries: 8, max_per_subject: 2}", 1)
	return start(t, routes, options{
		Vars:  map[string]string{"STS_SECRET": stsSecret, "ATTACK_STATE_KEY": stateKey},
		Serve: func(o *app.ServeOptions) { o.AdminTokenFile = tokenFile },
	})
}

func TestStateElicitationFlood(t *testing.T) {
	s := startElicitBounds(t)
	alice := s.elicit(t, issuerHS, "alice")
	callAs := func(sub, tool string, id int) verdict {
		return s.check(t, raw{Headers: map[string]string{"authorization": "Bearer " + token(t, issuerHS, sub)}, Body: toolCall(id, tool, "")})
	}

	t.Run("one attacker's made-up consent tools push out only their own", func(t *testing.T) {
		for i := range 50 {
			v := callAs("mallory", fmt.Sprint("calendar_", i), i)
			if v.Allowed || !strings.Contains(v.Body, "auth_required") {
				t.Fatalf("mallory's calendar_%d: %d %s, want an authorization asked for", i, v.Status, v.Body)
			}
		}
	})

	t.Run("many attackers filling the store are refused with 503, never evict", func(t *testing.T) {
		refused := 0
		for u := range 6 {
			for i := range 2 {
				v := callAs(fmt.Sprint("sybil-", u), fmt.Sprint("calendar_", i), 7)
				if strings.Contains(v.Body, "auth_required") {
					continue
				}
				v.wantDenied(t, 503)
				if n, err := strconv.Atoi(v.Headers["retry-after"]); err != nil || n < 1 {
					t.Fatalf("Retry-After %q, want whole seconds", v.Headers["retry-after"])
				}
				if e := v.rpc(t); string(e.ID) != "7" || !strings.Contains(v.Body, "too many authorizations are pending") {
					t.Fatalf("refusal body %s, want the request id 7 and the reason", v.Body)
				}
				refused++
			}
		}
		if refused == 0 {
			t.Fatal("15 pending elicitations fit a store of 8: nothing was refused")
		}
	})

	t.Run("the victim's completion and consent hold after the floods", func(t *testing.T) {
		if status, body := s.complete(t, alice.ID, url.Values{"state": {alice.State}}, "Bearer "+adminToken); status != 204 {
			t.Fatalf("alice's completion: %d %s", status, body)
		}
		if !s.consented(t, issuerHS, "alice") {
			t.Fatal("alice's calendar_add after her consent: not allowed")
		}
	})
}
