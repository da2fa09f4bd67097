package jwtauth

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/extauthz/extauthz/internal/bounded"
)

// DefaultMaxWaiting bounds, per key source, the callers waiting for an
// on-demand refetch when Options.MaxWaiting is 0.
const DefaultMaxWaiting = 64

// Sources keeps key sources alive across Verifiers. A configuration reload
// builds a new Verifier; built from the same Sources, it reuses the source
// of every issuer whose key source definition did not change (same name,
// iss, URL, file or discovery, intervals), with its keys, retry backoff and
// refetch rate limit, so a reload costs no fetch and never serves without
// keys. A changed source of the same issuer (same name and iss) starts from
// the last good keys of the one it replaces. A source stops refreshing as
// soon as no Verifier holds it. Sources is safe for concurrent use.
type Sources struct {
	client     *http.Client
	log        *slog.Logger
	now        func() time.Time
	onFetch    func(issuer string, err error)
	onRemoved  func(issuer string, keyIDs []string)
	maxWaiting int
	lifetime   context.Context

	mu   sync.Mutex
	live map[sourceDef]*pooledSource
}

// sourceDef is what makes two key sources the same.
type sourceDef struct {
	name, iss, url, file string
	discovery            bool
	refresh, unknownKID  time.Duration
}

type pooledSource struct {
	src    *keySource
	refs   int
	cancel context.CancelFunc
	wg     *sync.WaitGroup
}

// NewSources returns an empty set of key sources whose background work
// ends with ctx. The options' HTTP client, logger, clock and callbacks
// serve every source it creates.
func NewSources(ctx context.Context, opts Options) *Sources {
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: fetchTimeout}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Sources{
		client: client, log: log, now: now, onFetch: opts.OnFetch, onRemoved: opts.OnKeysRemoved,
		maxWaiting: cmp0(opts.MaxWaiting, DefaultMaxWaiting), lifetime: ctx,
		live: make(map[sourceDef]*pooledSource),
	}
}

func cmp0(n, def int) int {
	if n == 0 {
		return def
	}
	return n
}

func defOf(spec IssuerSpec) sourceDef {
	return sourceDef{
		name: spec.Name, iss: spec.Issuer, url: spec.JWKSURL, file: spec.JWKSFile, discovery: spec.Discovery,
		refresh:    cmpOr(spec.RefreshInterval, defaultRefreshInterval),
		unknownKID: cmpOr(spec.UnknownKIDInterval, defaultUnknownKIDInterval),
	}
}

// acquire returns the live source for spec, creating and starting it if
// there is none; release it when done.
func (p *Sources) acquire(spec IssuerSpec) *keySource {
	def := defOf(spec)
	p.mu.Lock()
	defer p.mu.Unlock()
	if ps := p.live[def]; ps != nil {
		ps.refs++
		return ps.src
	}
	ctx, cancel := context.WithCancel(p.lifetime)
	wg := &sync.WaitGroup{}
	src := &keySource{
		issuerName:         spec.Name,
		refreshInterval:    def.refresh,
		unknownKIDInterval: def.unknownKID,
		now:                p.now,
		log:                p.log,
		onFetch:            p.onFetch,
		onRemoved:          p.onRemoved,
		loaded:             make(chan struct{}),
		lifetime:           ctx,
		wg:                 wg,
	}
	if p.maxWaiting > 0 { // negative: unbounded
		src.waiters = semaphore.NewWeighted(int64(p.maxWaiting))
	}
	switch {
	case spec.JWKSURL != "":
		src.location, src.fetch = bounded.Redact(spec.JWKSURL), fetchURL(p.client, spec.JWKSURL)
	case spec.JWKSFile != "":
		src.location, src.fetch = spec.JWKSFile, fetchFile(spec.JWKSFile)
	default:
		src.location, src.fetch = bounded.Redact(spec.Issuer), fetchDiscovered(p.client, spec.Issuer)
	}
	// A changed source of the same issuer starts from the keys the old one
	// last loaded, so tokens keep verifying while the new one loads (or
	// while its endpoint is down).
	for d, old := range p.live {
		if d.name == def.name && d.iss == def.iss {
			if set := old.src.current(); set != nil {
				src.keys.Store(set)
				src.seeded = true
				src.loadedOnce.Do(func() { close(src.loaded) })
				break
			}
		}
	}
	if spec.JWKSFile != "" {
		// Local, so done now; failures are logged and retried.
		if src.load(ctx) == nil {
			src.seeded = false
		}
	}
	p.live[def] = &pooledSource{src: src, refs: 1, cancel: cancel, wg: wg}
	wg.Add(1)
	go func() {
		defer wg.Done()
		src.run()
	}()
	return src
}

// release drops one hold on src; the last one stops it and waits for its
// goroutines.
func (p *Sources) release(src *keySource) {
	p.mu.Lock()
	var stop *pooledSource
	for d, ps := range p.live {
		if ps.src == src {
			if ps.refs--; ps.refs == 0 {
				delete(p.live, d)
				stop = ps
			}
			break
		}
	}
	p.mu.Unlock()
	if stop != nil {
		stop.src.close()
		stop.cancel()
		stop.wg.Wait()
	}
}

// Len is the number of live key sources.
func (p *Sources) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.live)
}
