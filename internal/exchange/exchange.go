// Package exchange trades an inbound bearer token for one issued for an
// upstream, at a security token service, by OAuth 2.0 Token Exchange
// (RFC 8693). MCP forbids token passthrough: a server calls its upstream
// with a token issued for that upstream, never with the one it received.
//
// An Exchanger serves one STS as one route configures it: the token
// endpoint (or the issuer to discover it from), client authentication
// (client_secret_basic, client_secret_post, private_key_jwt per RFC 7523, or
// none), token types, and an optional actor token file so the exchanged
// token names this service in its act claim. The caller picks the Target
// (audience, RFC 8707 resource, scope) per request: a route's default or an
// MCP tool's override.
//
// Exchanged tokens are cached under a SHA-256 digest of the subject token
// with the STS, the target, the actor and the MCP session, until they
// expire minus a safety margin; the raw subject token is never stored.
// The MCP session in the key is the client's to choose, so each user
// (Owner.Subject) holds at most CachePerSubject entries, a new one beyond
// that replacing the user's own oldest: no user's flood of made-up sessions
// pushes another user's tokens out.
// Concurrent misses for one key make one STS call. A request that finds a
// token close to the end of its use starts a background exchange with its
// own subject token and goes on with the cached one, so under steady
// traffic no request waits on the STS.
//
// Every failure is an *Error whose Kind maps to what the client can act on:
// Unauthorized (401), Forbidden (403), InteractionRequired (the user must
// authorize a third party; see package elicit) and Unavailable (503 with
// RetryAfter). Each STS call has a timeout and a response size bound, and a
// breaker keeps a failing STS from being called by every request.
package exchange

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/breaker"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/oauthclient"
)

// refreshRetry is how long a failed background refresh waits before the
// next request may try again (the breaker still gates it).
const refreshRetry = time.Second

// Exchanger exchanges tokens at one STS and caches the results. It is safe
// for concurrent use.
type Exchanger struct {
	cfg      compiled
	client   *http.Client
	log      *slog.Logger
	now      func() time.Time
	onCall   func(result string, took time.Duration)
	shared   SharedTokens
	auth     *oauthclient.Auth
	actor    *actorSource // nil without an actor token
	cache    *cache.Cache[*entry]
	owners   *owners
	group    singleflight.Group
	breaker  *breaker.Breaker
	resolver endpointResolver
	// waiting bounds the requests waiting for STS calls; nil: no bound.
	waiting *semaphore.Weighted

	// base bounds background refreshes and STS calls; Close cancels it.
	base   context.Context
	cancel context.CancelFunc
	mu     sync.Mutex // guards closed against bg.Add
	closed bool
	bg     sync.WaitGroup

	hits, misses, calls, failures, refreshes, rejected, sharedHits atomic.Uint64
}

// entry is a cached exchange: a token, or a remembered refusal.
type entry struct {
	token Token
	err   *Error
	owner Owner
	// refreshAt (unix nanoseconds) is when a request should start a
	// background refresh; refreshing is set while one runs.
	refreshAt  atomic.Int64
	refreshing atomic.Bool
}

