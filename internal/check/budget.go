package check

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// withBudget bounds the rest of a check by the policy's check deadline
// (limits.check_deadline): a new token's key set refetch, token exchange
// and shared-tier calls together wait at most that long, below the proxy's
// own timeout, so the client gets our answer rather than the proxy's. Only
// cache misses that wait on something pay for the timer (see budget).
//
// It returns the budget itself, nil when there is no deadline, rather than
// a CancelFunc: the method value would cost every miss an allocation.
func (e *evaluation) withBudget(ctx context.Context) (context.Context, *budget) {
	d := e.p.limits.CheckDeadline.D()
	if d <= 0 {
		return ctx, nil
	}
	b := &budget{Context: ctx, deadline: time.Now().Add(d)}
	return b, b
}

// budget is its parent bounded by a deadline, as context.WithDeadline
// makes it, except that the timer and the channel are made only when
// something asks for Done: most misses (an HMAC token, a key already
// loaded) never wait on anything, and a WithDeadline context costs them a
// timer started and stopped and four allocations.
type budget struct {
	context.Context // the parent: Value before the timer is made
	deadline        time.Time

	mu       sync.Mutex
	timed    atomic.Pointer[timedContext]
	released atomic.Bool
}

type timedContext struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *budget) Deadline() (time.Time, bool) {
	if d, ok := b.Context.Deadline(); ok && d.Before(b.deadline) {
		return d, true
	}
	return b.deadline, true
}

// timedCtx is the WithDeadline context standing for b, made once.
func (b *budget) timedCtx() context.Context {
	if t := b.timed.Load(); t != nil {
		return t.ctx
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if t := b.timed.Load(); t != nil {
		return t.ctx
	}
	ctx, cancel := context.WithDeadline(b.Context, b.deadline)
	if b.released.Load() {
		cancel()
	}
	b.timed.Store(&timedContext{ctx: ctx, cancel: cancel})
	return ctx
}

func (b *budget) Done() <-chan struct{} { return b.timedCtx().Done() }

func (b *budget) Err() error {
	if t := b.timed.Load(); t != nil {
		return t.ctx.Err()
	}
	if err := b.Context.Err(); err != nil {
		return err
	}
	if b.released.Load() {
		return context.Canceled
	}
	if !time.Now().Before(b.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

func (b *budget) Value(key any) any {
	if t := b.timed.Load(); t != nil {
		return t.ctx.Value(key) // context.Cause then finds the timed context
	}
	return b.Context.Value(key)
}

// AfterFunc lets contexts derived from b follow it without a goroutine
// each (context.AfterFunc).
func (b *budget) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(b.timedCtx(), f)
}

// release is the CancelFunc: it ends the timed context, if made, and
// whatever is derived from it.
func (b *budget) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released.Store(true)
	if t := b.timed.Load(); t != nil {
		t.cancel()
	}
}

// DropKeys drops the cached verdicts of tokens the issuer (by configured
// name) signed with one of the keys keyIDs names (jwtauth.Claims.KeyID: the
// key that verified the token, whether or not the token named a kid), after
// a key set refresh no longer lists them: a key removed after a compromise
// ends what it granted at once, as a revocation does. It returns how many
// were dropped.
func (pl *Pipeline) DropKeys(issuer string, keyIDs []string) int {
	if len(keyIDs) == 0 {
		return 0
	}
	return pl.cache.RemoveFunc(func(g *Grant) bool {
		return g.Issuer == issuer && g.KeyID != "" && slices.Contains(keyIDs, g.KeyID)
	})
}
