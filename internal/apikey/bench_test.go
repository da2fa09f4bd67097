package apikey_test

import (
	"fmt"
	"testing"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/testing/testclock"
)

// The pair BenchmarkLookupRightKey / BenchmarkLookupWrongKey shows that a
// wrong key costs what a right one does: both hash the presented key once
// and make one map lookup; the only comparison of secret-derived bytes is
// constant-time. Compare them with benchstat; a unit test cannot measure
// timing reliably on a shared machine.
func benchStore(b *testing.B) (*apikey.Store, string, string) {
	c := testclock.New(epoch)
	right, wrong := mustKey(b), mustKey(b)
	doc := "keys:\n"
	for i := range 1000 {
		k := right
		if i > 0 {
			k = mustKey(b)
		}
		doc += fmt.Sprintf("  - {id: k%d, subject: agent-%d, scopes: [read], hash: %s}\n", i, i, apikey.SHA256Hash(k))
	}
	s, _ := open(b, c, doc)
	return s, right, wrong
}

func BenchmarkLookupRightKey(b *testing.B) {
	s, right, _ := benchStore(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Lookup(b.Context(), right, "mcp"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookupWrongKey(b *testing.B) {
	s, _, wrong := benchStore(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Lookup(b.Context(), wrong, "mcp"); err == nil {
			b.Fatal("accepted")
		}
	}
}

// BenchmarkArgon2id is the cost of one first check of a human-chosen
// secret with the package's parameters (later checks are remembered).
func BenchmarkArgon2id(b *testing.B) {
	h, err := apikey.Argon2idHash("correct horse battery staple")
	if err != nil {
		b.Fatal(err)
	}
	c := testclock.New(epoch)
	for b.Loop() {
		b.StopTimer()
		s, _ := open(b, c, "keys:\n  - id: human\n    subject: alice\n    hash: "+h+"\n") // a new file version forgets results
		b.StartTimer()
		if _, err := s.Lookup(b.Context(), "human.correct horse battery staple", ""); err != nil {
			b.Fatal(err)
		}
	}
}
