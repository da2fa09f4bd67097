package lineage

import (
	"errors"
	"testing"
)

// TestNoMint: with NoMint nothing naming the conversation gives an empty
// result and no header; anything naming it derives as usual.
func TestNoMint(t *testing.T) {
	n := KagentNames()
	tests := []struct {
		name     string
		in       Inbound
		f        Facts
		trusted  bool
		wantRoot string
	}{
		{"nothing", Inbound{}, Facts{}, true, ""},
		{"an untrusted inbound root names nothing", Inbound{Root: "R"}, Facts{}, false, ""},
		{"only actors", Inbound{}, Facts{ActChain: []string{"agent"}}, true, ""},
		{"a trusted inbound root", Inbound{Root: "R"}, Facts{}, true, "R"},
		{"a legacy parent", Inbound{Parent: "P"}, Facts{}, true, "P"},
		{"the token's session", Inbound{}, Facts{TokenSessionID: "s"}, false, "s"},
		{"the A2A context", Inbound{}, Facts{ContextID: "c"}, false, "c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Derive(tt.in, tt.f, Options{Trusted: tt.trusted, NoMint: true, NewID: func() string { t.Fatal("minted an id"); return "" }})
			if err != nil {
				t.Fatal(err)
			}
			if r.Root != tt.wantRoot {
				t.Fatalf("root %q, want %q", r.Root, tt.wantRoot)
			}
			set, remove := r.Headers(n)
			if tt.wantRoot == "" {
				if len(set) != 0 {
					t.Fatalf("headers set without a conversation: %v", set)
				}
				for _, h := range []string{n.Root, n.Parent, n.Depth, n.ActorChain} {
					found := false
					for _, x := range remove {
						found = found || x == h
					}
					if !found {
						t.Fatalf("%s not stripped: %v", h, remove)
					}
				}
			}
		})
	}
	// The depth limit still holds.
	if _, err := Derive(Inbound{Root: "R", Depth: "9"}, Facts{}, Options{Trusted: true, NoMint: true}); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("depth: %v", err)
	}
}
