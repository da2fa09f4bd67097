package check

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/secrets"
)

// ConsentTTL is how long a completed authorization counts as consent.
const ConsentTTL = 12 * time.Hour

// routeExchange is a route's compiled token exchange.
type routeExchange struct {
	ex           *exchange.Exchanger
	target       exchange.Target
	methods      []string
	meanings     []bool // the methods (jsonrpc.Methods) the globs name
	tools        []toolExchange
	agents       []agentExchange
	authorizeURL string
	message      string
}

// agentExchange is a per-agent override (a sub-agent gets its own
// audience): it is applied over the tool's, so the agent's fields win.
type agentExchange struct {
	clientIDs   []string
	actSubjects []string
	principals  []string // exact, or a prefix ending in /*
	override    exchange.Target
}

// matches reports whether the caller is this agent: its azp/client_id or
// its token's current actor (actor, Grant.currentActor), read in its
// issuer's namespace (identityPolicy.names), or its mTLS principal. Prior
// actors, nested deeper in act, are informational only (RFC 8693 section
// 4.1): an agent that was handed the delegation is not the one before it.
func (a *agentExchange) matches(ip *identityPolicy, g *Grant, principal, actor string) bool {
	if ip.names(a.clientIDs, g.Issuer, g.ClientID) {
		return true
	}
	if actor != "" && ip.names(a.actSubjects, g.Issuer, actor) {
		return true
	}
	if principal == "" {
		return false
	}
	for _, p := range a.principals {
		if prefix, ok := strings.CutSuffix(p, "/*"); ok {
			if strings.HasPrefix(principal, prefix+"/") {
				return true
			}
		} else if p == principal {
			return true
		}
	}
	return false
}

type toolExchange struct {
	names   []string
	target  exchange.Target
	consent bool
}

// compileExchanges builds one Exchanger per configured STS.
func compileExchanges(f *config.File, d Deps) (map[string]*exchange.Exchanger, error) {
	out := make(map[string]*exchange.Exchanger, len(f.Exchanges))
	var errs []error
	for _, x := range f.Exchanges {
		clientSecret, err := secrets.Load(d.Getenv, x.ClientAuth.ClientSecretEnv, x.ClientAuth.ClientSecretFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("exchange %s: %w", x.Name, err))
			continue
		}
		ex, err := exchange.New(exchange.Config{
			TokenEndpoint: x.TokenEndpoint, Issuer: x.Issuer,
			Auth: exchange.ClientAuth{Method: x.ClientAuth.Method, ClientID: x.ClientAuth.ClientID, ClientSecret: clientSecret,
				PrivateKeyFile: x.ClientAuth.PrivateKeyFile, KeyID: x.ClientAuth.KeyID, Algorithm: x.ClientAuth.Algorithm},
			SubjectTokenType: x.SubjectTokenType, RequestedTokenType: x.RequestedTokenType,
			ActorTokenFile: x.ActorTokenFile, ActorTokenType: x.ActorTokenType,
			Timeout: x.Timeout.D(), SafetyMargin: x.SafetyMargin.D(), RefreshAhead: x.RefreshAhead.D(),
			BreakerFailures: x.BreakerFailures, BreakerCooldown: x.BreakerCooldown.D(), CacheSize: x.CacheSize, CachePerSubject: x.CachePerSubject,
			Budget: f.Limits.CheckDeadline.D(), MaxWaiting: f.Limits.MaxWaitingPerDependency,
		}, exchangeOptions(d))
		if err != nil {
			errs = append(errs, fmt.Errorf("exchange %s: %w", x.Name, err))
			continue
		}
		out[x.Name] = ex
	}
	if err := errors.Join(errs...); err != nil {
		for _, ex := range out {
			ex.Close()
		}
		return nil, err
	}
	return out, nil
}

func compileRouteExchange(rc *config.RouteExchange, exchangers map[string]*exchange.Exchanger) (*routeExchange, error) {
	if rc == nil {
		return nil, nil
	}
	re := &routeExchange{
		ex:           exchangers[rc.STS],
		target:       exchange.Target{Audience: rc.Audience, Resource: rc.Resource, Scope: rc.Scope},
		methods:      rc.Methods,
		meanings:     expandMethods(rc.Methods),
		authorizeURL: rc.AuthorizeURL,
		message:      rc.Message,
	}
	if re.message == "" {
		re.message = "Authorization is required before this call can go ahead. Open the link, authorize, then retry."
	}
	if err := re.target.Validate(); err != nil {
		return nil, err
	}
	for _, t := range rc.Tools {
		target := re.target.Override(exchange.Target{Audience: t.Audience, Resource: t.Resource, Scope: t.Scope})
		if err := target.Validate(); err != nil {
			return nil, err
		}
		re.tools = append(re.tools, toolExchange{names: t.Names, target: target, consent: t.Consent})
	}
	for i, a := range rc.Agents {
		if len(a.ClientIDs)+len(a.ActSubjects)+len(a.Principals) == 0 {
			return nil, fmt.Errorf("agents[%d]: name client_ids, act_subjects or principals", i)
		}
		for _, p := range a.Principals {
			if p == "" || strings.Contains(strings.TrimSuffix(p, "/*"), "*") {
				return nil, fmt.Errorf("agents[%d]: principal %q: exact, or a prefix ending in /*", i, p)
			}
		}
		o := exchange.Target{Audience: a.Audience, Resource: a.Resource, Scope: a.Scope}
		if err := re.target.Override(o).Validate(); err != nil {
			return nil, err
		}
		re.agents = append(re.agents, agentExchange{clientIDs: a.ClientIDs, actSubjects: a.ActSubjects, principals: a.Principals, override: o})
	}
	if re.authorizeURL != "" {
		if _, err := elicit.WithState(re.authorizeURL, "x"); err != nil {
			return nil, err
		}
	}
	return re, nil
}

