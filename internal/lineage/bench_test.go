package lineage

import (
	"path/filepath"
	"testing"
)

func BenchmarkDerive(b *testing.B) {
	cases := []struct {
		name  string
		in    Inbound
		facts Facts
		opts  Options
	}{
		{"root", Inbound{}, Facts{TokenSessionID: "sess-42"}, Options{Trusted: true}},
		{"mid-chain", Inbound{Root: "2f1c1b7e-8a58-4c1e-9c55-6a1f0e4b2d11", Parent: "9a0e7d3c-1b2a-4c5d-8e6f-0a1b2c3d4e5f", Depth: "2"},
			Facts{ContextID: "ctx-9"}, Options{Trusted: true}},
		{"act chain", Inbound{Root: "R", Parent: "P", Depth: "1", ActorChain: "x"},
			Facts{TokenSessionID: "s", ActChain: []string{"agent-b", "agent-a"}}, Options{Trusted: true}},
		{"untrusted", Inbound{Root: "R", Parent: "P", Depth: "2"}, Facts{TokenSessionID: "s"}, Options{}},
		{"new id", Inbound{}, Facts{}, Options{}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Derive(c.in, c.facts, c.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAppendHeaders(b *testing.B) {
	n := DefaultNames()
	cases := map[string]Result{
		"root":      {Root: "sess-42"},
		"mid-chain": {Root: "R", Parent: "P", Depth: 2},
		"actors":    {Root: "R", Parent: "P", Depth: 2, ActorChain: []string{"agent-b", "agent-a"}},
	}
	for name, r := range cases {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			set := make([]Header, 0, 8)
			remove := make([]string, 0, 8)
			for b.Loop() {
				set, remove = r.AppendHeaders(set[:0], remove[:0], n)
			}
		})
	}
}

func BenchmarkTrusted(b *testing.B) {
	trust, err := NewTrust(TrustConfig{
		Issuers:    []string{"workloads"},
		ClientIDs:  []string{"planner", "coder"},
		Principals: []string{"spiffe://cluster.local/ns/agents/*", "spiffe://cluster.local/ns/tools/sa/search"},
	})
	if err != nil {
		b.Fatal(err)
	}
	c := Caller{IssuerName: "users", ClientID: "web", Principal: "spiffe://cluster.local/ns/agents/sa/planner"}
	b.ReportAllocs()
	for b.Loop() {
		if !trust.Trusted(c) {
			b.Fatal("not trusted")
		}
	}
}

func BenchmarkActChain(b *testing.B) {
	claims := map[string]any{"sub": "alice", "act": map[string]any{"sub": "agent-b", "act": map[string]any{"sub": "agent-a"}}}
	b.ReportAllocs()
	for b.Loop() {
		if len(ActChain(claims)) != 2 {
			b.Fatal("wrong chain")
		}
	}
}

func BenchmarkSign(b *testing.B) {
	for _, key := range []string{"ed25519", "es256"} {
		b.Run(key, func(b *testing.B) {
			s, err := NewSigner(SignerOptions{KeyFile: filepath.Join("testdata", key+".pem"), Issuer: "https://gw.example/lineage"})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Sign(&sampleResult, "alice", "sess-42"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	clock := newClock()
	s := testSigner(b, clock, peerIssuer)
	v, err := NewSignedVerifier(VerifierOptions{Local: s, Now: clock.Now})
	if err != nil {
		b.Fatal(err)
	}
	defer v.Close()
	tok, err := s.Sign(&sampleResult, "alice", "sess-42")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(b.Context(), tok, "alice"); err != nil {
			b.Fatal(err)
		}
	}
}
