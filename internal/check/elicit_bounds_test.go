package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"

	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/shared"
	"github.com/extauthz/extauthz/internal/testing/redistest"
	"github.com/extauthz/extauthz/internal/testing/ststest"
	"github.com/extauthz/extauthz/internal/testing/testtoken"
)

// pendingOf is the elicitation id and state an AuthorizationRequired
// answer (a tool result with _meta.auth_required) asks the user to
// complete.
func pendingOf(t *testing.T, v Verdict) (id, state string) {
	t.Helper()
	if v.Outcome != AuthorizationRequired {
		t.Fatalf("no authorization asked for: %v (%s)", v.Outcome, v.Description)
	}
	var body struct {
		Result struct {
			Meta struct {
				AuthRequired struct {
					ID  string `json:"elicitation_id"`
					URL string `json:"url"`
				} `json:"auth_required"`
			} `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal(v.Body, &body); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(body.Result.Meta.AuthRequired.URL)
	if err != nil {
		t.Fatal(err)
	}
	return body.Result.Meta.AuthRequired.ID, u.Query().Get("state")
}

// TestElicitationsBoundedPerUser: pending elicitations and completed
// consents are bounded per user (elicitations.max_per_subject) as well as
// in all: one user starting elicitations or giving consents for made-up
// tool names replaces only their own, and a store full of other users'
// refuses a new user's (503 and Retry-After; a completion stays pending)
// instead of dropping someone's; the victim's completion and consent
// still hold.
func TestElicitationsBoundedPerUser(t *testing.T) {
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: "s"}}})
	doc := consentDoc(sts.TokenURL, false) + "elicitations: {max_entries: 8, max_per_subject: 2}\n"
	mint := func(sub string) string {
		return testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": "https://a.example.com", "sub": sub,
			"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	}
	tests := []struct {
		name string
		run  func(t *testing.T, pl *Pipeline, call func(sub, tool string) Verdict)
	}{
		{"another user's flood keeps the victim's pending one", func(t *testing.T, pl *Pipeline, call func(sub, tool string) Verdict) {
			id, state := pendingOf(t, call("alice", "calendar_add"))
			for i := range 100 {
				if v := call("mallory", fmt.Sprint("calendar_", i)); v.Outcome != AuthorizationRequired {
					t.Fatalf("mallory's call %d: %v %s", i, v.Outcome, v.Description)
				}
			}
			if n := pl.ElicitationCount(); n != 3 {
				t.Errorf("%d pending, want alice's 1 and mallory's 2", n)
			}
			if _, err := pl.CompleteElicitation(context.Background(), id, state); err != nil {
				t.Errorf("alice's completion after mallory's flood: %v", err)
			}
		}},
		{"a user's new one beyond the bound replaces their own oldest", func(t *testing.T, pl *Pipeline, call func(sub, tool string) Verdict) {
			first, firstState := pendingOf(t, call("alice", "calendar_a"))
			pendingOf(t, call("alice", "calendar_b"))
			id, state := pendingOf(t, call("alice", "calendar_c"))
			if _, err := pl.CompleteElicitation(context.Background(), first, firstState); !errors.Is(err, elicit.ErrNotPending) {
				t.Errorf("alice's oldest completed (%v), want it replaced by her third", err)
			}
			if _, err := pl.CompleteElicitation(context.Background(), id, state); err != nil {
				t.Errorf("alice's newest: %v", err)
			}
		}},
		{"a store full of other users' refuses a new one", func(t *testing.T, pl *Pipeline, call func(sub, tool string) Verdict) {
			type pending struct{ id, state string }
			var held []pending
			for u := range 4 {
				for i := range 2 {
					id, state := pendingOf(t, call(fmt.Sprint("user-", u), fmt.Sprint("calendar_", i)))
					held = append(held, pending{id, state})
				}
			}
			v := call("mallory", "calendar_x")
			if v.Outcome != Unavailable || v.Status() != 503 || v.Description != "too many authorizations are pending; retry later" {
				t.Fatalf("a ninth in a store of 8: %v %d %q, want 503", v.Outcome, v.Status(), v.Description)
			}
			// The oldest pending one expires in about elicitations.ttl (10m).
			if ra, _ := header(v.ResponseHeaders, "retry-after"); ra != "600" && ra != "599" {
				t.Errorf("retry-after %q, want until the oldest expires", ra)
			}
			for i, p := range held {
				if _, err := pl.CompleteElicitation(context.Background(), p.id, p.state); err != nil {
					t.Errorf("pending %d after the refusal: %v", i, err)
				}
			}
		}},
		{"another user's consents keep the victim's", func(t *testing.T, pl *Pipeline, call func(sub, tool string) Verdict) {
			complete := func(sub, tool string) {
				id, state := pendingOf(t, call(sub, tool))
				if _, err := pl.CompleteElicitation(context.Background(), id, state); err != nil {
					t.Fatalf("%s's completion for %s: %v", sub, tool, err)
				}
			}
			complete("alice", "calendar_add")
			for i := range 20 {
				complete("mallory", fmt.Sprint("calendar_", i))
			}
			if v := call("alice", "calendar_add"); v.Outcome != Allowed {
				t.Errorf("alice after mallory's 20 consents: %v %s, want her consent kept", v.Outcome, v.Description)
			}
			if v := call("mallory", "calendar_0"); v.Outcome != AuthorizationRequired {
				t.Errorf("mallory's oldest consent: %v, want replaced by her own newer ones", v.Outcome)
			}
		}},
		{"consents full of other users' refuse a completion, which stays pending", func(t *testing.T, pl *Pipeline, call func(sub, tool string) Verdict) {
			for u := range 4 {
				for i := range 2 {
					id, state := pendingOf(t, call(fmt.Sprint("user-", u), fmt.Sprint("calendar_", i)))
					if _, err := pl.CompleteElicitation(context.Background(), id, state); err != nil {
						t.Fatal(err)
					}
				}
			}
			id, state := pendingOf(t, call("mallory", "calendar_x"))
			_, err := pl.CompleteElicitation(context.Background(), id, state)
			var full *elicit.FullError
			if !errors.As(err, &full) || full.RetryAfter < ConsentTTL-time.Minute {
				t.Fatalf("a ninth consent in a store of 8: %v, want ErrFull until the oldest expires", err)
			}
			if n := pl.ElicitationCount(); n != 1 {
				t.Errorf("%d pending after the refused completion, want mallory's still pending", n)
			}
			for u := range 4 {
				if v := call(fmt.Sprint("user-", u), "calendar_1"); v.Outcome != Allowed {
					t.Errorf("user-%d after the refusal: %v, want the consent kept", u, v.Outcome)
				}
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pl := newPipeline(t, doc, Deps{HTTPClient: sts.Client(), Getenv: func(string) string { return "s" }}, Options{})
			n := 0
			tc.run(t, pl, func(sub, tool string) Verdict {
				n++
				req := agentReq(Headers{"authorization": "Bearer " + mint(sub), "content-type": "application/json"})
				req.Body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q}}`, n, tool)
				return pl.Check(context.Background(), req)
			})
		})
	}
}

