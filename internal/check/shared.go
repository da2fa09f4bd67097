package check

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/session"
	"github.com/extauthz/extauthz/internal/shared"
)

// The shared tier (internal/shared, on Redis) sits behind the in-process
// stores: a local hit never touches it. It holds what must be the same on
// every replica: session bindings, pending elicitations and consents,
// exchanged tokens (sealed) and revocations. Verdicts of plain JWT
// validation stay local: they are cheap to recompute.

// sharedTokens adapts the shared tier to the exchanger's interface.
type sharedTokens struct{ s *shared.Store }

func (a sharedTokens) GetToken(ctx context.Context, key string) ([]byte, bool, error) {
	return a.s.GetToken(ctx, key)
}

func (a sharedTokens) PutToken(ctx context.Context, key string, o exchange.Owner, token []byte, ttl time.Duration) error {
	return a.s.PutToken(ctx, key, shared.Owner{Subject: o.Subject, Session: o.Session}, token, ttl)
}

// bindShared binds a session (or context, or task) across replicas: the
// first binding wins everywhere, and each user's bindings are bounded
// across replicas. The local store answers repeat requests and asks the
// shared tier again at half the idle time, which keeps the shared binding
// alive. With the tier unreachable, fail closed (503) or, configured, fall
// back to this replica alone. The shared tier is the truth: a local store
// too full to keep a copy only costs a round trip. It returns the owner.
func (e *evaluation) bindShared(store *session.Store, key string) (string, session.Result, *denial) {
	ctx, pl, g := e.ctx, e.pl, e.grant
	now := pl.now()
	if b, ok := store.Lookup(key); ok {
		if b.Subject != g.Subject {
			return b.Subject, session.Conflict, nil
		}
		if now.Sub(b.Confirmed) < pl.sessionIdle/2 {
			owner, res := store.Bind(key, g.Subject, nil) // extends the local idle time
			return owner, res, nil
		}
	}
	// Redis keeps the binding 1.5 idle: this replica goes back to it only
	// after idle/2, and a use in between extends the local binding by a
	// full idle, so the shared one must outlive both.
	owner, owned, err := pl.shared.Bind(ctx, key, g.Subject, pl.sessionIdle+pl.sessionIdle/2, e.p.perSubject)
	switch {
	case err != nil && pl.shared.FailOpen():
		pl.log.LogAttrs(ctx, slog.LevelWarn, "session store unavailable: binding on this replica only", slog.String("error", err.Error()))
		owner, res := store.Bind(key, g.Subject, nil)
		return owner, res, nil
	case err != nil:
		return "", session.Conflict, &denial{outcome: Unavailable, desc: "the session store is unavailable"}
	case !owned:
		store.Put(key, session.Binding{Subject: owner, Confirmed: now})
		return owner, session.Conflict, nil
	}
	_, known := store.Lookup(key)
	url, _ := pl.initURL.Get(cache.NewKey(e.route.Name, g.Subject))
	store.Put(key, session.Binding{Subject: g.Subject, Confirmed: now, ElicitationURL: url})
	if known {
		return g.Subject, session.Owned, nil
	}
	// New to this replica: created here or on another one.
	return g.Subject, session.Created, nil
}

// shareElicitation lets another replica complete a pending elicitation.
func (pl *Pipeline) shareElicitation(ctx context.Context, p elicit.Pending) {
	if pl.shared == nil {
		return
	}
	if b, err := json.Marshal(p); err == nil {
		_ = pl.shared.PutElicitation(ctx, p.ID, shared.Owner{Subject: p.Subject, Session: p.Session}, b, time.Until(p.Expires))
	}
}

// sharedElicitation finds a pending elicitation another replica started.
func (pl *Pipeline) sharedElicitation(ctx context.Context, id string) (elicit.Pending, bool) {
	if pl.shared == nil {
		return elicit.Pending{}, false
	}
	b, ok, err := pl.shared.GetElicitation(ctx, id)
	if err != nil || !ok {
		return elicit.Pending{}, false
	}
	var p elicit.Pending
	if json.Unmarshal(b, &p) != nil || p.Subject == "" {
		return elicit.Pending{}, false
	}
	return p, true
}

// consentID names a consent in the shared tier (stored like an
// elicitation: a small value with a lifetime, owned by the user).
func consentID(subject, key string) string {
	k := cache.NewKey("consent", subject, key)
	return "consent-" + hex.EncodeToString(k[:16])
}

// HandleEvent applies an invalidation another replica published. It never
// publishes: each event is applied locally once.
func (pl *Pipeline) HandleEvent(ctx context.Context, ev shared.Event) {
	switch ev.Kind {
	case shared.EventSession:
		pl.invalidateSessionLocal(ev.ID)
	case shared.EventSubject:
		pl.invalidateSubjectLocal(ev.ID)
	case shared.EventRevoke:
		pl.revokeLocal(ev.ID, ev.At)
		pl.invalidateSubjectLocal(ev.ID)
	case shared.EventResync:
		// Connected (again): catch up with the revocations missed meanwhile.
		if pl.shared == nil {
			return
		}
		revs, err := pl.shared.Revocations(ctx)
		if err != nil {
			return
		}
		for sub, at := range revs {
			pl.revokeLocal(sub, at)
		}
	}
}
