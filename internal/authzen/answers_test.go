package authzen

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/testing/authzenpdp"
	"github.com/extauthz/extauthz/internal/testing/testclock"
)

// malloryReads is a request of another user than aliceReads: the one
// whose requests the PDP cannot decide.
func malloryReads() Request {
	r := aliceReads()
	r.Subject.ID = "mallory"
	return r
}

// forMallory makes the PDP answer mallory's requests with answer.
func forMallory(answer func(http.ResponseWriter)) func(*authzenpdp.PDP) {
	return func(p *authzenpdp.PDP) {
		p.Answer = func(r authzenpdp.Request, w http.ResponseWriter) bool {
			if r.Subject.ID != "mallory" {
				return false
			}
			answer(w)
			return true
		}
	}
}

func status(code int) func(*authzenpdp.PDP) {
	return forMallory(func(w http.ResponseWriter) { w.WriteHeader(code) })
}

func answerBody(s string) func(*authzenpdp.PDP) {
	return forMallory(func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(s))
	})
}

// TestBreakerCountsOnlyPDPFailures: the breaker is shared by every request
// to the PDP, so only what shows the PDP itself failing counts against it:
// no answer in time, 5xx, 408, 429, and 401, 403, 407 (this service's own
// credentials refused, for everyone). Another 4xx is the PDP refusing to decide
// one request: that request is denied, and the next user's is decided. An
// unreadable answer is no decision (Unavailable), but it came, and it may
// be one user's request that made it unreadable (a PDP echoing the
// arguments past the size bound): it does not open the breaker either.
func TestBreakerCountsOnlyPDPFailures(t *testing.T) {
	const threshold = 3
	tests := []struct {
		name    string
		fail    func(*authzenpdp.PDP)
		refused bool // mallory is denied, not Unavailable
		trips   bool
	}{
		{"400 for what mallory sent", status(http.StatusBadRequest), true, false},
		{"401: our credentials refused", status(http.StatusUnauthorized), false, true},
		{"403: our credentials refused", status(http.StatusForbidden), false, true},
		{"407: our proxy credentials refused", status(http.StatusProxyAuthRequired), false, true},
		{"404", status(http.StatusNotFound), true, false},
		{"413", status(http.StatusRequestEntityTooLarge), true, false},
		{"422", status(http.StatusUnprocessableEntity), true, false},
		{"not JSON", answerBody(`<html>bad request</html>`), false, false},
		{"no decision", answerBody(`{"context": {}}`), false, false},
		{"duplicate decision", answerBody(`{"decision": false, "decision": true}`), false, false},
		{"too large", answerBody(`{"decision": true, "context": {"x": "` + strings.Repeat("a", DefaultMaxResponseBytes) + `"}}`), false, false},
		{"204", status(http.StatusNoContent), false, false},
		{"redirect", status(http.StatusTemporaryRedirect), false, false},
		{"408", status(http.StatusRequestTimeout), false, true},
		{"429", status(http.StatusTooManyRequests), false, true},
		{"500", status(http.StatusInternalServerError), false, true},
		{"503", status(http.StatusServiceUnavailable), false, true},
		{"too slow", forMallory(func(http.ResponseWriter) { time.Sleep(300 * time.Millisecond) }), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pdp := authzenpdp.Start(todoPolicy)
			defer pdp.Close()
			tt.fail(pdp)
			c := newClient(t, Config{Endpoint: pdp.Endpoint(), Timeout: 100 * time.Millisecond, BreakerThreshold: threshold, BreakerCooldown: time.Minute}, nil)
			ctx := context.Background()
			for range threshold {
				d, err := c.Evaluate(ctx, malloryReads())
				if tt.refused {
					if err != nil || d.Allowed || d.Cached || d.Reason == "" {
						t.Fatalf("mallory: %+v, %v; want a denial saying why", d, err)
					}
				} else if d.Allowed || !errors.As(err, new(*UnavailableError)) {
					t.Fatalf("mallory: %+v, %v; want unavailable", d, err)
				}
			}
			calls := pdp.Calls.Load()
			d, err := c.Evaluate(ctx, aliceReads())
			if tt.trips {
				if d.Allowed || !errors.As(err, new(*UnavailableError)) || pdp.Calls.Load() != calls {
					t.Fatalf("alice: %+v, %v, PDP called %d more; want refused by the open breaker", d, err, pdp.Calls.Load()-calls)
				}
				return
			}
			if err != nil || !d.Allowed {
				t.Fatalf("alice: %+v, %v; want her decision", d, err)
			}
			// Neither a refusal nor a failure is cached: the PDP is asked
			// again.
			d, err = c.Evaluate(ctx, malloryReads())
			if pdp.Calls.Load() != calls+2 || tt.refused && (err != nil || d.Cached) {
				t.Errorf("mallory again: %+v, %v, PDP called %d more, want 2", d, err, pdp.Calls.Load()-calls)
			}
			if s := c.Stats(); tt.refused != (s.Refusals == threshold+1) || tt.refused != (s.Failures == 0) {
				t.Errorf("Stats = %+v", s)
			}
		})
	}
}

