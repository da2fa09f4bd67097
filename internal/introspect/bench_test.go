package introspect_test

import (
	"testing"

	"github.com/extauthz/extauthz/internal/testing/introspecttest"
	"github.com/extauthz/extauthz/internal/testing/testclock"
)

// BenchmarkIntrospectCached is the hot path: a token whose answer is
// cached.
func BenchmarkIntrospectCached(b *testing.B) {
	c := testclock.New(epoch)
	as := introspecttest.New(b, introspecttest.Options{Now: c.Now})
	as.Set("2YotnFZFEjr1zCsicMWpAA", map[string]any{"sub": "alice", "scope": "read", "aud": "mcp"})
	in := newIntrospector(b, as, c, nil)
	aud := []string{"mcp"}
	if _, err := in.Introspect(b.Context(), "2YotnFZFEjr1zCsicMWpAA", aud); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := in.Introspect(b.Context(), "2YotnFZFEjr1zCsicMWpAA", aud); err != nil {
			b.Fatal(err)
		}
	}
}
