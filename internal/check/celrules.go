package check

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/extauthz/extauthz/internal/authzen"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/oauthclient"
	"github.com/extauthz/extauthz/internal/policy"
	"github.com/extauthz/extauthz/internal/secrets"
)

// Rules with `when` (CEL) and `authzen` (an external decision point), see
// docs/policies.md. An expression that reads only the token is evaluated
// once, when the grant is made, and its result kept with the grant; the
// others run per request against an input built from the evaluation, only
// when a rule needs one.

// rulePDP is a rule's AuthZEN decision point.
type rulePDP struct {
	client    *authzen.Client
	arguments []string
}

// Results of identity-only expressions kept with a grant.
const (
	whenUnset uint8 = iota
	whenTrue
	whenFalse
	whenError
)

// compileRulePolicies compiles the when expressions and AuthZEN clients of
// route r's rules (rc.Rules, in the same order as r.rules) and records
// what grants must keep for them.
func (p *Policy) compileRulePolicies(r *Route, rc config.Route, d Deps) error {
	var errs []error
	for i, cr := range rc.Rules {
		ru := &r.rules[i]
		if cr.When != "" {
			if p.policyEnv == nil {
				env, err := policy.NewEnv(policy.Options{})
				if err != nil {
					return err
				}
				p.policyEnv = env
			}
			prg, err := p.policyEnv.Compile(cr.When)
			if err != nil {
				errs = append(errs, fmt.Errorf("route %s: rule %s: when: %w", r.Name, ru.name, err))
				continue
			}
			ru.when = prg
			claims, all := prg.Claims()
			for _, c := range claims {
				if !slices.Contains(r.ruleClaims, c) {
					r.ruleClaims = append(r.ruleClaims, c)
				}
			}
			r.allClaims = r.allClaims || all
			for _, h := range prg.Headers() {
				if !slices.Contains(r.ruleHeaders, h) && !listHeader(h) {
					r.ruleHeaders = append(r.ruleHeaders, h)
				}
			}
			if prg.IdentityOnly() {
				r.identityRules = append(r.identityRules, i)
			} else if slices.Contains(prg.Reads(), policy.VarJWT) {
				r.jwtPerRequest = true
			}
		}
		if z := cr.AuthZEN; z != nil {
			secret, err := secrets.Load(d.Getenv, z.ClientAuth.ClientSecretEnv, z.ClientAuth.ClientSecretFile)
			if err != nil {
				errs = append(errs, fmt.Errorf("route %s: rule %s: authzen: %w", r.Name, ru.name, err))
				continue
			}
			c, err := authzen.New(authzen.Config{
				Endpoint: z.Endpoint, Timeout: z.Timeout.D(), CacheTTL: z.CacheTTL.D(),
				ClientAuth: authzenClientAuth(z.ClientAuth, secret),
			}, authzen.Options{HTTPClient: d.HTTPClient, Now: d.Now, Logger: d.Logger})
			if err != nil {
				errs = append(errs, fmt.Errorf("route %s: rule %s: %w", r.Name, ru.name, err))
				continue
			}
			ru.pdp = &rulePDP{client: c, arguments: z.Arguments}
		}
	}
	return errors.Join(errs...)
}

func authzenClientAuth(c config.ExchangeClient, secret string) oauthclient.Config {
	return oauthclient.Config{Method: c.Method, ClientID: c.ClientID, ClientSecret: secret, PrivateKeyFile: c.PrivateKeyFile, KeyID: c.KeyID, Algorithm: c.Algorithm}
}

// grantPolicy evaluates route r's identity-only expressions for a new
// grant and keeps what per-request expressions read of the token.
func (p *Policy) grantPolicy(g *Grant, r *Route, c *jwtauth.Claims) {
	if r.allClaims {
		raw := c.All()
		names := slices.Sorted(maps.Keys(raw))
		g.Claims = make(RuleClaims, 0, len(names))
		for _, name := range names {
			g.Claims = append(g.Claims, RuleClaim{Name: name, Value: internClaim(raw[name])})
		}
	}
	if r.jwtPerRequest {
		g.jwt = make(map[string]any, len(g.Claims))
		for _, c := range g.Claims {
			g.jwt[c.Name] = c.Value
		}
	}
	if len(r.identityRules) == 0 {
		return
	}
	// The expressions read the claims the grant keeps (every one when
	// some expression reads jwt as a whole): the same view per-request
	// expressions get.
	in := policy.Input{JWT: g.jwtInput(), Identity: identityInput(g)}
	g.whenResults = make([]uint8, len(r.rules))
	for _, i := range r.identityRules {
		ok, err := r.rules[i].when.Eval(&in)
		g.whenResults[i] = whenResult(ok, err)
	}
}

