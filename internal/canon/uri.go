package canon

import (
	"strings"
	"unicode/utf8"
)

// URI canonicalises a resource URI (MCP resources/read, subscribe,
// unsubscribe) for matching resource rules, following RFC 3986 section 6
// and refusing what readers resolve differently:
//
//   - the scheme is lower-cased ("FILE:" is "file:");
//   - the host is lower-cased (Host rules; userinfo is refused);
//   - for file: the authority is empty or "localhost", written as empty,
//     and a missing authority is the same ("file:/etc/passwd",
//     "file://localhost/etc/passwd" and "file:///etc/passwd" are one URI);
//     any other host, a relative path or a query is refused;
//   - percent-encoded unreserved characters are decoded ("%65" is "e"),
//     other escapes are kept with upper-case hex, characters above 0x7F are
//     percent-encoded as UTF-8; "%2F", "%5C", "%25" (which a reader that
//     decodes twice takes for an escape), encoded control bytes,
//     invalid escapes and escaped bytes that are not UTF-8 are refused;
//   - in a hierarchical path, empty segments are collapsed ("////etc" is
//     "/etc"); an empty http(s) path is "/";
//   - a "." or ".." segment, also encoded ("%2e%2E"), is refused: removing
//     it textually ("/var/run/../etc" is "/var/etc") names another file
//     than the server opens when a segment before it is a symbolic link
//     (/var/run is often ../run, and open() reads /etc), and no rule on
//     the URI can see that;
//   - control bytes, spaces, backslashes, invalid UTF-8 and a fragment are
//     refused.
//
// The path keeps its case: on a case-insensitive file system
// "file:///ETC/passwd" names /etc/passwd, which no rule on the URI can see.
func URI(s string) (string, error) {
	out, err := uri(s, false)
	if err != nil {
		return "", &Error{"resource URI", err}
	}
	return out, nil
}

// URIPattern canonicalises a rule's glob on resource URIs the way URI
// canonicalises the URIs it is matched against, with "*" and "?" kept as
// glob characters ("?" is never a query delimiter in a pattern). ok is
// false when pattern is not a URI pattern (it has no scheme, like "*" or
// "*secret*"): such a glob is matched as written against canonical URIs.
func URIPattern(pattern string) (canonical string, ok bool, err error) {
	if schemeEnd(pattern) < 0 {
		return pattern, false, nil
	}
	out, err := uri(pattern, true)
	if err != nil {
		return "", true, &Error{"resource URI pattern", err}
	}
	return out, true, nil
}

// schemeEnd is the index of the ":" ending s's scheme, or -1.
func schemeEnd(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		case i > 0 && c == ':':
			return i
		default:
			return -1
		}
	}
	return -1
}

func uri(s string, glob bool) (string, error) {
	if s == "" {
		return "", ErrEmpty
	}
	if !utf8.ValidString(s) {
		return "", ErrBadUTF8
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c <= ' ' || c == 0x7f:
			return "", ErrControl
		case c == '\\':
			return "", ErrBackslash
		case c == '#':
			return "", ErrFragment
		}
	}
	colon := schemeEnd(s)
	if colon < 0 {
		return "", ErrNoScheme
	}
	scheme, rest := strings.ToLower(s[:colon]), s[colon+1:]
	var query string
	hasQuery := false
	if !glob {
		rest, query, hasQuery = strings.Cut(rest, "?")
	}
	var authority string
	hasAuthority := strings.HasPrefix(rest, "//")
	if hasAuthority {
		rest = rest[2:]
		end := strings.IndexByte(rest, '/')
		if end < 0 {
			end = len(rest)
		}
		authority, rest = rest[:end], rest[end:]
		if strings.IndexByte(authority, '@') >= 0 {
			return "", ErrUserinfo
		}
		var err error
		if authority, err = uriHost(authority, glob); err != nil {
			return "", err
		}
	}
	if scheme == "file" {
		switch {
		case authority != "" && authority != "localhost":
			return "", ErrFileHost
		case !strings.HasPrefix(rest, "/"):
			return "", ErrFileRelative
		case hasQuery:
			return "", ErrFileQuery
		}
		authority, hasAuthority = "", true
	}

	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(scheme)
	b.WriteByte(':')
	if hasAuthority {
		b.WriteString("//")
		b.WriteString(authority)
	}
	switch {
	case strings.HasPrefix(rest, "/"):
		path, err := hierarchicalPath(rest)
		if err != nil {
			return "", err
		}
		b.WriteString(path)
	case hasAuthority && rest == "" && (scheme == "http" || scheme == "https"):
		b.WriteByte('/')
	default:
		// A rootless path (urn:, mailto:, custom schemes): escapes are
		// normalised, and a dot segment, which some readers resolve and
		// others do not, is refused.
		var dec strings.Builder
		if err := writeEscaped(&dec, rest); err != nil {
			return "", err
		}
		for _, seg := range strings.Split(dec.String(), "/") {
			if seg == "." || seg == ".." {
				return "", ErrDotSegment
			}
		}
		b.WriteString(dec.String())
	}
	if hasQuery {
		b.WriteByte('?')
		if err := writeEscaped(&b, query); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// uriHost canonicalises a URI's authority; in a pattern "*" and "?" may
// stand for host characters.
func uriHost(authority string, glob bool) (string, error) {
	if authority == "" {
		return "", nil
	}
	if glob && strings.ContainsAny(authority, "*?") {
		return strings.ToLower(authority), nil
	}
	h, err := Host(authority)
	if err != nil {
		return "", err.(*Error).Err
	}
	return h, nil
}

// hierarchicalPath decodes escaped unreserved characters, then collapses
// empty segments and refuses dot segments. A trailing slash stays.
func hierarchicalPath(p string) (string, error) {
	var dec strings.Builder
	if err := writeEscaped(&dec, p); err != nil {
		return "", err
	}
	segs := strings.Split(dec.String()[1:], "/")
	out := make([]string, 0, len(segs))
	trailing := false
	for i, seg := range segs {
		switch seg {
		case "":
			trailing = i == len(segs)-1
		case ".", "..":
			return "", ErrDotSegment
		default:
			out = append(out, seg)
			trailing = false
		}
	}
	path := "/" + strings.Join(out, "/")
	if trailing && len(out) > 0 {
		path += "/"
	}
	return path, nil
}

// writeEscaped writes s with escaped unreserved characters decoded, other
// escapes in upper-case hex and characters above 0x7F percent-encoded.
func writeEscaped(b *strings.Builder, s string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%':
			n, _, err := escapeRun(s[i:], true)
			if err != nil {
				return err
			}
			for j := i; j < i+n; j += 3 {
				hi, _ := unhex(s[j+1])
				lo, _ := unhex(s[j+2])
				if d := hi<<4 | lo; isUnreserved(d) {
					b.WriteByte(d)
				} else {
					b.WriteByte('%')
					b.WriteByte(toUpper(s[j+1]))
					b.WriteByte(toUpper(s[j+2]))
				}
			}
			i += n - 1
		case c >= 0x80:
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	return nil
}
