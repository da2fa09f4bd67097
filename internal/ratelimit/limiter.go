package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Defaults for Options.
const (
	DefaultMaxKeys  = 100_000
	DefaultMaxTools = 100
	DefaultTimeout  = 20 * time.Millisecond
	DefaultBackoff  = time.Second
	DefaultPrefix   = "extauthz:"
)

// Options shape a Limiter. Zero fields get the defaults.
type Options struct {
	Clock   func() time.Time
	Logger  *slog.Logger
	MaxKeys int // local buckets kept, across all limits
	// MaxTools is how many tools of one subject a subject_tool limit
	// counts apart at a time; the subject's further tools share one count.
	MaxTools int
	// Redis shares the counts across replicas; nil keeps them local. The
	// client must honour context deadlines (ContextTimeoutEnabled, as the
	// shared tier's client does) for Timeout to bound a call.
	Redis  redis.UniversalClient
	Prefix string // of the Redis keys
	// Timeout bounds one Redis call; Backoff is how long the replica uses
	// only its local buckets after a Redis call failed.
	Timeout, Backoff time.Duration
}

// Limiter decides requests against limits. It is safe for concurrent use
// and outlives configuration reloads: limits are passed with each call.
type Limiter struct {
	clock   func() time.Time
	log     *slog.Logger
	local   *local
	shared  *redis_rate.Limiter
	prefix  string
	name    func(*Limit, Key) string // redisKey, bound once
	timeout time.Duration
	backoff int64

	// skipUntil is when Redis is tried again after a failure (UnixNano).
	skipUntil atomic.Int64
	// fallbacks counts decisions made locally because Redis failed or was
	// being skipped; redisErrors counts failed Redis calls.
	fallbacks, redisErrors atomic.Uint64
}

// New returns a limiter.
func New(o Options) *Limiter {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.MaxTools <= 0 {
		o.MaxTools = DefaultMaxTools
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	l := &Limiter{clock: o.Clock, log: o.Logger, local: newLocal(o.MaxKeys, o.MaxTools), prefix: o.Prefix + "ratelimit:",
		timeout: o.Timeout, backoff: int64(o.Backoff)}
	l.name = l.redisKey
	if o.Redis != nil {
		l.shared = redis_rate.NewLimiter(o.Redis)
	}
	return l
}

// Key is what one request is counted as: Value is the subject, client id,
// root or principal; Qualifier narrows it, the tool for KindSubjectTool and
// the client's issuer's subject namespace for KindClient. Two parts rather
// than one joined string, so that counting allocates nothing.
type Key struct {
	Value, Qualifier string
}

// Allow decides one request of key against lim. It never fails: without a usable Redis the local bucket
// decides, and a key the local buckets have no room for is refused (Full).
//
// The local bucket counts every request even while Redis decides, so that
// a fallback starts from this replica's recent traffic instead of a full
// burst.
func (l *Limiter) Allow(ctx context.Context, lim *Limit, key Key) Decision {
	now := l.clock().UnixNano()
	if l.shared == nil {
		t := l.local.take(lim, key, now, nil)
		return Decision{Allowed: t.allowed, RetryAfter: time.Duration(t.retry), Full: t.full}
	}
	t := l.local.take(lim, key, now, l.name)
	d, name := Decision{Allowed: t.allowed, RetryAfter: time.Duration(t.retry), Full: t.full}, t.shared
	if now < l.skipUntil.Load() {
		l.fallbacks.Add(1)
		return d
	}
	// The shared count is the replica's, not the request's: a caller that
	// hangs up (or a check that spent its budget) must not make it look
	// as if Redis failed, which would put every caller on local counts.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	res, err := l.shared.Allow(ctx, name,
		redis_rate.Limit{Rate: lim.Requests, Burst: int(lim.burst()), Period: lim.Per})
	cancel()
	if err != nil {
		l.redisErrors.Add(1)
		l.fallbacks.Add(1)
		if old := l.skipUntil.Swap(now + l.backoff); old <= now-l.backoff {
			// Logged when Redis had been answering (not again while it stays
			// down): the error names the address, never a credential.
			l.log.Warn("rate limits: redis failed, using this replica's local limits", "error", err.Error(),
				"retry_in", time.Duration(l.backoff))
		}
		return d
	}
	return Decision{Allowed: res.Allowed > 0, RetryAfter: max(res.RetryAfter, 0)}
}

// redisKey names the shared counter of a key. The value is hashed: keys
// stay short whatever a subject or tool name looks like, and Redis holds no
// user names. It runs once per local bucket (the bucket keeps the name),
// not once per check.
//
// Value and Qualifier are joined with a NUL, which keeps two keys apart only
// because one part of a key with a Qualifier never holds one: a subject (grants
// refuse control bytes in a subject), or a namespace from the
// configuration. The name stays as every
// release has made it (TestRedisKeyStable), so that replicas of two
// releases share their counts.
func (l *Limiter) redisKey(lim *Limit, key Key) string {
	var buf [256]byte
	in := append(append(append(buf[:0], key.Value...), 0), key.Qualifier...)
	sum := sha256.Sum256(in)
	var hexed [32]byte
	hex.Encode(hexed[:], sum[:16])
	var b strings.Builder
	b.Grow(len(l.prefix) + len(lim.ID) + 1 + len(hexed))
	b.WriteString(l.prefix)
	b.WriteString(lim.ID)
	b.WriteByte(':')
	b.Write(hexed[:])
	return b.String()
}

// Fallbacks is the number of decisions made locally because Redis failed
// or was being skipped after a failure.
func (l *Limiter) Fallbacks() uint64 { return l.fallbacks.Load() }

// RedisErrors is the number of Redis calls that failed or timed out.
func (l *Limiter) RedisErrors() uint64 { return l.redisErrors.Load() }

// Keys is the number of local buckets held.
func (l *Limiter) Keys() int { return l.local.len() }
