package jwtauth

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/discovery"
)

const (
	// maxDocumentSize bounds a JWK set or discovery document, fetched or read.
	maxDocumentSize = 1 << 20
	// fetchTimeout bounds one load (discovery plus JWK set fetch).
	fetchTimeout = 10 * time.Second
	// First retry delay after a failed load; it doubles up to the refresh
	// interval.
	minRetryDelay = time.Second
)

// fetchFunc returns a JWK set document.
type fetchFunc func(ctx context.Context) ([]byte, error)

// keySource is one issuer's key set and the machinery that keeps it fresh:
// a background refresh loop and a rate-limited refetch on demand (a token
// naming an unknown kid, or keys that never loaded). The last good key set
// keeps serving while loads fail.
type keySource struct {
	issuerName         string
	location           string // for logs: a URL (without credentials or query), file path or issuer
	fetch              fetchFunc
	refreshInterval    time.Duration
	unknownKIDInterval time.Duration
	now                func() time.Time
	log                *slog.Logger
	onFetch            func(issuer string, err error) // may be nil
	// onRemoved, when set, is told the ids of the keys a load dropped from
	// the set.
	onRemoved func(issuer string, keyIDs []string)
	// waiters bounds the callers waiting for an on-demand refetch; nil
	// is unbounded. Callers beyond it answer from the current keys.
	waiters *semaphore.Weighted
	// seeded marks keys carried over from a replaced source of the same
	// issuer: serve them, but load this source's own right away.
	seeded bool

	keys atomic.Pointer[keySet]

	// loadMu serializes loads, so a background refresh and an on-demand
	// refetch never interleave; it also guards state the fetch keeps, such
	// as a discovered jwks_uri.
	loadMu sync.Mutex

	mu           sync.Mutex // guards the fields below
	lastOnDemand time.Time
	inflight     chan struct{} // closed when the running on-demand load ends
	closed       bool          // set by Verifier.Close before it waits for goroutines

	loaded     chan struct{} // closed on the first successful load
	loadedOnce sync.Once

	lifetime context.Context // ends background work
	wg       *sync.WaitGroup // the Verifier's, counts goroutines started here
}

// current is the latest key set, nil if none ever loaded.
func (s *keySource) current() *keySet { return s.keys.Load() }

// load fetches and parses the key set and swaps it in; on failure the
// previous set stays.
func (s *keySource) load(ctx context.Context) error {
	s.loadMu.Lock()
	defer s.loadMu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()

	doc, err := s.fetch(ctx)
	defer func() {
		if s.onFetch != nil {
			s.onFetch(s.issuerName, err)
		}
	}()
	if err == nil {
		var (
			set     *keySet
			skipped int
		)
		set, skipped, err = parseKeySet(doc)
		if err == nil {
			old := s.keys.Swap(set)
			first := old == nil
			s.loadedOnce.Do(func() { close(s.loaded) })
			if gone, kids := removedKeys(old, set); len(gone) > 0 {
				s.log.Info("jwtauth: keys removed from the key set", "issuer", s.issuerName, "source", s.location, "kids", kids, "thumbprints", gone)
				if s.onRemoved != nil {
					s.onRemoved(s.issuerName, gone)
				}
			}
			level := slog.LevelDebug
			if first {
				level = slog.LevelInfo
			}
			s.log.Log(ctx, level, "jwtauth: key set loaded",
				"issuer", s.issuerName, "source", s.location, "keys", set.size(), "skipped", skipped)
			return nil
		}
	}
	s.log.Warn("jwtauth: key set load failed",
		"issuer", s.issuerName, "source", s.location, "serving_previous", s.current() != nil, "error", err)
	return err
}

// run refreshes the key set until the lifetime ends: right away if it has
// not loaded yet, then every refresh interval, retrying failures with a
// doubling delay.
func (s *keySource) run() {
	var delay time.Duration
	if s.current() != nil && !s.seeded {
		delay = s.refreshInterval
	}
	retry := minRetryDelay
	for {
		if !sleep(s.lifetime, delay) {
			return
		}
		if err := s.load(s.lifetime); err != nil {
			delay = min(retry, s.refreshInterval)
			retry = min(retry*2, s.refreshInterval)
			continue
		}
		delay, retry = s.refreshInterval, minRetryDelay
	}
}

