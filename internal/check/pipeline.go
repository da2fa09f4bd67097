// Package check is the ext_authz pipeline: one straight path per request from
// a plain Request to a plain Verdict.
//
//	request -> route -> credential -> identity (cached) -> authorization -> verdict
//
// It knows nothing of gRPC, Envoy or HTTP servers: front ends convert their
// input to a Request and the Verdict to their answer. Denials are values
// (Verdicts with an Outcome); only a broken dependency is an error, and even
// that becomes an Unavailable verdict so that no front end can fail open.
package check

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/credential"
	"github.com/extauthz/extauthz/internal/jwtauth"
)

// Pipeline decides requests under the current policy. It is safe for
// concurrent use; the policy can be swapped while it serves.
type Pipeline struct {
	policy atomic.Pointer[Policy]
	cache  *cache.Cache[*cached]
	log    *slog.Logger
	now    func() time.Time
}

// cached is a verdict cache entry: a grant, or a denial that will not change
// for a while (an expired or badly signed token stays so).
type cached struct {
	grant       *Grant
	outcome     Outcome
	description string
}

// Options configure a Pipeline.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time
}

// New returns a pipeline serving p.
func New(p *Policy, o Options) (*Pipeline, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	c, err := cache.New[*cached](p.cacheSize, o.Now)
	if err != nil {
		return nil, err
	}
	pl := &Pipeline{cache: c, log: o.Logger, now: o.Now}
	pl.policy.Store(p)
	return pl, nil
}

// Swap installs a new policy and returns the old one for the caller to Close.
// Cache entries of unchanged routes stay valid: keys carry a fingerprint of
// everything a grant depends on.
func (pl *Pipeline) Swap(p *Policy) *Policy {
	old := pl.policy.Swap(p)
	if p.cacheSize != old.cacheSize {
		pl.cache.Resize(p.cacheSize)
	}
	return old
}

// Policy returns the policy in force.
func (pl *Pipeline) Policy() *Policy { return pl.policy.Load() }

// CacheStats reports the verdict cache's counters.
func (pl *Pipeline) CacheStats() cache.Stats { return pl.cache.Stats() }

// Check decides one request.
func (pl *Pipeline) Check(ctx context.Context, req *Request) Verdict {
	p := pl.policy.Load()
	v := pl.decide(ctx, p, req)
	if ctx.Err() != nil && v.Outcome.Allow() {
		// The caller gave up mid-check; never hand back an allow we could
		// not finish deciding.
		v = p.deny(req, nil, Unavailable, "check cancelled")
	}
	pl.logDecision(ctx, req, &v)
	return v
}

func (pl *Pipeline) decide(ctx context.Context, p *Policy, req *Request) Verdict {
	r, ok := p.route(req)
	if !ok {
		return p.deny(req, nil, NoRoute, "no route for this request")
	}
	if r.isPublic(req.Path) {
		return Verdict{Outcome: Public, Route: r.Name, Remove: r.publicRemove()}
	}
	token, err := credential.Find(req.Headers, r.credentials)
	switch {
	case errors.Is(err, credential.ErrMissing):
		return p.deny(req, r, MissingToken, "")
	case err != nil:
		return p.deny(req, r, InvalidToken, err.Error())
	}

	key := cacheKey(r.keyPrefix, token)
	entry, hit := pl.cache.Get(key)
	if !hit {
		entry = pl.verify(ctx, p, r, token)
		if entry.outcome == Unavailable {
			// A broken dependency is not a property of the token.
			return p.deny(req, r, Unavailable, entry.description)
		}
		pl.cache.Add(key, entry, pl.expiry(p, entry))
	}
	if entry.grant == nil {
		v := p.deny(req, r, entry.outcome, entry.description)
		v.CacheHit = hit
		return v
	}
	g := entry.grant
	if !g.scopeOK {
		v := p.deny(req, r, InsufficientScope, "the token lacks a required scope")
		v.Grant, v.CacheHit = g, hit
		return v
	}
	return Verdict{Outcome: Allowed, Route: r.Name, Grant: g, CacheHit: hit, Set: g.set, Remove: g.remove}
}

// verify runs the expensive part: signature and claims, then the grant.
func (pl *Pipeline) verify(ctx context.Context, p *Policy, r *Route, token string) *cached {
	claims, err := p.verifier.Verify(ctx, token, r.issuers, r.audiences)
	if err != nil {
		if errors.Is(err, jwtauth.ErrKeysUnavailable) {
			return &cached{outcome: Unavailable, description: "signing keys are not available yet"}
		}
		return &cached{outcome: InvalidToken, description: err.Error()}
	}
	g, err := p.newGrant(r, claims)
	if err != nil {
		return &cached{outcome: InvalidToken, description: err.Error()}
	}
	return &cached{grant: g, outcome: Allowed}
}

