package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/canon"
	"github.com/extauthz/extauthz/internal/credential"
	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/mcpresponse"
	"github.com/extauthz/extauthz/internal/policy"
	"github.com/extauthz/extauthz/internal/session"
)

// The response path (docs/extproc.md): a front end that also sees the
// upstream's answer (Envoy's ext_proc filter, internal/extprocauthz) asks
// the pipeline who the request was allowed for, then what to do with the
// answer. Nothing here allows a request: a request the check did not allow
// is never treated as allowed, and every doubt leaves the answer to be
// refused by the caller.

// Identity is the caller of an allowed request as the check's dynamic
// metadata named it (Envoy forwards ext_authz's namespace to ext_proc).
// Outcome must be Allowed's name: anything else is not an allowed request.
type Identity struct {
	Route, Outcome                     string
	Subject, Issuer, Session, ClientID string
	Scopes                             []string
	// IssuedAt and APIKeyID are what revocation judges the grant by, as
	// the check's grant has them.
	IssuedAt time.Time
	APIKeyID string
	// Claims are the claims the route's rules look at.
	Claims RuleClaims
}

// Exchange is one allowed request whose response is being processed: the
// route, the caller's grant and the JSON-RPC call the request carried. It
// keeps the policy the request was decided under: a reload while the
// answer is under way changes nothing of what is done with it (route,
// rules, exchangers, task ownership, per-user bounds).
type Exchange struct {
	pl    *Pipeline
	p     *Policy
	route *Route
	grant *Grant
	// Call is the request's JSON-RPC call (Protocol jsonrpc.ProtocolUnknown
	// when it carried none).
	Call Call

	// in is Keep's policy input, shared by the entries of the lists.
	in callInput
	// readsMCP caches whether an expression of the route reads mcp (so
	// maybe mcp.annotations): 0 not yet known, 1 no, 2 yes.
	readsMCP uint8
}

// Response errors: why a request's response cannot be processed as allowed.
var (
	ErrNoRoute    = errors.New("check: no route for this request")
	ErrNotAllowed = errors.New("check: the request was not allowed")
	ErrOverloaded = errors.New("check: too many checks in progress")
	// errNotLoadedResponse is ErrNotAllowed before the revocations are
	// read (LoadRevocations), saying why.
	errNotLoadedResponse = fmt.Errorf("%w: %s", ErrNotAllowed, errNotLoaded)
)

// ForResponse returns the allowed request req is, for processing its
// response. id is the identity the check put in its dynamic metadata (nil
// when none was forwarded); without one, the request's own token must have
// a grant in the verdict cache (the check that allowed it put it there).
// Either way the request must still pass what the check decided from its
// identity and call (route, scopes, revocation, rules), so that the
// response of a request the check refused is never processed as allowed.
// A route without a response path is ErrNoRoute.
//
// Like Check it is refused beyond limits.max_concurrent_checks
// (ErrOverloaded) and traced when a Tracer is set.
func (pl *Pipeline) ForResponse(ctx context.Context, req *Request, id *Identity) (x *Exchange, err error) {
	p := pl.policy.Load()
	if pl.shed(p) {
		return nil, ErrOverloaded
	}
	defer pl.inflight.Add(-1)
	if pl.tracer != nil {
		_, end := pl.tracer.StartCheck(ctx, req.Headers)
		defer func() {
			outcome, status, route, user := Allowed, 200, "", ""
			if err != nil {
				outcome, status = Forbidden, 403
			} else {
				route, user = x.route.Name, x.grant.Subject
			}
			end(route, "response:"+outcome.String(), status, user)
		}()
	}
	return pl.forResponse(ctx, p, req, id)
}

