package check

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/elicit"
	"github.com/extauthz/extauthz/internal/session"
	"github.com/extauthz/extauthz/internal/shared"
)

// state is what the service remembers between requests, apart from the
// verdict cache: the bindings of MCP sessions, A2A contexts and tasks,
// pending elicitations and completed consents, the capability a client
// declared at initialize, and revocations. It alone knows whether a shared
// tier (Redis) is there: the shared tier sits behind the in-process stores
// (a local hit never touches it) and holds what must be the same on every
// replica.
type state struct {
	sessions *session.Store // MCP sessions and A2A contexts
	tasks    *session.Store // tasks, bound to their creator
	// states are the requestStates of 2026-07-28 retries, bound to the
	// first user who sent each back (apart from tasks, so that a user's
	// many rounds never push out their tasks' bindings).
	states       *session.Store
	elicitations *elicit.Store
	// consents hold the user who gave each one, bounded per user as
	// pending elicitations are, so that another user's consents never push
	// one out and revoking the user drops them (RevokeSubject).
	consents *session.Store
	// initURL remembers, per route and subject, whether the client's last
	// initialize declared URL elicitation, for the session it is about to
	// get (ext_authz never sees the response that names it).
	initURL     *cache.Cache[bool]
	shared      *shared.Store // nil on a single replica
	sessionIdle time.Duration
	log         *slog.Logger
	now         func() time.Time

	// revoked maps a subject to when it was revoked: its tokens issued
	// before then are refused. Copied on write (revocations are rare), read
	// on every check. An entry is kept as long as a credential it covers
	// may still be accepted (see keepRevocations).
	revoked  atomic.Pointer[map[string]time.Time]
	revokeMu sync.Mutex
	// longest is the longest lifetime (exp - iat, seconds) of the tokens
	// with an iat this pipeline has accepted; undated says it has accepted
	// a credential without one (an API key, a token without iat), which
	// counts as issued at the epoch.
	longest atomic.Int64
	undated atomic.Bool
	// apiKeys are the revoked API keys: the first policy's set
	// (Deps.APIKeyRevocations), which its key stores refuse at lookup;
	// every grant made from a key is checked against it too, on cache hits
	// and under later policies.
	apiKeys *apikey.Revocations
	// loaded is set once both revocation sets have been read from the
	// shared tier (resync), at once without one. Until then no identified
	// caller is admitted (notLoaded): the revocations other replicas made
	// are not known here.
	loaded atomic.Bool
}

