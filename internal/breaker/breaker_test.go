package breaker_test

import (
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/breaker"
)

func TestBreakerStates(t *testing.T) {
	now := time.Unix(0, 0)
	b := breaker.New(2, 10*time.Second)
	steps := []struct {
		name    string
		advance time.Duration
		record  *bool // outcome of the allowed call, nil when not allowed
		allowed bool
	}{
		{"closed", 0, ptr(false), true},
		{"one failure", 0, ptr(false), true},
		{"open", 5 * time.Second, nil, false},
		{"still open", 4 * time.Second, nil, false},
		{"probe", time.Second, nil, true}, // outcome pending
		{"second probe refused", 0, nil, false},
	}
	for _, s := range steps {
		now = now.Add(s.advance)
		ok, _ := b.Allow(now)
		if ok != s.allowed {
			t.Fatalf("%s: allow = %v", s.name, ok)
		}
		if s.record != nil {
			b.Record(now, *s.record)
		}
	}
	b.Record(now, true) // the probe succeeds
	if ok, _ := b.Allow(now); !ok || b.Open() {
		t.Error("breaker not closed after a successful probe")
	}
}

func ptr[T any](v T) *T { return &v }

// TestAbandonedProbe: a probe never made leaves the breaker open (it
// learnt nothing) and lets the next probe through.
func TestAbandonedProbe(t *testing.T) {
	now := time.Unix(0, 0)
	b := breaker.New(1, 10*time.Second)
	b.Allow(now)
	b.Record(now, false) // open
	now = now.Add(10 * time.Second)
	if ok, _ := b.Allow(now); !ok {
		t.Fatal("no probe after the cooldown")
	}
	b.Abandon()
	if ok, _ := b.Allow(now); !ok {
		t.Fatal("the next probe is refused after an abandoned one")
	}
	b.Record(now, false)
	if ok, _ := b.Allow(now); ok {
		t.Fatal("after an abandoned probe and a failed one, the breaker is closed")
	}
}
