// Package shared is the optional Redis tier that replicas of the service
// share: session bindings (the first binding wins across replicas, and
// each subject's bindings are bounded), pending elicitations, exchanged
// tokens (sealed with AES-256-GCM, so Redis never holds a usable bearer
// token in clear), revocations of subjects and of API keys (by id), and an invalidation bus on which every
// replica hears InvalidateSession, RevokeSubject, revocations of subjects
// and of API keys, and configuration changes.
//
// The tier sits behind the in-process caches: callers ask their local tier
// first and come here only on a local miss, so a local hit costs nothing
// here, and a local miss costs one round trip (every operation on the hot
// path is a single command, script or pipeline). Plain JWT verdicts never
// come here: they are cheap to recompute.
//
// Failure is explicit and bounded. Every operation waits at most
// Config.OpTimeout; when Redis is unreachable it returns an error wrapping
// ErrUnavailable and the caller decides: session binding checks fail closed
// unless Config.FailOpen, token exchange falls back to its own cache and the
// STS. The client reconnects by itself, Ready reports whether Redis answered
// the last health ping, and Options.Observe counts every outcome.
//
// Keys are single-key operations under Config.KeyPrefix; anything touching
// several keys (tag indexes, DropSession) is a pipeline of single-key
// commands, which a Cluster client splits by slot, so no hash tags are
// needed and none should be put in the prefix. Redis 6.2 or later is
// needed (ZADD GT, ZRANGE BYSCORE REV).
package shared

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults for Config.
const (
	DefaultKeyPrefix = "extauthz:"
	DefaultOpTimeout = 50 * time.Millisecond
)

// healthInterval is how often the background ping refreshes Ready.
const healthInterval = time.Second

// ErrUnavailable wraps every error that means Redis did not answer in time
// or answered with an error. Callers branch on it with errors.Is to apply
// their fallback (FailOpen for bindings, the STS for tokens).
var ErrUnavailable = errors.New("shared: redis unavailable")

// ErrNoEncryptionKey is returned by PutToken and GetToken when the Store was
// built without Config.EncryptionKey.
var ErrNoEncryptionKey = errors.New("shared: tokens need an encryption key")

// Config says where Redis is and how this tier behaves. Zero fields get the
// defaults.
type Config struct {
	// Addrs is one host:port for a standalone server, the Sentinel
	// addresses with MasterName, or seed nodes with Cluster.
	Addrs      []string
	MasterName string // Sentinel master; selects the Sentinel client
	Cluster    bool   // selects the Cluster client

	Username, Password string
	// SentinelUsername and SentinelPassword authenticate to the Sentinels
	// themselves, when they require it.
	SentinelUsername, SentinelPassword string
	DB                                 int // standalone and Sentinel only

	TLS                bool
	TLSServerName      string // default: the host of each address
	TLSCAFile          string // PEM roots; default: the system pool
	InsecureSkipVerify bool   // tests only

	// KeyPrefix starts every key and the bus channel (default "extauthz:").
	KeyPrefix string
	// OpTimeout bounds every operation: the hot path never waits longer
	// (default 50ms).
	OpTimeout time.Duration
	// EncryptionKey (32 bytes) seals exchanged tokens with AES-256-GCM; it
	// is required for PutToken and GetToken. DecryptionKeys are earlier
	// keys still accepted for reading while keys rotate.
	EncryptionKey  []byte
	DecryptionKeys [][]byte
	// FailOpen: when Redis is unavailable, a session binding check lets the
	// request through on the local binding. The default (false) denies.
	FailOpen bool
}

// LogValue describes c for slog without its secrets.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("addrs", c.Addrs),
		slog.String("master_name", c.MasterName),
		slog.Bool("cluster", c.Cluster),
		slog.Bool("password_set", c.Password != ""),
		slog.Int("db", c.DB),
		slog.Bool("tls", c.TLS),
		slog.String("key_prefix", c.KeyPrefix),
		slog.Duration("op_timeout", c.OpTimeout),
		slog.Bool("encryption_key_set", len(c.EncryptionKey) > 0),
		slog.Bool("fail_open", c.FailOpen),
	)
}

// String describes c without its secrets, so that printing it leaks nothing.
func (c Config) String() string { return c.LogValue().String() }

