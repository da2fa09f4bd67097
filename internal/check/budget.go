package check

import (
	"context"
	"slices"
)

// withBudget bounds the rest of a check by the policy's check deadline
// (limits.check_deadline): a new token's key set refetch, token exchange
// and shared-tier calls together wait at most that long, below the proxy's
// own timeout, so the client gets our answer rather than the proxy's. Only
// cache misses pay for the timer.
func (e *evaluation) withBudget(ctx context.Context) (context.Context, context.CancelFunc) {
	d := e.p.limits.CheckDeadline.D()
	if d <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

// DropKeys drops the cached verdicts of tokens the issuer (by configured
// name) signed with one of kids, after a key set refresh no longer lists
// them: a key removed after a compromise ends what it granted at once, as a
// revocation does. It returns how many were dropped.
func (pl *Pipeline) DropKeys(issuer string, kids []string) int {
	if len(kids) == 0 {
		return 0
	}
	return pl.cache.RemoveFunc(func(g *Grant) bool {
		return g.Issuer == issuer && g.KeyID != "" && slices.Contains(kids, g.KeyID)
	})
}
