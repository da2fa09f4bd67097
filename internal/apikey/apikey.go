// Package apikey accepts API keys defined in a file (YAML or JSON) that is
// reloaded when it changes.
//
// Each key has an id, a hash, a subject, scopes, arbitrary claims, and
// optionally an expiry and the routes it is valid on. The file never holds
// a usable key: a generated key (Prefix and 32 random bytes, see Generate)
// is stored as its SHA-256 digest, which is safe because nobody can guess
// 256 random bits; a human-chosen secret is stored as an Argon2id hash,
// which makes guessing it from a leaked file slow, and is presented as
// "<id>.<secret>" so that it is found by id rather than tried against every
// hash. A plain key may be given instead for migration; it is hashed at
// load and refused unless it has at least 32 bytes of entropy.
//
// Lookup is O(1): the SHA-256 digest of the presented key indexes a map.
// The map compares digests, never keys: how long a comparison of the
// digest of a guess takes tells nothing about a stored key. Keys are never
// logged, only their ids. A lookup returns *jwtauth.Claims so that
// everything downstream treats a key like a verified token: sub is the
// key's subject, scope its scopes, client_id and api_key_id its id, and the
// key's claims are there too.
package apikey

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/sync/semaphore"

	"github.com/extauthz/extauthz/internal/bounded"
	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/jwtauth"
)

// Denials. Their texts are safe to show the client: they name no key.
var (
	ErrMalformed  = errors.New("API key is malformed")
	ErrUnknownKey = errors.New("API key is not valid")
	// ErrWrongSecret is "<id>.<secret>" whose id is on file with another
	// secret. Unlike ErrUnknownKey, which may be another kind of
	// credential, it is final: the caller must not try the credential
	// elsewhere (an introspection endpoint), where the secret would go.
	// It reads as ErrUnknownKey does.
	ErrWrongSecret = errors.New("API key is not valid")
	ErrExpired     = errors.New("API key is expired")
	ErrRoute       = errors.New("API key is not accepted on this route")
)

// ErrBusy means too many Argon2id verifications are running: a 503, not a
// denial.
var ErrBusy = errors.New("API key verification is busy")

// Defaults for zero Options fields.
const (
	DefaultCacheTTL   = time.Minute
	DefaultMaxHashing = 2
	// MaxFileBytes bounds the keys file.
	MaxFileBytes = 4 << 20
	// maxPresented bounds a presented key.
	maxPresented = 1024
	// memoSize bounds the Argon2id matches remembered per file version;
	// missSize bounds the misses, on their own, so that a flood of wrong
	// secrets evicts only other misses, never a valid client's match.
	memoSize = 4096
	missSize = 4096
)

// File is the keys file.
type File struct {
	Keys []Entry `yaml:"keys" json:"keys"`
}

// Entry is one key in the file.
type Entry struct {
	// ID names the key in logs, metrics and revocations.
	ID string `yaml:"id" json:"id"`
	// Hash is "sha256:<hex>" of a generated key or "argon2id:<PHC string>"
	// of a human-chosen secret.
	Hash string `yaml:"hash,omitempty" json:"hash,omitempty"`
	// Key is a plain key, hashed at load; only for migration.
	Key     string         `yaml:"key,omitempty" json:"key,omitempty"`
	Subject string         `yaml:"subject" json:"subject"`
	Scopes  []string       `yaml:"scopes,omitempty" json:"scopes,omitempty"`
	Claims  map[string]any `yaml:"claims,omitempty" json:"claims,omitempty"`
	// Expires, when set, ends the key.
	Expires *time.Time `yaml:"expires,omitempty" json:"expires,omitempty"`
	// Routes, when set, are the only routes the key is valid on.
	Routes []string `yaml:"routes,omitempty" json:"routes,omitempty"`
}

// reserved claims are set from the entry's fields; a file may not set them
// as claims.
var reserved = []string{"sub", "iss", "exp", "iat", "nbf", "jti", "scope", "scp", "client_id", "azp", "api_key_id", "active"}

var safeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// key is a loaded entry.
type key struct {
	id      string
	digest  [sha256.Size]byte // of a sha256 key
	argon   *argon2Params     // of an argon2id key
	routes  []string
	expires time.Time
	sub     string
	aud     []string
	raw     map[string]any
}

