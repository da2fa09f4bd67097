package elicit_test

import (
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/elicit"
)

// BenchmarkBegin is a repeated denial: the pending elicitation exists.
func BenchmarkBegin(b *testing.B) {
	s := elicit.New(1000, time.Hour, nil)
	if _, err := s.Begin(issuer, "alice", "mcp-1", "files", authorize); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Begin(issuer, "alice", "mcp-1", "files", authorize); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAnswers(b *testing.B) {
	id := []byte(`17`)
	for name, answer := range map[string]func([]byte, elicit.Pending, string) []byte{
		"url elicitation": elicit.URLElicitationError,
		"tool result":     elicit.ToolResultAuthRequired,
		"a2a":             elicit.A2AAuthRequired,
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = answer(id, pending, message)
			}
		})
	}
}

// BenchmarkVerifyState is the check a completion makes.
func BenchmarkVerifyState(b *testing.B) {
	s := elicit.New(1000, time.Hour, nil)
	p, err := s.Begin(issuer, "alice", "mcp-1", "files", authorize)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.VerifyState(p, p.State); err != nil {
			b.Fatal(err)
		}
	}
}
