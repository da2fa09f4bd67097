package check

import (
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/config"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/session"
)

// MCP session binding (docs/sessions.md). ext_authz never sees the
// initialize response that creates a session id, so a session is bound to
// the first user seen with it, and every request carrying Mcp-Session-Id is
// checked against its binding, whatever its HTTP method and whatever its
// body looks like (MCP, A2A-shaped, unknown, none): the upstream routes by
// the header, not by the body. A binding is never dropped to make room for
// somebody else's, never expires before sessions.idle_timeout, and a DELETE
// does not end it (the server may answer 405 and keep the session): it only
// drops the session's exchanged tokens and pending elicitations.

// SessionObserver, when the pipeline's Observer implements it, counts
// sessions refused because the binding store is full.
type SessionObserver interface {
	SessionRefused(route string)
}

// SessionStatsObserver, when the pipeline's Observer implements it, counts
// session lookups (a hit: the caller's binding, or one it may join, was
// there; a miss: it was not) and the bindings created. Conflicts and
// refusals are counted by Observer.SessionConflict and SessionObserver.
type SessionStatsObserver interface {
	SessionLookup(route string, hit bool)
	SessionCreated(route string)
}

// mcpSessionID is the request's Mcp-Session-Id, read from the headers
// rather than from the classified call, so that no reading of the body can
// switch binding off.
func mcpSessionID(req *Request) string { return req.Headers.Get("mcp-session-id") }

// What a binding guards: an MCP session, an A2A context, a task. Each has
// its own key space on the route.
const (
	bindSession = "MCP session"
	bindContext = "A2A context"
	bindTask    = "task"
	bindState   = "requestState" // a 2026-07-28 retry's, by its SHA-256
)

// countsAsSession reports whether bindings of kind count in the session
// metrics: MCP sessions and A2A contexts do.
func countsAsSession(kind string) bool { return kind == bindSession || kind == bindContext }

// bindingKey is the store key of id of kind. It is not the route's: one
// server behind several routes (a path or a host with a policy of its own)
// knows a session, a task or an A2A context by its id on all of them, so a
// binding made on one route must hold on the others, or another user
// would bind the victim's id anew there. The ids are the servers' own,
// random and globally unique (MCP session ids must be); a client that
// chooses an A2A context id can only take ids nobody holds. Kinds are set
// apart by a part no header value can hold.
func bindingKey(kind, id string) string {
	switch kind {
	case bindContext:
		return session.Key("\x00a2a-context", id)
	case bindTask:
		return session.Key("\x00task", id)
	case bindState:
		return session.Key("\x00request-state", id)
	}
	return session.Key("", id)
}

// resumesOutsideSession reports whether req resumes a stream
// (Last-Event-ID) without Mcp-Session-Id on a route that binds sessions and
// may front an MCP server. Nothing binds such a stream to its owner: a
// server without sessions (the TypeScript SDK's transport with an event
// store and no sessionIdGenerator) replays whichever stream the event id
// names, to whoever sends it. The session stage refuses it (errOrphanResume),
// in JSON-RPC's shape (readCall).
func resumesOutsideSession(r *Route, req *Request) bool {
	return r.sessionBinding && (r.protocol == jsonrpc.ProtocolMCP || r.protocol == jsonrpc.ProtocolUnknown) &&
		req.Headers.Get("last-event-id") != "" && mcpSessionID(req) == ""
}

const errOrphanResume = "Last-Event-ID needs Mcp-Session-Id: a stream is resumed only inside its session"

// legacySessionID is the session id of MCP's HTTP+SSE transport (protocol
// 2024-11-05), which the SDKs still serve: the client posts each message
// to the endpoint the server named, with the session in the query
// (sessionId for TypeScript, session_id for Python, sessionid for Go), and
// the server runs it in that session. Every parameter named so, in any
// case and with or without "_", counts. It is bound as Mcp-Session-Id is, on routes that may
// front an MCP server. A query naming the session more than once, in one
// spelling or both, is ambiguous (the servers differ in which they read),
// and so is a query that cannot be read, and an id that is not visible
// ASCII, as Mcp-Session-Id must be (decoded, "%00" would name an id no
// header can): ok is false.
func legacySessionID(r *Route, req *Request) (sid string, ok bool) {
	if r.protocol != jsonrpc.ProtocolMCP && r.protocol != jsonrpc.ProtocolUnknown {
		return "", true
	}
	_, query, found := strings.Cut(req.Path, "?")
	// A name may arrive percent-encoded.
	if !found || !containsFold(query, "session") && strings.IndexByte(query, '%') < 0 {
		return "", true
	}
	values, err := url.ParseQuery(query)
	if err != nil {
		return "", false
	}
	names := 0
	for name, vs := range values {
		if strings.EqualFold(strings.ReplaceAll(name, "_", ""), "sessionid") {
			sid = vs[0]
			names += len(vs)
		}
	}
	return sid, names <= 1 && visibleASCII(sid)
}

// visibleASCII: every byte of s is 0x21-0x7E.
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

const (
	errLegacySession = "the query names the session more than once, names one that is not visible ASCII, or cannot be read"
	errTwoSessions   = "Mcp-Session-Id and the query's session id name different sessions: the server may run the call in either"
)

