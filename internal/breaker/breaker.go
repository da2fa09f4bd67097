// Package breaker is a circuit breaker for calls to a remote service that
// may fail for a while (a security token service, an introspection
// endpoint): after consecutive failures it refuses calls for a cooldown, so
// a failing service is not called by every request, then lets one probe
// through.
package breaker

import (
	"sync"
	"time"
)

// Breaker stops calls to a service that keeps failing. Closed, it lets
// every call through and counts consecutive failures; at threshold it opens
// and refuses calls for cooldown; then it lets one probe through
// (half-open): the probe's success closes it, its failure opens it again.
// Callers consult it on cache misses only, so a mutex is cheap enough. It
// is safe for concurrent use.
type Breaker struct {
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	failures int
	openedAt time.Time // zero when closed
	probing  bool
}

// New returns a closed breaker that opens after threshold consecutive
// failures and stays open for cooldown.
func New(threshold int, cooldown time.Duration) *Breaker {
	return &Breaker{threshold: threshold, cooldown: cooldown}
}

// Allow reports whether a call may go out now; if not, wait is how long
// until a probe may. Every call Allow lets through must be followed by
// Record.
func (b *Breaker) Allow(now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openedAt.IsZero() {
		return true, 0
	}
	if until := b.openedAt.Add(b.cooldown); now.Before(until) {
		return false, until.Sub(now)
	}
	if b.probing {
		return false, b.cooldown // a probe is out; its outcome decides
	}
	b.probing = true
	return true, 0
}

// Record notes the outcome of a call Allow let through. healthy is true
// when the service answered in a way that shows it works, refusals
// included.
func (b *Breaker) Record(now time.Time, healthy bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
	if healthy {
		b.failures = 0
		b.openedAt = time.Time{}
		return
	}
	b.failures++
	if b.failures >= b.threshold || !b.openedAt.IsZero() {
		b.openedAt = now
	}
}

// Abandon notes that a call Allow let through was never made (no slot to
// make it in): nothing is learnt of the service, and a probe it was may be
// let through again.
func (b *Breaker) Abandon() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.probing = false
}

// Peek is Allow without letting a probe through: whether a call would be
// refused now, and for how long.
func (b *Breaker) Peek(now time.Time) (ok bool, wait time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openedAt.IsZero() {
		return true, 0
	}
	if until := b.openedAt.Add(b.cooldown); now.Before(until) {
		return false, until.Sub(now)
	}
	return true, 0
}

// Open reports whether the breaker is refusing calls (or probing).
func (b *Breaker) Open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.openedAt.IsZero()
}