func whenResult(ok bool, err error) uint8 {
	switch {
	case err != nil:
		return whenError
	case ok:
		return whenTrue
	}
	return whenFalse
}

func identityInput(g *Grant) policy.Identity {
	return policy.Identity{Issuer: g.Issuer, Subject: g.Subject, Session: g.Session, ClientID: g.ClientID, Scopes: g.Scopes, Actors: g.Actors}
}

// errIdentityPolicy is an identity-only expression that failed when the
// grant was made.
var errIdentityPolicy = errors.New("the rule's expression failed on this token")

// ruleWhen evaluates rule i's when expression for grant g; e is nil when
// no request is being decided (then only identity-only expressions can be
// decided, the others fail closed).
func (e *evaluation) ruleWhen(i int, ru *rule, g *Grant) (bool, error) {
	var ok bool
	var err error
	if g.whenResults != nil && g.whenResults[i] != whenUnset {
		switch g.whenResults[i] {
		case whenTrue:
			ok = true
		case whenError:
			err = errIdentityPolicy
		}
	} else if e == nil {
		err = errors.New("no request to evaluate the rule's expression on")
	} else {
		ok, err = ru.when.Eval(e.policyInput(ru.when))
	}
	if e != nil {
		e.rec.add("rule", func() string { return e.explainWhen(ru, ok, err) })
		if err != nil {
			// Debug: the decision log names the rule already, and a
			// caller can make every request fail.
			e.log.LogAttrs(e.ctx, slog.LevelDebug, "rule expression failed", slog.String("route", g.Route), slog.String("rule", ru.name),
				slog.String("request_id", e.req.RequestID), slog.String("error", err.Error()))
		}
	}
	return ok, err
}

// explainWhen describes one expression's evaluation: its source, the
// values it read and its result.
func (e *evaluation) explainWhen(ru *rule, ok bool, err error) string {
	result := fmt.Sprint(ok)
	if err != nil {
		result = "error: " + err.Error()
	}
	var values []string
	if e.grant != nil {
		values = ru.when.Values(e.policyInput(ru.when))
	}
	return fmt.Sprintf("%s: when %s => %s; read: %s", ru.name, ru.when.Source(), result, strings.Join(values, ", "))
}

// rulePDP asks rule ru's decision point about the call.
func (e *evaluation) rulePDP(ru *rule) (authzen.Decision, error) {
	if e == nil {
		return authzen.Decision{}, &authzen.UnavailableError{RetryAfter: time.Second}
	}
	in := e.policyInput(nil)
	if len(ru.pdp.arguments) > 0 && !in.MCP.BodyComplete && e.call.Protocol == jsonrpc.ProtocolMCP {
		// The decision point would judge the call without the arguments
		// it asked for: fail closed, as an expression reading them does.
		return authzen.Decision{}, errPDPArguments
	}
	if len(ru.pdp.arguments) > 0 && in.ArgumentsAmbiguous(ru.pdp.arguments) {
		// The tool may read another value than the decision point would
		// be shown: fail closed, as an expression reading it does.
		return authzen.Decision{}, errPDPArguments
	}
	if !e.pol.lineage {
		// The context always carries the lineage (docs/policies.md).
		e.pol.lineage = true
		in.Lineage = e.policyLineage()
	}
	req := authzen.Build(in, ru.pdp.arguments)
	ctx := e.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	evaluate := ru.pdp.client.Evaluate
	if e.st.readOnly {
		// Explain: the decision is not cached (nor counted).
		evaluate = ru.pdp.client.EvaluateNoStore
	}
	d, err := evaluate(ctx, req)
	e.rec.add("authzen", func() string {
		if err != nil {
			return ru.name + ": " + err.Error()
		}
		if d.Refused {
			return ru.name + ": the PDP refused to decide: " + d.Reason
		}
		return fmt.Sprintf("%s: the PDP decided %v (cached: %v) %s", ru.name, d.Allowed, d.Cached, d.Reason)
	})
	return d, err
}

