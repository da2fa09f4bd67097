// Package check is the authorization pipeline: one straight path per
// request from a plain Request to a plain Verdict, the same for every front
// end. Check sheds load beyond limits.max_concurrent_checks and traces each
// check (Options.Tracer), then runs the stages in order (stages.go); the
// first denial ends the decision:
//
//	canonical   a host or path with more than one reading is refused
//	metadata    RFC 9728 protected resource metadata is answered directly
//	route       context_extensions name the route, else host and path do
//	headers     repeated single-valued headers are refused
//	public      public paths pass without a token (never a JSON-RPC call)
//	call        the JSON-RPC call is read exactly, or refused
//	peer        the mTLS workload identity, on routes with peer issuers
//	credential  the credential (JWT, opaque token, API key) is found
//	identity    the credential is verified once and its grant cached; no
//	            grant (nor the peer's) passes before the shared tier's
//	            revocations are read (503, see LoadRevocations)
//	authorize   required scopes, then the route's rules (first match;
//	            globs, claims, CEL, AuthZEN)
//	session     an MCP session belongs to the user who first used it
//	tasks       a task belongs to the user who created it
//	lineage     the request's place in its conversation, as headers
//	limits      the route's and the deciding rule's rate limits (429 beyond)
//	session-id  the session header a request's own ids decide
//	exchange    the upstream gets a token issued for it (RFC 8693)
//	tools-header  the signed list of tools the caller may use, when asked for
//
// Explain runs the same stages without side effects and reports each.
//
// It knows nothing of gRPC, Envoy or HTTP servers: front ends convert their
// input to a Request and the Verdict to their answer. Denials are values
// (Verdicts with an Outcome); only a broken dependency is an error, and even
// that becomes an Unavailable verdict so that no front end can fail open.
package check

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/extauthz/extauthz/internal/audit"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/dpop"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/lineage"
	"github.com/extauthz/extauthz/internal/ratelimit"
	"github.com/extauthz/extauthz/internal/shared"
)

// Pipeline decides requests under the current policy. It is safe for
// concurrent use; the policy can be swapped while it serves.
type Pipeline struct {
	policy   atomic.Pointer[Policy]
	cache    *cache.Cache[*Grant]
	refusals *cache.Negative // bounded apart: see negative.go
	memos    *memoRing       // the grants holding memos: see memo.go
	state    *state          // bindings, elicitations, consents, revocations
	log      *slog.Logger
	now      func() time.Time
	observer Observer

	generation atomic.Uint64
	loadedAt   atomic.Int64

	inflight atomic.Int64       // checks in progress, for load shedding (shed.go)
	tracer   Tracer             // nil: off
	auditW   *audit.Writer      // nil: off (audit.go)
	limiter  *ratelimit.Limiter // nil: limits are not enforced (limits.go)
	dpop     *dpop.Checker      // the proofs of DPoP-bound tokens (binding.go)
}

// RevocationTTL is the least time a revocation is remembered for: longer
// than any access token should live. It is kept longer when the tokens
// accepted live longer, and for as long as it may match a credential
// without iat (see state.keepRevocations).
const RevocationTTL = 24 * time.Hour

// Observer is told about every decision (metrics). Implementations must be
// cheap and safe for concurrent use: they run on the hot path.
type Observer interface {
	Checked(route string, o Outcome, took time.Duration)
	SessionConflict(route string)
}

// cached is a verdict cache entry: a grant, or a denial that will not change
// for a while (an expired or badly signed token stays so).
type cached struct {
	routeKey    string // the route's key prefix, to drop entries of changed routes
	grant       *Grant
	outcome     Outcome
	description string
	// retryAfter is when an Unavailable verification may be retried (never
	// cached).
	retryAfter time.Duration
	// passing marks a refusal that is not a property of the token: the
	// key it names is not in the issuer's key set yet (a rotation the
	// rate-limited refetch has not seen). It is not cached, so that the
	// token is accepted as soon as the set has the key.
	passing bool
}

