// Package introspect accepts opaque access tokens by asking the
// authorization server that issued them: OAuth 2.0 Token Introspection
// (RFC 7662), with the answer optionally a signed JWT (RFC 9701).
//
// An Introspector serves one authorization server as one issuer configures
// it: the introspection endpoint (or the issuer to discover it from, RFC
// 8414 introspection_endpoint), client authentication (package
// oauthclient), token_type_hint and a timeout. It returns *jwtauth.Claims,
// the same verified claims a JWT yields, so that everything downstream
// builds grants from an introspected token exactly as from a JWT: sub,
// scope, client_id, aud, exp, iat, iss, act and every other member are in
// Raw.
//
// Answers are cached under a SHA-256 digest of the token, never the token:
// an active one until its exp or CacheTTL, whichever comes first, so that a
// revocation at the server takes effect within CacheTTL; an inactive one
// for NegativeTTL. Concurrent misses for one token make one call; a breaker
// keeps a failing endpoint from being called by every request; the answer
// is read with a size bound. When the endpoint fails, unknown tokens get an
// error matching ErrUnavailable (503 with Retry-After) while cached answers
// keep serving.
package introspect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"

	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/breaker"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/discovery"
	"github.com/extauthz/extauthz/internal/jwtauth"
	"github.com/extauthz/extauthz/internal/oauthclient"
)

// Defaults for zero Config fields.
const (
	DefaultTimeout          = 5 * time.Second
	DefaultCacheTTL         = 5 * time.Minute
	DefaultNegativeTTL      = 10 * time.Second
	DefaultCacheSize        = 10_000
	DefaultNegativeSize     = 10_000
	DefaultMaxResponseBytes = 64 << 10
	DefaultMaxConcurrent    = 32
	DefaultBreakerFailures  = 5
	DefaultBreakerCooldown  = 10 * time.Second
	DefaultTokenTypeHint    = "access_token"
)

// minRetryAfter and maxRetryAfter clamp the Retry-After of unavailability.
const (
	minRetryAfter = time.Second
	maxRetryAfter = 5 * time.Minute
)

// KeyLookup finds the public key that signed a JWT introspection response
// (RFC 9701). *jwtauth.KeySet is the implementation.
type KeyLookup interface {
	Key(ctx context.Context, kid string, hasKID bool, alg string) (any, error)
}

// Config is one authorization server's introspection endpoint as an issuer
// uses it. Zero fields get the defaults.
type Config struct {
	// Name is the configured issuer's name, Claims.IssuerName.
	Name string
	// Endpoint is the introspection endpoint URL. When empty it is
	// discovered from Issuer's metadata (RFC 8414 introspection_endpoint)
	// on the first call.
	Endpoint string
	// Issuer is the authorization server's issuer identifier: Claims.Issuer
	// when the answer has no iss, and an answer naming another iss is
	// refused. Required for discovery and for JWT responses.
	Issuer string
	// Auth is how this service authenticates to the endpoint (RFC 7662
	// section 2.1 requires some authentication).
	Auth oauthclient.Config
	// TokenTypeHint is sent as token_type_hint (default access_token;
	// "-" sends none).
	TokenTypeHint string
	// Timeout bounds one call (default 5s). The call runs apart from the
	// requests waiting for it, so a late answer is still cached.
	Timeout time.Duration
	// CacheTTL caps how long an active answer is trusted (default 5m): a
	// token revoked at the server stops working here within it.
	CacheTTL time.Duration
	// NegativeTTL is how long an inactive answer is remembered (default
	// 10s; negative disables).
	NegativeTTL time.Duration
	// CacheSize and NegativeSize bound the active and inactive answers kept
	// (defaults 10000 each): a flood of unknown tokens evicts only other
	// inactive answers.
	CacheSize, NegativeSize int
	// MaxResponseBytes bounds an answer (default 64 KiB).
	MaxResponseBytes int64
	// MaxConcurrent bounds the calls in flight at once (default 32); more
	// wait for a slot within the call's Timeout.
	MaxConcurrent int
	// BreakerFailures consecutive failures (unreachable, timeout, non-200,
	// bad answer) open the breaker: for BreakerCooldown unknown tokens are
	// answered unavailable at once; then one call probes (defaults 5, 10s).
	BreakerFailures int
	BreakerCooldown time.Duration
	// Leeway is the clock skew allowed when checking exp, nbf and iat.
	Leeway time.Duration
	// ResponseKeys, when set, asks for JWT responses (RFC 9701) and
	// verifies them with these keys; plain JSON answers are then refused.
	// Without it, a JWT answer is refused: it cannot be verified.
	ResponseKeys KeyLookup
}

