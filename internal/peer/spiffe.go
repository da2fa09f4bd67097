package peer

import (
	"errors"
	"strings"
)

// Limits of the SPIFFE ID specification (section 2).
const (
	maxTrustDomain = 255
	maxID          = 2048
)

// ID is a parsed SPIFFE ID: spiffe://TrustDomain/Path.
type ID struct {
	TrustDomain string
	// Path is "" or starts with "/", e.g. "/ns/agents/sa/billing".
	Path string
}

// String is the ID as the URI it was parsed from.
func (id ID) String() string { return "spiffe://" + id.TrustDomain + id.Path }

// Segments are the path's segments, nil for an ID without path.
func (id ID) Segments() []string {
	if id.Path == "" {
		return nil
	}
	return strings.Split(id.Path[1:], "/")
}

var errSPIFFE = errors.New("not a SPIFFE ID")

// ParseID parses a SPIFFE ID strictly, as the SPIFFE ID specification
// (section 2) defines it: the scheme "spiffe" in lower case; a trust domain
// of lower-case letters, digits, '.', '-' and '_' (no port, no user info);
// a path of non-empty segments of letters, digits, '.', '-' and '_', none
// of them "." or "..", without a trailing '/'; no query or fragment. The
// error never quotes the input.
func ParseID(s string) (ID, error) {
	if len(s) > maxID {
		return ID{}, errSPIFFE
	}
	rest, ok := strings.CutPrefix(s, "spiffe://")
	if !ok {
		return ID{}, errSPIFFE
	}
	td, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		td, path = rest[:i], rest[i:]
	}
	if td == "" || len(td) > maxTrustDomain {
		return ID{}, errSPIFFE
	}
	for i := 0; i < len(td); i++ {
		c := td[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_') {
			return ID{}, errSPIFFE
		}
	}
	if path != "" {
		for seg := range strings.SplitSeq(path[1:], "/") {
			if seg == "" || seg == "." || seg == ".." {
				return ID{}, errSPIFFE
			}
			for i := 0; i < len(seg); i++ {
				if !pathChar(seg[i]) {
					return ID{}, errSPIFFE
				}
			}
		}
	}
	return ID{TrustDomain: td, Path: path}, nil
}

func pathChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '-' || c == '_'
}

// pattern is a path pattern of the allow-list: segments that match one
// segment literally or, as "*", any one segment; a final "**" matches any
// number of further segments, none included.
type pattern struct {
	segs []string
	rest bool // ends in "**"
}

func parsePattern(p string) (pattern, error) {
	if p == "/**" {
		return pattern{rest: true}, nil
	}
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return pattern{}, errors.New("a path pattern starts with '/' and does not end with one")
	}
	segs := strings.Split(p[1:], "/")
	var pt pattern
	for i, s := range segs {
		switch {
		case s == "**" && i == len(segs)-1:
			pt.rest = true
			return pt, nil
		case s == "*":
		case s == "" || s == "." || s == ".." || strings.ContainsFunc(s, func(r rune) bool { return r > 0x7f || !pathChar(byte(r)) }):
			return pattern{}, errors.New("a path pattern segment is '*', a final '**', or SPIFFE path characters")
		}
		pt.segs = append(pt.segs, s)
	}
	return pt, nil
}

func (pt pattern) match(segs []string) bool {
	if len(segs) < len(pt.segs) || (!pt.rest && len(segs) != len(pt.segs)) {
		return false
	}
	for i, p := range pt.segs {
		if p != "*" && p != segs[i] {
			return false
		}
	}
	return true
}