// Validate reports every problem with c at once. It does not read files or
// contact Redis.
func (c Config) Validate() error {
	var errs []error
	if len(c.Addrs) == 0 {
		errs = append(errs, errors.New("shared: at least one address is needed"))
	}
	for _, a := range c.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("shared: address %q: %w", a, err))
		}
	}
	if c.MasterName != "" && c.Cluster {
		errs = append(errs, errors.New("shared: master_name (Sentinel) and cluster exclude each other"))
	}
	if len(c.Addrs) > 1 && c.MasterName == "" && !c.Cluster {
		errs = append(errs, errors.New("shared: several addresses need cluster or master_name"))
	}
	if c.Cluster && c.DB != 0 {
		errs = append(errs, errors.New("shared: a cluster has only database 0"))
	}
	if !c.TLS && (c.TLSServerName != "" || c.TLSCAFile != "" || c.InsecureSkipVerify) {
		errs = append(errs, errors.New("shared: TLS settings given but tls is off"))
	}
	if c.OpTimeout < 0 {
		errs = append(errs, errors.New("shared: op_timeout must not be negative"))
	}
	if n := len(c.EncryptionKey); n != 0 && n != keySize {
		errs = append(errs, fmt.Errorf("shared: encryption key must be %d bytes, not %d", keySize, n))
	}
	for i, k := range c.DecryptionKeys {
		if len(k) != keySize {
			errs = append(errs, fmt.Errorf("shared: decryption key %d must be %d bytes, not %d", i, keySize, len(k)))
		}
	}
	if len(c.DecryptionKeys) > 0 && len(c.EncryptionKey) == 0 {
		errs = append(errs, errors.New("shared: decryption keys without an encryption key"))
	}
	return errors.Join(errs...)
}

// Options are the Store's dependencies. Zero values get defaults: a logger
// that discards, time.Now, no metrics, a random replica id.
type Options struct {
	Logger *slog.Logger
	Now    func() time.Time
	// Observe counts one operation's outcome. op is one of the Op*
	// constants, result one of the Result* constants: both bounded, fit for
	// metric labels. It is called on the hot path and must not block.
	Observe func(op, result string)
	// ReplicaID names this replica on the bus (e.g. the pod name), so that
	// it can ignore its own events.
	ReplicaID string
}

// Operation names passed to Options.Observe.
const (
	OpBind              = "bind"
	OpPutElicitation    = "put_elicitation"
	OpGetElicitation    = "get_elicitation"
	OpDeleteElicitation = "delete_elicitation"
	OpPutToken          = "put_token"
	OpGetToken          = "get_token"
	OpDeleteToken       = "delete_token"
	OpDropSession       = "drop_session"
	OpDropSubject       = "drop_subject"
	OpDropOwnSession    = "drop_own_session"
	OpRevoke            = "revoke"
	OpRevocations       = "revocations"
	OpRevokeAPIKey      = "revoke_api_key"
	OpAPIKeyRevocations = "api_key_revocations"
	OpPublish           = "publish"
	OpReceive           = "receive" // one message or failure on the bus
	OpPing              = "ping"    // the background health check
	OpFirstUse          = "first_use"
)

// Results passed to Options.Observe.
const (
	ResultOK       = "ok"
	ResultMiss     = "miss"     // nothing stored under the key
	ResultConflict = "conflict" // the session belongs to someone else; a one-time value was used before
	ResultInvalid  = "invalid"  // a stored value or bus message that does not decode
	ResultTimeout  = "timeout"  // OpTimeout (or the caller's deadline) passed
	ResultError    = "error"    // Redis unreachable or answering an error
	ResultCanceled = "canceled" // the caller gave up first
)

// Store is one replica's handle on the shared tier. It is safe for
// concurrent use.
type Store struct {
	rdb      redis.UniversalClient
	log      *slog.Logger
	now      func() time.Time
	observe  func(op, result string)
	id       string
	timeout  time.Duration
	failOpen bool
	sealer   *sealer // nil without an encryption key
	channel  string
	prefix   string
	pBind    string // key prefixes, built once
	// pBindSubject indexes a subject's bindings (never a prefix of pBind
	// plus a key, nor the other way round).
	pBindSubject string
	pElicit      string
	pToken       string
	pSession     string
	pSubject     string
	pOwn         string
	pUsed        string
	revokeKey    string
	// revokeKeysKey holds the revoked API keys.
	revokeKeysKey string

	ready atomic.Bool
	// base ends with Close; it bounds the health check and Subscribe.
	base      context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	bg        sync.WaitGroup
}

