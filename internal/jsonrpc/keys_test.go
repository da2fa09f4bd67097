package jsonrpc

import "testing"

// TestKeyIs: a key equal to ours only under Unicode case folding is
// ambiguous, whatever its first byte; the quick rejection by first byte
// keeps none of them out.
func TestKeyIs(t *testing.T) {
	tests := []struct {
		name, key, want string
		is, ambiguous   bool
	}{
		{name: "exact", key: "name", want: "name", is: true},
		{name: "upper first", key: "Name", want: "name", ambiguous: true},
		{name: "upper later", key: "nAME", want: "name", ambiguous: true},
		{name: "long s last", key: "annotation\u017f", want: "annotations", ambiguous: true},
		{name: "long s inside", key: "re\u017fult", want: "result", ambiguous: true},
		{name: "kelvin sign first", key: "\u212aind", want: "kind", ambiguous: true},
		{name: "kelvin sign is not t", key: "\u212aools", want: "tools"},
		{name: "other first letter", key: "game", want: "name"},
		{name: "same length other key", key: "description", want: "annotations"},
		{name: "too short", key: "nam", want: "name"},
		{name: "non-letter first bytes", key: "_meta", want: "_META", ambiguous: true},
		{name: "non-ascii first byte", key: "\u00e9ame", want: "name"},
		{name: "empty want", key: "", want: "", is: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is, ambiguous := KeyIs([]byte(tt.key), tt.want)
			if is != tt.is || ambiguous != tt.ambiguous {
				t.Errorf("KeyIs(%q, %q) = %v, %v; want %v, %v", tt.key, tt.want, is, ambiguous, tt.is, tt.ambiguous)
			}
		})
	}
}

func TestStringValue(t *testing.T) {
	tests := []struct {
		name, raw, want string
		ok              bool
	}{
		{name: "plain", raw: `"task-1"`, want: "task-1", ok: true},
		{name: "escapes", raw: `"a\/b\u00e9\n"`, want: "a/b\u00e9\n", ok: true},
		{name: "surrogate pair", raw: `"\ud83d\ude00"`, want: "\U0001F600", ok: true},
		{name: "lone surrogate", raw: `"\ud83d"`},
		{name: "not a string", raw: `12`},
		{name: "empty", raw: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := StringValue([]byte(tt.raw))
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("StringValue(%s) = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
			}
		})
	}
}