// Options configure a Pipeline.
type Options struct {
	Logger   *slog.Logger
	Now      func() time.Time
	Observer Observer
	// Shared is the cross-replica tier (Redis); nil on a single replica.
	Shared *shared.Store
	// ElicitationKey signs the state of elicitation URLs (at least 32
	// bytes); replicas sharing a tier must share it. nil: a random key.
	ElicitationKey []byte
	// Tracer traces every check; nil is off and costs nothing.
	Tracer Tracer
	// Audit receives a record of every decision Check makes; nil is off.
	Audit *audit.Writer
	// RateLimiter counts requests against the routes' and rules' limits;
	// nil counts them on this replica alone: a configured limit is never
	// left unenforced.
	RateLimiter *ratelimit.Limiter
}

// New returns a pipeline serving p.
func New(p *Policy, o Options) (*Pipeline, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RateLimiter == nil {
		o.RateLimiter = ratelimit.New(ratelimit.Options{Clock: o.Now, Logger: o.Logger})
	}
	c, err := cache.New[*Grant](p.cacheSize, o.Now)
	if err != nil {
		return nil, err
	}
	refusals, err := cache.NewNegative(refusalsSize(p.cacheSize))
	if err != nil {
		return nil, err
	}
	st, err := newState(p, o)
	if err != nil {
		return nil, err
	}
	proofs := dpop.Options{ReplayEntries: p.dpopReplay, Now: o.Now}
	if o.Shared != nil {
		proofs.Shared, proofs.SharedFailOpen = o.Shared, o.Shared.FailOpen()
	}
	pl := &Pipeline{cache: c, refusals: refusals, memos: newMemoRing(memoSlotsFor(p.cacheSize)), state: st, log: o.Logger, now: o.Now, observer: o.Observer, tracer: o.Tracer,
		auditW: o.Audit, limiter: o.RateLimiter, dpop: dpop.New(proofs)}
	pl.policy.Store(p)
	pl.generation.Store(1)
	pl.loadedAt.Store(o.Now().UnixNano())
	return pl, nil
}

// Swap installs a new policy and returns the old one for the caller to Close.
// Cache entries of unchanged routes stay valid: keys carry a fingerprint of
// everything a grant depends on. A policy that would rename the users of an
// issuer the policy in force has too (renamesUsers) is refused: the state
// kept across the swap names users the old way. The caller closes a
// refused p. Swaps must not run concurrently.
func (pl *Pipeline) Swap(p *Policy) (*Policy, error) {
	if err := renamesUsers(pl.policy.Load(), p); err != nil {
		return nil, err
	}
	old := pl.policy.Swap(p)
	pl.generation.Add(1)
	pl.loadedAt.Store(pl.now().UnixNano())
	if p.cacheSize != old.cacheSize {
		pl.cache.Resize(p.cacheSize)
		pl.refusals.Resize(refusalsSize(p.cacheSize))
	}
	pl.refusals.Purge()
	pl.dpop.SetReplayEntries(p.dpopReplay)
	// Entries of routes that changed can never be hit again: free them.
	live := make(map[string]bool)
	for _, r := range p.routes.All() {
		live[r.keyPrefix] = true
	}
	pl.cache.RemoveFunc(func(g *Grant) bool { return !live[g.routeKey] })
	return old, nil
}

// Generation counts the policies loaded (1 at start) and says when the
// current one was.
func (pl *Pipeline) Generation() (uint64, time.Time) {
	return pl.generation.Load(), time.Unix(0, pl.loadedAt.Load())
}

// Invalidated is what an invalidation dropped.
type Invalidated struct {
	Verdicts, ExchangedTokens, Elicitations int
	// SessionBindings is always 0: bindings end only by expiry.
	SessionBindings int
}

// InvalidateSession drops the cached verdicts of tokens of a session (the
// session claim), and the session's exchanged tokens and pending
// elicitations, here and (with a shared tier) on every replica. id may be a
// token's session or an MCP session: an exchanged token is filed under both
// (exchange.Owner), and dropped by either. MCP session
// bindings stay until they expire: dropping one would only let somebody
// else claim a session the upstream still serves.
func (pl *Pipeline) InvalidateSession(ctx context.Context, id string) Invalidated {
	d := pl.invalidateSessionLocal(id)
	if sh := pl.state.shared; sh != nil {
		n, _ := sh.DropSession(ctx, id)
		d.ExchangedTokens += n
		_ = sh.Publish(ctx, shared.Event{Kind: shared.EventSession, ID: id, At: pl.now()})
	}
	return d
}

