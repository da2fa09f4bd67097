package check

import (
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/lineage"
	"github.com/extauthz/extauthz/internal/policy"
)

// The signed tools header (docs/tools-header.md). A proxy without a
// response filter (nginx, Caddy, Traefik) cannot hide the tools a caller may
// not use from the server's tools/list answer, so the server filters it
// itself: every allowed request of a route with tools_header carries a
// compact JWT, signed with the lineage key, naming the route's configured
// tools that the caller's rules do not deny whatever the arguments
// (Route.canCall). It goes on every request, not only on tools/list: behind
// nginx auth_request and Caddy the service does not see the body, so it
// cannot tell a tools/list from another call.

// ToolsTokenType is the JOSE "typ" of the tools token: neither a lineage
// token nor an access token passes for one, nor the other way round.
const ToolsTokenType = "extauthz-tools+jwt"

// routeTools is a route's tools_header.
type routeTools struct {
	names  []string // the tools evaluated, as configured
	header string
	ttl    time.Duration
}

func compileRouteTools(c *config.ToolsHeader) *routeTools {
	if c == nil {
		return nil
	}
	return &routeTools{names: slices.Clone(c.Tools), header: c.Header, ttl: c.TTL.D()}
}

// toolsMemo is a grant's last tools token and the headers carrying it: a
// repeated request of the grant reuses both while the token is fresh, and
// the token alone when the headers it extends changed.
type toolsMemo struct {
	id, baseID uint64 // the HeadersID of set and remove, and of the headers they extend
	token      string
	refresh    time.Time // sign anew from then on: half the token's lifetime
	set        []Header
	remove     []string
}

// toolsHeader sets the route's signed tools header on the allowed request.
func (e *evaluation) toolsHeader() *denial {
	rt := e.route.tools
	if rt == nil || e.p.signer == nil {
		return nil
	}
	g, now := e.grant, e.now
	m := g.memo().tools.Load()
	if m != nil && now.Before(m.refresh) && e.v.HeadersID != 0 && m.baseID == e.v.HeadersID {
		e.v.Set, e.v.Remove, e.v.HeadersID = m.set, m.remove, m.id
		e.rec.add("reused", func() string {
			return "the tools token signed before, valid until " + m.refresh.UTC().Format(time.RFC3339)
		})
		return nil
	}
	var token string
	var refresh time.Time
	if m != nil && now.Before(m.refresh) {
		token, refresh = m.token, m.refresh
	} else {
		var tools, depends []string
		var err error
		token, refresh, tools, depends, err = e.signTools(rt, now)
		if err != nil {
			// Without the header the server lists nothing: fail closed
			// there, and the client's copy is still removed.
			e.log.LogAttrs(e.ctx, slog.LevelWarn, "signing the tools header failed", slog.String("route", e.route.Name), slog.String("error", err.Error()))
			return nil
		}
		e.rec.add("signed", func() string {
			return fmt.Sprintf("%d of %d tools callable %v, %d of them depending on arguments %v", len(tools), len(rt.names), tools, len(depends), depends)
		})
	}
	set := make([]Header, 0, len(e.v.Set)+1)
	set = append(set, e.v.Set...)
	set = append(set, Header{Name: rt.header, Value: token})
	remove := make([]string, 0, len(e.v.Remove))
	for _, name := range e.v.Remove {
		if name != rt.header {
			remove = append(remove, name)
		}
	}
	baseID := e.v.HeadersID
	e.v.Set, e.v.Remove, e.v.HeadersID = set, remove, 0
	if baseID != 0 && !e.st.readOnly {
		// Headers shared by the grant's requests: worth keeping.
		e.v.HeadersID = nextMemoID()
		g.memoForWrite(e.pl.memos).tools.Store(&toolsMemo{id: e.v.HeadersID, baseID: baseID, token: token, refresh: refresh, set: set, remove: remove})
	} else if !e.st.readOnly && (m == nil || m.token != token) {
		// Headers made for this request alone: keep only the token.
		g.memoForWrite(e.pl.memos).tools.Store(&toolsMemo{token: token, refresh: refresh})
	}
	return nil
}

// signTools evaluates the route's tools for the grant and signs the token:
// iss the lineage issuer, sub the user as the user header carries it, aud
// the route, iat and exp (the route's ttl, never beyond the grant),
// tools the names not denied, depends those of them whose rules decide on
// the call's arguments (or the request, lineage, a decision point).
func (e *evaluation) signTools(rt *routeTools, now time.Time) (token string, refresh time.Time, tools, depends []string, err error) {
	g, r := e.grant, e.route
	clock := func() time.Time { return now }
	var in callInput // shared by the names: one input, rebuilt per call
	for _, name := range rt.names {
		switch r.canCall(g, "tools/call", name, nil, clock, &in) {
		case policy.Allowed:
			tools = append(tools, name)
		case policy.DependsOnArguments:
			tools = append(tools, name)
			depends = append(depends, name)
		}
	}
	exp := now.Add(rt.ttl)
	if ge := g.Expires(); !ge.IsZero() && ge.Before(exp) {
		exp = ge
	}
	sub := g.Subject
	if len(g.set) > 0 {
		sub = g.set[0].Value // the user header (newGrant sets it first)
	}
	c := make([]byte, 0, 128+16*len(tools))
	c = append(c, `{"iss":`...)
	c = lineage.AppendJSONString(c, e.p.signer.Issuer())
	c = append(c, `,"sub":`...)
	c = lineage.AppendJSONString(c, sub)
	c = append(c, `,"aud":`...)
	c = lineage.AppendJSONString(c, r.Name)
	c = append(c, `,"iat":`...)
	c = strconv.AppendInt(c, now.Unix(), 10)
	c = append(c, `,"exp":`...)
	c = strconv.AppendInt(c, exp.Unix(), 10)
	c = appendNames(append(c, `,"tools":`...), tools)
	if len(depends) > 0 {
		c = appendNames(append(c, `,"depends":`...), depends)
	}
	c = append(c, '}')
	token, err = e.p.signer.SignJWT(ToolsTokenType, c)
	return token, now.Add(exp.Sub(now) / 2), tools, depends, err
}

// appendNames appends a JSON array of strings.
func appendNames(b []byte, names []string) []byte {
	b = append(b, '[')
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = lineage.AppendJSONString(b, n)
	}
	return append(b, ']')
}

// toolsHeaderClash reports whether the route's tools header is one the
// service sets or reads otherwise (configuration validation catches most;
// the lineage names and API-key headers are known only here).
func (p *Policy) toolsHeaderClash(r *Route, id config.Identity) bool {
	h := r.tools.header
	taken := []string{id.UserHeader, id.SessionHeader, DryRunHeader, DecisionIDHeader, hAuthorization, hMCPSession, hCookie, r.credentials.Header}
	for _, ch := range r.claimHeaders {
		taken = append(taken, ch.Header)
	}
	return slices.Contains(taken, h) || slices.Contains(p.lineageNames.Owned(), h)
}