// New checks cfg and returns an Exchanger. It reads the client private key
// and the actor token file, if configured, but does not contact the STS:
// discovery happens on the first exchange.
func New(cfg Config, opts Options) (*Exchanger, error) {
	cc, err := compile(cfg)
	if err != nil {
		return nil, err
	}
	auth, err := oauthclient.New(cc.Auth)
	if err != nil {
		return nil, fmt.Errorf("exchange: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	client := bounded.NoRedirects(opts.HTTPClient)

	c, err := cache.New[*entry](cc.CacheSize, now)
	if err != nil {
		return nil, fmt.Errorf("exchange: %w", err)
	}
	e := &Exchanger{
		cfg:      cc,
		client:   client,
		log:      log,
		now:      now,
		auth:     auth,
		cache:    c,
		breaker:  breaker.New(cc.BreakerFailures, cc.BreakerCooldown),
		resolver: endpointResolver{issuer: cc.issuer},
		onCall:   opts.OnCall,
		shared:   opts.Shared,
	}
	e.owners = newOwners(cc.CachePerSubject, cc.CacheSize, func(k cache.Key) bool { _, ok := c.Peek(k); return ok })
	if cc.MaxWaiting > 0 {
		e.waiting = semaphore.NewWeighted(int64(cc.MaxWaiting))
	}
	if cc.ActorTokenFile != "" {
		if e.actor, err = newActorSource(cc.ActorTokenFile, now, log); err != nil {
			return nil, err
		}
	}
	e.base, e.cancel = context.WithCancel(context.Background())
	return e, nil
}

// Exchange returns a token for target t in exchange for subjectToken, from
// the cache when it holds one. o names the user and the MCP session the
// token is for (see DropSession). Every error is an *Error (see Kind); its
// text is safe to show the client. ctx bounds only this caller's wait: the
// STS call itself runs under the configured Timeout and is shared with
// concurrent callers for the same key.
func (e *Exchanger) Exchange(ctx context.Context, subjectToken string, t Target, o Owner) (Token, error) {
	if subjectToken == "" {
		return Token{}, errNoSubject
	}
	var act *actorToken
	actKey := ""
	if e.actor != nil {
		act = e.actor.get()
		actKey = act.key
	}
	k := cacheKey(e.cfg.sts, subjectToken, t, o.Session, actKey)
	if ent, ok := e.cache.Get(k); ok {
		e.hits.Add(1)
		if ent.err != nil {
			return Token{}, ent.err
		}
		if e.now().UnixNano() >= ent.refreshAt.Load() && ent.refreshing.CompareAndSwap(false, true) {
			e.refresh(k, ent, e.request(subjectToken, t, act), o)
		}
		return ent.token, nil
	}
	e.misses.Add(1)
	return e.miss(ctx, k, e.request(subjectToken, t, act), o)
}

// miss waits for the one STS call for k, starting it if none runs. It is
// apart from Exchange so that the key escapes to the heap only here.
func (e *Exchanger) miss(ctx context.Context, k cache.Key, req *request, o Owner) (Token, error) {
	ch := e.group.DoChan(string(k[:]), func() (any, error) {
		// A flight that just finished may have filled the entry between
		// this caller's miss and its joining.
		if ent, ok := e.cache.Get(k); ok {
			return ent, nil
		}
		if ent := e.fromShared(k, o); ent != nil {
			return ent, nil
		}
		return e.flight(k, req, o), nil
	})
	// The call goes on without the callers that stop waiting, and caches
	// its token for their retry.
	if e.waiting != nil {
		if !e.waiting.TryAcquire(1) {
			return Token{}, errTooManyWaiting
		}
		defer e.waiting.Release(1)
	}
	var budget <-chan time.Time // nil: the call's own Timeout ends the wait
	if e.cfg.Budget < e.cfg.Timeout {
		t := time.NewTimer(e.cfg.Budget)
		defer t.Stop()
		budget = t.C
	}
	select {
	case r := <-ch:
		ent := r.Val.(*entry)
		if ent.err != nil {
			return Token{}, ent.err
		}
		return ent.token, nil
	case <-budget:
		return Token{}, errBudgetSpent
	case <-ctx.Done():
		return Token{}, &Error{Kind: Unavailable, reason: "request ended while waiting for the STS", RetryAfter: minRetryAfter, cause: ctx.Err()}
	}
}

var (
	errTooManyWaiting = &Error{Kind: Unavailable, reason: "too many requests are waiting for the STS", RetryAfter: minRetryAfter}
	errBudgetSpent    = &Error{Kind: Unavailable, reason: "the STS did not answer within the budget", RetryAfter: minRetryAfter}
)

var errNoSubject = &Error{Kind: Unauthorized, reason: "no subject token"}

func (e *Exchanger) request(subject string, t Target, act *actorToken) *request {
	return &request{
		subject:     subject,
		target:      t,
		actor:       act,
		subjectType: e.cfg.SubjectTokenType,
		requested:   e.cfg.RequestedTokenType,
		actorType:   e.cfg.ActorTokenType,
	}
}

// flight makes one STS call for key k and caches what it yields. It is run
// by one caller per key at a time (singleflight).
func (e *Exchanger) flight(k cache.Key, req *request, o Owner) *entry {
	start := e.now()
	if ok, wait := e.breaker.Allow(start); !ok {
		e.rejected.Add(1)
		return &entry{err: &Error{Kind: Unavailable, reason: "STS calls suspended after repeated failures", RetryAfter: clampRetry(wait)}}
	}
	ctx, cancel := context.WithTimeout(e.base, e.cfg.Timeout)
	defer cancel()
	e.calls.Add(1)
	out := e.call(ctx, req)
	if out.err != nil && out.err.Description != "" {
		out.err.Description = req.scrub(out.err.Description)
	}
	now := e.now()
	if out.err == nil && out.token.ExpiresAt.IsZero() {
		out.token.ExpiresAt = now.Add(e.cfg.FallbackLifetime)
	}
	if out.err == nil && !out.token.ExpiresAt.After(now) {
		out = outcome{err: &Error{Kind: Unavailable, Status: http.StatusOK, reason: "STS issued an expired token"}}
	}
	// An answer later than the budget missed every waiting request: for
	// the breaker, that STS is failing.
	e.breaker.Record(now, out.healthy && now.Sub(start) <= e.cfg.Budget)

	if out.err != nil {
		e.failures.Add(1)
		err := out.err
		if err.Kind == Unavailable && err.RetryAfter == 0 {
			err.RetryAfter = defaultRetryAfter
			if ok, wait := e.breaker.Peek(now); !ok {
				err.RetryAfter = clampRetry(wait)
			}
		}
		e.logFailure(err, req, o)
		ent := &entry{err: err, owner: o}
		if (err.Kind == Unauthorized || err.Kind == Forbidden) && e.cfg.NegativeTTL > 0 {
			e.put(k, ent, now.Add(e.cfg.NegativeTTL))
		} else if err.Kind != Unavailable {
			// A refresh learnt the subject token or target is refused now:
			// stop handing out the token exchanged earlier.
			e.cache.Remove(k)
		}
		return ent
	}

	tok := out.token
	if tok.Scope == "" {
		tok.Scope = req.target.Scope // RFC 6749 section 5.1: as requested
	}
	life := tok.ExpiresAt.Sub(now)
	deadline := tok.ExpiresAt.Add(-min(e.cfg.SafetyMargin, life/2))
	refreshAt := deadline.Add(-min(e.cfg.RefreshAhead, deadline.Sub(now)/2))
	ent := &entry{token: tok, owner: o}
	ent.refreshAt.Store(refreshAt.UnixNano())
	// Shared first: once a request here can use the token, a drop after
	// its refusal must find it in the shared tier too, or the refused
	// token would be stored there afterwards and handed out again.
	e.toShared(k, o, tok, deadline, refreshAt)
	e.put(k, ent, deadline)
	return ent
}

// put caches ent under k until deadline, within its owner's bound: the
// owner's oldest entries beyond it go, from the shared tier too, so that a
// user's flood of made-up sessions does not pile up there until the tokens
// expire.
func (e *Exchanger) put(k cache.Key, ent *entry, deadline time.Time) {
	e.cache.Add(k, ent, deadline)
	drop := e.owners.add(ent.owner.Subject, k)
	for _, old := range drop {
		e.cache.Remove(old)
	}
	if e.shared == nil || len(drop) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(e.base, e.cfg.Timeout)
	defer cancel()
	for _, old := range drop {
		_ = e.shared.DeleteToken(ctx, hex.EncodeToString(old[:]))
	}
}

// sharedToken is an exchanged token as the shared tier holds it (sealed by
// the tier).
type sharedToken struct {
	Value     string    `json:"v"`
	Type      string    `json:"t,omitempty"`
	Scope     string    `json:"s,omitempty"`
	ExpiresAt time.Time `json:"e"`
	Deadline  time.Time `json:"d"`
	RefreshAt time.Time `json:"r"`
}

// fromShared looks for a token another replica obtained for key k.
func (e *Exchanger) fromShared(k cache.Key, o Owner) *entry {
	if e.shared == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(e.base, e.cfg.Timeout)
	defer cancel()
	b, ok, err := e.shared.GetToken(ctx, hex.EncodeToString(k[:]))
	if err != nil || !ok {
		return nil
	}
	var st sharedToken
	if json.Unmarshal(b, &st) != nil || st.Value == "" || !st.Deadline.After(e.now()) {
		return nil
	}
	ent := &entry{token: newToken(st.Value, st.Type, st.Scope, st.ExpiresAt), owner: o}
	ent.refreshAt.Store(st.RefreshAt.UnixNano())
	e.put(k, ent, st.Deadline)
	e.sharedHits.Add(1)
	return ent
}

// toShared offers a new token to the other replicas.
func (e *Exchanger) toShared(k cache.Key, o Owner, tok Token, deadline, refreshAt time.Time) {
	if e.shared == nil {
		return
	}
	b, err := json.Marshal(sharedToken{Value: tok.Value, Type: tok.IssuedTokenType, Scope: tok.Scope, ExpiresAt: tok.ExpiresAt, Deadline: deadline, RefreshAt: refreshAt})
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(e.base, e.cfg.Timeout)
	defer cancel()
	_ = e.shared.PutToken(ctx, hex.EncodeToString(k[:]), o, b, deadline.Sub(e.now()))
}

// call finds the token endpoint and posts the exchange.
func (e *Exchanger) call(ctx context.Context, req *request) (out outcome) {
	if e.onCall != nil {
		start := e.now()
		defer func() {
			result := "ok"
			if out.err != nil {
				result = out.err.Kind.String()
			}
			e.onCall(result, e.now().Sub(start))
		}()
	}
	endpoint, err := e.endpoint(ctx)
	if err != nil {
		return outcome{err: err}
	}
	return e.post(ctx, endpoint, req.form())
}

// refresh exchanges again in the background for a cached entry near the
// end of its use. req holds the subject token of the request that noticed,
// only for as long as the call takes.
func (e *Exchanger) refresh(k cache.Key, old *entry, req *request, o Owner) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.bg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.bg.Done()
		r, _, _ := e.group.Do(string(k[:]), func() (any, error) { return e.flight(k, req, o), nil })
		ent := r.(*entry)
		switch {
		case ent.err == nil:
			e.refreshes.Add(1)
		case ent.err.Kind == Unavailable:
			// Keep serving the cached token until its deadline; a later
			// request tries again.
			old.refreshAt.Store(e.now().Add(refreshRetry).UnixNano())
			old.refreshing.Store(false)
		}
	}()
}

