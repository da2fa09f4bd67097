// Package jwtauth verifies bearer JWTs against a set of trusted issuers.
//
// A Verifier is built once from IssuerSpecs. Each issuer has its own
// algorithm allow-list and exactly one key source: an HMAC secret, a remote
// JWK set, a JWK set file, or a JWK set found through OpenID Connect / OAuth
// metadata discovery. Key sets load and refresh in the background; a token
// naming a key the current set lacks triggers a rate-limited refetch, and the
// last good set keeps serving while its endpoint is down.
//
// Verify decodes a token once (golang-jwt/jwt), picks the issuer from the
// unverified "iss" inside the key lookup, checks the algorithm against that
// issuer's allow-list and key, verifies the signature, then checks exp
// (required), nbf, iat, iss, aud and typ. It returns verified Claims or one
// of the package's sentinel errors, whose texts are safe to show a client.
package jwtauth

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MaxTokenSize is the largest token Verify looks at; longer ones are
// ErrMalformed before any decoding.
const MaxTokenSize = 16 << 10

// Options are the Verifier's dependencies. Zero values get defaults: an
// HTTP client with a timeout, a logger that discards, time.Now.
type Options struct {
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
	// OnFetch, when set, is told about every key set load (err nil on
	// success), for metrics. It must be cheap and safe for concurrent use.
	OnFetch func(issuer string, err error)
	// OnKeysRemoved, when set, is told the kids a key set refresh no
	// longer contains, so that verdicts of tokens signed with them can be
	// dropped. It must be safe for concurrent use.
	OnKeysRemoved func(issuer string, kids []string)
	// MaxWaiting bounds, per issuer, the calls waiting for an on-demand key
	// set refetch (a token naming an unknown kid); the others are answered
	// from the keys at hand at once. 0 means DefaultMaxWaiting, negative
	// unbounded.
	MaxWaiting int
	// Sources, when set, supplies the key sources, shared with other
	// Verifiers built from it (reloads); the options above are then the
	// ones Sources was made with. nil: the Verifier has sources of its own.
	Sources *Sources
}

// Claims are a verified token's claims.
type Claims struct {
	// IssuerName is the Name of the IssuerSpec that verified the token.
	IssuerName string
	Issuer     string // iss
	Subject    string // sub, "" if absent
	ID         string // jti, "" if absent
	Audience   []string
	// KeyID is the token's kid header, "" if absent: a key set refresh
	// that drops it ends what was granted on the token.
	KeyID string
	// ExpiresAt is always set; NotBefore and IssuedAt are zero when absent.
	ExpiresAt, NotBefore, IssuedAt time.Time
	// Raw is every claim as decoded by encoding/json (numbers are float64).
	// It is owned by the caller.
	Raw map[string]any
}

// Verifier verifies tokens. It is safe for concurrent use.
type Verifier struct {
	parser   *jwt.Parser
	byIss    map[string][]*issuer // exact "iss" matches, in configuration order
	catchAll []*issuer            // issuers with no "iss", in configuration order
	sources  []*keySource
	pool     *Sources
	now      func() time.Time

	cancel    context.CancelFunc // of a pool of its own; nil with a shared one
	closeOnce sync.Once
}