// index is one version of the file, swapped whole on reload.
type index struct {
	bySHA map[[sha256.Size]byte]*key
	byID  map[string]*key        // argon2id keys
	memo  *cache.Cache[*key]     // Argon2id matches
	miss  *cache.Cache[struct{}] // Argon2id misses
	ids   []string
}

// Options are a Store's dependencies and limits.
type Options struct {
	// Name is the configured issuer's name, Claims.IssuerName and Issuer.
	Name   string
	Logger *slog.Logger
	Now    func() time.Time
	// CacheTTL caps Claims.ExpiresAt: how long a grant made from a key may
	// be cached, so that removing the key from the file takes effect
	// within it (default 1m).
	CacheTTL time.Duration
	// MaxHashing bounds the Argon2id verifications running at once
	// (default 2); more wait, within their context.
	MaxHashing int
	// Revocations, when set, are the revoked keys: Lookup refuses a key
	// whose id is revoked under Name with ErrRevoked.
	Revocations *Revocations
}

// Store holds the keys of one file. It is safe for concurrent use.
type Store struct {
	path string
	opts Options
	log  *slog.Logger
	cur  atomic.Pointer[index]
	sem  *semaphore.Weighted

	mu      sync.Mutex // serializes Poll
	applied fileState
	pending fileState // a changed content seen once, applied when seen again
}

// fileState is what Poll compares.
type fileState struct {
	mtime time.Time
	size  int64
	sum   [sha256.Size]byte
}

// Open loads the keys file at path. An invalid file is an error naming the
// entry, never a key.
func Open(path string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.CacheTTL <= 0 {
		opts.CacheTTL = DefaultCacheTTL
	}
	if opts.MaxHashing <= 0 {
		opts.MaxHashing = DefaultMaxHashing
	}
	s := &Store{path: path, opts: opts, log: opts.Logger, sem: semaphore.NewWeighted(int64(opts.MaxHashing))}
	st, doc, err := s.read()
	if err != nil {
		return nil, err
	}
	idx, err := s.parse(doc)
	if err != nil {
		return nil, err
	}
	s.cur.Store(idx)
	s.applied = st
	return s, nil
}

// read stats and reads the file.
func (s *Store) read() (fileState, []byte, error) {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fileState{}, nil, fmt.Errorf("apikey: %w", err)
	}
	doc, err := bounded.ReadFile(s.path, MaxFileBytes)
	if err != nil {
		return fileState{}, nil, fmt.Errorf("apikey: %w", err)
	}
	return fileState{mtime: fi.ModTime(), size: fi.Size(), sum: sha256.Sum256(doc)}, doc, nil
}

// Poll looks at the file and reloads it when its content changed and has
// been the same on two polls in a row, so that a file being written is not
// loaded half-way. An invalid new file is an error and the previous keys
// stay. It reports whether it reloaded.
func (s *Store) Poll() (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fi, err := os.Stat(s.path)
	if err != nil {
		return false, fmt.Errorf("apikey: %w", err)
	}
	if s.pending == (fileState{}) && fi.ModTime().Equal(s.applied.mtime) && fi.Size() == s.applied.size {
		return false, nil
	}
	st, doc, err := s.read()
	if err != nil {
		return false, err
	}
	switch {
	case st.sum == s.applied.sum:
		s.applied, s.pending = st, fileState{}
		return false, nil
	case st.sum != s.pending.sum:
		s.pending = st
		return false, nil
	}
	s.pending = fileState{}
	idx, err := s.parse(doc)
	if err != nil {
		// Not applied: the next change is looked at again.
		s.applied.mtime, s.applied.size, s.applied.sum = st.mtime, st.size, st.sum
		return false, err
	}
	s.cur.Store(idx)
	s.applied = st
	s.log.Info("API keys reloaded", slog.String("issuer", s.opts.Name), slog.Int("keys", len(idx.ids)))
	return true, nil
}

// Run polls at every tick until ctx ends, logging failures.
func (s *Store) Run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if _, err := s.Poll(); err != nil {
				s.log.Warn("API keys file not reloaded; the previous keys stay", slog.String("issuer", s.opts.Name), slog.String("error", err.Error()))
			}
		}
	}
}

// IDs are the ids of the loaded keys, in file order.
func (s *Store) IDs() []string { return s.cur.Load().ids }

