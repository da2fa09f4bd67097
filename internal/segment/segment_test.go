package segment

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		v    string
		safe bool
	}{
		{"plain", "alice", true},
		{"email", "alice@example.com", true},
		{"issuer namespace", "hs:alice", true},
		{"dots inside", "a.b..c", true},
		{"non-ASCII letters", "josé", true},
		{"empty", "", false},
		{"dot", ".", false},
		{"dot dot", "..", false},
		{"three dots", "...", false},
		{"dots and spaces", ". .", false},
		{"slash", "a/b", false},
		{"traversal", "../../etc", false},
		{"backslash", `..\..\windows`, false},
		{"percent-encoded dot dot", "%2e%2e", false},
		{"percent-encoded slash", "a%2fb", false},
		{"double percent-encoding", "%252e%252e", false},
		{"NUL", "a\x00b", false},
		{"newline", "a\nb", false},
		{"DEL", "a\x7fb", false},
		{"C1 control", "a\u0085b", false},
		{"invalid UTF-8", "a\xffb", false},
		{"fullwidth dots", "\uff0e\uff0e", false},
		{"fullwidth solidus", "a\uff0fb", false},
		{"two dot leader", "\u2025", false},
		{"fullwidth percent", "\uff052e\uff052e", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why := Check(tc.v)
			if (why == "") != tc.safe {
				t.Fatalf("Check(%q) = %q, want safe %v", tc.v, why, tc.safe)
			}
		})
	}
}

func TestEncode(t *testing.T) {
	tests := []struct{ in, want string }{
		{"alice", "alice"},
		{"hs:alice", "hs:alice"},
		{"../../etc", "~Li4vLi4vZXRj"},
		{"~alice", "~fmFsaWNl"},
		{"", "~"},
		{"a/b", "~YS9i"},
	}
	for _, tc := range tests {
		got := Encode(tc.in)
		if got != tc.want {
			t.Errorf("Encode(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if back, ok := decode(got); !ok || back != tc.in {
			t.Errorf("decode(%q) = %q, %v", got, back, ok)
		}
	}
	for _, bad := range []string{"~!!", "~YWxpY2U", "a/b", "~Li4=", ".."} {
		if _, ok := decode(bad); ok {
			t.Errorf("decode(%q) accepted a value Encode never returns", bad)
		}
	}
}

// FuzzEncode: Encode always returns a safe value, and Decode gives back
// exactly the input (so two users never share one encoded value).
func FuzzEncode(f *testing.F) {
	for _, s := range []string{"alice", "../x", "~", "~~", "%2e", "\uff0e\uff0e", "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		e := Encode(v)
		if !Safe(e) {
			t.Fatalf("Encode(%q) = %q is not safe", v, e)
		}
		back, ok := decode(e)
		if !ok || back != v {
			t.Fatalf("decode(Encode(%q)) = %q, %v", v, back, ok)
		}
	})
}

// decode inverts Encode, as an upstream that needs the original value
// would; ok is false for a value Encode cannot return.
func decode(v string) (string, bool) {
	rest, encoded := strings.CutPrefix(v, Marker)
	if !encoded {
		return v, Safe(v)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || Encode(string(b)) != v {
		return "", false
	}
	return string(b), true
}

func TestPadded(t *testing.T) {
	for _, tt := range []struct {
		name, v string
		padded  bool
	}{
		{"plain", "alice", false},
		{"empty", "", false},
		{"inner space", "a b", false},
		{"inner no-break space", "a\u00a0b", false},
		{"non-ASCII ends", "éa-ü", false},
		{"zero-width space, which nobody trims", "alice\u200b", false},
		{"leading space", " alice", true},
		{"trailing space", "alice ", true},
		{"trailing tab", "alice\t", true},
		{"trailing no-break space", "alice\u00a0", true},
		{"leading ideographic space", "\u3000alice", true},
		{"trailing four-per-em space", "alice\u2005", true},
		{"trailing line separator", "alice\u2028", true},
		{"trailing next line", "alice\u0085", true},
		{"trailing byte order mark", "alice\ufeff", true},
		{"only a space", "\u00a0", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Padded(tt.v); got != tt.padded {
				t.Errorf("Padded(%q) = %v, want %v", tt.v, got, tt.padded)
			}
			// What the trimming functions a workload may call make of it.
			trimmed := strings.Trim(strings.TrimSpace(tt.v), "\ufeff")
			if tt.padded != (trimmed != tt.v) {
				t.Errorf("Padded(%q) = %v, but trimming gives %q", tt.v, tt.padded, trimmed)
			}
		})
	}
}
