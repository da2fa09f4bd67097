package dpop

import (
	"net/netip"
	"strings"
)

// A proof names the request's URI (htu) without query and fragment, and
// RFC 9449 section 4.3 compares it after syntax- and scheme-based
// normalization (RFC 3986 sections 6.2.2 and 6.2.3). Both sides are
// normalized here by one function: scheme and host lower-cased, the
// scheme's default port and an empty path spelled as they would be
// without them, percent-encodings of unreserved characters decoded and the
// others' hex upper-cased. Dot segments are not resolved: a proof or a
// request holding one is compared as written, and a proof made for
// another spelling fails, closed. Anything but plain http(s) URI syntax
// (userinfo, bytes outside the grammar, a broken escape) matches nothing.

// NormalizeURI normalizes an htu; ok is false when it is not an absolute
// http or https URI.
func NormalizeURI(uri string) (string, bool) {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "", false
	}
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		if !validTail(rest[i:]) {
			return "", false
		}
		rest = rest[:i]
	}
	host, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host, path = rest[:i], rest[i:]
	}
	return requestURI(scheme, host, path)
}

// requestURI is the normalized URI of a request to host and path (its
// query is dropped) by scheme.
func requestURI(scheme, host, path string) (string, bool) {
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	h, ok := normalizeHost(scheme, host)
	if !ok {
		return "", false
	}
	p, ok := normalizePath(path)
	if !ok {
		return "", false
	}
	return scheme + "://" + h + p, true
}

// normalizeHost lower-cases host and drops the scheme's default port. A
// host is a registered name, an IPv4 address or a bracketed IPv6 one; no
// userinfo, no empty host.
func normalizeHost(scheme, host string) (string, bool) {
	name, port := host, ""
	if strings.HasPrefix(host, "[") {
		end := strings.IndexByte(host, ']')
		if end < 0 {
			return "", false
		}
		name, port = host[:end+1], host[end+1:]
		if port != "" && port[0] != ':' {
			return "", false
		}
	} else if i := strings.LastIndexByte(host, ':'); i >= 0 {
		name, port = host[:i], host[i:]
	}
	if name == "" {
		return "", false
	}
	if name[0] == '[' {
		addr, err := netip.ParseAddr(name[1 : len(name)-1])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return "", false
		}
		name = "[" + addr.String() + "]"
	}
	allowed := "!$&'()*+,;=" // a registered name's sub-delims
	if name[0] == '[' {
		allowed = "[]:" // an IPv6 address
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !unreserved(c) && strings.IndexByte(allowed, c) < 0 {
			return "", false // userinfo's "@", "%", spaces, non-ASCII
		}
	}
	if port != "" {
		digits := port[1:]
		for i := 0; i < len(digits); i++ {
			if digits[i] < '0' || digits[i] > '9' {
				return "", false
			}
		}
		if digits == "" || scheme == "http" && digits == "80" || scheme == "https" && digits == "443" {
			port = ""
		}
	}
	return strings.ToLower(name) + port, true
}

// normalizePath checks path against RFC 3986's path-abempty and
// normalizes its percent-encodings; an empty path is "/".
func normalizePath(path string) (string, bool) {
	if path == "" {
		return "/", true
	}
	if path[0] != '/' {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(path))
	for i := 0; i < len(path); i++ {
		c := path[i]
		switch {
		case c == '%':
			if i+2 >= len(path) || !isHex(path[i+1]) || !isHex(path[i+2]) {
				return "", false
			}
			v := unhex(path[i+1])<<4 | unhex(path[i+2])
			if unreserved(v) {
				b.WriteByte(v)
			} else {
				b.WriteByte('%')
				b.WriteByte(upper(path[i+1]))
				b.WriteByte(upper(path[i+2]))
			}
			i += 2
		case unreserved(c) || strings.IndexByte("!$&'()*+,;=:@/", c) >= 0:
			b.WriteByte(c)
		default:
			return "", false
		}
	}
	return b.String(), true
}

// validTail reports whether the query and fragment an htu carries (and
// the comparison ignores) are within RFC 3986's grammar: a proof that
// net/url or another verifier would refuse is refused here too.
func validTail(tail string) bool {
	fragment := false
	for i := 0; i < len(tail); i++ {
		switch c := tail[i]; {
		case c == '%':
			if i+2 >= len(tail) || !isHex(tail[i+1]) || !isHex(tail[i+2]) {
				return false
			}
			i += 2
		case c == '#':
			if fragment {
				return false
			}
			fragment = true
		case unreserved(c) || strings.IndexByte("!$&'()*+,;=:@/?", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'f' {
		return c - 'a' + 'A'
	}
	return c
}
