package exchange

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/extauthz/extauthz/internal/cache"
	"github.com/extauthz/extauthz/internal/oauthclient"
)

// Token type identifiers (RFC 8693 section 3).
const (
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeIDToken     = "urn:ietf:params:oauth:token-type:id_token"
)

// GrantTypeTokenExchange is the grant_type of an RFC 8693 request.
const GrantTypeTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"

// Client authentication methods at the token endpoint (RFC 6749 section
// 2.3.1, RFC 7523 section 2.2, RFC 8414 names).
const (
	AuthClientSecretBasic = oauthclient.ClientSecretBasic
	AuthClientSecretPost  = oauthclient.ClientSecretPost
	AuthPrivateKeyJWT     = oauthclient.PrivateKeyJWT
	AuthNone              = oauthclient.None
)

// ClientAssertionType is the client_assertion_type of private_key_jwt
// (RFC 7523 section 2.2).
const ClientAssertionType = oauthclient.AssertionType

// Defaults for zero Config fields.
const (
	DefaultTimeout          = 5 * time.Second
	DefaultMaxWaiting       = 64
	DefaultMaxResponseBytes = 64 << 10
	DefaultSafetyMargin     = 30 * time.Second
	DefaultRefreshAhead     = time.Minute
	DefaultFallbackLifetime = time.Minute
	DefaultNegativeTTL      = 5 * time.Second
	DefaultBreakerFailures  = 5
	DefaultBreakerCooldown  = 10 * time.Second
	DefaultCacheSize        = 10_000
)

// actorCheckInterval is how often the actor token file is looked at.
const actorCheckInterval = time.Second

// ClientAuth is how this service authenticates to the STS (see
// oauthclient.Config; the assertion's default audience is the token
// endpoint).
type ClientAuth = oauthclient.Config

// Config is one STS as a route uses it. Zero fields get the defaults.
type Config struct {
	// TokenEndpoint is the STS's token endpoint URL. When empty it is
	// discovered from Issuer's metadata, first
	// /.well-known/oauth-authorization-server (RFC 8414), then
	// /.well-known/openid-configuration, on the first exchange.
	TokenEndpoint string
	Issuer        string
	Auth          ClientAuth
	// SubjectTokenType describes the inbound token (default access_token).
	SubjectTokenType string
	// RequestedTokenType is asked of the STS (default access_token).
	RequestedTokenType string
	// ActorTokenFile, when set, is sent as actor_token so the exchanged
	// token names this service in act (RFC 8693 section 4.1), e.g. a
	// Kubernetes projected service-account token. The file is looked at
	// at most once a second and re-read when it changes.
	ActorTokenFile string
	ActorTokenType string // default jwt
	// Timeout bounds one STS call (default 5s). The call runs apart from
	// the requests waiting for it, so a late answer is still cached.
	Timeout time.Duration
	// Budget bounds how long one request waits for an STS call, and a
	// call slower than it counts as a failure for the breaker even when it
	// succeeds: a slow STS is down as far as the proxy's deadline is
	// concerned (default: Timeout; the service passes its check deadline).
	Budget time.Duration
	// MaxWaiting bounds the requests waiting for STS calls at once; the
	// others are answered Unavailable at once (default 64; negative: no
	// bound). It keeps a slow STS from holding every check slot.
	MaxWaiting int
	// MaxResponseBytes bounds the STS's answer (default 64 KiB).
	MaxResponseBytes int64
	// SafetyMargin: an exchanged token is used until it expires minus this
	// (capped at half its lifetime), never closer to its expiry (default 30s).
	SafetyMargin time.Duration
	// RefreshAhead: a request that finds a cached token this close to the
	// end of its use starts a background exchange, so no request waits on
	// the STS under steady traffic (default 1m, capped at half the
	// remaining use).
	RefreshAhead time.Duration
	// FallbackLifetime is assumed when the STS gives neither expires_in nor
	// a readable exp (default 1m).
	FallbackLifetime time.Duration
	// NegativeTTL: a refusal (Unauthorized, Forbidden) is remembered this
	// long so a client repeating a doomed request does not reach the STS
	// each time (default 5s; negative disables). InteractionRequired is
	// never remembered: the user retries right after authorizing.
	NegativeTTL time.Duration
	// BreakerFailures consecutive failures (unreachable, timeout, 5xx,
	// 429, bad response) open the breaker: for BreakerCooldown calls fail
	// at once as Unavailable; then one call probes the STS (defaults 5, 10s).
	BreakerFailures int
	BreakerCooldown time.Duration
	// CacheSize bounds the exchanged tokens kept (default 10000).
	CacheSize int
	// CachePerSubject bounds those of one user (Owner.Subject): a user's
	// new one beyond it replaces the user's own oldest (default
	// DefaultCachePerSubject; never more than a quarter of CacheSize).
	CachePerSubject int
}

