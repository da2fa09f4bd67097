package check

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/extauthz/extauthz/internal/apikey"
	"github.com/extauthz/extauthz/internal/shared"
)

// ErrSharedUnavailable wraps the error of a revocation (of an API key or a
// subject) that was applied on this replica but could not be stored in the
// shared tier or published: the other replicas do not know of it. Revoking
// again is safe.
var ErrSharedUnavailable = errors.New("revoked on this replica only: the shared tier is unavailable")

// APIKeyRevoked is what RevokeAPIKey did.
type APIKeyRevoked struct {
	Invalidated
	// Until is when the revocation ends: when the key expires, or
	// apikey.RevocationTTL from now.
	Until time.Time
	// Known reports whether this replica has a key with the id loaded
	// (an unknown id is revoked all the same: it may be a typo).
	Known bool
}

// RevokeAPIKey refuses the API key id of the api_keys issuer named issuer
// (its configured name) from now on, on cache hits too, and drops the cached
// verdicts made from it, here and (with a shared tier) on every replica,
// until the key expires or for apikey.RevocationTTL. The id stays refused
// even if a new key is put in the file under it: give a replacement a new
// id. An issuer that is not an API-key issuer of the policy in force, or an
// id no key can have, is an error and revokes nothing.
func (pl *Pipeline) RevokeAPIKey(ctx context.Context, issuer, id string) (APIKeyRevoked, error) {
	p := pl.Policy()
	store := p.verifier.keys[issuer]
	if store == nil {
		return APIKeyRevoked{}, fmt.Errorf("%q is not an issuer of kind api_keys", issuer)
	}
	if !apikey.ValidID(id) {
		return APIKeyRevoked{}, errors.New("an API key id is 1-128 letters, digits, '.', '_' or '-'")
	}
	var r APIKeyRevoked
	r.Until, r.Known = store.Until(id)
	r.Invalidated = pl.revokeAPIKeyLocal(issuer, id, r.Until)
	sh := pl.state.shared
	if sh == nil || !r.Until.After(pl.now()) {
		return r, nil
	}
	k := shared.APIKey{Issuer: issuer, ID: id}
	err := sh.RevokeAPIKey(ctx, k, r.Until)
	if err == nil {
		err = sh.Publish(ctx, shared.Event{Kind: shared.EventRevokeAPIKey, ID: k.String(), At: r.Until})
	}
	if err != nil {
		return r, fmt.Errorf("%w: %w", ErrSharedUnavailable, err)
	}
	return r, nil
}

// revokeAPIKeyLocal revokes the key until until on this replica and drops
// the cached verdicts made from it.
func (pl *Pipeline) revokeAPIKeyLocal(issuer, id string, until time.Time) Invalidated {
	pl.state.apiKeys.Revoke(apikey.Ref{Issuer: issuer, ID: id}, until)
	return Invalidated{Verdicts: pl.cache.RemoveFunc(func(g *Grant) bool {
		return g.APIKeyID == id && g.Issuer == issuer
	})}
}
