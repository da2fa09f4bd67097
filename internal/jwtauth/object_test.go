package jwtauth

import (
	"bytes"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/extauthz/extauthz/internal/jsonrpc"
)

// TestObjectReader holds the one-pass reader to what a document says: the
// top-level members where they are, whatever the whitespace and nesting,
// and every number checked at any depth.
func TestObjectReader(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // key token, then raw value, per member; nil: refused
	}{
		{"empty object", `{}`, []string{}},
		{"compact", `{"a":1,"b":"x"}`, []string{`"a"`, `1`, `"b"`, `"x"`}},
		{"whitespace everywhere", " \t{ \"a\" :\n1 ,\r\n \"b\" : [ 1 , {\"c\" : 2} ] , \"d\":\"x\" } \n",
			[]string{`"a"`, `1`, `"b"`, `[ 1 , {"c" : 2} ]`, `"d"`, `"x"`}},
		{"escaped key", `{"s\u0075b":"x","q\"":true}`, []string{`"s\u0075b"`, `"x"`, `"q\""`, `true`}},
		{"escaped surrogate pair in a key", `{"\ud83d\ude00":2,"\/":3,"\"":4}`, []string{`"\ud83d\ude00"`, `2`, `"\/"`, `3`, `"\""`, `4`}},
		{"escaped backslash before u", `{"\\ud800":"\\udc00"}`, []string{`"\\ud800"`, `"\\udc00"`}},
		{"lone surrogate in a key", `{"\ud800":1}`, nil},
		{"lone surrogate in a value", `{"sub":"alice\ud800"}`, nil},
		{"lone low surrogate deep in an array", `{"a":[{"b":["\udc00"]}]}`, nil},
		{"reversed surrogate pair", `{"a":"\ude00\ud83d"}`, nil},
		{"keys holding colons and quotes", `{"a\":" : "b:" , "\\" : ":"}`, []string{`"a\":"`, `"b:"`, `"\\"`, `":"`}},
		{"key holding a comma and a brace", `{"a,}":null,"b":{}}`, []string{`"a,}"`, `null`, `"b"`, `{}`}},
		{"nested object values", `{"act":{"sub":"a","act":{"sub":"b"}},"n":-1.5e3}`, []string{`"act"`, `{"sub":"a","act":{"sub":"b"}}`, `"n"`, `-1.5e3`}},
		{"number out of range", `{"a":1e400}`, nil},
		{"negative number out of range", `{"a":-1e400}`, nil},
		{"number out of range in an array", `{"a":[1,2,[3e999]]}`, nil},
		{"number out of range deep in objects", `{"a":{"b":{"c":{"d":1E+309}}}}`, nil},
		{"tiny number", `{"a":1e-400}`, []string{`"a"`, `1e-400`}},
		{"300-digit integer", `{"a":1` + strings.Repeat("0", 299) + `}`, []string{`"a"`, `1` + strings.Repeat("0", 299)}},
		{"309-digit integer", `{"a":1` + strings.Repeat("0", 308) + `}`, []string{`"a"`, `1` + strings.Repeat("0", 308)}},
		{"310-digit integer", `{"a":1` + strings.Repeat("0", 309) + `}`, nil},
		{"duplicate key", `{"a":1,"a":2}`, nil},
		{"duplicate key in a nested object", `{"a":{"b":1,"b":2}}`, nil},
		{"not an object", `[{"a":1}]`, nil},
		{"string", `"a"`, nil},
		{"empty", ``, nil},
		{"trailing comma", `{"a":1,}`, nil},
		{"two objects", `{"a":1}{"b":2}`, nil},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", nil},
		{"too deep", strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200), nil},
	}
	var r objectReader
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := []byte(tc.doc)
			members, err := r.read(doc, nil)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("read(%q) accepted it", tc.doc)
				}
				return
			}
			if err != nil {
				t.Fatalf("read(%q) = %v", tc.doc, err)
			}
			got := []string{}
			for _, m := range members {
				got = append(got, string(m.rawKey(doc)), string(m.value(doc)))
				if esc := strings.Contains(string(m.rawKey(doc)), `\`); m.escapedKey() != esc {
					t.Errorf("key %s: escapedKey() = %v", m.rawKey(doc), m.escapedKey())
				}
			}
			if strings.Join(got, "\x00") != strings.Join(tc.want, "\x00") {
				t.Errorf("read(%q) members = %q, want %q", tc.doc, got, tc.want)
			}
			var any map[string]any
			if err := json.Unmarshal(doc, &any); err != nil || len(any) != len(members) {
				t.Errorf("encoding/json reads %d members (%v), read %d", len(any), err, len(members))
			}
		})
	}
}

// TestObjectReaderTooLarge refuses a document whose offsets would not fit
// a member; no token holds one.
func TestObjectReaderTooLarge(t *testing.T) {
	doc := []byte(`{"a":"` + strings.Repeat("x", maxDocument) + `"}`)
	var r objectReader
	if _, err := r.read(doc, nil); err != ErrMalformed {
		t.Errorf("read() = %v, want ErrMalformed", err)
	}
}

// FuzzObjectReader holds the one-pass reader to the reference: the same
// documents accepted, with the same members.
func FuzzObjectReader(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"a":1,"b":"x"}`, " { \"a\" : [1, {\"c\":2e5}] , \"b\":-0.5 } ",
		`{"s\u0075b":"x","q\"":true}`, `{"\ud800" : 1 ,"\ud83d\ude00":2}`, `{"\ud83d\ude00" : [1, "\\ud800"]}`, `{"a":1e400}`, `{"a":{"b":1,"b":2}}`, `{"a":1,}`, `[1]`,
	} {
		f.Add([]byte(s))
	}
	var r objectReader
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := r.read(doc, nil)
		want, refErr := refRead(doc)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("read(%q) = %v, reference %v", doc, err, refErr)
		}
		if err == nil && !slices.Equal(got, want) {
			t.Fatalf("read(%q) members = %v, reference %v", doc, got, want)
		}
	})
}