// refetch loads the key set again on behalf of a token the current set
// cannot serve, and waits (bounded by ctx) for the result. At most one such
// load runs per unknownKIDInterval, as measured by the injected clock;
// callers arriving while it runs wait for it, callers arriving later within
// the interval return at once. So a flood of tokens with random kids costs
// one fetch per interval, while a real key rotation is picked up by the
// first token signed with the new key.
func (s *keySource) refetch(ctx context.Context) {
	s.mu.Lock()
	done := s.inflight
	if done == nil {
		now := s.now()
		if s.closed || (!s.lastOnDemand.IsZero() && now.Sub(s.lastOnDemand) < s.unknownKIDInterval) {
			s.mu.Unlock()
			return
		}
		s.lastOnDemand = now
		done = make(chan struct{})
		s.inflight = done
		// The load runs detached from ctx: other callers wait for it too,
		// so one caller's cancellation must not abort it.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = s.load(s.lifetime) // logged by load
			s.mu.Lock()
			s.inflight = nil
			s.mu.Unlock()
			close(done)
		}()
	}
	s.mu.Unlock()
	// A flood of tokens naming unknown kids must not pin a check each for
	// the whole wait: beyond the bound, answer from the current keys now.
	if s.waiters != nil {
		if !s.waiters.TryAcquire(1) {
			return
		}
		defer s.waiters.Release(1)
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// removedKeys lists the ids of the keys of old that next no longer has
// for every algorithm they had (by key material, whatever their kids: a
// kid kept for new material, a key that never had one, or one whose JWK
// now allows fewer algorithms counts), and for the log their kids. A
// token old verified with such a key may not verify now.
func removedKeys(old, next *keySet) (ids, kids []string) {
	if old == nil {
		return nil, nil
	}
	kept := make(map[string]algSet, len(next.all))
	for _, k := range next.all {
		kept[k.id] |= k.algs
	}
	reported := make(map[string]bool)
	for _, k := range old.all {
		if k.algs&^kept[k.id] == 0 || reported[k.id] {
			continue
		}
		reported[k.id] = true
		ids = append(ids, k.id)
		if k.kid != "" {
			kids = append(kids, k.kid)
		}
	}
	slices.Sort(ids)
	slices.Sort(kids)
	return ids, kids
}

// close stops on-demand loads from starting.
func (s *keySource) close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
}

// sleep waits d or until ctx ends, reporting whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// fetchURL returns a fetchFunc for a JWK set at u.
func fetchURL(client *http.Client, u string) fetchFunc {
	return func(ctx context.Context) ([]byte, error) {
		return bounded.Get(ctx, client, u, "application/json", maxDocumentSize)
	}
}

// fetchFile returns a fetchFunc that reads a JWK set file. It is re-read on
// every load, so a rotated file is picked up at the next refresh or on the
// next unknown kid.
func fetchFile(path string) fetchFunc {
	return func(context.Context) ([]byte, error) {
		return bounded.ReadFile(path, maxDocumentSize)
	}
}

// fetchDiscovered returns a fetchFunc that finds the JWK set through the
// issuer's metadata (package discovery: RFC 8414, then OpenID Connect
// Discovery) and fetches it. The jwks_uri is looked up once and kept; a
// later failure to fetch the set looks it up again. Callers serialize calls
// (keySource.loadMu).
func fetchDiscovered(client *http.Client, issuer string) fetchFunc {
	var jwksURI string
	return func(ctx context.Context) ([]byte, error) {
		if jwksURI == "" {
			md, err := discovery.Discover(ctx, client, issuer, maxDocumentSize, discovery.JWKSURI)
			if err != nil {
				return nil, err
			}
			jwksURI = md.JWKSURI
		}
		doc, err := bounded.Get(ctx, client, jwksURI, "application/json", maxDocumentSize)
		if err != nil {
			jwksURI = ""
		}
		return doc, err
	}
}

// lookupAll returns the candidate keys for a token (keySet.candidates),
// refetching the key set (rate-limited) when the current one has none or
// never loaded.
func (s *keySource) lookupAll(ctx context.Context, kid []byte, hasKID bool, alg *algorithm) ([]verificationKey, error) {
	return lookupIn(ctx, s, func(set *keySet) ([]verificationKey, error) { return set.candidates(kid, hasKID, alg) })
}

// lookup returns the key for a token (keySet.find), refetching as
// lookupAll does.
func (s *keySource) lookup(ctx context.Context, kid string, hasKID bool, alg *algorithm) (any, error) {
	return lookupIn(ctx, s, func(set *keySet) (any, error) { return set.find(kid, hasKID, alg) })
}

// lookupIn asks the current key set with get, and when it has no key for
// the token (errNoSuchKey) or never loaded, refetches (rate-limited) and
// asks again: a key still missing then is ErrUnknownKey.
func lookupIn[T any](ctx context.Context, s *keySource, get func(*keySet) (T, error)) (T, error) {
	if set := s.current(); set != nil {
		key, err := get(set)
		if !errors.Is(err, errNoSuchKey) {
			return key, err
		}
	}
	s.refetch(ctx)
	set := s.current()
	if set == nil {
		var none T
		return none, ErrKeysUnavailable
	}
	key, err := get(set)
	if errors.Is(err, errNoSuchKey) {
		var none T
		return none, ErrUnknownKey
	}
	return key, err
}