// TestBreakerProbe: after the cooldown one request probes the PDP. A
// refusal shows the PDP up and deciding: the breaker closes. A 5xx opens
// it again. An unreadable answer shows neither: the next request probes.
func TestBreakerProbe(t *testing.T) {
	tests := []struct {
		name     string
		probe    func(*authzenpdp.PDP)
		reopened bool
		open     bool // still open (or half-open) after the probe
	}{
		{"refused", status(http.StatusBadRequest), false, false},
		{"failed", status(http.StatusServiceUnavailable), true, true},
		{"unreadable", answerBody(`{"Decision": true}`), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			pdp := authzenpdp.Start(todoPolicy)
			defer pdp.Close()
			tt.probe(pdp)
			c := newClient(t, Config{Endpoint: pdp.Endpoint(), CacheTTL: -1, BreakerThreshold: 1, BreakerCooldown: 30 * time.Second}, clock)
			ctx := context.Background()
			pdp.Status.Store(http.StatusServiceUnavailable)
			if _, err := c.Evaluate(ctx, aliceReads()); err == nil || !c.breaker.Open() {
				t.Fatalf("the PDP failing: %v, breaker open %v", err, c.breaker.Open())
			}
			pdp.Status.Store(0)
			clock.Advance(31 * time.Second)
			if d, _ := c.Evaluate(ctx, malloryReads()); d.Allowed || pdp.Calls.Load() != 2 {
				t.Fatalf("probe: %+v, PDP calls %d, want 2", d, pdp.Calls.Load())
			}
			if c.breaker.Open() != tt.open {
				t.Errorf("after the probe the breaker is open: %v, want %v", c.breaker.Open(), tt.open)
			}
			d, err := c.Evaluate(ctx, aliceReads())
			if tt.reopened {
				if err == nil || pdp.Calls.Load() != 2 {
					t.Errorf("alice: %+v, %v, PDP calls %d; want refused by the breaker", d, err, pdp.Calls.Load())
				}
				return
			}
			if err != nil || !d.Allowed || pdp.Calls.Load() != 3 {
				t.Errorf("alice: %+v, %v, PDP calls %d; want her decision", d, err, pdp.Calls.Load())
			}
		})
	}
}

