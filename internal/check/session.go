package check

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
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

// mcpSessionID is the request's Mcp-Session-Id, read from the headers
// rather than from the classified call, so that no reading of the body can
// switch binding off.
func mcpSessionID(req *Request) string { return req.Headers.Get("mcp-session-id") }

// bindSession enforces that an MCP session is used only by the user who
// first used it.
func (e *evaluation) bindSession(ctx context.Context, r *Route, sid string, g *Grant) (denial, bool) {
	pl, req := e.pl, e.req
	key := session.Key(r.Name, sid)
	if e.readOnly {
		if b, bound := pl.sessions.Lookup(key); bound && b.Subject != g.Subject {
			return denial{outcome: SessionConflict, desc: "this MCP session belongs to another user"}, false
		}
		return denial{}, true
	}
	var res session.Result
	if pl.shared != nil {
		var d denial
		if res, d = e.bindShared(ctx, key, g); d.outcome == Unavailable {
			return d, false
		}
	} else {
		_, res = pl.sessions.Bind(key, g.Subject, func(b *session.Binding) {
			b.ElicitationURL, _ = pl.initURL.Get(cache.NewKey(r.Name, g.Subject))
		})
	}
	switch res {
	case session.Owned:
		if req.Method == "DELETE" {
			pl.endSession(e.p, g.Subject, sid)
		}
		return denial{}, true
	case session.Full:
		pl.log.LogAttrs(ctx, slog.LevelWarn, "session refused: the binding store is full",
			slog.String("route", r.Name), slog.String("user", g.Subject), slog.String("request_id", req.RequestID))
		if so, ok := pl.observer.(SessionObserver); ok {
			so.SessionRefused(r.Name)
		}
		return denial{outcome: Unavailable, desc: "too many MCP sessions are in use: retry later", retryAfter: pl.sessions.RetryAfter()}, false
	}
	pl.log.LogAttrs(ctx, slog.LevelWarn, "session hijack attempt",
		slog.String("route", r.Name), slog.String("user", g.Subject),
		slog.String("request_id", req.RequestID), slog.String("method", req.Method))
	if pl.observer != nil {
		pl.observer.SessionConflict(r.Name)
	}
	return denial{outcome: SessionConflict, desc: "this MCP session belongs to another user"}, false
}

// endSession drops what the service holds for a session its owner
// deleted: the owner's exchanged tokens and pending elicitations in it,
// nobody else's (an id is chosen by whoever uses it first, so another user
// may hold the same id on another route). The binding stays. Sealed tokens
// in Redis stay until they expire: they serve only this owner's token in
// this session, which the owner keeps.
func (pl *Pipeline) endSession(p *Policy, subject, sid string) {
	for _, ex := range p.exchangers {
		ex.DropOwnSession(subject, sid)
	}
	pl.elicitations.DropOwnSession(subject, sid)
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