// parse decodes and checks a keys document (YAML, or JSON which is YAML).
func (s *Store) parse(doc []byte) (*index, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		// yaml errors quote at most a line number and a field name.
		return nil, fmt.Errorf("apikey: %s: %w", s.path, err)
	}
	memo, err := cache.New[*key](memoSize, s.opts.Now)
	if err != nil {
		return nil, err
	}
	miss, err := cache.New[struct{}](missSize, s.opts.Now)
	if err != nil {
		return nil, err
	}
	idx := &index{bySHA: map[[sha256.Size]byte]*key{}, byID: map[string]*key{}, memo: memo, miss: miss}
	seen := map[string]bool{}
	var errs []error
	for i, e := range f.Keys {
		k, err := compileEntry(e)
		if err == nil && seen[e.ID] {
			err = errors.New("duplicate id")
		}
		if err == nil && k.argon == nil {
			if _, dup := idx.bySHA[k.digest]; dup {
				err = errors.New("the same key as another entry")
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("keys[%d] (%s): %w", i, safeName(e.ID), err))
			continue
		}
		seen[e.ID] = true
		idx.ids = append(idx.ids, e.ID)
		if k.argon != nil {
			idx.byID[k.id] = k
		} else {
			idx.bySHA[k.digest] = k
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("apikey: %s: %w", s.path, errors.Join(errs...))
	}
	return idx, nil
}

func safeName(id string) string {
	if safeID.MatchString(id) {
		return id
	}
	return "invalid id"
}

func compileEntry(e Entry) (*key, error) {
	if !safeID.MatchString(e.ID) {
		return nil, errors.New("id must be 1-128 letters, digits, '.', '_' or '-'")
	}
	if e.Subject == "" {
		return nil, errors.New("subject is required")
	}
	k := &key{id: e.ID, routes: e.Routes, sub: e.Subject}
	switch {
	case (e.Hash == "") == (e.Key == ""):
		return nil, errors.New("exactly one of hash and key is required")
	case e.Key != "":
		if err := plainKeyError(e.Key); err != nil {
			return nil, err
		}
		k.digest = sha256.Sum256([]byte(e.Key))
	case strings.HasPrefix(e.Hash, schemeSHA256):
		d, err := hex.DecodeString(strings.TrimPrefix(e.Hash, schemeSHA256))
		if err != nil || len(d) != sha256.Size {
			return nil, errors.New("a sha256 hash must be 64 hex digits")
		}
		copy(k.digest[:], d)
	case strings.HasPrefix(e.Hash, schemeArgon2id):
		// The key is presented as "<id>.<secret>": an id starting with the
		// generated keys' prefix would be taken for a generated key (and
		// refused as malformed), one with a dot would be cut at the dot.
		if strings.HasPrefix(e.ID, Prefix) {
			return nil, fmt.Errorf("the id of an argon2id key must not start with %q, the prefix of generated keys", Prefix)
		}
		if strings.Contains(e.ID, ".") {
			return nil, errors.New("the id of an argon2id key must not contain '.': the key is presented as <id>.<secret>")
		}
		p, err := parseArgon2id(strings.TrimPrefix(e.Hash, schemeArgon2id))
		if err != nil {
			return nil, err
		}
		k.argon = p
	default:
		return nil, errors.New("hash must start with \"sha256:\" or \"argon2id:\"")
	}
	for _, r := range e.Routes {
		if r == "" {
			return nil, errors.New("empty route name")
		}
	}
	if e.Expires != nil {
		k.expires = *e.Expires
	}
	raw, err := rawClaims(e)
	if err != nil {
		return nil, err
	}
	k.raw = raw
	switch aud := raw["aud"].(type) {
	case nil:
	case string:
		k.aud = []string{aud}
	case []any:
		for _, a := range aud {
			s, ok := a.(string)
			if !ok {
				return nil, errors.New("claims.aud must be a string or a list of strings")
			}
			k.aud = append(k.aud, s)
		}
	default:
		return nil, errors.New("claims.aud must be a string or a list of strings")
	}
	return k, nil
}

