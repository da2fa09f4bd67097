package apikey

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrRevoked is the denial of a key whose id was revoked (Revocations).
var ErrRevoked = errors.New("API key is revoked")

// RevocationTTL is how long a revocation of a key without an expiry is
// remembered: long enough to remove the key from the file everywhere. A key
// that expires sooner is remembered until it expires.
const RevocationTTL = 90 * 24 * time.Hour

// ValidID reports whether id can name a key (an id of a file entry). A
// revocation of an id that is not valid could never match a key, so it is
// refused instead of silently doing nothing.
func ValidID(id string) bool { return safeID.MatchString(id) }

// Ref names one key: the configured issuer and the key's id.
type Ref struct{ Issuer, ID string }

// Revocations are the revoked keys of every issuer, each until a time. It
// is safe for concurrent use: Revoked, on every check, reads a map through
// an atomic pointer; Revoke copies it (revocations are rare). One value is
// kept by the service across reloads of the configuration, so that a
// revocation outlives the Store it was made under.
type Revocations struct {
	now func() time.Time
	m   atomic.Pointer[map[Ref]time.Time]
	mu  sync.Mutex // serializes writers
}

// NewRevocations returns an empty set; now is the clock (time.Now if nil).
func NewRevocations(now func() time.Time) *Revocations {
	if now == nil {
		now = time.Now
	}
	return &Revocations{now: now}
}

// Revoke refuses the key ref until until. A later end replaces an earlier
// one, never the other way round. It reports whether the set changed.
func (r *Revocations) Revoke(ref Ref, until time.Time) bool {
	now := r.now()
	if !until.After(now) {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.m.Load()
	if cur != nil {
		if prev, ok := (*cur)[ref]; ok && !until.After(prev) {
			return false
		}
	}
	next := make(map[Ref]time.Time, r.lenOf(cur)+1)
	if cur != nil {
		for k, t := range *cur {
			if t.After(now) {
				next[k] = t
			}
		}
	}
	// Ended revocations are dropped; one that has not ended never is,
	// however many there are: forgetting it would let its key in.
	// Revocations are operator actions, each ending within
	// RevocationTTL, so they stay few.
	next[ref] = until
	r.m.Store(&next)
	return true
}

func (r *Revocations) lenOf(m *map[Ref]time.Time) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// Revoked reports whether the key id of issuer is revoked now. It costs one
// atomic load when nothing is revoked, one map lookup otherwise.
func (r *Revocations) Revoked(issuer, id string) bool {
	if r == nil {
		return false
	}
	m := r.m.Load()
	if m == nil || len(*m) == 0 {
		return false
	}
	until, ok := (*m)[Ref{Issuer: issuer, ID: id}]
	return ok && r.now().Before(until)
}

// Len is the number of revocations held (ended ones included until the
// next Revoke prunes them).
func (r *Revocations) Len() int { return r.lenOf(r.m.Load()) }

// Until returns when the revocation of a key should end: when the key
// expires, if it is loaded and expires before now+RevocationTTL, else
// now+RevocationTTL. A key unknown to this Store gets the full TTL (another
// replica may have it, or a later file).
func (s *Store) Until(id string) (until time.Time, known bool) {
	until = s.opts.Now().Add(RevocationTTL)
	k := s.byID(id)
	if k == nil {
		return until, false
	}
	if !k.expires.IsZero() && k.expires.Before(until) {
		until = k.expires
	}
	return until, true
}

// byID finds a loaded key by id (not on the hot path: a scan of the
// generated keys).
func (s *Store) byID(id string) *key {
	idx := s.cur.Load()
	if k := idx.byID[id]; k != nil {
		return k
	}
	for _, k := range idx.bySHA {
		if k.id == id {
			return k
		}
	}
	return nil
}