// expiry bounds a cache entry: a grant never outlives its token, a denial
// lives the negative TTL.
func (pl *Pipeline) expiry(p *Policy, e *cached) time.Time {
	if e.grant != nil {
		return e.grant.Expires
	}
	return pl.now().Add(p.negativeTTL)
}

// cacheKey hashes the route's key prefix with the token; the raw token is
// never kept. Typical tokens are hashed from a stack buffer without
// allocating.
func cacheKey(prefix, token string) cache.Key {
	var buf [2048]byte
	if len(prefix)+1+len(token) > len(buf) {
		h := sha256.New()
		h.Write([]byte(prefix))
		h.Write([]byte{0})
		h.Write([]byte(token))
		var k cache.Key
		h.Sum(k[:0])
		return k
	}
	b := append(buf[:0], prefix...)
	b = append(b, 0)
	b = append(b, token...)
	return sha256.Sum256(b)
}

func (p *Policy) route(req *Request) (*Route, bool) {
	if name := req.ContextExtensions["route"]; name != "" {
		return p.routes.ByName(name)
	}
	return p.routes.Match(req.Host, req.Path)
}

func (r *Route) isPublic(path string) bool {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	for _, pp := range r.public {
		if prefix, ok := strings.CutSuffix(pp, "*"); ok {
			if strings.HasPrefix(path, prefix) {
				return true
			}
		} else if path == pp {
			return true
		}
	}
	return false
}

// publicRemove strips every owned header from a public request: nobody is
// authenticated, so nobody may claim to be.
func (r *Route) publicRemove() []string {
	if r.forwardAuthorization {
		return r.owned
	}
	return append(r.owned[:len(r.owned):len(r.owned)], "authorization")
}

func (pl *Pipeline) logDecision(ctx context.Context, req *Request, v *Verdict) {
	if v.Outcome.Allow() {
		if pl.log.Enabled(ctx, slog.LevelDebug) {
			pl.log.LogAttrs(ctx, slog.LevelDebug, "allowed",
				slog.String("route", v.Route), slog.String("outcome", v.Outcome.String()),
				slog.String("user", v.subject()), slog.Bool("cached", v.CacheHit),
				slog.String("request_id", req.RequestID), slog.String("method", req.Method), slog.String("path", pathOnly(req.Path)))
		}
		return
	}
	pl.log.LogAttrs(ctx, slog.LevelInfo, "denied",
		slog.String("route", v.Route), slog.String("outcome", v.Outcome.String()),
		slog.Int("status", v.Status()), slog.String("reason", v.Description),
		slog.String("user", v.subject()), slog.Bool("cached", v.CacheHit),
		slog.String("request_id", req.RequestID), slog.String("method", req.Method), slog.String("path", pathOnly(req.Path)))
}

func (v *Verdict) subject() string {
	if v.Grant == nil {
		return ""
	}
	return v.Grant.Subject
}

// pathOnly drops the query string: it may carry secrets (tokens in URLs).
func pathOnly(p string) string {
	if i := strings.IndexAny(p, "?#"); i >= 0 {
		return p[:i]
	}
	return p
}

// deny builds a denial verdict with its challenge and body.
func (p *Policy) deny(req *Request, r *Route, o Outcome, desc string) Verdict {
	v := Verdict{Outcome: o, Description: desc}
	var scope, metadata string
	if r != nil {
		v.Route = r.Name
		scope = r.scopeParam
		metadata = r.metadataURL(req)
	}
	switch o {
	case MissingToken:
		// RFC 6750 section 3.1: no error code when no credential was sent.
		v.ResponseHeaders = append(v.ResponseHeaders, Header{"www-authenticate", challenge("", "", scope, metadata)})
	case InvalidToken:
		v.ResponseHeaders = append(v.ResponseHeaders, Header{"www-authenticate", challenge("invalid_token", desc, scope, metadata)})
	case InsufficientScope:
		v.ResponseHeaders = append(v.ResponseHeaders, Header{"www-authenticate", challenge("insufficient_scope", desc, scope, metadata)})
	case Unavailable:
		v.ResponseHeaders = append(v.ResponseHeaders, Header{"retry-after", "5"})
	}
	if o == InsufficientScope {
		v.Body = jsonBody(o, desc, scope)
	} else {
		v.Body = jsonBody(o, desc, "")
	}
	v.ResponseHeaders = append(v.ResponseHeaders, Header{"content-type", "application/json"})
	return v
}

// metadataURL is the RFC 9728 protected resource metadata URL of the route:
// configured, or derived from the request's origin with the route's path
// inserted after the well-known prefix.
func (r *Route) metadataURL(req *Request) string {
	if r.resourceMetadata != "" {
		return r.resourceMetadata
	}
	if req.Host == "" {
		return ""
	}
	scheme := req.Scheme
	if scheme == "" {
		scheme = "https"
	}
	return scheme + "://" + req.Host + "/.well-known/oauth-protected-resource" + strings.TrimSuffix(r.pathPrefix, "/")
}
