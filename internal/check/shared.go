package check

import (
	"context"
	"time"

	"github.com/extauthz/extauthz/internal/exchange"
	"github.com/extauthz/extauthz/internal/shared"
)

// The shared tier (internal/shared, on Redis) sits behind the in-process
// stores: a local hit never touches it. It holds what must be the same on
// every replica: session bindings, pending elicitations and consents,
// exchanged tokens (sealed) and revocations of subjects and API keys.
// Verdicts of plain JWT validation stay local: they are cheap to recompute.

// sharedTokens adapts the shared tier to the exchanger's interface.
type sharedTokens struct{ s *shared.Store }

func (a sharedTokens) GetToken(ctx context.Context, key string) ([]byte, bool, error) {
	return a.s.GetToken(ctx, key)
}

func (a sharedTokens) DeleteToken(ctx context.Context, key string) error {
	return a.s.DeleteToken(ctx, key)
}

func (a sharedTokens) PutToken(ctx context.Context, key string, o exchange.Owner, token []byte, ttl time.Duration) error {
	return a.s.PutToken(ctx, key, shared.Owner{Subject: o.Subject, Session: o.Session, TokenSession: o.TokenSession}, token, ttl)
}

// HandleEvent applies an invalidation another replica published. It never
// publishes: each event is applied locally once.
func (pl *Pipeline) HandleEvent(ctx context.Context, ev shared.Event) {
	switch ev.Kind {
	case shared.EventSession:
		pl.invalidateSessionLocal(ev.ID)
	case shared.EventRevoke:
		pl.state.revokeLocal(ev.ID, ev.At)
		pl.invalidateSubjectLocal(ev.ID)
	case shared.EventRevokeAPIKey:
		if k, ok := shared.ParseAPIKey(ev.ID); ok {
			pl.revokeAPIKeyLocal(k.Issuer, k.ID, ev.At)
		}
	case shared.EventResync:
		// Connected (again): catch up with the revocations missed meanwhile.
		pl.state.resync(ctx)
	}
}

// LoadRevocations reads the revocations of subjects and API keys from the
// shared tier, retrying while Redis does not answer, until it has read
// them once or ctx ends; it reports whether they are read. Until then the
// pipeline admits no identified caller (503) and is not Ready: a replica
// started while Redis is down knows of no revocation another replica
// made. The bus reads them too when it connects (EventResync), but may
// never connect (pub/sub refused, say), so the service also runs this
// from the start. Without a shared tier there is nothing to read.
func (pl *Pipeline) LoadRevocations(ctx context.Context) bool {
	if !pl.state.loaded.Load() {
		pl.state.resync(ctx)
	}
	return pl.state.loaded.Load()
}

// Ready reports whether the pipeline can decide every request: the
// policy's key sets have loaded (Policy.Ready) and the revocations have
// been read (LoadRevocations).
func (pl *Pipeline) Ready() bool {
	return pl.state.loaded.Load() && pl.Policy().Ready()
}
