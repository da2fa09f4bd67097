package check

import (
	"bytes"
	"testing"
)

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"delete_*", "delete_file", true},
		{"delete_*", "delete_", true},
		{"delete_*", "delete_*all", true},
		{"a*b", "a*xb", true},
		{"*", "**x", true},
		{"delete_*", "undelete_file", false},
		{"tools/*", "tools/call", true},
		{"tools/*", "prompts/get", false},
		{"file:///home/*", "file:///home/a/b/c", true},
		{"*", "", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"*_admin_*", "x_admin_y", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"**", "anything/at/all", true},
	}
	for _, tt := range tests {
		if got := glob(tt.pattern, tt.s); got != tt.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

func FuzzGlob(f *testing.F) {
	f.Add("a*b?c", "axxbyc")
	f.Add("delete_*", "delete_*all")
	f.Fuzz(func(t *testing.T, pattern, s string) {
		if len(pattern) <= 12 && len(s) <= 24 && glob(pattern, s) != globMatchesForTest(pattern, s) {
			t.Fatalf("glob(%q, %q) = %v, the documented glob says otherwise", pattern, s, glob(pattern, s))
		}
		if glob(pattern, s) && len(s) == 0 && len(pattern) > 0 {
			for i := 0; i < len(pattern); i++ {
				if pattern[i] != '*' {
					t.Fatalf("%q matched the empty string", pattern)
				}
			}
		}
		if !glob(s, s) && !containsWildcard(s) {
			t.Fatalf("%q does not match itself", s)
		}
	})
}

// FuzzGlobPrefixed checks globMayMatchPrefixed and globMatchesPrefixed
// against every string up to a length that decides: prefix followed by
// each suffix over the pattern's own bytes and one byte it lacks. A
// suffix longer than the pattern never matches where no shorter one does,
// so "may match" is exact; "matches every" may say no for a pattern that
// does (the caller then refuses), never yes for one that does not.
func FuzzGlobPrefixed(f *testing.F) {
	for _, seed := range [][2]string{
		{"file:///etc/*", "file:///"}, {"file:///etc/*", "file:///public/"}, {"file:///public/*", "file:///public/"},
		{"file:///public/*", "file:///public"}, {"*", ""}, {"a?*", "a"}, {"*b", "a"}, {"a*b*", "ab"}, {"", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, pattern, prefix string) {
		if len(pattern) > 6 || len(prefix) > 6 {
			return // the brute force below grows as an exponent of it
		}
		alphabet := []byte{0}
		for i := 0; i < len(pattern); i++ {
			if c := pattern[i]; c != '*' && c != '?' && bytes.IndexByte(alphabet, c) < 0 {
				alphabet = append(alphabet, c)
			}
		}
		some, every := false, true
		var walk func(s []byte)
		walk = func(s []byte) {
			if glob(pattern, prefix+string(s)) {
				some = true
			} else {
				every = false
			}
			if len(s) <= len(pattern) {
				for _, c := range alphabet {
					walk(append(s, c))
				}
			}
		}
		walk(nil)
		if got := globMayMatchPrefixed(pattern, prefix); got != some {
			t.Fatalf("globMayMatchPrefixed(%q, %q) = %v, but some string starting with it matches: %v", pattern, prefix, got, some)
		}
		if globMatchesPrefixed(pattern, prefix) && !every {
			t.Fatalf("globMatchesPrefixed(%q, %q), but a string starting with it does not match", pattern, prefix)
		}
	})
}

func containsWildcard(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == '*' || s[i] == '?' {
			return true
		}
	}
	return false
}

func TestClaimHasAny(t *testing.T) {
	tests := []struct {
		name  string
		claim any
		want  bool
	}{
		{"string equal", "admins", true},
		{"string other", "users", false},
		{"list contains", []any{"eng", "admins"}, true},
		{"list lacks", []any{"eng"}, false},
		{"number", 42.0, true},
		{"absent", nil, false},
		{"object", map[string]any{"admins": true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := claimHasAny(tt.claim, []string{"admins", "42"}); got != tt.want {
				t.Fatalf("got %v", got)
			}
		})
	}
}