func newState(p *Policy, o Options) (*state, error) {
	initURL, err := cache.New[bool](max(p.sessionsMax, 1), o.Now)
	if err != nil {
		return nil, err
	}
	s := &state{
		sessions:     session.New(p.sessionsMax, p.perSubject, p.sessionIdle, o.Now),
		tasks:        session.New(p.sessionsMax, p.perSubject, p.sessionIdle, o.Now),
		states:       session.New(p.sessionsMax, p.perSubject, p.sessionIdle, o.Now),
		elicitations: elicit.New(max(p.elicitMax, 1), cmpDuration(p.elicitTTL, 10*time.Minute), o.Now),
		consents:     session.New(max(p.elicitMax, 1), p.elicitPerUser, ConsentTTL, o.Now),
		initURL:      initURL, shared: o.Shared, sessionIdle: p.sessionIdle,
		log: o.Logger, now: o.Now, apiKeys: p.verifier.revoked,
	}
	// A single replica holds every revocation there is.
	s.loaded.Store(o.Shared == nil)
	s.elicitations.SetPerSubject(p.elicitPerUser)
	if o.ElicitationKey != nil {
		if err := s.elicitations.SetStateKey(o.ElicitationKey); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// view is one decision's access to the state. Check's reads and writes;
// Explain's is readOnly: it reads, answers as the write would have, and
// writes nothing, here or in the shared tier.
type view struct {
	s        *state
	readOnly bool
}

// bind binds key in store to subject on first sight, across replicas when
// there is a shared tier, and returns the owner. A session's binding
// takes the capability its client declared at initialize (initKey).
func (v view) bind(ctx context.Context, store *session.Store, key, subject string, perSubject int, initKey *cache.Key) (string, session.Result, *denial) {
	s := v.s
	switch {
	case v.readOnly:
		if b, bound := store.Lookup(key); bound && b.Subject != subject {
			return b.Subject, session.Conflict, nil
		}
		return subject, session.Owned, nil
	case s.shared != nil:
		return s.bindShared(ctx, store, key, subject, perSubject, initKey)
	}
	owner, res := store.Bind(key, subject, func(b *session.Binding) {
		if initKey != nil {
			b.ElicitationURL, _ = s.initURL.Get(*initKey)
		}
	})
	return owner, res, nil
}

// keepAlive extends owner's binding, used by a delegate, as the owner's
// own use would (the shared tier's is extended by its next confirmation).
func (v view) keepAlive(store *session.Store, key, owner string) {
	if !v.readOnly && v.s.shared == nil {
		store.Bind(key, owner, nil)
	}
}

// bindShared binds a session (or context, or task) across replicas: the
// first binding wins everywhere, and each user's bindings are bounded
// across replicas. The local store answers repeat requests and asks the
// shared tier again at half the idle time, which keeps the shared binding
// alive. With the tier unreachable, fail closed (503) or, configured, fall
// back to this replica alone. The shared tier is the truth: a local store
// too full to keep a copy only costs a round trip.
func (s *state) bindShared(ctx context.Context, store *session.Store, key, subject string, perSubject int, initKey *cache.Key) (string, session.Result, *denial) {
	now := s.now()
	if b, ok := store.Lookup(key); ok {
		if b.Subject != subject {
			return b.Subject, session.Conflict, nil
		}
		if now.Sub(b.Confirmed) < s.sessionIdle/2 {
			owner, res := store.Bind(key, subject, nil) // extends the local idle time
			return owner, res, nil
		}
	}
	// Redis keeps the binding 1.5 idle: this replica goes back to it only
	// after idle/2, and a use in between extends the local binding by a
	// full idle, so the shared one must outlive both.
	// A task's binding comes back with the tool it was created for,
	// whichever replica saw that.
	sb, owned, err := s.shared.BindTask(ctx, key, subject, "", s.sessionIdle+s.sessionIdle/2, perSubject)
	switch {
	case err != nil && s.shared.FailOpen():
		s.log.LogAttrs(ctx, slog.LevelWarn, "session store unavailable: binding on this replica only", slog.String("error", err.Error()))
		owner, res := store.Bind(key, subject, nil)
		return owner, res, nil
	case err != nil:
		return "", session.Conflict, &denial{outcome: Unavailable, desc: "the session store is unavailable"}
	case !owned:
		store.Put(key, session.Binding{Subject: sb.Subject, Confirmed: now, Tool: sb.Tool})
		return sb.Subject, session.Conflict, nil
	}
	_, known := store.Lookup(key)
	var url bool
	if initKey != nil {
		url, _ = s.initURL.Get(*initKey)
	}
	store.Put(key, session.Binding{Subject: subject, Confirmed: now, ElicitationURL: url, Tool: sb.Tool})
	if known {
		return subject, session.Owned, nil
	}
	// New to this replica: created here or on another one.
	return subject, session.Created, nil
}

// rememberInit notes whether the client initializing now declared URL
// elicitation, for the session it is about to be given.
func (v view) rememberInit(key cache.Key, url bool) {
	if !v.readOnly {
		v.s.initURL.Add(key, url, v.s.now().Add(5*time.Minute))
	}
}

// sessionElicitsURL reports whether the client of the MCP session under key
// declared URL elicitation when it initialized (MCP 2025-11-25).
func (v view) sessionElicitsURL(key string) bool {
	b, ok := v.s.sessions.Lookup(key)
	return ok && b.ElicitationURL
}

// owner is the user holding the binding of key in store, "" when nobody
// does, here or (with a shared tier) on another replica; it binds nothing.
func (v view) owner(ctx context.Context, store *session.Store, key string) (string, error) {
	b, _, err := v.lookup(ctx, store, key, true)
	return b.Subject, err
}

// lookup is the binding of key: this replica's in store, else, when
// askShared and there is a shared tier, the shared tier's (remote); the
// zero binding when nobody holds it. A shared tier that does not answer is
// an error, unless it may fail open (redis.fail_open: this replica's
// bindings decide, as they do binding).
func (v view) lookup(ctx context.Context, store *session.Store, key string, askShared bool) (b shared.Binding, remote bool, err error) {
	s := v.s
	if local, ok := store.Lookup(key); ok || !askShared || s.shared == nil {
		return shared.Binding{Subject: local.Subject, Tool: local.Tool}, false, nil
	}
	b, found, err := s.shared.Lookup(ctx, key)
	switch {
	case err != nil && s.shared.FailOpen():
		return shared.Binding{}, false, nil
	case err != nil:
		return shared.Binding{}, false, err
	}
	return b, found, nil
}

// taskTool is the tool the task under key was created for, "" if unknown.
// The rules read it before the task's binding is checked (tasks stage):
// with shared, a task this replica holds no binding of is looked up in the
// shared tier, where the replica that saw it created recorded its tool,
// and remembered here (unconfirmed: the binding stage still asks the
// shared tier). A shared tier that does not answer is an error, as it is
// to the binding stage, unless it may fail open (redis.fail_open: the tool
// is then unknown).
func (v view) taskTool(ctx context.Context, key string, shared bool) (string, error) {
	b, remote, err := v.lookup(ctx, v.s.tasks, key, shared)
	if remote && !v.readOnly {
		v.s.tasks.Put(key, session.Binding{Subject: b.Subject, Tool: b.Tool})
	}
	return b.Tool, err
}

// beginElicitation starts a pending elicitation and shares it with the
// other replicas; Explain's is a placeholder that nothing remembers.
func (v view) beginElicitation(ctx context.Context, issuer, subject, sess, key, url string) (elicit.Pending, error) {
	if v.readOnly {
		return elicit.Pending{ID: "(explain)", URL: url, Issuer: issuer, Subject: subject}, nil
	}
	p, replaced, err := v.s.elicitations.BeginReplacing(issuer, subject, sess, key, url)
	if v.s.shared != nil {
		// The user's own, dropped here for room: the shared tier keeps of a
		// user's pending ones no more than the replicas do.
		for _, id := range replaced {
			_ = v.s.shared.DeleteElicitation(ctx, id)
		}
	}
	if err == nil {
		v.s.shareElicitation(ctx, p)
	}
	return p, err
}

// hasConsent reports whether subject completed the authorization for key,
// here or on another replica (then remembered here, except by Explain).
func (v view) hasConsent(ctx context.Context, subject, key string) bool {
	s := v.s
	id := consentID(subject, key)
	if b, ok := s.consents.Lookup(id); ok && b.Subject == subject {
		return true
	}
	if s.shared == nil {
		return false
	}
	if _, ok, err := s.shared.GetElicitation(ctx, id); err == nil && ok {
		if !v.readOnly {
			// No room here (other users' live consents) only costs a round
			// trip: the shared tier holds it.
			s.consents.Put(id, session.Binding{Subject: subject})
		}
		return true
	}
	return false
}

// endSession drops what the service holds for a session its owner deleted:
// the owner's pending elicitations in it (the caller drops the exchanged
// tokens, which the policy holds).
func (v view) endSession(subject, sid string) {
	if !v.readOnly {
		v.s.elicitations.DropOwnSession(subject, sid)
	}
}

// completeElicitation records that the user finished the authorization of
// a pending elicitation, here or on another replica (see
// Pipeline.CompleteElicitation).
//
// The consent is remembered before the pending elicitation ends: a replica
// without a shared tier whose consents are all other users' live ones
// refuses the completion (*elicit.FullError) and keeps the elicitation
// pending, for the completion to be retried, rather than drop someone's.
func (s *state) completeElicitation(ctx context.Context, id, st string) (elicit.Pending, error) {
	p, local := s.elicitations.Get(id)
	if !local {
		var ok bool
		if p, ok = s.sharedElicitation(ctx, id); !ok {
			return elicit.Pending{}, elicit.ErrNotPending
		}
	}
	if err := s.elicitations.VerifyState(p, st); err != nil {
		return elicit.Pending{}, err
	}
	if !s.consents.Put(consentID(p.Subject, p.Key), session.Binding{Subject: p.Subject}) && s.shared == nil {
		return elicit.Pending{}, &elicit.FullError{RetryAfter: s.consents.RetryAfter()}
	}
	if local {
		// Ended here; a concurrent completion of the same one may have
		// ended it first, which recorded the same consent.
		_, _ = s.elicitations.Complete(id, st)
	}
	if s.shared != nil {
		_ = s.shared.DeleteElicitation(ctx, id)
		_ = s.shared.PutElicitation(ctx, consentID(p.Subject, p.Key), shared.Owner{Subject: p.Subject, Session: p.Session}, []byte("1"), ConsentTTL)
	}
	return p, nil
}

// shareElicitation lets another replica complete a pending elicitation.
func (s *state) shareElicitation(ctx context.Context, p elicit.Pending) {
	if s.shared == nil {
		return
	}
	if b, err := json.Marshal(p); err == nil {
		_ = s.shared.PutElicitation(ctx, p.ID, shared.Owner{Subject: p.Subject, Session: p.Session}, b, time.Until(p.Expires))
	}
}

// sharedElicitation finds a pending elicitation another replica started.
func (s *state) sharedElicitation(ctx context.Context, id string) (elicit.Pending, bool) {
	if s.shared == nil {
		return elicit.Pending{}, false
	}
	b, ok, err := s.shared.GetElicitation(ctx, id)
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

// taskCreated binds a task to its creator with the tool it was created
// for (see Pipeline.TaskCreated).
func (s *state) taskCreated(ctx context.Context, key, subject, tool string, perSubject int) bool {
	if s.shared != nil {
		b, owned, err := s.shared.BindTask(ctx, key, subject, tool, s.sessionIdle+s.sessionIdle/2, perSubject)
		if err != nil || !owned {
			if err == nil {
				s.tasks.Put(key, session.Binding{Subject: b.Subject, Tool: b.Tool, Confirmed: s.now()})
			}
			return false
		}
		return s.tasks.Put(key, session.Binding{Subject: subject, Tool: b.Tool, Confirmed: s.now()})
	}
	owner, res := s.tasks.Bind(key, subject, func(b *session.Binding) { b.Tool = tool })
	if res == session.Owned && owner == subject && tool != "" {
		s.tasks.Put(key, session.Binding{Subject: subject, Tool: tool})
	}
	return res.Accepted()
}

// MaxRevocations is how many revocations of subjects are held before
// those that can no longer match a credential are dropped. A revocation
// that still can is never dropped, whatever the count.
const MaxRevocations = 100_000

// accepted notes the lifetime of a credential the pipeline accepted, which
// bounds how long a revocation must be kept (keepRevocations).
func (s *state) accepted(g *Grant) {
	if g.iat == 0 {
		if !s.undated.Load() {
			s.undated.Store(true)
		}
		return
	}
	for l := g.exp - g.iat; ; {
		cur := s.longest.Load()
		if l <= cur || s.longest.CompareAndSwap(cur, l) {
			return
		}
	}
}

// keepRevocations is how long after it was made a revocation may still
// match a credential the pipeline accepts: a token issued before it lives
// at most as long as the longest-lived token accepted (RevocationTTL at
// least, since a token not seen yet may live longer than those seen). 0
// means forever: a credential without iat counts as issued at the epoch,
// so every revocation of its user covers it for as long as it is valid,
// which may be as long as an API key is in the file.
func (s *state) keepRevocations() time.Duration {
	if s.undated.Load() {
		return 0
	}
	return max(RevocationTTL, time.Duration(s.longest.Load())*time.Second)
}

// revokeLocal refuses subject's tokens issued until at on this replica
// (Pipeline.RevokeSubject shares it with the others).
func (s *state) revokeLocal(subject string, at time.Time) {
	s.revokeAllLocal(map[string]time.Time{subject: at})
}

// revokeAllLocal applies revocations of subjects at once: a later one of
// a subject replaces an earlier one, never the other way round. Beyond
// MaxRevocations, the revocations that can no longer match a credential
// are dropped; the others are kept.
func (s *state) revokeAllLocal(revs map[string]time.Time) {
	s.revokeMu.Lock()
	defer s.revokeMu.Unlock()
	cur := s.revoked.Load()
	n := len(revs)
	if cur != nil {
		n += len(*cur)
	}
	next := make(map[string]time.Time, n)
	if cur != nil {
		maps.Copy(next, *cur)
	}
	for sub, at := range revs {
		if prev, ok := next[sub]; !ok || at.After(prev) {
			next[sub] = at
		}
	}
	if keep := s.keepRevocations(); len(next) > MaxRevocations && keep > 0 {
		horizon := s.now().Add(-keep)
		for sub, at := range next {
			if at.Before(horizon) {
				delete(next, sub)
			}
		}
	}
	s.revoked.Store(&next)
}

// isRevoked reports whether g's API key is revoked, or g's token was issued
// before its subject was revoked. A token without iat counts as issued at
// the epoch. A revocation held is in force: it is dropped only once it can
// no longer match (revokeAllLocal).
func (s *state) isRevoked(g *Grant) bool {
	if g.APIKeyID != "" && s.apiKeys.Revoked(g.Issuer, g.APIKeyID) {
		return true
	}
	m := s.revoked.Load()
	if m == nil || len(*m) == 0 {
		return false
	}
	at, ok := (*m)[g.Subject]
	return ok && !g.IssuedAt().After(at)
}

// errNotLoaded is the description of the denial of an identified caller
// before the revocations are read (state.loaded).
const errNotLoaded = "this replica has not read the revocations from the shared store yet: retry later"

// admit refuses the caller g identifies while this replica has not read
// the revocations (503: whether the caller is revoked cannot be told), and
// when g is revoked (401, naming the credential: what). Every stage and
// path that admits a grant asks it, fresh or cached; once the revocations
// are read it costs one atomic load more than isRevoked.
func (s *state) admit(g *Grant, what string) *denial {
	if !s.loaded.Load() {
		return &denial{outcome: Unavailable, desc: errNotLoaded}
	}
	if s.isRevoked(g) {
		return &denial{outcome: InvalidToken, desc: what + " is revoked"}
	}
	return nil
}

// Retries of a catch-up Redis did not answer: from resyncRetryMin,
// doubling up to resyncRetryMax.
const (
	resyncRetryMin = 50 * time.Millisecond
	resyncRetryMax = time.Second
)

// resync catches up with the revocations another replica made while this
// one was not listening, or (the first time, see LoadRevocations) before it
// started. A read Redis does not answer is retried until it succeeds or
// ctx ends: the bus replays nothing, so a skipped catch-up would accept
// the revoked users and keys here until their tokens expire. Events that
// follow wait meanwhile, as they must. The first success marks the
// revocations loaded. Concurrent runs are harmless: both sets only ever
// take later revocations.
func (s *state) resync(ctx context.Context) {
	if s.shared == nil {
		return
	}
	subjects, keys := false, false
	for wait := resyncRetryMin; ; wait = min(2*wait, resyncRetryMax) {
		if !subjects {
			if revs, err := s.shared.Revocations(ctx); err == nil {
				s.revokeAllLocal(revs)
				subjects = true
			}
		}
		if !keys {
			if revoked, err := s.shared.APIKeyRevocations(ctx); err == nil {
				for k, until := range revoked {
					s.apiKeys.Revoke(apikey.Ref{Issuer: k.Issuer, ID: k.ID}, until)
				}
				keys = true
			}
		}
		if subjects && keys {
			s.loaded.Store(true)
			return
		}
		if wait == resyncRetryMin {
			s.log.LogAttrs(ctx, slog.LevelWarn, "redis: revocations made by other replicas not read yet; retrying")
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