// New validates specs and returns a Verifier. An invalid spec is an error
// naming the issuer. New does not wait for the network: remote key sets load
// in the background until ctx ends or Close is called; JWK set files are
// read once before New returns. Until an issuer's keys have loaded, its
// tokens get ErrKeysUnavailable (see Ready).
func New(ctx context.Context, specs []IssuerSpec, opts Options) (*Verifier, error) {
	issuers, err := compileAll(specs)
	if err != nil {
		return nil, err
	}
	now := opts.Now
	switch {
	case now == nil && opts.Sources != nil:
		now = opts.Sources.now
	case now == nil:
		now = time.Now
	}
	v := &Verifier{
		// Claims are checked by Verify itself, with each issuer's leeway and
		// sentinel errors; strict decoding refuses non-canonical base64.
		parser: jwt.NewParser(jwt.WithoutClaimsValidation(), jwt.WithStrictDecoding()),
		byIss:  make(map[string][]*issuer, len(issuers)),
		now:    now,
		pool:   opts.Sources,
	}
	if v.pool == nil {
		var lifetime context.Context
		lifetime, v.cancel = context.WithCancel(ctx)
		v.pool = NewSources(lifetime, opts)
	}
	for i, is := range issuers {
		if is.iss == "" {
			v.catchAll = append(v.catchAll, is)
		} else {
			v.byIss[is.iss] = append(v.byIss[is.iss], is)
		}
		if is.secret != nil {
			continue // HMAC: nothing to load
		}
		is.keys = v.pool.acquire(specs[i])
		v.sources = append(v.sources, is.keys)
	}
	return v, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Ready reports whether every issuer's keys have loaded at least once.
// A Verifier with only HMAC issuers is always ready.
func (v *Verifier) Ready() bool {
	for _, s := range v.sources {
		if s.current() == nil {
			return false
		}
	}
	return true
}

// Close releases the Verifier's key sources: those no other Verifier of
// the same Sources holds stop refreshing, and Close waits for them. Verify
// keeps working on the keys already loaded. Close is idempotent.
func (v *Verifier) Close() {
	v.closeOnce.Do(func() {
		for _, s := range v.sources {
			v.pool.release(s)
		}
		if v.cancel != nil {
			v.cancel()
		}
	})
}

// verification is the state of one Verify call, shared with the key
// function that jwt calls once the token is decoded.
type verification struct {
	v       *Verifier
	ctx     context.Context
	allowed []string
	issuer  *issuer
	kid     string
	denial  error // why the key function refused, if it did
}

// Verify verifies token for a route that accepts the issuers named in
// allowed (nil or empty: every configured issuer) and requires one of
// audiences in the token's aud (nil or empty: no audience check).
//
// The error is one of the package's sentinels. ErrKeysUnavailable means the
// issuer's keys never loaded (a dependency failure); every other error is a
// denial. ctx bounds the wait for a key set refetch.
func (v *Verifier) Verify(ctx context.Context, token string, allowed []string, audiences []string) (*Claims, error) {
	if len(token) == 0 || len(token) > MaxTokenSize {
		return nil, ErrMalformed
	}
	st := &verification{v: v, ctx: ctx, allowed: allowed}
	claims := jwt.MapClaims{}
	t, err := v.parser.ParseWithClaims(token, claims, st.keyFunc)
	if err != nil {
		return nil, st.classify(t, err)
	}
	c, err := v.checkClaims(st.issuer, claims, audiences)
	if err != nil {
		return nil, err
	}
	c.KeyID = st.kid
	return c, nil
}

// keyFunc runs after decoding and before the signature check: it picks the
// issuer from the unverified claims, checks the header against it and
// returns the verification key.
func (st *verification) keyFunc(t *jwt.Token) (any, error) {
	key, err := st.key(t)
	if err != nil {
		st.denial = err
	}
	return key, err
}

func (st *verification) key(t *jwt.Token) (any, error) {
	alg := algorithmsByName[t.Method.Alg()]
	if alg == nil || t.Method != alg.method {
		return nil, ErrAlgorithm
	}
	// No critical header extension is understood here, so RFC 7515 section
	// 4.1.11 requires refusing any token that lists one.
	if _, ok := t.Header["crit"]; ok {
		return nil, ErrMalformed
	}
	iss, hasIss, err := stringClaim(t.Claims.(jwt.MapClaims), "iss")
	if err != nil {
		return nil, err
	}
	is, err := st.v.pick(iss, hasIss, st.allowed)
	if err != nil {
		return nil, err
	}
	if is.algs&alg.bit == 0 {
		return nil, ErrAlgorithm
	}
	if is.typ != "" {
		typ, _ := t.Header["typ"].(string)
		if !typeMatches(typ, is.typ) {
			return nil, ErrType
		}
	}
	st.issuer = is
	if is.secret != nil {
		return is.secretKey, nil
	}
	rawKID, hasKID := t.Header["kid"]
	kid, ok := rawKID.(string)
	if hasKID && !ok {
		return nil, ErrMalformed
	}
	st.kid = kid
	return is.keys.lookup(st.ctx, kid, hasKID, alg)
}

// classify maps a parse failure to a sentinel.
func (st *verification) classify(t *jwt.Token, err error) error {
	switch {
	case st.denial != nil:
		return st.denial
	case errors.Is(err, jwt.ErrTokenMalformed):
		return ErrMalformed
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return ErrSignature
	case errors.Is(err, jwt.ErrTokenUnverifiable) && t != nil:
		// The header decoded but its alg is absent or not a jwt algorithm.
		if _, ok := t.Header["alg"].(string); ok {
			return ErrAlgorithm
		}
	}
	return ErrMalformed
}

// pick chooses the issuer for a token: the first configured issuer with
// exactly this iss that the route accepts, else the first accepted
// catch-all.
func (v *Verifier) pick(iss string, hasIss bool, allowed []string) (*issuer, error) {
	matched := false
	if hasIss {
		for _, is := range v.byIss[iss] {
			matched = true
			if accepts(allowed, is.name) {
				return is, nil
			}
		}
	}
	for _, is := range v.catchAll {
		matched = true
		if accepts(allowed, is.name) {
			return is, nil
		}
	}
	switch {
	case matched:
		return nil, ErrIssuer
	case !hasIss:
		return nil, ErrMissingClaim
	default:
		return nil, ErrUnknownIssuer
	}
}

func accepts(allowed []string, name string) bool {
	if len(allowed) == 0 {
		return true
	}
	for _, a := range allowed {
		if a == name {
			return true
		}
	}
	return false
}

// checkClaims checks the registered claims of a token whose signature is
// valid and builds the result.
func (v *Verifier) checkClaims(is *issuer, claims jwt.MapClaims, audiences []string) (*Claims, error) {
	now := v.now()
	exp, ok, err := numericDate(claims, "exp")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrMissingClaim
	}
	if !now.Before(exp.Add(is.leeway)) {
		return nil, ErrExpired
	}
	nbf, ok, err := numericDate(claims, "nbf")
	if err != nil {
		return nil, err
	}
	if ok && now.Before(nbf.Add(-is.leeway)) {
		return nil, ErrNotYetValid
	}
	iat, ok, err := numericDate(claims, "iat")
	if err != nil {
		return nil, err
	}
	if ok && now.Before(iat.Add(-is.leeway)) {
		return nil, ErrIssuedInFuture
	}
	iss, _, err := stringClaim(claims, "iss")
	if err != nil {
		return nil, err
	}
	if is.iss != "" && iss != is.iss {
		return nil, ErrIssuer // pick matched on iss, so this is defence in depth
	}
	aud, err := audienceClaim(claims)
	if err != nil {
		return nil, err
	}
	if len(audiences) > 0 && !anyOf(aud, audiences) {
		return nil, ErrAudience
	}
	sub, _, err := stringClaim(claims, "sub")
	if err != nil {
		return nil, err
	}
	jti, _, err := stringClaim(claims, "jti")
	if err != nil {
		return nil, err
	}
	return &Claims{
		IssuerName: is.name,
		Issuer:     iss,
		Subject:    sub,
		ID:         jti,
		Audience:   aud,
		ExpiresAt:  exp,
		NotBefore:  nbf,
		IssuedAt:   iat,
		Raw:        claims,
	}, nil
}