// TestStrictDecision: the answer is read as every JSON parser reads it, or
// not at all. A member named decision or context in another case, which
// encoding/json would bind to it, or a member given twice, which parsers
// resolve differently, makes the answer unreadable: no decision, never
// allowed.
func TestStrictDecision(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		ok     bool // a decision was read
		allow  bool
		reason string
	}{
		{"allow", `{"decision": true}`, true, true, ""},
		{"deny", `{"decision": false}`, true, false, ""},
		{"unknown members", `{"decision": true, "extra": {"decision": false}, "reasons": [1]}`, true, true, ""},
		{"an escaped name", `{"d\u0065cision": true}`, true, true, ""},
		{"reason", `{"decision": false, "context": {"id": "0", "reason_admin": {"en": "policy 7"}}}`, true, false, "policy 7"},
		{"reason as a string", `{"context": {"reason_admin": "policy 7"}, "decision": false}`, true, false, "policy 7"},
		{"reason in another case", `{"decision": false, "context": {"Reason_Admin": "policy 7", "reason_admin": {"EN": "x"}}}`, true, false, ""},
		{"decision in context only", `{"context": {"decision": true}}`, false, false, ""},
		{"a deny then an allow", `{"decision": false, "decision": true}`, false, false, ""},
		{"an allow then a deny", `{"decision": true, "decision": false}`, false, false, ""},
		{"escaped twice", `{"decision": false, "d\u0065cision": true}`, false, false, ""},
		{"in another case too", `{"decision": false, "Decision": true}`, false, false, ""},
		{"in another case only", `{"DECISION": true}`, false, false, ""},
		// U+017F folds onto s: encoding/json reads this as decision.
		{"folding onto decision", `{"decision": false, "deci\u017Fion": true}`, false, false, ""},
		{"not folding onto decision", `{"decision": false, "dec\u0131sion": true}`, true, false, ""},
		{"context in another case", `{"decision": false, "Context": {"reason_admin": "forged"}}`, false, false, ""},
		{"context twice", `{"decision": false, "context": {"reason_admin": "a"}, "context": {}}`, false, false, ""},
		{"reason twice", `{"decision": false, "context": {"reason_admin": "a", "reason_admin": "b"}}`, false, false, ""},
		{"a duplicate deep inside", `{"decision": true, "context": {"x": [{"a": 1, "a": 2}]}}`, false, false, ""},
		{"invalid UTF-8", "{\"decision\": true, \"context\": {\"x\": \"\xff\"}}", false, false, ""},
		{"trailing data", `{"decision": true} {"decision": false}`, false, false, ""},
		{"context not an object", `{"decision": true, "context": "x"}`, false, false, ""},
		{"null context", `{"decision": true, "context": null}`, true, true, ""},
		{"not an object", `[{"decision": true}]`, false, false, ""},
	}
	pdp := authzenpdp.Start(todoPolicy)
	defer pdp.Close()
	c := newClient(t, Config{Endpoint: pdp.Endpoint(), CacheTTL: -1}, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body(pdp, tt.body)
			d, err := c.Evaluate(context.Background(), aliceReads())
			if !tt.ok {
				if d.Allowed || !errors.As(err, new(*UnavailableError)) {
					t.Fatalf("Evaluate = %+v, %v; want unavailable", d, err)
				}
				return
			}
			if err != nil || d.Allowed != tt.allow || d.Reason != tt.reason {
				t.Fatalf("Evaluate = %+v, %v; want allowed %v reason %q", d, err, tt.allow, tt.reason)
			}
		})
	}
}

// TestPDPRetryAfter: a PDP that asks to be left alone (429 or 503 with
// Retry-After) has the caller told to wait that long, within bounds; one
// that asks nothing, the least wait.
func TestPDPRetryAfter(t *testing.T) {
	tests := []struct {
		name  string
		code  int
		after string
		want  time.Duration
	}{
		{"429 asking 7s", http.StatusTooManyRequests, "7", 7 * time.Second},
		{"503 asking 20s", http.StatusServiceUnavailable, "20", 20 * time.Second},
		{"429 asking an hour: the ceiling", http.StatusTooManyRequests, "3600", maxRetryAfter},
		{"429 asking nonsense", http.StatusTooManyRequests, "soon", minRetryAfter},
		{"500 asking nothing", http.StatusInternalServerError, "", minRetryAfter},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pdp := authzenpdp.Start(todoPolicy)
			defer pdp.Close()
			forMallory(func(w http.ResponseWriter) {
				if tt.after != "" {
					w.Header().Set("Retry-After", tt.after)
				}
				w.WriteHeader(tt.code)
			})(pdp)
			c := newClient(t, Config{Endpoint: pdp.Endpoint(), BreakerThreshold: 10}, nil)
			for _, eval := range []func(context.Context, Request) (Decision, error){c.Evaluate, c.EvaluateNoStore} {
				d, err := eval(context.Background(), malloryReads())
				var ue *UnavailableError
				if d.Allowed || !errors.As(err, &ue) {
					t.Fatalf("%+v, %v; want unavailable", d, err)
				}
				if ue.RetryAfter != tt.want {
					t.Fatalf("retry after %v, want %v", ue.RetryAfter, tt.want)
				}
			}
		})
	}
}
