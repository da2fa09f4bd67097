package lineage

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestActChain(t *testing.T) {
	deep := `{"sub":"a0"}`
	for i := 1; i < 40; i++ {
		deep = fmt.Sprintf(`{"sub":"a%d","act":%s}`, i, deep)
	}
	var want32 []string
	for i := 39; i > 39-MaxActors; i-- {
		want32 = append(want32, fmt.Sprintf("a%d", i))
	}
	tests := []struct {
		name   string
		claims string
		want   []string
	}{
		{"no act claim", `{"sub":"alice"}`, nil},
		{"one actor", `{"sub":"alice","act":{"sub":"agent-a"}}`, []string{"agent-a"}},
		{"outermost first", `{"sub":"alice","act":{"sub":"agent-b","act":{"sub":"agent-a"}}}`, []string{"agent-b", "agent-a"}},
		{"other act members ignored", `{"act":{"sub":"agent-b","iss":"https://idp","act":{"sub":"agent-a","client_id":"x"}}}`, []string{"agent-b", "agent-a"}},
		{"act is not an object", `{"act":"agent-a"}`, nil},
		{"nested act not an object ends the chain", `{"act":{"sub":"agent-b","act":["agent-a"]}}`, []string{"agent-b"}},
		// A level the chain cannot carry ends it: the prior actors below
		// it never move up to stand for the current one.
		{"an outermost level without sub ends the chain", `{"act":{"iss":"x","act":{"sub":"agent-a"}}}`, nil},
		{"a non-string sub ends the chain", `{"act":{"sub":42,"act":{"sub":"agent-a"}}}`, nil},
		{"an outermost sub unusable in a header ends the chain", `{"act":{"sub":"a,b","act":{"sub":"agent-a"}}}`, nil},
		{"an inner sub unusable in a header ends the chain there", `{"act":{"sub":"agent-c","act":{"sub":"x\ny","act":{"sub":"agent-a"}}}}`, []string{"agent-c"}},
		{"empty sub", `{"act":{"sub":""}}`, nil},
		{"bounded depth", `{"act":` + deep + `}`, want32},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var claims map[string]any
			if err := json.Unmarshal([]byte(tt.claims), &claims); err != nil {
				t.Fatal(err)
			}
			got := ActChain(claims)
			if !slices.Equal(got, tt.want) {
				t.Errorf("ActChain() = %q, want %q", got, tt.want)
			}
			if len(got) != cap(got) {
				t.Errorf("ActChain() over-allocates: len %d cap %d", len(got), cap(got))
			}
		})
	}
}

func TestActChainNilClaims(t *testing.T) {
	if got := ActChain(nil); got != nil {
		t.Errorf("ActChain(nil) = %q", got)
	}
	if strings.Join(ActChain(map[string]any{"act": map[string]any{"sub": "a"}}), ",") != "a" {
		t.Error("ActChain of a Go-built claim map")
	}
}
