package envoyauthz

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

// encodedEntry encodes the fields of a map entry in the order given: each a
// number and its bytes, length-delimited.
func encodedEntry(fs ...any) string {
	var b []byte
	for i := 0; i < len(fs); i += 2 {
		b = protowire.AppendTag(b, protowire.Number(fs[i].(int)), protowire.BytesType)
		b = protowire.AppendString(b, fs[i+1].(string))
	}
	return string(b)
}

// checkMapEntry holds mapEntry to mapEntryFields, the general reading.
func checkMapEntry(t *testing.T, s string) {
	t.Helper()
	k, v, err := mapEntry(s)
	wk, wv, werr := mapEntryFields(s)
	if k != wk || v != wv || (err == nil) != (werr == nil) {
		t.Fatalf("mapEntry(%q) = %q, %q, %v; read field by field %q, %q, %v", s, k, v, err, wk, wv, werr)
	}
}

// TestMapEntry: the header form read directly and every other form, which
// must read as the general walk reads it: the last of a repeated field,
// fields in either order, unknown fields skipped, lengths past one byte,
// and truncated or overlong entries refused.
func TestMapEntry(t *testing.T) {
	long := strings.Repeat("v", 200)
	tests := []struct {
		name string
		s    string
		k, v string
		bad  bool // refused
	}{
		{"key then value", encodedEntry(fMapKey, "authorization", fMapValue, "Bearer t"), "authorization", "Bearer t", false},
		{"empty key", encodedEntry(fMapKey, "", fMapValue, "x"), "", "x", false},
		{"empty value", encodedEntry(fMapKey, "k", fMapValue, ""), "k", "", false},
		{"value omitted", encodedEntry(fMapKey, "k"), "k", "", false},
		{"key omitted", encodedEntry(fMapValue, "v"), "", "v", false},
		{"nothing", "", "", "", false},
		{"value then key", encodedEntry(fMapValue, "v", fMapKey, "k"), "k", "v", false},
		{"key twice: the last", encodedEntry(fMapKey, "x-user-id", fMapValue, "v", fMapKey, "authorization"), "authorization", "v", false},
		{"value twice: the last", encodedEntry(fMapKey, "k", fMapValue, "a", fMapValue, "b"), "k", "b", false},
		{"an unknown field after", encodedEntry(fMapKey, "k", fMapValue, "v", 3, "x"), "k", "v", false},
		{"a long value", encodedEntry(fMapKey, "k", fMapValue, long), "k", long, false},
		{"a long key", encodedEntry(fMapKey, long, fMapValue, "v"), long, "v", false},
		{"truncated value", encodedEntry(fMapKey, "k", fMapValue, "value")[:7], "", "", true},
		{"a value length past the end", "\x0a\x01k\x12\x05ab", "", "", true},
		{"a key length past the end", "\x0a\x09k\x12\x01v", "", "", true},
		{"a trailing byte", encodedEntry(fMapKey, "k", fMapValue, "v") + "\x00", "", "", true},
		{"the value's tag as a varint field", "\x0a\x01k\x10\x01", "k", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkMapEntry(t, tt.s)
			k, v, err := mapEntry(tt.s)
			if bad := err != nil; bad != tt.bad {
				t.Fatalf("mapEntry error %v, want refused %v", err, tt.bad)
			}
			if !tt.bad && (k != tt.k || v != tt.v) {
				t.Fatalf("mapEntry = %q, %q, want %q, %q", k, v, tt.k, tt.v)
			}
		})
	}
}

// FuzzMapEntry holds mapEntry to mapEntryFields on arbitrary bytes.
func FuzzMapEntry(f *testing.F) {
	f.Add(encodedEntry(fMapKey, "authorization", fMapValue, "Bearer t"))
	f.Add(encodedEntry(fMapValue, "v", fMapKey, "k"))
	f.Add("\x0a\x01k\x12\x05ab")
	f.Fuzz(func(t *testing.T, s string) { checkMapEntry(t, s) })
}
