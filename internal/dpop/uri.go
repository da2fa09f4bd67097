package dpop

import (
	"strings"

	"github.com/extauthz/extauthz/internal/canon"
)

// A proof names the request's URI (htu) without query and fragment, and
// RFC 9449 section 4.3 compares it after syntax- and scheme-based
// normalization (RFC 3986 sections 6.2.2 and 6.2.3). Both sides are read
// here by one function, with the canonical forms the service matches
// requests on (package canon): scheme and host lower-cased, the scheme's
// default port dropped, an empty path "/", percent-encoding hex upper-cased.
// What canon refuses in a request path (dot segments, "//", encoded
// slashes or unreserved characters, a fragment) a proof may not name
// either: a client that spells its URL so is refused, closed, rather than
// compared on a reading the upstream may not share. Userinfo, another
// scheme or no host match nothing.

// NormalizeURI normalizes an htu; ok is false when it is not an absolute
// http or https URI in canonical reach.
func NormalizeURI(uri string) (string, bool) {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "", false
	}
	authority, target := rest, ""
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, target = rest[:i], rest[i:]
	}
	return requestURI(scheme, authority, target)
}

// requestURI is the normalized URI of a request to host for target (a
// path and query; the query is dropped) by scheme.
func requestURI(scheme, host, target string) (string, bool) {
	scheme = strings.ToLower(scheme)
	if scheme != "http" && scheme != "https" {
		return "", false
	}
	switch {
	case target == "":
		target = "/"
	case target[0] == '?':
		target = "/" + target
	}
	path, _, err := canon.Target(target)
	if err != nil {
		return "", false
	}
	h, err := canon.Host(host)
	if err != nil || h == "" {
		return "", false
	}
	if scheme == "https" {
		h = strings.TrimSuffix(h, ":443")
	} else {
		h = strings.TrimSuffix(h, ":80")
	}
	return scheme + "://" + h + path, true
}
