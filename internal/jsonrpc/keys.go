package jsonrpc

import (
	"bytes"
	"unicode/utf16"
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

// LoneSurrogate reports whether a document WalkStrict accepted escapes an
// unpaired surrogate (`\ud800`, a low half first, a high half before
// anything but its low half) in any string, key or value, at any depth.
// No UTF-8 string carries one, and decoders disagree on it (Go reads
// U+FFFD, JavaScript the surrogate itself, some refuse the document), so a
// reader that must read a document as every other one does refuses it.
// A document without a backslash costs one vectorized scan. On a
// document WalkStrict refuses, the answer means nothing, but it never
// panics: an escape cut short counts as unpaired.
func LoneSurrogate(doc []byte) bool {
	for i := bytes.IndexByte(doc, '\\'); i >= 0; {
		// WalkStrict accepted doc: every backslash starts an escape in a
		// string, `\uXXXX` or two bytes.
		switch {
		case i+1 >= len(doc):
			return true
		case doc[i+1] != 'u':
			i = nextEscape(doc, i+2)
			continue
		case i+6 > len(doc):
			return true
		}
		r := hex4(doc[i+2 : i+6])
		switch {
		case !utf16.IsSurrogate(r):
			i = nextEscape(doc, i+6)
		// DecodeRune pairs a high half with a low one only: a low half
		// first is unpaired too.
		case i+12 > len(doc) || doc[i+6] != '\\' || doc[i+7] != 'u' || utf16.DecodeRune(r, hex4(doc[i+8:i+12])) == utf8.RuneError:
			return true
		default: // a pair
			i = nextEscape(doc, i+12)
		}
	}
	return false
}

// nextEscape is the index of the first backslash of doc at or after i, or
// -1.
func nextEscape(doc []byte, i int) int {
	if j := bytes.IndexByte(doc[i:], '\\'); j >= 0 {
		return i + j
	}
	return -1
}
