package policy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"cel.dev/cel-go/common/types"
)

// FuzzArguments: whatever the arguments text, reading a member never
// panics, and for a JSON object in valid UTF-8 without repeated keys (the
// only ones a rule sees: jsonrpc.Parse refuses other bodies) it reads what
// encoding/json reads, unless encoding/json's struct decoding could read
// it otherwise: the object holds the key in another case (equal under
// bytes.EqualFold, as encoding/json matches keys to fields), or the
// member's value holds, at any depth, an object with two keys equal under
// bytes.EqualFold. Then the member cannot be read (Find fails, or its
// value or native conversion is an error), Argument leaves it out and
// ArgumentsAmbiguous reports it. encoding/json reads invalid UTF-8 as
// U+FFFD, so a key spelled with such bytes is another key to it.
func FuzzArguments(f *testing.F) {
	for _, seed := range []string{
		`{"path": "/workspace/alice/x"}`,
		`{"p\u0061th": "x", "n": 1.5e3, "l": [1, {"a": null}], "o": {"path": true}}`,
		`{"a": "}\"{", "path": "\\"}`,
		`{}`, `[]`, `{"path"`, `{"a": 1 "b": 2}`, `{"a": -0.0E+1}`,
		`{"path": "/tmp/a", "PATH": "/etc/passwd"}`,
		`{"path": [{"path": "/tmp/a", "PATH": "/etc/passwd"}]}`,
		`{"path": {"o": [[{"k": 1, "\u212a": 2}]]}}`,
		`{"path": [{"path": "/tmp/a"}, {"PATH": "/etc"}]}`,
	} {
		f.Add(seed, "path")
	}
	env, err := NewEnv(Options{})
	if err != nil {
		f.Fatal(err)
	}
	p, err := env.Compile(`mcp.arguments.exists(k, k in mcp.arguments && mcp.arguments[k] != null) || size(mcp.arguments) == 0`)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args, key string) {
		in := &Input{MCP: MCP{Arguments: args, BodyComplete: true}}
		_, _ = p.Eval(in) // must not panic

		var want map[string]any
		if !utf8.ValidString(args) || json.Unmarshal([]byte(args), &want) != nil || want == nil || repeatsKeys(args) {
			return
		}
		var o jsonObject
		o.reset(args)
		got, found := o.Find(types.String(key))
		w, ok := want[key]
		other := false // another top-level key folds onto key
		for k := range want {
			other = other || k != key && bytes.EqualFold([]byte(k), []byte(key))
		}
		inside := ok && foldsInside(w)
		arg, argOK := in.Argument(key)
		if amb := in.ArgumentsAmbiguous([]string{key}); amb != (other || inside) {
			t.Fatalf("ArgumentsAmbiguous(%q) = %v; another key in another case %v, keys equal but for case inside %v", key, amb, other, inside)
		}
		switch {
		case other:
			if found {
				t.Fatalf("Find(%q) = %v, but the object holds it in another case", key, got)
			}
			if argOK {
				t.Fatalf("Argument(%q) = %#v, but the object holds it in another case", key, arg)
			}
			return
		case found != ok:
			t.Fatalf("Find(%q) found = %v, encoding/json %v", key, found, ok)
		case !ok:
			return
		}
		native, err := got.ConvertToNative(reflect.TypeFor[any]())
		if inside {
			if err == nil && !types.IsError(got) {
				t.Fatalf("Find(%q) = %#v, but it holds keys equal but for case", key, native)
			}
			if argOK {
				t.Fatalf("Argument(%q) = %#v, but it holds keys equal but for case", key, arg)
			}
			return
		}
		if err != nil {
			t.Fatalf("ConvertToNative: %v", err)
		}
		if !reflect.DeepEqual(normalize(native), normalize(w)) {
			t.Fatalf("Find(%q) = %#v, encoding/json %#v", key, native, w)
		}
		if !argOK || !reflect.DeepEqual(normalize(arg), normalize(w)) {
			t.Fatalf("Argument(%q) = %#v, %v; encoding/json %#v", key, arg, argOK, w)
		}
	})
}

// foldsInside reports whether a value decoded by encoding/json holds, at
// any depth, an object with two keys equal under bytes.EqualFold.
func foldsInside(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k, e := range v {
			for _, prev := range keys {
				if bytes.EqualFold([]byte(prev), []byte(k)) {
					return true
				}
			}
			keys = append(keys, k)
			if foldsInside(e) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if foldsInside(e) {
				return true
			}
		}
	}
	return false
}

// repeatsKeys reports whether some object in the document repeats a key
// (such bodies never reach a rule: the front end refuses them).
func repeatsKeys(doc string) bool {
	d := json.NewDecoder(strings.NewReader(doc))
	var stack []map[string]bool
	expectKey := []bool{}
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, map[string]bool{})
				expectKey = append(expectKey, true)
				continue
			case '[':
				stack = append(stack, nil)
				expectKey = append(expectKey, false)
				continue
			default:
				stack = stack[:len(stack)-1]
				expectKey = expectKey[:len(expectKey)-1]
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1] != nil && expectKey[n-1] {
				if stack[n-1][v] {
					return true
				}
				stack[n-1][v] = true
				expectKey[n-1] = false
				continue
			}
		}
		if n := len(stack); n > 0 && stack[n-1] != nil {
			expectKey[n-1] = true
		}
	}
}

// normalize makes CEL's native conversions comparable with encoding/json's.
func normalize(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// FuzzCompile: no expression text panics the compiler or, once compiled,
// an evaluation; what compiles stays within its cost bound.
func FuzzCompile(f *testing.F) {
	for _, seed := range []string{
		workspace,
		`jwt.groups.exists(g, g == "finance") && identity.actors == ["billing-agent"]`,
		`has(mcp.arguments.a.b) || mcp.arguments.n > 1.5`,
		`now.getHours("Europe/Berlin") >= 18`,
		`[1,2,3].map(x, x * 2)[0] == 2`,
		`request.headers["x"].matches("^a+$")`,
		`"a" + "b" == "ab" ? lineage.depth < 2 : false`,
	} {
		f.Add(seed)
	}
	env, err := NewEnv(Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		p, err := env.Compile(expr)
		if err != nil {
			return
		}
		in := alice()
		_, _ = p.Eval(in)
		_, _ = p.CanCall(in, VarRequest)
		_ = p.Values(in)
		if _, maximum := p.Cost(); maximum > DefaultMaxCost {
			t.Fatalf("%q compiled with cost %d", expr, maximum)
		}
	})
}