// errPDPArguments: a rule's decision point asks for arguments the request
// does not carry whole, or carries under keys differing only in case.
var errPDPArguments = errors.New("the decision point needs the call's arguments, which the request does not carry whole and unambiguous")

// policyInput is the request as rule expressions see it, built once per
// evaluation when a rule first needs it. Lineage is derived only for an
// expression that reads it.
func (e *evaluation) policyInput(prg *policy.Program) *policy.Input {
	if e.pol == nil {
		e.pol = policyStates.Get().(*policyState)
	}
	ps := e.pol
	in := &ps.in
	if !ps.built {
		ps.built = true
		g, req, call := e.grant, e.req, &e.call
		in.JWT = g.jwt
		if e.rec.steps != nil {
			// Explanations show what identity-only expressions read.
			in.JWT = g.jwtInput()
		}
		in.Identity = identityInput(g)
		// Field by field: the input is large, and whole-struct copies of
		// it cost write barriers.
		rq := &in.Request
		rq.Method, rq.Host, rq.Headers = req.Method, req.Host, req.Headers
		rq.Path, _, _ = strings.Cut(req.Path, "?")
		rq.Source.Principal, rq.Source.Address = req.SourcePrincipal, req.SourceAddress
		in.Now = e.now
		switch call.Protocol {
		case jsonrpc.ProtocolMCP:
			in.MCP.Method, in.MCP.ProtocolVersion, in.MCP.Session = call.Method, call.ProtocolVersion, call.MCPSession
			if jsonrpc.IsURIMethod(call.Method) {
				in.MCP.URI = call.Name
			} else {
				in.MCP.Name = call.Name
			}
			if call.Body && !req.BodyPartial {
				in.MCP.BodyComplete = true
				if call.argsEnd > call.argsStart && call.argsEnd <= len(req.Body) {
					// The body is not modified during a check and nothing
					// the rules yield outlives it (values are copied where
					// kept: explanations, decision point requests), so the
					// arguments are read in place.
					args := req.Body[call.argsStart:call.argsEnd]
					in.MCP.Arguments = unsafe.String(unsafe.SliceData(args), len(args))
				}
			}
			ps.args, ps.complete = in.MCP.Arguments, in.MCP.BodyComplete
		case jsonrpc.ProtocolA2A:
			method, _ := jsonrpc.ClassifyA2A(call.Method)
			in.A2A = policy.A2A{Method: method, ContextID: call.ContextID, TaskID: call.TaskID, Skill: call.Skill, Tenant: call.Tenant}
		}
	}
	if e.call.Protocol == jsonrpc.ProtocolMCP && e.target.method != "" {
		// The call the rules are deciding: the request's own, or the tool
		// a task operation acts for, whose arguments the request does not
		// carry (an expression reading them fails closed).
		t := &e.target
		in.MCP.Method, in.MCP.Name, in.MCP.URI = t.method, t.name, ""
		if jsonrpc.IsURIMethod(t.method) {
			in.MCP.Name, in.MCP.URI = "", t.name
		}
		in.MCP.Arguments, in.MCP.BodyComplete = ps.args, ps.complete
		if t.method != e.call.Method {
			in.MCP.Arguments, in.MCP.BodyComplete = "", false
		}
	}
	if prg != nil && !ps.lineage && slices.Contains(prg.Reads(), policy.VarLineage) {
		ps.lineage = true
		in.Lineage = e.policyLineage()
	}
	return in
}

// policyLineage is the request's lineage for rule expressions, derived as
// the lineage stage will derive it (which runs after the rules) but minting
// nothing.
func (e *evaluation) policyLineage() policy.Lineage {
	g := e.grant
	if e.route.lineageOff {
		return policy.Lineage{Actors: g.Actors}
	}
	res, err := e.deriveLineage(true)
	if err != nil {
		// The lineage stage refuses this request; until then the rules
		// see no lineage.
		return policy.Lineage{Actors: g.Actors}
	}
	return policy.Lineage{Root: res.Root, Parent: res.Parent, Depth: res.Depth, Actors: res.ActorChain, Trusted: res.Trusted}
}

