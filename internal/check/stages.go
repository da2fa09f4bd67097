package check

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/credential"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/lineage"
)

// evaluation is one decision in progress: the request, what the stages
// found so far, and the allow being built.
type evaluation struct {
	pl  *Pipeline
	p   *Policy
	req *Request
	// ctx is the check's context, bounded by limits.check_deadline once a
	// stage needs the network (see withBudget); budget, when set, is that
	// bound, released with the evaluation.
	ctx    context.Context
	budget *budget
	// now is the check's instant, read once: the cache's lookups and
	// writes and the rules see the same time.
	now time.Time
	// st is the decision's access to the state, log and observer where it
	// reports: Explain's view writes nothing, its log discards and it has
	// no observer, so explaining a request changes nothing.
	st       view
	log      *slog.Logger
	observer Observer
	// rec is Explain's account of the stages; Check's records nothing.
	rec recorder
	// pol is what rule expressions read of the request, built when one
	// first needs it (celrules.go).
	pol *policyState

	route *Route
	// call is the request's JSON-RPC call once the call stage read it
	// (callRead); before that a denial echoes early, what canonical and
	// headers could tell of it (earlyCall), if anything.
	call     Call
	callRead bool
	early    *Call
	token    string
	// target is the call the rules are deciding (authorizeFor): the
	// request's own, or the tool a task operation acts for.
	target struct{ method, name string }
	// signed is the inbound signed lineage token once verified (signedOK),
	// verified at most once per check (signedChecked): see deriveLineage.
	signed                  lineage.Carried
	signedChecked, signedOK bool
	// actor is the workload (peer stage) presenting the user's token on
	// routes that need both: the grant names it as the outermost actor.
	actor string
	grant *Grant
	hit   bool // the grant (or refusal) came from the cache
	// scheme is how token was presented (binding); beside hit, in its
	// padding, with inKeyHeader: the token was read from the route's
	// API-key header (Route.keyHeader).
	scheme      credential.Scheme
	inKeyHeader bool
	// v is the answer once a stage gave one directly (answered), else the
	// allow the later stages add headers to.
	v        Verdict
	answered bool
	// decidedBy is 1 + the index of the rule that decided the call, 0 when
	// none did; rateLimit is the id of the limit that refused the request.
	decidedBy int
	rateLimit string
}

// decide runs the stages in order. Each decides one thing and returns a
// denial, which ends the decision, or nil; metadata and public may answer
// directly instead. Adding a stage is a method and a line here. The
// verdict is e.v: a Verdict is large (800 bytes), and returning it would
// copy it at every level on its way out.
func (e *evaluation) decide() {
	defer e.release()
	switch {
	case e.run("canonical", e.canonical),
		e.run("metadata", e.metadata),
		e.run("route", e.findRoute),
		e.run("headers", e.headers),
		e.run("public", e.public),
		e.run("call", e.readCall),
		e.run("peer", e.peerIdentity),
		e.run("credential", e.credential),
		e.run("identity", e.identify),
		e.run("binding", e.binding),
		e.run("authorize", e.authorize),
		e.run("session", e.session),
		e.run("tasks", e.tasks),
		e.run("lineage", e.lineage),
		e.run("limits", e.limits),
		e.run("session-id", e.sessionID),
		e.run("exchange", e.exchange),
		e.run("tools-header", e.toolsHeader):
		return
	}
	e.v.Call = e.call
	e.v.Rule = e.ruleName()
}

// ruleName is the name of the rule that decided, "" when none did.
func (e *evaluation) ruleName() string {
	if e.decidedBy == 0 || e.route == nil {
		return ""
	}
	return e.route.rules[e.decidedBy-1].name
}

// run runs one stage and reports whether it ended the decision: with a
// denial (e.v becomes the denial verdict) or a direct answer.
func (e *evaluation) run(name string, stage func() *denial) bool {
	e.rec.stage = name
	if d := stage(); d != nil {
		e.rec.add(d.outcome.String(), func() string { return d.desc })
		e.v = e.deny(d)
		return true
	}
	return e.answered
}

