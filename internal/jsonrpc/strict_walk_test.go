package jsonrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestWalkStrictRefuses(t *testing.T) {
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
		{"sixteen keys", `{` + manyKeys(16) + `}`, nil},
		{"many keys", `{` + manyKeys(40) + `}`, nil},
		{"same prefix, other length", `{"k":0,"k1":0,"k10":0,"k1\u0030\u0030":0}`, nil},
		{"seventeenth key repeats the first", `{` + manyKeys(16) + `,"k0":1}`, ErrDuplicateKey},
		{"escaped key repeats a plain one", `{"k1":0,"k2":0,"\u006b1":1}`, ErrDuplicateKey},
		{"plain key repeats an escaped one", `{"\u006b1":0,"k2":0,"k1":1}`, ErrDuplicateKey},
		{"escaped key repeats an escaped one", `{"\u006b1":0,"k\u0031":1}`, ErrDuplicateKey},
		{"escaped key beyond sixteen repeats an escaped one", `{"\u006b1x":0,` + manyKeys(20) + `,"k\u0031x":1}`, ErrDuplicateKey},
		{"plain key beyond sixteen repeats an escaped one", `{"\u006b1x":0,` + manyKeys(20) + `,"k1x":1}`, ErrDuplicateKey},
		{"duplicate in a nested object among many keys", `{` + manyKeys(20) + `,"o":{"a":1,"b":{"a":1},"a":2}}`, ErrDuplicateKey},
		{"long keys alike in their first eight bytes", `{"abcdefgh1":0,"abcdefgh2":0,"abcdefgh":0}`, nil},
		{"long key twice", `{"abcdefgh1":0,"x":0,"abcdefgh1":0}`, ErrDuplicateKey},
		{"long escaped key repeats a plain one", `{"abcdefghi":0,"abcdefgh\u0069":1}`, ErrDuplicateKey},
		{"key and key with a NUL", `{"a":0,"a\u0000":0,"\u0000":0,"":0}`, nil},
		{"short key twice near the end", `{"ab":1,"ab":2}`, ErrDuplicateKey},
		{"short key once near the end", `{"ab":1,"ac":2}`, nil},
		{"same key in sibling objects", `{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":1}]}`, nil},
		{"invalid utf-8", "{\"a\":\"\xff\"}", ErrParse},
		{"trailing garbage", `{} x`, ErrParse},
		{"empty", ``, ErrParse},
		{"too deep", deepArray(MaxDepth + 1), ErrTooDeep},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, depth := range []int{0, 1, 4} {
				if err := WalkStrict([]byte(tt.in), depth, func(int, []byte, int, int) {}); !errors.Is(err, tt.want) {
					t.Fatalf("WalkStrict(%q, %d) = %v, want %v", tt.in, depth, err, tt.want)
				}
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

func TestWalkStrict(t *testing.T) {
	doc := `{"a":{"b":[1,{"c":2}]},"d\u0065":"x"}`
	var got []string
	err := WalkStrict([]byte(doc), 3, func(depth int, key []byte, start, end int) {
		got = append(got, fmt.Sprintf("%d %s=%s", depth, key, doc[start:end]))
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`3 =1`, `3 ={"c":2}`, `2 b=[1,{"c":2}]`, `1 a={"b":[1,{"c":2}]}`, `1 de="x"`}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("visits %q, want %q", got, want)
	}
}

// FuzzWalkStrict: walking the outer containers accepts exactly what the
// scanner alone (depth 0) accepts, and a document encoding/json refuses is
// refused.
func FuzzWalkStrict(f *testing.F) {
	f.Add([]byte(`{"a":[{"b":1,"b":2}]}`), 2)
	f.Add([]byte(`[[[[1]]]]`), 3)
	f.Fuzz(func(t *testing.T, doc []byte, maxDepth int) {
		noop := func(int, []byte, int, int) {}
		want := WalkStrict(doc, 0, noop)
		got := WalkStrict(doc, maxDepth%8, noop)
		if !errors.Is(got, want) {
			t.Fatalf("depth %d: %v, depth 0: %v", maxDepth%8, got, want)
		}
		if want == nil && !json.Valid(doc) {
			t.Fatalf("accepted %q, which encoding/json refuses", doc)
		}
	})
}
