package lineage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/extauthz/extauthz/internal/jwtauth"
)

const (
	// DefaultSignedLeeway is the clock skew allowed on exp, nbf and iat.
	DefaultSignedLeeway = 5 * time.Second
	// DefaultMaxSignedLifetime is the longest exp - iat a peer's token may
	// claim: signed lineage is meant to be short-lived.
	DefaultMaxSignedLifetime = 15 * time.Minute
	// DefaultJWKSRefresh is how often a peer's JWK set URL is refetched.
	DefaultJWKSRefresh = 5 * time.Minute

	// maxSignedSize bounds an inbound signed lineage token.
	maxSignedSize = 8 << 10
	// unknownKIDInterval rate-limits refetches for tokens naming a key the
	// set does not have (a peer that just rotated, or a forgery).
	unknownKIDInterval = 10 * time.Second
	// unknownKIDWait bounds how long such a refetch may hold a request.
	unknownKIDWait = 2 * time.Second
)

// signedAlgorithms are the JWS algorithms of signed lineage tokens.
var signedAlgorithms = []string{jwt.SigningMethodEdDSA.Alg(), jwt.SigningMethodES256.Alg()}

// ErrSignedInvalid is a signed lineage token that is not accepted: bad
// signature, unknown issuer or key, expired, wrong type, unusable claims, or
// a user other than the verified token's. The request goes on as if the token
// were absent.
var ErrSignedInvalid = errors.New("signed lineage rejected")

// Carried is the lineage a verified signed token brings from the previous
// hop. Root, Parent, Context and Depth are those of the request the previous
// hop let through, whose workload is now calling us.
type Carried struct {
	Issuer     string
	User       string
	Session    string
	Root       string
	Parent     string
	Context    string // the previous hop's own context: our parent
	Depth      int
	ActorChain []string
	Expires    time.Time
}

// Peer is a service whose signed lineage tokens are accepted, and where its
// public keys are.
type Peer struct {
	Issuer   string // the "iss" of its tokens
	JWKSURL  string // its published JWK set; or
	JWKSFile string // a file with its JWK set, re-read when replaced
}

// VerifierOptions configure a SignedVerifier.
type VerifierOptions struct {
	Peers []Peer
	// Local accepts the tokens this service mints itself (its issuer), with
	// the signer's keys, for hops that pass through the same service again.
	Local *Signer
	// Leeway is the clock skew allowed; 0 means DefaultSignedLeeway.
	Leeway time.Duration
	// MaxLifetime is the longest exp - iat accepted; 0 means
	// DefaultMaxSignedLifetime.
	MaxLifetime time.Duration
	// RefreshInterval is how often JWK set URLs are refetched; 0 means
	// DefaultJWKSRefresh.
	RefreshInterval time.Duration
	// Client fetches JWK set URLs; required when a peer has one.
	Client *http.Client
	Now    func() time.Time
	Logger *slog.Logger
}

// SignedVerifier verifies signed lineage tokens from peers. It is safe for
// concurrent use; Close stops its background refreshes.
type SignedVerifier struct {
	keys        map[string]func(context.Context) jwt.Keyfunc // by issuer
	parser      *jwt.Parser
	now         func() time.Time
	maxLifetime time.Duration
	leeway      time.Duration
	sets        []*jwtauth.KeySet // the peers', released by Close
	stop        context.CancelFunc
}

