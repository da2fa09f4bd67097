package jsonrpc

import (
	"encoding/json"
	"testing"
)

// TestSkipValue: on values encoding/json accepts, SkipValue ends exactly
// where the value does, for strings and byte slices alike; cut short, it
// says so.
func TestSkipValue(t *testing.T) {
	tests := []struct{ name, value string }{
		{"string", `"a\"b\\"`},
		{"number", `-12.5e3`},
		{"literal", `true`},
		{"empty object", `{}`},
		{"nested", `{"a":[1,{"b":"}]"}],"c":{"d":null}}`},
		{"brackets in strings", `["]","[","{\"}"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !json.Valid([]byte(tt.value)) {
				t.Fatalf("not JSON: %s", tt.value)
			}
			doc := "  " + tt.value + ` ,"next"`
			i := SkipSpace(doc, 0)
			if got, want := SkipValue(doc, i), i+len(tt.value); got != want {
				t.Errorf("string: %d, want %d", got, want)
			}
			if got, want := SkipValue([]byte(doc), i), i+len(tt.value); got != want {
				t.Errorf("bytes: %d, want %d", got, want)
			}
			if len(tt.value) > 1 && tt.value[0] != '-' && tt.value != "true" {
				if got := SkipValue(tt.value[:len(tt.value)-1], 0); got != -1 {
					t.Errorf("cut short: %d, want -1", got)
				}
			}
		})
	}
}