func refRead(doc []byte) ([]member, error) {
	if len(doc) > maxDocument {
		return nil, ErrMalformed
	}
	if err := refWalkStrict(doc); err != nil {
		return nil, err
	}
	// Unpaired surrogates have a differential test of their own
	// (jsonrpc.FuzzLoneSurrogate).
	if jsonrpc.LoneSurrogate(doc) {
		return nil, ErrMalformed
	}
	var members []member
	err := refEachMember(doc, func(m member) { members = append(members, m) })
	return members, err
}

// The reference below is the three passes the reader replaced: a
// validation, a scan of the numbers, and a walk of the top-level members.

// refWalkStrict checks a JOSE header or payload: a JSON object as
// jsonrpc.WalkStrict accepts it whose every number fits a float64.
// Whatever it accepts, encoding/json decodes to the same values; what it
// refuses and encoding/json would accept (a member twice, invalid UTF-8,
// nesting deeper than jsonrpc.MaxDepth) is refused because parsers
// disagree on it.
func refWalkStrict(doc []byte) error {
	i := jsonrpc.SkipSpace(doc, 0)
	if i >= len(doc) || doc[i] != '{' {
		return ErrMalformed
	}
	if jsonrpc.WalkStrict(doc, 0, nil) != nil || !refNumbersFit(doc) {
		return ErrMalformed
	}
	return nil
}

// refNumbersFit reports whether every number in a valid JSON document fits a
// float64, as encoding/json requires of a number decoded into an any.
func refNumbersFit(doc []byte) bool {
	// Each iteration consumes at least one byte: bounded by len(doc).
	for i := 0; i < len(doc); {
		switch c := doc[i]; {
		case c == '"':
			i = jsonrpc.SkipString(doc, i)
			if i < 0 {
				return false
			}
		case c == '-' || '0' <= c && c <= '9':
			e := jsonrpc.SkipValue(doc, i)
			if e < 0 {
				return false
			}
			if _, err := strconv.ParseFloat(string(doc[i:e]), 64); err != nil {
				return false
			}
			i = e
		default:
			i++
		}
	}
	return true
}

