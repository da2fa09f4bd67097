package exchange

import (
	"sync"
	"time"
)

// breaker stops calls to an STS that keeps failing. Closed, it lets every
// call through and counts consecutive failures; at threshold it opens and
// refuses calls for cooldown; then it lets one probe through (half-open):
// the probe's success closes it, its failure opens it again. Only cache
// misses consult it, so a mutex is cheap enough.
type breaker struct {
	threshold int
	cooldown  time.Duration

	mu       sync.Mutex
	failures int
	openedAt time.Time // zero when closed
	probing  bool
}

func newBreaker(threshold int, cooldown time.Duration) *breaker {
	return &breaker{threshold: threshold, cooldown: cooldown}
}

// allow reports whether a call may go to the STS now; if not, wait is how
// long until a probe may.
func (b *breaker) allow(now time.Time) (ok bool, wait time.Duration) {
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

// record notes the outcome of a call allow let through. healthy is true
// when the STS answered in a way that shows it works, denials included.
func (b *breaker) record(now time.Time, healthy bool) {
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

// peek is allow without letting a probe through: whether a call would be
// refused now, and for how long.
func (b *breaker) peek(now time.Time) (ok bool, wait time.Duration) {
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

// open reports whether the breaker is refusing calls (or probing).
func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.openedAt.IsZero()
}
