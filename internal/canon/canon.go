// Package canon owns the canonical forms the service compares: request
// paths, hosts and resource URIs. Every front end and the pipeline use it, so
// that a request is matched on exactly one reading of its path and host, and
// a resource rule on exactly one reading of a URI.
//
// The rule is "decide on what the upstream will act on, or refuse". A form
// that every mainstream reader resolves the same way is rewritten to its
// canonical form (host case, percent-encoding hex case, for URIs also empty
// segments, escaped unreserved characters and the file: authority). A form
// that readers resolve differently (dot segments, in request paths and
// resource URIs alike, encoded slashes, path parameters, encoded unreserved
// characters in request paths, trailing host dots) is refused: an error
// means "no canonical form", and the caller answers 400.
//
// The functions return their input unchanged, without allocating, when it
// is already canonical: the check hot path calls them on every request.
package canon

import (
	"errors"
	"net/netip"
	"strings"
	"unicode/utf8"
)

// Reasons a request path, host or URI has no canonical form. The messages
// are fixed and safe to show a client (they never echo the input).
var (
	ErrEmpty             = errors.New("is empty")
	ErrNotOriginForm     = errors.New("is not in origin form (it must start with /)")
	ErrControl           = errors.New("contains control characters or spaces")
	ErrNonASCII          = errors.New("contains bytes that are not ASCII (they must be percent-encoded)")
	ErrFragment          = errors.New("contains a fragment (#)")
	ErrQuery             = errors.New("contains a query (?)")
	ErrBackslash         = errors.New("contains a backslash")
	ErrPathParams        = errors.New("contains path parameters (;)")
	ErrBadEscape         = errors.New("contains an invalid percent-encoding")
	ErrEncodedUnreserved = errors.New("percent-encodes a character that needs no encoding")
	ErrEncodedSlash      = errors.New("contains an encoded slash or backslash (%2F, %5C)")
	ErrEncodedControl    = errors.New("contains an encoded control character (%00-%1F, %7F)")
	ErrEncodedPercent    = errors.New("contains an encoded percent sign (%25), which a reader that decodes twice takes for an escape")
	ErrBadUTF8           = errors.New("percent-encodes bytes that are not UTF-8 (overlong or invalid)")
	ErrEmptySegment      = errors.New("contains an empty path segment (//)")
	ErrDotSegment        = errors.New("contains dot segments")
	ErrHost              = errors.New("is not a host name or IP literal with an optional port")
	ErrTrailingDot       = errors.New("ends in a dot")
	ErrNoScheme          = errors.New("has no scheme")
	ErrUserinfo          = errors.New("carries userinfo (@) in its authority")
	ErrFileHost          = errors.New("names a file: host other than localhost")
	ErrFileRelative      = errors.New("is a file: URI without an absolute path")
	ErrFileQuery         = errors.New("is a file: URI with a query")
)

// Error is a value without a canonical form: What says which value, Err why.
type Error struct {
	What string // "path", "host", "resource URI"
	Err  error
}

func (e *Error) Error() string { return "the " + e.What + " " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Target canonicalises an origin-form request target (":path", a forwarded
// URI): the path is checked and returned with upper-case percent-encoding;
// the query (after "?", without it) is returned as sent. A target is
// refused when readers could take it for another path than the one matched:
//
//   - not starting with "/" (absolute-form "http://h/p", asterisk-form "*");
//   - control bytes, spaces, bytes above 0x7F, "#" anywhere in the target;
//   - in the path: "\\", ";", "//", "." and ".." segments, "%2F", "%5C",
//     "%25" (double encoding), encoded control bytes, invalid escapes, escapes of unreserved
//     characters ("%6D" for "m", "%2E" for "."), escaped bytes that are not
//     UTF-8 (overlong forms such as "%C0%AE").
func Target(target string) (path, query string, err error) {
	if target == "" {
		return "", "", &Error{"path", ErrEmpty}
	}
	if target[0] != '/' {
		return "", "", &Error{"path", ErrNotOriginForm}
	}
	path, query, _ = strings.Cut(target, "?")
	for i := 0; i < len(query); i++ {
		if err := forbiddenByte(query[i]); err != nil {
			return "", "", &Error{"path", err}
		}
	}
	path, err = requestPath(path)
	if err != nil {
		return "", "", &Error{"path", err}
	}
	return path, query, nil
}

// forbiddenByte refuses the bytes no request target may carry anywhere.
func forbiddenByte(c byte) error {
	switch {
	case c <= ' ' || c == 0x7f:
		return ErrControl
	case c >= 0x80:
		return ErrNonASCII
	case c == '#':
		return ErrFragment
	}
	return nil
}

// Path canonicalises a path without a query (a configured path prefix or
// public path) by the rules of Target.
func Path(p string) (string, error) {
	if strings.IndexByte(p, '?') >= 0 {
		return "", &Error{"path", ErrQuery}
	}
	path, _, err := Target(p)
	return path, err
}

// plainPathByte marks the bytes a request path may carry as they are, with
// no further look: unreserved characters and the sub-delimiters other than
// ";", ":" and "@".
var plainPathByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = isUnreserved(byte(c)) || strings.IndexByte("!$&'()*+,=:@", byte(c)) >= 0
	}
	return t
}()