// refEachMember calls fn for each top-level member of an object refWalkStrict
// accepted.
func refEachMember(doc []byte, fn func(member)) error {
	i := jsonrpc.SkipSpace(doc, 0) + 1 // past '{'
	i = jsonrpc.SkipSpace(doc, i)
	if i < len(doc) && doc[i] == '}' {
		return nil
	}
	// Each iteration consumes at least a key: bounded by len(doc).
	for i < len(doc) {
		if doc[i] != '"' {
			return ErrMalformed
		}
		ke := jsonrpc.SkipString(doc, i)
		if ke < 0 {
			return ErrMalformed
		}
		ks := i
		i = jsonrpc.SkipSpace(doc, ke)
		if i >= len(doc) || doc[i] != ':' {
			return ErrMalformed
		}
		vs := jsonrpc.SkipSpace(doc, i+1)
		ve := jsonrpc.SkipValue(doc, vs)
		if ve < 0 {
			return ErrMalformed
		}
		fn(newMember(ks, ke, vs, ve, bytes.IndexByte(doc[ks:ke], '\\') >= 0))
		i = jsonrpc.SkipSpace(doc, ve)
		if i >= len(doc) {
			return ErrMalformed
		}
		if doc[i] == '}' {
			return nil
		}
		if doc[i] != ',' {
			return ErrMalformed
		}
		i = jsonrpc.SkipSpace(doc, i+1)
	}
	return ErrMalformed
}

// TestNumericDate holds numericDate to the plain ParseFloat reading it
// had before integers took a shorter way.
func TestNumericDate(t *testing.T) {
	for _, raw := range []string{
		"0", "1", "-0", "-1", "1772366400", "1772366400.5", "1772366400e0", "1.7723664e9", "253402300799",
		"253402300800", "253402300799.5", "999999999999999", "1000000000000000", "9007199254740993",
		"1e400", "-1e400", "1e-400", "null", `"1"`, "true", "[1]",
	} {
		t.Run(raw, func(t *testing.T) {
			got, gotOK, gotErr := numericDate([]byte(raw))
			want, wantOK, wantErr := refNumericDate([]byte(raw))
			if !got.Equal(want) || gotOK != wantOK || gotErr != wantErr {
				t.Errorf("numericDate(%s) = %v, %v, %v; reference %v, %v, %v", raw, got, gotOK, gotErr, want, wantOK, wantErr)
			}
		})
	}
}

// FuzzNumericDate holds numericDate to the reference on any valid JSON
// number.
func FuzzNumericDate(f *testing.F) {
	for _, s := range []string{"0", "1772366400", "1772366400.25", "-5", "1e3", "253402300800"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var v json.Number
		if json.Unmarshal([]byte(raw), &v) != nil || string(v) != raw {
			return // not exactly one valid number
		}
		got, gotOK, gotErr := numericDate([]byte(raw))
		want, wantOK, wantErr := refNumericDate([]byte(raw))
		if !got.Equal(want) || gotOK != wantOK || gotErr != wantErr {
			t.Errorf("numericDate(%s) = %v, %v, %v; reference %v, %v, %v", raw, got, gotOK, gotErr, want, wantOK, wantErr)
		}
	})
}

func refNumericDate(raw []byte) (time.Time, bool, error) {
	if raw == nil || raw[0] == 'n' {
		return time.Time{}, false, nil
	}
	if c := raw[0]; c != '-' && (c < '0' || c > '9') {
		return time.Time{}, false, ErrMalformed
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return time.Time{}, false, ErrMalformed
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// TestFoldsTo holds foldsTo, which tells most names apart by their first
// byte, to bytes.EqualFold with each name: every rune of the Basic
// Multilingual Plane (no rune beyond it folds to ASCII) in place of the
// first one of each read name, the rest in both cases.
func TestFoldsTo(t *testing.T) {
	for _, set := range []*foldSet{readClaims, headerMembers} {
		for _, n := range set.names {
			for _, rest := range []string{n[1:], strings.ToUpper(n[1:])} {
				for r := rune(0); r <= 0xffff; r++ {
					name := []byte(string(r) + rest)
					want := slices.ContainsFunc(set.names, func(k string) bool { return bytes.EqualFold(name, []byte(k)) })
					if got := foldsTo(name, set); got != want {
						t.Fatalf("foldsTo(%q) = %v, bytes.EqualFold says %v", name, got, want)
					}
				}
			}
		}
	}
	for _, name := range []string{"", "SUB", "ſub", "Scope", "Kid", "\u212aid", "CLIENT_ID", "session_id", "client_id_", "ſcp"} {
		want := slices.ContainsFunc(readClaims.names, func(k string) bool { return strings.EqualFold(name, k) }) ||
			slices.ContainsFunc(headerMembers.names, func(k string) bool { return strings.EqualFold(name, k) })
		got := foldsTo([]byte(name), readClaims) || foldsTo([]byte(name), headerMembers)
		if got != want {
			t.Errorf("foldsTo(%q) = %v, want %v", name, got, want)
		}
	}
}
