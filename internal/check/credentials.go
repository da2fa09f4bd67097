package check

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/introspect"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/oauthclient"
	"github.com/extauthz/extauthz/internal/peer"
	"github.com/extauthz/extauthz/internal/secrets"
)

// apiKeyPoll is how often API-key files are looked at.
const apiKeyPoll = time.Second

// credentialVerifier is a policy's TokenVerifier: the credential chooses
// the kind of issuer, never the client's claim of which issuer it is
// (docs/credentials.md):
//
//  1. an "ek_" key goes to the route's API-key issuers only;
//  2. a JWT goes to the route's JWT issuers, unless the route's
//     introspection issuer introspects JWTs too (always) or the route
//     has no JWT issuer;
//  3. anything else goes to the route's one introspection issuer.
type credentialVerifier struct {
	jwt    TokenVerifier // nil without JWT issuers
	kinds  map[string]string
	intro  map[string]*introspect.Introspector
	always map[string]bool
	keys   map[string]*apikey.Store
	// revoked are the revoked API keys (Deps.APIKeyRevocations), never nil.
	revoked *apikey.Revocations
	peers   map[string]*peer.Policy
	// observe is Deps.OnCredential, never nil.
	observe func(kind, outcome string)
	// closers release the key sets of RFC 9701 answers.
	closers []func()
}

// dependencyError is a verification that could not be made: a broken
// dependency (an introspection endpoint down, API keys being reloaded), not
// a property of the credential, so never cached. It says why and when to
// retry, for the 503.
type dependencyError struct {
	desc       string
	retryAfter time.Duration
	err        error
}

// errKeyHeaderJWT refuses a JWT read from an API-key header on a route
// that introspects its JWTs.
var errKeyHeaderJWT = errors.New("the API-key header holds a token this route introspects: send it in Authorization")

func (e *dependencyError) Error() string { return e.desc }
func (e *dependencyError) Unwrap() error { return e.err }

// Verify verifies token on route r with the issuer its kind chooses, and
// counts the outcome by kind.
func (c *credentialVerifier) Verify(ctx context.Context, token string, r *Route, inKeyHeader bool) (*jwtauth.Claims, error) {
	kind, claims, err := c.verify(ctx, token, r, inKeyHeader, false)
	c.observe(kind, outcomeOf(err))
	return claims, err
}

// VerifyNoStore is Verify for Explain: an introspection answer is read
// from the cache or asked for without being cached
// (introspect.Introspector.IntrospectNoStore), and nothing is counted.
func (c *credentialVerifier) VerifyNoStore(ctx context.Context, token string, r *Route, inKeyHeader bool) (*jwtauth.Claims, error) {
	_, claims, err := c.verify(ctx, token, r, inKeyHeader, true)
	return claims, err
}

// outcomeOf names a verification's outcome for metrics.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, jwtauth.ErrKeysUnavailable), errors.As(err, new(*dependencyError)):
		return "unavailable"
	}
	return "denied"
}