// policyStates recycles policy inputs: one is taken by a check whose rules
// need one and cleared when the check ends (release).
var policyStates = sync.Pool{New: func() any { return new(policyState) }}

// releasePolicy returns the evaluation's policy input, cleared so that it
// keeps no request alive.
func (e *evaluation) releasePolicy() {
	if e.pol == nil {
		return
	}
	*e.pol = policyState{}
	policyStates.Put(e.pol)
	e.pol = nil
}

// policyState is what the rule expressions of one evaluation share.
type policyState struct {
	in         policy.Input
	built      bool
	lineage    bool
	retryAfter time.Duration // of an AuthZEN denial
	// args and complete are the request's own arguments, which the input
	// shows only while the call being authorized is the request's.
	args     string
	complete bool
}

// CanCall answers whether the caller of grant g could make a call of
// method (tools/call, prompts/get, resources/read) to name (a tool or prompt
// name, a canonical resource URI) on the grant's route at all, for list
// filtering and explanations; annotations are a tool's as its server
// listed them (nil when unknown). It answers Allowed, Denied, or
// DependsOnArguments when the rules' expressions decide on the call's
// arguments, or on the request, lineage or a decision point, none of which
// a listing knows. An entry is Denied only when no call could pass,
// which includes a rule (allow or deny) whose expression fails on what the
// listing knows: the call would be refused there (PolicyError).
func (pl *Pipeline) CanCall(g *Grant, method, name string, annotations map[string]any) policy.Decision {
	r, ok := pl.policy.Load().routes.ByName(g.Route)
	if !ok {
		return policy.Denied
	}
	var in callInput
	return r.canCall(g, method, name, annotations, pl.now, &in)
}

// callInput is the policy input canCall evaluates rule expressions on. It
// is built only when an expression must be evaluated, and its grant part
// (jwt, identity) only once, so that the entries of one list share it.
// Not safe for concurrent use.
type callInput struct {
	in    policy.Input
	built bool
	// rules are the indexes of the route's rules that match method by
	// method alone (the names are matched per entry): a list's entries
	// all stand for calls of one method.
	route   *Route
	method  string
	rules   []int
	matched bool
	buf     [8]int // rules' storage for routes with few rules
}

// rulesFor returns the indexes of r's rules whose methods match method.
func (c *callInput) rulesFor(r *Route, method string) []int {
	if c.matched && c.route == r && c.method == method {
		return c.rules
	}
	meanings := jsonrpc.Meanings(method, r.rpcProtocol())
	if c.rules == nil {
		c.rules = c.buf[:0]
	}
	c.route, c.method, c.rules, c.matched = r, method, c.rules[:0], true
	for i := range r.rules {
		if r.rules[i].matchesMethod(method, meanings) {
			c.rules = append(c.rules, i)
		}
	}
	return c.rules
}

// matchesName is the name half of rule.matches, for a rule whose methods
// already match.
func (ru *rule) matchesName(method, name string) bool {
	names := ru.namesFor(method)
	return len(names) == 0 || anyGlob(names, name)
}

// namesFor is the rule's name globs as matched for method: canonical URI
// patterns for a resource method.
func (ru *rule) namesFor(method string) []string {
	if ru.uriNames != nil && jsonrpc.IsURIMethod(method) {
		return ru.uriNames
	}
	return ru.names
}

// jwtInput is what rule expressions read as jwt for g: the token's
// claims when some expression reads jwt as a whole, else the claims the
// grant kept (nil when none: expressions read nil as an empty map).
func (g *Grant) jwtInput() map[string]any {
	if g.jwt != nil {
		return g.jwt
	}
	return g.Claims.asMap()
}

// asMap returns the claims by name (nil when there are none).
func (c RuleClaims) asMap() map[string]any {
	if len(c) == 0 {
		return nil
	}
	m := make(map[string]any, len(c))
	for _, cl := range c {
		m[cl.Name] = cl.Value
	}
	return m
}