func (pl *Pipeline) invalidateSessionLocal(id string) Invalidated {
	d := Invalidated{
		Verdicts:     pl.cache.RemoveFunc(func(g *Grant) bool { return g.Session == id }),
		Elicitations: pl.state.elicitations.DropSession(id),
	}
	for _, ex := range pl.Policy().exchangers {
		d.ExchangedTokens += ex.DropSession(id)
	}
	return d
}

// RevokeSubject refuses the user's tokens issued until now, on cache hits
// too, and drops its cached verdicts, exchanged tokens and elicitations,
// here and (with a shared tier) on every replica. subject is the user as
// Policy.User names it (issuer-qualified). The user's session bindings
// stay: they keep the sessions from anybody else, and the user's later
// tokens still own them. A revocation the shared tier could not store or
// publish is applied here only and wrapped in ErrSharedUnavailable: the
// other replicas keep accepting the user's tokens until it is made again.
func (pl *Pipeline) RevokeSubject(ctx context.Context, subject string) (Invalidated, error) {
	now := pl.now()
	pl.state.revokeLocal(subject, now)
	d := pl.invalidateSubjectLocal(subject)
	sh := pl.state.shared
	if sh == nil {
		return d, nil
	}
	n, _ := sh.DropSubject(ctx, subject)
	d.ExchangedTokens += n
	err := sh.Revoke(ctx, subject, now, pl.state.keepRevocations())
	if err == nil {
		err = sh.Publish(ctx, shared.Event{Kind: shared.EventRevoke, ID: subject, At: now})
	}
	if err != nil {
		return d, fmt.Errorf("%w: %w", ErrSharedUnavailable, err)
	}
	return d, nil
}

func (pl *Pipeline) invalidateSubjectLocal(subject string) Invalidated {
	d := Invalidated{
		Verdicts:     pl.cache.RemoveFunc(func(g *Grant) bool { return g.Subject == subject }),
		Elicitations: pl.state.elicitations.DropSubject(subject),
	}
	// The user's consents go too, as the shared tier drops them with the
	// user's other values: a token issued after the revocation authorizes
	// again.
	pl.state.consents.DropSubject(subject)
	for _, ex := range pl.Policy().exchangers {
		d.ExchangedTokens += ex.DropSubject(subject)
	}
	return d
}

// ElicitationCount is the number of pending elicitations.
func (pl *Pipeline) ElicitationCount() int { return pl.state.elicitations.Len() }

// SessionCount is the number of MCP session bindings held.
func (pl *Pipeline) SessionCount() int { return pl.state.sessions.Len() }

// Policy returns the policy in force.
func (pl *Pipeline) Policy() *Policy { return pl.policy.Load() }

// CacheStats reports the verdict cache's counters.
func (pl *Pipeline) CacheStats() cache.Stats { return pl.cacheStats() }

// Check decides one request: refused at once when too many are in
// progress (see shed), otherwise decided, traced when a Tracer is set.
func (pl *Pipeline) Check(ctx context.Context, req *Request) Verdict {
	p := pl.policy.Load()
	if pl.shed(p) {
		return OverloadVerdict(p.Limits().OverloadStatus)
	}
	defer pl.inflight.Add(-1)
	// The evaluation is the caller's, so that its verdict is copied once,
	// here, rather than at every level (a Verdict is 800 bytes).
	e := evaluation{pl: pl, p: p, req: req, ctx: ctx, st: view{s: pl.state}, log: pl.log, observer: pl.observer}
	if pl.tracer == nil {
		pl.check(&e)
	} else {
		pl.traced(&e)
	}
	return e.v
}

// check decides e's request under e's policy; the verdict is e.v.
func (pl *Pipeline) check(e *evaluation) {
	ctx, p, req := e.ctx, e.p, e.req
	start := pl.now()
	e.now = start
	e.decide()
	v := &e.v
	if ctx.Err() != nil && v.Outcome.Allow() {
		// The caller gave up mid-check; never hand back an allow we could
		// not finish deciding.
		*v = p.deny(req, nil, nil, denial{outcome: Unavailable, desc: "check cancelled"})
	}
	pl.logDecision(ctx, req, v)
	if pl.observer != nil {
		pl.observer.Checked(v.Route, v.Outcome, pl.now().Sub(start))
	}
	if e.route != nil && e.route.dryRun {
		*v = e.route.dryRunVerdict(*v)
	}
	if e.route != nil {
		e.route.stripCredentialCookie(req, v)
	}
	if pl.auditW != nil {
		pl.audit(ctx, req, v, start)
	}
	v.memos = pl.memos
}

