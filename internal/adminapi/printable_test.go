package adminapi

import "testing"

func TestPrintable(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", "files-mcp", "files-mcp"},
		{"unicode", "Zoë 東京", "Zoë 東京"},
		{"escape sequence", "expired\x1b[2J", `expired\x1b[2J`},
		{"newline and tab", "a\nb\tc", `a\nb\tc`},
		{"quotes kept readable once escaped", "a\x00\"b\"", `a\x00\"b\"`},
		{"invalid UTF-8", "a\xffb", `a\xffb`},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := printable(tt.in); got != tt.want {
				t.Errorf("printable(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}