func (pl *Pipeline) forResponse(ctx context.Context, p *Policy, req *Request, id *Identity) (*Exchange, error) {
	if d := canonicalRequest(req); d != nil {
		return nil, ErrNotAllowed
	}
	// The check may have found its route by name (Envoy's
	// context_extensions, which ext_proc does not receive): the route it
	// names is the one it decided on.
	var r *Route
	ok := false
	if id != nil && id.Route != "" {
		if r, ok = p.routes.ByName(id.Route); !ok {
			return nil, ErrNotAllowed // a route since removed: nothing to go by
		}
	} else {
		var variantOf string
		if r, ok, variantOf = p.lookupRoute(req); variantOf != "" {
			return nil, ErrNotAllowed // the check refuses it (findRoute)
		}
	}
	if !ok || !r.responsePath {
		return nil, ErrNoRoute
	}
	call, bad := readCall(r, req)
	if bad != nil || canonicalCall(&call) != nil {
		return nil, ErrNotAllowed
	}
	var g *Grant
	now := pl.now()
	switch {
	case id != nil:
		if id.Outcome != Allowed.String() || id.Route != r.Name || id.Subject == "" {
			return nil, ErrNotAllowed
		}
		g = NewGrant(*id)
		g.scopeOK = hasAll(g.Scopes, r.scopes)
		if r.jwtPerRequest || r.allClaims || len(r.identityRules) > 0 {
			// What rule expressions read of the token, as the check's
			// grant kept it: the metadata carries the claims they read.
			p.grantPolicy(g, r, &jwtauth.Claims{Raw: id.Claims.asMap()})
		}
	default:
		token, _, place, err := credential.Find(req.Headers, r.credentials)
		if err != nil {
			return nil, ErrNotAllowed
		}
		var found cached
		entry, hit := pl.lookup(verdictKey(r, token, r.keyHeader && place == credential.InHeader, ""), &found, now)
		if !hit || entry.grant == nil {
			return nil, ErrNotAllowed
		}
		g = entry.grant
	}
	if !g.scopeOK {
		return nil, ErrNotAllowed
	}
	if d := pl.state.admit(g, "token"); d != nil {
		// Revoked, or whether the user is cannot be told yet: the
		// response is processed as nobody's, as a refused request's is.
		if d.outcome == Unavailable {
			return nil, errNotLoadedResponse
		}
		return nil, ErrNotAllowed
	}
	x := &Exchange{pl: pl, p: p, route: r, grant: g, Call: call}
	if call.Method != "" {
		e := x.evaluation(ctx, req, now)
		o, _, _ := e.authorizeCall(r, g, &e.call)
		e.releasePolicy()
		if o != Allowed {
			return nil, ErrNotAllowed
		}
	}
	return x, nil
}

// evaluation is a read-only evaluation of req under the exchange's policy,
// route, grant and call, at now: rule expressions read the request and the
// call through it, as the check's did. The caller releases its policy
// state (releasePolicy).
func (x *Exchange) evaluation(ctx context.Context, req *Request, now time.Time) evaluation {
	return evaluation{pl: x.pl, p: x.p, req: req, ctx: ctx, now: now, st: view{s: x.pl.state, readOnly: true}, log: x.pl.log,
		route: x.route, grant: x.grant, call: x.Call, callRead: true}
}

// Route is the name of the exchange's route.
func (x *Exchange) Route() string { return x.route.Name }

// Subject is the caller.
func (x *Exchange) Subject() string { return x.grant.Subject }

// FiltersLists reports whether list results of this route are filtered:
// the route asks for it (filter_lists, default on) and has rules to filter
// by.
func (x *Exchange) FiltersLists() bool { return x.route.filterLists && x.route.hasRules() }

