package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// Bounds on what one record says about a call's arguments: the names come
// from the caller, so their number and length are capped.
const (
	MaxArguments = 64
	MaxNameLen   = 64
	MaxValueLen  = 128
)

// reduceArguments turns a call's arguments object into its top-level names,
// in the order they arrived, plus a truncated value for every opted-in path
// (dotted, into nested objects) that is present. Anything that is not a
// JSON object yields nothing: the record is about the decision, and the
// decision has already judged the body.
func reduceArguments(raw []byte, optIn []string) []Argument {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []Argument
	for len(out) < MaxArguments && dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		name, ok := t.(string)
		if !ok {
			break
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			break
		}
		out = append(out, Argument{Name: truncate(name, MaxNameLen)})
	}
	for _, path := range optIn {
		v, ok := lookup(raw, path)
		if !ok {
			continue
		}
		value, cut := compactValue(v)
		i := indexOf(out, path)
		if i < 0 {
			if len(out) >= MaxArguments+len(optIn) {
				continue
			}
			out = append(out, Argument{Name: path})
			i = len(out) - 1
		}
		out[i].Value, out[i].Truncated = value, cut
	}
	return out
}

func indexOf(args []Argument, name string) int {
	for i := range args {
		if args[i].Name == name {
			return i
		}
	}
	return -1
}

// lookup finds the value at a dotted path of object keys.
func lookup(raw []byte, path string) (json.RawMessage, bool) {
	cur := json.RawMessage(raw)
	for seg := range strings.SplitSeq(path, ".") {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			return nil, false
		}
		v, ok := obj[seg]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// compactValue is the value's compact JSON text cut to MaxValueLen bytes on
// a rune boundary.
func compactValue(v json.RawMessage) (string, bool) {
	var b bytes.Buffer
	if err := json.Compact(&b, v); err != nil {
		return "", false
	}
	s := b.String()
	t := truncate(s, MaxValueLen)
	return t, len(t) < len(s)
}

// truncate cuts s to at most n bytes without splitting a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// ValidPath reports whether an opted-in argument path is well formed:
// non-empty dot-separated object keys.
func ValidPath(p string) bool {
	if p == "" {
		return false
	}
	for seg := range strings.SplitSeq(p, ".") {
		if seg == "" {
			return false
		}
	}
	return true
}
