package jsonrpc

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestKeyIs: a key equal to ours only under Unicode case folding is
// ambiguous, whatever its first byte; the quick rejection by first byte
// keeps none of them out.
func TestKeyIs(t *testing.T) {
	tests := []struct {
		name, key, want string
		is, ambiguous   bool
	}{
		{name: "exact", key: "name", want: "name", is: true},
		{name: "upper first", key: "Name", want: "name", ambiguous: true},
		{name: "upper later", key: "nAME", want: "name", ambiguous: true},
		{name: "long s last", key: "annotation\u017f", want: "annotations", ambiguous: true},
		{name: "long s inside", key: "re\u017fult", want: "result", ambiguous: true},
		{name: "kelvin sign first", key: "\u212aind", want: "kind", ambiguous: true},
		{name: "kelvin sign is not t", key: "\u212aools", want: "tools"},
		{name: "other first letter", key: "game", want: "name"},
		{name: "same length other key", key: "description", want: "annotations"},
		{name: "too short", key: "nam", want: "name"},
		{name: "non-letter first bytes", key: "_meta", want: "_META", ambiguous: true},
		{name: "non-ascii first byte", key: "\u00e9ame", want: "name"},
		{name: "empty want", key: "", want: "", is: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is, ambiguous := KeyIs([]byte(tt.key), tt.want)
			if is != tt.is || ambiguous != tt.ambiguous {
				t.Errorf("KeyIs(%q, %q) = %v, %v; want %v, %v", tt.key, tt.want, is, ambiguous, tt.is, tt.ambiguous)
			}
		})
	}
}

func TestStringValue(t *testing.T) {
	tests := []struct {
		name, raw, want string
		ok              bool
	}{
		{name: "plain", raw: `"task-1"`, want: "task-1", ok: true},
		{name: "escapes", raw: `"a\/b\u00e9\n"`, want: "a/b\u00e9\n", ok: true},
		{name: "surrogate pair", raw: `"\ud83d\ude00"`, want: "\U0001F600", ok: true},
		{name: "lone surrogate", raw: `"\ud83d"`},
		{name: "not a string", raw: `12`},
		{name: "empty", raw: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := StringValue([]byte(tt.raw))
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("StringValue(%s) = %q, %v; want %q, %v", tt.raw, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestLoneSurrogate(t *testing.T) {
	tests := []struct {
		name, doc string
		lone      bool
	}{
		{name: "no escape", doc: `{"sub":"alice","n":[1,{"a":"b"}]}`},
		{name: "other escapes", doc: `{"a":"\"\\\/\b\f\n\r\t\u00e9\u0000"}`},
		{name: "pair", doc: `{"a":"\ud83d\ude00"}`},
		{name: "pair in upper-case hex", doc: `{"a":"\uD83D\uDE00"}`},
		{name: "pairs back to back", doc: `{"a":"\ud83d\ude00\ud83d\ude01x"}`},
		{name: "escaped backslash before u", doc: `{"a":"\\ud800"}`},
		{name: "escaped backslash, then a pair", doc: `{"a":"\\\ud83d\ude00"}`},
		{name: "lone high", doc: `{"a":"\ud800"}`, lone: true},
		{name: "lone high with text after", doc: `{"a":"\ud800abcdef"}`, lone: true},
		{name: "lone low", doc: `{"a":"\udc00"}`, lone: true},
		{name: "reversed pair", doc: `{"a":"\ude00\ud83d"}`, lone: true},
		{name: "high before high", doc: `{"a":"\ud83d\ud83d\ude00"}`, lone: true},
		{name: "high before another escape", doc: `{"a":"\ud83d\n"}`, lone: true},
		{name: "high before a plain character", doc: `{"a":"\ud83d\u0041"}`, lone: true},
		{name: "after a pair, a lone low", doc: `{"a":"\ud83d\ude00\ude00"}`, lone: true},
		{name: "in a key", doc: `{"s\ud800b":1}`, lone: true},
		{name: "deep in an array", doc: `{"a":[[{"b":["x","\udfff"]}]]}`, lone: true},
		{name: "in a second string", doc: `{"a":"\ud83d\ude00","b":"\ud801"}`, lone: true},
		// Not what WalkStrict accepts: no panic, and a cut escape counts.
		{name: "cut after the backslash", doc: `"\`, lone: true},
		{name: "cut inside the escape", doc: `"\ud8`, lone: true},
		{name: "cut before the low half", doc: `"\ud83d\ude`, lone: true},
		{name: "empty", doc: ``},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LoneSurrogate([]byte(tt.doc)); got != tt.lone {
				t.Errorf("LoneSurrogate(%s) = %v, want %v", tt.doc, got, tt.lone)
			}
			if want := loneSurrogateOracle(tt.doc); tt.doc != "" && tt.doc[0] == '{' && want != tt.lone {
				t.Errorf("the oracle reads %s as %v, the table as %v", tt.doc, want, tt.lone)
			}
		})
	}
}

// loneSurrogateOracle finds unpaired surrogates by another route than
// LoneSurrogate: it hides escaped backslashes, lists every \uXXXX escape
// with a regular expression, and pairs each high half with the escape
// that immediately follows it.
func loneSurrogateOracle(doc string) bool {
	hidden := strings.ReplaceAll(doc, `\\`, "\x00\x00")
	escapes := unicodeEscape.FindAllStringSubmatchIndex(hidden, -1)
	for k := 0; k < len(escapes); k++ {
		v, _ := strconv.ParseUint(hidden[escapes[k][2]:escapes[k][3]], 16, 32)
		switch {
		case v < 0xd800 || v > 0xdfff:
		case v >= 0xdc00:
			return true
		case k+1 == len(escapes) || escapes[k+1][0] != escapes[k][1]:
			return true
		default:
			w, _ := strconv.ParseUint(hidden[escapes[k+1][2]:escapes[k+1][3]], 16, 32)
			if w < 0xdc00 || w > 0xdfff {
				return true
			}
			k++
		}
	}
	return false
}

var unicodeEscape = regexp.MustCompile(`\\u([0-9a-fA-F]{4})`)

// FuzzLoneSurrogate holds LoneSurrogate to loneSurrogateOracle on every
// document WalkStrict accepts, and to decoding each string it visits:
// where it finds none, every string value decodes cleanly.
func FuzzLoneSurrogate(f *testing.F) {
	for _, seed := range []string{
		`{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, `{"a":"\\ud800"}`, `{"s\udc00b":[1,"\ud83d\u0041"]}`,
		`["\ud83d\ude00\ude00", {"k": "\\\ud83d\ude00"}]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) {
		data := []byte(doc)
		var raws [][]byte
		if WalkStrict(data, MaxDepth, func(_ int, _ []byte, start, end int) {
			raws = append(raws, data[start:end])
		}) != nil {
			LoneSurrogate(data) // must not panic
			return
		}
		got := LoneSurrogate(data)
		if want := loneSurrogateOracle(doc); got != want {
			t.Fatalf("LoneSurrogate(%q) = %v, the oracle %v", doc, got, want)
		}
		if got {
			return
		}
		for _, raw := range raws {
			if raw[0] == '"' {
				if _, ok := StringValue(raw); !ok {
					t.Fatalf("LoneSurrogate(%q) found nothing, but %s holds one", doc, raw)
				}
			}
		}
	})
}