func (e *Exchanger) logFailure(err *Error, req *request, o Owner) {
	level := slog.LevelInfo // a refusal is the STS doing its job
	if err.Kind == Unavailable {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{
		slog.String("kind", err.Kind.String()),
		slog.String("error", err.Error()),
		slog.String("subject", o.Subject),
		slog.Any("audience", req.target.Audience),
		slog.Any("resource", req.target.Resource),
		slog.String("scope", req.target.Scope),
	}
	if err.Status != 0 {
		attrs = append(attrs, slog.Int("status", err.Status))
	}
	if err.Description != "" {
		attrs = append(attrs, slog.String("description", err.Description))
	}
	if err.cause != nil {
		attrs = append(attrs, slog.String("cause", err.cause.Error()))
	}
	e.log.LogAttrs(context.Background(), level, "token exchange failed", attrs...)
}

// DropSession forgets the exchanged tokens of a session, an MCP session
// (its DELETE) or the session their subject token names (a logout), and
// returns how many. It walks the cache: not for the hot path.
func (e *Exchanger) DropSession(session string) int {
	if session == "" {
		return 0
	}
	return e.cache.RemoveFunc(func(ent *entry) bool { return ent.owner.Session == session || ent.owner.TokenSession == session })
}

// DropOwnSession forgets the tokens exchanged for subject in an MCP
// session (its owner's DELETE), or in none when session is "", and returns
// how many: nobody else's, even in a session of the same id on another
// route.
func (e *Exchanger) DropOwnSession(subject, session string) int {
	if subject == "" {
		return 0
	}
	return e.cache.RemoveFunc(func(ent *entry) bool { return ent.owner.Subject == subject && ent.owner.Session == session })
}

// DropSubject forgets every exchanged token of a user and returns how many.
func (e *Exchanger) DropSubject(subject string) int {
	if subject == "" {
		return 0
	}
	return e.cache.RemoveFunc(func(ent *entry) bool { return ent.owner.Subject == subject })
}

// Stats is a snapshot of an Exchanger's counters.
type Stats struct {
	// Hits and Misses count Exchange lookups.
	Hits, Misses uint64
	// Calls are STS calls made, Failures those that yielded no token,
	// Refreshes background refreshes that did.
	Calls, Failures, Refreshes uint64
	// Rejected counts calls the open breaker refused.
	Rejected uint64
	// SharedHits are local misses the shared tier answered.
	SharedHits  uint64
	BreakerOpen bool
	Cache       cache.Stats
}

// Stats returns the counters.
func (e *Exchanger) Stats() Stats {
	return Stats{
		Hits: e.hits.Load(), Misses: e.misses.Load(), SharedHits: e.sharedHits.Load(),
		Calls: e.calls.Load(), Failures: e.failures.Load(), Refreshes: e.refreshes.Load(),
		Rejected: e.rejected.Load(), BreakerOpen: e.breaker.Open(),
		Cache: e.cache.Stats(),
	}
}

// Close stops background refreshes, cancels STS calls in flight and waits
// for them. Exchanges after Close fail as Unavailable on a cache miss.
func (e *Exchanger) Close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
	e.cancel()
	e.bg.Wait()
}