// verify verifies token and says which kind of issuer judged it; noStore
// leaves the introspection cache as it is. A token read from the route's
// API-key header (inKeyHeader) is never introspected: what a client puts
// there is meant as a key, and a mistyped one is its owner's secret.
func (c *credentialVerifier) verify(ctx context.Context, token string, r *Route, inKeyHeader, noStore bool) (string, *jwtauth.Claims, error) {
	issuers, audiences := r.issuers, r.audiences
	if strings.HasPrefix(token, apikey.Prefix) {
		claims, err := c.apiKey(ctx, token, issuers, r.Name, audiences)
		return "api_keys", claims, err
	}
	isJWT := looksLikeJWT(token)
	if !isJWT {
		// A key without the prefix (a human-chosen <id>.<secret>, a plain
		// key kept from before): the route's key issuers know it, and it
		// must never go on to an introspection endpoint. An id on file
		// with another secret is refused here (apikey.ErrWrongSecret); an
		// unknown one may be an opaque token.
		claims, err := c.apiKey(ctx, token, issuers, r.Name, audiences)
		if inKeyHeader || !errors.Is(err, apikey.ErrUnknownKey) && !errors.Is(err, apikey.ErrMalformed) {
			return "api_keys", claims, err
		}
	}
	var in *introspect.Introspector
	always := false
	onlyJWT := true
	for _, n := range issuers {
		switch c.kinds[n] {
		case "jwt":
			continue
		case "introspection":
			in, always = c.intro[n], c.always[n]
		}
		onlyJWT = false
	}
	jwtIssuers := issuers // nearly always every one of them: no copy then
	if !onlyJWT {
		jwtIssuers = make([]string, 0, len(issuers))
		for _, n := range issuers {
			if c.kinds[n] == "jwt" {
				jwtIssuers = append(jwtIssuers, n)
			}
		}
	}
	if isJWT && !always && len(jwtIssuers) > 0 && c.jwt != nil {
		claims, err := c.jwt.Verify(ctx, token, jwtIssuers, audiences)
		return "jwt", claims, err
	}
	if in == nil {
		return "jwt", nil, jwtauth.ErrMalformed
	}
	if inKeyHeader {
		// A JWT the route introspects (always): not from this header.
		return "introspection", nil, errKeyHeaderJWT
	}
	look := in.Introspect
	if noStore {
		look = in.IntrospectNoStore
	}
	claims, err := look(ctx, token, audiences)
	if errors.Is(err, introspect.ErrUnavailable) {
		de := &dependencyError{desc: err.Error(), err: err}
		var ue *introspect.UnavailableError
		if errors.As(err, &ue) {
			de.retryAfter = ue.RetryAfter
		}
		return "introspection", nil, de
	}
	return "introspection", claims, err
}

// apiKey looks the key up in the route's API-key issuers. A key whose
// entry names an audience (claims.aud) is held to the route's audiences
// as a token is: a key meant for another resource does not work here. A
// key naming none is the operator's own grant to the routes listing its
// issuer (and its routes, when the entry names them).
func (c *credentialVerifier) apiKey(ctx context.Context, key string, issuers []string, route string, audiences []string) (*jwtauth.Claims, error) {
	err := apikey.ErrUnknownKey
	for _, n := range issuers {
		s := c.keys[n]
		if s == nil {
			continue
		}
		claims, lerr := s.Lookup(ctx, key, route)
		switch {
		case lerr == nil:
			if len(audiences) > 0 && len(claims.Audience) > 0 &&
				!slices.ContainsFunc(claims.Audience, func(a string) bool { return slices.Contains(audiences, a) }) {
				return nil, jwtauth.ErrAudience
			}
			return claims, nil
		case errors.Is(lerr, apikey.ErrBusy):
			return nil, &dependencyError{desc: lerr.Error(), err: lerr}
		case !errors.Is(lerr, apikey.ErrUnknownKey):
			err = lerr
		}
	}
	return nil, err
}

// looksLikeJWT: three non-empty dot-separated parts, the JWS compact form.
func looksLikeJWT(token string) bool {
	i := strings.IndexByte(token, '.')
	if i <= 0 {
		return false
	}
	j := strings.IndexByte(token[i+1:], '.')
	return j > 0 && i+1+j+1 < len(token) && !strings.Contains(token[i+1+j+1:], ".")
}

// jwtIssuers are the issuers jwtauth verifies.
func jwtIssuers(issuers []config.Issuer) []config.Issuer {
	return slices.DeleteFunc(slices.Clone(issuers), func(is config.Issuer) bool { return is.Kind() != "jwt" })
}

