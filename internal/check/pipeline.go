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
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/lineage"
	"github.com/extauthz/extauthz/internal/session"
)

// Pipeline decides requests under the current policy. It is safe for
// concurrent use; the policy can be swapped while it serves.
type Pipeline struct {
	policy   atomic.Pointer[Policy]
	cache    *cache.Cache[*cached]
	sessions *session.Store
	log      *slog.Logger
	now      func() time.Time
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
	sessions, err := session.New(p.sessionsMax, p.sessionIdle, o.Now)
	if err != nil {
		return nil, err
	}
	pl := &Pipeline{cache: c, sessions: sessions, log: o.Logger, now: o.Now}
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
		v = p.deny(req, nil, nil, denial{outcome: Unavailable, desc: "check cancelled"})
	}
	pl.logDecision(ctx, req, &v)
	return v
}

func (pl *Pipeline) decide(ctx context.Context, p *Policy, req *Request) Verdict {
	if v, ok := p.protectedResource(req); ok {
		return v
	}
	r, ok := p.route(req)
	if !ok {
		return p.deny(req, nil, nil, denial{outcome: NoRoute, desc: "no route for this request"})
	}
	if r.isPublic(req.Path) {
		return Verdict{Outcome: Public, Route: r.Name, Remove: r.publicRemove()}
	}
	call, bad := readCall(r, req)
	if bad != nil {
		return p.deny(req, r, &call, denial{outcome: Malformed, desc: bad.desc, rpcCode: bad.code})
	}

	token, err := credential.Find(req.Headers, r.credentials)
	if errors.Is(err, credential.ErrMissing) && r.tokenInMeta && call.metaToken != "" {
		// Opt-in: some agent frameworks put the token in the tool call.
		token, err = credential.Check(metaBearer(call.metaToken))
	}
	switch {
	case errors.Is(err, credential.ErrMissing):
		return p.deny(req, r, &call, denial{outcome: MissingToken})
	case err != nil:
		return p.deny(req, r, &call, denial{outcome: InvalidToken, desc: err.Error()})
	}

	key := cacheKey(r.keyPrefix, token)
	entry, hit := pl.cache.Get(key)
	if !hit {
		entry = pl.verify(ctx, p, r, token)
		if entry.outcome == Unavailable {
			// A broken dependency is not a property of the token.
			return p.deny(req, r, &call, denial{outcome: Unavailable, desc: entry.description})
		}
		pl.cache.Add(key, entry, pl.expiry(p, entry))
	}
	if entry.grant == nil {
		v := p.deny(req, r, &call, denial{outcome: entry.outcome, desc: entry.description})
		v.CacheHit = hit
		return v
	}
	g := entry.grant
	denyAs := func(d denial) Verdict {
		v := p.deny(req, r, &call, d)
		v.Grant, v.CacheHit = g, hit
		return v
	}
	if !g.scopeOK {
		return denyAs(denial{outcome: InsufficientScope, desc: "the token lacks a required scope", scope: r.scopeParam})
	}

	switch {
	case call.Method != "":
		if o, desc, scope := r.authorize(g, call.Method, call.Name); o != Allowed {
			return denyAs(denial{outcome: o, desc: desc, scope: scope})
		}
	case req.Method == "POST" && call.Protocol != "" && !call.Body && r.hasRules():
		// Rules cannot be applied to a call nobody can name: fail closed.
		return denyAs(denial{outcome: Malformed, desc: "the JSON-RPC method is unknown: send the body to ext_authz or the Mcp-Method header", rpcCode: jsonrpc.CodeInvalidRequest})
	}

	if call.Protocol == ProtoMCP && call.MCPSession != "" && r.sessionBinding {
		if d, ok := pl.bindSession(ctx, r, req, &call, g); !ok {
			return denyAs(d)
		}
	}
	v := Verdict{Outcome: Allowed, Route: r.Name, Grant: g, CacheHit: hit, Call: call, Set: g.set, Remove: g.remove}
	if !r.lineageOff {
		if d, ok := pl.applyLineage(ctx, p, r, req, &call, g, &v); !ok {
			return denyAs(d)
		}
	}
	return v
}