// NewSignedVerifier sets up the peers' key sources. A JWK set URL that does
// not answer yet is not an error (its keys are fetched again later); a JWK
// set file that cannot be used is.
func NewSignedVerifier(o VerifierOptions) (*SignedVerifier, error) {
	if o.Leeway == 0 {
		o.Leeway = DefaultSignedLeeway
	}
	if o.MaxLifetime == 0 {
		o.MaxLifetime = DefaultMaxSignedLifetime
	}
	if o.RefreshInterval == 0 {
		o.RefreshInterval = DefaultJWKSRefresh
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Leeway < 0 || o.MaxLifetime < 0 || o.RefreshInterval < 0 {
		return nil, errors.New("signed lineage verifier: negative duration")
	}
	lifetime, stop := context.WithCancel(context.Background())
	sources := jwtauth.NewSources(lifetime, jwtauth.Options{HTTPClient: o.Client, Logger: o.Logger, Now: o.Now})
	v := &SignedVerifier{
		keys:        make(map[string]func(context.Context) jwt.Keyfunc, len(o.Peers)+1),
		now:         o.Now,
		maxLifetime: o.MaxLifetime,
		leeway:      o.Leeway,
		stop:        stop,
		parser: jwt.NewParser(
			jwt.WithValidMethods(signedAlgorithms),
			jwt.WithLeeway(o.Leeway),
			jwt.WithTimeFunc(o.Now),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
		),
	}
	if l := o.Local; l != nil {
		kf := jwt.Keyfunc(l.keyfunc)
		v.keys[l.Issuer()] = func(context.Context) jwt.Keyfunc { return kf }
	}
	var errs []error
	for _, p := range o.Peers {
		if _, dup := v.keys[p.Issuer]; dup && p.Issuer != "" {
			errs = append(errs, fmt.Errorf("signed lineage peer %q: issuer listed twice", p.Issuer))
			continue
		}
		var watch *fileWatch
		if p.JWKSFile != "" {
			watch = newFileWatch(p.JWKSFile, o.Now) // before the read: a change in between is seen
		}
		ks, err := peerKeys(sources, p, o)
		if err != nil {
			errs = append(errs, fmt.Errorf("signed lineage peer %q: %w", p.Issuer, err))
			continue
		}
		v.sets = append(v.sets, ks)
		v.keys[p.Issuer] = keyLookup(ks, watch)
	}
	if err := errors.Join(errs...); err != nil {
		v.Close()
		return nil, err
	}
	if len(v.keys) == 0 {
		v.Close()
		return nil, errors.New("signed lineage verifier: no peers")
	}
	return v, nil
}

// Close stops refreshing the peers' key sets.
func (v *SignedVerifier) Close() {
	for _, ks := range v.sets {
		ks.Close()
	}
	v.stop()
}

// Verify checks a signed lineage token and returns the lineage it carries.
// When subject is not empty the token must name the same user: a lineage
// token is bound to the user it was minted for. Every failure wraps
// ErrSignedInvalid.
func (v *SignedVerifier) Verify(ctx context.Context, raw, subject string) (Carried, error) {
	if len(raw) > maxSignedSize {
		return Carried{}, fmt.Errorf("%w: token larger than %d bytes", ErrSignedInvalid, maxSignedSize)
	}
	var c signedClaims
	_, err := v.parser.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		if typ, _ := t.Header["typ"].(string); typ != SignedType {
			return nil, fmt.Errorf("token type %q is not %q", typ, SignedType)
		}
		keys, ok := v.keys[c.Issuer]
		if !ok {
			return nil, fmt.Errorf("issuer %q is not a peer", c.Issuer)
		}
		return keys(ctx)(t)
	})
	if err != nil {
		return Carried{}, fmt.Errorf("%w: %w", ErrSignedInvalid, err)
	}
	if err := v.check(&c, subject); err != nil {
		return Carried{}, fmt.Errorf("%w: %s", ErrSignedInvalid, err)
	}
	return Carried{
		Issuer:     c.Issuer,
		User:       c.Subject,
		Session:    c.Session,
		Root:       c.Root,
		Parent:     c.Parent,
		Context:    c.Context,
		Depth:      *c.Depth,
		ActorChain: c.Actors,
		Expires:    c.ExpiresAt.Time,
	}, nil
}

// signedClaims is the payload Signer.Sign writes.
type signedClaims struct {
	jwt.RegisteredClaims
	Session string   `json:"sid,omitempty"`
	Root    string   `json:"root"`
	Parent  string   `json:"parent,omitempty"`
	Context string   `json:"ctx,omitempty"`
	Depth   *int     `json:"depth"`
	Actors  []string `json:"actors,omitempty"`
}

