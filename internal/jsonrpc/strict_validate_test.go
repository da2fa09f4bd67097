package jsonrpc

import (
	"errors"
	"testing"
)

func TestValidateStrict(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"object", `{"a":[1,{"b":"c"}],"d":null}`, nil},
		{"scalar with whitespace", " 12 ", nil},
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey},
		{"duplicate escaped key", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"nested duplicate", `{"x":[{"k":1,"k":1}]}`, ErrDuplicateKey},
		{"invalid utf-8", "{\"a\":\"\xff\"}", ErrParse},
		{"trailing garbage", `{} x`, ErrParse},
		{"empty", ``, ErrParse},
		{"too deep", deepArray(MaxDepth + 1), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := ValidateStrict([]byte(tt.in)); !errors.Is(err, tt.want) {
				t.Fatalf("ValidateStrict(%q) = %v, want %v", tt.in, err, tt.want)
			}
		})
	}
}

func deepArray(n int) string {
	b := make([]byte, 0, 2*n)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(b)
}
