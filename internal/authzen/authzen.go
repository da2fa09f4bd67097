// Package authzen asks an external policy decision point (PDP) for access
// decisions over the OpenID AuthZEN Authorization API 1.0, Access
// Evaluation: POST a subject, an action, a resource and a context, read a
// boolean decision.
//
// Decisions are cached for a configured TTL (shortened or disabled by the
// PDP's Cache-Control), keyed by everything the request carried, so that a
// decision is never reused for a request the PDP did not see. Concurrent
// identical requests make one call (single flight). A PDP that cannot be
// reached, answers late, errs or answers something that is not a decision
// makes the request Unavailable (503 with Retry-After), never allowed; after
// repeated failures of the PDP itself a breaker stops calling it for a
// while. A PDP that refuses to decide one request (a 4xx) denies that
// request only.
package authzen

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/breaker"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/jsonrpc"
	"github.com/extauthz/extauthz/internal/oauthclient"
)

// Defaults for Config.
const (
	DefaultTimeout          = 2 * time.Second
	DefaultCacheTTL         = 30 * time.Second
	DefaultCacheSize        = 10_000
	DefaultMaxResponseBytes = 64 << 10
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = 5 * time.Second

	minRetryAfter = time.Second
	maxRetryAfter = time.Minute
)

// Subject, Action and Resource are the AuthZEN entities (section 5).
type Subject struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Action is what the subject wants to do.
type Action struct {
	Name       string         `json:"name"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Resource is what the action is done to.
type Resource struct {
	Type       string         `json:"type"`
	ID         string         `json:"id"`
	Properties map[string]any `json:"properties,omitempty"`
}

// Request is an Access Evaluation request.
type Request struct {
	Subject  Subject        `json:"subject"`
	Action   Action         `json:"action"`
	Resource Resource       `json:"resource"`
	Context  map[string]any `json:"context,omitempty"`
}

// Decision is the PDP's answer.
type Decision struct {
	Allowed bool
	// Reason is the PDP's reason_admin, if it gave one as a string or
	// an {"en": ...} object, or the status it refused with: for logs and
	// explanations, not for callers.
	Reason string
	// Refused says the PDP would not decide this request: it answered a
	// 4xx other than 401, 403, 407, 408 and 429. Allowed is false; such a
	// denial is not cached.
	Refused bool
	// Cached says the decision came from the cache.
	Cached bool
}

// UnavailableError is a request the PDP could not decide: the caller
// answers 503 with Retry-After. It never carries credentials.
type UnavailableError struct {
	RetryAfter time.Duration
	reason     string
	cause      error
}

func (e *UnavailableError) Error() string {
	if e.cause != nil {
		return "authzen: " + e.reason + ": " + e.cause.Error()
	}
	return "authzen: " + e.reason
}

func (e *UnavailableError) Unwrap() error { return e.cause }

// Config is one PDP.
type Config struct {
	// Endpoint is the Access Evaluation URL, for example
	// https://pdp.example.com/access/v1/evaluation. https, or http to a
	// loopback address.
	Endpoint string
	// ClientAuth authenticates this service to the PDP. AuthZEN leaves the
	// method to deployments; the methods whose credentials travel in a
	// header are supported: client_secret_basic and none.
	ClientAuth oauthclient.Config
	// Timeout bounds one call to the PDP.
	Timeout time.Duration
	// CacheTTL is how long a decision is kept; the PDP's Cache-Control
	// max-age shortens it, no-store or no-cache disables it. Negative
	// disables caching.
	CacheTTL  time.Duration
	CacheSize int
	// MaxResponseBytes bounds the PDP's answer; at most
	// jsonrpc.MaxBodySize, what the strict reader reads.
	MaxResponseBytes int64
	// BreakerThreshold failures of the PDP in a row (no answer in time,
	// 5xx, 401, 403, 407, 408, 429) stop calls for BreakerCooldown.
	BreakerThreshold int
	BreakerCooldown  time.Duration
}

// Validate applies defaults and checks c.
func (c Config) Validate() (Config, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return c, errors.New("authzen endpoint must be an absolute http(s) URL")
	}
	if u.User != nil {
		return c, errors.New("authzen endpoint must not carry credentials; use client_auth")
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return c, errors.New("authzen endpoint must use https (http only to a loopback address)")
	}
	if c.ClientAuth, err = c.ClientAuth.Normalize(); err != nil {
		return c, fmt.Errorf("authzen client_auth: %w", err)
	}
	switch c.ClientAuth.Method {
	case oauthclient.ClientSecretBasic, oauthclient.None:
	default:
		return c, fmt.Errorf("authzen client_auth: method %s sends credentials in a form body, which an AuthZEN request has not; use client_secret_basic or none", c.ClientAuth.Method)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.CacheSize <= 0 {
		c.CacheSize = DefaultCacheSize
	}
	if c.MaxResponseBytes <= 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	c.MaxResponseBytes = min(c.MaxResponseBytes, jsonrpc.MaxBodySize)
	if c.BreakerThreshold <= 0 {
		c.BreakerThreshold = DefaultBreakerThreshold
	}
	if c.BreakerCooldown <= 0 {
		c.BreakerCooldown = DefaultBreakerCooldown
	}
	if c.Timeout < 0 {
		return c, errors.New("authzen timeout must be positive")
	}
	return c, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Options are a Client's dependencies.
type Options struct {
	HTTPClient *http.Client // nil: a client with no redirects followed
	Now        func() time.Time
	Logger     *slog.Logger
}

// Stats are a Client's counters: calls made, cache hits, calls that gave
// no decision, calls the PDP refused to decide (a 4xx), calls the breaker
// refused.
type Stats struct {
	Calls, Hits, Failures, Refusals, Rejected uint64
}

// Client asks one PDP. It is safe for concurrent use.
type Client struct {
	cfg     Config
	auth    *oauthclient.Auth
	http    *http.Client
	now     func() time.Time
	log     *slog.Logger
	cache   *cache.Cache[Decision]
	group   singleflight.Group
	breaker *breaker.Breaker

	calls, hits, failures, refusals, rejected atomic.Uint64
}

// New returns a client for the PDP c describes.
func New(c Config, o Options) (*Client, error) {
	c, err := c.Validate()
	if err != nil {
		return nil, err
	}
	auth, err := oauthclient.New(c.ClientAuth)
	if err != nil {
		return nil, fmt.Errorf("authzen client_auth: %w", err)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	// A decision from wherever a redirect points is not the PDP's.
	o.HTTPClient = bounded.NoRedirects(o.HTTPClient)
	ch, err := cache.New[Decision](c.CacheSize, o.Now)
	if err != nil {
		return nil, err
	}
	return &Client{
		cfg: c, auth: auth, http: o.HTTPClient, now: o.Now, log: o.Logger, cache: ch,
		breaker: breaker.New(c.BreakerThreshold, c.BreakerCooldown),
	}, nil
}

// Stats returns the counters.
func (c *Client) Stats() Stats {
	return Stats{Calls: c.calls.Load(), Hits: c.hits.Load(), Failures: c.failures.Load(), Refusals: c.refusals.Load(), Rejected: c.rejected.Load()}
}

// Evaluate asks for a decision on r. The error, if any, is an
// *UnavailableError: the request must not be allowed.
func (c *Client) Evaluate(ctx context.Context, r Request) (Decision, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return Decision{}, &UnavailableError{RetryAfter: minRetryAfter, reason: "cannot encode the request", cause: err}
	}
	// encoding/json writes struct fields in order and map keys sorted:
	// equal requests hash equal.
	k := cache.NewKey("authzen", c.cfg.Endpoint, string(body))
	if d, ok := c.cache.Get(k); ok {
		c.hits.Add(1)
		d.Cached = true
		return d, nil
	}
	ch := c.group.DoChan(string(k[:]), func() (any, error) {
		return c.flight(k, body)
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return Decision{}, res.Err
		}
		return res.Val.(Decision), nil
	case <-ctx.Done():
		return Decision{}, &UnavailableError{RetryAfter: minRetryAfter, reason: "the request ended before the PDP answered", cause: ctx.Err()}
	}
}

// EvaluateNoStore is Evaluate that leaves no trace, for explaining a
// decision: a cached decision is read without moving its recency or the
// counters, and otherwise the PDP is asked directly (not in single flight,
// so that no concurrent Evaluate waits for an answer it will not keep),
// and its decision is not cached; the breaker is consulted but learns
// nothing, and nothing is counted or logged. ctx bounds the call, within
// the configured timeout.
func (c *Client) EvaluateNoStore(ctx context.Context, r Request) (Decision, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return Decision{}, &UnavailableError{RetryAfter: minRetryAfter, reason: "cannot encode the request", cause: err}
	}
	if d, ok := c.cache.Peek(cache.NewKey("authzen", c.cfg.Endpoint, string(body))); ok {
		d.Cached = true
		return d, nil
	}
	now := c.now()
	if ok, wait := c.breaker.Peek(now); !ok {
		return Decision{}, &UnavailableError{RetryAfter: clampRetry(wait), reason: "PDP calls suspended after repeated failures"}
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	d, _, _, err := c.call(ctx, body, now)
	if err != nil {
		return Decision{}, &UnavailableError{RetryAfter: askedRetry(err), reason: "PDP failed", cause: err}
	}
	return d, nil
}

// flight makes the call for one key; concurrent callers share it. It runs
// under its own timeout, not a caller's context: one caller giving up does
// not fail the others.
func (c *Client) flight(k cache.Key, body []byte) (Decision, error) {
	start := c.now()
	if ok, wait := c.breaker.Allow(start); !ok {
		c.rejected.Add(1)
		return Decision{}, &UnavailableError{RetryAfter: clampRetry(wait), reason: "PDP calls suspended after repeated failures"}
	}
	c.calls.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	d, ttl, h, err := c.call(ctx, body, start)
	now := c.now()
	switch h {
	case up:
		c.breaker.Record(now, true)
	case down:
		c.breaker.Record(now, false)
	default:
		// Neither opens nor closes it; a probe it was may go out again.
		c.breaker.Abandon()
	}
	if d.Refused {
		c.refusals.Add(1)
		c.log.Warn("authzen: the PDP refused to decide", "endpoint", bounded.Redact(c.cfg.Endpoint), "reason", d.Reason)
		return d, nil
	}
	if err != nil {
		c.failures.Add(1)
		ue := &UnavailableError{RetryAfter: askedRetry(err), reason: "PDP failed", cause: err}
		if ok, wait := c.breaker.Peek(now); !ok {
			ue.RetryAfter = max(ue.RetryAfter, clampRetry(wait))
		}
		c.log.Warn("authzen: no decision", "endpoint", bounded.Redact(c.cfg.Endpoint), "error", err)
		return Decision{}, ue
	}
	if ttl > 0 {
		c.cache.Add(k, d, now.Add(ttl))
	}
	return d, nil
}

// health is what one call showed of the PDP, for the breaker, which every
// request to the PDP shares: only what shows the PDP itself failing may
// open it, never what one user's request made of the answer.
type health int

const (
	// unknown: no call was made, or the answer was neither a decision nor
	// a refusal (unreadable, too large, a redirect). Something answered,
	// so the PDP is not shown down, and one user's request may be what
	// made the answer unreadable (a PDP echoing the arguments past
	// MaxResponseBytes); but the PDP is not shown deciding either, so a
	// probe answered so does not close the breaker.
	unknown health = iota
	// up: the PDP decided, or refused to decide this request (a 4xx):
	// it read the request and answered.
	up
	// down: no answer in time or at all, or one saying the PDP is failing
	// or overloaded (5xx, 408, 429) or refuses this service (refusesUs).
	down
)

// call POSTs one evaluation and reads the decision and how long it may be
// cached. A 4xx other than 408, 429 and refusesUs is the PDP refusing to
// decide what this request carried (an argument it rejects, a resource it
// does not know): retrying will not change it, so it is a denial, Refused,
// and not an error.
func (c *Client) call(ctx context.Context, body []byte, now time.Time) (Decision, time.Duration, health, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		return Decision{}, 0, unknown, errors.New("cannot build the request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("X-Request-ID", rand.Text())
	if err := c.auth.Apply(url.Values{}, req.Header, c.cfg.Endpoint, now); err != nil {
		return Decision{}, 0, unknown, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return Decision{}, 0, down, bounded.ScrubURLError(err)
	}
	defer resp.Body.Close()
	switch code := resp.StatusCode; {
	case code == http.StatusOK:
	case code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || refusesUs(code):
		bounded.Drain(resp.Body)
		return Decision{}, 0, down, &statusError{code: code, retryAfter: bounded.RetryAfter(resp.Header.Get("Retry-After"), now, minRetryAfter, maxRetryAfter)}
	case code >= 400:
		bounded.Drain(resp.Body)
		return Decision{Refused: true, Reason: "HTTP " + strconv.Itoa(code)}, 0, up, nil
	default:
		bounded.Drain(resp.Body)
		return Decision{}, 0, unknown, fmt.Errorf("PDP answered HTTP %d", code)
	}
	raw, err := bounded.Read(resp.Body, c.cfg.MaxResponseBytes)
	if errors.Is(err, bounded.ErrTooLarge) {
		return Decision{}, 0, unknown, fmt.Errorf("reading the PDP's answer: %w", err)
	}
	if err != nil {
		return Decision{}, 0, down, fmt.Errorf("reading the PDP's answer: %w", err)
	}
	d, ok := decode(raw)
	if !ok {
		return Decision{}, 0, unknown, errors.New("the PDP's answer holds no boolean decision, or not one every JSON parser reads alike")
	}
	return d, cacheTTL(c.cfg.CacheTTL, resp.Header.Values("Cache-Control")), up, nil
}

// refusesUs: the PDP (or a proxy before it) refuses this service's own
// credentials, the same for every request: no user's input causes it, and
// the PDP decides nothing for anyone until an operator mends it, so it
// counts as the PDP down (503), not as a denial of one call.
func refusesUs(code int) bool {
	return code == http.StatusUnauthorized || code == http.StatusForbidden || code == http.StatusProxyAuthRequired
}

// decode reads an Access Evaluation response: an object with a boolean
// decision and an optional context object. It reads it as every JSON
// parser does, or not at all (ok false): the document is strict JSON
// (jsonrpc.WalkStrict: no member twice at any depth, valid UTF-8), and no
// member's name equals decision or context only under case folding, which
// encoding/json would read as that member where other parsers would not
// ({"decision": false, "Decision": true}). Inside context, reason_admin
// and its en are read by their exact names, as a map is: a name in
// another case is another member, and the reason is only for logs.
func decode(raw []byte) (d Decision, ok bool) {
	if i := jsonrpc.SkipSpace(raw, 0); i >= len(raw) || raw[i] != '{' {
		return Decision{}, false
	}
	var decision, ctxObject []byte
	bad := false
	take := func(key []byte, name string, dst *[]byte, value []byte) {
		switch is, ambiguous := jsonrpc.KeyIs(key, name); {
		case ambiguous:
			bad = true
		case is:
			*dst = value
		}
	}
	err := jsonrpc.WalkStrict(raw, 1, func(_ int, key []byte, start, end int) {
		take(key, "decision", &decision, raw[start:end])
		take(key, "context", &ctxObject, raw[start:end])
	})
	if err != nil || bad {
		return Decision{}, false
	}
	switch string(decision) {
	case "true":
		d.Allowed = true
	case "false":
	default:
		return Decision{}, false
	}
	switch {
	case ctxObject == nil || string(ctxObject) == "null":
	case ctxObject[0] == '{':
		d.Reason = reason(ctxObject)
	default:
		return Decision{}, false
	}
	return d, true
}

// reason reads reason_admin from a context object WalkStrict accepted: a
// string, or an object of translations.
func reason(ctxObject []byte) string {
	r := member(ctxObject, "reason_admin")
	if len(r) > 0 && r[0] == '{' {
		r = member(r, "en")
	}
	s, _ := jsonrpc.StringValue(r)
	return s
}

// member is the value of the member of object named name exactly, nil if
// none. object is one WalkStrict accepted: no name is there twice.
func member(object []byte, name string) []byte {
	var v []byte
	_ = jsonrpc.WalkStrict(object, 1, func(_ int, key []byte, start, end int) {
		if string(key) == name {
			v = object[start:end]
		}
	})
	return v
}

// cacheTTL is the configured TTL as the PDP's Cache-Control allows it.
func cacheTTL(ttl time.Duration, cacheControl []string) time.Duration {
	if ttl < 0 {
		return 0
	}
	for _, v := range cacheControl {
		for d := range strings.SplitSeq(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			switch {
			case d == "no-store" || d == "no-cache":
				return 0
			case strings.HasPrefix(d, "max-age="):
				n, err := strconv.ParseInt(strings.Trim(d[len("max-age="):], `"`), 10, 64)
				if err != nil || n < 0 {
					return 0 // unreadable advice: do not cache
				}
				if age := time.Duration(min(n, math.MaxInt64/int64(time.Second))) * time.Second; age < ttl {
					ttl = age
				}
			}
		}
	}
	return ttl
}

// clampRetry rounds a wait up to whole seconds within the Retry-After
// bounds.
// statusError is a PDP answering that it cannot decide now (5xx, 408,
// 429) or will not for this service (refusesUs), with the Retry-After it
// asked for, if any (429 and 503 may carry one).
type statusError struct {
	code       int
	retryAfter time.Duration
}

func (e *statusError) Error() string { return fmt.Sprintf("PDP answered HTTP %d", e.code) }

// askedRetry is how long the caller should wait after err: what the PDP
// asked for, at least minRetryAfter.
func askedRetry(err error) time.Duration {
	var se *statusError
	if errors.As(err, &se) {
		return max(se.retryAfter, minRetryAfter)
	}
	return minRetryAfter
}

func clampRetry(d time.Duration) time.Duration {
	secs := math.Ceil(d.Seconds())
	return min(max(time.Duration(secs)*time.Second, minRetryAfter), maxRetryAfter)
}