// Options are the Exchanger's dependencies. Zero values get defaults: an
// HTTP client, a logger that discards, time.Now.
type Options struct {
	// HTTPClient calls the STS. It is copied and redirects are not followed:
	// a redirected token request would carry the client credentials and the
	// subject token elsewhere.
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
	// OnCall, when set, is told about every STS call: its duration and
	// result ("ok" or the failure's Kind), for metrics.
	OnCall func(result string, took time.Duration)
	// Shared, when set, is a tier behind the local cache that other
	// replicas fill too: a local miss looks there before calling the STS,
	// and every token obtained is put there. It must never block long
	// (failures count as misses) and must keep values encrypted at rest.
	Shared SharedTokens
}

// SharedTokens stores exchanged tokens across replicas under a hex digest.
type SharedTokens interface {
	GetToken(ctx context.Context, key string) ([]byte, bool, error)
	PutToken(ctx context.Context, key string, o Owner, token []byte, ttl time.Duration) error
	// DeleteToken forgets the token under key (one its owner's newer ones
	// replaced).
	DeleteToken(ctx context.Context, key string) error
}

// Target is what the exchanged token is for: a route's default or, for an
// MCP tools/call, a tool's override, chosen by the caller. Pass the same
// values in the same order for the same target: they are part of the cache
// key as given.
type Target struct {
	// Audience values are sent as audience parameters (logical names).
	Audience []string
	// Resource values are sent as resource parameters (RFC 8707: absolute
	// URIs without fragment).
	Resource []string
	// Scope is space-separated, "" for none.
	Scope string
}

// Override returns t with the fields o sets replacing t's: a tool's
// override on top of its route's default. Compute it once, when
// configuration is loaded.
func (t Target) Override(o Target) Target {
	if len(o.Audience) > 0 {
		t.Audience = o.Audience
	}
	if len(o.Resource) > 0 {
		t.Resource = o.Resource
	}
	if o.Scope != "" {
		t.Scope = o.Scope
	}
	return t
}

// Validate checks t the way the STS would, for use when configuration is
// loaded: resources are absolute URIs without fragment, nothing is empty.
func (t Target) Validate() error {
	var errs []error
	for _, a := range t.Audience {
		if a == "" {
			errs = append(errs, errors.New("exchange: empty audience"))
		}
	}
	for _, r := range t.Resource {
		u, err := url.Parse(r)
		if err != nil || !u.IsAbs() || u.Fragment != "" {
			errs = append(errs, fmt.Errorf("exchange: resource %q is not an absolute URI without fragment", r))
		}
	}
	return errors.Join(errs...)
}

// Owner is whom an exchanged token belongs to, for clean-up: the user (the
// subject token's subject), the MCP session, and the session the subject
// token names (its session_id or sid claim), "" when there is none. The
// MCP session is part of the cache key, so ending a session drops exactly
// its tokens and a token never crosses sessions; the token's session is
// the subject token's own, so it needs no place in the key.
type Owner struct {
	Subject, Session, TokenSession string
}

// Token is an exchanged token.
type Token struct {
	Value string
	// Authorization is "Bearer " + Value, built once for the upstream
	// Authorization header; Value is its tail (newToken), so that a cached
	// token holds its bytes once.
	Authorization   string
	IssuedTokenType string
	// Scope is the scope granted, as the STS said, else as requested.
	Scope     string
	ExpiresAt time.Time
}