// DryRunHeader tells the upstream of a dry-run route what the decision
// would have been.
const DryRunHeader = "x-extauthz-dry-run"

// dryRunVerdict lets a decided request pass: allowed ones as they are, denied
// ones without any identity, both with the decision in DryRunHeader. Direct
// answers (protected resource metadata) are kept.
func (r *Route) dryRunVerdict(v Verdict) Verdict {
	switch {
	case v.Outcome == ResourceMetadata:
		return v
	case v.Outcome.Allow():
		v.Set = append(v.Set[:len(v.Set):len(v.Set)], Header{Name: DryRunHeader, Value: v.Outcome.String()})
		v.HeadersID = 0
		return v
	}
	would := fmt.Sprintf("would deny: %s (%d)", v.Outcome, v.Status())
	if v.Description != "" {
		would += ": " + v.Description
	}
	return Verdict{
		Outcome: DryRun, Route: v.Route, Description: would, CacheHit: v.CacheHit, Call: v.Call,
		Set:    []Header{{Name: DryRunHeader, Value: quote(would)}},
		Remove: r.publicRemove(),
	}
}

func routeReason(req *Request) string {
	if name := req.ContextExtensions["route"]; name != "" {
		return "named by context_extensions"
	}
	return "matched host " + req.Host + " and path " + pathOnly(req.Path)
}

// lineageCaller is who sent req, as lineage trust reads it: a client id
// that reads as another issuer's (identityPolicy.names) is none. The token
// vouches for a delegation only by an act of its own (Grant.tokenActors):
// a workload the peer stage made the outermost actor is judged by its
// principal.
func (p *Policy) lineageCaller(g *Grant, req *Request, peerActor bool) lineage.Caller {
	c := lineage.Caller{IssuerName: g.Issuer, HasAct: len(g.tokenActors(peerActor)) > 0, Principal: req.SourcePrincipal}
	if g.ClientID != "" {
		if ns, err := p.ident.namespace(g.Issuer, g.ClientID); err == nil {
			c.ClientID, c.Namespace = g.ClientID, ns
		}
	}
	return c
}

// deriveLineage derives the request's place in its conversation, for the
// rules that read it (noMint: nothing minted before the lineage stage) and
// for the lineage stage. A signed lineage token is verified once per check,
// whoever asks first.
func (e *evaluation) deriveLineage(noMint bool) (lineage.Result, error) {
	p, r, g, req, call := e.p, e.route, e.grant, e.req, &e.call
	trusted := r.trust.Trusted(p.lineageCaller(g, req, e.actor != ""))
	// Derive reads inbound headers only from a trusted caller, and a
	// signed token only once verified: most requests look up none.
	var in lineage.Inbound
	switch {
	case trusted:
		in = p.lineageNames.Inbound(req.Headers)
	case p.signedVerifier != nil && p.lineageNames.Signed != "":
		in.Signed = req.Headers[p.lineageNames.Signed]
	}
	if in.Signed != "" && p.signedVerifier != nil && !e.signedChecked {
		e.signedChecked = true
		c, err := p.signedVerifier.Verify(e.ctx, in.Signed, g.Subject)
		if err == nil {
			e.signed, e.signedOK = c, true
		} else {
			e.log.LogAttrs(e.ctx, slog.LevelInfo, "signed lineage rejected", slog.String("route", r.Name), slog.String("request_id", req.RequestID), slog.String("error", err.Error()))
		}
	}
	var carried *lineage.Carried
	if e.signedOK {
		carried = &e.signed
	}
	return lineage.Derive(in, lineage.Facts{ContextID: call.ContextID, MCPSessionID: call.MCPSession, TokenSessionID: g.Session, ActChain: g.Actors},
		lineage.Options{Trusted: trusted, Signed: carried, MaxDepth: r.maxDepth, NoMint: noMint})
}

