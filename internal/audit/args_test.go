package audit

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReduceArguments(t *testing.T) {
	long := strings.Repeat("é", 100) // 200 bytes
	tests := []struct {
		name  string
		raw   string
		optIn []string
		want  []Argument
	}{
		{"names in order", `{"b":1,"a":{"x":2},"c":[3]}`, nil, []Argument{{Name: "b"}, {Name: "a"}, {Name: "c"}}},
		{"opted-in top level", `{"q":"find me","k":"secret"}`, []string{"q"}, []Argument{{Name: "q", Value: `"find me"`}, {Name: "k"}}},
		{"opted-in nested", `{"o":{"lang":"en","token":"t"}}`, []string{"o.lang"}, []Argument{{Name: "o"}, {Name: "o.lang", Value: `"en"`}}},
		{"opted-in absent", `{"a":1}`, []string{"b", "a.b"}, []Argument{{Name: "a"}}},
		{"value compacted", `{"a": { "x" : [1, 2] }}`, []string{"a"}, []Argument{{Name: "a", Value: `{"x":[1,2]}`}}},
		{"value truncated on a rune", `{"a":"` + long + `"}`, []string{"a"}, []Argument{{Name: "a", Value: `"` + strings.Repeat("é", 63), Truncated: true}}},
		{"long name cut", `{"` + strings.Repeat("n", 100) + `":1}`, nil, []Argument{{Name: strings.Repeat("n", MaxNameLen)}}},
		{"not an object", `["a","b"]`, []string{"a"}, nil},
		{"empty", ``, nil, nil},
		{"null", `null`, nil, nil},
		{"broken after a name", `{"a":1,"b":`, nil, []Argument{{Name: "a"}}},
		{"empty object", `{}`, nil, nil},
		// What a caller may send to get a value it did not opt in logged,
		// or to hide one that is opted in.
		{"dotted key is not the opted-in path", `{"o.lang":"secret"}`, []string{"o.lang"}, []Argument{{Name: "o.lang"}}},
		{"opted-in path through a non-object", `{"o":"secret"}`, []string{"o.lang"}, []Argument{{Name: "o"}}},
		{"escaped name is the same name", `{"\u0071":"v","k":"secret"}`, []string{"q"}, []Argument{{Name: "q", Value: `"v"`}, {Name: "k"}}},
		{"duplicate name: the last value, as the server reads it", `{"q":"shown","q":"used"}`, []string{"q"}, []Argument{{Name: "q", Value: `"used"`}, {Name: "q"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := reduceArguments([]byte(tc.raw), tc.optIn)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestReduceArgumentsBounded: an attacker sending thousands of argument
// names gets MaxArguments of them into the record.
func TestReduceArgumentsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 5000 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"arg%d":%d`, i, i)
	}
	b.WriteString("}")
	if got := reduceArguments([]byte(b.String()), nil); len(got) != MaxArguments {
		t.Errorf("%d names, want %d", len(got), MaxArguments)
	}
}

func TestValidPath(t *testing.T) {
	for p, want := range map[string]bool{"a": true, "a.b": true, "": false, ".a": false, "a.": false, "a..b": false} {
		if got := ValidPath(p); got != want {
			t.Errorf("ValidPath(%q) = %v", p, got)
		}
	}
}

func FuzzReduceArguments(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":{"b":"c"}}`, `{"a":"\u00e9"}`, `[1]`, `{"a":`} {
		f.Add([]byte(s), "a.b")
	}
	f.Fuzz(func(t *testing.T, raw []byte, path string) {
		got := reduceArguments(raw, []string{path})
		if len(got) > MaxArguments+1 {
			t.Fatalf("%d arguments", len(got))
		}
		for _, a := range got {
			if len(a.Value) > MaxValueLen || !utf8.ValidString(a.Value) && utf8.Valid(raw) {
				t.Fatalf("value %q", a.Value)
			}
		}
	})
}