// needed reports whether this request needs the exchanged token: never on
// public paths (handled before), only for the marked methods when there are.
// A method that is unknown (no body, no Mcp-Method), or only claimed by a
// header the upstream does not check, may be any of the marked ones: the
// request is exchanged rather than let through without the token. Methods
// are matched by every meaning their name has, as rules on auto routes are:
// exchanging for one call too many never leaks the inbound token.
func (re *routeExchange) needed(call *Call, headersTrusted bool) bool {
	if len(re.methods) == 0 || call.Method == "" || (!call.Body && !headersTrusted) {
		return true
	}
	return matchMethod(re.methods, re.meanings, call.Method, jsonrpc.Meanings(call.Method, jsonrpc.ProtocolUnknown))
}

// targetFor picks the tool's override for MCP tools/call (tool is the
// tool's name when one applies), then the calling agent's over it.
func (re *routeExchange) targetFor(ip *identityPolicy, call *Call, g *Grant, principal, actor string) (target exchange.Target, consent bool, tool string) {
	target, _, consent, tool = re.pickTarget(ip, call, g, principal, actor)
	return target, consent, tool
}

// pickTarget is targetFor, also saying which override won ("route",
// "tool", "agent #i"), for Explain.
func (re *routeExchange) pickTarget(ip *identityPolicy, call *Call, g *Grant, principal, actor string) (target exchange.Target, by string, consent bool, tool string) {
	target, by = re.target, "route"
	if call.Method == "tools/call" {
		for _, t := range re.tools {
			if anyGlob(t.names, call.Name) {
				target, by, consent, tool = t.target, "tool "+call.Name, t.consent, call.Name
				break
			}
		}
	}
	for i := range re.agents {
		if re.agents[i].matches(ip, g, principal, actor) {
			return target.Override(re.agents[i].override), "agent #" + strconv.Itoa(i), consent, tool
		}
	}
	return target, by, consent, tool
}

// consentKey names what a consent or pending elicitation is for.
func consentKey(r *Route, tool string) string {
	if tool == "" {
		return r.Name
	}
	return r.Name + "/tool:" + tool
}

// applyExchange replaces the upstream Authorization with a token issued for
// the upstream, or denies: a re-authorization answer when the user must
// authorize first.
func (e *evaluation) applyExchange() *denial {
	ctx, r, call, g := e.ctx, e.route, &e.call, e.grant
	re := r.exchange
	if desc := r.uncheckedHeaders(call); desc != "" && len(re.tools) > 0 && e.req.Method == "POST" {
		// The tool picks the token and the consent; a tool only claimed
		// by a header (or unknown) must not get the route's default one.
		return &denial{outcome: Malformed, desc: desc, rpcCode: jsonrpc.CodeInvalidRequest}
	}
	target, needsConsent, tool := re.targetFor(&e.p.ident, call, g, e.req.SourcePrincipal, g.currentActor(e.actor != ""))
	e.v.ExchangeAudience = strings.Join(target.Audience, " ") // for the audit record
	if needsConsent && !e.st.hasConsent(ctx, g.Subject, consentKey(r, tool)) {
		e.rec.add("consent required", func() string { return tool })
		return e.reauthorize(consentKey(r, tool))
	}
	if e.st.readOnly {
		e.rec.add("not run", func() string {
			_, by, _, _ := re.pickTarget(&e.p.ident, call, g, e.req.SourcePrincipal, g.currentActor(e.actor != ""))
			return fmt.Sprintf("explain never calls the STS; audience %v resource %v by the %s override", target.Audience, target.Resource, by)
		})
		return nil
	}
	tok, err := re.ex.Exchange(ctx, e.token, target, exchange.Owner{Subject: g.Subject, Session: call.MCPSession, TokenSession: g.Session})
	if err != nil {
		kind := exchange.KindOf(err)
		e.rec.add(kind.String(), err.Error)
		switch kind {
		case exchange.InteractionRequired:
			return e.reauthorize(consentKey(r, tool))
		case exchange.Unauthorized:
			return &denial{outcome: InvalidToken, desc: "the token cannot be exchanged for the upstream"}
		case exchange.Forbidden:
			return &denial{outcome: Forbidden, desc: "no token can be issued for the upstream"}
		}
		d := &denial{outcome: Unavailable, desc: "the token service is unavailable"}
		var xe *exchange.Error
		if errors.As(err, &xe) {
			d.retryAfter = xe.RetryAfter
		}
		return d
	}
	e.rec.add("exchanged", func() string {
		return fmt.Sprintf("token for %v %v expires %s", target.Audience, target.Resource, tok.ExpiresAt.UTC().Format(time.RFC3339))
	})
	e.withAuthorization(g, tok.Authorization)
	return nil
}

