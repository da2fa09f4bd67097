package audit

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/extauthz/extauthz/internal/jsonrpc"
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
// decision has already judged the body. It runs on the writer's goroutine,
// and allocates little: the names and the slice.
func reduceArguments(raw []byte, optIn []string) []Argument {
	var out []Argument
	members(raw, func(key, _ []byte) bool {
		if out == nil {
			out = make([]Argument, 0, 8)
		}
		out = append(out, Argument{Name: truncate(keyString(key), MaxNameLen)})
		return len(out) < MaxArguments
	})
	for _, path := range optIn {
		v, ok := lookup(raw, path)
		if !ok {
			continue
		}
		value, cut := compactValue(v)
		i := indexOf(out, path)
		if i < 0 {
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

// lookup finds the value at a dotted path of object keys (the last of
// duplicate keys wins, as in encoding/json).
func lookup(raw []byte, path string) ([]byte, bool) {
	cur := raw
	for seg := range strings.SplitSeq(path, ".") {
		var found []byte
		members(cur, func(key, value []byte) bool {
			if keyString(key) == seg {
				found = value
			}
			return true
		})
		if found == nil {
			return nil, false
		}
		cur = found
	}
	return cur, true
}

// members calls fn with the raw key (quoted) and raw value of each member
// of the JSON object raw, in order, until fn returns false or the object
// ends. Malformed input ends the walk early; it never reads past raw.
func members(raw []byte, fn func(key, value []byte) bool) {
	i := jsonrpc.SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return
	}
	i = jsonrpc.SkipSpace(raw, i+1)
	for i < len(raw) && raw[i] == '"' {
		kEnd := jsonrpc.SkipValue(raw, i)
		if kEnd < 0 {
			return
		}
		key := raw[i:kEnd]
		i = jsonrpc.SkipSpace(raw, kEnd)
		if i >= len(raw) || raw[i] != ':' {
			return
		}
		i = jsonrpc.SkipSpace(raw, i+1)
		vEnd := jsonrpc.SkipValue(raw, i)
		if vEnd < 0 {
			return
		}
		if !fn(key, raw[i:vEnd]) {
			return
		}
		i = jsonrpc.SkipSpace(raw, vEnd)
		if i >= len(raw) || raw[i] != ',' {
			return
		}
		i = jsonrpc.SkipSpace(raw, i+1)
	}
}

// keyString is a raw (quoted) key as a string, unescaped when it has
// escapes.
func keyString(key []byte) string {
	if len(key) < 2 {
		return ""
	}
	if !bytes.ContainsRune(key, '\\') {
		return string(key[1 : len(key)-1])
	}
	var s string
	if err := json.Unmarshal(key, &s); err != nil {
		return ""
	}
	return s
}

// compactValue is the value's compact JSON text cut to MaxValueLen bytes on
// a rune boundary.
func compactValue(v []byte) (string, bool) {
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
