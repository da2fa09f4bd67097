// Package credential finds the access token in a request: the Authorization
// header (RFC 6750's Bearer or RFC 9449's DPoP scheme, case-insensitive)
// first, then a route's alternative header or cookie (bearer only). It only locates and checks the syntax of the token; it
// never verifies or logs it.
package credential

import (
	"errors"
	"net/url"
	"strings"
)

// MaxTokenSize bounds a token; larger ones are refused before any parsing.
const MaxTokenSize = 16 << 10

// Errors a caller turns into denials.
var (
	ErrMissing   = errors.New("no bearer token")
	ErrMalformed = errors.New("malformed bearer token")
	ErrTooLarge  = errors.New("bearer token too large")
)

// Source says where else a route accepts the token.
type Source struct {
	Header string // lower-case header name holding the bare token or "Bearer <token>"
	Cookie string // cookie name holding the bare token
}

// Headers reads a lower-case request header.
type Headers interface {
	Get(name string) string
}

// Scheme is how the token was presented.
type Scheme uint8

const (
	Bearer Scheme = iota // RFC 6750: whoever holds it may use it
	DPoP                 // RFC 9449: with a proof of the key it is bound to
)

// Place is where Find found the token: what may be read there can depend
// on it (an API-key issuer's header holds API keys).
type Place uint8

const (
	InAuthorization Place = iota
	InHeader              // the Source's header
	InCookie              // the Source's cookie
)

// Find returns the token, its scheme and where it was, bounded in size but not yet checked against the
// b64token syntax: Syntax does that, and callers run it before they verify
// a token they have not seen before (a token answered from a cache of
// verified ones passed it already, which keeps the hot path from scanning
// every byte twice). A present but unusable Authorization header is an
// error, not a reason to look elsewhere: the header always wins.
func Find(h Headers, src Source) (string, Scheme, Place, error) {
	if v := h.Get("authorization"); v != "" {
		if tok, ok := parseScheme(v, "bearer"); ok {
			tok, err := check(tok)
			return tok, Bearer, InAuthorization, err
		}
		if tok, ok := parseScheme(v, "dpop"); ok {
			tok, err := check(tok)
			return tok, DPoP, InAuthorization, err
		}
		return "", Bearer, InAuthorization, ErrMissing // another scheme (Basic, ...): not ours
	}
	if src.Header != "" {
		if v := strings.TrimSpace(h.Get(src.Header)); v != "" {
			if tok, ok := parseScheme(v, "bearer"); ok {
				v = tok
			}
			tok, err := check(v)
			return tok, Bearer, InHeader, err
		}
	}
	if src.Cookie != "" {
		if v, ok := cookie(h.Get("cookie"), src.Cookie); ok {
			tok, err := check(v)
			return tok, Bearer, InCookie, err
		}
	}
	return "", Bearer, InAuthorization, ErrMissing
}

// Elsewhere reports whether a place a credential is read from (the
// Authorization header, src's header and cookie) holds one other than
// token, the one Find took: where the request goes upstream with its
// credentials, the upstream may read that one instead.
func Elsewhere(h Headers, src Source, token string) bool {
	if src.Header == "" && src.Cookie == "" {
		return false // Authorization is the only place, and token is its
	}
	// other compares a place's value, with its scheme if any, as Find
	// reads it (parseScheme leaves no space before the token).
	other := func(v string) bool {
		v = strings.TrimSpace(v)
		if t, ok := parseScheme(v, "bearer"); ok {
			v = t
		} else if t, ok := parseScheme(v, "dpop"); ok {
			v = t
		}
		return v != token
	}
	if v := h.Get("authorization"); v != "" && other(v) {
		return true
	}
	if src.Header != "" {
		if v := h.Get(src.Header); strings.TrimSpace(v) != "" && other(v) {
			return true
		}
	}
	if src.Cookie != "" {
		if v, ok := cookie(h.Get("cookie"), src.Cookie); ok && other(v) {
			return true
		}
	}
	return false
}

// Places names the places src adds to Authorization, for a refusal.
func (src Source) Places() string {
	var places []string
	if src.Header != "" {
		places = append(places, "the "+src.Header+" header")
	}
	if src.Cookie != "" {
		places = append(places, "the "+src.Cookie+" cookie")
	}
	return strings.Join(places, ", ")
}

// parseScheme splits "<scheme> <token>", the lower-case scheme matched
// case-insensitively.
func parseScheme(v, scheme string) (string, bool) {
	if len(v) < len(scheme)+1 || !strings.EqualFold(v[:len(scheme)], scheme) || (v[len(scheme)] != ' ' && v[len(scheme)] != '\t') {
		return "", false
	}
	return strings.TrimLeft(v[len(scheme):], " \t"), true
}