// withAuthorization sets the exchanged Authorization upstream (overwriting,
// like every header) and takes it off the remove list. The slices of the
// last exchange of this grant are reused while the token and the headers
// it adds to (the verdict's HeadersID) stay the same, so repeated requests
// keep sharing one response.
func (e *evaluation) withAuthorization(g *Grant, authorization string) {
	v := &e.v
	baseID := v.HeadersID
	if m := g.memo().exchanged.Load(); baseID != 0 && m != nil && m.baseID == baseID && m.authorization == authorization {
		v.Set, v.Remove, v.HeadersID = m.set, m.remove, m.id
		return
	}
	out := make([]Header, 0, len(v.Set)+1)
	out = append(out, v.Set...)
	out = append(out, Header{Name: "authorization", Value: authorization})
	rm := make([]string, 0, len(v.Remove))
	for _, name := range v.Remove {
		if name != "authorization" {
			rm = append(rm, name)
		}
	}
	v.Set, v.Remove, v.HeadersID = out, rm, 0
	if baseID == 0 {
		return // headers made for this request alone
	}
	m := &exchangeMemo{id: nextMemoID(), baseID: baseID, authorization: authorization, set: out, remove: rm}
	g.memoForWrite(e.pl.memos).exchanged.Store(m)
	v.HeadersID = m.id
}

// exchangeMemo is the header mutations of a grant's last exchanged token.
type exchangeMemo struct {
	id, baseID    uint64 // the HeadersID of set and remove, and of the headers they extend
	authorization string
	set           []Header
	remove        []string
}

// reauthorize answers a request whose upstream needs the user to authorize
// first, in the form the client understands (re-authorization inside the
// session): a URL elicitation (-32042) for MCP clients that declared it, an
// isError tool result for other MCP tools/call, a JSON-RPC error for A2A,
// else 403.
func (e *evaluation) reauthorize(key string) *denial {
	r, call, g := e.route, &e.call, e.grant
	re := r.exchange
	forbidden := &denial{outcome: Forbidden, desc: "the user must authorize the upstream first"}
	if re.authorizeURL == "" || call.Protocol == jsonrpc.ProtocolUnknown {
		return forbidden
	}
	pending, err := e.st.beginElicitation(e.ctx, g.Issuer, g.Subject, call.MCPSession, key, re.authorizeURL)
	var full *elicit.FullError
	switch {
	case errors.As(err, &full):
		// The store is full of other users' pending ones, none of which is
		// dropped for this one.
		return &denial{outcome: Unavailable, desc: "too many authorizations are pending; retry later",
			retryAfter: max(full.RetryAfter, time.Second)}
	case err != nil:
		return forbidden
	}
	d := &denial{outcome: AuthorizationRequired, desc: forbidden.desc}
	switch {
	case call.Protocol == jsonrpc.ProtocolA2A:
		d.body = elicit.A2AAuthRequired(call.ID, pending, re.message)
	case call.ElicitationURL || (call.MCPSession != "" && e.st.sessionElicitsURL(bindingKey(bindSession, call.MCPSession))):
		d.body = elicit.URLElicitationError(call.ID, pending, re.message)
	case call.Method == "tools/call":
		d.body = elicit.ToolResultAuthRequired(call.ID, pending, re.message)
	default:
		return forbidden
	}
	return d
}

// CompleteElicitation records that the user finished the authorization of
// a pending elicitation (called back by whatever handled the OAuth
// redirect), here or on another replica. state must be the one the
// authorization URL carried: it is signed for this elicitation and its user,
// so the id alone, or another user's state, completes nothing. It returns
// the completed elicitation, elicit.ErrNotPending, or the state's error
// (elicit.ErrStateMissing, ErrStateInvalid, ErrStateExpired).
func (pl *Pipeline) CompleteElicitation(ctx context.Context, id, state string) (elicit.Pending, error) {
	return pl.state.completeElicitation(ctx, id, state)
}

func exchangeOptions(d Deps) exchange.Options {
	o := exchange.Options{HTTPClient: d.HTTPClient, Logger: d.Logger, Now: d.Now, OnCall: d.OnSTSCall}
	if d.Shared != nil {
		o.Shared = sharedTokens{d.Shared}
	}
	return o
}
