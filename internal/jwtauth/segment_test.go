package jwtauth

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// strictRawURL is the decoder decodeSegment must agree with.
var strictRawURL = base64.RawURLEncoding.Strict()

// checkSegment decodes seg with decodeSegment and with encoding/base64 and
// fails when they disagree on whether it decodes or on the bytes.
func checkSegment(t *testing.T, seg string) {
	t.Helper()
	want, wantErr := strictRawURL.DecodeString(seg)
	dst := make([]byte, decodedLen(len(seg)))
	n, ok := decodeSegment(dst, seg)
	if ok != (wantErr == nil) {
		t.Fatalf("decodeSegment(%q) ok = %v, encoding/base64 says %v", seg, ok, wantErr)
	}
	if ok && !bytes.Equal(dst[:n], want) {
		t.Fatalf("decodeSegment(%q) = %x, want %x", seg, dst[:n], want)
	}
}

// TestDecodeSegment covers what a segment's decoding must refuse on both
// sides of the vector decoder's 45-character threshold: characters outside
// the alphabet anywhere in a long segment, padding, unused bits left set,
// and impossible lengths.
func TestDecodeSegment(t *testing.T) {
	long := base64.RawURLEncoding.EncodeToString([]byte(strings.Repeat(`{"sub":"alice","scope":"a b c"}`, 8)))
	tests := []struct {
		name string
		seg  string
	}{
		{"empty", ""},
		{"short", "eyJhbGciOiJIUzI1NiJ9"},
		{"long", long},
		{"long, URL alphabet", strings.Repeat("-_", 40)},
		{"long, standard alphabet is not the URL one", strings.Repeat("+/", 40)},
		{"a bad byte in the first vector block", "!" + long[1:]},
		{"a bad byte in the second vector block", long[:40] + "*" + long[41:]},
		{"a bad byte in the tail", long[:len(long)-2] + "." + long[len(long)-1:]},
		{"the standard alphabet's slash, which the vector decoder takes for an underscore", "0000000/" + strings.Repeat("0", 40)},
		{"the standard alphabet's plus", "0000000+" + strings.Repeat("0", 40)},
		{"a NUL", long[:50] + "\x00" + long[51:]},
		{"a newline, which encoding/base64 skips unless told", long[:50] + "\n" + long[51:]},
		{"padding", long + "=="},
		{"one character too many", long + "A"},
		{"unused bits set (two characters)", "eyJhbGciOiJIUzI1NiJ9" + "AB"},
		{"unused bits clear (two characters)", "eyJhbGciOiJIUzI1NiJ9" + "AA"},
		{"unused bits set after a long run", long[:48] + "AAB"},
		{"unused bits clear after a long run", long[:48] + "AAA"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkSegment(t, tt.seg) })
	}
}

// FuzzDecodeSegment holds decodeSegment to encoding/base64's strict
// unpadded URL decoder on arbitrary input.
func FuzzDecodeSegment(f *testing.F) {
	for _, s := range []string{"", "eyJhbGciOiJIUzI1NiJ9", strings.Repeat("eyJzdWIiOiJhbGljZSJ9", 5), strings.Repeat("A", 47) + "B", strings.Repeat("-_", 30) + "="} {
		f.Add(s)
	}
	f.Fuzz(checkSegment)
}