// keyBuf pools the buffers cache keys are hashed from, so a cache hit
// allocates nothing.
var keyBuf = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledKey keeps oversized buffers out of the pool.
const maxPooledKey = 64 << 10

// cacheKey digests everything an exchanged token depends on, the STS
// (compiled.sts) first, each part length-prefixed so no two inputs share
// an encoding.
func cacheKey(sts, subject string, t Target, session, actor string) cache.Key {
	bp := keyBuf.Get().(*[]byte)
	b := (*bp)[:0]
	b = cache.AppendPart(b, sts)
	b = cache.AppendPart(b, subject)
	b = cache.AppendPart(b, session)
	b = cache.AppendPart(b, actor)
	b = cache.AppendPart(b, t.Scope)
	b = binary.AppendUvarint(b, uint64(len(t.Audience)))
	for _, a := range t.Audience {
		b = cache.AppendPart(b, a)
	}
	b = binary.AppendUvarint(b, uint64(len(t.Resource)))
	for _, r := range t.Resource {
		b = cache.AppendPart(b, r)
	}
	k := sha256.Sum256(b)
	clear(b) // the subject token must not linger in pooled memory
	if cap(b) <= maxPooledKey {
		*bp = b
		keyBuf.Put(bp)
	}
	return k
}

// clampRetry rounds a wait up to whole seconds (Retry-After's unit) within
// the Retry-After bounds.
func clampRetry(d time.Duration) time.Duration {
	secs := math.Ceil(d.Seconds())
	return min(max(time.Duration(secs)*time.Second, minRetryAfter), maxRetryAfter)
}