// input returns the input for a call of method to name by the caller of g,
// at now(). g must be the same for every call on one callInput.
func (c *callInput) input(g *Grant, method, name string, annotations map[string]any, now func() time.Time) *policy.Input {
	if !c.built {
		c.in = policy.Input{JWT: g.jwtInput(), Identity: identityInput(g)}
		c.built = true
	}
	c.in.Now = now()
	c.in.MCP = policy.MCP{Method: method, Name: name, Annotations: annotations}
	if jsonrpc.IsURIMethod(method) {
		c.in.MCP.Name, c.in.MCP.URI = "", name
	}
	return &c.in
}

// canCallUnknown are the variables a listing knows nothing of.
var canCallUnknown = []string{policy.VarRequest, policy.VarLineage, policy.VarA2A}

// canCall is CanCall on route r. now is read only when an expression is
// evaluated, and ci is the input expressions are evaluated on.
func (r *Route) canCall(g *Grant, method, name string, annotations map[string]any, now func() time.Time, ci *callInput) policy.Decision {
	if !g.scopeOK {
		return policy.Denied
	}
	depends := false
	final := policy.Allowed
	if r.defaultDeny {
		final = policy.Denied
	}
	for _, i := range ci.rulesFor(r, method) {
		ru := &r.rules[i]
		if !ru.matchesName(method, name) {
			continue
		}
		when, failed := policy.Allowed, false
		if ru.when != nil {
			var known bool
			if when, failed, known = cachedWhen(g, i); !known {
				when, failed = canCallWhen(ru, ci.input(g, method, name, annotations, now))
			}
		}
		if failed {
			// The call would be refused here (PolicyError), a deny rule's
			// as much as an allow rule's: the entry is hidden alike.
			final = policy.Denied
			break
		}
		if ru.deny {
			if when == policy.Denied {
				continue // the deny rule does not apply
			}
			if when == policy.Allowed {
				final = policy.Denied
				break
			}
			depends = true // some calls are denied here, others go on
			continue
		}
		switch {
		case !hasAll(g.Scopes, ru.scopes), !claimsHold(g, ru), when == policy.Denied:
			final = policy.Denied
		case ru.pdp != nil || when == policy.DependsOnArguments:
			final = policy.DependsOnArguments
		default:
			final = policy.Allowed
		}
		break
	}
	if depends && final != policy.Denied {
		return policy.DependsOnArguments
	}
	return final
}

func claimsHold(g *Grant, ru *rule) bool {
	for _, req := range ru.claims {
		if !claimHasAny(g.Claims.Get(req.claim), req.values) {
			return false
		}
	}
	return true
}

// cachedWhen is rule i's expression as decided when the grant was made
// (identity-only expressions), failed when it could not be evaluated;
// known is false when it was not decided then.
func cachedWhen(g *Grant, i int) (d policy.Decision, failed, known bool) {
	if g.whenResults == nil || g.whenResults[i] == whenUnset {
		return policy.Denied, false, false
	}
	switch g.whenResults[i] {
	case whenTrue:
		return policy.Allowed, false, true
	case whenError:
		return policy.Denied, true, true
	}
	return policy.Denied, false, true
}

// canCallWhen is CanCall for one rule's expression; failed when it cannot
// be evaluated whatever the arguments (what depends on them is
// DependsOnArguments): every call would fail closed on it.
func canCallWhen(ru *rule, in *policy.Input) (d policy.Decision, failed bool) {
	d, err := ru.when.CanCall(in, canCallUnknown...)
	if err != nil {
		return policy.Denied, true
	}
	return d, false
}

// explainCanCall records, in explanations of a tools/call on a route with
// rule expressions, whether the caller could call the tool at all.
func (e *evaluation) explainCanCall() {
	if e.rec.steps == nil || e.call.Method != "tools/call" || e.p.policyEnv == nil {
		return
	}
	e.rec.add("can-call", func() string {
		return fmt.Sprintf("%s, whatever the arguments: %v", e.call.Name, e.pl.CanCall(e.grant, "tools/call", e.call.Name, nil))
	})
}
