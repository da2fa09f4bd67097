// Package dpop checks DPoP proofs (RFC 9449): the JWT a client signs with
// its own key for each request, proving that it holds the key its access
// token is bound to (cnf.jkt). A stolen DPoP-bound token is worthless
// without that key, but only where every proof is checked: an authorizer
// that took such a token as a plain bearer token would hand the thief
// what DPoP exists to withhold.
//
// A proof is accepted when it verifies with the key in its own header, its
// typ is dpop+jwt, its algorithm asymmetric, its key's thumbprint the
// token's jkt, its htm and htu the request's method and URI, its ath the
// token's hash, its iat recent, and its jti not seen before (on this
// replica, and on any other sharing the Redis tier). Nonces (DPoP-Nonce)
// are not issued: the replay check and a short max_age stand in for them.
package dpop

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/jwtauth"
)

// Errors a caller turns into denials; their texts are safe to show the
// client. ErrUnavailable is a broken dependency (the Redis tier), every
// other one a refusal.
var (
	ErrMissing     = errors.New("DPoP proof is missing")
	ErrMultiple    = errors.New("more than one DPoP proof")
	ErrInvalid     = errors.New("DPoP proof is invalid")
	ErrKeyMismatch = errors.New("DPoP proof is signed by another key than the token is bound to")
	ErrReplayed    = errors.New("DPoP proof was used before")
	ErrFull        = errors.New("too many recent DPoP proofs to check this one for replay")
	ErrTooMany     = errors.New("too many recent DPoP proofs from this user: retry later")
	ErrUnavailable = errors.New("DPoP replay check is unavailable")
)

// Defaults of Options.
const (
	DefaultMaxAge        = time.Minute
	DefaultLeeway        = 5 * time.Second
	DefaultReplayEntries = 200_000
)

// maxJTI bounds a proof's jti; RFC 9449 asks for enough randomness, not
// for length.
const maxJTI = 256

// ProofType is the typ a DPoP proof's header names.
const ProofType = "dpop+jwt"

// Shared records one-time values across replicas (the Redis tier).
type Shared interface {
	FirstUse(ctx context.Context, key [32]byte, ttl time.Duration) (bool, error)
}

// Window is how recent a proof must be: its iat at most MaxAge old and
// at most Leeway (clock skew) in the future. Zero values take the
// defaults. It is configuration, which a reload may change; what the
// Checker remembers outlives it, and a raised MaxAge applies only to
// proofs it could not have remembered for less (Checker.maxAge).
type Window struct {
	MaxAge, Leeway time.Duration
}

func (w Window) withDefaults() Window {
	return Window{MaxAge: cmpOr(w.MaxAge, DefaultMaxAge), Leeway: cmpOr(w.Leeway, DefaultLeeway)}
}

// Options configure a Checker; zero values take the defaults.
type Options struct {
	// ReplayEntries bounds the proofs remembered on this replica; a proof
	// that would need more is refused (ErrFull) rather than let an older
	// one be forgotten and replayed. One owner (Request.Owner) holds at
	// most 1/ownerShare of them (ErrTooMany).
	ReplayEntries int
	// Shared, when set, makes a proof single-use across replicas.
	Shared Shared
	// SharedFailOpen checks replay on this replica alone when Shared
	// fails, instead of answering ErrUnavailable.
	SharedFailOpen bool
	Now            func() time.Time
}

// Checker checks proofs. It is safe for concurrent use.
type Checker struct {
	shared   Shared
	failOpen bool
	now      func() time.Time
	seen     replaySet

	// mu guards what maxAge knows of past windows: last, the window of
	// the last check, and the narrowing of a raise: proofs issued up to
	// narrowTo are held to narrowAge.
	mu        sync.Mutex
	last      Window
	narrowTo  time.Time
	narrowAge time.Duration
}