// applyLineage derives the request's place in its conversation and adds the
// lineage headers to the verdict.
func (e *evaluation) applyLineage() *denial {
	pl, p, r, g, v, ctx := e.pl, e.p, e.route, e.grant, &e.v, e.ctx
	res, err := e.deriveLineage(p.lineageNoMint)
	switch {
	case errors.Is(err, lineage.ErrTooDeep):
		return &denial{outcome: TooDeep, desc: "the delegation chain is deeper than this route allows"}
	case err != nil:
		return &denial{outcome: Malformed, desc: "malformed lineage header", rpcCode: jsonrpc.CodeInvalidRequest}
	}
	if r.signLineage && p.signer != nil && res.Root != "" {
		if res.Signed, err = p.signer.Sign(&res, g.Subject, g.Session); err != nil {
			// A missing signature only costs the next hop its proof.
			pl.log.LogAttrs(ctx, slog.LevelWarn, "signing lineage failed", slog.String("route", r.Name), slog.String("error", err.Error()))
		}
	}
	v.Lineage = res
	if m := g.memo().lineage.Load(); m != nil && sameLineage(&m.res, &res) {
		v.Set, v.Remove, v.Lineage, v.HeadersID = m.set, m.remove, m.res, m.id
		return nil
	}
	// The grant's slices are shared by every request: full slice
	// expressions make the appends copy.
	// A request strips at most the five lineage headers: they are listed
	// on the stack and joined to the grant's (withLineageRemoved).
	var removed [5]string
	set, extra := res.AppendHeaders(g.set[:len(g.set):len(g.set)], removed[:0], p.lineageNames)
	v.Set, v.Remove = set, g.withLineageRemoved(extra)
	v.HeadersID = 0
	if res.Signed == "" && v.CacheHit { // a signed token is new on every request; a grant used once needs no memo
		v.HeadersID = nextMemoID()
		g.memoForWrite(e.pl.memos).lineage.Store(&lineageMemo{id: v.HeadersID, res: res, set: v.Set, remove: v.Remove})
	}
	return nil
}

// sameLineage reports whether two results make the same headers.
func sameLineage(a, b *lineage.Result) bool {
	return a.Root == b.Root && a.Parent == b.Parent && a.Depth == b.Depth && a.Context == b.Context &&
		a.Trusted == b.Trusted && a.FromSigned == b.FromSigned && a.Signed == b.Signed && slices.Equal(a.ActorChain, b.ActorChain)
}

// presented is a credential as the request presents it.
type presented struct {
	token string
	// inKeyHeader: read from the route's API-key header (Route.keyHeader),
	// where it is verified as an API key or a JWT only.
	inKeyHeader bool
	// actor, when set, is the workload presenting the token for its user.
	actor string
}

// verdictKey is where the verdict on a credential is cached: the token,
// with what else decides the verdict. A token read from the API-key header
// may be refused there and valid in Authorization, and the grant of a
// token a workload presents names the workload.
func verdictKey(r *Route, token string, inKeyHeader bool, actor string) cache.Key {
	switch {
	case inKeyHeader:
		return cache.NewKey(r.keyPrefix, token, actor, "\x00key-header")
	case actor != "":
		return cache.NewKey(r.keyPrefix, token, actor)
	}
	return cache.NewKey(r.keyPrefix, token)
}

// verify runs the expensive part: signature and claims, then the grant,
// written to dst (the caller's, so that a miss allocates no entry: the
// cache keeps the grant, never the entry).
// readOnly (Explain) verifies without caching an introspection answer.
func (pl *Pipeline) verify(ctx context.Context, p *Policy, r *Route, c presented, readOnly bool, dst *cached) {
	verify := p.verifier.Verify
	if readOnly {
		verify = p.verifier.VerifyNoStore
	}
	claims, err := verify(ctx, c.token, r, c.inKeyHeader)
	if err != nil {
		// Declared here, broken costs an allocation only on failure.
		var broken *dependencyError
		switch {
		case errors.As(err, &broken):
			*dst = cached{outcome: Unavailable, description: broken.desc, retryAfter: broken.retryAfter}
		case errors.Is(err, jwtauth.ErrKeysUnavailable):
			*dst = cached{outcome: Unavailable, description: "signing keys are not available yet"}
		case errors.Is(err, jwtauth.ErrUnknownKey):
			*dst = cached{outcome: InvalidToken, description: err.Error(), passing: true}
		default:
			*dst = cached{outcome: InvalidToken, description: err.Error()}
		}
		return
	}
	if c.actor != "" {
		claims = withActor(claims, c.actor)
	}
	g, err := p.newGrant(r, claims)
	if err != nil {
		*dst = cached{outcome: InvalidToken, description: err.Error()}
		return
	}
	pl.state.accepted(g)
	*dst = cached{grant: g, outcome: Allowed}
}