// bindSession enforces that an MCP session is used only by the user who
// first used it (or a delegate of theirs). Its owner's DELETE ends it.
func (e *evaluation) bindSession(sid string) *denial {
	if d := e.bind(e.pl.state.sessions, bindSession, sid); d != nil {
		return d
	}
	if e.req.Method == "DELETE" && !e.st.readOnly {
		for _, ex := range e.p.exchangers {
			ex.DropOwnSession(e.grant.Subject, sid)
		}
		e.st.endSession(e.grant.Subject, sid)
	}
	return nil
}

// bind binds id (of kind) in store to the user on first sight and refuses
// anybody else but the delegates sessions.delegates lets join the owner.
func (e *evaluation) bind(store *session.Store, kind, id string) *denial {
	r, g := e.route, e.grant
	key := bindingKey(kind, id)
	var initKey *cache.Key
	if kind == bindSession {
		k := cache.NewKey(r.Name, g.Subject)
		initKey = &k
	}
	owner, res, d := e.st.bind(e.ctx, store, key, g.Subject, e.p.perSubject, initKey)
	if d != nil {
		return d
	}
	stats, _ := e.observer.(SessionStatsObserver)
	if !countsAsSession(kind) {
		stats = nil // session metrics count sessions
	}
	switch res {
	case session.Owned:
		if stats != nil {
			stats.SessionLookup(r.Name, true)
		}
		return nil
	case session.Created:
		if stats != nil {
			stats.SessionLookup(r.Name, false)
			stats.SessionCreated(r.Name)
		}
		return nil
	case session.Full:
		if stats != nil {
			stats.SessionLookup(r.Name, false)
		}
		e.log.LogAttrs(e.ctx, slog.LevelWarn, "binding refused: the binding store is full",
			slog.String("kind", kind), slog.String("route", r.Name), slog.String("user", g.Subject), slog.String("request_id", e.req.RequestID))
		if so, ok := e.observer.(SessionObserver); ok && countsAsSession(kind) {
			so.SessionRefused(r.Name)
		}
		return &denial{outcome: Unavailable, desc: "too many " + kind + "s are in use: retry later", retryAfter: store.RetryAfter()}
	}
	if rule, ok := e.p.mayJoin(g, owner); ok {
		// A delegate's use keeps the owner's binding alive, as the
		// owner's own would.
		e.st.keepAlive(store, key, owner)
		if stats != nil {
			stats.SessionLookup(r.Name, true)
		}
		e.rec.add("delegate", func() string { return "joins " + owner + "'s " + kind + " by sessions.delegates " + rule })
		return nil
	}
	return e.conflict(kind)
}

// conflict refuses a binding of kind another user holds: logged as a
// hijack attempt, counted for sessions and contexts.
func (e *evaluation) conflict(kind string) *denial {
	r, g := e.route, e.grant
	e.log.LogAttrs(e.ctx, slog.LevelWarn, kind+" hijack attempt",
		slog.String("route", r.Name), slog.String("user", g.Subject),
		slog.String("request_id", e.req.RequestID), slog.String("method", e.req.Method))
	if e.observer != nil && countsAsSession(kind) {
		e.observer.SessionConflict(r.Name)
	}
	conflict := &denial{outcome: SessionConflict, desc: "this " + kind + " belongs to another user"}
	if !countsAsSession(kind) {
		conflict.outcome = Forbidden
	}
	return conflict
}

// delegate is a compiled sessions.delegates entry.
type delegate struct {
	name        string
	clientIDs   []string
	actSubjects []string
}

// mayJoin reports whether g may use a binding owner holds, and by which
// delegates rule: g's token names a configured delegate (its client id,
// or a subject in its act chain) and acts for owner (owner is in its act
// chain, read in g's issuer's subject space). Same-user tokens never get
// here: they own the binding.
func (p *Policy) mayJoin(g *Grant, owner string) (string, bool) {
	if owner == "" || len(g.Actors) == 0 {
		return "", false
	}
	for _, d := range p.delegates {
		named := p.ident.names(d.clientIDs, g.Issuer, g.ClientID)
		for _, a := range g.Actors {
			named = named || p.ident.names(d.actSubjects, g.Issuer, a)
		}
		if !named {
			continue
		}
		for _, a := range g.Actors {
			if u, err := p.ident.user(g.Issuer, a); err == nil && u == owner {
				return d.name, true
			}
		}
	}
	return "", false
}

// withRetryAfter sets v's Retry-After to d, rounded up to whole seconds,
// when d is set.
func withRetryAfter(v Verdict, d time.Duration) Verdict {
	if d <= 0 {
		return v
	}
	secs := strconv.Itoa(int((d + time.Second - 1) / time.Second))
	for i, h := range v.ResponseHeaders {
		if h.Name == "retry-after" {
			v.ResponseHeaders[i].Value = secs
			return v
		}
	}
	v.ResponseHeaders = append(v.ResponseHeaders, Header{Name: "retry-after", Value: secs})
	return v
}

func compileDelegates(ds []config.SessionDelegate) []delegate {
	out := make([]delegate, 0, len(ds))
	for i, d := range ds {
		name := d.Name
		if name == "" {
			name = "#" + strconv.Itoa(i)
		}
		out = append(out, delegate{name: name, clientIDs: slices.Clone(d.ClientIDs), actSubjects: slices.Clone(d.ActSubjects)})
	}
	return out
}