// Check validates a token found elsewhere (for example inside a JSON-RPC
// body) with the same size and syntax rules as a header token.
func Check(tok string) (string, error) {
	tok, err := check(tok)
	if err != nil {
		return "", err
	}
	return tok, Syntax(tok)
}

// check enforces presence and the size bound.
func check(tok string) (string, error) {
	tok = strings.TrimRight(tok, " \t")
	if tok == "" {
		return "", ErrMalformed
	}
	if len(tok) > MaxTokenSize {
		return "", ErrTooLarge
	}
	return tok, nil
}

// Syntax checks the RFC 6750 b64token syntax:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
//
// Every token never seen before goes through here, a JWT of several
// hundred bytes: the body of the token is looked up eight bytes at a time,
// one branch for all eight, and only the block holding its end (the first
// byte outside the set, a "=" or anything else) byte by byte.
func Syntax(tok string) error {
	i := 0
	for ; i+8 <= len(tok); i += 8 {
		w := tok[i : i+8]
		if b64token[w[0]]&b64token[w[1]]&b64token[w[2]]&b64token[w[3]]&
			b64token[w[4]]&b64token[w[5]]&b64token[w[6]]&b64token[w[7]] == 0 {
			break
		}
	}
	for i < len(tok) && b64token[tok[i]] != 0 {
		i++
	}
	body := i // the grammar asks for at least one character before "="
	for i < len(tok) && tok[i] == '=' {
		i++
	}
	if i != len(tok) || body == 0 {
		return ErrMalformed
	}
	return nil
}

// b64token is 1 for the characters of RFC 6750's b64token other than "=",
// 0 for every other byte.
var b64token = func() (t [256]uint8) {
	for c := range 256 {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~+/", byte(c)) >= 0 {
			t[c] = 1
		}
	}
	return t
}()

// cookie finds name in a Cookie header.
func cookie(header, name string) (value string, found bool) {
	CookiePairs(header, func(k, pair string) {
		if _, v, ok := strings.Cut(pair, "="); ok && !found && CookieNamed(k, name) {
			value, found = strings.Trim(v, `"`), true
		}
	})
	return value, found
}

// CookiePairs calls fn with each name=value pair of a Cookie header, in
// order, the name without the white space around it (as Go's net/http,
// Node's cookie and Python's http.cookies read it: "at =x" is a cookie
// "at"); names are case-sensitive (RFC 6265). Pairs are separated by ";"
// (Envoy joins repeated Cookie headers with "; ") and by "," (a front end
// that joins them as any other header; a cookie value never holds either).
func CookiePairs(header string, fn func(name, pair string)) {
	for header != "" {
		var part string
		if i := strings.IndexAny(header, ";,"); i >= 0 {
			part, header = header[:i], header[i+1:]
		} else {
			part, header = header, ""
		}
		part = strings.TrimSpace(part)
		name, _, _ := strings.Cut(part, "=")
		fn(strings.TrimSpace(name), part)
	}
}

// CookieNamed reports whether a Cookie pair's name (from CookiePairs) is
// the cookie want as some mainstream upstream reads it: the same name, or
// one PHP takes for it (it percent-decodes names and turns ".", " ", "+"
// and "[" into "_": "a%74", "access.token"). A credential cookie is found,
// counted and stripped by this, so that no spelling of it reaches an
// upstream unchecked.
func CookieNamed(name, want string) bool {
	return name == want || lenientCookieName(name) == lenientCookieName(want)
}

// MayNameCookie reports whether a Cookie header may hold a pair
// CookieNamed want, without reading its pairs: false only when no
// spelling of want can be in it.
func MayNameCookie(header, want string) bool {
	return strings.Contains(header, want) || strings.IndexByte(header, '%') >= 0 ||
		strings.ContainsAny(want, phpUnderscores) && strings.ContainsAny(header, phpUnderscores)
}

// phpUnderscores are the characters PHP reads as "_" in a cookie name,
// "_" among them ("+" is a space once decoded).
const phpUnderscores = "_.[ +"

// lenientCookieName is a cookie name as PHP reads it: percent-decoded
// ("+" a space), ".", " " and "[" as "_".
func lenientCookieName(s string) string {
	if strings.IndexByte(s, '%') >= 0 {
		if u, err := url.QueryUnescape(s); err == nil {
			s = u
		}
	}
	return strings.Map(func(r rune) rune {
		if r < 0x80 && strings.IndexByte(phpUnderscores, byte(r)) >= 0 {
			return '_'
		}
		return r
	}, s)
}