// check validates the claims the JWT library does not know.
func (v *SignedVerifier) check(c *signedClaims, subject string) error {
	switch {
	case c.IssuedAt == nil:
		return errors.New("no iat")
	case c.ExpiresAt.Sub(c.IssuedAt.Time) > v.maxLifetime:
		return fmt.Errorf("lifetime longer than %s", v.maxLifetime)
	case subject != "" && c.Subject != subject:
		return errors.New("minted for another user")
	case !ValidID(c.Root):
		return errors.New("bad root")
	case c.Parent != "" && !ValidID(c.Parent):
		return errors.New("bad parent")
	case c.Context != "" && !ValidID(c.Context):
		return errors.New("bad ctx")
	case c.Depth == nil || *c.Depth < 0 || *c.Depth > 9999:
		return errors.New("bad depth")
	case len(c.Actors) > MaxActors:
		return errors.New("too many actors")
	}
	for _, a := range c.Actors {
		if !ValidID(a) {
			return errors.New("bad actor")
		}
	}
	return nil
}

// keyfunc finds the key of a token this signer minted.
func (s *Signer) keyfunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	key, ok := s.publicKey(kid)
	if !ok {
		return nil, fmt.Errorf("unknown kid %q", kid)
	}
	return key, nil
}

// peerKeys acquires the key set of one peer from the shared key-set
// machinery of package jwtauth.
func peerKeys(sources *jwtauth.Sources, p Peer, o VerifierOptions) (*jwtauth.KeySet, error) {
	if p.Issuer == "" {
		return nil, errors.New("issuer is required")
	}
	if (p.JWKSURL == "") == (p.JWKSFile == "") {
		return nil, errors.New("exactly one of JWKS URL and JWKS file is required")
	}
	if p.JWKSURL != "" && o.Client == nil {
		return nil, errors.New("an HTTP client is required for a JWKS URL")
	}
	return sources.KeySet(context.Background(), jwtauth.IssuerSpec{
		Name:               p.Issuer,
		Issuer:             p.Issuer,
		Algorithms:         signedAlgorithms,
		JWKSURL:            p.JWKSURL,
		JWKSFile:           p.JWKSFile,
		RefreshInterval:    o.RefreshInterval,
		UnknownKIDInterval: unknownKIDInterval,
	})
}

// keyLookup returns the lookup of a peer's key set for one token; with a
// file watch, a replaced file is read again first.
func keyLookup(ks *jwtauth.KeySet, watch *fileWatch) func(context.Context) jwt.Keyfunc {
	return func(ctx context.Context) jwt.Keyfunc {
		return func(t *jwt.Token) (any, error) {
			if watch != nil && watch.changed() {
				_ = ks.Reload(ctx) // a failure is logged; the previous keys stay
			}
			kid, hasKID := t.Header["kid"].(string)
			ctx, cancel := context.WithTimeout(ctx, unknownKIDWait)
			defer cancel()
			return ks.Key(ctx, kid, hasKID, t.Method.Alg())
		}
	}
}

// fileWatch tells when a peer's JWK set file was replaced, looking at most
// once per keyCheckInterval: a key the peer removes from the file stops
// verifying within about a second, as a new one starts.
type fileWatch struct {
	path string
	now  func() time.Time

	nextCheck atomic.Int64 // UnixNano
	mu        sync.Mutex   // guards stamp; one look at a time
	stamp     os.FileInfo
}

func newFileWatch(path string, now func() time.Time) *fileWatch {
	w := &fileWatch{path: path, now: now}
	w.stamp, _ = os.Stat(path)
	w.nextCheck.Store(now().Add(keyCheckInterval).UnixNano())
	return w
}

// changed reports whether the file differs from when it was last seen;
// false while another caller is looking.
func (w *fileWatch) changed() bool {
	now := w.now()
	if now.UnixNano() < w.nextCheck.Load() || !w.mu.TryLock() {
		return false
	}
	defer w.mu.Unlock()
	if now.UnixNano() < w.nextCheck.Load() {
		return false
	}
	w.nextCheck.Store(now.Add(keyCheckInterval).UnixNano())
	fi, err := os.Stat(w.path)
	if err != nil || sameFile(w.stamp, fi) {
		return false
	}
	w.stamp = fi
	return true
}