// newToken is the Token for value: its Authorization built once, Value a
// substring of it, and the issued token type one of the constants it was
// checked against, so that a cached token shares it.
func newToken(value, issuedType, scope string, exp time.Time) Token {
	auth := "Bearer " + value
	switch issuedType {
	case TokenTypeAccessToken:
		issuedType = TokenTypeAccessToken
	case TokenTypeJWT:
		issuedType = TokenTypeJWT
	}
	return Token{Value: auth[len("Bearer "):], Authorization: auth, IssuedTokenType: issuedType, Scope: scope, ExpiresAt: exp}
}

// LogValue describes t for slog without the token.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("issued_token_type", t.IssuedTokenType),
		slog.String("scope", t.Scope),
		slog.Time("expires_at", t.ExpiresAt),
	)
}

// String describes t without the token, so that printing it leaks nothing.
func (t Token) String() string { return t.LogValue().String() }

// compiled is a Config checked and with defaults applied.
type compiled struct {
	Config
	endpoint *url.URL // nil when discovered
	issuer   string
	// sts names the STS and what it is asked for (endpoint, issuer,
	// client, token types) in cache keys, as their digest: the shared tier is one for
	// every configured STS, and a token one of them issued must never
	// stand for one another would have refused, issued for another client
	// or of another type.
	sts string
}

func compile(c Config) (compiled, error) {
	var errs []error
	cc := compiled{Config: c}
	switch {
	case c.TokenEndpoint != "":
		u, err := httpURL(c.TokenEndpoint)
		if err != nil {
			errs = append(errs, fmt.Errorf("exchange: token endpoint: %w", err))
		}
		cc.endpoint = u
	case c.Issuer != "":
		if _, err := httpURL(c.Issuer); err != nil {
			errs = append(errs, fmt.Errorf("exchange: issuer: %w", err))
		}
	default:
		errs = append(errs, errors.New("exchange: a token endpoint or an issuer to discover it from is required"))
	}
	cc.issuer = c.Issuer

	auth, err := cc.Auth.Normalize()
	if err != nil {
		errs = append(errs, fmt.Errorf("exchange: %w", err))
	}
	cc.Auth = auth

	setDefault(&cc.SubjectTokenType, TokenTypeAccessToken)
	setDefault(&cc.RequestedTokenType, TokenTypeAccessToken)
	setDefault(&cc.ActorTokenType, TokenTypeJWT)
	if cc.RequestedTokenType != TokenTypeAccessToken && cc.RequestedTokenType != TokenTypeJWT {
		// The token goes upstream as a bearer token: only these two are that.
		errs = append(errs, fmt.Errorf("exchange: requested token type %q is not usable as a bearer token (access_token, jwt)", cc.RequestedTokenType))
	}
	sts := cache.NewKey(cc.TokenEndpoint, cc.issuer, cc.Auth.ClientID, cc.SubjectTokenType, cc.RequestedTokenType, cc.ActorTokenType)
	cc.sts = string(sts[:])
	positive(&cc.Timeout, DefaultTimeout)
	positive(&cc.Budget, cc.Timeout)
	if cc.MaxWaiting == 0 {
		cc.MaxWaiting = DefaultMaxWaiting
	}
	positive(&cc.MaxResponseBytes, DefaultMaxResponseBytes)
	positive(&cc.SafetyMargin, DefaultSafetyMargin)
	positive(&cc.RefreshAhead, DefaultRefreshAhead)
	positive(&cc.FallbackLifetime, DefaultFallbackLifetime)
	if cc.NegativeTTL == 0 {
		cc.NegativeTTL = DefaultNegativeTTL
	}
	positive(&cc.BreakerFailures, DefaultBreakerFailures)
	positive(&cc.BreakerCooldown, DefaultBreakerCooldown)
	positive(&cc.CacheSize, DefaultCacheSize)
	return cc, errors.Join(errs...)
}

func httpURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q is not an http(s) URL without fragment", s)
	}
	return u, nil
}

func setDefault(s *string, v string) {
	if *s == "" {
		*s = v
	}
}

func positive[T int | int64 | time.Duration](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}
