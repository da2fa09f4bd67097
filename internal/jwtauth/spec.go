package jwtauth

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/discovery"
)

// IssuerSpec is one trusted token issuer: what its tokens must look like and
// where its keys come from. Exactly one key source is set: Secret, JWKSURL,
// JWKSFile or Discovery.
type IssuerSpec struct {
	// Name identifies the issuer in configuration, logs and Claims, and is
	// what a route's allow-list names.
	Name string
	// Issuer is the expected "iss". Empty accepts any iss, or none: meant
	// only for the built-in development default. Tokens are matched to exact
	// issuers before such catch-alls.
	Issuer string
	// Algorithms is the allow-list of JWS algorithms. Empty means HS256 for
	// a Secret and RS256, ES256 for the other sources. HMAC algorithms are
	// only allowed with a Secret and asymmetric ones only without.
	Algorithms []string
	// Secret is an HMAC key of at least 32 bytes.
	Secret []byte
	// JWKSURL is a remote JWK set.
	JWKSURL string
	// JWKSFile is a local JWK set file, re-read at every refresh.
	JWKSFile string
	// Discovery finds the JWK set through the issuer's metadata: RFC 8414
	// .well-known/oauth-authorization-server, then OpenID Connect
	// {Issuer}/.well-known/openid-configuration (package discovery).
	Discovery bool
	// Leeway is the clock skew allowed when checking exp, nbf and iat.
	Leeway time.Duration
	// Type, when set, is the required JOSE "typ" header, e.g. "at+jwt";
	// compared case-insensitively and with or without "application/".
	Type string
	// RefreshInterval is how often a key set is refreshed in the
	// background; default 5m.
	RefreshInterval time.Duration
	// UnknownKIDInterval is the minimum time between key set refetches
	// triggered by tokens the current set has no key for; default 30s.
	UnknownKIDInterval time.Duration
}

const (
	defaultRefreshInterval    = 5 * time.Minute
	defaultUnknownKIDInterval = 30 * time.Second
)

// issuer is a validated, compiled IssuerSpec.
type issuer struct {
	name   string
	iss    string // "" for a catch-all
	algs   algSet
	secret []byte // HMAC issuers; nil for key set issuers
	// hmacs are secret's keyed hashers, reused across tokens.
	hmacs  *hmacPools
	keys   *keySource // key set issuers
	leeway time.Duration
	typ    string // normalized required typ, "" for none
}

// compile validates spec's semantics; errors name the issuer.
func compile(spec IssuerSpec) (*issuer, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("issuer %q: %s", spec.Name, fmt.Sprintf(format, args...))
	}
	if spec.Name == "" {
		return nil, fmt.Errorf("issuer %q: name is required", spec.Issuer)
	}
	sources := 0
	for _, set := range []bool{len(spec.Secret) > 0, spec.JWKSURL != "", spec.JWKSFile != "", spec.Discovery} {
		if set {
			sources++
		}
	}
	if sources != 1 {
		return nil, fail("exactly one of secret, JWKS URL, JWKS file and discovery is required, %d given", sources)
	}
	family := familyHMAC
	if len(spec.Secret) == 0 {
		family = 0 // any asymmetric family
	}
	is := &issuer{
		name:   spec.Name,
		iss:    spec.Issuer,
		leeway: spec.Leeway,
		typ:    normalizeType(spec.Type),
	}
	names := spec.Algorithms
	if len(names) == 0 {
		names = []string{"RS256", "ES256"}
		if family == familyHMAC {
			names = []string{"HS256"}
		}
	}
	for _, name := range names {
		a, ok := algorithmsByName[name]
		if !ok {
			return nil, fail("algorithm %q is not supported", name)
		}
		if (family == familyHMAC) != (a.family == familyHMAC) {
			if family == familyHMAC {
				return nil, fail("algorithm %s needs a key set, not a secret", name)
			}
			return nil, fail("algorithm %s needs a secret, not a key set", name)
		}
		is.algs |= a.bit
	}
	if family == familyHMAC {
		if len(spec.Secret) < minSecretLen {
			return nil, fail("secret is %d bytes, at least %d are required", len(spec.Secret), minSecretLen)
		}
		is.secret = bytes.Clone(spec.Secret) // the caller's slice may change later
		is.hmacs = newHMACPools(is.secret)
	}
	if spec.Leeway < 0 {
		return nil, fail("leeway must not be negative")
	}
	if spec.RefreshInterval < 0 || spec.UnknownKIDInterval < 0 {
		return nil, fail("refresh intervals must not be negative")
	}
	if spec.JWKSURL != "" {
		if err := discovery.CheckHTTPURL(spec.JWKSURL); err != nil {
			return nil, fail("JWKS URL: %v", err)
		}
	}
	if spec.Discovery {
		if spec.Issuer == "" {
			return nil, fail("discovery needs the issuer URL")
		}
		if err := discovery.CheckHTTPURL(spec.Issuer); err != nil {
			return nil, fail("discovery: issuer: %v", err)
		}
		if u, _ := url.Parse(spec.Issuer); u.RawQuery != "" || u.Fragment != "" {
			return nil, fail("discovery: issuer URL must not have a query or fragment")
		}
	}
	return is, nil
}

// normalizeType lower-cases a JOSE typ and drops the optional
// "application/" prefix (RFC 7515 section 4.1.9).
func normalizeType(t string) string {
	t = strings.ToLower(t)
	if rest, ok := strings.CutPrefix(t, "application/"); ok {
		return rest
	}
	return t
}

// typeMatches compares a token's typ to a normalized required one without
// allocating.
func typeMatches(got, want string) bool {
	if len(got) > len("application/") && strings.EqualFold(got[:len("application/")], "application/") {
		got = got[len("application/"):]
	}
	return strings.EqualFold(got, want)
}

// compileAll compiles specs and checks names are unique, reporting every
// problem at once.
func compileAll(specs []IssuerSpec) ([]*issuer, error) {
	if len(specs) == 0 {
		return nil, errors.New("no issuers configured")
	}
	var (
		errs   []error
		out    = make([]*issuer, 0, len(specs))
		byName = make(map[string]bool, len(specs))
	)
	for _, spec := range specs {
		is, err := compile(spec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if byName[is.name] {
			errs = append(errs, fmt.Errorf("issuer %q: name is used twice", is.name))
			continue
		}
		byName[is.name] = true
		out = append(out, is)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
