package jsonrpc

import (
	"encoding/base64"
	"errors"
	"testing"
	"unicode/utf8"
)

func TestDecodeMcpName(t *testing.T) {
	tests := []struct {
		name    string
		header  string
		want    string
		wantErr bool
	}{
		{name: "plain tool name", header: "get_weather", want: "get_weather"},
		{name: "plain URI", header: "file:///projects/myapp/config.json", want: "file:///projects/myapp/config.json"},
		{name: "plain with inner space", header: "a b", want: "a b"},
		{name: "empty", header: "", want: ""},
		// The spec's examples.
		{name: "non-ASCII", header: "=?base64?SGVsbG8sIOS4lueVjA==?=", want: "Hello, 世界"},
		{name: "padded", header: "=?base64?IHBhZGRlZCA=?=", want: " padded "},
		{name: "newline", header: "=?base64?bGluZTEKbGluZTI=?=", want: "line1\nline2"},
		{name: "sentinel-shaped literal", header: "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", want: "=?base64?literal?="},
		{name: "empty payload", header: "=?base64??=", want: ""},
		{name: "markers are case-sensitive", header: "=?BASE64?SGk=?=", want: "=?BASE64?SGk=?="},
		{name: "too short for both markers", header: "=?base64?=", want: "=?base64?="},

		{name: "invalid base64", header: "=?base64?not base64!?=", wantErr: true},
		{name: "missing padding", header: "=?base64?SGk?=", wantErr: true},
		{name: "URL-safe alphabet", header: "=?base64?-_-_?=", wantErr: true},
		{name: "non-zero padding bits", header: "=?base64?SGl=?=", wantErr: true},
		{name: "newline inside payload", header: "=?base64?SG\nk=?=", wantErr: true},
		{name: "decodes to invalid UTF-8", header: "=?base64?/w==?=", wantErr: true},
		{name: "control character", header: "get\x00weather", wantErr: true},
		{name: "tab", header: "get\tweather", wantErr: true},
		{name: "CR LF injection", header: "x\r\nX-Injected: 1", wantErr: true},
		{name: "DEL", header: "a\x7f", wantErr: true},
		{name: "raw non-ASCII", header: "résumé", wantErr: true},
		{name: "leading space", header: " tool", wantErr: true},
		{name: "trailing space", header: "tool ", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeMcpName(tt.header)
			if tt.wantErr {
				if !errors.Is(err, ErrMcpName) {
					t.Errorf("DecodeMcpName(%q) = %q, %v; want ErrMcpName", tt.header, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("DecodeMcpName(%q) = %q, %v; want %q", tt.header, got, err, tt.want)
			}
		})
	}
}

func TestEncodeMcpName(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "get_weather", "get_weather"},
		{"empty", "", ""},
		{"non-ASCII", "Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{"surrounding spaces", " padded ", "=?base64?IHBhZGRlZCA=?="},
		{"newline", "line1\nline2", "=?base64?bGluZTEKbGluZTI=?="},
		{"sentinel-shaped", "=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := encodeMcpName(tt.in); got != tt.want {
				t.Errorf("encodeMcpName(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzDecodeMcpName(f *testing.F) {
	for _, s := range []string{"get_weather", "Hello, 世界", " padded ", "line1\nline2", "=?base64?literal?=", "", "=?base64??=", "\xff", "=?base64?SGk=?="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Whatever a header holds, decoding must not panic, and what it
		// yields must be UTF-8 that encodes back to a decodable value.
		if name, err := DecodeMcpName(s); err == nil {
			if !utf8.ValidString(name) {
				t.Fatalf("DecodeMcpName(%q) = %q, not UTF-8", s, name)
			}
			if again, err := DecodeMcpName(encodeMcpName(name)); err != nil || again != name {
				t.Fatalf("re-encoding %q: got %q, %v", name, again, err)
			}
		}
		// Every UTF-8 name survives the round trip, as a header-safe value.
		if !utf8.ValidString(s) {
			return
		}
		enc := encodeMcpName(s)
		if !isPlain(enc) {
			t.Fatalf("encodeMcpName(%q) = %q, not a plain header value", s, enc)
		}
		got, err := DecodeMcpName(enc)
		if err != nil || got != s {
			t.Fatalf("DecodeMcpName(encodeMcpName(%q)) = %q, %v", s, got, err)
		}
	})
}

// encodeMcpName returns the Mcp-Name header value for name, as a client
// sends it: the inverse of DecodeMcpName.
func encodeMcpName(name string) string {
	if isPlain(name) && !isSentinel(name) {
		return name
	}
	return sentinelPrefix + base64.StdEncoding.EncodeToString([]byte(name)) + sentinelSuffix
}
