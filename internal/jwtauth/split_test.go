package jwtauth

import (
	"strings"
	"testing"
)

// splitReference is splitToken's rule written plainly: three segments of
// the base64url alphabet (no padding) separated by exactly two dots.
func splitReference(token string) (header, payload, sig string, ok bool) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(token) > MaxTokenSize {
		return "", "", "", false
	}
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			c := p[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return "", "", "", false
			}
		}
	}
	return parts[0], parts[1], parts[2], true
}

func TestSplitToken(t *testing.T) {
	tests := []struct {
		name, token string
		ok          bool
	}{
		{"three segments", "eyJh.eyJp.c2ln", true},
		{"empty segments", "..", true},
		{"one dot", "eyJh.eyJp", false},
		{"three dots", "a.b.c.d", false},
		{"padding", "eyJh.eyJp.c2ln=", false},
		{"standard alphabet", "eyJh.ey+p.c2ln", false},
		{"slash", "eyJh.ey/p.c2ln", false},
		{"CR", "eyJh.eyJp\r.c2ln", false},
		{"LF in the last bytes", "eyJh.eyJp.c2l\n", false},
		{"space", "eyJh. eyJp.c2ln", false},
		{"NUL", "eyJh.eyJp.c2ln\x00", false},
		{"high byte", "eyJh.eyJp.c2l\xff", false},
		{"many dots, length a multiple of four", strings.Repeat(".", 400), false},
		{"too long", strings.Repeat("a", MaxTokenSize) + "..", false},
		{"longest", strings.Repeat("a", MaxTokenSize-2) + "..", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, p, s, ok := splitToken(tc.token)
			if ok != tc.ok {
				t.Fatalf("splitToken(%q) ok = %v, want %v", tc.token, ok, tc.ok)
			}
			rh, rp, rs, rok := splitReference(tc.token)
			if h != rh || p != rp || s != rs || ok != rok {
				t.Fatalf("splitToken(%q) = %q %q %q %v, reference %q %q %q %v", tc.token, h, p, s, ok, rh, rp, rs, rok)
			}
		})
	}
}

// TestSplitTokenEveryByte puts every byte value at every position of a
// token whose length is no multiple of four, so that each of splitToken's
// sums and its tail see each byte.
func TestSplitTokenEveryByte(t *testing.T) {
	const base = "eyJhbGc.eyJpc3Mi.c2lnbmF0"
	for i := range len(base) {
		for c := range 256 {
			tok := base[:i] + string(rune(0)) + base[i+1:]
			b := []byte(tok)
			b[i] = byte(c)
			tok = string(b)
			h, p, s, ok := splitToken(tok)
			rh, rp, rs, rok := splitReference(tok)
			if h != rh || p != rp || s != rs || ok != rok {
				t.Fatalf("splitToken(%q) = %q %q %q %v, reference %q %q %q %v", tok, h, p, s, ok, rh, rp, rs, rok)
			}
		}
	}
}

// FuzzSplitToken holds splitToken to its plain reference.
func FuzzSplitToken(f *testing.F) {
	for _, s := range []string{"", "..", "a.b.c", "eyJh.eyJp.c2ln=", "a\r.b.c", "a.b.c.d", "a.b.\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		h, p, s, ok := splitToken(token)
		rh, rp, rs, rok := splitReference(token)
		if h != rh || p != rp || s != rs || ok != rok {
			t.Fatalf("splitToken(%q) = %q %q %q %v, reference %q %q %q %v", token, h, p, s, ok, rh, rp, rs, rok)
		}
	})
}