// deny builds the verdict of a denial: one place, whatever the stage.
func (e *evaluation) deny(d *denial) Verdict {
	call := e.early
	if e.callRead {
		call = &e.call
	}
	v := e.p.deny(e.req, e.route, call, *d)
	v.Grant, v.CacheHit = e.grant, e.hit
	v.Rule, v.RateLimit, v.ExchangeAudience = e.ruleName(), e.rateLimit, e.v.ExchangeAudience
	// A denial after the lineage stage (limits, exchange) belongs to the
	// conversation it derived: the audit record names it.
	v.Lineage = e.v.Lineage
	return withRetryAfter(v, d.retryAfter)
}

// answer ends the decision with v: a direct answer, not a denial.
func (e *evaluation) answer(v Verdict) {
	e.v, e.answered = v, true
}

func (e *evaluation) release() {
	e.releasePolicy()
	if e.budget != nil {
		e.budget.release()
	}
}

// canonical refuses a request whose host or path has more than one reading
// (canonical.go).
func (e *evaluation) canonical() *denial {
	if d := canonicalRequest(e.req); d != nil {
		e.early = earlyCall(e.req)
		return d
	}
	return nil
}

// metadata answers RFC 9728 protected resource metadata requests.
func (e *evaluation) metadata() *denial {
	if v, ok := e.p.protectedResource(e.req); ok {
		e.rec.add("answered", func() string { return "protected resource metadata of route " + v.Route })
		e.answer(v)
	}
	return nil
}

// findRoute picks the route: named by context_extensions, else by host and
// path, refusing a path an upstream may read as another route's
// (route.Table.Lookup).
func (e *evaluation) findRoute() *denial {
	r, ok, variantOf := e.p.lookupRoute(e.req)
	if variantOf != "" {
		e.rec.add("variant", func() string { return "an upstream may read the path as route " + variantOf + "'s" })
		e.early = earlyCall(e.req)
		return &denial{outcome: Malformed, desc: errRouteVariant, rpcCode: jsonrpc.CodeInvalidRequest}
	}
	if !ok {
		return &denial{outcome: NoRoute, desc: "no route for this request"}
	}
	e.route = r
	e.rec.add(r.Name, func() string { return routeReason(e.req) })
	return nil
}

// headers refuses headers an upstream could read differently from us
// (repeated single-valued headers, forged owned ones: headers.go).
func (e *evaluation) headers() *denial {
	d := e.p.ambiguousHeader(e.route, e.req)
	if d == nil && !e.route.forwardAuthorization && queryToken(e.req.Path) {
		d = headerDenial(errQueryToken)
	}
	if d != nil {
		e.early = earlyCall(e.req)
		return d
	}
	return nil
}

// public lets requests to the route's public paths through without a
// token. A JSON-RPC call is never public (unless the route declares plain
// HTTP): an MCP server serving every path would run it. Nor is a body we
// were not given, which may be one.
func (e *evaluation) public() *denial {
	r := e.route
	if !r.isPublic(e.req.Path) || (r.protocol != jsonrpc.ProtocolHTTP && (looksLikeCall(e.req) || withheld(e.req))) {
		return nil
	}
	if d := ambiguousAuthorization(e.req); d != nil {
		return d
	}
	e.rec.add("yes", func() string { return "public path: no token needed" })
	e.answer(Verdict{Outcome: Public, Route: r.Name, Remove: r.publicRemove()})
	return nil
}

// readCall reads the JSON-RPC call (rpc.go) and refuses one that is
// malformed or not in canonical form.
func (e *evaluation) readCall() *denial {
	call, bad := readCall(e.route, e.req)
	e.call, e.callRead = call, true
	if bad != nil {
		return &denial{outcome: Malformed, desc: bad.desc, rpcCode: bad.code}
	}
	if d := canonicalCall(&e.call); d != nil {
		return d
	}
	if e.call.Protocol != jsonrpc.ProtocolUnknown {
		e.rec.add(e.call.Protocol.String(), func() string {
			return fmt.Sprintf("method %q name %q (from body: %v)", e.call.Method, e.call.Name, e.call.Body)
		})
	}
	return nil
}