// New checks c and returns a Store. It does not wait for Redis: the client
// connects lazily and reconnects by itself, and a Redis that is down at
// start only shows in Ready. ctx bounds the background health check that
// keeps Ready current, so pass the service's lifetime context; Close stops
// it too.
func New(ctx context.Context, c Config, o Options) (*Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.KeyPrefix == "" {
		c.KeyPrefix = DefaultKeyPrefix
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	tlsConfig, err := tlsConfig(c)
	if err != nil {
		return nil, err
	}
	var seal *sealer
	if len(c.EncryptionKey) > 0 {
		if seal, err = newSealer(c.EncryptionKey, c.DecryptionKeys); err != nil {
			return nil, err
		}
	}
	s := &Store{
		log:           o.Logger,
		now:           o.Now,
		observe:       o.Observe,
		id:            o.ReplicaID,
		timeout:       c.OpTimeout,
		failOpen:      c.FailOpen,
		sealer:        seal,
		channel:       c.KeyPrefix + "events",
		prefix:        c.KeyPrefix,
		pBind:         c.KeyPrefix + "bind:",
		pBindSubject:  c.KeyPrefix + "bindings-of:",
		pElicit:       c.KeyPrefix + "elicit:",
		pToken:        c.KeyPrefix + "token:",
		pSession:      c.KeyPrefix + "session:",
		pSubject:      c.KeyPrefix + "subject:",
		pOwn:          c.KeyPrefix + "own:",
		pUsed:         c.KeyPrefix + "used:",
		revokeKey:     c.KeyPrefix + "revoked",
		revokeKeysKey: c.KeyPrefix + "revoked-api-keys",
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.observe == nil {
		s.observe = func(string, string) {}
	}
	if s.id == "" {
		s.id = randomID()
	}
	s.rdb = newClient(c, tlsConfig)
	s.base, s.cancel = context.WithCancel(context.Background())

	s.bg.Add(1)
	go s.health(ctx)
	return s, nil
}

// newClient picks the client for c's topology. The timeouts are OpTimeout
// so a command never outlives the caller's budget even without a context
// deadline; dials run in the background under their own timeout, so a slow
// TLS handshake still fills the pool for later calls.
func newClient(c Config, tc *tls.Config) redis.UniversalClient {
	o := &redis.UniversalOptions{
		Addrs:                 c.Addrs,
		MasterName:            c.MasterName,
		Username:              c.Username,
		Password:              c.Password,
		SentinelUsername:      c.SentinelUsername,
		SentinelPassword:      c.SentinelPassword,
		DB:                    c.DB,
		TLSConfig:             tc,
		ReadTimeout:           c.OpTimeout,
		WriteTimeout:          c.OpTimeout,
		PoolTimeout:           c.OpTimeout,
		DialTimeout:           2 * time.Second,
		DialerRetries:         2,
		DialerRetryTimeout:    50 * time.Millisecond,
		ContextTimeoutEnabled: true,
		// One retry covers a pooled connection that died with a restarted
		// server; the context deadline bounds it either way.
		MaxRetries:      1,
		MinRetryBackoff: time.Millisecond,
		MaxRetryBackoff: 5 * time.Millisecond,
		DisableIdentity: true,
	}
	switch {
	case c.MasterName != "":
		return redis.NewFailoverClient(o.Failover())
	case c.Cluster:
		return redis.NewClusterClient(o.Cluster())
	default:
		return redis.NewClient(o.Simple())
	}
}

func tlsConfig(c Config) (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         c.TLSServerName,
		InsecureSkipVerify: c.InsecureSkipVerify, //nolint:gosec // opt-in, for tests
	}
	if c.TLSCAFile != "" {
		pem, err := os.ReadFile(c.TLSCAFile)
		if err != nil {
			return nil, fmt.Errorf("shared: TLS CA file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("shared: TLS CA file %s holds no PEM certificate", c.TLSCAFile)
		}
	}
	return tc, nil
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
	return hex.EncodeToString(b[:])
}

// ID is this replica's id on the bus.
func (s *Store) ID() string { return s.id }

// Client is the store's Redis client, for other shared state that brings
// its own keys (rate limit counters); it honours context deadlines.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// KeyPrefix is the prefix of every key, OpTimeout the bound of every
// operation: users of Client follow them too.
func (s *Store) KeyPrefix() string { return s.prefix }

// OpTimeout is the bound of one operation.
func (s *Store) OpTimeout() time.Duration { return s.timeout }

// FailOpen reports the configured behaviour of session binding checks
// while Redis is unavailable: true lets requests through on the local
// binding, false (the default) denies them.
func (s *Store) FailOpen() bool { return s.failOpen }

// Ready reports whether Redis answered the last health ping (sent every
// second, bounded by OpTimeout). It is false until the first answer.
func (s *Store) Ready() bool { return s.ready.Load() }

// Close stops the health check, ends every Subscribe and closes the
// connections.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.cancel()
		s.bg.Wait()
		err = s.rdb.Close()
	})
	return err
}

func (s *Store) health(ctx context.Context) {
	defer s.bg.Done()
	t := time.NewTicker(healthInterval)
	defer t.Stop()
	for {
		ok := s.ping(ctx)
		if was := s.ready.Swap(ok); was != ok {
			if ok {
				s.log.Info("redis is reachable")
			} else {
				s.log.Warn("redis is unreachable")
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		case <-s.base.Done():
			return
		}
	}
}

func (s *Store) ping(ctx context.Context) bool {
	ctx, cancel := s.opContext(ctx)
	defer cancel()
	err := s.rdb.Ping(ctx).Err()
	s.observe(OpPing, resultOf(err))
	return err == nil
}

// opContext bounds one operation by OpTimeout.
func (s *Store) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

// fail counts a failed operation and wraps its error in ErrUnavailable.
func (s *Store) fail(op string, err error) error {
	s.observe(op, resultOf(err))
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, op, err)
}

// resultOf classifies an operation's error for metrics.
func resultOf(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return ResultTimeout
	case errors.Is(err, context.Canceled):
		return ResultCanceled
	default:
		return ResultError
	}
}

// millis is d in whole milliseconds, at least 1: Redis rejects PX 0.
func millis(d time.Duration) int64 {
	return max(d.Milliseconds(), 1)
}
