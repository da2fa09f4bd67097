package jwtauth

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// TestDecodeSegment covers what a segment's decoding must refuse, so that
// every token has one spelling (RFC 7515 section 2: base64url without
// padding): characters outside the URL alphabet anywhere, the standard
// alphabet's two, padding, unused bits left set, impossible lengths, and
// the line ends encoding/base64 skips.
func TestDecodeSegment(t *testing.T) {
	raw := []byte(strings.Repeat(`{"sub":"alice","scope":"a b c"}`, 8))
	long := base64.RawURLEncoding.EncodeToString(raw)
	tests := []struct {
		name string
		seg  string
		want []byte // nil: refused
	}{
		{"empty", "", []byte{}},
		{"short", "eyJhbGciOiJIUzI1NiJ9", []byte(`{"alg":"HS256"}`)},
		{"long", long, raw},
		{"the URL alphabet's two", "-_-_", []byte{0xfb, 0xff, 0xbf}},
		{"the standard alphabet's slash", "0000000/" + strings.Repeat("0", 40), nil},
		{"the standard alphabet's plus", "0000000+" + strings.Repeat("0", 40), nil},
		{"a bad byte at the start", "!" + long[1:], nil},
		{"a bad byte inside", long[:40] + "*" + long[41:], nil},
		{"a bad byte in the tail", long[:len(long)-2] + "." + long[len(long)-1:], nil},
		{"a NUL", long[:50] + "\x00" + long[51:], nil},
		{"a newline, which encoding/base64 skips even when strict", "eyJhbGci\nOiJIUzI1NiJ9", nil},
		{"a carriage return, likewise", "eyJhbGci\rOiJIUzI1NiJ9", nil},
		{"a line end at the end", "eyJhbGciOiJIUzI1NiJ9\r\n", nil},
		{"padding", "eyJhbGciOiJIUzI1NiJ9AA==", nil},
		{"a length no encoding has", "eyJhbGciOiJIUzI1NiJ9" + "A", nil},
		{"unused bits set (two characters)", "eyJhbGciOiJIUzI1NiJ9" + "AB", nil},
		{"unused bits clear (two characters)", "eyJhbGciOiJIUzI1NiJ9" + "AA", append([]byte(`{"alg":"HS256"}`), 0)},
		{"unused bits set (three characters)", "eyJhbGciOiJIUzI1NiJ9" + "AAB", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := make([]byte, decodedLen(len(tt.seg)))
			n, ok := decodeSegment(dst, tt.seg)
			switch {
			case ok != (tt.want != nil):
				t.Fatalf("decodeSegment(%q) ok = %v, want %v", tt.seg, ok, tt.want != nil)
			case ok && !bytes.Equal(dst[:n], tt.want):
				t.Fatalf("decodeSegment(%q) = %q, want %q", tt.seg, dst[:n], tt.want)
			}
		})
	}
}
