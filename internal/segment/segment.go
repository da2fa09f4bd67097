// Package segment decides whether an identity value (a user or session id
// the service sets upstream) is safe to use as one path segment, and
// encodes values that are not, reversibly.
//
// Workloads build paths from identity headers (data/workspaces/{user}/
// {session}/). A value is a safe single path segment when no common consumer
// can read it as more or less than one segment of a POSIX path or a URL
// path: it is not empty, not made of dots (".", "..", "...") and spaces,
// holds no "/", "\", "%" (a consumer may percent-decode "%2e%2e" or
// "%2f"), no control character, is valid UTF-8, and its Unicode
// compatibility form (NFKC, which turns "．．" into "..") passes the same
// test.
//
// Encode maps every value to a safe one, one to one: a safe value that does
// not start with "~" is kept as it is; any other value becomes "~" followed
// by the unpadded base64url (RFC 4648 section 5) encoding of its bytes.
// Decode inverts it.
//
// Padded tells whether a value starts or ends with white space that a
// reader may trim, so that it would reach a workload as another value.
package segment

import (
	"encoding/base64"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Marker starts every encoded value.
const Marker = "~"

// Check reports why v is not a safe single path segment, or "" when it is.
func Check(v string) string {
	if why := check(v); why != "" {
		return why
	}
	if !norm.NFKC.IsNormalString(v) {
		if why := check(norm.NFKC.String(v)); why != "" {
			return why + " (after Unicode compatibility normalization)"
		}
	}
	return ""
}

func check(v string) string {
	switch {
	case v == "":
		return "it is empty"
	case strings.Trim(v, ". ") == "":
		return "it is made of dots"
	case !utf8.ValidString(v):
		return "it is not valid UTF-8"
	case strings.ContainsAny(v, `/\`):
		return "it contains a slash"
	case strings.Contains(v, "%"):
		return "it contains a percent sign"
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return "it contains a control character"
		}
	}
	return ""
}

// Padded reports whether v starts or ends with white space that a reader
// may trim: HTTP trims the spaces around a header value (" bob" arrives as
// "bob"), and workloads trim the values they read (Python's strip, Go's
// strings.TrimSpace: Unicode white space, "bob\u00a0"; JavaScript's trim:
// the byte order mark too). An identity or id that is padded would reach
// them as another one.
func Padded(v string) bool {
	if v == "" {
		return false
	}
	first, _ := utf8.DecodeRuneInString(v)
	last, _ := utf8.DecodeLastRuneInString(v)
	return trimmed(first) || trimmed(last)
}

func trimmed(r rune) bool { return unicode.IsSpace(r) || r == '\ufeff' }

// Safe reports whether v is a safe single path segment.
func Safe(v string) bool { return Check(v) == "" }

// Encode returns v when it is safe and does not start with Marker, else
// Marker and v in unpadded base64url. The result is always safe.
func Encode(v string) string {
	if !strings.HasPrefix(v, Marker) && Safe(v) {
		return v
	}
	return Marker + base64.RawURLEncoding.EncodeToString([]byte(v))
}