// lookupRoute finds the route of req: the one Envoy names in
// context_extensions (picked by Envoy's own routing, which forwards the
// request), else the one its host and path match, with the route an
// upstream may read the path as one of, ahead of the one matched
// (route.Table.Lookup), which callers refuse.
func (p *Policy) lookupRoute(req *Request) (r *Route, ok bool, variantOf string) {
	if name := req.ContextExtensions["route"]; name != "" {
		r, ok = p.routes.ByName(name)
		return r, ok, ""
	}
	return p.routes.Lookup(req.Host, req.Path)
}

// errRouteVariant refuses a path an upstream may read as another route's.
const errRouteVariant = "the path has a route's prefix in another case or without its trailing slash, which an upstream " +
	"routing paths as Express does would serve as that route's: send the path as the route is configured"

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

// publicRemove strips every owned header from a request nobody is
// authenticated on (public paths, direct answers, dry-run denials): nobody
// may claim to be anybody. Computed once per route.
func (r *Route) publicRemove() []string { return r.unauthenticatedRemove }

func (pl *Pipeline) logDecision(ctx context.Context, req *Request, v *Verdict) {
	// Allows and direct answers (metadata documents, elicitations) are
	// routine; only denials are worth an info line.
	if v.Outcome.Allow() || v.Status() < 400 {
		if pl.log.Enabled(ctx, slog.LevelDebug) {
			pl.log.LogAttrs(ctx, slog.LevelDebug, "decided",
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
	// retryAfter overrides an Unavailable denial's Retry-After.
	retryAfter time.Duration
	// body, when set, is the answer's body (a re-authorization answer
	// the client understands) instead of the outcome's error.
	body []byte
	// dpop, for an InvalidToken about a DPoP-bound token or its proof, is
	// the error of the DPoP challenge (RFC 9449 section 7.1) that replaces
	// the Bearer one.
	dpop string
}

// deny builds a denial verdict with its challenge and body: a JSON-RPC error
// response carrying the request's id for JSON-RPC calls, a small JSON
// document otherwise.
func (p *Policy) deny(req *Request, r *Route, call *Call, d denial) Verdict {
	v := Verdict{Outcome: d.outcome, Description: d.desc}
	var routeScope, metadata string
	scheme := "Bearer"
	if r != nil {
		v.Route = r.Name
		routeScope = r.scopeParam
		metadata = r.metadataURL(req)
		if r.senderConstrained == config.SenderDPoP {
			scheme = "DPoP" // the only scheme a token may come with here
		}
	}
	switch d.outcome {
	case MissingToken:
		// RFC 6750 section 3.1: no error code when no credential was sent.
		v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "www-authenticate", Value: challenge(scheme, "", "", routeScope, metadata)})
	case InvalidToken:
		code := "invalid_token"
		if d.dpop != "" {
			scheme, code = "DPoP", d.dpop
		}
		v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "www-authenticate", Value: challenge(scheme, code, d.desc, routeScope, metadata)})
	case InsufficientScope:
		v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "www-authenticate", Value: challenge(scheme, "insufficient_scope", d.desc, d.scope, metadata)})
	case Unavailable:
		v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "retry-after", Value: "5"})
	}
	switch {
	case d.body != nil:
		if call != nil {
			v.Call = *call
		}
		v.Body = d.body
	case call != nil && call.jsonRPC():
		v.Call = *call
		v.Body = rpcErrorBody(call.ID, d)
	default:
		v.Body = jsonBody(d.outcome, d.desc, d.scope)
	}
	v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "content-type", Value: "application/json"})
	return v
}
