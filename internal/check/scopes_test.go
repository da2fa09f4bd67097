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
