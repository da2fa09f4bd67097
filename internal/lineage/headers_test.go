package lineage

import (
	"slices"
	"testing"
)

func TestHeaders(t *testing.T) {
	tests := []struct {
		name       string
		result     Result
		names      Names
		wantSet    []Header
		wantRemove []string
	}{
		{
			name:   "chain root: parent, actor chain and signed token stripped",
			result: Result{Root: "sess-42", Depth: 0},
			names:  DefaultNames(),
			wantSet: []Header{
				{"x-root-context-id", "sess-42"},
				{"x-lineage-depth", "0"},
			},
			wantRemove: []string{"x-parent-context-id", "x-actor-chain", "x-lineage-token"},
		},
		{
			name:   "mid-chain with actors and a signed token",
			result: Result{Root: "R", Parent: "P", Depth: 2, ActorChain: []string{"agent-b", "agent-a"}, Signed: "tok"},
			names:  DefaultNames(),
			wantSet: []Header{
				{"x-root-context-id", "R"},
				{"x-parent-context-id", "P"},
				{"x-lineage-depth", "2"},
				{"x-actor-chain", "agent-b,agent-a"},
				{"x-lineage-token", "tok"},
			},
		},
		{
			name:   "one actor",
			result: Result{Root: "R", Parent: "P", Depth: 1, ActorChain: []string{"agent-a"}},
			names:  DefaultNames(),
			wantSet: []Header{
				{"x-root-context-id", "R"},
				{"x-parent-context-id", "P"},
				{"x-lineage-depth", "1"},
				{"x-actor-chain", "agent-a"},
			},
			wantRemove: []string{"x-lineage-token"},
		},
		{
			name:   "kagent preset names",
			result: Result{Root: "R", Parent: "P", Depth: 1},
			names:  KagentNames(),
			wantSet: []Header{
				{"x-kagent-root-context-id", "R"},
				{"x-kagent-parent-context-id", "P"},
				{"x-lineage-depth", "1"},
			},
			wantRemove: []string{"x-actor-chain", "x-lineage-token"},
		},
		{
			name:       "headers switched off are neither set nor removed",
			result:     Result{Root: "R", Depth: 3, ActorChain: []string{"a"}, Signed: "tok"},
			names:      Names{Root: "x-root", Parent: "x-parent"},
			wantSet:    []Header{{"x-root", "R"}},
			wantRemove: []string{"x-parent"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, remove := tt.result.Headers(tt.names)
			if !slices.Equal(set, tt.wantSet) {
				t.Errorf("set = %q, want %q", set, tt.wantSet)
			}
			if !slices.Equal(remove, tt.wantRemove) {
				t.Errorf("remove = %q, want %q", remove, tt.wantRemove)
			}
		})
	}
}

// Every configured lineage header is either set or removed, so nothing a
// client sent reaches the upstream unchecked, whatever the result.
func TestHeadersCoverEveryLineageName(t *testing.T) {
	results := map[string]Result{
		"root":       {Root: "R"},
		"mid-chain":  {Root: "R", Parent: "P", Depth: 1},
		"everything": {Root: "R", Parent: "P", Depth: 4, ActorChain: []string{"a", "b"}, Signed: "t"},
	}
	for name, r := range results {
		t.Run(name, func(t *testing.T) {
			n := DefaultNames()
			set, remove := r.Headers(n)
			seen := map[string]int{}
			for _, h := range set {
				seen[h.Name]++
			}
			for _, name := range remove {
				seen[name]++
			}
			for _, name := range []string{n.Root, n.Parent, n.Depth, n.ActorChain, n.Signed} {
				if seen[name] != 1 {
					t.Errorf("%s appears %d times in set and remove", name, seen[name])
				}
			}
			if seen[n.User]+seen[n.Session] != 0 {
				t.Errorf("identity headers are the caller's, got %v", seen)
			}
		})
	}
}

func TestAppendHeadersAppends(t *testing.T) {
	r := Result{Root: "R"}
	set, remove := r.AppendHeaders([]Header{{"x-user-id", "alice"}}, []string{"x-other"}, DefaultNames())
	if len(set) != 3 || set[0].Name != "x-user-id" || len(remove) != 4 || remove[0] != "x-other" {
		t.Errorf("AppendHeaders lost what was there: set %q, remove %q", set, remove)
	}
}