// applyLineage derives the request's place in its conversation and adds the
// lineage headers to the verdict.
func (pl *Pipeline) applyLineage(ctx context.Context, p *Policy, r *Route, req *Request, call *Call, g *Grant, v *Verdict) (denial, bool) {
	in := p.lineageNames.Inbound(req.Headers)
	trusted := r.trust.Trusted(lineage.Caller{IssuerName: g.Issuer, ClientID: g.ClientID, HasAct: len(g.Actors) > 0, Principal: req.SourcePrincipal})
	var carried *lineage.Carried
	if in.Signed != "" && p.signedVerifier != nil {
		c, err := p.signedVerifier.Verify(ctx, in.Signed, g.Subject)
		if err == nil {
			carried = &c
		} else {
			pl.log.LogAttrs(ctx, slog.LevelInfo, "signed lineage rejected", slog.String("route", r.Name), slog.String("request_id", req.RequestID), slog.String("error", err.Error()))
		}
	}
	res, err := lineage.Derive(in, lineage.Facts{ContextID: call.ContextID, MCPSessionID: call.MCPSession, TokenSessionID: g.Session, ActChain: g.Actors},
		lineage.Options{Trusted: trusted, Signed: carried, MaxDepth: r.maxDepth})
	switch {
	case errors.Is(err, lineage.ErrTooDeep):
		return denial{outcome: TooDeep, desc: "the delegation chain is deeper than this route allows"}, false
	case err != nil:
		return denial{outcome: Malformed, desc: "malformed lineage header", rpcCode: jsonrpc.CodeInvalidRequest}, false
	}
	if r.signLineage && p.signer != nil {
		if res.Signed, err = p.signer.Sign(&res, g.Subject, g.Session); err != nil {
			// A missing signature only costs the next hop its proof.
			pl.log.LogAttrs(ctx, slog.LevelWarn, "signing lineage failed", slog.String("route", r.Name), slog.String("error", err.Error()))
		}
	}
	// The grant's slices are shared by every request: full slice
	// expressions make the appends copy.
	v.Set, v.Remove = res.AppendHeaders(g.set[:len(g.set):len(g.set)], g.remove[:len(g.remove):len(g.remove)], p.lineageNames)
	v.Lineage = res
	return denial{}, true
}

// bindSession enforces that an MCP session is used only by the user who
// first used it; DELETE ends the binding.
func (pl *Pipeline) bindSession(ctx context.Context, r *Route, req *Request, call *Call, g *Grant) (denial, bool) {
	key := session.Key(r.Name, call.MCPSession)
	if req.Method == "DELETE" {
		if pl.sessions.End(key, g.Subject) {
			return denial{}, true
		}
	} else if _, owned := pl.sessions.Bind(key, g.Subject); owned {
		return denial{}, true
	}
	pl.log.LogAttrs(ctx, slog.LevelWarn, "session hijack attempt",
		slog.String("route", r.Name), slog.String("user", g.Subject),
		slog.String("request_id", req.RequestID), slog.String("method", req.Method))
	return denial{outcome: SessionConflict, desc: "this MCP session belongs to another user"}, false
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

// denial is a decision against the request, before it is dressed up.
type denial struct {
	outcome Outcome
	desc    string
	scope   string // for insufficient_scope: what is needed
	rpcCode int    // JSON-RPC error code; 0 picks the outcome's
}

// deny builds a denial verdict with its challenge and body: a JSON-RPC error
// response carrying the request's id for JSON-RPC calls, a small JSON
// document otherwise.
func (p *Policy) deny(req *Request, r *Route, call *Call, d denial) Verdict {
	v := Verdict{Outcome: d.outcome, Description: d.desc}
	var routeScope, metadata string
	if r != nil {
		v.Route = r.Name
		routeScope = r.scopeParam
		metadata = r.metadataURL(req)
	}
	switch d.outcome {
	case MissingToken:
		// RFC 6750 section 3.1: no error code when no credential was sent.
		v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "www-authenticate", Value: challenge("", "", routeScope, metadata)})
	case InvalidToken:
		v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "www-authenticate", Value: challenge("invalid_token", d.desc, routeScope, metadata)})
	case InsufficientScope:
		v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "www-authenticate", Value: challenge("insufficient_scope", d.desc, d.scope, metadata)})
	case Unavailable:
		v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "retry-after", Value: "5"})
	}
	if call != nil && call.jsonRPC() {
		v.Call = *call
		v.Body = rpcErrorBody(call.ID, d)
	} else {
		v.Body = jsonBody(d.outcome, d.desc, d.scope)
	}
	v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "content-type", Value: "application/json"})
	return v
}