// Options are the Introspector's dependencies. Zero values get defaults: an
// HTTP client, a logger that discards, time.Now.
type Options struct {
	// HTTPClient calls the endpoint. It is copied and redirects are not
	// followed: a redirected request would carry the token and the client
	// credentials elsewhere.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
	// OnCall, when set, is told about every call to the endpoint: its
	// result ("active", "inactive", "failed") and duration, for metrics.
	OnCall func(result string, took time.Duration)
}

// entry is a cached answer: claims, or the denial.
type entry struct {
	claims *jwtauth.Claims
	err    error
}

// Introspector introspects tokens at one endpoint and caches the answers.
// It is safe for concurrent use.
type Introspector struct {
	cfg      Config
	hint     string
	endpoint string // configured; else discovered into found
	client   *http.Client
	log      *slog.Logger
	now      func() time.Time
	auth     *oauthclient.Auth
	onCall   func(string, time.Duration)

	active   *cache.Cache[*entry]
	inactive *cache.Cache[*entry]
	group    singleflight.Group
	slots    *semaphore.Weighted
	breaker  *breaker.Breaker

	mu    sync.Mutex
	found string

	base   context.Context
	cancel context.CancelFunc

	hits, misses, calls, rejected atomic.Uint64
}

// New checks cfg and returns an Introspector. It does not call the
// endpoint. Close releases it.
func New(cfg Config, opts Options) (*Introspector, error) {
	var errs []error
	if cfg.Name == "" {
		errs = append(errs, errors.New("a name is required"))
	}
	switch {
	case cfg.Endpoint != "":
		if err := discovery.CheckHTTPURL(cfg.Endpoint); err != nil {
			errs = append(errs, fmt.Errorf("endpoint: %w", err))
		}
	case cfg.Issuer != "":
	default:
		errs = append(errs, errors.New("an endpoint or an issuer to discover it from is required"))
	}
	if cfg.Issuer != "" {
		if err := discovery.CheckHTTPURL(cfg.Issuer); err != nil {
			errs = append(errs, fmt.Errorf("issuer: %w", err))
		}
	}
	if cfg.ResponseKeys != nil && cfg.Issuer == "" {
		errs = append(errs, errors.New("JWT responses need the issuer"))
	}
	if cfg.ResponseKeys != nil && cfg.Auth.ClientID == "" {
		errs = append(errs, errors.New("JWT responses need the client id (their audience)"))
	}
	auth, err := oauthclient.New(cfg.Auth)
	if err != nil {
		errs = append(errs, fmt.Errorf("client authentication: %w", err))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("introspect: issuer %q: %w", cfg.Name, errors.Join(errs...))
	}
	positive(&cfg.Timeout, DefaultTimeout)
	positive(&cfg.CacheTTL, DefaultCacheTTL)
	if cfg.NegativeTTL == 0 {
		cfg.NegativeTTL = DefaultNegativeTTL
	}
	positive(&cfg.CacheSize, DefaultCacheSize)
	positive(&cfg.NegativeSize, DefaultNegativeSize)
	positive(&cfg.MaxResponseBytes, DefaultMaxResponseBytes)
	positive(&cfg.MaxConcurrent, DefaultMaxConcurrent)
	positive(&cfg.BreakerFailures, DefaultBreakerFailures)
	positive(&cfg.BreakerCooldown, DefaultBreakerCooldown)
	hint := cfg.TokenTypeHint
	switch hint {
	case "":
		hint = DefaultTokenTypeHint
	case "-":
		hint = ""
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
	active, err := cache.New[*entry](cfg.CacheSize, now)
	if err != nil {
		return nil, fmt.Errorf("introspect: %w", err)
	}
	inactive, err := cache.New[*entry](cfg.NegativeSize, now)
	if err != nil {
		return nil, fmt.Errorf("introspect: %w", err)
	}
	in := &Introspector{
		cfg: cfg, hint: hint, endpoint: cfg.Endpoint, client: client, log: log, now: now, auth: auth,
		onCall: opts.OnCall, active: active, inactive: inactive,
		slots:   semaphore.NewWeighted(int64(cfg.MaxConcurrent)),
		breaker: breaker.New(cfg.BreakerFailures, cfg.BreakerCooldown),
	}
	in.base, in.cancel = context.WithCancel(context.Background())
	return in, nil
}

// Close stops the calls in flight. Introspect fails afterwards.
func (in *Introspector) Close() { in.cancel() }

// Name is the configured issuer's name.
func (in *Introspector) Name() string { return in.cfg.Name }

// Introspect returns the claims of an active token for a route that
// requires one of audiences in the answer's aud (nil or empty: no check).
//
// A denial is ErrInactive or one of jwtauth's sentinels (ErrMalformed for
// what cannot be a token, ErrExpired, ErrNotYetValid, ErrIssuer,
// ErrAudience, ErrType); every denial is a 401 invalid_token and its text
// is safe to show the client.
// An error matching ErrUnavailable (an *UnavailableError) means the answer
// could not be had: 503 with its RetryAfter. ctx bounds only this caller's
// wait.
//
// The returned Claims are shared with other callers of the same token and
// must not be modified. Their ExpiresAt is when the answer stops being
// trusted, the token's exp or the CacheTTL cap, whichever comes first;
// Raw["exp"] is the token's own.
func (in *Introspector) Introspect(ctx context.Context, token string, audiences []string) (*jwtauth.Claims, error) {
	if !wellFormed(token) {
		return nil, jwtauth.ErrMalformed
	}
	k := cache.NewKey(token)
	e, ok := in.active.Get(k)
	if !ok {
		e, ok = in.inactive.Get(k)
	}
	if ok {
		in.hits.Add(1)
	} else {
		in.misses.Add(1)
		var err error
		if e, err = in.miss(ctx, k, token); err != nil {
			return nil, err
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	if len(audiences) > 0 && !anyOf(e.claims.Audience, audiences) {
		return nil, jwtauth.ErrAudience
	}
	return e.claims, nil
}

// IntrospectNoStore is Introspect that leaves no trace, for explaining a
// decision: a cached answer is read without moving its recency or the
// counters, and otherwise the endpoint is asked directly (not in single
// flight, so that no concurrent Introspect waits for an answer it will not
// keep) and its answer is not cached, positive or negative; the breaker is
// consulted but learns nothing, and nothing is counted or logged. Only
// discovery of the endpoint, when it is not configured, is remembered as
// for Introspect. ctx bounds the call, within the configured timeout.
func (in *Introspector) IntrospectNoStore(ctx context.Context, token string, audiences []string) (*jwtauth.Claims, error) {
	if !wellFormed(token) {
		return nil, jwtauth.ErrMalformed
	}
	k := cache.NewKey(token)
	e, ok := in.active.Peek(k)
	if !ok {
		e, ok = in.inactive.Peek(k)
	}
	if !ok {
		if ok, wait := in.breaker.Peek(in.now()); !ok {
			return nil, &UnavailableError{RetryAfter: clampRetry(wait), reason: "introspection suspended after repeated failures"}
		}
		ctx, cancel := context.WithTimeout(ctx, in.cfg.Timeout)
		defer cancel()
		if err := in.slots.Acquire(ctx, 1); err != nil {
			return nil, &UnavailableError{RetryAfter: minRetryAfter, reason: "too many introspection calls in flight", cause: err}
		}
		var err error
		var retry time.Duration
		e, retry, err = in.call(ctx, token)
		in.slots.Release(1)
		if err != nil {
			var ue *UnavailableError
			if errors.As(err, &ue) {
				ue.RetryAfter = clampRetry(max(retry, minRetryAfter))
			}
			return nil, err
		}
	}
	if e.err != nil {
		return nil, e.err
	}
	if len(audiences) > 0 && !anyOf(e.claims.Audience, audiences) {
		return nil, jwtauth.ErrAudience
	}
	return e.claims, nil
}

// wellFormed: a bearer token (RFC 6750 b64token, or anything visible ASCII
// servers issue) of a sane size. Anything else never reaches the endpoint.
func wellFormed(token string) bool {
	if len(token) == 0 || len(token) > jwtauth.MaxTokenSize {
		return false
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] >= 0x7f {
			return false
		}
	}
	return true
}

// miss waits for the one call for k, starting it if none runs.
func (in *Introspector) miss(ctx context.Context, k cache.Key, token string) (*entry, error) {
	ch := in.group.DoChan(string(k[:]), func() (any, error) {
		// A flight that just finished may have filled the entry between
		// this caller's miss and its joining.
		if e, ok := in.active.Get(k); ok {
			return e, nil
		}
		if e, ok := in.inactive.Get(k); ok {
			return e, nil
		}
		return in.flight(k, token)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*entry), nil
	case <-ctx.Done():
		return nil, &UnavailableError{RetryAfter: minRetryAfter, reason: "request ended while waiting for introspection", cause: ctx.Err()}
	}
}

// flight makes one call for k and caches what it yields; run by one caller
// per token at a time (singleflight).
func (in *Introspector) flight(k cache.Key, token string) (*entry, error) {
	start := in.now()
	if ok, wait := in.breaker.Allow(start); !ok {
		in.rejected.Add(1)
		return nil, &UnavailableError{RetryAfter: clampRetry(wait), reason: "introspection suspended after repeated failures"}
	}
	ctx, cancel := context.WithTimeout(in.base, in.cfg.Timeout)
	defer cancel()
	if !in.slots.TryAcquire(1) {
		// The others get their answer at once rather than wait in line (a
		// flood of distinct tokens must not pile up flights); never
		// called, the breaker learns nothing from this.
		in.breaker.Abandon()
		return nil, &UnavailableError{RetryAfter: minRetryAfter, reason: "too many introspection calls in flight"}
	}
	in.calls.Add(1)
	e, retry, err := in.call(ctx, token)
	in.slots.Release(1)
	now := in.now()
	in.breaker.Record(now, err == nil)
	if in.onCall != nil {
		result := "active"
		switch {
		case err != nil:
			result = "failed"
		case e.err != nil:
			result = "inactive"
		}
		in.onCall(result, now.Sub(start))
	}
	if err != nil {
		if retry <= 0 {
			retry = minRetryAfter
			if ok, wait := in.breaker.Peek(now); !ok {
				retry = wait
			}
		}
		var ue *UnavailableError
		if errors.As(err, &ue) {
			ue.RetryAfter = clampRetry(retry)
		}
		in.log.LogAttrs(context.Background(), slog.LevelWarn, "token introspection failed",
			slog.String("issuer", in.cfg.Name), slog.String("error", err.Error()))
		return nil, err
	}
	if e.err != nil {
		if in.cfg.NegativeTTL > 0 {
			in.inactive.Add(k, e, now.Add(in.cfg.NegativeTTL))
		}
		return e, nil
	}
	// ExpiresAt is already capped by CacheTTL (parse).
	in.active.Add(k, e, e.claims.ExpiresAt)
	return e, nil
}

// call asks the endpoint about token. A non-nil error means no usable
// answer (an *UnavailableError), with the server's Retry-After if it gave
// one; otherwise the entry holds claims or a denial.
func (in *Introspector) call(ctx context.Context, token string) (*entry, time.Duration, error) {
	endpoint, err := in.resolve(ctx)
	if err != nil {
		return nil, 0, err
	}
	form := url.Values{"token": {token}}
	if in.hint != "" {
		form.Set("token_type_hint", in.hint)
	}
	h := make(http.Header, 4)
	if err := in.auth.Apply(form, h, endpoint, in.now()); err != nil {
		return nil, 0, unavailable("client authentication failed", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, 0, unavailable("bad introspection endpoint", nil)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if in.cfg.ResponseKeys != nil {
		req.Header.Set("Accept", jwtResponseType)
	} else {
		req.Header.Set("Accept", "application/json")
	}
	resp, err := in.client.Do(req)
	if err != nil {
		reason := "introspection endpoint unreachable"
		if errors.Is(err, context.DeadlineExceeded) {
			reason = "introspection endpoint timed out"
		}
		return nil, 0, unavailable(reason, bounded.ScrubURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		bounded.Drain(resp.Body)
		return nil, bounded.RetryAfter(resp.Header.Get("Retry-After"), in.now(), minRetryAfter, maxRetryAfter),
			unavailable(fmt.Sprintf("introspection endpoint answered status %d", resp.StatusCode), nil)
	}
	body, err := bounded.Read(resp.Body, in.cfg.MaxResponseBytes)
	if err != nil {
		return nil, 0, unavailable("reading the introspection response failed", err)
	}
	doc, err := in.document(ctx, resp.Header.Get("Content-Type"), body)
	if err != nil {
		return nil, 0, err
	}
	e, err := in.parse(doc)
	return e, 0, err
}

// resolve returns the endpoint, discovering it once if needed.
func (in *Introspector) resolve(ctx context.Context) (string, error) {
	if in.endpoint != "" {
		return in.endpoint, nil
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.found != "" {
		return in.found, nil
	}
	md, err := discovery.Discover(ctx, in.client, in.cfg.Issuer, in.cfg.MaxResponseBytes, discovery.IntrospectionEndpoint)
	if err != nil {
		return "", unavailable("introspection endpoint discovery failed", err)
	}
	in.found = md.IntrospectionEndpoint
	return in.found, nil
}

// Drop forgets the active answers whose sub is subject (the token's own
// sub, as the server gave it), for revocation: the next request with such
// a token is introspected again. It returns how many were dropped.
func (in *Introspector) Drop(subject string) int {
	return in.active.RemoveFunc(func(e *entry) bool { return e.claims != nil && e.claims.Subject == subject })
}

// Purge forgets every cached answer.
func (in *Introspector) Purge() {
	in.active.Purge()
	in.inactive.Purge()
}

// Stats are an Introspector's counters.
type Stats struct {
	// Hits and Misses count lookups of the cached answers.
	Hits, Misses uint64
	// Calls counts calls made to the endpoint; Rejected, calls the open
	// breaker refused.
	Calls, Rejected uint64
	// Active and Inactive are the cached answers, expired ones included
	// until touched.
	Active, Inactive int
	BreakerOpen      bool
}

// Stats returns the counters.
func (in *Introspector) Stats() Stats {
	return Stats{
		Hits: in.hits.Load(), Misses: in.misses.Load(), Calls: in.calls.Load(), Rejected: in.rejected.Load(),
		Active: in.active.Len(), Inactive: in.inactive.Len(), BreakerOpen: in.breaker.Open(),
	}
}

func anyOf(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}

func positive[T int | int64 | time.Duration](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}