// maxNumericDate is 9999-12-31T23:59:59Z; larger dates are malformed rather
// than silently overflowing time.Unix.
const maxNumericDate = 253402300799

// numericDate reads an RFC 7519 NumericDate claim. A JSON null counts as
// absent; anything but a number in range is ErrMalformed.
func numericDate(claims jwt.MapClaims, name string) (time.Time, bool, error) {
	raw, ok := claims[name]
	if !ok || raw == nil {
		return time.Time{}, false, nil
	}
	f, ok := raw.(float64)
	if !ok || math.IsNaN(f) || f < 0 || f > maxNumericDate {
		return time.Time{}, false, ErrMalformed
	}
	sec, frac := math.Modf(f)
	return time.Unix(int64(sec), int64(frac*1e9)), true, nil
}

// stringClaim reads a string claim; a present non-string is ErrMalformed.
func stringClaim(claims jwt.MapClaims, name string) (string, bool, error) {
	raw, ok := claims[name]
	if !ok {
		return "", false, nil
	}
	s, ok := raw.(string)
	if !ok {
		return "", false, ErrMalformed
	}
	return s, true, nil
}

// audienceClaim reads aud, a string or an array of strings.
func audienceClaim(claims jwt.MapClaims) ([]string, error) {
	switch aud := claims["aud"].(type) {
	case nil:
		return nil, nil
	case string:
		return []string{aud}, nil
	case []any:
		out := make([]string, len(aud))
		for i, a := range aud {
			s, ok := a.(string)
			if !ok {
				return nil, ErrMalformed
			}
			out[i] = s
		}
		return out, nil
	default:
		return nil, ErrMalformed
	}
}

func anyOf(have, want []string) bool {
	for _, h := range have {
		for _, w := range want {
			if h == w {
				return true
			}
		}
	}
	return false
}