// credential finds the bearer token where the route takes it.
func (e *evaluation) credential() *denial {
	if e.grant != nil {
		return nil // the workload is the caller (peerIdentity)
	}
	r := e.route
	token, scheme, place, err := credential.Find(e.req.Headers, r.credentials)
	if r.tokenInMeta && e.call.metaToken != "" {
		// Opt-in: some agent frameworks put the token in the tool call,
		// and their servers read it there. The body goes upstream as it
		// is, so the token in it must be the one verified.
		if e.call.metaTokensDiffer {
			return headerDenial("the call carries two different tokens, in params._meta.authorization and params.arguments._metadata.authorization")
		}
		switch {
		case errors.Is(err, credential.ErrMissing):
			token, err = credential.Check(metaBearer(e.call.metaToken))
		case err == nil && metaBearer(e.call.metaToken) != token:
			return headerDenial("the token in the call's params differs from the request's credential")
		}
	}
	if err != nil {
		return e.badCredential(err)
	}
	if r.forwardAuthorization && credential.Elsewhere(e.req.Headers, r.credentials, token) {
		// Forwarded, every place a credential can be in reaches the
		// upstream, which may read another than the one verified.
		return headerDenial("the request carries a different credential in another place (Authorization, " + r.credentials.Places() + ")")
	}
	e.token, e.scheme, e.inKeyHeader = token, scheme, r.keyHeader && place == credential.InHeader
	e.rec.add("found", func() string { return fmt.Sprintf("bearer token of %d bytes", len(token)) })
	return nil
}

// badCredential is the denial for a credential that cannot be used: a
// request with more than one Authorization is refused as ambiguous first,
// whichever of them was unusable.
func (e *evaluation) badCredential(err error) *denial {
	if d := ambiguousAuthorization(e.req); d != nil {
		return d
	}
	if errors.Is(err, credential.ErrMissing) {
		return &denial{outcome: MissingToken}
	}
	return &denial{outcome: InvalidToken, desc: err.Error()}
}

// identify turns the token into a grant: from the cache, else verified
// (signature and claims) and cached, never the raw token. A refusal is
// cached too; a broken dependency is not.
func (e *evaluation) identify() *denial {
	if e.grant != nil {
		return nil // the workload is the caller (peerIdentity)
	}
	r := e.route
	key := verdictKey(r, e.token, e.inKeyHeader, e.actor)
	var found cached
	entry, hit := e.lookup(key, &found)
	if !hit {
		// Only tokens not seen before need their syntax checked: every
		// cached one passed this.
		if err := credential.Syntax(e.token); err != nil {
			return e.badCredential(err)
		}
		e.ctx, e.budget = e.withBudget(e.ctx) // see budget.go
		entry = &found
		e.pl.verify(e.ctx, e.p, r, presented{token: e.token, inKeyHeader: e.inKeyHeader, actor: e.actor}, e.st.readOnly, entry)
		entry.routeKey = r.keyPrefix
		if entry.outcome == Unavailable {
			// A broken dependency is not a property of the token.
			return &denial{outcome: Unavailable, desc: entry.description, retryAfter: entry.retryAfter}
		}
		if !e.st.readOnly && !entry.passing {
			e.pl.remember(e.p, key, entry, e.now)
		}
	}
	e.hit = hit
	if entry.grant == nil {
		return &denial{outcome: entry.outcome, desc: entry.description}
	}
	g := entry.grant
	what := "token"
	if g.APIKeyID != "" {
		what = "API key"
	}
	if d := e.pl.state.admit(g, what); d != nil {
		return d
	}
	e.grant = g
	e.v = Verdict{Outcome: Allowed, Route: r.Name, Grant: g, CacheHit: hit, Set: g.set, Remove: g.remove, HeadersID: grantHeaders}
	e.rec.add(g.Subject, func() string {
		return fmt.Sprintf("issuer %s (kind %s), session %q, expires %s (cached: %v)", g.Issuer, e.p.issuerKind(g.Issuer), g.Session, g.Expires().UTC().Format(time.RFC3339), hit)
	})
	return nil
}

// lookup reads the verdict cache; Explain's reads leave its counters alone.
func (e *evaluation) lookup(key cache.Key, dst *cached) (*cached, bool) {
	if e.st.readOnly {
		return e.pl.peek(key, dst, e.now)
	}
	return e.pl.lookup(key, dst, e.now)
}

