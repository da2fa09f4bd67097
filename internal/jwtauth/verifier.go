// Package jwtauth verifies bearer JWTs against a set of trusted issuers.
//
// A Verifier is built once from IssuerSpecs. Each issuer has its own
// algorithm allow-list and exactly one key source: an HMAC secret, a remote
// JWK set, a JWK set file, or a JWK set found through OpenID Connect / OAuth
// metadata discovery. Key sets load and refresh in the background; a token
// naming a key the current set lacks triggers a rate-limited refetch, and the
// last good set keeps serving while its endpoint is down.
//
// Verify reads the compact JWS itself (jws.go): it decodes the header into
// the members it needs and the payload once, refusing any JSON member named
// twice, picks the issuer from the unverified "iss", checks the algorithm
// against that issuer's allow-list and key, verifies the signature, then
// checks exp (required), nbf, iat, iss, aud and typ. It returns verified
// Claims, whose other members are decoded only when read (Claims.Claim),
// or one of the package's sentinel errors, whose texts are safe to show a
// client.
package jwtauth

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"
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
	// OnKeysRemoved, when set, is told the keys a key set refresh no
	// longer contains, by the id their tokens record (Claims.KeyID), so
	// that verdicts of tokens signed with them can be dropped. It must be
	// safe for concurrent use.
	OnKeysRemoved func(issuer string, keyIDs []string)
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

