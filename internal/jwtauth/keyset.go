package jwtauth

import (
	"context"
	"fmt"
	"sync"
)

// KeySet is one issuer's published public keys, kept fresh by the same key
// source a Verifier uses (background refresh, rate-limited refetch for an
// unknown kid, last good set kept while loads fail): for a caller that
// parses its own tokens, such as signed lineage. It is safe for concurrent
// use; Close releases it.
type KeySet struct {
	src       *keySource
	pool      *Sources
	closeOnce sync.Once
}

// KeySet acquires the key source of spec, which names a JWK set URL, a JWK
// set file or discovery (not a secret). A file is read before KeySet
// returns and one that cannot be used is an error; a URL that does not
// answer yet is not (it is fetched again in the background).
func (p *Sources) KeySet(ctx context.Context, spec IssuerSpec) (*KeySet, error) {
	if len(spec.Secret) > 0 {
		return nil, fmt.Errorf("issuer %q: a key set has no secret", spec.Name)
	}
	if _, err := compile(spec); err != nil {
		return nil, err
	}
	if spec.JWKSFile != "" {
		if err := CheckKeySource(ctx, p.client, spec); err != nil {
			return nil, err
		}
	}
	return &KeySet{src: p.acquire(spec), pool: p}, nil
}

// Key returns the public key for a token with the kid header (hasKID false:
// none) signed with the JWS algorithm alg. A kid the current keys lack
// refetches the set first (rate-limited; ctx bounds the wait).
func (k *KeySet) Key(ctx context.Context, kid string, hasKID bool, alg string) (any, error) {
	a, ok := algorithmsByName[alg]
	if !ok || a.family == familyHMAC {
		return nil, ErrAlgorithm
	}
	return k.src.lookup(ctx, kid, hasKID, a)
}

// Ready reports whether the keys have loaded at least once.
func (k *KeySet) Ready() bool { return k.src.current() != nil }

// Close releases the key source; it stops refreshing when nothing else
// holds it. Close is idempotent.
func (k *KeySet) Close() {
	k.closeOnce.Do(func() { k.pool.release(k.src) })
}

// Reload loads the key set now, whatever the refetch rate limit, for a
// caller that knows the source changed (a replaced file). On failure the
// previous keys stay, and the failure is logged.
func (k *KeySet) Reload(ctx context.Context) error { return k.src.load(ctx) }