// authorize applies the route's required scopes, then its rules to the
// call (first match decides) and to the answers it carries to the server's
// requests (authorizeAnswers).
func (e *evaluation) authorize() *denial {
	r, g, call := e.route, e.grant, &e.call
	if !g.scopeOK {
		return &denial{outcome: InsufficientScope, desc: "the token lacks a required scope", scope: r.scopeParam}
	}
	if r.protocol == jsonrpc.ProtocolA2A && r.bindsTasks && carriesBody(e.req) && !call.Body {
		// Only the body names an A2A call: one the front end withheld,
		// whatever headers name it, would pass task ownership unread. An
		// empty POST is no JSON-RPC call at all (HTTP+JSON's CancelTask).
		desc := errA2AWithheld
		if !withheld(e.req) {
			desc = errNotA2AJSONRPC
		}
		return &denial{outcome: Malformed, desc: desc, rpcCode: jsonrpc.CodeInvalidRequest}
	}
	switch {
	case call.Method != "":
		e.explainCanCall()
		o, desc, scope := e.authorizeCall(r, g, call)
		if o != Allowed {
			d := &denial{outcome: o, desc: desc, scope: scope}
			if e.pol != nil {
				d.retryAfter = e.pol.retryAfter
			}
			return d
		}
		if desc := r.uncheckedHeaders(call); desc != "" && r.hasRules() {
			// Mcp-Method and Mcp-Name without the body are the client's
			// claim: allow on them only when the upstream checks them.
			return &denial{outcome: Malformed, desc: desc, rpcCode: jsonrpc.CodeInvalidRequest}
		}
		if d := e.authorizeAnswers(r, g, call); d != nil {
			return d
		}
		e.rec.add(o.String(), func() string { return desc })
	case call.answers != 0:
		// A response the client POSTs, answering the server's request.
		return e.authorizeAnswers(r, g, call)
	case r.protocol == jsonrpc.ProtocolUnknown && call.Protocol == jsonrpc.ProtocolUnknown &&
		(r.hasRules() || e.p.taskOwnership) && a2aServicePath(e.req.Path):
		// A2A's gRPC binding (and Connect's, on the same paths) names the
		// method in the path and the task in a protobuf body: neither the
		// rules nor task ownership can see what it does.
		return &denial{outcome: Malformed, desc: errA2AGRPC}
	case carriesBody(e.req) && call.Protocol != jsonrpc.ProtocolUnknown && !call.Body && r.hasRules():
		// Rules cannot be applied to a call nobody can name: fail closed.
		return &denial{outcome: Malformed, desc: errUnknownMethod, rpcCode: jsonrpc.CodeInvalidRequest}
	case r.protocol == jsonrpc.ProtocolA2A && (call.Body || e.req.Method != "POST") && (r.hasRules() || e.p.taskOwnership):
		// A2A's JSON-RPC binding is a POSTed request, and A2A clients
		// answer no server request. Any other request an agent serves is
		// a call of another binding (HTTP+JSON: GET /v1/tasks/{id} is
		// GetTask, and a body shaped as a JSON-RPC response may carry its
		// message) or an SDK's own route (GET
		// /agent/authenticatedExtendedCard), which neither the rules nor
		// task ownership can see. The agent card was answered as public;
		// a POST without its body is the case above.
		return &denial{outcome: Malformed, desc: errNotA2AJSONRPC, rpcCode: jsonrpc.CodeInvalidRequest}
	}
	return nil
}

