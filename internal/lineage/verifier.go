package lineage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/time/rate"
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
	// maxJWKSSize bounds a peer's JWK set document, fetched or read.
	maxJWKSSize = 1 << 20
	// jwksTimeout bounds one JWK set fetch.
	jwksTimeout = 10 * time.Second
	// unknownKIDInterval rate-limits refetches for tokens naming a key the
	// set does not have (a peer that just rotated, or a forgery).
	unknownKIDInterval = 10 * time.Second
	// unknownKIDWait bounds how long such a refetch may hold a request.
	unknownKIDWait = 2 * time.Second
)

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
	v := &SignedVerifier{
		keys:        make(map[string]func(context.Context) jwt.Keyfunc, len(o.Peers)+1),
		now:         o.Now,
		maxLifetime: o.MaxLifetime,
		leeway:      o.Leeway,
		stop:        stop,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg(), jwt.SigningMethodES256.Alg()}),
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
		kf, err := peerKeys(lifetime, p, o)
		if err == nil {
			if _, dup := v.keys[p.Issuer]; dup {
				err = errors.New("issuer listed twice")
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("signed lineage peer %q: %w", p.Issuer, err))
			continue
		}
		v.keys[p.Issuer] = kf.KeyfuncCtx
	}
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, err
	}
	if len(v.keys) == 0 {
		stop()
		return nil, errors.New("signed lineage verifier: no peers")
	}
	return v, nil
}

// Close stops refreshing JWK set URLs.
func (v *SignedVerifier) Close() { v.stop() }

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

// peerKeys builds the key lookup for one peer.
func peerKeys(lifetime context.Context, p Peer, o VerifierOptions) (keyfunc.Keyfunc, error) {
	if p.Issuer == "" {
		return nil, errors.New("issuer is required")
	}
	if (p.JWKSURL == "") == (p.JWKSFile == "") {
		return nil, errors.New("exactly one of JWKS URL and JWKS file is required")
	}
	var storage jwkset.Storage
	if p.JWKSFile != "" {
		fk, err := newFileKeys(p.JWKSFile, o.Now, o.Logger)
		if err != nil {
			return nil, err
		}
		storage = fk
	} else {
		if o.Client == nil {
			return nil, errors.New("an HTTP client is required for a JWKS URL")
		}
		client := *o.Client
		client.Transport = limitedBody{base: o.Client.Transport}
		log := o.Logger.With("issuer", p.Issuer, "url", p.JWKSURL)
		remote, err := jwkset.NewStorageFromHTTP(p.JWKSURL, jwkset.HTTPClientStorageOptions{
			Client:                    &client,
			Ctx:                       lifetime,
			HTTPTimeout:               jwksTimeout,
			NoErrorReturnFirstHTTPReq: true,
			RefreshInterval:           o.RefreshInterval,
			RefreshErrorHandler: func(ctx context.Context, err error) {
				log.WarnContext(ctx, "signed lineage JWK set fetch failed", "error", err)
			},
		})
		if err != nil {
			return nil, err
		}
		storage, err = jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
			HTTPURLs:          map[string]jwkset.Storage{p.JWKSURL: remote},
			RateLimitWaitMax:  unknownKIDWait,
			RefreshUnknownKID: rate.NewLimiter(rate.Every(unknownKIDInterval), 1),
		})
		if err != nil {
			return nil, err
		}
	}
	return keyfunc.New(keyfunc.Options{Ctx: lifetime, Storage: storage})
}

// limitedBody bounds response bodies, so that a peer cannot make us read an
// endless JWK set.
type limitedBody struct{ base http.RoundTripper }

func (l limitedBody) RoundTrip(r *http.Request) (*http.Response, error) {
	base := l.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.LimitReader(resp.Body, maxJWKSSize), resp.Body}
	return resp, nil
}

// fileKeys is a JWK set read from a file and read again, at most once per
// keyCheckInterval, when the file is replaced. A replacement that cannot be
// used is logged and the previous keys kept.
type fileKeys struct {
	jwkset.Storage // the keys last read
	path           string
	now            func() time.Time
	log            *slog.Logger

	nextCheck atomic.Int64 // UnixNano
	mu        sync.Mutex   // guards stamp; one reload at a time
	stamp     os.FileInfo
}

func newFileKeys(path string, now func() time.Time, log *slog.Logger) (*fileKeys, error) {
	f := &fileKeys{Storage: jwkset.NewMemoryStorage(), path: path, now: now, log: log}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if err := f.load(); err != nil {
		return nil, err
	}
	f.stamp = fi
	f.nextCheck.Store(now().Add(keyCheckInterval).UnixNano())
	return f, nil
}

func (f *fileKeys) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	f.refresh()
	return f.Storage.KeyRead(ctx, kid)
}

func (f *fileKeys) KeyReadAll(ctx context.Context) ([]jwkset.JWK, error) {
	f.refresh()
	return f.Storage.KeyReadAll(ctx)
}

func (f *fileKeys) refresh() {
	now := f.now()
	if now.UnixNano() < f.nextCheck.Load() || !f.mu.TryLock() {
		return
	}
	defer f.mu.Unlock()
	if now.UnixNano() < f.nextCheck.Load() {
		return
	}
	f.nextCheck.Store(now.Add(keyCheckInterval).UnixNano())
	fi, err := os.Stat(f.path)
	if err != nil || sameFile(f.stamp, fi) {
		return
	}
	f.stamp = fi
	if err := f.load(); err != nil {
		f.log.Error("signed lineage JWK set file unusable, keeping the previous keys", "file", f.path, "error", err)
	}
}

// load replaces the keys with the file's usable public signing keys.
func (f *fileKeys) load() error {
	file, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, maxJWKSSize+1))
	if err != nil {
		return err
	}
	if len(data) > maxJWKSSize {
		return fmt.Errorf("JWK set file larger than %d bytes", maxJWKSSize)
	}
	var set jwkset.JWKSMarshal
	if err := json.Unmarshal(data, &set); err != nil {
		return fmt.Errorf("decode JWK set: %w", err)
	}
	keys := make([]jwkset.JWK, 0, len(set.Keys))
	for _, m := range set.Keys {
		if m.USE != "" && m.USE != jwkset.UseSig {
			continue
		}
		// Private: false reads only public parts and refuses symmetric keys.
		jwk, err := jwkset.NewJWKFromMarshal(m, jwkset.JWKMarshalOptions{}, jwkset.JWKValidateOptions{})
		if err != nil {
			continue
		}
		keys = append(keys, jwk)
	}
	if len(keys) == 0 {
		return errors.New("JWK set has no usable public signing key")
	}
	return f.Storage.KeyReplaceAll(context.Background(), keys)
}