func requestPath(p string) (string, error) {
	lowerHex := false
	segStart := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) && plainPathByte[p[i]] {
			continue
		}
		if i == len(p) || p[i] == '/' {
			switch seg := p[segStart:i]; {
			case seg == "" && i < len(p): // a trailing slash is one empty segment
				return "", ErrEmptySegment
			case seg == "." || seg == "..":
				return "", ErrDotSegment
			}
			segStart = i + 1
			continue
		}
		switch c := p[i]; c {
		case '\\':
			return "", ErrBackslash
		case ';':
			return "", ErrPathParams
		case '%':
			n, lower, err := escapeRun(p[i:], false)
			if err != nil {
				return "", err
			}
			lowerHex = lowerHex || lower
			i += n - 1
		default:
			if err := forbiddenByte(c); err != nil {
				return "", err
			}
		}
	}
	if !lowerHex {
		return p, nil
	}
	return upperHex(p), nil
}

// escapeRun reads the run of percent-escapes at the start of s and returns
// its length. It refuses invalid escapes, encoded slashes and control
// bytes, and escaped bytes above 0x7F that are not UTF-8; decodeUnreserved
// says whether an escaped unreserved character is allowed (a URI, where it
// is decoded by the caller) or refused (a request path).
func escapeRun(s string, decodeUnreserved bool) (n int, lowerHex bool, err error) {
	// Escaped bytes above 0x7F must spell UTF-8, checked one rune at a time.
	var r [utf8.UTFMax]byte
	h := 0
	for n < len(s) && s[n] == '%' {
		if n+3 > len(s) {
			return 0, false, ErrBadEscape
		}
		hi, ok1 := unhex(s[n+1])
		lo, ok2 := unhex(s[n+2])
		if !ok1 || !ok2 {
			return 0, false, ErrBadEscape
		}
		lowerHex = lowerHex || isLowerHex(s[n+1]) || isLowerHex(s[n+2])
		n += 3
		b := hi<<4 | lo
		if b >= 0x80 {
			r[h] = b
			h++
			if utf8.FullRune(r[:h]) {
				if c, size := utf8.DecodeRune(r[:h]); c == utf8.RuneError && size <= 1 || size != h {
					return 0, false, ErrBadUTF8
				}
				h = 0
			}
			continue
		}
		if h > 0 {
			return 0, false, ErrBadUTF8 // a rune cut short
		}
		switch {
		case b < 0x20 || b == 0x7f:
			return 0, false, ErrEncodedControl
		case b == '/' || b == '\\':
			return 0, false, ErrEncodedSlash
		case b == '%':
			return 0, false, ErrEncodedPercent
		case isUnreserved(b) && !decodeUnreserved:
			return 0, false, ErrEncodedUnreserved
		}
	}
	if h > 0 {
		return 0, false, ErrBadUTF8
	}
	return n, lowerHex, nil
}

// upperHex rewrites the hex digits of every escape in s in upper case.
func upperHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = toUpper(b[i+1]), toUpper(b[i+2])
			i += 2
		}
	}
	return string(b)
}

// Host canonicalises a request host (":authority", Host, a forwarded host):
// a DNS name or IPv4 address in lower case, or a bracketed IPv6 literal,
// with an optional port. Empty is allowed (HTTP/1.0). Refused: any other
// character (",", "@", "%", "/", spaces), empty labels, a trailing dot
// ("files.example.test.", which Envoy's virtual hosts do not match to
// "files.example.test" unless told to), a port that is not 1-65535.
func Host(h string) (string, error) {
	if h == "" {
		return "", nil
	}
	name, port := h, ""
	if h[0] == '[' {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", &Error{"host", ErrHost}
		}
		name, port = h[:end+1], h[end+1:]
		a, err := netip.ParseAddr(h[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", &Error{"host", ErrHost}
		}
	} else if i := strings.LastIndexByte(h, ':'); i >= 0 {
		name, port = h[:i], h[i:]
	}
	if port != "" {
		if port[0] != ':' || !validPort(port[1:]) {
			return "", &Error{"host", ErrHost}
		}
	}
	if name == "" || name[0] != '[' {
		if err := hostName(name); err != nil {
			return "", &Error{"host", err}
		}
	}
	for i := 0; i < len(h); i++ {
		if 'A' <= h[i] && h[i] <= 'Z' {
			return strings.ToLower(h), nil
		}
	}
	return h, nil
}

// hostByte classifies host name bytes: 1 a lower-case letter, digit, "-"
// or "_", 2 an upper-case letter; 0 anything else but ".".
var hostByte = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			t[c] = 1
		case 'A' <= c && c <= 'Z':
			t[c] = 2
		}
	}
	return t
}()

func hostName(name string) error {
	if name == "" || len(name) > 253 {
		return ErrHost
	}
	if name[len(name)-1] == '.' {
		return ErrTrailingDot
	}
	start := 0
	for i := 0; i <= len(name); i++ {
		if i < len(name) && hostByte[name[i]] != 0 {
			continue
		}
		if i < len(name) && name[i] != '.' {
			return ErrHost
		}
		if i == start {
			return ErrHost // an empty label
		}
		start = i + 1
	}
	return nil
}

func validPort(p string) bool {
	if p == "" || len(p) > 5 {
		return false
	}
	n := 0
	for i := 0; i < len(p); i++ {
		if p[i] < '0' || p[i] > '9' {
			return false
		}
		n = n*10 + int(p[i]-'0')
	}
	return n >= 1 && n <= 65535
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func isLowerHex(c byte) bool { return 'a' <= c && c <= 'f' }

func toUpper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}