// session binds the MCP session, and the A2A context a message names, to
// the user who first used it and refuses anybody else (session.go).
func (e *evaluation) session() *denial {
	r, g := e.route, e.grant
	if e.call.Method == "initialize" {
		// The session id comes back in the response, which ext_authz never
		// sees: remember the capability for the session about to be bound.
		e.st.rememberInit(cache.NewKey(r.Name, g.Subject), e.call.ElicitationURL)
	}
	sid := mcpSessionID(e.req)
	if !r.sessionBinding {
		return nil
	}
	if d := e.bindMessageContext(); d != nil {
		return d
	}
	if d := e.bindRequestState(); d != nil {
		return d
	}
	// The query's session id is read whether or not the header names one:
	// an HTTP+SSE server routes a message by the query alone, and would
	// run it in the session the query names, whatever the header says.
	querySID, ok := legacySessionID(r, e.req)
	switch {
	case !ok:
		return &denial{outcome: Malformed, desc: errLegacySession, rpcCode: jsonrpc.CodeInvalidRequest}
	case querySID != "" && sid != "" && querySID != sid:
		return &denial{outcome: Malformed, desc: errTwoSessions, rpcCode: jsonrpc.CodeInvalidRequest}
	}
	legacy := false
	if sid == "" {
		if resumesOutsideSession(r, e.req) {
			return &denial{outcome: Malformed, desc: errOrphanResume, rpcCode: jsonrpc.CodeInvalidRequest}
		}
		if querySID == "" {
			return nil
		}
		sid, legacy = querySID, true
	}
	// response_path routes bind a session at its birth (response.go); an
	// HTTP+SSE session is born in an event of its stream, which is not
	// read, so it is bound on first use.
	if !legacy && e.pl.sessionUnborn(e.ctx, r, sid) {
		return &denial{outcome: UnknownSession, desc: "unknown session: initialize a new one"}
	}
	if d := e.bindSession(sid); d != nil {
		return d
	}
	e.rec.add("bound", func() string { return "MCP session belongs to " + g.Subject })
	return nil
}

// tasks binds tasks to their creator and refuses anybody else, and
// refuses a task list that may list other users' tasks: one filtered by
// another user's context, and one nothing scopes to the caller, where the
// upstream may keep every user's together (tasks.go).
func (e *evaluation) tasks() *denial {
	if d := e.bindTasks(); d != nil {
		return d
	}
	if d := e.checkListContext(); d != nil {
		return d
	}
	return e.checkUnscopedList()
}

// lineage derives the request's place in its conversation and adds the
// lineage headers.
func (e *evaluation) lineage() *denial {
	if e.route.lineageOff {
		return nil
	}
	if d := e.applyLineage(); d != nil {
		return d
	}
	e.rec.add("derived", func() string {
		l := &e.v.Lineage
		return fmt.Sprintf("root %q parent %q depth %d actors %v (trusted: %v)", l.Root, l.Parent, l.Depth, l.ActorChain, l.Trusted)
	})
	return nil
}

// sessionID sets the session header a request's own ids decide
// (sessionid.go).
func (e *evaluation) sessionID() *denial { return e.applySessionID() }

// exchange swaps the upstream's Authorization for a token issued for it,
// or asks the user to authorize first (exchange.go).
func (e *evaluation) exchange() *denial {
	r := e.route
	if r.exchange == nil || !r.exchange.needed(&e.call, r.uncheckedHeaders(&e.call) == "") {
		return nil
	}
	return e.applyExchange()
}

// discard is Explain's logger.
var discard = slog.New(slog.DiscardHandler)

// Step is one stage of a decision, as Explain reports it.
type Step struct {
	Name    string // the stage: route, credential, identity, authorize, session, ...
	Outcome string // what the stage concluded
	Detail  string
}

// recorder is Explain's account of a decision. Check's is the zero value:
// it records nothing, and since details are functions it formats nothing
// either.
type recorder struct {
	steps *[]Step
	stage string // the stage running
}

// add records a step of the running stage.
func (r *recorder) add(outcome string, detail func() string) {
	if r.steps != nil {
		*r.steps = append(*r.steps, Step{Name: r.stage, Outcome: outcome, Detail: detail()})
	}
}

// Explain decides req like Check but without side effects (no cache
// entries written, no session bound or ended, nothing logged or counted)
// and reports every stage, and on a route with a response path what it
// would do with the answer. A dry-run route's verdict is the real decision.
func (pl *Pipeline) Explain(ctx context.Context, req *Request) (Verdict, []Step) {
	var steps []Step
	e := evaluation{pl: pl, p: pl.policy.Load(), req: req, ctx: ctx, now: pl.now(), rec: recorder{steps: &steps},
		st: view{s: pl.state, readOnly: true}, log: discard}
	e.decide()
	v := e.v
	e.explainResponse(&v)
	e.rec.stage = "verdict"
	e.rec.add(v.Outcome.String(), func() string { return fmt.Sprintf("HTTP %d %s", v.Status(), v.Description) })
	return v, steps
}
