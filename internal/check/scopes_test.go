package check

import (
	"slices"
	"testing"

	"github.com/extauthz/extauthz/internal/jwtauth"
)

// TestScopes covers each form a token carries its scopes in, and what an
// attacker might put there instead.
func TestScopes(t *testing.T) {
	tests := []struct {
		name   string
		claims map[string]any
		want   []string
	}{
		{name: "scope string", claims: map[string]any{"scope": "read write"}, want: []string{"read", "write"}},
		{name: "scope with extra spaces", claims: map[string]any{"scope": "  read \t write  "}, want: []string{"read", "write"}},
		{name: "scp list", claims: map[string]any{"scp": []any{"read", "write"}}, want: []string{"read", "write"}},
		{name: "scp string", claims: map[string]any{"scp": "read write"}, want: []string{"read", "write"}},
		{name: "scope and scp together", claims: map[string]any{"scope": "read", "scp": []any{"write"}}, want: []string{"read", "write"}},
		{name: "scope as a list", claims: map[string]any{"scope": []any{"read"}}, want: []string{"read"}},
		{name: "scope null with scp", claims: map[string]any{"scope": nil, "scp": []any{"read"}}, want: []string{"read"}},
		{name: "non-strings in scp are ignored", claims: map[string]any{"scp": []any{"read", 1.0, true, nil, []any{"admin"}, map[string]any{"admin": true}}}, want: []string{"read"}},
		{name: "scope a number", claims: map[string]any{"scope": 1.0}, want: nil},
		{name: "scope an object", claims: map[string]any{"scope": map[string]any{"admin": true}}, want: nil},
		{name: "neither", claims: map[string]any{"sub": "alice"}, want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := scopes(&jwtauth.Claims{Raw: tc.claims})
			if len(got) == 0 && len(tc.want) == 0 {
				return
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("scopes() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInternListKeepsElementsApart: a claim element holding the byte a
// separator would use must not be taken for the list that byte would
// separate (a one-scope list "read\x00admin" is not read and admin).
func TestInternListKeepsElementsApart(t *testing.T) {
	tests := []struct {
		name        string
		first, then []string
	}{
		{name: "NUL inside an element", first: []string{"read", "admin"}, then: []string{"read\x00admin"}},
		{name: "NUL inside an element, interned first", first: []string{"write\x00admin"}, then: []string{"write", "admin"}},
		{name: "empty elements", first: []string{"", ""}, then: []string{""}},
		{name: "element holding a length byte", first: []string{"\x01a", "b"}, then: []string{"\x01a\x01b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			internList(tc.first)
			if got := internList(tc.then); !slices.Equal(got, tc.then) {
				t.Errorf("internList(%q) = %q after internList(%q)", tc.then, got, tc.first)
			}
		})
	}
}

// TestScopesNULInsideAScope: a scope holding NUL, sent by a token with
// both scope and scp, stays one scope however other tokens' scopes were
// interned.
func TestScopesNULInsideAScope(t *testing.T) {
	scopes(&jwtauth.Claims{Raw: map[string]any{"scope": "mail", "scp": []any{"admin"}}})
	got := scopes(&jwtauth.Claims{Raw: map[string]any{"scope": "mail\x00admin", "scp": []any{}}})
	if !slices.Equal(got, []string{"mail\x00admin"}) {
		t.Errorf("scopes() = %q, want the one scope sent", got)
	}
}