// Verifier verifies tokens. It is safe for concurrent use.
type Verifier struct {
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
		byIss: make(map[string][]*issuer, len(issuers)),
		now:   now,
		pool:  opts.Sources,
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

// Verify verifies token for a route that accepts the issuers named in
// allowed (nil or empty: every configured issuer) and requires one of
// audiences in the token's aud (nil or empty: no audience check).
//
// The error is one of the package's sentinels. ErrKeysUnavailable means the
// issuer's keys never loaded (a dependency failure); every other error is a
// denial. ctx bounds the wait for a key set refetch.
func (v *Verifier) Verify(ctx context.Context, token string, allowed []string, audiences []string) (*Claims, error) {
	if len(token) == 0 {
		return nil, ErrMalformed
	}
	sc := scratches.Get().(*scratch)
	sc.out = sc.out[:0]
	defer scratches.Put(sc)

	h, payloadSeg, sigSeg, err := sc.open(token)
	if err != nil {
		return nil, err
	}
	c := new(Claims)
	pc, err := sc.payload(c, payloadSeg)
	if err != nil {
		return nil, err
	}
	alg, err := algorithmOf(h.alg)
	if err != nil {
		return nil, err
	}
	if alg == nil {
		return nil, ErrAlgorithm // "none" among them
	}
	sig, ok := sc.decode(sigSeg)
	if !ok {
		return nil, ErrMalformed
	}
	is, keys, err := v.key(ctx, &h, &pc, alg, allowed)
	if err != nil {
		return nil, err
	}
	input := token[:len(token)-len(sigSeg)-1]
	keyID, ok := sc.verify(is, alg, keys, input, sig)
	if !ok {
		return nil, ErrSignature
	}
	if err := v.checkClaims(c, is, &pc, audiences); err != nil {
		return nil, err
	}
	c.KeyID = keyID
	return c, nil
}

// algorithmOf looks up the raw alg header, nil when it names no
// algorithm supported here.
func algorithmOf(raw []byte) (*algorithm, error) {
	if raw == nil || raw[0] != '"' {
		return nil, ErrMalformed
	}
	if body, plain := plainBody(raw); plain {
		return algorithmsByName[string(body)], nil // a lookup: no copy
	}
	name, _, err := stringClaim(raw)
	if err != nil {
		return nil, ErrMalformed
	}
	return algorithmsByName[name], nil
}

// key picks the issuer from the unverified claims, checks the header
// against it and returns the candidate verification keys (none for an
// HMAC issuer).
func (v *Verifier) key(ctx context.Context, h *joseHeader, pc *payloadClaims, alg *algorithm, allowed []string) (*issuer, []verificationKey, error) {
	// No critical header extension is understood here, so RFC 7515 section
	// 4.1.11 requires refusing any token that lists one.
	if h.crit {
		return nil, nil, ErrMalformed
	}
	var exact []*issuer
	switch {
	case pc.iss == nil:
	case pc.iss[0] != '"':
		return nil, nil, ErrMalformed
	default:
		if body, plain := plainBody(pc.iss); plain {
			exact = v.byIss[string(body)] // a lookup: no copy
			break
		}
		iss, _, err := stringClaim(pc.iss)
		if err != nil {
			return nil, nil, err
		}
		exact = v.byIss[iss]
	}
	is, err := v.pick(exact, pc.iss != nil, allowed)
	if err != nil {
		return nil, nil, err
	}
	if is.algs&alg.bit == 0 {
		return nil, nil, ErrAlgorithm
	}
	if is.typ != "" {
		typ, _, _ := stringClaim(h.typ) // a non-string typ is no typ
		if !typeMatches(typ, is.typ) {
			return nil, nil, ErrType
		}
	}
	if is.hmacs != nil {
		return is, nil, nil
	}
	kid, hasKID, err := kidOf(h.kid)
	if err != nil {
		return nil, nil, err
	}
	keys, err := is.keys.lookupAll(ctx, kid, hasKID, alg)
	if err != nil {
		return nil, nil, err
	}
	return is, keys, nil
}

// kidOf is the raw kid header decoded, in the header's own bytes when it
// holds no escape; a present kid that is not a string is ErrMalformed.
func kidOf(raw []byte) ([]byte, bool, error) {
	if raw == nil {
		return nil, false, nil
	}
	if raw[0] != '"' {
		return nil, false, ErrMalformed
	}
	if body, plain := plainBody(raw); plain {
		return body, true, nil
	}
	kid, _, err := stringClaim(raw)
	if err != nil {
		return nil, false, ErrMalformed
	}
	return []byte(kid), true, nil
}

// verify checks sig over input: with the issuer's secret, or with each
// candidate key of alg until one verifies. It returns the id of the key
// that verified ("" for a secret): the key set's own string, which the
// grant keeps, so no copy per token; a token naming no kid, or a kid that
// later names other key material, is still tied to its key.
func (s *scratch) verify(is *issuer, alg *algorithm, keys []verificationKey, input string, sig []byte) (string, bool) {
	if alg.family == familyHMAC {
		return "", is.hmacs != nil && s.verifyHMAC(is.hmacs, alg.hash, input, sig)
	}
	var digest []byte
	if alg.family != familyEdDSA {
		digest = s.digest(alg.hash, input)
	}
	for i := range keys {
		if k := &keys[i]; k.algs&alg.bit != 0 && s.verifyWith(alg, k, input, digest, sig) {
			return k.id, true
		}
	}
	return "", false
}

// pick chooses the issuer for a token: the first configured issuer with
// exactly its iss (exact) that the route accepts, else the first accepted
// catch-all.
func (v *Verifier) pick(exact []*issuer, hasIss bool, allowed []string) (*issuer, error) {
	matched := false
	if hasIss {
		for _, is := range exact {
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
// valid and fills them into c.
func (v *Verifier) checkClaims(c *Claims, is *issuer, pc *payloadClaims, audiences []string) error {
	now := v.now()
	exp, ok, err := numericDate(pc.exp)
	if err != nil {
		return err
	}
	if !ok {
		return ErrMissingClaim
	}
	if !now.Before(exp.Add(is.leeway)) {
		return ErrExpired
	}
	nbf, ok, err := numericDate(pc.nbf)
	if err != nil {
		return err
	}
	if ok && now.Before(nbf.Add(-is.leeway)) {
		return ErrNotYetValid
	}
	iat, ok, err := numericDate(pc.iat)
	if err != nil {
		return err
	}
	if ok && now.Before(iat.Add(-is.leeway)) {
		return ErrIssuedInFuture
	}
	var iss string
	if is.iss != "" {
		if !rawStringIs(pc.iss, is.iss) {
			return ErrIssuer // pick matched on iss, so this is defence in depth
		}
		iss = is.iss // the same bytes: no copy
	} else if iss, _, err = payloadString(pc.iss); err != nil {
		return err
	}
	aud, err := audienceClaim(pc.aud, audiences, &c.aud)
	if err != nil {
		return err
	}
	if len(audiences) > 0 && !anyOf(aud, audiences) {
		return ErrAudience
	}
	sub, _, err := payloadString(pc.sub)
	if err != nil {
		return err
	}
	jti, _, err := payloadString(pc.jti)
	if err != nil {
		return err
	}
	c.IssuerName, c.Issuer, c.Subject, c.ID, c.Audience = is.name, iss, sub, jti, aud
	c.ExpiresAt, c.NotBefore, c.IssuedAt = exp, nbf, iat
	return nil
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
