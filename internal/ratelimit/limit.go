// Package ratelimit counts requests against configured limits: so many
// requests per interval with a burst, keyed by subject, subject and tool,
// client id, conversation (lineage root) or source principal.
//
// Every replica keeps in-process GCRA buckets, bounded in number, each
// keyed by a fixed-size hash of the request's key rather than the key
// itself (a tool name is whatever the caller sent). Rested buckets are
// dropped as new keys come, since they decide as a new bucket would; a
// bucket still limiting its key is never dropped to make room: a new key
// finding no room is refused instead. A subject_tool limit counts at most
// MaxTools tools of one subject apart at a time, and the subject's further
// tools in one catch-all bucket, so that a caller naming made-up tools
// can neither fill the table nor push out the count of the tool it is
// limited on. With Redis, the
// count is shared: one GCRA counter per key, updated by one script call
// with a per-call timeout. When Redis fails or is slow, the replica falls
// back to its own buckets for a short while: limits then hold per replica
// instead of across replicas, but never turn into "unlimited", and a check
// never fails for it.
package ratelimit

import "time"

// Kind is what a limit counts by.
type Kind uint8

// The kinds of key.
const (
	KindSubject     Kind = iota + 1 // the issuer-qualified user
	KindSubjectTool                 // the user and the tool (or prompt, resource) called
	KindClient                      // the token's client id, of its issuer
	KindRoot                        // the conversation (lineage root)
	KindPrincipal                   // the caller's mTLS principal (a caller without one is not counted)
)

var kindNames = [...]string{KindSubject: "subject", KindSubjectTool: "subject_tool", KindClient: "client",
	KindRoot: "root", KindPrincipal: "principal"}

// String is the configuration's and the metrics' name of the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "unknown"
}

// ParseKind reads a kind's configuration name.
func ParseKind(s string) (Kind, bool) {
	for k, n := range kindNames {
		if n != "" && n == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// Limit is one configured limit. Its ID keys its buckets: a reload that
// keeps the ID keeps the counts.
type Limit struct {
	ID       string // stable, unique: the route and the limit's place in the configuration
	Kind     Kind
	Requests int           // requests allowed per Per, in the long run
	Per      time.Duration // the interval
	Burst    int           // requests allowed at once from a rested key; Requests when 0
}

// burst is the effective burst.
func (l *Limit) burst() int64 {
	if l.Burst > 0 {
		return int64(l.Burst)
	}
	return int64(l.Requests)
}

// interval is GCRA's emission interval: the time one request costs.
func (l *Limit) interval() int64 { return int64(l.Per) / int64(l.Requests) }

// Decision is the answer for one request.
type Decision struct {
	Allowed bool
	// RetryAfter is how long until the key may make a request again
	// (denials only).
	RetryAfter time.Duration
	// Full: the key was refused, uncounted, because this replica's counts
	// had no room for it: they were all of keys still being limited, which
	// are never forgotten to make room.
	Full bool
}

// gcra decides one request against a bucket whose theoretical arrival
// time is tat, at now (both in nanoseconds). It returns the bucket's new
// tat; a denial leaves it unchanged.
func gcra(tat, now, interval, burst int64) (next int64, ok bool, retry int64) {
	tat = max(tat, now)
	next = tat + interval
	allowAt := next - interval*burst
	if now < allowAt {
		return tat, false, allowAt - now
	}
	return next, true, 0
}