// Keep is the list filter's predicate (mcpresponse.Predicate): could the
// caller use this entry? It is CanCall for the call the entry stands for
// (tools/call of a tool, with the annotations its server listed;
// prompts/get of a prompt; resources/read of a resource; skills/get of a
// skill, and resources/read of every file it describes): an entry goes
// only when no call to it could pass, whatever its arguments. A resource
// template names no one resource: it stays unless the rules decide
// resources/read the same way for every URI and refuse it.
//
// Keep is called once per entry: it allocates nothing of its own unless a
// rule expression must be evaluated, and decodes a tool's annotations only
// when an expression of the route reads mcp. It is not safe for
// concurrent use (one exchange filters one response).
func (x *Exchange) Keep(kind, name string, annotations json.RawMessage) bool {
	r, g, now := x.route, x.grant, x.pl.now
	switch kind {
	case mcpresponse.KindTool:
		var ann map[string]any
		if len(annotations) > 0 && x.expressionsReadMCP() {
			ann = decodeAnnotations(annotations)
		}
		return r.canCall(g, "tools/call", name, ann, now, &x.in) != policy.Denied
	case mcpresponse.KindPrompt:
		return r.canCall(g, "prompts/get", name, nil, now, &x.in) != policy.Denied
	case mcpresponse.KindResource:
		u, err := canon.URI(name)
		if err != nil {
			// No canonical form (dot segments, say): the client could not
			// read it through us either.
			return false
		}
		return r.canCall(g, "resources/read", u, nil, now, &x.in) != policy.Denied
	case mcpresponse.KindResourceTemplate:
		o, decided := r.authorizeAnyName(g, "resources/read")
		return !decided || o == Allowed
	case mcpresponse.KindSkill:
		// A listed skill tells what skills/get of it would: it stays
		// only for a caller who could get it.
		u, err := canon.URI(name)
		if err != nil || r.canCall(g, "skills/get", u, nil, now, &x.in) == policy.Denied {
			return false
		}
		o, _, _, _ := r.authorizeEveryName(nil, g, "resources/read", describedURIs("skills/get", u))
		return o == Allowed
	}
	return false
}

// RefusedServerRequests returns the server's requests an answer to req
// must not carry to the client, bit i standing for jsonrpc.ServerRequests[i]
// (mcpresponse.DropRequests): those whose answer the check would refuse,
// as authorizeAnswers does. Only a rule naming the request decides it (the
// route's default action is for the calls a client makes). The answer is
// not here yet: the rules are evaluated on req, the request the answer
// carrying them answers, once for the exchange, as the client's answer
// will come from the same client; the check still decides that answer
// when it comes. An A2A route, or an A2A call's answer, carries none.
func (x *Exchange) RefusedServerRequests(ctx context.Context, req *Request) uint8 {
	r := x.route
	if len(r.rules) == 0 || r.rpcProtocol() == jsonrpc.ProtocolA2A || x.Call.Method != "" && x.Call.Protocol != jsonrpc.ProtocolMCP {
		return 0 // no rule to name one (the default action decides none), or no MCP here
	}
	e := x.evaluation(ctx, req, x.pl.now())
	defer e.releasePolicy()
	var refused uint8
	for i, method := range jsonrpc.ServerRequests {
		if o, _, _, by := r.authorizeFor(&e, x.grant, method, ""); o != Allowed && by != 0 {
			refused |= 1 << i
		}
	}
	return refused
}

// decodeAnnotations decodes a tool's annotations; nil when they are not
// an object (the tool is then judged without them).
func decodeAnnotations(raw json.RawMessage) map[string]any {
	var ann map[string]any
	if json.Unmarshal(raw, &ann) != nil {
		return nil
	}
	return ann
}

// expressionsReadMCP reports whether a rule expression of the route reads
// the mcp variable: only then can a tool's annotations matter.
func (x *Exchange) expressionsReadMCP() bool {
	if x.readsMCP == 0 {
		x.readsMCP = 1
		for i := range x.route.rules {
			if w := x.route.rules[i].when; w != nil && slices.Contains(w.Reads(), policy.VarMCP) {
				x.readsMCP = 2
				break
			}
		}
	}
	return x.readsMCP == 2
}

// authorizeAnyName is authorize for a call whose name is unknown: the
// outcome, and whether it is the same whatever the name (false when a
// rule naming names could decide first).
func (rt *Route) authorizeAnyName(g *Grant, method string) (Outcome, bool) {
	meanings := jsonrpc.Meanings(method, rt.rpcProtocol())
	for i := range rt.rules {
		r := &rt.rules[i]
		if !r.matchesMethod(method, meanings) {
			continue
		}
		if len(r.namesFor(method)) > 0 {
			return 0, false
		}
		o, _, _ := rt.authorize(g, method, "")
		return o, true
	}
	if rt.defaultDeny {
		return Forbidden, true
	}
	return Allowed, true
}