// compileCredentials builds the introspectors and API-key stores of f's
// issuers and wraps jwt (nil without JWT issuers) in the verifier that
// chooses among them. stop ends the API-key file polling and closes the
// introspectors.
func compileCredentials(ctx context.Context, f *config.File, d Deps, jwt TokenVerifier) (*credentialVerifier, func(), error) {
	c := &credentialVerifier{jwt: jwt, kinds: map[string]string{}, intro: map[string]*introspect.Introspector{},
		always: map[string]bool{}, keys: map[string]*apikey.Store{}, peers: map[string]*peer.Policy{},
		observe: d.OnCredential, revoked: d.APIKeyRevocations}
	if c.revoked == nil {
		c.revoked = apikey.NewRevocations(d.Now)
	}
	if c.observe == nil {
		c.observe = func(string, string) {}
	}
	pollCtx, cancel := context.WithCancel(context.Background())
	stop := func() {
		cancel()
		for _, in := range c.intro {
			in.Close()
		}
		for _, cl := range c.closers {
			cl()
		}
	}
	var errs []error
	for _, is := range f.Issuers {
		c.kinds[is.Name] = is.Kind()
		switch {
		case is.Introspection != nil:
			in, err := c.newIntrospector(ctx, is, f, d)
			if err != nil {
				errs = append(errs, fmt.Errorf("issuer %s: %w", is.Name, err))
				continue
			}
			c.intro[is.Name], c.always[is.Name] = in, is.Introspection.Always
		case is.Peer != nil:
			pol, err := newPeerPolicy(is, d)
			if err != nil {
				errs = append(errs, fmt.Errorf("issuer %s: %w", is.Name, err))
				continue
			}
			c.peers[is.Name] = pol
		case is.APIKeys != nil:
			s, err := apikey.Open(is.APIKeys.File, apikey.Options{Name: is.Name, Logger: d.Logger, Now: d.Now, Revocations: c.revoked})
			if err != nil {
				errs = append(errs, fmt.Errorf("issuer %s: %w", is.Name, err))
				continue
			}
			c.keys[is.Name] = s
			t := time.NewTicker(apiKeyPoll)
			go func() {
				defer t.Stop()
				s.Run(pollCtx, t.C)
			}()
		}
	}
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}

func (c *credentialVerifier) newIntrospector(ctx context.Context, is config.Issuer, f *config.File, d Deps) (*introspect.Introspector, error) {
	x := is.Introspection
	secret, err := secrets.Load(d.Getenv, x.ClientAuth.ClientSecretEnv, x.ClientAuth.ClientSecretFile)
	if err != nil {
		return nil, err
	}
	cfg := introspect.Config{
		Name: is.Name, Endpoint: x.Endpoint, Issuer: is.Issuer,
		Auth: oauthclient.Config{Method: x.ClientAuth.Method, ClientID: x.ClientAuth.ClientID, ClientSecret: secret,
			PrivateKeyFile: x.ClientAuth.PrivateKeyFile, KeyID: x.ClientAuth.KeyID, Algorithm: x.ClientAuth.Algorithm},
		TokenTypeHint: x.TokenTypeHint, Timeout: x.Timeout.D(), CacheTTL: x.CacheTTL.D(), NegativeTTL: x.NegativeTTL.D(),
		Leeway: is.Leeway.D(), MaxConcurrent: f.Limits.MaxWaitingPerDependency,
	}
	if x.JWTResponse {
		sources := d.KeySources
		if sources == nil {
			sources = jwtauth.NewSources(ctx, jwtauth.Options{HTTPClient: d.HTTPClient, Logger: d.Logger, Now: d.Now})
		}
		ks, err := sources.KeySet(ctx, jwtauth.IssuerSpec{Name: is.Name, Issuer: is.Issuer, JWKSURL: is.JWKSURL, Discovery: is.Discovery,
			Algorithms: []string{"RS256", "PS256", "ES256", "EdDSA"}})
		if err != nil {
			return nil, err
		}
		c.closers = append(c.closers, ks.Close)
		cfg.ResponseKeys = ks
	}
	return introspect.New(cfg, introspect.Options{HTTPClient: d.HTTPClient, Logger: d.Logger, Now: d.Now})
}

func newPeerPolicy(is config.Issuer, d Deps) (*peer.Policy, error) {
	pc := is.Peer
	cfg := peer.Config{Name: is.Name, TrustDomains: pc.TrustDomains, Paths: pc.Paths, Subject: pc.Subject}
	for _, s := range pc.XFCCFrom {
		pf, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("xfcc_from %q: %w", s, err)
			}
			pf = netip.PrefixFrom(a, a.BitLen())
		}
		cfg.XFCCFrom = append(cfg.XFCCFrom, pf)
	}
	return peer.New(cfg, d.Now)
}

// issuerKind is the kind of the issuer named name, for Explain.
func (p *Policy) issuerKind(name string) string {
	if k := p.verifier.kinds[name]; k != "" {
		return k
	}
	return "jwt"
}

// DropIntrospections forgets the cached introspections of subject (the
// token's own sub) at every introspection issuer: admin revocation.
func (p *Policy) DropIntrospections(subject string) int {
	n := 0
	for _, in := range p.verifier.intro {
		n += in.Drop(subject)
	}
	return n
}