// New returns a Checker.
func New(o Options) *Checker {
	c := &Checker{
		shared:   o.Shared,
		failOpen: o.SharedFailOpen,
		now:      o.Now,
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.SetReplayEntries(o.ReplayEntries)
	return c
}

// SetReplayEntries changes the bound of Options.ReplayEntries (a reload);
// n <= 0 is the default. Entries beyond a lowered bound stay until they
// expire; new proofs wait for room.
func (c *Checker) SetReplayEntries(n int) {
	if n <= 0 {
		n = DefaultReplayEntries
	}
	c.seen.mu.Lock()
	c.seen.limit = n
	c.seen.mu.Unlock()
}

func cmpOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Request is what a proof must match.
type Request struct {
	// Proof is the DPoP header's value (Envoy joins repeated headers with
	// a comma, which no JWT holds).
	Proof string
	// Method, Scheme, Host and Path (with its query) are the request's.
	Method, Scheme, Host, Path string
	// AccessToken is the token the proof accompanies; Thumbprint the key
	// it is bound to (its cnf.jkt).
	AccessToken, Thumbprint string
	// Owner is who the token belongs to (the user): the proofs one owner
	// may have remembered at once are bounded. "" is the key's own.
	Owner string
	// Peek checks the proof without recording its use (a dry run that
	// explains a decision must not spend the client's proof).
	Peek bool
}

// Check checks r's proof within w. The error wraps one of the package's
// sentinels with what was wrong, safe to show the client.
func (c *Checker) Check(ctx context.Context, w Window, r Request) error {
	w = w.withDefaults()
	switch {
	case r.Proof == "":
		return ErrMissing
	case strings.IndexByte(r.Proof, ',') >= 0:
		return ErrMultiple
	}
	p, err := jwtauth.VerifyProof(strings.TrimSpace(r.Proof), ProofType, r.Thumbprint)
	switch {
	case errors.Is(err, jwtauth.ErrOtherProofKey):
		return ErrKeyMismatch
	case err != nil:
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if err := c.claims(p, Window{MaxAge: c.maxAge(w, p.IssuedAt), Leeway: w.Leeway}, r); err != nil {
		return err
	}
	if r.Peek {
		return nil
	}
	return c.firstUse(ctx, p, w, cmp.Or(r.Owner, p.Thumbprint))
}

// maxAge is how old a proof issued at iat may be under w. A proof is
// remembered only as long as the window in force then accepts it: after a
// reload raises MaxAge, a proof that may have been remembered under the
// old window (issued before the raise, give or take the old leeway) is
// held to the old MaxAge, or its forgotten record would let it be
// replayed. A proof issued later gets w.
func (c *Checker) maxAge(w Window, iat time.Time) time.Duration {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last != (Window{}) && w.MaxAge > c.last.MaxAge {
		age := c.last.MaxAge
		if now.Sub(c.narrowTo) <= w.MaxAge {
			// An earlier raise still holds proofs that w accepts by age.
			age = min(age, c.narrowAge)
		}
		c.narrowTo, c.narrowAge = now.Add(c.last.Leeway), age
	}
	c.last = w
	if !iat.After(c.narrowTo) {
		return min(w.MaxAge, c.narrowAge)
	}
	return w.MaxAge
}

// claims checks what the proof says of the request (RFC 9449 section 4.3,
// checks 3 and 8 to 12).
func (c *Checker) claims(p *jwtauth.Proof, w Window, r Request) error {
	invalid := func(what string) error { return fmt.Errorf("%w: %s", ErrInvalid, what) }
	if p.ID == "" || len(p.ID) > maxJTI {
		return invalid("jti is missing or too long")
	}
	if htm, _ := p.ClaimString("htm"); htm != r.Method {
		return invalid("htm is not the request's method")
	}
	htu, _ := p.ClaimString("htu")
	want, ok := requestURI(r.Scheme, r.Host, r.Path)
	if got, gotOK := NormalizeURI(htu); !ok || !gotOK || got != want {
		return invalid("htu is not the request's URI")
	}
	if p.IssuedAt.IsZero() {
		return invalid("iat is missing")
	}
	age := c.now().Sub(p.IssuedAt)
	if age > w.MaxAge {
		return invalid("iat is too old")
	}
	if age < -w.Leeway {
		return invalid("iat is in the future")
	}
	if ath, _ := p.ClaimString("ath"); ath != AccessTokenHash(r.AccessToken) {
		return invalid("ath is not the access token's hash")
	}
	return nil
}

// AccessTokenHash is a token's ath: base64url of the SHA-256 of its ASCII.
func AccessTokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// firstUse refuses a proof seen before. It is remembered for as long as
// it could be accepted (max_age and leeway on either side of now), keyed
// by its key and jti: two clients may pick the same jti.
func (c *Checker) firstUse(ctx context.Context, p *jwtauth.Proof, w Window, owner string) error {
	now := c.now()
	ttl := p.IssuedAt.Add(w.MaxAge).Sub(now) + w.Leeway
	key := cache.NewKey("dpop", p.Thumbprint, p.ID)
	if err := c.seen.add(key, owner, now, now.Add(ttl)); err != nil {
		return err
	}
	if c.shared == nil {
		return nil
	}
	first, err := c.shared.FirstUse(ctx, key, ttl)
	switch {
	case err != nil && c.failOpen:
		return nil // this replica's check stands
	case err != nil:
		// The text reaches the client: Redis's error (its address, its
		// messages) stays out of it. The tier counts its failures.
		return ErrUnavailable
	case !first:
		return ErrReplayed
	}
	return nil
}

// ownerShare is how many owners it takes to fill the replay set: one
// holds at most 1/ownerShare of its entries, so that a single user sending
// fresh proofs as fast as it can does not fill the set and turn every
// other client away until its proofs expire.
const ownerShare = 8

// replaySet remembers recent proofs until they expire, at most limit of
// them and limit/ownerShare of one owner's. Full of live entries, it
// refuses new ones: forgetting a live one would let it be replayed.
type replaySet struct {
	mu    sync.Mutex
	limit int
	m     map[cache.Key]replayEntry
	// owned counts the entries of each owner in m.
	owned map[string]int
	// sweepAt is when expired entries are next dropped in a pass.
	sweepAt time.Time
}

type replayEntry struct {
	expires time.Time
	owner   string
}

func (s *replaySet) add(k cache.Key, owner string, now, expires time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[cache.Key]replayEntry)
		s.owned = make(map[string]int)
	}
	if e, ok := s.m[k]; ok && now.Before(e.expires) {
		return ErrReplayed
	}
	if !now.Before(s.sweepAt) {
		s.sweep(now)
	}
	if len(s.m) >= s.limit {
		return ErrFull
	}
	if s.owned[owner] >= max(s.limit/ownerShare, 1) {
		return ErrTooMany
	}
	if e, ok := s.m[k]; ok {
		s.release(e.owner) // expired, not yet swept
	}
	s.m[k] = replayEntry{expires: expires, owner: owner}
	s.owned[owner]++
	return nil
}

// release uncounts one entry of owner.
func (s *replaySet) release(owner string) {
	if s.owned[owner]--; s.owned[owner] <= 0 {
		delete(s.owned, owner)
	}
}

// sweep drops expired entries. It runs at most once a second, full or
// not, so that its cost spreads over many proofs and a flood cannot make
// every check walk the set.
func (s *replaySet) sweep(now time.Time) {
	for k, e := range s.m {
		if !now.Before(e.expires) {
			s.release(e.owner)
			delete(s.m, k)
		}
	}
	s.sweepAt = now.Add(time.Second)
}
