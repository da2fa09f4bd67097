package check

import "context"

// Tracer traces checks. StartCheck starts the span of one check as a child
// of the trace carried in the request headers (lower-case names) and
// returns the context to decide in and the function that records the
// decision on the span and ends it. Implementations must be safe for
// concurrent use.
type Tracer interface {
	StartCheck(ctx context.Context, headers map[string]string) (context.Context, EndCheck)
}

// EndCheck ends a check's span with the decision: the route, the outcome,
// the HTTP status and the user (empty when nobody was identified).
type EndCheck = func(route, outcome string, status int, user string)

// shed counts a check in (the caller counts it out unless overloaded) and
// reports whether to refuse it: more than the policy's MaxConcurrentChecks
// are in progress, so it is answered at once (OverloadVerdict), closed,
// rather than queued without bound. The limit is read from p, so it
// follows reloads. A refusal is counted (outcome overloaded, no route) but
// neither logged nor traced: under overload that work is what must not
// grow. It returns no Verdict of its own: every check would pay for
// zeroing and copying one (800 bytes) that only an overload uses.
func (pl *Pipeline) shed(p *Policy) (overloaded bool) {
	limits := p.Limits()
	n := pl.inflight.Add(1)
	if limits.MaxConcurrentChecks > 0 && n > int64(limits.MaxConcurrentChecks) {
		pl.inflight.Add(-1)
		if pl.observer != nil {
			pl.observer.Checked("", Overloaded, 0)
		}
		return true
	}
	return false
}

// traced decides e's request (check) within a span continuing the
// caller's trace.
func (pl *Pipeline) traced(e *evaluation) {
	var end EndCheck
	e.ctx, end = pl.tracer.StartCheck(e.ctx, e.req.Headers)
	pl.check(e)
	var user string
	if g := e.v.Grant; g != nil {
		user = g.Subject
	}
	end(e.v.Route, e.v.Outcome.String(), e.v.Status(), user)
}