// TestSharedElicitationsBoundedPerUser: with Redis, the pending
// elicitations a user's new ones replace here are dropped there too, so a
// flood of made-up consent tools keeps no more of the user's in Redis than
// the replica holds.
func TestSharedElicitationsBoundedPerUser(t *testing.T) {
	srv := redistest.Start(t)
	st, err := shared.New(t.Context(), shared.Config{Addrs: []string{srv.Addr}, OpTimeout: time.Second}, shared.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	sts := ststest.New(t, ststest.Options{Clients: []ststest.Client{{ID: "extauthz", Method: "client_secret_post", Secret: "s"}}})
	doc := consentDoc(sts.TokenURL, false) + "elicitations: {max_entries: 8, max_per_subject: 2}\n"
	pl := mustLoad(t, newPipeline(t, doc, Deps{HTTPClient: sts.Client(), Getenv: func(string) string { return "s" }}, Options{Shared: st}))
	tok := testtoken.HMAC(t, "HS256", secret, jwt.MapClaims{"iss": "https://a.example.com", "sub": "mallory",
		"iat": time.Now().Add(-time.Minute).Unix(), "exp": time.Now().Add(time.Hour).Unix()})
	for i := range 50 {
		req := agentReq(Headers{"authorization": "Bearer " + tok, "content-type": "application/json"})
		req.Body = fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"calendar_%d"}}`, i, i)
		if v := pl.Check(context.Background(), req); v.Outcome != AuthorizationRequired {
			t.Fatalf("call %d: %v %s", i, v.Outcome, v.Description)
		}
	}
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rc.Close()
	keys, err := rc.Keys(context.Background(), "*elicit:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Errorf("%d pending elicitations of one user in Redis after 50, want the 2 the replica holds: %v", len(keys), keys)
	}
}
