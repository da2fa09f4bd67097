package check

import (
	"context"
	"testing"
)

// TestShedding: beyond the policy's max_concurrent_checks a check is
// refused at once with the configured status, counted as overloaded, and
// neither traced nor left holding a slot; the limit follows a reload;
// Explain (an operator's question, not traffic) is never refused.
func TestShedding(t *testing.T) {
	clk := newClock()
	compile := func(limits string) *Policy {
		return compileDoc(t, "issuers: [{name: dev, algorithms: [HS256], secret: "+secret+"}]\n"+
			"routes: [{name: agent, default: true, issuers: [dev]}]\n"+limits+"\n", Deps{Now: clk.Now})
	}
	var overloaded int
	obs := observerFunc(func(route string, o Outcome) {
		if o == Overloaded {
			if route != "" {
				t.Errorf("overload counted on route %q", route)
			}
			overloaded++
		}
	})
	tracer := &countingTracer{}
	pl, err := New(compile("limits: {max_concurrent_checks: 2, overload_status: 429}"), Options{Now: clk.Now, Observer: obs, Tracer: tracer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Policy().Close() })
	f := &fixture{pl: pl, clock: clk}
	req := agentReq(Headers{"authorization": "Bearer " + f.hs(t, nil)})

	tests := []struct {
		name     string
		limits   string // reload to these first ("": keep)
		inflight int64  // checks in progress when this one arrives
		outcome  Outcome
		status   int
	}{
		{"below the limit", "", 1, Allowed, 200},
		{"at the limit", "", 2, Overloaded, 429},
		{"limit raised by a reload", "limits: {max_concurrent_checks: 3, overload_status: 503}", 2, Allowed, 200},
		{"new status after a reload", "", 3, Overloaded, 503},
		{"limit lowered by a reload", "limits: {max_concurrent_checks: 1, overload_status: 429}", 1, Overloaded, 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.limits != "" {
				swap(t, pl, compile(tt.limits)).Close()
			}
			pl.inflight.Store(tt.inflight)
			beforeShed, beforeSpans := overloaded, tracer.spans
			v := pl.Check(context.Background(), req)
			if v.Outcome != tt.outcome || v.Status() != tt.status {
				t.Fatalf("got %v %d, want %v %d", v.Outcome, v.Status(), tt.outcome, tt.status)
			}
			if n := pl.inflight.Load(); n != tt.inflight {
				t.Errorf("checks in progress after the check: %d, want %d", n, tt.inflight)
			}
			shed := tt.outcome == Overloaded
			if got := overloaded - beforeShed; got != map[bool]int{true: 1}[shed] {
				t.Errorf("overloads counted: %d", got)
			}
			if got := tracer.spans - beforeSpans; got != map[bool]int{false: 1}[shed] {
				t.Errorf("spans: %d", got)
			}
			if tracer.ended != tracer.spans {
				t.Errorf("%d spans started, %d ended", tracer.spans, tracer.ended)
			}
			if shed {
				if retry, _ := header(v.ResponseHeaders, "retry-after"); retry != "1" {
					t.Errorf("Retry-After %q", retry)
				}
				if v, _ := pl.Explain(context.Background(), req); v.Outcome != Allowed {
					t.Errorf("Explain while overloaded: %v", v.Outcome)
				}
			}
		})
	}
}

// countingTracer counts the spans a pipeline starts and checks each is
// ended once.
type countingTracer struct{ spans, ended int }

func (c *countingTracer) StartCheck(ctx context.Context, _ map[string]string) (context.Context, EndCheck) {
	c.spans++
	return ctx, func(string, string, int, string) { c.ended++ }
}
