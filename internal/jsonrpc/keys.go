package jsonrpc

import (
	"bytes"
	"unicode/utf8"
)

// KeyIs reports whether an object key (unescaped, as WalkStrict hands it)
// is want, and whether it equals want only under Unicode case folding:
// some decoders (Go's encoding/json) read such a key as that member,
// others do not, so a reader of a member must refuse a document where
// ambiguous is true.
func KeyIs(key []byte, want string) (is, ambiguous bool) {
	if string(key) == want {
		return true, false
	}
	// Folding maps at most one byte to three (K, U+212A, is k), never
	// fewer: only keys of these lengths can fold onto want.
	if len(want) == 0 || len(key) < len(want) || len(key) > 3*len(want) {
		return false, false
	}
	// Two ASCII first bytes fold onto each other only as one letter in
	// either case: most keys end here.
	if c, w := key[0], want[0]; c < utf8.RuneSelf && w < utf8.RuneSelf && lowerASCII(c) != lowerASCII(w) {
		return false, false
	}
	return false, bytes.EqualFold(key, []byte(want))
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// StringValue decodes a JSON string token (quotes included) that
// WalkStrict accepted. ok is false when it is not a string, or when it
// holds an escaped lone surrogate, which decoders read differently (Go
// as U+FFFD, JavaScript as the surrogate itself).
func StringValue(raw []byte) (s string, ok bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	in := raw[1 : len(raw)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return string(in), true
	}
	out, ok := unescape(make([]byte, 0, len(in)), in)
	return string(out), ok
}