// Reauthorization is the answer that replaces the upstream's refusal of
// the call (401, or 403 insufficient_scope; see ReauthorizationFor) on a
// route that exchanges tokens: the in-session re-authorization the
// exchange stage answers with when the token service asks for the user
// (a -32042 URL elicitation when the session declared it, the isError tool
// result for tools/call, the A2A error for A2A). The caller's exchanged
// tokens of the call's MCP session, or of none without one, are dropped
// first, here and in the shared tier (with the caller's elicitations
// there), so that the call retried after the user authorized gets a fresh
// one. Only the
// caller's: on a route without session binding the session id is anybody's
// to name. It
// reports false when there is nothing to answer with (no exchange or
// authorize_url on the route, a notification, a call that is not MCP
// tools/call without URL elicitation): the refusal then passes as sent.
func (x *Exchange) Reauthorization(ctx context.Context) ([]byte, bool) {
	pl, r, g, call := x.pl, x.route, x.grant, &x.Call
	re := r.exchange
	if re == nil || re.authorizeURL == "" || call.Protocol == jsonrpc.ProtocolUnknown || call.ID == nil {
		return nil, false
	}
	st := view{s: pl.state}
	elicitURL := call.ElicitationURL || (call.MCPSession != "" && st.sessionElicitsURL(bindingKey(bindSession, call.MCPSession)))
	if call.Protocol != jsonrpc.ProtocolA2A && !elicitURL && call.Method != "tools/call" {
		return nil, false
	}
	for _, ex := range x.p.exchangers {
		ex.DropOwnSession(g.Subject, call.MCPSession)
	}
	if pl.state.shared != nil {
		_, _ = pl.state.shared.DropOwnSession(ctx, g.Subject, call.MCPSession)
	}
	_, _, tool := re.targetFor(&x.p.ident, call, g, "", "") // only the tool is read
	pending, err := st.beginElicitation(ctx, g.Issuer, g.Subject, call.MCPSession, consentKey(r, tool), re.authorizeURL)
	if err != nil {
		return nil, false
	}
	pl.log.LogAttrs(ctx, slog.LevelInfo, "upstream refused the exchanged token: re-authorization answered",
		slog.String("route", r.Name), slog.String("user", g.Subject), slog.String("method", call.Method))
	if call.Protocol == jsonrpc.ProtocolA2A {
		return elicit.A2AAuthRequired(call.ID, pending, re.message), true
	}
	return mcpresponse.Reauthorization(call.ID, elicitURL, pending, re.message), true
}

// ReauthorizationFor reports whether an upstream answer with status and
// WWW-Authenticate header value is a refusal of the caller's (exchanged)
// token that re-authorization can cure: 401, or 403 with error
// insufficient_scope (RFC 6750 section 3.1).
func ReauthorizationFor(status int, wwwAuthenticate string) bool {
	return status == 401 || status == 403 && strings.Contains(wwwAuthenticate, "insufficient_scope")
}

// SessionBorn binds the MCP session the upstream created in its answer to
// this exchange's initialize request to the caller, with the URL
// elicitation capability the client declared. It reports false when the
// id is already another user's or there is no room (the caller then must
// not pass the id on), and when the exchange is not an initialize.
func (x *Exchange) SessionBorn(ctx context.Context, sid string) bool {
	s, r, g := x.pl.state, x.route, x.grant
	if x.Call.Method != "initialize" || sid == "" || len(sid) > maxSessionID {
		return false
	}
	key := bindingKey(bindSession, sid)
	url := x.Call.ElicitationURL
	if s.shared != nil {
		owner, owned, err := s.shared.Bind(ctx, key, g.Subject, s.sessionIdle+s.sessionIdle/2, x.p.perSubject)
		if err != nil || !owned {
			if err == nil {
				s.sessions.Put(key, session.Binding{Subject: owner, Confirmed: s.now()})
			}
			return false
		}
		return s.sessions.Put(key, session.Binding{Subject: g.Subject, Confirmed: s.now(), ElicitationURL: url})
	}
	owner, res := s.sessions.Bind(key, g.Subject, func(b *session.Binding) { b.ElicitationURL = url })
	if res == session.Owned && owner == g.Subject {
		s.sessions.Put(key, session.Binding{Subject: g.Subject, ElicitationURL: url})
	}
	if so, ok := x.pl.observer.(SessionStatsObserver); ok && res == session.Created {
		so.SessionCreated(r.Name)
	}
	return res.Accepted()
}