// rawClaims are the claims a key's grant sees: the entry's claims, as JSON
// would decode them (numbers float64, maps map[string]any), with sub,
// scope, client_id, api_key_id and exp from the entry.
func rawClaims(e Entry) (map[string]any, error) {
	raw := map[string]any{}
	if len(e.Claims) > 0 {
		for _, r := range reserved {
			if _, ok := e.Claims[r]; ok {
				return nil, fmt.Errorf("claims.%s is set from the entry, not as a claim", r)
			}
		}
		b, err := json.Marshal(e.Claims)
		if err != nil {
			return nil, errors.New("claims must be a map with string keys")
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return nil, errors.New("claims must be a map with string keys")
		}
	}
	raw["sub"] = e.Subject
	raw["client_id"] = e.ID
	raw["api_key_id"] = e.ID
	if len(e.Scopes) > 0 {
		for _, sc := range e.Scopes {
			if sc == "" || strings.ContainsAny(sc, " \t\n") {
				return nil, fmt.Errorf("scope %q is empty or has spaces", sc)
			}
		}
		raw["scope"] = strings.Join(e.Scopes, " ")
	}
	if e.Expires != nil {
		raw["exp"] = float64(e.Expires.Unix())
	}
	return raw, nil
}

// Lookup returns the claims of the presented key on route. A denial is
// one of ErrMalformed, ErrUnknownKey, ErrWrongSecret, ErrRevoked, ErrExpired, ErrRoute (401); ErrBusy
// or a context error means the check could not be made (503).
//
// The returned Claims' Raw is shared and must not be modified. ExpiresAt
// is the key's expiry or the CacheTTL cap, whichever comes first.
func (s *Store) Lookup(ctx context.Context, presented, route string) (*jwtauth.Claims, error) {
	if len(presented) == 0 || len(presented) > maxPresented {
		return nil, ErrMalformed
	}
	idx := s.cur.Load()
	d := sha256.Sum256([]byte(presented))
	k, ok := idx.bySHA[d]
	if !ok {
		// Not a generated or plain key on file: a generated key unknown
		// here, or "<id>.<secret>" checked against its Argon2id hash.
		if strings.HasPrefix(presented, Prefix) {
			if !WellFormed(presented) {
				return nil, ErrMalformed
			}
			return nil, ErrUnknownKey
		}
		var err error
		if k, err = s.human(ctx, idx, presented, d); err != nil {
			return nil, err
		}
	}
	if s.opts.Revocations.Revoked(s.opts.Name, k.id) {
		return nil, ErrRevoked
	}
	now := s.opts.Now()
	if !k.expires.IsZero() && !now.Before(k.expires) {
		return nil, ErrExpired
	}
	if len(k.routes) > 0 && !contains(k.routes, route) {
		return nil, ErrRoute
	}
	until := now.Add(s.opts.CacheTTL)
	if !k.expires.IsZero() && k.expires.Before(until) {
		until = k.expires
	}
	return &jwtauth.Claims{
		IssuerName: s.opts.Name,
		Issuer:     s.opts.Name,
		Subject:    k.sub,
		ID:         k.id,
		Audience:   k.aud,
		ExpiresAt:  until,
		Raw:        k.raw,
	}, nil
}

// human checks "<id>.<secret>" against the id's Argon2id hash. A result is
// remembered under the digest of what was presented for this version of the
// file, so that a client's repeated requests cost one Argon2id run: a match
// in memo, a miss in miss, each bounded on its own.
func (s *Store) human(ctx context.Context, idx *index, presented string, d [sha256.Size]byte) (*key, error) {
	id, secret, ok := strings.Cut(presented, ".")
	if !ok {
		return nil, ErrUnknownKey
	}
	k := idx.byID[id]
	switch {
	case k == nil:
		return nil, ErrUnknownKey
	case secret == "":
		return nil, ErrWrongSecret
	}
	if m, ok := idx.memo.Get(d); ok {
		return m, nil
	}
	if _, ok := idx.miss.Get(d); ok {
		return nil, ErrWrongSecret
	}
	if err := s.sem.Acquire(ctx, 1); err != nil {
		return nil, ErrBusy
	}
	match := k.argon.verify(secret)
	s.sem.Release(1)
	until := s.opts.Now().Add(s.opts.CacheTTL)
	if !match {
		idx.miss.Add(d, struct{}{}, until)
		return nil, ErrWrongSecret
	}
	idx.memo.Add(d, k, until)
	return k, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
