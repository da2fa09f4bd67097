package check

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/segment"
)

// The session header (x-session-id) names the conversation a workload keys
// its state on (say data/workspaces/{user}/{session}/). Identity
// providers disagree on where it lives: some tokens carry session_id; Dex,
// Keycloak, Auth0 and Entra put the OIDC session in sid; many tokens carry
// none. identity.session_sources is the ordered list
// of places to look; the first that names a session wins, and Explain says
// which one did. A token's claim is signed; the request's own ids
// (Mcp-Session-Id, the A2A contextId) are the client's word, so they are
// used only once session binding accepted them for this user: nobody can
// put their id into another user's workspace path.

// Session source kinds.
const (
	srcClaim = iota
	srcMCP
	srcA2A
	srcDefault
)

// sessionSource is one compiled entry of identity.session_sources.
type sessionSource struct {
	kind  int
	claim string // srcClaim: the claim's name
	name  string // as configured, for Explain
}

// perRequest reports whether the source is read from the request rather
// than from the token.
func (s sessionSource) perRequest() bool { return s.kind == srcMCP || s.kind == srcA2A }

func (p *Policy) compileSessionSources(id config.Identity) error {
	for _, src := range id.SessionSources {
		s := sessionSource{name: src}
		switch {
		case src == config.SessionSourceMCP:
			s.kind = srcMCP
		case src == config.SessionSourceA2A:
			s.kind = srcA2A
		case src == config.SessionSourceDefault:
			s.kind = srcDefault
		default:
			s.kind, s.claim = srcClaim, strings.TrimPrefix(src, config.SessionSourceClaim)
		}
		p.sessionSources = append(p.sessionSources, s)
	}
	if id.DefaultSession != "" {
		v, ok := p.sessionHeaderValue(id.DefaultSession)
		if !ok {
			return fmt.Errorf("identity.default_session %q cannot be a session header value", id.DefaultSession)
		}
		p.defaultSession = v
	}
	return nil
}

// sessionHeaderValue is v as the session header carries it (safe_values
// applied), or false when it cannot be one: control bytes, too long, or
// spaced at either end, which HTTP or the workload trims (" ctx" or
// "ctx\u00a0" would reach it as another session's "ctx": segment.Padded).
func (p *Policy) sessionHeaderValue(v string) (string, bool) {
	if v == "" || len(v) > p.identity.MaxHeaderValue || segment.Padded(v) {
		return "", false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c == 0x7f {
			return "", false
		}
	}
	out, err := p.ident.headerValue("session", v)
	return out, err == nil
}

// grantSession decides what the token alone says about the session: the
// first claim source with a value is the grant's Session (the key of
// invalidation and of exchanged tokens). When no source read from the
// request comes before the winner, the header is the grant's and costs
// nothing per request; otherwise each request picks (sessionFor).
func (p *Policy) grantSession(g *Grant, claims *jwtauth.Claims) error {
	g.sessionSource, g.sessionClaimIdx = -1, -1
	perRequest := false
	for i, src := range p.sessionSources {
		if src.perRequest() {
			perRequest = true
			continue
		}
		if src.kind == srcDefault {
			if !perRequest && p.defaultSession != "" {
				g.sessionSource = i
				break
			}
			continue
		}
		v, ok, err := p.claimValue(claims, src.claim)
		if err != nil {
			return err
		}
		if ok && v != "" {
			g.Session, g.sessionClaimIdx = v, i
			if !perRequest {
				g.sessionSource = i
			}
			break
		}
	}
	g.sessionPerRequest = g.sessionSource < 0 && perRequest
	return nil
}

// bindMessageContext binds the A2A context a message names to its caller
// and refuses it to anybody else (session_conflict), on a route that binds
// sessions. The agent keeps its conversation, and the tasks a list of the
// context returns, by the context, whatever names the session header: a
// token's session claim, which comes first there, must not leave the
// context open to another user's messages and lists. An id that cannot be
// a session header value is never bound (checkListedContext relies on it).
func (e *evaluation) bindMessageContext() *denial {
	id := e.call.ContextID // set for A2A calls alone (readCall)
	if id == "" {
		return nil
	}
	if _, good := e.p.sessionHeaderValue(id); !good {
		return nil
	}
	if d := e.bind(e.pl.state.sessions, bindContext, id); d != nil {
		return d
	}
	e.rec.add("bound", func() string { return "A2A context belongs to " + e.grant.Subject })
	return nil
}

// bindRequestState binds the requestState a 2026-07-28 retry sends back
// to the first user who sends it, and refuses anybody else's retry with
// it. The server resumes the round it left for its recipient from it
// (an elicitation answered, a step approved); SEP-2322 makes binding it
// to the user the server's duty, which the SDKs leave to configuration.
// Like a task id it is a capability whoever holds it could use. It is
// kept by its SHA-256, whatever its length.
func (e *evaluation) bindRequestState() *denial {
	st := e.call.requestState
	if st == "" || e.call.Protocol != jsonrpc.ProtocolMCP {
		return nil
	}
	sum := sha256.Sum256([]byte(st))
	if d := e.bind(e.pl.state.states, bindState, hex.EncodeToString(sum[:])); d != nil {
		return d
	}
	e.rec.add("bound", func() string { return "the requestState belongs to " + e.grant.Subject })
	return nil
}

// sessionFor picks the request's session from the sources in order. A
// request id is taken only once its binding accepted this user: the MCP
// session and the A2A context were bound by the session stage (or the
// source is skipped when the route does not bind sessions), so another
// user's is refused (session_conflict) rather than named.
func (e *evaluation) sessionFor() (value, from string) {
	p, r, call, g := e.p, e.route, &e.call, e.grant
	for i, src := range p.sessionSources {
		switch src.kind {
		case srcClaim:
			if i == g.sessionClaimIdx {
				v, _ := p.sessionHeaderValue(g.Session)
				if v != "" {
					return v, src.name
				}
				return "", ""
			}
		case srcMCP:
			sid := mcpSessionID(e.req)
			if sid == "" || !r.sessionBinding || call.Protocol == jsonrpc.ProtocolA2A {
				continue
			}
			if v, good := p.sessionHeaderValue(sid); good {
				return v, src.name
			}
		case srcA2A:
			if call.ContextID == "" || !r.sessionBinding {
				continue
			}
			if v, good := p.sessionHeaderValue(call.ContextID); good {
				return v, src.name
			}
		case srcDefault:
			if p.defaultSession != "" {
				return p.defaultSession, src.name
			}
		}
	}
	return "", ""
}

// without returns a copy of names without name: the slice may be the
// grant's, shared by every request.
func without(names []string, name string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n != name {
			out = append(out, n)
		}
	}
	return out
}

// applySessionID sets the session header of a grant whose session depends
// on the request. The grant's slices are shared by every request: the
// header is added to copies.
func (e *evaluation) applySessionID() *denial {
	g, v := e.grant, &e.v
	if !g.sessionPerRequest {
		from := "none"
		if g.sessionSource >= 0 {
			from = e.p.sessionSources[g.sessionSource].name
		}
		e.rec.add(from, func() string { return "decided by the token" })
		return nil
	}
	value, from := e.sessionFor()
	if value == "" {
		e.rec.add("none", func() string { return "no source names a session" })
		return nil
	}
	e.rec.add(from, func() string { return value })
	name := e.p.identity.SessionHeader
	v.Set = append(v.Set[:len(v.Set):len(v.Set)], Header{Name: name, Value: value})
	v.HeadersID = 0
	v.Remove = without(v.Remove, name)
	return nil
}