// maxSessionID bounds a session id taken from an upstream answer.
const maxSessionID = 512

// TaskCreatedBy binds a task the upstream created in its answer to this
// exchange's call to the caller (as Pipeline.TaskCreated, under the
// exchange's policy), with the tool of an MCP tools/call.
func (x *Exchange) TaskCreatedBy(ctx context.Context, taskID string) bool {
	if taskID == "" || len(taskID) > maxTaskID {
		return false
	}
	tool := ""
	if x.Call.Method == "tools/call" {
		tool = x.Call.Name
	}
	return x.pl.state.taskCreated(ctx, bindingKey(bindTask, taskID), x.grant.Subject, tool, x.p.perSubject)
}

// ContextCreatedBy binds the A2A context the upstream put this exchange's
// message in, as its answer names it, to the caller, as bindMessageContext
// binds a context the message names: when the message named none, the
// agent assigns one, which the check never saw, and anybody who learned it
// could otherwise list its tasks or talk in it. Same store, key and shared
// tier (view.bind), first sight only: a context another user holds stays
// theirs, even when the caller is their delegate. An id that cannot be a
// session header value is not bound, as by the check. It reports whether
// the caller holds the context.
func (x *Exchange) ContextCreatedBy(ctx context.Context, id string) bool {
	if !x.BindsContexts() {
		return false
	}
	if _, good := x.p.sessionHeaderValue(id); !good {
		return false
	}
	s, g := x.pl.state, x.grant
	owner, res, d := view{s: s}.bind(ctx, s.sessions, bindingKey(bindContext, id), g.Subject, x.p.perSubject, nil)
	if so, ok := x.pl.observer.(SessionStatsObserver); ok && d == nil && res == session.Created {
		so.SessionCreated(x.route.Name)
	}
	return d == nil && res.Accepted() && owner == g.Subject
}

// BindsContexts reports whether the call is an A2A message send naming no
// context on a route that binds sessions, whose answer's context is worth
// reading (ContextCreatedBy): the agent assigns one. A message naming its
// context had it bound by the check (bindMessageContext).
func (x *Exchange) BindsContexts() bool { return x.route.bindsContexts(&x.Call) }

// bindsContexts is BindsContexts for call on r.
func (r *Route) bindsContexts(call *Call) bool {
	return r.sessionBinding && call.Protocol == jsonrpc.ProtocolA2A && taskUses[call.Method] == taskSend && call.ContextID == ""
}

// sessionUnborn reports whether sid, presented on route r, must be refused
// because the route binds sessions at birth (response_path) and nobody saw
// this one created: no live binding here or, with a shared tier, on any
// replica. The session stage refuses such a request with 404, as MCP
// prescribes for unknown sessions, so that the client initializes again.
func (pl *Pipeline) sessionUnborn(ctx context.Context, r *Route, sid string) bool {
	if !r.responsePath {
		return false
	}
	s := pl.state
	key := bindingKey(bindSession, sid)
	if _, ok := s.sessions.Lookup(key); ok {
		return false
	}
	if s.shared == nil {
		return true
	}
	owner, found, err := s.shared.BindingOwner(ctx, key)
	if err != nil {
		// Unknown: the binding stage decides (it fails closed or, when
		// configured, binds on this replica).
		return false
	}
	if found {
		s.sessions.Put(key, session.Binding{Subject: owner, Confirmed: s.now()})
	}
	return !found
}

// BindsTasks reports whether tasks are bound to their creator
// (sessions.task_ownership), so that answers creating tasks are worth
// reading (TaskCreatedBy).
func (x *Exchange) BindsTasks() bool { return x.p.taskOwnership }
